"""multi_head_attention_forward: PyTorch's functional multi-head attention, composed from
the ops below (linear, softmax, dropout and scaled_dot_product_attention), so it runs on
every backend and differentiates twice. nn.MultiheadAttention (nn/transformer.py) calls it.

Masks follow MultiheadAttention's convention: a bool attn_mask or key_padding_mask is True
where a position may NOT be attended (the opposite of scaled_dot_product_attention's bool
mask); a float mask is added to the scores. Both become one additive float mask, as in
PyTorch. With need_weights=False the product goes through scaled_dot_product_attention
(which may have a backend fast path); with need_weights=True through an explicit softmax,
whose weights are returned.
"""

from __future__ import annotations

import math

import numpy as np

from ..creation import tensor as make_tensor
from ..creation import zeros
from ..dtypes import is_floating
from ..errors import DTypeError, ShapeError
from ..ops.activation import dropout, softmax
from ..ops.join import cat
from ..ops.linalg import linear
from ..ops.registry import TRANSCENDENTAL, Spec, declare
from ..ops.samples import UNARY
from ..ops.selection import masked_fill
from ..ops.transformer import scaled_dot_product_attention
from ..tensor import Tensor

OP = "multi_head_attention_forward"


def canonical_mask(mask: Tensor | None, name: str, dtype) -> Tensor | None:
    """A bool mask (True = masked out) as an additive float mask of `dtype` (-inf where
    True, 0 elsewhere); a float mask cast to `dtype`; None stays None."""
    if mask is None:
        return None
    if mask.dtype.kind == "b":
        base = zeros(mask.shape, dtype=dtype, backend=mask.backend)
        return masked_fill(base, mask, float("-inf"))
    if not is_floating(mask.dtype):
        raise DTypeError(f"{OP}: only bool and floating types of {name} are supported, got "
                         f"{mask.dtype}")
    return mask.to(dtype) if mask.dtype != dtype else mask


def _check_shapes(query, key, value, key_padding_mask, attn_mask, num_heads) -> bool:
    """PyTorch's _mha_shape_check: True when the inputs carry a batch dimension."""
    if query.ndim not in (2, 3):
        raise ShapeError(f"{OP}: query should be unbatched 2-D or batched 3-D, got shape "
                         f"{query.shape}")
    batched = query.ndim == 3
    if key.ndim != query.ndim or value.ndim != query.ndim:
        raise ShapeError(f"{OP}: for a {query.ndim}-D query {query.shape}, key and value must "
                         f"be {query.ndim}-D, got {key.shape} and {value.shape}")
    if key.shape[:-1] != value.shape[:-1]:
        raise ShapeError(f"{OP}: key {key.shape} and value {value.shape} must agree in all "
                         "but the last dim")
    if batched and key.shape[1] != query.shape[1]:
        raise ShapeError(f"{OP}: query {query.shape} and key {key.shape} have different "
                         f"batch sizes (dim 1): {query.shape[1]} != {key.shape[1]}")
    if key_padding_mask is not None and key_padding_mask.ndim != query.ndim - 1:
        raise ShapeError(f"{OP}: for a {query.ndim}-D query {query.shape}, key_padding_mask "
                         f"must be {query.ndim - 1}-D, got {key_padding_mask.shape}")
    if attn_mask is not None and attn_mask.ndim not in (2, 3):
        raise ShapeError(f"{OP}: attn_mask must be 2-D (L, S) or 3-D (batch * num_heads, L, S),"
                         f" got {attn_mask.shape} for query {query.shape}")
    return batched


def _in_projection(query, key, value, embed_dim, weights, in_proj_bias):
    """q, k, v projected by the packed in_proj_weight (3E, E) or separate q/k/v weights."""
    if in_proj_bias is not None and in_proj_bias.shape != (3 * embed_dim,):
        raise ShapeError(f"{OP}: in_proj_bias must have shape {(3 * embed_dim,)}, got "
                         f"{in_proj_bias.shape}")
    b_q = b_k = b_v = None
    if in_proj_bias is not None:
        b_q, b_k, b_v = in_proj_bias.split(embed_dim)
    if isinstance(weights, tuple):
        w_q, w_k, w_v = weights
    else:
        if weights.shape != (3 * embed_dim, embed_dim):
            raise ShapeError(f"{OP}: in_proj_weight must have shape {(3 * embed_dim, embed_dim)}"
                             f", got {weights.shape}")
        if query is key and key is value:  # self-attention: one product
            return linear(query, weights, in_proj_bias).split(embed_dim, dim=-1)
        w_q, w_k, w_v = weights.split(embed_dim)
    for name, w, x in (("q", w_q, query), ("k", w_k, key), ("v", w_v, value)):
        if w.shape != (embed_dim, x.shape[-1]):
            raise ShapeError(f"{OP}: {name}_proj_weight must have shape "
                             f"{(embed_dim, x.shape[-1])} for input {x.shape}, got {w.shape}")
    return linear(query, w_q, b_q), linear(key, w_k, b_k), linear(value, w_v, b_v)


