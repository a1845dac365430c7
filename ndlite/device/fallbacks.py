"""Fallbacks of the optional methods of the contract (protocol.py), composed from primitives.

Every backend gets these for free; a backend overrides one only when it can do better. They
are written for clarity over speed, and they are the specification. Two kinds:
- derived primitives (protocol.DERIVED): exact compositions, so an override must give the same
  bits, -0.0, NaN and integer extremes included;
- fast paths (protocol.FAST_PATHS): an override gives the same results bitwise for selections
  such as max-pool indices, within the tolerance policy for sums.
Each function takes the backend `b` first.

Convolution is im2col + one batched matmul; its adjoints are a matmul and col2im. col2im and
every pooling backward *gather*: each kernel offset adds its contribution to a strided view of
the output in a fixed order, so results are deterministic and need no atomics.
"""

from __future__ import annotations

import math

import numpy as np

from ..dtypes import is_floating

# ---- derived primitives -----------------------------------------------------------------------


def sigmoid(b, x):
    # 1 / (1 + exp(-x)) for x >= 0, exp(x) / (1 + exp(x)) below: exp(-|x|) never overflows,
    # and both branches are exact in relative terms
    e = b.exp(b.neg(b.abs(x)))
    total = b.add(e, 1)
    return b.where(b.ge(x, 0), b.div(1, total), b.div(e, total))


def absolute(b, x):
    if x.dtype.kind == "b":
        return b.copy(x)
    out = b.where(b.lt(x, 0), b.neg(x), x)  # integers: abs(INT_MIN) wraps, as NumPy's does
    if is_floating(x.dtype):  # as fabs, clear the sign bit: -0.0 -> 0.0, NaN -> +NaN
        out = b.where(b.eq(x, x), b.add(out, 0), math.nan)
    return out


def sign(b, x):
    # 1, -1, or x + 0: -0.0 -> 0.0 and a NaN stays itself, as NumPy's sign
    return b.where(b.gt(x, 0), 1, b.where(b.lt(x, 0), -1, b.add(x, 0)))


def _reversed(b, x, dtype):
    """Reverses the order: -x for floats (ties, NaN come out as max picks), -1 - x for ints."""
    if isinstance(x, (bool, int, float)):
        return -x if is_floating(dtype) else -1 - x
    return b.neg(x) if is_floating(dtype) else b.sub(-1, x)


def minimum(b, x, y):
    dtype = (y if isinstance(x, (bool, int, float)) else x).dtype
    if dtype.kind == "b":
        return b.mul(x, y)  # logical and
    return _reversed(b, b.maximum(_reversed(b, x, dtype), _reversed(b, y, dtype)), dtype)


def amin(b, x, axes, keepdims):
    # of tied 0.0 and -0.0 it keeps the element max keeps (NumPy's and OpenCL's: the last)
    if x.dtype.kind == "b":  # all(x) = not any(not x)
        return b.eq(b.max(b.eq(x, False), axes, keepdims), False)
    return _reversed(b, b.max(_reversed(b, x, x.dtype), axes, keepdims), x.dtype)


def argmin(b, x, axis, keepdims):
    if x.dtype.kind == "b":
        return b.argmax(b.eq(x, False), axis, keepdims)
    return b.argmax(_reversed(b, x, x.dtype), axis, keepdims)


def pad(b, x, widths, value):
    shape = tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, widths, strict=True))
    out = b.full(shape, value, x.dtype)
    key = tuple(slice(lo, lo + n, 1) for n, (lo, _) in zip(x.shape, widths, strict=True))
    b.assign(b.slice(out, key), x)
    return out


