"""Padding modes beyond constant, resizing and normalizing, as `torch.nn.functional` has them:
pad(mode="reflect" | "replicate" | "circular"), interpolate(mode="nearest" | "bilinear" |
"linear"), normalize; unfold / fold. Padding and resizing select along one dim at a time
(`index_select` with indices computed on the host, whose gradient is a deterministic
scatter-add), bilinear as a weighted sum of two such selections per dim (separable, as the
bilinear weights are); unfold is a grouped convolution with one-hot kernels and fold its
input gradient.
"""

from __future__ import annotations

import numpy as np

from ..creation import tensor as make_tensor
from ..errors import ShapeError
from ..tensor import Tensor
from .autocast import autocast_op
from .cast import widened
from .conv import conv2d, conv2d_grad_input, pair
from .gather import index_select
from .join import pad as constant_pad
from .registry import Spec, declare
from .samples import UNARY
from .selection import vector_norm

MODES = ("constant", "reflect", "replicate", "circular")


def _source(n: int, lo: int, hi: int, mode: str) -> np.ndarray:
    i = np.arange(-lo, n + hi)
    if mode == "reflect":
        if lo >= n or hi >= n:
            raise ShapeError(f"pad: reflect padding ({lo}, {hi}) must be smaller than the "
                             f"dim it pads ({n})")
        i = np.abs(i)
        return np.where(i > n - 1, 2 * (n - 1) - i, i)
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    if lo > n or hi > n:
        raise ShapeError(f"pad: circular padding ({lo}, {hi}) must be at most the size of "
                         f"the dim it pads ({n})")
    return i % n


