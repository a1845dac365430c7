"""The layers transformers use: Embedding and LayerNorm (PyTorch's names, defaults and
initializations), over the functional ops of ndlite/ops/transformer.py."""

from __future__ import annotations

from ..creation import empty, ones, zeros
from ..graph import no_grad
from ..ops.transformer import embedding, layer_norm
from .init import normal_
from .module import Module, Parameter


class Embedding(Module):
    """A table of num_embeddings vectors of embedding_dim, looked up by integer indices;
    initialized N(0, 1) (the padding row zero).

    >>> import ndlite
    >>> ndlite.nn.Embedding(10, 3)(ndlite.tensor([[1, 2]])).shape
    (1, 2, 3)
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm=None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight=None, _freeze: bool = False, dtype=None,
                 backend=None, device=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_idx
        if _weight is None:
            _weight = empty(num_embeddings, embedding_dim, dtype=dtype,
                            backend=backend if backend is not None else device)
            normal_(_weight)
            if padding_idx is not None:
                with no_grad():
                    _weight[padding_idx] = 0.0
        self.weight = Parameter(_weight, requires_grad=not _freeze)

    def forward(self, input):
        return embedding(input, self.weight, self.padding_idx)

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, padding_idx=None, **kwargs):
        rows, dim = embeddings.shape
        return cls(rows, dim, padding_idx, _weight=embeddings.detach().clone(), _freeze=freeze)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"


class LayerNorm(Module):
    """Normalize over the trailing normalized_shape dims, then scale and shift (weight ones,
    bias zeros; elementwise_affine=False or bias=False drop them)."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, dtype=None, backend=None, device=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else \
            tuple(normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        where = backend if backend is not None else device
        self.weight = Parameter(ones(shape, dtype=dtype, backend=where)) \
            if elementwise_affine else None
        self.bias = Parameter(zeros(shape, dtype=dtype, backend=where)) \
            if elementwise_affine and bias else None

    def forward(self, input):
        return layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"