def concatenate(b, xs, axis):
    shape = list(xs[0].shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    out = b.empty(tuple(shape), xs[0].dtype)
    lead, start = tuple(slice(0, n, 1) for n in shape[:axis]), 0
    for x in xs:
        b.assign(b.slice(out, (*lead, slice(start, start + x.shape[axis], 1))), x)
        start += x.shape[axis]
    return out


# ---- sizes ------------------------------------------------------------------------------------


def conv_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """Output length of a convolution along one dim (may be < 1: callers check)."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def pool_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int,
                     ceil_mode: bool) -> int:
    """Output length of a pooling along one dim, PyTorch's rule: with ceil_mode the last window
    may hang over the end, but must start inside the input or its left padding."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    if ceil_mode:
        out = -(-span // stride) + 1
        if (out - 1) * stride >= size + padding:
            out -= 1
        return out
    return span // stride + 1


def empty_windows(size: int, kernel: int, stride: int, padding: int, dilation: int,
                  out: int) -> list:
    """Output positions along one dim whose window holds only padding (possible with
    dilation); pooling rejects such geometries, as they have no maximum to point at."""
    taps = np.arange(out)[:, None] * stride - padding + np.arange(kernel)[None, :] * dilation
    inside = (taps >= 0) & (taps < size)
    return np.flatnonzero(~inside.any(axis=1)).tolist()


def _window_slices(b, x, offset, stride, out):
    """The strided view of padded `x` (N, C, Hp, Wp) that kernel offset `offset` sees."""
    (h0, w0), (sh, sw), (oh, ow) = offset, stride, out
    n, c = x.shape[0], x.shape[1]
    return b.slice(x, (slice(0, n, 1), slice(0, c, 1),
                       slice(h0, h0 + sh * (oh - 1) + 1, sh),
                       slice(w0, w0 + sw * (ow - 1) + 1, sw)))


def _padded(b, x, padding, extra, value):
    """`x` (N, C, H, W) padded by `padding` on every side and `extra` more at the bottom/right."""
    (ph, pw), (eh, ew) = padding, extra
    if ph == pw == eh == ew == 0:
        return x
    return b.pad(x, ((0, 0), (0, 0), (ph, ph + eh), (pw, pw + ew)), value)


def _offsets(kernel_size, dilation):
    kh, kw = kernel_size
    dh, dw = dilation
    return [(i * dh, j * dw) for i in range(kh) for j in range(kw)]


# ---- convolution ------------------------------------------------------------------------------


def im2col(b, x, kernel_size, stride, padding, dilation):
    """Windows of `x` (N, C, H, W) as columns: (N, C, kh, kw, OH, OW)."""
    n, c, h, w = x.shape
    kh, kw = kernel_size
    out = tuple(conv_output_size(s, k, st, p, d) for s, k, st, p, d in
                zip((h, w), kernel_size, stride, padding, dilation, strict=True))
    xp = _padded(b, x, padding, (0, 0), 0)
    pieces = [b.reshape(_window_slices(b, xp, off, stride, out), (n, c, 1) + out)
              for off in _offsets(kernel_size, dilation)]
    cols = pieces[0] if len(pieces) == 1 else b.concatenate(pieces, 2)
    return b.reshape(cols, (n, c, kh, kw) + out)


def col2im(b, cols, input_shape, stride, padding, dilation):
    """The adjoint of im2col: columns (N, C, kh, kw, OH, OW) summed back into (N, C, H, W)."""
    n, c, kh, kw, oh, ow = cols.shape
    h, w = input_shape[2], input_shape[3]
    (ph, pw) = padding
    out = b.full((n, c, h + 2 * ph, w + 2 * pw), 0, cols.dtype)
    for k, off in enumerate(_offsets((kh, kw), dilation)):
        i, j = divmod(k, kw)
        part = b.slice(cols, (slice(0, n, 1), slice(0, c, 1), i, j))
        view = _window_slices(b, out, off, stride, (oh, ow))
        b.assign(view, b.add(view, part))
    if ph == pw == 0:
        return out
    return b.slice(out, (slice(0, n, 1), slice(0, c, 1), slice(ph, ph + h, 1),
                         slice(pw, pw + w, 1)))


def conv2d(b, x, weight, stride, padding, dilation, groups):
    o, cg, kh, kw = weight.shape
    n = x.shape[0]
    cols = im2col(b, x, (kh, kw), stride, padding, dilation)
    oh, ow = cols.shape[4], cols.shape[5]
    cols = b.reshape(cols, (n, groups, cg * kh * kw, oh * ow))
    w = b.reshape(weight, (1, groups, o // groups, cg * kh * kw))
    out = b.matmul(w, cols)  # (N, G, O/G, OH*OW)
    return b.reshape(out, (n, o, oh, ow))


def conv2d_grad_input(b, grad_output, weight, input_shape, stride, padding, dilation, groups):
    o, cg, kh, kw = weight.shape
    n, _, oh, ow = grad_output.shape
    w = b.reshape(weight, (1, groups, o // groups, cg * kh * kw))
    g = b.reshape(grad_output, (n, groups, o // groups, oh * ow))
    cols = b.matmul(b.permute(w, (0, 1, 3, 2)), g)  # (N, G, Cg*kh*kw, OH*OW)
    cols = b.reshape(cols, (n, groups * cg, kh, kw, oh, ow))
    return col2im(b, cols, input_shape, stride, padding, dilation)


def conv2d_grad_weight(b, x, grad_output, weight_shape, stride, padding, dilation, groups):
    o, cg, kh, kw = weight_shape
    n, _, oh, ow = grad_output.shape
    cols = im2col(b, x, (kh, kw), stride, padding, dilation)
    cols = b.reshape(cols, (n, groups, cg * kh * kw, oh * ow))
    g = b.reshape(grad_output, (n, groups, o // groups, oh * ow))
    per_image = b.matmul(g, b.permute(cols, (0, 1, 3, 2)))  # (N, G, O/G, Cg*kh*kw)
    return b.reshape(b.sum(per_image, (0,), False), weight_shape)


# ---- pooling ----------------------------------------------------------------------------------


def _pool_geometry(shape, kernel_size, stride, padding, dilation, ceil_mode):
    """Output size and the extra bottom/right padding that ceil_mode's last window needs."""
    out, extra = [], []
    for size, k, s, p, d in zip(shape[2:], kernel_size, stride, padding, dilation, strict=True):
        o = pool_output_size(size, k, s, p, d, ceil_mode)
        out.append(o)
        extra.append(max(0, (o - 1) * s + d * (k - 1) + 1 - (size + 2 * p)))
    return tuple(out), tuple(extra)


def _positions(shape, offset, stride, padding, out):
    """int64 (OH, OW): where in the unpadded plane (h * W + w) offset `offset` of each window
    falls, and bool (OH, OW): whether it falls inside the plane at all (not in the padding)."""
    h, w = shape[2], shape[3]
    rows = np.arange(out[0]) * stride[0] - padding[0] + offset[0]
    cols = np.arange(out[1]) * stride[1] - padding[1] + offset[1]
    inside = ((rows >= 0) & (rows < h))[:, None] & ((cols >= 0) & (cols < w))[None, :]
    return (rows[:, None] * w + cols[None, :]).astype(np.int64), inside


def max_pool2d(b, x, kernel_size, stride, padding, dilation, ceil_mode):
    out, extra = _pool_geometry(x.shape, kernel_size, stride, padding, dilation, ceil_mode)
    xp = _padded(b, x, padding, extra, -math.inf)
    values = indices = real = None
    for off in _offsets(kernel_size, dilation):
        v = _window_slices(b, xp, off, stride, out)
        pos, inside = _positions(x.shape, off, stride, padding, out)
        pos, inside = b.from_numpy(pos), b.from_numpy(inside)
        if values is None:
            values = b.copy(v)
            indices = b.copy(b.broadcast_to(pos, v.shape))
            real = b.copy(b.broadcast_to(inside, v.shape))
            continue
        # strict: a tie keeps the earlier (row-major) offset; but padding never wins, so an
        # input element beats a padding tap even when both are -inf; an input NaN always wins
        # (the last one, PyTorch's index), so the window's value is NaN
        better = b.maximum(b.maximum(b.gt(v, values), b.mul(inside, b.ne(v, v))),
                           b.mul(inside, b.eq(real, False)))
        values = b.where(better, v, values)
        indices = b.where(better, pos, indices)
        real = b.where(better, inside, real)
    return values, indices


def max_pool2d_grad(b, grad_output, indices, input_shape, kernel_size, stride, padding, dilation,
                    ceil_mode):
    # the geometry is not needed: each window's index says where its gradient goes
    n, c, oh, ow = grad_output.shape
    h, w = input_shape[2], input_shape[3]
    index = b.reshape(indices, (n, c, oh * ow))
    values = b.reshape(grad_output, (n, c, oh * ow))
    return b.reshape(b.scatter_add(index, values, 2, h * w), input_shape)


def avg_pool2d_divisor(shape, kernel_size, stride, padding, ceil_mode, count_include_pad):
    """float64 (OH, OW): what each window's sum is divided by (PyTorch's rule: windows count
    the padding when count_include_pad, but never the part past the padding)."""
    sizes = []
    for size, k, s, p, o in zip(shape[2:], kernel_size, stride, padding,
                                _pool_geometry(shape, kernel_size, stride, padding, (1, 1),
                                               ceil_mode)[0], strict=True):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, size + p)
        if count_include_pad:
            sizes.append(end - start)
        else:
            sizes.append(np.minimum(end, size) - np.maximum(start, 0))
    return (sizes[0][:, None] * sizes[1][None, :]).astype(np.float64)


def avg_pool2d(b, x, kernel_size, stride, padding, ceil_mode, count_include_pad):
    out, extra = _pool_geometry(x.shape, kernel_size, stride, padding, (1, 1), ceil_mode)
    xp = _padded(b, x, padding, extra, 0)
    total = None
    for off in _offsets(kernel_size, (1, 1)):
        v = _window_slices(b, xp, off, stride, out)
        total = b.copy(v) if total is None else b.add(total, v)
    divisor = avg_pool2d_divisor(x.shape, kernel_size, stride, padding, ceil_mode,
                                 count_include_pad)
    return b.div(total, b.from_numpy(divisor.astype(x.dtype)))


def avg_pool2d_grad(b, grad_output, input_shape, kernel_size, stride, padding, ceil_mode,
                    count_include_pad):
    n, c, h, w = input_shape
    out, extra = _pool_geometry(input_shape, kernel_size, stride, padding, (1, 1), ceil_mode)
    divisor = avg_pool2d_divisor(input_shape, kernel_size, stride, padding, ceil_mode,
                                 count_include_pad)
    g = b.div(grad_output, b.from_numpy(divisor.astype(grad_output.dtype)))
    (ph, pw), (eh, ew) = padding, extra
    acc = b.full((n, c, h + 2 * ph + eh, w + 2 * pw + ew), 0, grad_output.dtype)
    for off in _offsets(kernel_size, (1, 1)):
        view = _window_slices(b, acc, off, stride, out)
        b.assign(view, b.add(view, g))
    return b.slice(acc, (slice(0, n, 1), slice(0, c, 1), slice(ph, ph + h, 1),
                         slice(pw, pw + w, 1)))


# ---- softmax ----------------------------------------------------------------------------------


def log_softmax(b, x, axis):
    shifted = b.sub(x, b.max(x, (axis,), True))
    return b.sub(shifted, b.log(b.sum(b.exp(shifted), (axis,), True)))


def nll_loss(b, input, target, ignore_index, reduction):
    # the same primitives, in the same order, as the composed nll_loss of ops/loss.py
    n = input.shape[0]
    valid = b.ne(target, ignore_index)
    safe = b.where(valid, target, 0)
    picked = b.reshape(b.gather(input, b.reshape(safe, (n, 1)), 1), (n,))
    weight = b.astype(valid, input.dtype)
    # an ignored label adds exactly 0 (not -x * 0, which is NaN for an infinite x)
    loss = b.where(valid, b.neg(picked), b.full((), 0, input.dtype))
    if reduction == "none":
        return loss
    total = b.sum(loss, (0,), False)
    return total if reduction == "sum" else b.div(total, b.sum(weight, (0,), False))


def nll_loss_grad(b, grad_output, target, classes, ignore_index, reduction):
    n = target.shape[0]
    valid = b.ne(target, ignore_index)
    safe = b.where(valid, target, 0)
    weight = b.astype(valid, grad_output.dtype)
    if reduction == "none":
        g = grad_output
    elif reduction == "sum":
        g = b.broadcast_to(grad_output, (n,))
    else:
        g = b.broadcast_to(b.div(grad_output, b.sum(weight, (0,), False)), (n,))
    # an ignored label gets exactly 0, even when "mean" divides by a count of 0 (PyTorch)
    values = b.where(valid, b.neg(g), b.full((), 0, grad_output.dtype))
    return b.scatter_add(b.reshape(safe, (n, 1)), b.reshape(values, (n, 1)), 1, classes)


# ---- optimizer steps (in place) ---------------------------------------------------------------


def sgd_step(b, param, grad, momentum_buffer, lr, momentum, dampening, nesterov, weight_decay,
             first_step):
    g = b.add(grad, b.mul(param, weight_decay)) if weight_decay else grad
    if momentum:
        if first_step:
            b.assign(momentum_buffer, g)
        else:
            b.assign(momentum_buffer, b.add(b.mul(momentum_buffer, momentum),
                                            b.mul(g, 1 - dampening)))
        g = b.add(g, b.mul(momentum_buffer, momentum)) if nesterov else momentum_buffer
    b.assign(param, b.sub(param, b.mul(g, lr)))


def rmsprop_step(b, param, grad, square_avg, grad_avg, momentum_buffer, lr, alpha, eps,
                 momentum, weight_decay):
    g = b.add(grad, b.mul(param, weight_decay)) if weight_decay else grad
    b.assign(square_avg, b.add(b.mul(square_avg, alpha), b.mul(b.mul(g, g), 1 - alpha)))
    if grad_avg is not None:
        b.assign(grad_avg, b.add(b.mul(grad_avg, alpha), b.mul(g, 1 - alpha)))
        avg = b.add(b.sqrt(b.sub(square_avg, b.mul(grad_avg, grad_avg))), eps)
    else:
        avg = b.add(b.sqrt(square_avg), eps)
    if momentum_buffer is not None:
        b.assign(momentum_buffer, b.add(b.mul(momentum_buffer, momentum), b.div(g, avg)))
        b.assign(param, b.sub(param, b.mul(momentum_buffer, lr)))
    else:
        b.assign(param, b.sub(param, b.mul(b.div(g, avg), lr)))


def adam_step(b, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1, beta2,
              eps, weight_decay, decoupled_weight_decay):
    g = grad
    if weight_decay and decoupled_weight_decay:
        b.assign(param, b.mul(param, 1 - lr * weight_decay))
    elif weight_decay:
        g = b.add(grad, b.mul(param, weight_decay))
    b.assign(exp_avg, b.add(b.mul(exp_avg, beta1), b.mul(g, 1 - beta1)))
    b.assign(exp_avg_sq, b.add(b.mul(exp_avg_sq, beta2), b.mul(b.mul(g, g), 1 - beta2)))
    second = exp_avg_sq
    if max_exp_avg_sq is not None:
        b.assign(max_exp_avg_sq, b.maximum(max_exp_avg_sq, exp_avg_sq))
        second = max_exp_avg_sq
    bias_correction1 = 1 - beta1 ** step
    bias_correction2 = 1 - beta2 ** step
    denom = b.add(b.div(b.sqrt(second), math.sqrt(bias_correction2)), eps)
    b.assign(param, b.sub(param, b.mul(b.div(exp_avg, denom), lr / bias_correction1)))
