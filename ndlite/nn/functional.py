"""Functional neural-network ops, PyTorch's `torch.nn.functional` names.

Every function here is an op of the registry (or composed from ops), so it runs on every
backend and differentiates twice.
"""

from ..ops.activation import dropout, gelu, leaky_relu, log_softmax, softmax
from ..ops.activations_more import (
    celu,
    glu,
    hardshrink,
    hardsigmoid,
    hardswish,
    mish,
    pairwise_distance,
    prelu,
    relu6,
    selu,
    softmin,
    softshrink,
    softsign,
    tanhshrink,
    threshold,
)
from ..ops.conv import conv2d
from ..ops.conv_more import conv1d, conv_transpose1d, conv_transpose2d
from ..ops.linalg import linear
from ..ops.loss import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    l1_loss,
    mse_loss,
    nll_loss,
)
from ..ops.losses_more import cosine_similarity, huber_loss, kl_div, smooth_l1_loss
from ..ops.math import elu, hardtanh, logsigmoid, silu, softplus
from ..ops.movement import flatten
from ..ops.nn_more import (
    adaptive_max_pool2d,
    avg_pool1d,
    bilinear,
    channel_shuffle,
    cosine_embedding_loss,
    dropout1d,
    dropout2d,
    gumbel_softmax,
    hinge_embedding_loss,
    instance_norm,
    margin_ranking_loss,
    max_pool1d,
    pixel_shuffle,
    pixel_unshuffle,
    soft_margin_loss,
    triplet_margin_loss,
)
from ..ops.normalization import batch_norm
from ..ops.norms import group_norm, rms_norm
from ..ops.pool import adaptive_avg_pool2d, avg_pool2d, max_pool2d
from ..ops.resample import fold, interpolate, normalize, pad, unfold
from ..ops.selection import one_hot
from ..ops.transformer import embedding, layer_norm, scaled_dot_product_attention
from ..ops.unary import relu, sigmoid, tanh
from .attention import multi_head_attention_forward

__all__ = ["adaptive_avg_pool2d", "avg_pool2d", "batch_norm", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "conv2d", "cross_entropy", "dropout", "flatten",
           "gelu", "l1_loss", "leaky_relu", "linear", "log_softmax", "max_pool2d", "mse_loss",
           "nll_loss", "pad", "relu", "sigmoid", "softmax", "tanh", "elu", "hardtanh",
           "logsigmoid", "silu", "softplus", "one_hot",
           "interpolate", "normalize", "embedding", "layer_norm",
           "scaled_dot_product_attention", "fold", "unfold", "cosine_similarity", "huber_loss",
           "kl_div", "smooth_l1_loss", "conv1d", "conv_transpose1d", "conv_transpose2d",
           "group_norm", "rms_norm", "multi_head_attention_forward",
           "celu", "glu", "hardshrink", "hardsigmoid", "hardswish", "mish", "pairwise_distance",
           "prelu", "relu6", "selu", "softmin", "softshrink", "softsign", "tanhshrink",
           "threshold", "avg_pool1d", "bilinear", "cosine_embedding_loss", "dropout1d",
           "dropout2d", "hinge_embedding_loss", "instance_norm", "margin_ranking_loss",
           "max_pool1d", "pixel_shuffle", "pixel_unshuffle", "soft_margin_loss",
           "triplet_margin_loss", "adaptive_max_pool2d", "channel_shuffle", "gumbel_softmax"]
