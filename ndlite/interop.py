"""DLPack both ways: other libraries read ndlite tensors (`Tensor.__dlpack__`,
`Tensor.__dlpack_device__`, bound here when ndlite is imported) and ndlite reads theirs
(`ndlite.from_dlpack`), sharing memory wherever both sides can reach it.

- NumPy-backend tensors are CPU memory: `np.from_dlpack(t)`, `torch.from_dlpack(t)` and
  `ndlite.from_dlpack(numpy_array or cpu_torch_tensor)` share it, no copy.
- CuPy-backend tensors are CUDA memory: `cupy.from_dlpack(t)`, `torch.from_dlpack(t)` and
  `ndlite.from_dlpack(cupy_array or cuda_torch_tensor)` share it (on the CuPy backend of the
  same device), with the stream handshake done by CuPy.
- OpenCL tensors live where no DLPack consumer reads: they export a host copy when the
  consumer asks for one (`np.from_dlpack(t, copy=True)`,
  `torch.from_dlpack(t, device="cpu", copy=True)`) and raise BufferError otherwise.
- A tensor that requires grad is refused as PyTorch refuses one (BufferError: use
  `t.detach()`), since the consumer would write past autograd.

Writes through a shared buffer are not seen by autograd's version counter: don't change, from
the other library, a tensor that a pending backward saved.

>>> import numpy as np, ndlite
>>> t = ndlite.arange(4.0)
>>> a = np.from_dlpack(t)          # the same memory
>>> a[0] = 7.0
>>> t.tolist()
[7.0, 1.0, 2.0, 3.0]
>>> ndlite.from_dlpack(np.ones(2, np.float32)).tolist()
[1.0, 1.0]
"""

from __future__ import annotations

import numpy as np

from . import bounds
from .device.registry import get_backend
from .errors import DTypeError
from .tensor import Tensor

#: DLPack device types (dlpack.h's DLDeviceType) that ndlite meets
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_OPENCL, KDL_CUDA_MANAGED = 1, 2, 3, 4, 13
DEVICE_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA host", 4: "OpenCL", 7: "Vulkan", 8: "Metal",
                10: "ROCm", 13: "CUDA managed", 14: "oneAPI"}


def _device_name(device: tuple) -> str:
    return f"{DEVICE_NAMES.get(device[0], f'type {device[0]}')} device {device[1]}"


def _shares_memory(backend) -> bool:
    """Whether the backend's buffers speak DLPack themselves (NumPy and CuPy arrays do)."""
    return backend.kind in ("numpy", "cupy")


def dlpack_device(tensor) -> tuple[int, int]:
    """`Tensor.__dlpack_device__`: (DLPack device type, device index)."""
    buffer = tensor.buffer
    if _shares_memory(tensor.backend) or hasattr(buffer, "__dlpack_device__"):
        return tuple(buffer.__dlpack_device__())
    if tensor.backend.kind == "opencl":
        _, _, index = tensor.backend.name.partition(":")
        return (KDL_OPENCL, int(index) if index.isdigit() else 0)
    raise BufferError(f"__dlpack_device__: backend {tensor.backend.name} has no DLPack device")


def dlpack(tensor, *, stream=None, max_version=None, dl_device=None, copy=None):
    """`Tensor.__dlpack__`: a DLPack capsule of the tensor's memory (see the module's rules)."""
    bounds.forget(tensor)  # the other library may write it
    if tensor.requires_grad:
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
    buffer = tensor.buffer
    if _shares_memory(tensor.backend) or hasattr(buffer, "__dlpack__"):
        return _export(buffer, stream=stream, max_version=max_version, dl_device=dl_device,
                       copy=copy)
    if copy is not True:
        raise BufferError(
            f"__dlpack__: a {tensor.backend.name} tensor cannot be shared without a copy (no "
            "DLPack consumer reads its device memory); ask for a host copy with copy=True "
            "(np.from_dlpack(t, copy=True), torch.from_dlpack(t, device='cpu', copy=True)) "
            "or use t.numpy()")
    if dl_device is not None and tuple(dl_device)[0] != KDL_CPU:
        raise BufferError(f"__dlpack__: a {tensor.backend.name} tensor exports to the CPU only "
                          f"(a host copy), not to {_device_name(tuple(dl_device))}")
    host = tensor.backend.to_numpy(buffer)  # a fresh host array that the capsule keeps alive
    return _export(host, max_version=max_version)


