"""Neural-network building blocks (PyTorch's names): `ndlite.nn.functional` for now."""

from . import functional

__all__ = ["functional"]
