"""Fallbacks of the transformer fast paths of the contract (protocol.py, FAST_PATHS), composed
from the primitives: they are the specification a backend's kernels must meet, within the
tolerance policy. An override may sum in another order (embedding_grad in chunks of a row's
positions, layer_norm in a tree), but one fixed by the input alone: no atomics, the same bits
run to run.

Conventions: everything is float; a "row" is the last dim. Each function takes the backend
`b` first and returns new buffers.
- embedding_grad(grad (N, D), index (N,) int64 in range, num_rows) -> (num_rows, D): row r is
  the sum of grad[i] over the positions i with index[i] == r, in ascending i (0 if none);
- layer_norm(x (R, D), weight (D,) | None, bias (D,) | None, eps) -> (y, mean (R,), rstd (R,)):
  mean and the biased variance of each row, rstd = 1 / sqrt(var + eps),
  y = (x - mean) * rstd * weight + bias;
- layer_norm_grad(grad (R, D), x, weight | None, mean, rstd, bias) -> (grad_x, grad_weight |
  None, grad_bias | None): with xhat = (x - mean) * rstd and gw = grad * weight,
  grad_x = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) per row, grad_weight the column
  sums of grad * xhat (when weight is given), grad_bias those of grad (when `bias`);
- causal_softmax(x (..., L, S), scale) -> softmax over the last dim of x * scale with the
  entries above the diagonal (j > i, the top-left aligned lower triangle kept, PyTorch's
  is_causal) set to -inf: they come out exactly 0;
- causal_softmax_grad(grad, out, scale) -> out * (grad - sum(grad * out, last dim)) * scale,
  the gradient with respect to the unscaled x (masked entries: exactly 0);
- dropout_mask(shape, p, seed, dtype) -> the mask dropout multiplies by: 1 / (1 - p) where an
  element is kept, 0 where dropped. Element i (row-major) is kept when the top 24 bits of
  splitmix64(seed + (i + 1) * 0x9E3779B97F4A7C15) are >= floor(p * 2^24): a counter-based
  draw, so every backend makes the same mask from one seed without moving it from the host,
  and any element can be computed alone (the bits are exact integer arithmetic);
- dropout(x, p, seed) -> x * dropout_mask(x.shape, p, seed, x.dtype), bit for bit: one pass
  where a backend fuses it, no mask in memory (the gradient is dropout(grad, p, seed));
- gelu(x, approximate) -> x * Phi(x), Phi(x) = (erf(x / sqrt 2) + 1) / 2 ("none"), or
  x * sigmoid(2 z), z = sqrt(2 / pi) (x + 0.044715 x^3) ("tanh"); gelu_grad(grad, x,
  approximate) -> grad * (Phi(x) + x exp(-x^2 / 2) / sqrt(2 pi)), or for "tanh" grad * (s +
  x s s' dz2) with s = sigmoid(2 z), s' = sigmoid(-2 z), dz2 = 2 sqrt(2 / pi) (1 + 3 * 0.044715
  x^2): one pass each where a backend fuses them.
"""

from __future__ import annotations

import math
import sys

import numpy as np


def embedding_grad(b, grad, index, num_rows):
    n = grad.shape[0]
    return b.scatter_add(b.reshape(index, (n, 1)), grad, 0, num_rows)


def layer_norm(b, x, weight, bias, eps):
    rows, d = x.shape
    mean = b.div(b.sum(x, (1,), True), d)
    centered = b.sub(x, mean)
    var = b.div(b.sum(b.mul(centered, centered), (1,), True), d)
    rstd = b.div(1, b.sqrt(b.add(var, eps)))
    y = b.mul(centered, rstd)
    if weight is not None:
        y = b.mul(y, weight)
    if bias is not None:
        y = b.add(y, bias)
    return y, b.reshape(mean, (rows,)), b.reshape(rstd, (rows,))


def layer_norm_grad(b, grad, x, weight, mean, rstd, bias):
    rows, d = x.shape
    rstd = b.reshape(rstd, (rows, 1))
    xhat = b.mul(b.sub(x, b.reshape(mean, (rows, 1))), rstd)
    gw = grad if weight is None else b.mul(grad, weight)
    m1 = b.div(b.sum(gw, (1,), True), d)
    m2 = b.div(b.sum(b.mul(gw, xhat), (1,), True), d)
    grad_x = b.mul(b.sub(b.sub(gw, m1), b.mul(xhat, m2)), rstd)
    grad_weight = None if weight is None else b.sum(b.mul(grad, xhat), (0,), False)
    grad_bias = b.sum(grad, (0,), False) if bias else None
    return grad_x, grad_weight, grad_bias


