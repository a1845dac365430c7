"""Finding OpenCL devices: the numbering `opencl:N` uses, selection by index or type, and
the descriptions `ndlite info` prints.

Devices are numbered over all platforms, GPUs first (then CPUs and accelerators), each group in
platform order, so `opencl:0` is the first GPU where there is one.
"""

from __future__ import annotations

import os

from ndlite.device import BackendUnavailableError

NO_PLATFORM_FIX = (
    "pip install 'ndlite[pocl]' for a CPU OpenCL device (PoCL), or register your vendor's ICD: "
    "NVIDIA's driver ships libnvidia-opencl.so.1 but some images do not register it; "
    "`mkdir -p /tmp/icd && echo libnvidia-opencl.so.1 > /tmp/icd/nvidia.icd && "
    "export OCL_ICD_VENDORS=/tmp/icd` does"
)


def all_devices() -> list:
    """Every OpenCL device of every platform, GPUs first; raises if there is no platform."""
    import pyopencl as cl

    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:  # PLATFORM_NOT_FOUND_KHR: no ICD registered at all
        raise BackendUnavailableError("opencl", f"no OpenCL platform found ({exc})",
                                      NO_PLATFORM_FIX) from None
    devices = []
    for platform in platforms:
        try:
            devices.extend(platform.get_devices())
        except cl.Error:  # a platform whose driver has no device here
            continue
    if not devices:
        names = ", ".join(p.name for p in platforms) or "none"
        raise BackendUnavailableError("opencl", f"no OpenCL device found (platforms: {names})",
                                      NO_PLATFORM_FIX)
    working = [d for d in devices if builds(d)]
    if not working:
        reasons = "; ".join(f"{d.name.strip()}: {BROKEN[_key(d)]}" for d in devices)
        raise BackendUnavailableError("opencl", f"no OpenCL device can build a kernel ({reasons})",
                                      CPU_TOO_NEW_FIX)
    return sorted(working, key=lambda d: 0 if d.type & cl.device_type.GPU else 1)


CPU_TOO_NEW_FIX = (
    "PoCL cannot compile for a CPU its LLVM does not know (error: unknown target CPU "
    "'generic'); install a PoCL built with a newer LLVM or with CPU selection, e.g. Debian's "
    "`apt-get install pocl-opencl-icd` (`make test` does this where it can)")

#: devices that failed the probe build, with the first line of the build log
BROKEN: dict = {}
_PROBED: dict = {}


def _key(device) -> tuple:
    return (device.platform.name, device.platform.version, device.name)


def builds(device) -> bool:
    """Whether `device` compiles a one-line kernel. PoCL's CPU driver fails every build on a
    CPU newer than its LLVM (it asks LLVM for the target 'generic'); such a device is left out
    of the numbering, with the reason in BROKEN. Checked once per device per process (PoCL
    caches the binary, so later processes pay little)."""
    import pyopencl as cl

    key = _key(device)
    if key not in _PROBED:
        ok = True
        if "Portable Computing Language" in device.platform.name:
            try:
                context = cl.Context([device])
                cl.Program(context, "__kernel void probe(__global int *x) { x[0] = 1; }").build()
            except cl.Error as exc:
                ok = False
                log = str(exc).strip().splitlines()
                BROKEN[key] = next((line for line in log if "error" in line.lower()),
                                   log[0] if log else "build failed")
        _PROBED[key] = ok
    return _PROBED[key]


def select(spec: str | None) -> tuple[int, object]:
    """(index, device) for a device spec: None, "N", "cpu" or "gpu"."""
    import pyopencl as cl

    devices = all_devices()
    if spec is None or spec == "":
        return 0, devices[0]
    spec = spec.strip().lower()
    if spec in ("cpu", "gpu"):
        want = cl.device_type.CPU if spec == "cpu" else cl.device_type.GPU
        for i, d in enumerate(devices):
            if d.type & want:
                return i, d
        raise BackendUnavailableError(
            f"opencl:{spec}", f"no OpenCL {spec.upper()} device (found: {listing(devices)})",
            NO_PLATFORM_FIX if spec == "cpu" else
            "install your GPU vendor's OpenCL driver, or register its ICD via OCL_ICD_VENDORS")
    if spec.isdigit():
        i = int(spec)
        if i < len(devices):
            return i, devices[i]
        raise BackendUnavailableError(
            f"opencl:{spec}", f"device {i} does not exist; there are {len(devices)}: "
                              f"{listing(devices)}", "pick one of those indices")
    raise BackendUnavailableError(f"opencl:{spec}", f"unknown device {spec!r}",
                                  "use opencl, opencl:N, opencl:cpu or opencl:gpu")


def has_fp64(device) -> bool:
    return "cl_khr_fp64" in device.extensions.split() or device.double_fp_config != 0


def kind_of(device) -> str:
    import pyopencl as cl

    return "GPU" if device.type & cl.device_type.GPU else (
        "CPU" if device.type & cl.device_type.CPU else "accelerator")


def describe(device) -> str:
    """One line: name, platform, memory, fp64, versions."""
    return (f"{device.name.strip()} ({kind_of(device)}, {device.platform.name.strip()}, "
            f"{device.global_mem_size / 2**30:.1f} GiB, {device.max_compute_units} compute units, "
            f"fp64 {'yes' if has_fp64(device) else 'no'}, {device.version.strip()}, "
            f"driver {device.driver_version.strip()})")


def listing(devices) -> str:
    return "; ".join(f"{i}: {d.name.strip()}" for i, d in enumerate(devices))


def platforms_info() -> list[str]:
    import pyopencl as cl

    return [f"{p.name.strip()} ({p.vendor.strip()}, {p.version.strip()})"
            for p in cl.get_platforms()]


def cache_dir() -> str:
    """Where ndlite keeps per-device tuning results (NDLITE_CACHE_DIR, else XDG's cache)."""
    base = os.environ.get("NDLITE_CACHE_DIR")
    if base:
        return base
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "ndlite")
