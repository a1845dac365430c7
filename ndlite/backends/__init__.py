"""PyTorch's `torch.backends` switches that scripts set: `ndlite.backends.cuda.matmul.allow_tf32`
and `ndlite.backends.cudnn.allow_tf32` (both off by default; honoured by the CuPy backend's
float32 matmul and its cuDNN convolutions, the only places with TF32), plus
`cudnn.benchmark` / `cudnn.deterministic`, accepted and kept (ndlite is deterministic).

Not to be confused with the backend plugins (the packages ndlite_numpy, ndlite_cupy,
ndlite_opencl in the repository's backends/ folder, found through the `ndlite.backends`
entry-point group).

>>> import ndlite
>>> ndlite.backends.cuda.matmul.allow_tf32
False
"""

from __future__ import annotations

from ..device import flags


class _TF32Switch:
    """An attribute that reads and writes one of ndlite.device.flags.TF32."""

    def __init__(self, which: str):
        self.which = which

    def __get__(self, obj, owner=None) -> bool:
        return flags.TF32[self.which]

    def __set__(self, obj, value) -> None:
        flags.set_tf32(self.which, value)


class _Matmul:
    allow_tf32 = _TF32Switch("matmul")
    allow_fp16_reduced_precision_reduction = False
    allow_bf16_reduced_precision_reduction = False


class _Cuda:
    matmul = _Matmul()

    @staticmethod
    def is_built() -> bool:
        from .. import cuda

        return cuda.is_available()


class _Cudnn:
    allow_tf32 = _TF32Switch("conv")
    enabled = True
    benchmark = False
    deterministic = True

    @staticmethod
    def is_available() -> bool:
        return False  # ndlite's convolutions are its own kernels


cuda = _Cuda()
cudnn = _Cudnn()

__all__ = ["cuda", "cudnn"]
