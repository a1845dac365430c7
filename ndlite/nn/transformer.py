"""MultiheadAttention and the Transformer family (encoder and decoder layers and stacks,
Transformer), with PyTorch's names, arguments, parameter names (so a PyTorch state dict
loads), initializations and math. Attention is nn/attention.py's
multi_head_attention_forward.

PyTorch's inference fast path (fused kernels, nested tensors) is not copied: outputs are
those of PyTorch's reference path, which its fast path also gives except that, on nested
tensors, PyTorch returns zeros at padded positions.
"""

from __future__ import annotations

import copy
from collections import OrderedDict

from ..creation import empty, full
from ..dtypes import is_floating
from ..errors import ShapeError
from ..ops.selection import triu
from ..tensor import Tensor
from . import functional as F
from .attention import canonical_mask, multi_head_attention_forward
from .container import ModuleList
from .init import constant_, xavier_normal_, xavier_uniform_
from .layers import Dropout, Linear
from .module import Module, Parameter
from .transformer_layers import LayerNorm


class NonDynamicallyQuantizableLinear(Linear):
    """MultiheadAttention's out_proj: a Linear (PyTorch's name for it)."""


class MultiheadAttention(Module):
    """Attention over num_heads heads of embed_dim / num_heads: in_proj_weight (3E, E) (or
    q_proj_weight, k_proj_weight, v_proj_weight when kdim or vdim differ from E),
    in_proj_bias (3E), out_proj; xavier-uniform projections and zero biases.

    Masks: a bool attn_mask or key_padding_mask is True where attention is NOT allowed; a
    float one is added to the scores. forward returns (output, weights or None).

    >>> import ndlite
    >>> mha = ndlite.nn.MultiheadAttention(8, 2, batch_first=True)
    >>> x = ndlite.randn(3, 5, 8)
    >>> out, weights = mha(x, x, x)
    >>> out.shape, weights.shape
    ((3, 5, 8), (3, 5, 5))
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim=None, vdim=None,
                 batch_first: bool = False, dtype=None, backend=None, device=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"MultiheadAttention: embed_dim and num_heads must be greater "
                             f"than 0, got embed_dim={embed_dim} and num_heads={num_heads}")
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible "
                             f"by num_heads ({num_heads})")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.dropout, self.batch_first = dropout, batch_first
        self.head_dim, self.add_zero_attn = embed_dim // num_heads, add_zero_attn
        where = backend if backend is not None else device

        def param(*shape):
            return Parameter(empty(*shape, dtype=dtype, backend=where))

        if self._qkv_same_embed_dim:
            self.in_proj_weight = param(3 * embed_dim, embed_dim)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = param(embed_dim, embed_dim)
            self.k_proj_weight = param(embed_dim, self.kdim)
            self.v_proj_weight = param(embed_dim, self.vdim)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = param(3 * embed_dim)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias,
                                                        dtype=dtype, backend=where)
        if add_bias_kv:
            self.bias_k, self.bias_v = param(1, 1, embed_dim), param(1, 1, embed_dim)
        else:
            self.bias_k = self.bias_v = None
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            xavier_uniform_(self.in_proj_weight)
        else:
            for weight in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                xavier_uniform_(weight)
        if self.in_proj_bias is not None:
            constant_(self.in_proj_bias, 0.0)
            constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            xavier_normal_(self.bias_k)
            xavier_normal_(self.bias_v)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask=None,
                need_weights: bool = True, attn_mask=None, average_attn_weights: bool = True,
                is_causal: bool = False):
        flip = self.batch_first and query.ndim == 3
        if flip:  # to sequence first, keeping self-attention's shared inputs shared
            query_t = query.transpose(1, 0)
            key_t = query_t if key is query else key.transpose(1, 0)
            value = key_t if value is key else value.transpose(1, 0)
            query, key = query_t, key_t
        out, weights = multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, training=self.training,
            key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
            use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight, average_attn_weights=average_attn_weights,
            is_causal=is_causal)
        return (out.transpose(1, 0) if flip else out), weights

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"


def _activation(activation):
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    if isinstance(activation, str) or not callable(activation):
        raise ValueError(f"activation should be relu/gelu or a callable, not {activation!r}")
    return activation


class _Layer(Module):
    """What the encoder and decoder layers share: attention blocks, the feed-forward block
    linear2(dropout(activation(linear1(x)))), and the norms and dropouts around them."""

    def __init__(self, d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                 batch_first, norm_first, bias, blocks, dtype, backend):
        super().__init__()
        kw = dict(dtype=dtype, backend=backend)
        for name in ("self_attn", "multihead_attn")[:blocks - 1]:
            setattr(self, name, MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                   batch_first=batch_first, **kw))
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        for i in range(1, blocks + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        for i in range(1, blocks + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation = _activation(activation)
        self._blocks = blocks

    def _attend(self, attn, dropout, x, memory, mask, key_padding_mask, is_causal):
        out = attn(x, memory, memory, attn_mask=mask, key_padding_mask=key_padding_mask,
                   is_causal=is_causal, need_weights=False)[0]
        return dropout(out)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return getattr(self, f"dropout{self._blocks}")(x)

    def _residual(self, x, block, norm):
        """Pre-norm x + block(norm(x)) or post-norm norm(x + block(x))."""
        if self.norm_first:
            return x + block(norm(x))
        return norm(x + block(x))


class TransformerEncoderLayer(_Layer):
    """Self-attention then a feed-forward block, each in a residual with LayerNorm (after
    it, or before with norm_first=True) and dropout.

    >>> import ndlite
    >>> layer = ndlite.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True)
    >>> layer(ndlite.randn(3, 5, 8)).shape
    (3, 5, 8)
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 dtype=None, backend=None, device=None):
        super().__init__(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                         batch_first, norm_first, bias, 2, dtype,
                         backend if backend is not None else device)

    def forward(self, src: Tensor, src_mask=None, src_key_padding_mask=None,
                is_causal: bool = False) -> Tensor:
        def self_attention(x):
            return self._attend(self.self_attn, self.dropout1, x, x, src_mask,
                                src_key_padding_mask, is_causal)

        x = self._residual(src, self_attention, self.norm1)
        return self._residual(x, self._ff_block, self.norm2)


