"""The CuPy backend: ndlite on NVIDIA GPUs through CuPy (CUDA). Select it with
`NDLITE_BACKEND=cupy` (or `cupy:N` for device N) or `ndlite.set_backend("cupy")`.

CuPy itself is imported when a backend starts, not here, so a machine without CuPy or a GPU
gets a BackendUnavailableError naming the reason and the fix, never an ImportError.
"""

from .backend import CupyBackend

__all__ = ["CupyBackend"]
