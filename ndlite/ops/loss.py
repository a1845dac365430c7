"""Losses, PyTorch's definitions: nll_loss, cross_entropy, mse_loss, l1_loss,
binary_cross_entropy, binary_cross_entropy_with_logits.

Each is composed from differentiable ops (log_softmax, gather, arithmetic, sums), so its
gradients, and gradients of those, come from the ops it is made of; the registry entries
below let the test kit gradcheck them. Labels are checked on the host before anything is
dispatched: a GPU would otherwise read out of bounds.
"""

from __future__ import annotations

from .. import bounds
from ..dtypes import int64, is_floating
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from . import samples
from .activation import log_softmax
from .autocast import autocast_op
from .binary import clamp, maximum
from .dispatch import broadcast_shapes, check_same_backend, nary
from .elementwise import where
from .gather import gather
from .registry import TRANSCENDENTAL, Op, Spec, declare
from .unary import exp, log

REDUCTIONS = ("mean", "sum", "none")


def _reduction(reduction: str, op: str) -> str:
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return reduction


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _float(t, name: str, op: str) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: {name} must be a tensor, got {type(t).__name__}")
    if not is_floating(t.dtype):
        raise DTypeError(f"{op}: {name} must be a floating tensor, got {t.dtype} "
                         f"(shape {t.shape})")


def _same_shape(input: Tensor, target: Tensor, op: str) -> None:
    if input.shape != target.shape:
        raise ShapeError(f"{op}: input of shape {input.shape} and target of shape "
                         f"{target.shape} must have the same shape")


# ---- class-index losses -----------------------------------------------------------------------


def _check_labels(input: Tensor, target: Tensor, ignore_index: int, op: str) -> None:
    """Class-index targets: an integer tensor of input's shape without the class dim (dim 1),
    every label in [0, C) or equal to ignore_index."""
    if not isinstance(target, Tensor):
        raise TypeError(f"{op}: target must be a tensor, got {type(target).__name__}")
    if target.dtype.kind not in "iu":
        raise DTypeError(f"{op}: expected class indices of an integer dtype as target, got "
                         f"{target.dtype} (shape {target.shape}); use .long(), or pass class "
                         "probabilities of the input's shape to cross_entropy")
    if input.ndim < 1:
        raise ShapeError(f"{op}: input must have a class dimension, got shape {input.shape}")
    expected = input.shape[:1] + input.shape[2:] if input.ndim >= 2 else ()
    if target.shape != expected:
        what = "batch size mismatch: " if input.ndim >= 2 and target.ndim >= 1 and \
            target.shape[0] != input.shape[0] else ""
        raise ShapeError(f"{op}: {what}input of shape {input.shape} needs a target of shape "
                         f"{expected}, got {target.shape}")
    classes = input.shape[1] if input.ndim >= 2 else input.shape[0]

    def check(labels):
        if labels.size and labels.min() >= 0 and labels.max() < classes:
            return  # every label in range: two reductions instead of five array ops
        bad = (labels != ignore_index) & ((labels < 0) | (labels >= classes))
        if bad.any():
            raise IndexError(f"{op}: target {int(labels[bad].flat[0])} is out of bounds for "
                             f"{classes} classes (input shape {input.shape}, ignore_index "
                             f"{ignore_index})")

    # a backend recording a replayable graph (CUDA graphs) runs the check before each replay;
    # labels known in range on the host are not read from the device (bounds.py)
    if not target.backend.defer_host_check(target.buffer, check) and not bounds.within(
            target, 0, classes - 1):
        check(target.backend.to_numpy(target.buffer))


def _check_weight(weight, classes: int, input: Tensor, op: str) -> None:
    if weight is None:
        return
    _float(weight, "weight", op)
    if weight.shape != (classes,):
        raise ShapeError(f"{op}: weight must have shape ({classes},) (one per class of input "
                         f"shape {input.shape}), got {weight.shape}")


