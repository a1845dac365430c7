"""Elementwise math and rounding with PyTorch's conventions, on every backend: the sign rules of
//, %, fmod and div(rounding_mode=) for negative operands, integer paths (the kit draws floats),
classifications with NaN/inf, and gradients the gradcheck cannot take across jumps."""

import numpy as np
import pytest

import ndlite

A = [-7.0, -6.0, -3.5, -0.5, 0.5, 3.5, 6.0, 7.0]


def _on(backend, values, dtype=None):
    return ndlite.tensor(values, dtype=dtype, backend=backend)


@pytest.mark.parametrize("divisor", [2.0, -2.0, 0.75, -3.0])
def test_float_division_signs_match_python(backend, divisor):
    x = _on(backend, A)
    assert (x // divisor).tolist() == [a // divisor for a in A]
    assert (x % divisor).tolist() == pytest.approx([a % divisor for a in A])
    assert ndlite.fmod(x, divisor).tolist() == pytest.approx(list(np.fmod(A, divisor)))
    trunc = ndlite.div(x, divisor, rounding_mode="trunc").tolist()
    assert trunc == [float(np.trunc(a / divisor)) for a in A]
    assert ndlite.div(x, divisor, rounding_mode="floor").tolist() == [a // divisor for a in A]


@pytest.mark.parametrize("divisor", [2, -2, 3, -4])
def test_integer_division_signs_match_python(backend, divisor):
    ints = [-7, -6, -1, 0, 1, 6, 7]
    x = _on(backend, ints)
    assert (x // divisor).dtype == ndlite.int64
    assert (x // divisor).tolist() == [a // divisor for a in ints]
    assert (x % divisor).tolist() == [a % divisor for a in ints]
    assert ndlite.fmod(x, divisor).tolist() == [int(np.fmod(a, divisor)) for a in ints]
    assert ndlite.div(x, divisor, rounding_mode="trunc").tolist() == [
        int(a / divisor) for a in ints]
    assert (7 // _on(backend, [2, -2])).tolist() == [3, -4]


def test_rounding_and_classification(backend):
    x = _on(backend, [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1.26])
    assert x.round().tolist() == [-2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 1.0]
    assert ndlite.round(x, decimals=1).tolist()[-1] == pytest.approx(1.3)
    assert x.floor().tolist()[:3] == [-3.0, -2.0, -1.0] and x.ceil().tolist()[3] == 1.0
    assert x.trunc().tolist()[0] == -2.0 and x.frac().tolist()[0] == -0.5
    ints = _on(backend, [3, -4])
    assert ints.floor().dtype == ndlite.int64 and ints.floor().tolist() == [3, -4]
    special = _on(backend, [1.0, float("nan"), float("inf"), -float("inf")])
    assert ndlite.isnan(special).tolist() == [False, True, False, False]
    assert ndlite.isinf(special).tolist() == [False, False, True, True]
    assert special.isfinite().tolist() == [True, False, False, False]


def test_trigonometry_and_logs_against_numpy(backend):
    v = np.array([0.1, 0.4, 0.9], np.float32)
    x = _on(backend, v)
    for name, ref in [("sin", np.sin), ("cos", np.cos), ("tan", np.tan), ("asin", np.arcsin),
                      ("acos", np.arccos), ("atan", np.arctan), ("sinh", np.sinh),
                      ("cosh", np.cosh), ("log1p", np.log1p), ("expm1", np.expm1),
                      ("log2", np.log2), ("log10", np.log10), ("exp2", np.exp2)]:
        np.testing.assert_allclose(getattr(x, name)().numpy(), ref(v), rtol=1e-6, err_msg=name)
    np.testing.assert_allclose(ndlite.erfc(x).numpy(), [0.8875371, 0.5716076, 0.2030918],
                               rtol=1e-6)
    np.testing.assert_allclose(ndlite.atan2(x, -x).numpy(), np.arctan2(v, -v), rtol=1e-6)


def test_gradients_of_remainder_and_fmod():
    a = ndlite.tensor([-3.5, 3.5], requires_grad=True)
    b = ndlite.tensor([2.0, -2.0], requires_grad=True)
    (a % b).sum().backward()
    assert a.grad.tolist() == [1.0, 1.0] and b.grad.tolist() == [2.0, 2.0]  # -floor(a / b)
    a.grad = b.grad = None
    ndlite.fmod(a, b).sum().backward()
    assert b.grad.tolist() == [1.0, 1.0]  # -trunc(a / b)


def test_activations_match_their_definitions():
    x = ndlite.tensor([-30.0, -1.0, 0.0, 2.0, 30.0])
    f = ndlite.nn.functional
    np.testing.assert_allclose(f.softplus(x).numpy(), np.logaddexp(0, x.numpy()), rtol=1e-6)
    np.testing.assert_allclose(f.logsigmoid(x).numpy(), -np.logaddexp(0, -x.numpy()), rtol=1e-6)
    np.testing.assert_allclose(f.silu(x).numpy(), x.numpy() / (1 + np.exp(-x.numpy())),
                               rtol=1e-6)
    assert f.elu(x).tolist()[2:] == [0.0, 2.0, 30.0]
    assert f.hardtanh(x).tolist() == [-1.0, -1.0, 0.0, 1.0, 1.0]
    with pytest.raises(ndlite.DTypeError, match="softplus"):
        f.softplus(ndlite.tensor([True]))