def _heads(x: Tensor, batch: int, num_heads: int) -> Tensor:
    """(T, N, E) -> (N, H, T, E / H)."""
    return x.reshape(x.shape[0], batch, num_heads, -1).permute(1, 2, 0, 3)


def _static(t: Tensor, name: str, batch: int, num_heads: int, head_dim: int) -> Tensor:
    if t.ndim != 3 or t.shape[0] != batch * num_heads or t.shape[2] != head_dim:
        raise ShapeError(f"{OP}: {name} must have shape (batch * num_heads, S, head_dim) = "
                         f"({batch * num_heads}, S, {head_dim}), got {t.shape}")
    return t.reshape(batch, num_heads, t.shape[1], head_dim)


def _pad_masks(attn_mask, key_padding_mask):
    """One more key position (bias_k or the zero attention), which no mask hides."""
    def pad(m):
        return None if m is None else cat([m, zeros(m.shape[:-1] + (1,), dtype=m.dtype,
                                                    backend=m.backend)], dim=-1)
    return pad(attn_mask), pad(key_padding_mask)


def _keys(k, v, bias_k, bias_v, static_k, static_v, add_zero_attn, attn_mask,
          key_padding_mask, num_heads):
    """Projected (S, N, E) k and v as heads (N, H, S', hd): with bias_k / bias_v appended,
    replaced by static_k / static_v, or with a zero key and value appended; the masks get
    an unmasked column for each appended key."""
    batch, embed_dim = k.shape[1], k.shape[2]
    if (bias_k is None) != (bias_v is None):
        raise ValueError(f"{OP}: give both bias_k and bias_v or neither")
    if bias_k is not None:
        if static_k is not None or static_v is not None:
            raise ValueError(f"{OP}: bias_k cannot be added to static_k / static_v")
        k = cat([k, bias_k.reshape(1, 1, embed_dim).expand(1, batch, embed_dim)])
        v = cat([v, bias_v.reshape(1, 1, embed_dim).expand(1, batch, embed_dim)])
        attn_mask, key_padding_mask = _pad_masks(attn_mask, key_padding_mask)
    head_dim = embed_dim // num_heads
    k = _heads(k, batch, num_heads) if static_k is None else \
        _static(static_k, "static_k", batch, num_heads, head_dim)
    v = _heads(v, batch, num_heads) if static_v is None else \
        _static(static_v, "static_v", batch, num_heads, head_dim)
    if add_zero_attn:
        k, v = (cat([x, zeros(batch, num_heads, 1, head_dim, dtype=x.dtype,
                              backend=x.backend)], dim=2) for x in (k, v))
        attn_mask, key_padding_mask = _pad_masks(attn_mask, key_padding_mask)
    return k, v, attn_mask, key_padding_mask


def _merged_mask(attn_mask, key_padding_mask, batch, num_heads, length, source):
    """attn_mask (L, S) or (N * H, L, S) and key_padding_mask (N, S) as one additive mask
    broadcastable to the scores (N, H, L, S)."""
    mask = None
    if attn_mask is not None:
        want = (length, source) if attn_mask.ndim == 2 else (batch * num_heads, length, source)
        if attn_mask.shape != want:
            raise ShapeError(f"{OP}: the shape of the {attn_mask.ndim}-D attn_mask is "
                             f"{attn_mask.shape}, but should be {want}")
        heads = (1, 1) if attn_mask.ndim == 2 else (batch, num_heads)
        mask = attn_mask.reshape(heads + (length, source))
    if key_padding_mask is not None:
        if key_padding_mask.shape != (batch, source):
            raise ShapeError(f"{OP}: expecting key_padding_mask shape of {(batch, source)}, "
                             f"but got {key_padding_mask.shape}")
        padding = key_padding_mask.reshape(batch, 1, 1, source)
        mask = padding if mask is None else mask + padding
    return mask