def _export(array, **kwargs):
    """array.__dlpack__ with the keywords the consumer gave, for NumPy/CuPy versions that
    know them and those that know only `stream`."""
    given = {k: v for k, v in kwargs.items() if v is not None}
    try:
        return array.__dlpack__(**given)
    except TypeError:  # NumPy < 2.1, CuPy < 13: no max_version/dl_device/copy
        if given.get("dl_device") not in (None, tuple(array.__dlpack_device__())):
            raise BufferError("__dlpack__: this NumPy/CuPy cannot export to another device; "
                              "update it or move the tensor with .to() first") from None
        if given.get("copy"):
            array = array.copy()
        return array.__dlpack__(**({"stream": given["stream"]} if "stream" in given else {}))
    except BufferError:
        # a read-only NumPy view (an expanded tensor) cannot be exported to a consumer that
        # knows only DLPack 0.x; a copy is allowed unless the consumer said copy=False
        if isinstance(array, np.ndarray) and not array.flags.writeable and \
                given.get("copy") is not False:
            return _export(array.copy(), **{k: v for k, v in given.items() if k != "copy"})
        raise


def from_dlpack(x, *, backend=None, copy: bool | None = None):
    """A tensor over the memory of `x`, any object with `__dlpack__` (a NumPy or CuPy array,
    a PyTorch or JAX tensor): CPU memory lands on the NumPy backend, CUDA memory on the CuPy
    backend of its device, with no copy. `backend=` puts it elsewhere (a copy); `copy=True`
    always copies, `copy=False` raises BufferError where sharing is impossible.

    >>> import numpy as np, ndlite
    >>> a = np.arange(3, dtype=np.int64)
    >>> t = ndlite.from_dlpack(a)
    >>> a[1] = 10
    >>> t.tolist(), t.dtype, t.backend.name
    ([0, 10, 2], dtype('int64'), 'numpy')
    """
    if isinstance(x, Tensor):  # no protocol needed, and an OpenCL tensor works too
        return _from_tensor(x.detach(), backend, copy)
    if not hasattr(x, "__dlpack__") or not hasattr(x, "__dlpack_device__"):
        raise TypeError(f"from_dlpack: expected an array with __dlpack__ and "
                        f"__dlpack_device__ (NumPy, CuPy, PyTorch, JAX), got {type(x).__name__}")
    device = tuple(x.__dlpack_device__())
    if device[0] in (KDL_CPU, KDL_CUDA_HOST):
        native = get_backend("numpy")
        array = np.from_dlpack(x)
    elif device[0] in (KDL_CUDA, KDL_CUDA_MANAGED):
        native = get_backend(f"cupy:{device[1]}")  # raises BackendUnavailableError, saying why
        with native.xp.cuda.Device(device[1]):
            array = native.xp.from_dlpack(x)
    else:
        raise BufferError(f"from_dlpack: ndlite reads DLPack memory of the CPU (NumPy backend) "
                          f"and of CUDA devices (CuPy backend), not of {_device_name(device)}; "
                          "copy it to the host first")
    if array.dtype not in native.dtypes:
        raise DTypeError(f"from_dlpack: ndlite has no {array.dtype} (shape {array.shape}); it "
                         f"supports {', '.join(sorted(str(d) for d in native.dtypes))}: convert "
                         "first (torch: x.float(), NumPy: a.astype(np.float32))")
    target = native if backend is None else get_backend(backend)
    if target is native or target.name == native.name:
        if copy:
            array = native.copy(array)
        return Tensor._make(array, native)
    if copy is False:
        raise BufferError(f"from_dlpack: memory on {_device_name(device)} cannot be shared with "
                          f"backend {target.name}; pass copy=None or copy=True to copy it")
    return Tensor._make(array, native).to(target)


def _from_tensor(t, backend, copy):
    target = t.backend if backend is None else get_backend(backend)
    if target.name == t.backend.name:
        return Tensor._make(t.backend.copy(t.buffer), t.backend) if copy else t
    if copy is False:
        raise BufferError(f"from_dlpack: a {t.backend.name} tensor cannot be shared with backend "
                          f"{target.name}; pass copy=None or copy=True to copy it")
    return t.to(target)


def bind() -> None:
    """Make Tensor a DLPack producer (run once, when ndlite is imported)."""
    Tensor.__dlpack__ = dlpack
    Tensor.__dlpack_device__ = dlpack_device


bind()
