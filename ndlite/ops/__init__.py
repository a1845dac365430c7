"""Differentiable ops, grouped by kind. Each op declares its forward (backend primitives),
its backward (Tensor ops) and its test spec once, in the registry (`OPS`).

The modules build on each other in this order, and import only what is above them here:
registry, samples -> cast -> dispatch (the apply path) -> calls -> elementwise (where, clone)
-> unary -> binary -> movement -> join -> gather -> views -> inplace -> indexing -> reduce
-> linalg -> activation -> conv -> pool -> loss -> normalization, then the families added for
PyTorch programs (issue 13): math -> rounding -> sorting -> selection -> einsum -> resample
-> transformer -> losses_more -> conv_more -> norms.
Backward formulas use Tensor methods and operators, which are bound once every op is loaded
(ndlite/methods.py).
"""

from . import (  # noqa: I001 - the order above
    registry,
    samples,
    cast,
    dispatch,
    elementwise,
    unary,
    binary,
    movement,
    join,
    gather,
    views,
    inplace,
    indexing,
    reduce,
    linalg,
    activation,
    conv,
    pool,
    loss,
    normalization,
    math,
    rounding,
    sorting,
    selection,
    einsum,
    resample,
    transformer,
    losses_more,
    recurrent,
    conv_more,
    norms,
)
from .registry import (
    EXACT,
    OPS,
    SCALED,
    TRANSCENDENTAL,
    Op,
    Spec,
    declare,
    define,
    implements,
    register,
    resolve,
)

__all__ = ["OPS", "Op", "Spec", "register", "declare", "define", "implements", "resolve",
           "SCALED", "EXACT", "TRANSCENDENTAL", "samples", "cast", "dispatch", "elementwise",
           "unary", "binary", "movement", "join", "gather", "views", "inplace", "indexing",
           "reduce", "linalg", "activation", "conv", "pool", "loss", "normalization", "math",
           "rounding", "sorting", "selection", "einsum", "resample", "transformer",
           "losses_more", "conv_more", "norms", "recurrent"]
