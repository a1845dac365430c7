"""Elementwise math of one tensor, one line each: name, forward over a backend primitive,
backward in Tensor ops, and the spec that tests it (read it like a table of derivatives).

`node.saved[0]` is the input and `node.output()` the result, where the declaration saves them.
"""

from __future__ import annotations

from ..graph import mode
from ..tensor import Tensor
from .dispatch import unary
from .elementwise import where
from .registry import EXACT, TRANSCENDENTAL, Spec, define
from .samples import UNARY

T = TRANSCENDENTAL
POSITIVE = (0.05, 4.0)


def _function(op, doc: str):
    def apply(x: Tensor) -> Tensor:
        return unary(op, x)

    apply.__name__ = apply.__qualname__ = op.name
    apply.__doc__ = doc
    apply.op = op
    op.function = apply
    return apply


def _relu_grad(node, grad):
    # relu'(0) = 0: the gradient passes only where the output is positive
    out = node.output()
    if not mode.enabled and out._backend is grad._backend and out.dtype == grad.dtype:
        # first order: one backend call on the buffers (protocol relu_grad: bitwise the
        # where(out > 0, grad, 0) below), without two tensor ops
        b = grad._backend
        return Tensor._make(b.relu_grad(grad._data, out._data), b)
    return where(out > 0, grad, 0.0)


def _sigmoid_grad(node, grad):
    out = node.output()
    return grad * out * (1 - out)


def _tanh_grad(node, grad):
    out = node.output()
    return grad * (1 - out * out)


neg = _function(define(
    "neg", lambda b, x: b.neg(x), lambda n, g: -g,
    spec=Spec(UNARY, tol=EXACT), dtype_rule="no_bool"), "-x")
exp = _function(define(
    "exp", lambda b, x: b.exp(x), lambda n, g: g * n.output(), save="output",
    spec=Spec(UNARY, tol=T, second_order=True), dtype_rule="float"), "e ** x")
log = _function(define(
    "log", lambda b, x: b.log(x), lambda n, g: g / n.saved[0], save="inputs",
    spec=Spec(UNARY, tol=T, domain=POSITIVE), dtype_rule="float"), "Natural logarithm.")
sqrt = _function(define(
    "sqrt", lambda b, x: b.sqrt(x), lambda n, g: g / (n.output() * 2), save="output",
    spec=Spec(UNARY, tol=T, domain=POSITIVE, half_tol=EXACT), dtype_rule="float"),
    "Square root.")
tanh = _function(define(
    "tanh", lambda b, x: b.tanh(x), _tanh_grad, save="output",
    spec=Spec(UNARY, tol=T, second_order=True), dtype_rule="float"), "Hyperbolic tangent.")
sigmoid = _function(define(
    "sigmoid", lambda b, x: b.sigmoid(x), _sigmoid_grad, save="output",
    spec=Spec(UNARY, tol=T, domain=(-6.0, 6.0)), dtype_rule="float"),
    "1 / (1 + e ** -x), computed without overflow.")
relu = _function(define(
    "relu", lambda b, x: b.relu(x), _relu_grad, save="output",
    spec=Spec(UNARY, tol=EXACT, kinks="zero"), dtype_rule="no_bool"), "max(x, 0)")
abs = _function(define(  # noqa: A001 - torch.abs
    "abs", lambda b, x: b.abs(x), lambda n, g: g * n.saved[0].sign(), save="inputs",
    spec=Spec(UNARY, tol=EXACT, kinks="zero"), dtype_rule="no_bool"), "|x|")
sign = _function(define(
    "sign", lambda b, x: b.sign(x), lambda n, g: g * 0,
    spec=Spec(UNARY, tol=EXACT, kinks="zero"), dtype_rule="no_bool"),
    "-1, 0 or 1 by the sign of x; its gradient is zero.")
