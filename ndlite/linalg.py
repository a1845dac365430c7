"""PyTorch's `torch.linalg` names that training code uses: vector_norm, norm, matmul.

>>> import ndlite
>>> ndlite.linalg.vector_norm(ndlite.tensor([3.0, 4.0])).item()
5.0
"""

from .ops.linalg import matmul
from .ops.selection import linalg_norm as norm
from .ops.selection import vector_norm

__all__ = ["matmul", "norm", "vector_norm"]