def pad(input: Tensor, pad, mode: str = "constant", value=None) -> Tensor:
    """F.pad: `pad` = (left, right) for the last dim, then the dim before, ...; mode
    "constant" (with `value`), "reflect" (mirror without the edge), "replicate" (repeat the
    edge) or "circular" (wrap around).

    >>> import ndlite
    >>> x = ndlite.tensor([[1.0, 2.0, 3.0]])
    >>> ndlite.nn.functional.pad(x, (2, 1), mode="reflect").tolist()
    [[3.0, 2.0, 1.0, 2.0, 3.0, 2.0]]
    """
    if mode not in MODES:
        raise ValueError(f"pad: mode must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "constant":
        return constant_pad(input, pad, value=0.0 if value is None else value)
    pad = tuple(pad)
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ShapeError(f"pad: padding {pad} must have an even length of at most "
                         f"2 * {input.ndim} for shape {input.shape}")
    out = input
    for k in range(len(pad) // 2):
        dim = input.ndim - 1 - k
        lo, hi = pad[2 * k], pad[2 * k + 1]
        if lo < 0 or hi < 0:
            raise ShapeError(f"pad: {mode} padding must be >= 0, got {pad}")
        if lo or hi:
            index = _source(input.shape[dim], lo, hi, mode)
            out = index_select(out, dim, make_tensor(index, backend=input._backend))
    return out


def _sizes(input: Tensor, size, scale_factor) -> list[tuple[int, float]]:
    spatial = input.shape[2:]
    if not spatial:
        raise ShapeError(f"interpolate: needs (N, C, ...) input with spatial dims, got "
                         f"{input.shape}")
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: give exactly one of size and scale_factor")
    if size is not None:
        sizes = [size] * len(spatial) if isinstance(size, int) else list(size)
        if len(sizes) != len(spatial):
            raise ShapeError(f"interpolate: size {size} for {len(spatial)} spatial dims")
        return [(int(o), n / o) for o, n in zip(sizes, spatial)]
    factors = [scale_factor] * len(spatial) if not isinstance(scale_factor, (tuple, list)) \
        else list(scale_factor)
    return [(int(np.floor(n * f)), 1.0 / f) for n, f in zip(spatial, factors)]


def _linear_along(x: Tensor, dim: int, out: int, scale: float, align_corners: bool):
    n = x.shape[dim]
    dst = np.arange(out, dtype=np.float64)
    if align_corners:
        src = dst * ((n - 1) / (out - 1) if out > 1 else 0.0)
    else:
        src = np.maximum((dst + 0.5) * scale - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n - 1)
    i1 = np.minimum(i0 + 1, n - 1)
    w = (src - i0).astype(x.dtype)
    shape = [1] * x.ndim
    shape[dim] = out
    weight = make_tensor(w.reshape(shape), backend=x._backend)
    b = x._backend
    low = index_select(x, dim, make_tensor(i0, backend=b))
    high = index_select(x, dim, make_tensor(i1, backend=b))
    return low * (1 - weight) + high * weight


def _weighted_along(x: Tensor, dim: int, index: np.ndarray, weights: np.ndarray) -> Tensor:
    """sum_k weights[:, k] * x[index[:, k]] along `dim`: index and weights (out, taps)."""
    out, taps = index.shape
    picked = index_select(x, dim, make_tensor(index.reshape(-1), backend=x._backend))
    shape = list(x.shape)
    shape[dim:dim + 1] = [out, taps]
    w_shape = [1] * len(shape)
    w_shape[dim:dim + 2] = [out, taps]
    w = make_tensor(weights.astype(x.dtype).reshape(w_shape), backend=x._backend)
    return (picked.reshape(shape) * w).sum(dim + 1)


def _cubic_along(x: Tensor, dim: int, out: int, scale: float, align_corners: bool):
    """PyTorch's bicubic: Keys' cubic convolution (A = -0.75) over 4 taps, the source index
    not clamped, the taps clamped to the edge."""
    n, a = x.shape[dim], -0.75
    dst = np.arange(out, dtype=np.float64)
    if align_corners:
        src = dst * ((n - 1) / (out - 1) if out > 1 else 0.0)
    else:
        src = (dst + 0.5) * scale - 0.5
    i0 = np.floor(src)
    t = src - i0

    def near(d):  # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):  # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    weights = np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], 1)
    index = np.clip(i0[:, None].astype(np.int64) + np.arange(-1, 3), 0, n - 1)
    return _weighted_along(x, dim, index, weights)


def _area_along(x: Tensor, dim: int, out: int) -> Tensor:
    """Adaptive averaging (PyTorch's "area"): window [floor(i n / out), ceil((i + 1) n / out))."""
    n = x.shape[dim]
    starts = (np.arange(out) * n) // out
    ends = -(-((np.arange(out) + 1) * n) // out)
    taps = int((ends - starts).max())
    index = np.minimum(starts[:, None] + np.arange(taps), n - 1)
    weights = (np.arange(taps)[None, :] < (ends - starts)[:, None]) / (ends - starts)[:, None]
    return _weighted_along(x, dim, index, weights)


def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor=None,
                antialias: bool = False) -> Tensor:
    """F.interpolate over the spatial dims of (N, C, ...) input: "nearest" (PyTorch's
    floor rule), "nearest-exact" (the pixel centres'), "linear" / "bilinear" / "trilinear"
    and "bicubic" (align_corners False by default), "area" (adaptive averaging)."""
    if antialias:
        raise ValueError("interpolate: antialias=True is not supported by ndlite")
    targets = _sizes(input, size, scale_factor)
    if recompute_scale_factor:
        targets = [(o, n / o) for (o, _), n in zip(targets, input.shape[2:])]
    out = input
    for k, (o, scale) in enumerate(targets):
        dim = 2 + k
        if o < 1:
            raise ShapeError(f"interpolate: output size {o} along dim {dim} is < 1")
        if mode in ("nearest", "nearest-exact"):
            n = input.shape[dim]
            shift = 0.5 if mode == "nearest-exact" else 0.0
            index = np.minimum(np.floor((np.arange(o) + shift) * scale).astype(np.int64), n - 1)
            out = index_select(out, dim, make_tensor(index, backend=input._backend))
        elif mode in ("linear", "bilinear", "trilinear"):
            out = _linear_along(out, dim, o, scale, bool(align_corners))
        elif mode == "bicubic":
            out = _cubic_along(out, dim, o, scale, bool(align_corners))
        elif mode == "area":
            out = _area_along(out, dim, o)
        else:
            raise ValueError(f"interpolate: mode {mode!r} is not supported (nearest, "
                             "nearest-exact, linear, bilinear, trilinear, bicubic, area)")
    return out


@autocast_op("normalize")  # outside widened: float32 in a region
@widened
def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out=None) -> Tensor:
    """input / max(||input||_p along dim, eps)."""
    return input / vector_norm(input, p, dim, keepdim=True).clamp(min=eps)


def _image(x: Tensor) -> Tensor:
    return x.reshape(-1, 1, *x.shape[-2:]) if x.ndim >= 2 else x.reshape(1, 1, 1, -1)


declare("pad_reflect", Spec(UNARY, tol="exact", call=lambda x: pad(
    _image(x), (min(1, _image(x).shape[-1] - 1), 0, 0, min(1, _image(x).shape[-2] - 1)),
    mode="reflect")))
declare("pad_replicate_circular", Spec(UNARY, call=lambda x: pad(
    pad(_image(x), (2, 1, 1, 0), mode="replicate"), (1, 1), mode="circular")))
declare("interpolate_nearest", Spec(UNARY, call=lambda x: interpolate(
    _image(x), scale_factor=2, mode="nearest")))
declare("interpolate_bilinear", Spec(UNARY, call=lambda x: interpolate(
    _image(x), size=(3, 5), mode="bilinear")), interpolate)
declare("normalize", Spec(UNARY, tol="transcendental", kinks="zero", call=lambda x: normalize(
    x.reshape(1, -1))), normalize)


# ---- unfold / fold (im2col / col2im) ----------------------------------------------------------


def _patch_weight(channels: int, kernel: tuple, like: Tensor) -> Tensor:
    """(C kh kw, 1, kh, kw) one-hot kernels: output channel c kh kw + i kw + j copies input
    channel c at kernel offset (i, j), PyTorch's unfold order."""
    kh, kw = kernel
    eye = np.eye(kh * kw, dtype=like.dtype).reshape(kh * kw, 1, kh, kw)
    return make_tensor(np.tile(eye, (channels, 1, 1, 1)), backend=like._backend)


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """F.unfold (im2col): the sliding (kh, kw) patches of (N, C, H, W) input as columns,
    (N, C kh kw, L); a grouped convolution with one-hot kernels, so exact and differentiable."""
    if input.ndim != 4:
        raise ShapeError(f"unfold: needs (N, C, H, W) input, got shape {input.shape}")
    kernel = pair(kernel_size, "kernel_size", "unfold")
    n, c = input.shape[:2]
    cols = conv2d(input, _patch_weight(c, kernel, input), None, stride, padding, dilation, c)
    return cols.reshape(n, cols.shape[1], -1)


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """F.fold (col2im), the adjoint of unfold: (N, C kh kw, L) columns summed back into
    (N, C, H, W) = output_size; overlapping patches add up."""
    kernel = pair(kernel_size, "kernel_size", "fold")
    height, width = pair(output_size, "output_size", "fold")
    s, p, d = (pair(v, name, "fold") for v, name in ((stride, "stride"), (padding, "padding"),
                                                     (dilation, "dilation")))
    if input.ndim != 3 or input.shape[1] % (kernel[0] * kernel[1]):
        raise ShapeError(f"fold: needs (N, C * {kernel[0]} * {kernel[1]}, L) input, got shape "
                         f"{input.shape}")
    oh = (height + 2 * p[0] - d[0] * (kernel[0] - 1) - 1) // s[0] + 1
    ow = (width + 2 * p[1] - d[1] * (kernel[1] - 1) - 1) // s[1] + 1
    if oh * ow != input.shape[2]:
        raise ShapeError(f"fold: {input.shape[2]} blocks do not tile output_size "
                         f"{(height, width)} ({oh} x {ow} expected)")
    n, c = input.shape[0], input.shape[1] // (kernel[0] * kernel[1])
    grad = input.reshape(n, input.shape[1], oh, ow)
    return conv2d_grad_input(grad, _patch_weight(c, kernel, input), (n, c, height, width), s, p,
                             d, c)


declare("unfold", Spec(UNARY, tol="exact", call=lambda x: unfold(_image(x), (2, 1), padding=1,
                                                                   stride=(1, 2))), unfold)
declare("fold", Spec(UNARY, call=lambda x: fold(unfold(_image(x), 2, padding=1), _image(
    x).shape[-2:], 2, padding=1)), fold)