def _attend(q, k, v, mask, dropout_p, is_causal, need_weights, average_attn_weights):
    """The attention product over (N, H, L, hd) q and (N, H, S, hd) k, v: output
    (N, H, L, hd) and the weights (N, L, S) averaged, (N, H, L, S), or None."""
    if not need_weights:
        return scaled_dot_product_attention(q, k, v, mask, dropout_p, is_causal), None
    scores = (q * math.sqrt(1.0 / q.shape[-1])) @ k.mT
    if mask is not None:
        scores = scores + mask
    weights = softmax(scores, dim=-1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    out = weights @ v
    return out, weights.mean(1) if average_attn_weights else weights


def multi_head_attention_forward(
        query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
        in_proj_weight: Tensor | None, in_proj_bias: Tensor | None, bias_k: Tensor | None,
        bias_v: Tensor | None, add_zero_attn: bool, dropout_p: float, out_proj_weight: Tensor,
        out_proj_bias: Tensor | None, training: bool = True, key_padding_mask=None,
        need_weights: bool = True, attn_mask=None, use_separate_proj_weight: bool = False,
        q_proj_weight=None, k_proj_weight=None, v_proj_weight=None, static_k=None,
        static_v=None, average_attn_weights: bool = True, is_causal: bool = False):
    """PyTorch's F.multi_head_attention_forward over sequence-first inputs: query (L, N, E)
    or (L, E), key (S, N, kdim), value (S, N, vdim). Returns (output (L, N, E), weights
    (N, L, S) averaged over heads, (N, H, L, S), or None when need_weights is False).

    >>> import ndlite
    >>> x, w = ndlite.ones(4, 2, 6), ndlite.ones(18, 6) * 0.1
    >>> out, weights = multi_head_attention_forward(x, x, x, 6, 2, w, None, None, None, False,
    ...     0.0, ndlite.ones(6, 6), None)
    >>> out.shape, weights.shape
    ((4, 2, 6), (2, 4, 4))
    """
    batched = _check_shapes(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        single_q = query.unsqueeze(1)
        single_k = single_q if key is query else key.unsqueeze(1)
        value = single_k if value is key else value.unsqueeze(1)
        query, key = single_q, single_k
        key_padding_mask = None if key_padding_mask is None else key_padding_mask.unsqueeze(0)
    length, batch, embed_dim = query.shape
    if embed_dim != embed_dim_to_check or embed_dim % num_heads:
        raise ShapeError(f"{OP}: query {query.shape} has embed_dim {embed_dim}; expected "
                         f"{embed_dim_to_check}, divisible by num_heads {num_heads}")
    key_padding_mask = canonical_mask(key_padding_mask, "key_padding_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise ValueError(f"{OP}: need attn_mask if specifying the is_causal hint (the "
                         "Transformer method generate_square_subsequent_mask makes one)")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # the hint stands for the mask: scaled_dot_product_attention's own
    else:
        attn_mask, is_causal = canonical_mask(attn_mask, "attn_mask", query.dtype), False
    weights = (q_proj_weight, k_proj_weight, v_proj_weight) if use_separate_proj_weight \
        else in_proj_weight
    q, k, v = _in_projection(query, key, value, embed_dim, weights, in_proj_bias)
    q = _heads(q, batch, num_heads)
    k, v, attn_mask, key_padding_mask = _keys(k, v, bias_k, bias_v, static_k, static_v,
                                              add_zero_attn, attn_mask, key_padding_mask,
                                              num_heads)
    mask = _merged_mask(attn_mask, key_padding_mask, batch, num_heads, length, k.shape[2])
    out, weights = _attend(q, k, v, mask, dropout_p if training else 0.0, is_causal,
                           need_weights, average_attn_weights)
    out = linear(out.permute(2, 0, 1, 3).reshape(length, batch, embed_dim), out_proj_weight,
                 out_proj_bias)
    if not batched:
        out, weights = out.squeeze(1), None if weights is None else weights.squeeze(0)
    return out, weights


def _conformance_case(x: Tensor):
    """The kit's UNARY sample as causal self-attention over a sequence of embed_dim 2 (two
    heads) or 1, with fixed weights; both the output and the per-head weights are checked."""
    embed_dim = 2 if x.numel() % 2 == 0 else 1
    seq = x.reshape(-1, 1, embed_dim)
    length = seq.shape[0]

    def const(*shape, scale=0.7):
        values = np.linspace(-1.0, 1.0, int(np.prod(shape))).reshape(shape) * scale
        return make_tensor(values, dtype=x.dtype, backend=x._backend)

    causal = make_tensor(np.triu(np.ones((length, length), dtype=bool), k=1),
                         backend=x._backend)
    return multi_head_attention_forward(
        seq, seq, seq, embed_dim, embed_dim, const(3 * embed_dim, embed_dim),
        const(3 * embed_dim, scale=0.2), None, None, False, 0.0, const(embed_dim, embed_dim),
        const(embed_dim, scale=0.1), attn_mask=causal, average_attn_weights=False)


declare("multi_head_attention_forward", Spec(UNARY, tol=TRANSCENDENTAL, call=_conformance_case),
        multi_head_attention_forward)
