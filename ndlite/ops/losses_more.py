"""More of torch.nn.functional's losses, composed from ops: smooth_l1_loss, huber_loss,
kl_div and cosine_similarity (the gradients come from
the ops they are made of)."""

from __future__ import annotations

from ..errors import ShapeError
from ..tensor import Tensor
from .autocast import autocast_op
from .cast import widened
from .elementwise import where
from .reduce import mean, sum
from .registry import TRANSCENDENTAL, Spec, declare
from .samples import BINARY, REGRESSION_LOSS
from .selection import vector_norm

REDUCTIONS = ("mean", "sum", "none")


def _reduce(loss: Tensor, reduction: str, op: str) -> Tensor:
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if reduction == "mean":
        return mean(loss)
    return sum(loss) if reduction == "sum" else loss


def _difference(input: Tensor, target: Tensor, op: str) -> Tensor:
    if input.shape != target.shape:
        raise ShapeError(f"{op}: input {input.shape} and target {target.shape} differ in shape")
    return input - target


@autocast_op("smooth_l1_loss")
def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                   reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target)."""
    d = _difference(input, target, "smooth_l1_loss")
    a = d.abs()
    if beta == 0:
        return _reduce(a, reduction, "smooth_l1_loss")
    near = a < beta
    held = where(near, d, 0.0)  # the square on |d| < beta only: an infinite d gets +-1, not NaN
    return _reduce(where(near, held * held * (0.5 / beta), a - 0.5 * beta), reduction,
                   "smooth_l1_loss")


@autocast_op("huber_loss")
def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean",
               delta: float = 1.0) -> Tensor:
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)."""
    d = _difference(input, target, "huber_loss")
    a = d.abs()
    near = a < delta
    held = where(near, d, 0.0)  # (as smooth_l1_loss: no 0 * inf in the unused square)
    return _reduce(where(near, held * held * 0.5, (a - 0.5 * delta) * delta), reduction,
                   "huber_loss")


def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None,
           reduction: str = "mean", log_target: bool = False) -> Tensor:
    """target (log target - input) pointwise, with input log-probabilities ("batchmean"
    divides the sum by the batch size, PyTorch's recommended reduction)."""
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = where(target > 0, target * (where(target > 0, target, 1.0).log() - input), 0.0)
    if reduction == "batchmean":
        return sum(loss) / (input.shape[0] if input.ndim else 1)
    return _reduce(loss, reduction, "kl_div")


@autocast_op("cosine_similarity")  # outside widened: float32 in a region
@widened
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps)) along dim, as PyTorch 2 computes
    it: each norm clamped for its value only (the gradient flows as if unclamped), so a zero
    vector gives PyTorch's finite gradient, not NaN."""
    n1, n2 = vector_norm(x1, 2, dim, True), vector_norm(x2, 2, dim, True)
    return sum(x1 / _floor(n1, eps) * (x2 / _floor(n2, eps)), dim)


def _floor(n: Tensor, eps: float) -> Tensor:
    """max(n, eps) in value, n in gradient (PyTorch clamps the norms under no_grad)."""
    held = n.detach()
    return n - held + held.clamp(min=eps)


declare("smooth_l1_loss", Spec(REGRESSION_LOSS, kinks="pair"), smooth_l1_loss)
declare("huber_loss", Spec(REGRESSION_LOSS, kinks="pair"), huber_loss)
declare("cosine_similarity", Spec(BINARY, tol=TRANSCENDENTAL, domain=(0.25, 2.0),
                                  call=lambda a, b: cosine_similarity(
                                      (a + b * 0).reshape(1, -1), (a + b * 1.5).reshape(1, -1))),
        cosine_similarity)
