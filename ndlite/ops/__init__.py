"""Differentiable ops, grouped by kind. Each op declares its forward (backend primitives),
its backward (Tensor ops) and its test spec once, in the registry (`OPS`)."""

from . import elementwise, indexing, inplace, linalg, movement, reduce  # noqa: I001 (core first)
from . import activation, conv, loss, pool  # the neural-network ops, built on the core
from .registry import EXACT, OPS, SCALED, TRANSCENDENTAL, Op, Spec, declare, register, resolve

__all__ = ["OPS", "Op", "Spec", "register", "declare", "resolve", "SCALED", "EXACT",
           "TRANSCENDENTAL", "elementwise", "indexing", "inplace", "linalg", "movement", "reduce",
           "activation", "conv", "loss", "pool"]
