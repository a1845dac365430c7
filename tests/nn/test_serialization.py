"""ndlite.save / ndlite.load: state dicts of models and optimizers round-trip through .npz
files without pickle; truncated and foreign files raise a clear ValueError."""

import numpy as np
import pytest

import ndlite
from ndlite import nn, optim


def test_model_and_optimizer_round_trip(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    opt = optim.Adam(model.parameters(), lr=0.01, amsgrad=True)
    model(ndlite.randn(5, 3)).sum().backward()
    opt.step()
    path = tmp_path / "ckpt.npz"
    ndlite.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 7,
                 "note": "hello", "none": None}, path)
    data = np.load(path, allow_pickle=False)  # a plain npz: readable without pickle
    assert "__ndlite__" in data.files
    back = ndlite.load(path)
    assert back["epoch"] == 7 and back["note"] == "hello" and back["none"] is None
    fresh = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    fresh.load_state_dict(back["model"])
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
    state = back["optimizer"]
    assert state["param_groups"][0]["betas"] == (0.9, 0.999)
    assert state["state"][0]["step"] == 1 and state["state"][0]["exp_avg"].shape == (4, 3)


def test_truncated_and_foreign_files(tmp_path):
    path = tmp_path / "ckpt.npz"
    ndlite.save({"w": ndlite.ones(100)}, path)
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(path.read_bytes()[:200])
    with pytest.raises(ValueError, match="truncated or corrupt"):
        ndlite.load(truncated)
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, w=np.ones(3))
    with pytest.raises(ValueError, match="foreign"):
        ndlite.load(foreign)
    text = tmp_path / "text.npz"
    text.write_text("not a checkpoint")
    with pytest.raises(ValueError, match="not a readable ndlite checkpoint"):
        ndlite.load(text)
    with pytest.raises(FileNotFoundError):
        ndlite.load(tmp_path / "missing.npz")


def test_unsupported_objects_are_refused(tmp_path):
    with pytest.raises(TypeError, match="cannot save a object"):
        ndlite.save({"x": object()}, tmp_path / "x.npz")