GOLDEN, MIX1, MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def dropout_threshold(p: float) -> int:
    """The 24-bit draw an element must reach to be kept."""
    return int(p * (1 << 24))


def dropout_mask(b, shape, p, seed, dtype):
    n = int(np.prod(shape, dtype=np.int64))
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + (np.arange(1, n + 1, dtype=np.uint64) * np.uint64(GOLDEN))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(MIX1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(MIX2)
        z = z ^ (z >> np.uint64(31))
    keep = (z >> np.uint64(40)) >= np.uint64(dropout_threshold(p))
    scale = np.asarray(1.0 / (1.0 - p), dtype=dtype)
    return b.from_numpy((keep * scale).astype(dtype).reshape(shape))


def dropout(b, x, p, seed):
    return b.mul(x, b.dropout_mask(x.shape, p, seed, x.dtype))


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu(b, x, approximate):
    if approximate == "tanh":
        z2 = b.mul(b.add(x, b.mul(b.mul(b.mul(x, x), x), 0.044715)), 2 * _SQRT_2_OVER_PI)
        return b.mul(x, b.sigmoid(z2))
    cdf = b.mul(b.add(b.erf(b.mul(x, 1 / math.sqrt(2.0))), 1), 0.5)
    return b.mul(x, cdf)


def gelu_grad(b, grad, x, approximate):
    if approximate == "tanh":
        z2 = b.mul(b.add(x, b.mul(b.mul(b.mul(x, x), x), 0.044715)), 2 * _SQRT_2_OVER_PI)
        s, s_neg = b.sigmoid(z2), b.sigmoid(b.neg(z2))
        d_z2 = b.mul(b.add(b.mul(b.mul(x, x), 3 * 0.044715), 1), 2 * _SQRT_2_OVER_PI)
        return b.mul(grad, b.add(s, b.mul(b.mul(b.mul(x, s), s_neg), d_z2)))
    cdf = b.mul(b.add(b.erf(b.mul(x, 1 / math.sqrt(2.0))), 1), 0.5)
    pdf = b.mul(b.exp(b.mul(b.mul(x, x), -0.5)), 1 / math.sqrt(2.0 * math.pi))
    return b.mul(grad, b.add(cdf, b.mul(x, pdf)))


class TransformerPaths:
    """The transformer fast paths, mixed into the Backend base class. Each calls the function
    of its name in `_transformer_kernels`: this module (the fallbacks) unless a backend names
    its own module of kernels (ndlite_cupy/transformer.py, ndlite_opencl/transformer.py), whose
    functions take the backend first, as these do. dropout, gelu and gelu_grad are optional
    there (these fallbacks otherwise); a backend may also override the method."""

    _transformer_kernels = sys.modules[__name__]

    def embedding_grad(self, grad, index, num_rows):
        return self._transformer_kernels.embedding_grad(self, grad, index, num_rows)

    def layer_norm(self, x, weight, bias, eps):
        return self._transformer_kernels.layer_norm(self, x, weight, bias, eps)

    def layer_norm_grad(self, grad, x, weight, mean, rstd, bias):
        return self._transformer_kernels.layer_norm_grad(self, grad, x, weight, mean, rstd, bias)

    def causal_softmax(self, x, scale):
        return self._transformer_kernels.causal_softmax(self, x, scale)

    def causal_softmax_grad(self, grad, out, scale):
        return self._transformer_kernels.causal_softmax_grad(self, grad, out, scale)

    def dropout_mask(self, shape, p, seed, dtype):
        return self._transformer_kernels.dropout_mask(self, shape, p, seed, dtype)

    def dropout(self, x, p, seed):
        return getattr(self._transformer_kernels, "dropout", dropout)(self, x, p, seed)

    def gelu(self, x, approximate):
        return getattr(self._transformer_kernels, "gelu", gelu)(self, x, approximate)

    def gelu_grad(self, grad, x, approximate):
        return getattr(self._transformer_kernels, "gelu_grad", gelu_grad)(self, grad, x,
                                                                          approximate)


def causal_mask(length: int, source: int) -> np.ndarray:
    """bool (L, S): True where query i may attend key j (j <= i)."""
    return np.tril(np.ones((length, source), dtype=bool))


def causal_softmax(b, x, scale):
    length, source = x.shape[-2], x.shape[-1]
    keep = b.from_numpy(causal_mask(length, source))
    scores = b.where(keep, b.mul(x, scale), -math.inf)
    return b.exp(b.log_softmax(scores, x.ndim - 1))


def causal_softmax_grad(b, grad, out, scale):
    dot = b.sum(b.mul(grad, out), (out.ndim - 1,), True)
    return b.mul(b.mul(out, b.sub(grad, dot)), scale)
