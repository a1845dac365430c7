"""Functional neural-network ops, PyTorch's `torch.nn.functional` names."""

from ..ops.elementwise import relu, sigmoid, tanh
from ..ops.linalg import linear

__all__ = ["linear", "relu", "sigmoid", "tanh"]
