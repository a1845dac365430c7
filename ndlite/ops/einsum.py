"""einsum over the ops below it: each operand's repeated letters (traces, diagonals) are taken
with a mask, letters that appear in one operand only and not in the output are summed first,
and two operands contract through one batched matmul (batch letters, the left operand's own,
the contracted ones, the right operand's own), so attention's `bhqd,bhkd->bhqk` costs what
`q @ k.mT` does. More than two operands contract left to right; `...` stands for the
broadcast dims.
"""

from __future__ import annotations

import numpy as np

from ..creation import tensor as make_tensor
from ..errors import ShapeError
from ..tensor import Tensor
from .linalg import matmul
from .movement import expand, permute, reshape
from .reduce import sum
from .registry import Spec, declare
from .samples import EINSUM

_SPARE = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _parse(equation: str, operands) -> tuple[list[str], str]:
    equation = equation.replace(" ", "")
    lhs, arrow, out = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ShapeError(f"einsum: {equation!r} names {len(terms)} operands, "
                         f"got {len(operands)}")
    dots = max((t.ndim - len(term.replace("...", "")) for term, t in zip(terms, operands)
                if "..." in term), default=0)
    fill = _SPARE[:dots]
    expanded = []
    for term, t in zip(terms, operands):
        if "..." in term:
            n = t.ndim - len(term.replace("...", ""))
            term = term.replace("...", fill[dots - n:])
        if len(term) != t.ndim or not term.isalpha():
            raise ShapeError(f"einsum: subscripts {term!r} do not fit an operand of shape "
                             f"{t.shape}")
        expanded.append(term)
    if not arrow:  # implicit output: letters seen once, in alphabetical order
        letters = "".join(expanded)
        out = "..." * bool(dots) + "".join(sorted(c for c in set(letters) - set(fill)
                                                  if letters.count(c) == 1))
    out = out.replace("...", fill)
    for c in out:
        if not any(c in term for term in expanded):
            raise ShapeError(f"einsum: output letter {c!r} is in no operand of {equation!r}")
    return expanded, out


def _diagonal(t: Tensor, term: str) -> tuple[Tensor, str]:
    """Repeated letters of one operand: keep the diagonal (mask, then sum one copy out)."""
    while len(set(term)) < len(term):
        c = next(c for c in term if term.count(c) > 1)
        i = term.index(c)
        j = term.index(c, i + 1)
        if t.shape[i] != t.shape[j]:
            raise ShapeError(f"einsum: letter {c!r} has sizes {t.shape[i]} and {t.shape[j]}")
        eye = np.eye(t.shape[i], dtype=bool).reshape(
            [t.shape[i] if d == i else t.shape[j] if d == j else 1 for d in range(t.ndim)])
        t = t * make_tensor(eye, backend=t._backend).to(t.dtype)
        t = sum(t, j)
        term = term[:j] + term[j + 1:]
    return t, term


def _sum_private(t: Tensor, term: str, keep: str) -> tuple[Tensor, str]:
    drop = [i for i, c in enumerate(term) if c not in keep]
    if drop:
        t = sum(t, tuple(drop))
        term = "".join(c for c in term if c in keep)
    return t, term


def _size(letters: str, sizes: dict) -> int:
    return int(np.prod([sizes[c] for c in letters], dtype=np.int64))


def _contract(a: Tensor, ta: str, b: Tensor, tb: str, keep: str) -> tuple[Tensor, str]:
    sizes = {}
    for t, term in ((a, ta), (b, tb)):
        for c, n in zip(term, t.shape):
            if sizes.get(c, 1) != n and n != 1 and sizes.get(c, 1) != 1:
                raise ShapeError(f"einsum: letter {c!r} has sizes {sizes[c]} and {n}")
            sizes[c] = max(sizes.get(c, 1), n)
    batch = "".join(c for c in ta if c in tb and c in keep)
    summed = "".join(c for c in ta if c in tb and c not in keep)
    left = "".join(c for c in ta if c not in tb)
    right = "".join(c for c in tb if c not in ta)
    a = expand(permute(a, tuple(ta.index(c) for c in batch + left + summed)),
               tuple(sizes[c] for c in batch + left + summed))
    b = expand(permute(b, tuple(tb.index(c) for c in batch + summed + right)),
               tuple(sizes[c] for c in batch + summed + right))
    shape_b = tuple(sizes[c] for c in batch)
    a = reshape(a, shape_b + (_size(left, sizes), _size(summed, sizes)))
    b = reshape(b, shape_b + (_size(summed, sizes), _size(right, sizes)))
    out = matmul(a, b)
    return reshape(out, shape_b + tuple(sizes[c] for c in left + right)), batch + left + right


def einsum(equation: str, *operands) -> Tensor:
    """Einstein summation, as torch.einsum: `einsum("bij,bjk->bik", a, b)`, traces ("ii"),
    diagonals ("ii->i"), outer products ("i,j->ij"), transposes, `...` for broadcast dims.

    >>> import ndlite
    >>> a = ndlite.ones(2, 3)
    >>> ndlite.einsum("ij,kj->ik", a, a).tolist()
    [[3.0, 3.0], [3.0, 3.0]]
    """
    if len(operands) == 1 and isinstance(operands[0], (tuple, list)):
        operands = tuple(operands[0])
    if not operands or not all(isinstance(t, Tensor) for t in operands):
        raise TypeError("einsum: operands must be tensors")
    terms, out = _parse(equation, operands)
    tensors = []
    for t, term in zip(operands, terms):
        t, term = _diagonal(t, term)
        others = out + "".join(x for x in terms if x is not term)
        tensors.append(_sum_private(t, term, others))
    t, term = tensors[0]
    for k, (u, uterm) in enumerate(tensors[1:], start=1):
        rest = out + "".join(x for _, x in tensors[k + 1:])
        t, term = _contract(t, term, u, uterm, rest)
    t, term = _sum_private(t, term, out)
    if len(set(out)) != len(out):
        raise ShapeError(f"einsum: output {out!r} repeats a letter")
    return permute(t, tuple(term.index(c) for c in out)) if term != out else t


def _case(equation: str):
    return lambda *ts: einsum(equation, *ts)


declare("einsum", Spec(EINSUM, call=lambda *ts, equation: einsum(equation, *ts)), einsum)
