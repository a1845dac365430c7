"""float16 / bfloat16: names, promotion (PyTorch's table), casts and their gradients, modules."""

import numpy as np
import pytest

import ndlite
from ndlite.dtypes import (
    as_dtype,
    bool_,
    finfo,
    float16,
    float32,
    float64,
    int32,
    int64,
    is_floating,
    promote,
)

needs_bf16 = pytest.mark.skipif(not isinstance(ndlite.bfloat16, np.dtype),
                                reason="bfloat16 needs ml_dtypes (pip install 'ndlite[half]')")


def test_names():
    assert ndlite.float16 is ndlite.half is float16 is as_dtype("half") is as_dtype("float16")
    assert as_dtype(np.float16) is float16
    assert is_floating(float16) and not is_floating(int64) and not is_floating(bool_)
    assert float(finfo(float16).eps) == 2.0 ** -10


@needs_bf16
def test_bfloat16_names_and_limits():
    bf16 = ndlite.bfloat16
    assert as_dtype("bfloat16") is bf16 and is_floating(bf16)
    assert float(finfo(bf16).eps) == 2.0 ** -7
    assert float(finfo(bf16).tiny) == float(np.finfo(np.float32).tiny)


@pytest.mark.parametrize(("a", "b", "want"), [
    ("float16", "float16", "float16"), ("float16", "float32", "float32"),
    ("float16", "float64", "float64"), ("float16", "bfloat16", "float32"),
    ("bfloat16", "float32", "float32"), ("bfloat16", "bfloat16", "bfloat16"),
    ("float16", "int64", "float16"), ("bfloat16", "int32", "bfloat16"),
    ("float16", "bool", "float16"),
])
def test_promotion_as_pytorch(a, b, want):
    if "bfloat16" in (a, b, want) and not isinstance(ndlite.bfloat16, np.dtype):
        pytest.skip("bfloat16 needs ml_dtypes")
    assert promote(as_dtype(a), as_dtype(b)) is as_dtype(want)
    assert promote(as_dtype(b), as_dtype(a)) is as_dtype(want)
    x = ndlite.ones(3, dtype=a)
    y = ndlite.ones(3, dtype=b)
    assert (x + y).dtype is as_dtype(want)


def test_python_scalars_stay_weak():
    h = ndlite.ones(3, dtype="float16")
    assert (h * 2.5).dtype is float16 and (h + 1).dtype is float16 and (2 - h).dtype is float16
    assert (ndlite.ones(3, dtype=int32) * 0.5).dtype is float32
    # a 0-d float32 tensor does not widen a dimensioned float16 one (PyTorch's rule)
    assert (h * ndlite.tensor(2.0)).dtype is float16
    assert (ndlite.tensor(2.0, dtype="float16") * ndlite.ones(3, dtype=float64)).dtype is float64


def test_casts_round_once_and_carry_gradients():
    values = np.array([1.0, 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 65504.0, 1e-8], np.float32)
    x = ndlite.tensor(values, requires_grad=True)
    h = x.half()
    assert h.dtype is float16
    np.testing.assert_array_equal(h.detach().numpy(), values.astype(np.float16))
    (h.float() * ndlite.tensor([1.0, 2, 3, 4, 5])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1, 2, 3, 4, 5])
    assert x.grad.dtype is float32


@needs_bf16
def test_bfloat16_cast():
    values = np.array([1.0, 1 + 2.0 ** -8, 3.0e38, -2.5], np.float32)
    b = ndlite.tensor(values).bfloat16()
    assert b.dtype is ndlite.bfloat16 and b.is_floating_point()
    np.testing.assert_array_equal(b.numpy(), values.astype(ndlite.bfloat16))
    assert b.float().dtype is float32


def test_bfloat16_missing_names_the_package(monkeypatch):
    from ndlite import dtypes
    monkeypatch.setattr(dtypes, "ml_dtypes", None)
    with pytest.raises(ndlite.DTypeError, match="ml_dtypes"):
        as_dtype("bfloat16")
    with pytest.raises(ndlite.DTypeError, match="ml_dtypes"):
        as_dtype(dtypes._MissingDType())


def test_module_half_and_bfloat16():
    model = ndlite.nn.Sequential(ndlite.nn.Linear(3, 4), ndlite.nn.BatchNorm1d(4))
    weight = model[0].weight
    assert model.half() is model and weight.dtype is float16 and model[0].weight is weight
    assert model[1].num_batches_tracked.dtype is int64  # integer buffers keep their dtype
    out = model(ndlite.ones(2, 3, dtype="float16"))
    assert out.dtype is float16
    if isinstance(ndlite.bfloat16, np.dtype):
        assert model.bfloat16()[0].weight.dtype is ndlite.bfloat16
    assert model.float()[0].weight.dtype is float32
    assert model.to(float64)[1].running_var.dtype is float64
    assert model[1].num_batches_tracked.dtype is int64