class NllLoss(Op):
    """Unweighted nll_loss of (N, C) log-probabilities: one backend call (protocol.py
    nll_loss). It is linear in its input, and NllLossGrad is its adjoint, so each one is the
    other's gradient (gradients of any order). Not registered: nll_loss's spec tests it."""

    name = "nll_loss"

    @staticmethod
    def forward(b, input, *, target, ignore_index, reduction, classes):
        return b.nll_loss(input, target._data, ignore_index, reduction)

    @staticmethod
    def backward(node, grad):
        return _nll_apply(NllLossGrad, grad, node.params)


class NllLossGrad(Op):
    name = "nll_loss_grad"

    @staticmethod
    def forward(b, grad_output, *, target, ignore_index, reduction, classes):
        return b.nll_loss_grad(grad_output, target._data, classes, ignore_index, reduction)

    @staticmethod
    def backward(node, grad):
        return _nll_apply(NllLoss, grad, node.params)


def _nll_apply(op, x: Tensor, params: dict) -> Tensor:
    return nary(op, [x], **params)


def _nll(input: Tensor, target: Tensor, weight, ignore_index: int, reduction: str) -> Tensor:
    if weight is None and input.ndim == 2:  # the common case: one fused backend call
        check_same_backend("nll_loss", input, target)
        labels = target if target._data.dtype == int64 else target.long()  # no .to() call
        params = {"target": labels, "ignore_index": ignore_index,
                  "reduction": reduction, "classes": input.shape[1]}
        return _nll_apply(NllLoss, input, params)
    batched = input.ndim >= 2
    if not batched:  # one sample: (C,) with a 0-d target
        input, target = input.unsqueeze(0), target.reshape(1)
    valid = target != ignore_index
    safe = where(valid, target, 0).long()
    picked = gather(input, 1, safe.unsqueeze(1)).squeeze(1)
    if weight is not None:
        w = weight.to(input.dtype)[safe] * valid.to(input.dtype)
    else:
        w = valid.to(input.dtype)
    if reduction == "mean":
        # divide the weights first: with every label ignored the loss is 0/0 = NaN, as in
        # PyTorch, but the gradient 0 (not NaN times 0); an ignored label adds exactly 0
        total = w.sum()
        share = w / where(total == 0, 1.0, total)
        return where(valid, -picked * share, 0.0).sum() + (total * 0 / total).detach()
    loss = where(valid, -picked * w, 0.0)
    if reduction == "none":
        return loss if batched else loss.reshape(())
    return loss.sum()


@autocast_op("nll_loss")
def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """The negative log-likelihood of class indices `target` (N,) or (N, d1, ...) under
    log-probabilities `input` (N, C) or (N, C, d1, ...); with `weight`, a weight per class;
    'mean' divides by the summed weights of the targets not equal to `ignore_index`.

    >>> import ndlite
    >>> logp = ndlite.tensor([[0.0, -1.0], [-2.0, 0.0]])
    >>> ndlite.nn.functional.nll_loss(logp, ndlite.tensor([1, 0])).item()
    1.5
    """
    op = "nll_loss"
    _reduction(reduction, op)
    _float(input, "input", op)
    _check_labels(input, target, ignore_index, op)
    _check_weight(weight, input.shape[1] if input.ndim >= 2 else input.shape[0], input, op)
    return _nll(input, target, weight, ignore_index, reduction)


