"""The functional pieces transformers are built from, composed from the ops below them:
embedding (a row gather whose gradient is a deterministic scatter-add), layer_norm over the
trailing dims, and scaled_dot_product_attention (PyTorch's reference math: softmax(q k^T /
sqrt(d) + mask) v, with a causal mask, a bool or additive mask, and dropout)."""

from __future__ import annotations

import math

from .. import bounds
from ..amp_state import switch as amp
from ..creation import tensor as make_tensor
from ..device.transformer_fallbacks import causal_mask
from ..dtypes import HALF, is_floating
from ..errors import DTypeError, ShapeError
from ..graph import mode
from ..tensor import Tensor
from .activation import dropout, softmax
from .autocast import autocast_inputs, autocast_op
from .dispatch import apply, unary
from .elementwise import where
from .gather import select_rows
from .linalg import matmul
from .movement import reshape
from .reduce import mean
from .reduce import sum as tensor_sum
from .registry import TRANSCENDENTAL, Op, Spec, declare, register
from .samples import TAKE, UNARY
from .selection import masked_fill


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm=None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Tensor:
    """Rows of `weight` (num_embeddings, dim) at the integer indices `input`: shape
    input.shape + (dim,). Indices are checked; the row at padding_idx is returned as it is
    (nn.Embedding starts it at zeros) and gets no gradient, as PyTorch's.

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
    n = weight.shape[0]

    def check(host):
        if host.size and (host.min() < 0 or host.max() >= n):
            raise IndexError(f"embedding: index out of range: values from {host.min()} to "
                             f"{host.max()} for {n} embeddings (indices of shape {input.shape})")

    # a backend recording a replayable graph (CUDA graphs) runs the check before each replay;
    # indices known in range on the host are not read from the device (bounds.py)
    if not input._backend.defer_host_check(input._data, check) and not bounds.within(
            input, 0, n - 1):
        check(input._backend.to_numpy(input._data))
    rows = select_rows(weight, flat)
    if padding_idx is not None:
        rows = where(reshape(flat == padding_idx % n, (-1, 1)), rows.detach(), rows)
    return reshape(rows, input.shape + (weight.shape[1],))


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) over the trailing `normalized_shape` dims (biased
    variance), then * weight + bias. A float input with weight and bias of normalized_shape
    (or None) runs the backend's fused layer_norm (protocol.py); anything else is composed."""
    if amp.on:  # float32 in an autocast region, before the fused path's dtype check
        input, weight, bias = autocast_inputs(LayerNorm, (input, weight, bias))
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else \
        tuple(normalized_shape)
    if input.shape[input.ndim - len(shape):] != shape:
        raise ShapeError(f"layer_norm: normalized_shape {shape} does not match the trailing "
                         f"dims of input {input.shape}")
    if _fusable(input, shape, weight, bias):
        return _fused_layer_norm(input, shape, weight, bias, float(eps))
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    centered = input - mean(input, dims, keepdim=True)
    out = centered / (mean(centered * centered, dims, keepdim=True) + eps).sqrt()
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def _fusable(x: Tensor, shape: tuple, *affine) -> bool:
    return is_floating(x.dtype) and all(
        t is None or (isinstance(t, Tensor) and t.shape == shape and t.dtype == x.dtype
                      and t._backend is x._backend) for t in affine)


def _rows(x: Tensor, k: int) -> tuple[int, int]:
    """(R, D): x seen as rows of its trailing k dims."""
    d = math.prod(x.shape[x.ndim - k:])
    return math.prod(x.shape[:x.ndim - k]), d


def _fused_layer_norm(x, shape, weight, bias, eps):
    b = x._backend
    rows, d = _rows(x, len(shape))
    y, mu, rstd = b.layer_norm(b.reshape(x._data, (rows, d)), _flat(weight, d),
                               _flat(bias, d), eps)
    inputs = tuple(t for t in (x, weight, bias) if t is not None)
    params = {"k": len(shape), "eps": eps, "weight": weight is not None,
              "bias": bias is not None, "mean": mu, "rstd": rstd}
    return apply(LayerNorm, inputs, b.reshape(y, x.shape), b, params)


def _flat(t: Tensor | None, d: int):
    return None if t is None else t._backend.reshape(t._data, (d,))


def _layer_norm_case(x: Tensor) -> Tensor:
    """The UNARY sample x as layer_norm over its last dim, with a weight and bias drawn from
    x's own rows (so their gradients are checked too)."""
    if not x.ndim or x.shape[-1] < 2:
        return x * 1
    if x.numel() == 0:
        return layer_norm(x, x.shape[-1:])
    rows = reshape(x, (-1, x.shape[-1]))
    return layer_norm(x, x.shape[-1:], rows[0] * 0.5 + 1.0, rows[-1] * 0.25)


@register
class LayerNorm(Op):
    """layer_norm on the backend's fast path: forward and (first-order) backward one fused
    call each; while a graph of the backward is being built (create_graph), the backward is
    written in differentiable ops instead, so higher-order gradients are right."""

    name = "layer_norm"
    spec = Spec(UNARY, call=_layer_norm_case, second_order=True)
    save_inputs = True

    @staticmethod
    def forward(b, x, *affine, k, eps, weight, bias, **_):
        rows, d = _rows(x, k)
        w, bb = (affine[0] if weight else None), (affine[-1] if bias else None)
        y = b.layer_norm(b.reshape(x, (rows, d)), w if w is None else b.reshape(w, (d,)),
                         bb if bb is None else b.reshape(bb, (d,)), eps)[0]
        return b.reshape(y, x.shape)

    @staticmethod
    def backward(node, grad):
        p = node.params
        x, weight = node.saved[0], node.saved[1] if p["weight"] else None
        if mode.enabled:
            return _layer_norm_backward(grad, x, weight, p)
        b = x._backend
        rows, d = _rows(x, p["k"])
        gx, gw, gb = b.layer_norm_grad(b.reshape(grad._data, (rows, d)),
                                       b.reshape(x._data, (rows, d)), _flat(weight, d),
                                       p["mean"], p["rstd"], p["bias"])
        shape = x.shape[x.ndim - p["k"]:]
        grads = [Tensor._make(b.reshape(gx, x.shape), b)]
        grads += [Tensor._make(b.reshape(g, shape), b) for g in (gw, gb) if g is not None]
        return tuple(grads)


