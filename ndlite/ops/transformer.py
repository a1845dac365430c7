"""The functional pieces transformers are built from, composed from the ops below them:
embedding (a row gather whose gradient is a deterministic scatter-add), layer_norm over the
trailing dims, and scaled_dot_product_attention (PyTorch's reference math: softmax(q k^T /
sqrt(d) + mask) v, with a causal mask, a bool or additive mask, and dropout)."""

from __future__ import annotations

import math

import numpy as np

from ..creation import tensor as make_tensor
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .activation import dropout, softmax
from .elementwise import where
from .gather import index_select
from .linalg import matmul
from .movement import reshape
from .reduce import mean
from .registry import TRANSCENDENTAL, Spec, declare
from .samples import TAKE, UNARY
from .selection import masked_fill


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm=None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Tensor:
    """Rows of `weight` (num_embeddings, dim) at the integer indices `input`: shape
    input.shape + (dim,). Indices are checked; rows at padding_idx get no gradient.

    >>> import ndlite
    >>> w = ndlite.arange(6.0).reshape(3, 2)
    >>> ndlite.nn.functional.embedding(ndlite.tensor([[2, 0]]), w).tolist()
    [[[4.0, 5.0], [0.0, 1.0]]]
    """
    if not isinstance(input, Tensor) or input.dtype.kind not in "iu":
        raise DTypeError(f"embedding: indices must be an integer tensor, got "
                         f"{getattr(input, 'dtype', type(input).__name__)}")
    if weight.ndim != 2:
        raise ShapeError(f"embedding: weight must be 2-D, got shape {weight.shape}")
    if max_norm is not None or sparse:
        raise ValueError("embedding: max_norm and sparse are not supported")
    flat = reshape(input, (-1,))
    host = flat.numpy()
    n = weight.shape[0]
    if host.size and (host.min() < 0 or host.max() >= n):
        raise IndexError(f"embedding: index out of range: values from {host.min()} to "
                         f"{host.max()} for {n} embeddings (indices of shape {input.shape})")
    rows = index_select(weight, 0, flat)
    if padding_idx is not None:
        rows = where(reshape(flat == padding_idx % n, (-1, 1)), 0.0, rows)
    return reshape(rows, input.shape + (weight.shape[1],))


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) over the trailing `normalized_shape` dims (biased
    variance), then * weight + bias."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else \
        tuple(normalized_shape)
    if input.shape[input.ndim - len(shape):] != shape:
        raise ShapeError(f"layer_norm: normalized_shape {shape} does not match the trailing "
                         f"dims of input {input.shape}")
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    centered = input - mean(input, dims, keepdim=True)
    out = centered / (mean(centered * centered, dims, keepdim=True) + eps).sqrt()
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask=None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, enable_gqa: bool = False):
    """softmax(query key^T * scale + mask) value over (..., L, E) query and (..., S, E) key,
    (..., S, Ev) value; `attn_mask` is bool (True attends) or added; is_causal masks
    the upper triangle."""
    length, source = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = matmul(query, key.mT) * scale
    if is_causal:
        if attn_mask is not None:
            raise ValueError("scaled_dot_product_attention: give attn_mask or is_causal")
        keep = np.tril(np.ones((length, source), dtype=bool))
        scores = masked_fill(scores, make_tensor(~keep, backend=query._backend),
                             float("-inf"))
    elif attn_mask is not None:
        if attn_mask.dtype.kind == "b":
            scores = masked_fill(scores, ~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    weights = softmax(scores, dim=-1)
    if dropout_p > 0:
        weights = dropout(weights, dropout_p)
    return matmul(weights, value)


def _embedding_case(x, dim, index):
    """The TAKE sampler's (x, dim, index) as a table with x.shape[dim] rows."""
    w = x.transpose(0, dim) if x.ndim >= 2 else x
    return embedding(index, reshape(w, (w.shape[0], -1)))


declare("embedding", Spec(TAKE, call=_embedding_case), embedding)
declare("layer_norm", Spec(UNARY, call=lambda x: layer_norm(
    x, x.shape[-1:]) if x.ndim and x.shape[-1] > 1 else x * 1), layer_norm)
declare("scaled_dot_product_attention", Spec(UNARY, tol=TRANSCENDENTAL, call=lambda x: (
    scaled_dot_product_attention(_qkv(x), _qkv(x) * 0.5, _qkv(x), is_causal=True))),
    scaled_dot_product_attention)


def _qkv(x: Tensor) -> Tensor:
    return reshape(x, (1, -1, 1)) if x.ndim < 2 else x