class TransformerDecoderLayer(_Layer):
    """Self-attention, attention over the encoder's memory, then a feed-forward block, each
    in a residual with LayerNorm (after, or before with norm_first=True) and dropout."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 dtype=None, backend=None, device=None):
        super().__init__(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                         batch_first, norm_first, bias, 3, dtype,
                         backend if backend is not None else device)

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask=None, memory_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None,
                tgt_is_causal: bool = False, memory_is_causal: bool = False) -> Tensor:
        def self_attention(x):
            return self._attend(self.self_attn, self.dropout1, x, x, tgt_mask,
                                tgt_key_padding_mask, tgt_is_causal)

        def memory_attention(x):
            return self._attend(self.multihead_attn, self.dropout2, x, memory, memory_mask,
                                memory_key_padding_mask, memory_is_causal)

        x = self._residual(tgt, self_attention, self.norm1)
        x = self._residual(x, memory_attention, self.norm2)
        return self._residual(x, self._ff_block, self.norm3)


def _clone(module: Module) -> Module:
    """A deep copy of `module`: its own parameters and buffers with the same values."""
    new = copy.copy(module)
    params = OrderedDict((k, None if p is None else Parameter(p.detach().clone(),
                                                              p.requires_grad))
                         for k, p in module._parameters.items())
    buffers = OrderedDict((k, None if b is None else b.detach().clone())
                          for k, b in module._buffers.items())
    modules = OrderedDict((k, None if m is None else _clone(m))
                          for k, m in module._modules.items())
    for name, table in (("_parameters", params), ("_buffers", buffers),
                        ("_modules", modules), ("_non_persistent", set(module._non_persistent))):
        object.__setattr__(new, name, table)
    return new


def _generate_square_subsequent_mask(sz: int, dtype=None, backend=None) -> Tensor:
    return triu(full((sz, sz), float("-inf"), dtype=dtype, backend=backend), diagonal=1)


def _seq_len(x: Tensor, batch_first: bool) -> int:
    return x.shape[0] if x.ndim == 2 else x.shape[1 if batch_first else 0]


def _detect_is_causal_mask(mask, is_causal, size: int) -> bool:
    """is_causal if given; else whether `mask` is exactly the causal mask of `size`."""
    if is_causal is not None or mask is None or not is_floating(mask.dtype):
        return is_causal is True
    causal = _generate_square_subsequent_mask(size, dtype=mask.dtype, backend=mask.backend)
    return mask.shape == causal.shape and bool((mask == causal).all())


class TransformerEncoder(Module):
    """num_layers copies of encoder_layer (each with its own parameters, starting equal),
    then `norm` if given.

    >>> import ndlite
    >>> layer = ndlite.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
    >>> ndlite.nn.TransformerEncoder(layer, 2)(ndlite.randn(5, 3, 8)).shape
    (5, 3, 8)
    """

    def __init__(self, encoder_layer: Module, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True):
        super().__init__()
        self.layers = ModuleList([_clone(encoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check

    def forward(self, src: Tensor, mask=None, src_key_padding_mask=None,
                is_causal: bool | None = None) -> Tensor:
        mask = canonical_mask(mask, "mask", src.dtype)
        src_key_padding_mask = canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                              src.dtype)
        first = self.layers[0] if len(self.layers) else None
        batch_first = getattr(getattr(first, "self_attn", None), "batch_first", False)
        is_causal = _detect_is_causal_mask(mask, is_causal, _seq_len(src, batch_first))
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                        is_causal=is_causal)
        return self.norm(out) if self.norm is not None else out


class TransformerDecoder(Module):
    """num_layers copies of decoder_layer over (tgt, memory), then `norm` if given."""

    def __init__(self, decoder_layer: Module, num_layers: int, norm: Module | None = None):
        super().__init__()
        self.layers = ModuleList([_clone(decoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask=None, memory_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Tensor:
        first = self.layers[0] if len(self.layers) else None
        batch_first = getattr(getattr(first, "self_attn", None), "batch_first", False)
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal,
                                               _seq_len(tgt, batch_first))
        out = tgt
        for layer in self.layers:
            out = layer(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                        tgt_key_padding_mask=tgt_key_padding_mask,
                        memory_key_padding_mask=memory_key_padding_mask,
                        tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        return self.norm(out) if self.norm is not None else out


class Transformer(Module):
    """An encoder-decoder Transformer ("Attention Is All You Need"): forward(src, tgt)
    encodes src into memory and decodes tgt over it. Every weight matrix starts
    xavier-uniform.

    >>> import ndlite
    >>> model = ndlite.nn.Transformer(8, 2, 1, 1, dim_feedforward=16, batch_first=True)
    >>> model(ndlite.randn(2, 5, 8), ndlite.randn(2, 4, 8)).shape
    (2, 4, 8)
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, dtype=None, backend=None,
                 device=None):
        super().__init__()
        kw = dict(dtype=dtype, backend=backend if backend is not None else device)
        common = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                  batch_first, norm_first, bias)
        self.encoder = custom_encoder if custom_encoder is not None else TransformerEncoder(
            TransformerEncoderLayer(*common, **kw), num_encoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        self.decoder = custom_decoder if custom_decoder is not None else TransformerDecoder(
            TransformerDecoderLayer(*common, **kw), num_decoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        for p in self.parameters():
            if p.ndim > 1:
                xavier_uniform_(p)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src: Tensor, tgt: Tensor, src_mask=None, tgt_mask=None,
                memory_mask=None, src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal: bool | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Tensor:
        batch = 0 if self.batch_first else 1
        if src.ndim == 3 and src.shape[batch] != tgt.shape[batch]:
            raise ShapeError(f"Transformer: the batch number of src {src.shape} and tgt "
                             f"{tgt.shape} must be equal (dim {batch})")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ShapeError(f"Transformer: the feature number of src {src.shape} and tgt "
                             f"{tgt.shape} must be equal to d_model {self.d_model}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> Tensor:
        """A float (sz, sz) mask: -inf above the diagonal, 0 on and below it.

        >>> import ndlite
        >>> ndlite.nn.Transformer.generate_square_subsequent_mask(2).tolist()
        [[0.0, -inf], [0.0, 0.0]]
        """
        return _generate_square_subsequent_mask(sz, dtype=dtype, backend=device)
