"""ndlite's OpenCL backend: the device contract in OpenCL C kernels (kernels/*.cl) driven by
PyOpenCL, on any OpenCL device: PoCL on a CPU (`pip install 'ndlite[pocl]'`), NVIDIA, AMD and
Intel GPUs. Select it with NDLITE_BACKEND=opencl (or opencl:N, opencl:cpu, opencl:gpu).
"""

from .backend import OpenCLBackend

__all__ = ["OpenCLBackend"]
