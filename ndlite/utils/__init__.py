"""PyTorch's `torch.utils` names: `ndlite.utils.data` is `ndlite.data` itself (the same module
object), so `from ndlite.utils.data import DataLoader, Dataset` works as in PyTorch."""

import sys

from .. import data

sys.modules[__name__ + ".data"] = data

__all__ = ["data"]
