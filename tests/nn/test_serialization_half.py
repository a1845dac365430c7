"""Checkpoints keep float16 and bfloat16 tensors and arrays, bitwise (issue 16, item 5a)."""

import numpy as np
import pytest

import ndlite


def _halves():
    yield "float16"
    if isinstance(ndlite.bfloat16, np.dtype):
        yield "bfloat16"


@pytest.mark.parametrize("dtype", list(_halves()))
def test_half_round_trip_bitwise(tmp_path, dtype):
    rng = np.random.default_rng(0)
    values = rng.standard_normal((3, 5)).astype(np.float32) * 1000
    values[0, :3] = [np.inf, -0.0, 6e-8]
    model = ndlite.nn.Linear(5, 3).to(ndlite.dtypes.as_dtype(dtype))
    half = ndlite.tensor(values, dtype=dtype)
    state = {"model": model.state_dict(), "t": half, "a": half.numpy(), "epoch": 2}
    ndlite.save(state, tmp_path / "ck.npz")
    back = ndlite.load(tmp_path / "ck.npz")
    assert back["t"].dtype is half.dtype and back["a"].dtype == half.dtype
    bits = np.uint16
    np.testing.assert_array_equal(back["t"].numpy().view(bits), half.numpy().view(bits))
    np.testing.assert_array_equal(back["a"].view(bits), half.numpy().view(bits))
    fresh = ndlite.nn.Linear(5, 3).to(ndlite.dtypes.as_dtype(dtype))
    fresh.load_state_dict(back["model"])
    np.testing.assert_array_equal(fresh.weight.detach().numpy().view(bits),
                                  model.weight.detach().numpy().view(bits))


def test_bfloat16_checkpoint_without_ml_dtypes_names_it(tmp_path, monkeypatch):
    if not isinstance(ndlite.bfloat16, np.dtype):
        pytest.skip("bfloat16 needs ml_dtypes")
    ndlite.save({"w": ndlite.ones(2, dtype="bfloat16")}, tmp_path / "ck.npz")
    monkeypatch.setattr(ndlite.dtypes, "ml_dtypes", None)
    with pytest.raises(ndlite.DTypeError, match="ml_dtypes"):
        ndlite.load(tmp_path / "ck.npz")