def _layer_norm_backward(grad, x, weight, p):
    """The gradients of layer_norm in differentiable ops (the fallback's formula); halves in
    float32, as the fused path (rstd ** 3 of a near-constant row overflows float16)."""
    if x.dtype in HALF:
        wide = _layer_norm_backward(grad.float(), x.float(),
                                    None if weight is None else weight.float(), p)
        return tuple(g.to(x.dtype) for g in wide)
    k = p["k"]
    dims, lead = tuple(range(x.ndim - k, x.ndim)), tuple(range(x.ndim - k))
    centered = x - mean(x, dims, keepdim=True)
    rstd = 1.0 / (mean(centered * centered, dims, keepdim=True) + p["eps"]).sqrt()
    xhat = centered * rstd
    gw = grad if weight is None else grad * weight
    gx = rstd * (gw - mean(gw, dims, keepdim=True) - xhat * mean(gw * xhat, dims, keepdim=True))
    grads = [gx]
    if weight is not None:
        grads.append(tensor_sum(grad * xhat, lead) if lead else grad * xhat)
    if p["bias"]:
        grads.append(tensor_sum(grad, lead) if lead else grad * 1.0)
    return tuple(grads)


@autocast_op("scaled_dot_product_attention")
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask=None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, enable_gqa: bool = False):
    """softmax(query key^T * scale + mask) value over (..., L, E) query and (..., S, E) key,
    (..., S, Ev) value; `attn_mask` is bool (True attends) or added; is_causal masks
    the upper triangle (one fused scale + mask + softmax, forward and backward, between the
    two matrix products)."""
    length, source = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = matmul(query, key.mT)
    if is_causal:
        if attn_mask is not None:
            raise ValueError("scaled_dot_product_attention: give attn_mask or is_causal")
        if is_floating(scores.dtype) and scores.numel():
            weights = causal_softmax(scores, scale)
        else:
            keep = causal_mask(length, source)
            weights = softmax(masked_fill(scores * scale, make_tensor(
                ~keep, backend=query._backend), float("-inf")), dim=-1)
    else:
        scores = scores * scale
        if attn_mask is not None:
            if attn_mask.dtype.kind == "b":
                scores = masked_fill(scores, ~attn_mask, float("-inf"))
            else:
                scores = scores + attn_mask
        # a row that attends nowhere (every score -inf: a padded query) gives 0 and passes no
        # gradient, as PyTorch's safe softmax: its 0 / 0 = NaN spread into every gradient
        dead = (scores == float("-inf")).all(-1, keepdim=True)
        weights = where(dead, 0.0, softmax(where(dead, 0.0, scores), dim=-1))
    if dropout_p > 0:
        weights = dropout(weights, dropout_p)
    return matmul(weights, value)


def _causal_case(x: Tensor) -> Tensor:
    """The UNARY sample x as scores (..., L, S), scaled by 0.75."""
    return causal_softmax(_qkv(x), 0.75)


@register
class CausalSoftmax(Op):
    """softmax(x * scale) over the last dim with the entries j > i masked (-inf, so 0): one
    fused call forward and one backward; the backward is written in ops while a graph of it is
    being built (create_graph)."""

    name = "causal_softmax"
    spec = Spec(UNARY, tol=TRANSCENDENTAL, second_order=True, call=_causal_case)
    save_output = True

    @staticmethod
    def forward(b, x, scale):
        return b.causal_softmax(x, scale)

    @staticmethod
    def backward(node, grad):
        scale = node.params["scale"]
        if mode.enabled:
            out = node.output()
            return out * (grad - (grad * out).sum(-1, keepdim=True)) * scale
        b = grad._backend
        return Tensor._make(b.causal_softmax_grad(grad._data, node.out_data, scale), b)


def causal_softmax(x: Tensor, scale: float = 1.0) -> Tensor:
    """softmax(x * scale, dim=-1) of scores x (..., L, S) where query i sees keys j <= i only
    (the top-left aligned lower triangle, scaled_dot_product_attention's is_causal)."""
    if x.ndim < 2 or not is_floating(x.dtype):
        raise ShapeError(f"causal_softmax: expected float scores (..., L, S), got shape "
                         f"{x.shape} ({x.dtype})")
    if x.numel() == 0:
        return x * 1.0
    return unary(CausalSoftmax, x, scale=float(scale))


def _embedding_case(x, dim, index):
    """The TAKE sampler's (x, dim, index) as a table with x.shape[dim] rows."""
    w = x.transpose(0, dim) if x.ndim >= 2 else x
    return embedding(index, reshape(w, (w.shape[0], -1)))


declare("embedding", Spec(TAKE, call=_embedding_case), embedding)
declare("scaled_dot_product_attention", Spec(UNARY, tol=TRANSCENDENTAL, call=lambda x: (
    scaled_dot_product_attention(_qkv(x), _qkv(x) * 0.5, _qkv(x), is_causal=True))),
    scaled_dot_product_attention)


def _qkv(x: Tensor) -> Tensor:
    return reshape(x, (1, -1, 1)) if x.ndim < 2 else x
