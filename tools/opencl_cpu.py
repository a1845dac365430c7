"""Make sure this machine has an OpenCL CPU device that can build kernels (for `make test`).

The PoCL that pip installs (`ndlite[pocl]`) is built on LLVM 14, which does not know CPUs newer
than itself (AMD Zen 4/5, recent Intel): every kernel build then fails with "unknown target CPU
'generic'". Debian's PoCL package selects its code target from the CPU's features instead, so
where pip's PoCL fails and apt-get can be used (root, Debian or Ubuntu), this installs
`pocl-opencl-icd`; otherwise it says what to do and the OpenCL tests skip, saying why.
Exit status 0 either way: a machine without a working OpenCL CPU device still runs every other
test.
"""

import os
import shutil
import subprocess
import sys

PROBE = """
import sys
sys.path.insert(0, "backends")
from ndlite_opencl import devices
try:
    found = devices.all_devices()
except Exception as exc:  # noqa: BLE001 - any failure means: no usable device
    print(exc)
    sys.exit(1)
print("; ".join(d.name.strip() for d in found))
"""


def probe() -> tuple[bool, str]:
    run = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True)
    return run.returncode == 0, (run.stdout + run.stderr).strip()


def main() -> int:
    ok, said = probe()
    if ok:
        print(f"opencl: usable devices: {said}")
        return 0
    print(f"opencl: no usable device yet ({said})")
    if shutil.which("apt-get") and os.geteuid() == 0:
        print("opencl: installing Debian's PoCL (pocl-opencl-icd) ...")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=False)
        subprocess.run(["apt-get", "install", "-y", "-qq", "pocl-opencl-icd"], env=env,
                       check=False, stdout=subprocess.DEVNULL)
        ok, said = probe()
        print(f"opencl: {'usable devices: ' if ok else 'still none: '}{said}")
    else:
        print("opencl: install a PoCL that knows this CPU (Debian/Ubuntu: "
              "`sudo apt-get install pocl-opencl-icd`); the OpenCL tests will skip")
    return 0


if __name__ == "__main__":
    sys.exit(main())
