"""An edge-case table (issue 12): size-0 and 0-d tensors, NaN and inf, dtype promotion,
integer ops and bad inputs. Each case is written once against a tiny shared API, run with
ndlite and compared with its written expectation, and with PyTorch as well where it is
installed (the project's venv has none: those comparisons skip)."""

import math

import numpy as np
import pytest

import ndlite

NAN, INF = math.nan, math.inf


class _Lib:
    def __init__(self, mod):
        self.mod = mod
        self.F = mod.nn.functional

    def t(self, values, dtype=None):
        dtype = getattr(self.mod, dtype) if dtype else None
        return self.mod.tensor(values, dtype=dtype)

    def zeros(self, *shape):
        return self.mod.zeros(*shape)


# (name, case(lib) -> tensor, expected: a list of values, a (shape, dtype) pair, or an error)
CASES = [
    ("sum of size 0", lambda m: m.zeros(0, 3).sum(0), [0.0, 0.0, 0.0]),
    ("mean of 0-d", lambda m: m.t(2.5).mean(), 2.5),
    ("logsumexp over an empty dim", lambda m: m.zeros(2, 0).logsumexp(1), [-INF, -INF]),
    ("matmul over an empty inner dim", lambda m: m.zeros(2, 0) @ m.zeros(0, 1), [[0.0], [0.0]]),
    ("max of 0-d along 0", lambda m: m.t(2.5).amax(0), 2.5),
    ("argmax of 0-d", lambda m: m.t(2.5).argmax(0), 0),
    ("softmax of empty", lambda m: m.F.softmax(m.zeros(2, 0), 1), ((2, 0), "float32")),
    ("cat of empty", lambda m: m.mod.cat([m.zeros(0, 2), m.t([[1.0, 2.0]])]), [[1.0, 2.0]]),
    ("max of NaN", lambda m: m.t([1.0, NAN, 3.0]).amax(), NAN),
    ("maximum with NaN", lambda m: m.mod.maximum(m.t([1.0, NAN]), m.t([NAN, 0.0])), [NAN, NAN]),
    ("relu of -inf and NaN", lambda m: m.t([-INF, NAN, INF]).relu(), [0.0, NAN, INF]),
    ("exp of -inf", lambda m: m.t([-INF]).exp(), [0.0]),
    ("log of 0", lambda m: m.t([0.0]).log(), [-INF]),
    ("sigmoid of +-inf", lambda m: m.t([-INF, INF]).sigmoid(), [0.0, 1.0]),
    ("float32 + 0-d float64", lambda m: m.t([1.0]) + m.t(2.0, "float64"), ((1,), "float32")),
    ("int32 + 0-d int64", lambda m: m.t([1], "int32") + m.t(2), ((1,), "int32")),
    ("int + 0-d float64", lambda m: m.t([1]) + m.t(0.5, "float64"), ((1,), "float64")),
    ("int + float", lambda m: m.t([1]) + 0.5, [1.5]),
    ("bool + bool", lambda m: m.t([True]) + m.t([True]), [True]),
    ("int32 * int32 stays int32", lambda m: m.t([7], "int32") * m.t([-2], "int32"),
     ((1,), "int32")),
    ("int ** negative tensor", lambda m: m.t([1, -1, 2]) ** m.t([-1, -1, -1]), [1, -1, 0]),
    ("int true division", lambda m: m.t([1, 2]) / m.t([2, 2]), [0.5, 1.0]),
    ("bool ** bool", lambda m: m.t([True]) ** m.t([True]), RuntimeError),
    ("sum dim out of range", lambda m: m.t(1.5).sum(5), IndexError),
    ("reshape to a wrong size", lambda m: m.zeros(6).reshape(4), RuntimeError),
    ("matmul shape mismatch", lambda m: m.zeros(2, 3) @ m.zeros(2, 3), RuntimeError),
    ("bce target out of range",
     lambda m: m.F.binary_cross_entropy(m.t([0.5]), m.t([2.0])), RuntimeError),
    ("bce NaN input", lambda m: m.F.binary_cross_entropy(m.t([NAN]), m.t([1.0])), RuntimeError),
    ("gather result takes index shape",
     lambda m: m.mod.gather(m.t([[1.0, 2.0], [3.0, 4.0]]), 1, m.t([[1]])), [[2.0]]),
]

# ndlite raises its own typed errors where PyTorch raises RuntimeError or IndexError
_NDLITE_ERRORS = {RuntimeError: (RuntimeError, ValueError, TypeError), IndexError: (IndexError,
                                                                                   ValueError)}


def _check(lib, case, expected, ndlite_side: bool):
    if isinstance(expected, type) and issubclass(expected, Exception):
        errors = _NDLITE_ERRORS.get(expected, expected) if ndlite_side else expected
        with pytest.raises(errors):
            case(lib)
        return
    out = case(lib)
    if isinstance(expected, tuple):
        shape, dtype = expected
        assert tuple(out.shape) == shape
        assert str(out.dtype).replace("torch.", "") == dtype
        return
    got = np.asarray(out.tolist() if out.dim() else out.item(), dtype=np.float64)
    np.testing.assert_array_equal(got, np.asarray(expected, dtype=np.float64))


@pytest.mark.parametrize(("name", "case", "expected"), CASES, ids=[c[0] for c in CASES])
def test_edge_case_in_ndlite(name, case, expected):
    _check(_Lib(ndlite), case, expected, ndlite_side=True)


@pytest.mark.parametrize(("name", "case", "expected"), CASES, ids=[c[0] for c in CASES])
def test_edge_case_expectation_is_pytorchs(name, case, expected):
    torch = pytest.importorskip("torch")
    _check(_Lib(torch), case, expected, ndlite_side=False)