@autocast_op("cross_entropy")
def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy between logits `input` (N, C) or (N, C, d1, ...) and a target of class
    indices (like nll_loss) or of class probabilities (input's shape), with PyTorch's
    `weight`, `ignore_index` and `label_smoothing` semantics.

    >>> import ndlite
    >>> logits = ndlite.tensor([[2.0, 0.0, 0.0]])
    >>> round(ndlite.nn.functional.cross_entropy(logits, ndlite.tensor([0])).item(), 4)
    0.2395
    """
    op = "cross_entropy"
    _reduction(reduction, op)
    _float(input, "input", op)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{op}: label_smoothing must be between 0.0 and 1.0, got "
                         f"{label_smoothing}")
    class_dim = 1 if input.ndim >= 2 else 0
    classes = input.shape[class_dim] if input.ndim else 0
    _check_weight(weight, classes, input, op)
    if isinstance(target, Tensor) and is_floating(target.dtype):
        return _cross_entropy_probabilities(input, target, weight, reduction, label_smoothing)
    _check_labels(input, target, ignore_index, op)
    logp = log_softmax(input, class_dim)
    nll = _nll(logp, target, weight, ignore_index, reduction)
    if label_smoothing == 0.0:
        return nll
    # PyTorch: (1 - eps) * nll + eps / C * (the loss against the uniform distribution)
    w = 1.0 if weight is None else \
        weight.to(input.dtype).reshape((classes,) + (1,) * (input.ndim - class_dim - 1))
    smooth = -(logp * w).sum(class_dim)
    valid = (target != ignore_index).to(input.dtype)
    smooth = smooth * valid
    if reduction == "mean":
        if weight is None:
            smooth = smooth.sum() / valid.sum()
        else:
            safe = where(target != ignore_index, target, 0).long()
            smooth = smooth.sum() / (weight.to(input.dtype)[safe] * valid).sum()
    elif reduction == "sum":
        smooth = smooth.sum()
    return nll * (1.0 - label_smoothing) + smooth * (label_smoothing / classes)


def _cross_entropy_probabilities(input, target, weight, reduction, label_smoothing):
    op = "cross_entropy"
    if target.shape != input.shape:
        raise ShapeError(f"{op}: class-probability targets must have the input's shape "
                         f"{input.shape}, got {target.shape}")
    class_dim = 1 if input.ndim >= 2 else 0
    classes = input.shape[class_dim]
    if label_smoothing > 0.0:
        target = target * (1.0 - label_smoothing) + label_smoothing / classes
    logp = log_softmax(input, class_dim)
    terms = logp * target.to(input.dtype)
    if weight is not None:
        terms = terms * weight.to(input.dtype).reshape((classes,) +
                                                       (1,) * (input.ndim - class_dim - 1))
    loss = -terms.sum(class_dim)
    if reduction == "mean":
        return loss.sum() / max(input.numel() // classes, 1)
    return _reduce(loss, reduction)


# ---- regression and binary losses -------------------------------------------------------------


@autocast_op("mse_loss")
def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean squared error (or summed, or per element).

    >>> import ndlite
    >>> ndlite.nn.functional.mse_loss(ndlite.tensor([1.0, 3.0]), ndlite.tensor([0.0, 0.0])).item()
    5.0
    """
    op = "mse_loss"
    _reduction(reduction, op)
    _float(input, "input", op)
    _float(target, "target", op)
    _same_shape(input, target, op)
    diff = input - target
    return _reduce(diff * diff, reduction)


@autocast_op("l1_loss")
def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean absolute error (or summed, or per element).

    >>> import ndlite
    >>> ndlite.nn.functional.l1_loss(ndlite.tensor([1.0, -3.0]), ndlite.tensor([0.0, 0.0])).item()
    2.0
    """
    op = "l1_loss"
    _reduction(reduction, op)
    _float(input, "input", op)
    _float(target, "target", op)
    _same_shape(input, target, op)
    return _reduce((input - target).abs(), reduction)


def _binary_weight(weight, input: Tensor, op: str):
    if weight is None:
        return None
    _float(weight, "weight", op)
    if broadcast_shapes(weight.shape, input.shape, op) != input.shape:
        raise ShapeError(f"{op}: weight of shape {weight.shape} does not broadcast to the "
                         f"input's shape {input.shape}")
    return weight.to(input.dtype)


class BinaryCrossEntropy(Op):
    """-(t log(p) + (1 - t) log(1 - p)) per element, each log clamped at -100; PyTorch's
    gradient, finite at p = 0 and p = 1 too: (p - t) / max(p (1 - p), 1e-12). Not
    registered: binary_cross_entropy's spec tests it."""

    name = "binary_cross_entropy"
    save_inputs = True

    @staticmethod
    def forward(b, p, t):
        one = b.full((), 1, p.dtype)
        floor = b.full((), -100, p.dtype)
        log_p = b.maximum(b.log(p), floor)
        log_q = b.maximum(b.log(b.sub(one, p)), floor)
        return b.neg(b.add(b.mul(t, log_p), b.mul(b.sub(one, t), log_q)))

    @staticmethod
    def backward(node, grad):
        p, t = node.saved
        grad_p = grad_t = None
        if node.next[0] is not None:
            grad_p = grad * (p - t) / clamp((1 - p) * p, min=1e-12)
        if node.next[1] is not None:
            grad_t = grad * (clamp(log(1 - p), min=-100.0) - clamp(log(p), min=-100.0))
        return grad_p, grad_t


@autocast_op("binary_cross_entropy")
def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         reduction: str = "mean") -> Tensor:
    """-w (t log(x) + (1 - t) log(1 - x)) for probabilities x in [0, 1]; each log is clamped
    at -100, as in PyTorch, so a certain wrong answer costs 100, not infinity.

    >>> import ndlite
    >>> x, t = ndlite.tensor([0.5]), ndlite.tensor([1.0])
    >>> round(ndlite.nn.functional.binary_cross_entropy(x, t).item(), 4)
    0.6931
    """
    op = "binary_cross_entropy"
    _reduction(reduction, op)
    _float(input, "input", op)
    _float(target, "target", op)
    _same_shape(input, target, op)
    for name, t in (("input", input), ("target", target)):
        values = t._backend.to_numpy(t.detach()._data)
        if values.size and not ((values >= 0) & (values <= 1)).all():  # NaN is outside
            raise ValueError(f"{op}: all elements of {name} should be between 0 and 1 (shape "
                             f"{t.shape}); apply sigmoid first, or use "
                             "binary_cross_entropy_with_logits")
    w = _binary_weight(weight, input, op)
    check_same_backend(op, input, target)
    loss = nary(BinaryCrossEntropy, [input, target.to(input.dtype)])
    if w is not None:
        loss = loss * w
    return _reduce(loss, reduction)


