"""Building OpenCL kernels: sources from kernels/*.cl specialized by #defines, built lazily
once per (context, source, defines) and kept, with their kernel objects, for reuse.

A few generic sources (elementwise, reduce, matmul, gemm, index) cover every primitive; the
#defines pick the op, the dtypes, the collapsed ndim and the index width, so only the variants
a program uses are ever compiled. No program is built with -cl-fast-relaxed-math; where the
device supports it, float32 division and sqrt are correctly rounded, as NumPy's are.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyopencl as cl

from ndlite.device import KernelBuildError
from ndlite.dtypes import HALF

SOURCES = Path(__file__).resolve().parent / "kernels"

#: the OpenCL C spelling of each dtype (bool is stored as one byte, 0 or 1, like NumPy's)
CTYPE = {
    np.dtype("float32"): "float", np.dtype("float64"): "double",
    np.dtype("int32"): "int", np.dtype("int64"): "long", np.dtype("bool"): "uchar",
    np.dtype("uint16"): "ushort",  # a half's bits, where a kernel only moves them
}


_FLOAT32 = np.dtype("float32")
#: a half buffer's element type in a kernel (no cl_khr_fp16 needed: `half` only as a pointer,
#: read and written by vload_half/vstore_half_rte) and its LOAD/STORE macros of common.cl;
#: its arithmetic is float
STORAGE = {np.dtype("float16"): ("half", "F16")}
if len(HALF) > 1:
    STORAGE[HALF[-1]] = ("ushort", "BF16")  # bfloat16: the high 16 bits of a float32


def ctype(dtype: np.dtype) -> str:
    """The C type of `dtype` (a KeyError for the halves: a kernel takes them by `slot`)."""
    return CTYPE[dtype]


def actype(dtype: np.dtype) -> str:
    """The C type a kernel computes `dtype` in (float for the halves)."""
    return "float" if dtype in STORAGE else CTYPE[dtype]


def arith(dtype: np.dtype) -> np.dtype:
    """The dtype a kernel computes `dtype` in: float32 for the halves, else itself."""
    return _FLOAT32 if dtype in STORAGE else dtype


def slot(name: str, dtype: np.dtype) -> tuple:
    """#defines of a kernel's buffer slot `name` holding `dtype`: `name` its element type
    (the pointer's), `name`_A its arithmetic type, LD_`name`(p, o) and ST_`name`(p, o, v)."""
    store, suffix = STORAGE.get(dtype, (None, "PLAIN"))
    return ((name, store or CTYPE[dtype]), (f"{name}_A", actype(dtype)),
            (f"LD_{name}", f"LOAD_{suffix}"), (f"ST_{name}", f"STORE_{suffix}"))


class KernelCache:
    """Programs and kernel objects of one context, keyed by (source, kernel, defines)."""

    def __init__(self, context, device):
        self.context = context
        self.device = device
        self.options = []
        if device.single_fp_config & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT:
            self.options.append("-cl-fp32-correctly-rounded-divide-sqrt")
        self._texts: dict[str, str] = {}
        self._programs: dict[tuple, object] = {}
        self._kernels: dict[tuple, object] = {}
        self.builds = 0  # programs compiled so far (tests check that the cache holds)

    def _text(self, name: str) -> str:
        text = self._texts.get(name)
        if text is None:
            text = self._texts[name] = (SOURCES / name).read_text()
        return text

    def source(self, file: str, defines: tuple) -> str:
        lines = [f"#define {k} {v}" for k, v in defines]
        return "\n".join(lines) + "\n" + self._text("common.cl") + "\n" + self._text(file)

    def get(self, file: str, name: str, defines: tuple):
        """The kernel `name` of `file` built with `defines` (a tuple of (macro, value) pairs)."""
        key = (file, name, defines)
        kernel = self._kernels.get(key)
        if kernel is None:
            program = self.program(file, defines)
            kernel = self._kernels[key] = getattr(program, name)
        return kernel

    def program(self, file: str, defines: tuple):
        key = (file, defines)
        program = self._programs.get(key)
        if program is None:
            program = self._programs[key] = self.build(self.source(file, defines),
                                                       f"{file} with {dict(defines)}")
        return program

    def build(self, source: str, what: str):
        """Compile `source`; a failure raises KernelBuildError carrying the compiler's log."""
        program = cl.Program(self.context, source)
        try:
            program.build(options=self.options, devices=[self.device])
        except cl.Error as exc:
            try:
                log = program.get_build_info(self.device, cl.program_build_info.LOG)
            except cl.Error:
                log = ""
            raise KernelBuildError(
                f"opencl: kernel {what} failed to build on {self.device.name.strip()}: "
                f"{type(exc).__name__}", log=log.strip() or str(exc)) from None
        self.builds += 1
        return program
