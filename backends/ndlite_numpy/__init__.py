"""ndlite's NumPy backend: ndlite on the CPU, and the reference every other backend is checked
against. `backend.py` holds the class (the contract's primitives over NumPy, through the shared
xp base), `nn.py` the convolution and pooling fast paths, `threads.py` and `scratch.py` the
threads and reused buffers they run on. Select it with NDLITE_BACKEND=numpy (the default).
"""

from .backend import NumpyBackend

__all__ = ["NumpyBackend"]