@autocast_op("binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """binary_cross_entropy(sigmoid(x), t), computed stably from the logits x; `pos_weight`
    (broadcast over the last dim) weighs the positive term.

    >>> import ndlite
    >>> x, t = ndlite.tensor([0.0]), ndlite.tensor([1.0])
    >>> round(ndlite.nn.functional.binary_cross_entropy_with_logits(x, t).item(), 4)
    0.6931
    """
    op = "binary_cross_entropy_with_logits"
    _reduction(reduction, op)
    _float(input, "input", op)
    _float(target, "target", op)
    _same_shape(input, target, op)
    w = _binary_weight(weight, input, op)
    target = target.to(input.dtype)
    # softplus(-x) = m + log(exp(-m) + exp(-x - m)) with m = max(-x, 0): no overflow, and the
    # kink of m cancels exactly, so second derivatives are right at x = 0 too
    m = maximum(-input, 0.0)
    softplus_neg = m + log(exp(-m) + exp(-input - m))
    if pos_weight is not None:
        pw = _binary_weight(pos_weight, input, op)
        loss = (1 - target) * input + ((pw - 1) * target + 1) * softplus_neg
    else:
        loss = (1 - target) * input + softplus_neg
    if w is not None:
        loss = loss * w
    return _reduce(loss, reduction)


declare("nll_loss", Spec(samples.NLL_LOSS), nll_loss)
declare("cross_entropy", Spec(samples.CROSS_ENTROPY, tol=TRANSCENDENTAL,
                              second_order=True), cross_entropy)
declare("mse_loss", Spec(samples.REGRESSION_LOSS, second_order=True), mse_loss)
declare("l1_loss", Spec(samples.REGRESSION_LOSS, kinks="pair"), l1_loss)
declare("binary_cross_entropy",
        Spec(samples.BINARY_LOSS, tol=TRANSCENDENTAL, domain=(0.05, 0.95)), binary_cross_entropy)
declare("binary_cross_entropy_with_logits",
        Spec(samples.BINARY_LOSS, tol=TRANSCENDENTAL,
             second_order=True, params={"logits": True}), binary_cross_entropy_with_logits)
