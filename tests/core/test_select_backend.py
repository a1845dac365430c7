"""ndlite.select_backend: measured, not guessed. It times training steps of the user's model on
each backend, returns the fastest with the table, says why a backend was skipped, and leaves
the model as it found it."""

import time

import numpy as np
import pytest
from ndlite_numpy import NumpyBackend

import ndlite
from ndlite.benchmark import machine_info, seconds_per_call


class SlowMatmul(NumpyBackend):
    """The reference with a matmul that sleeps 2 ms: never the fastest."""

    kind = name = "slow_matmul"

    def __init__(self, device=None):
        super().__init__(None)

    def matmul(self, a, b):
        time.sleep(0.002)
        return super().matmul(a, b)


class Broken(NumpyBackend):
    kind = name = "broken_relu"

    def __init__(self, device=None):
        super().__init__(None)

    def relu(self, x):
        raise RuntimeError("relu kernel failed to build")


@pytest.fixture(autouse=True, scope="module")
def _registered():
    ndlite.register_backend(SlowMatmul.name, SlowMatmul)
    ndlite.register_backend(Broken.name, Broken)


def _model():
    ndlite.manual_seed(0)
    return ndlite.nn.Sequential(ndlite.nn.Linear(6, 8), ndlite.nn.ReLU(), ndlite.nn.Linear(8, 3))


def test_the_fastest_backend_wins_with_the_table():
    model = _model()
    x, y = np.ones((4, 6), np.float32), np.array([0, 1, 2, 0])
    choice = ndlite.select_backend(model, x, y, loss_fn=ndlite.nn.functional.cross_entropy,
                                   backends=["slow_matmul", "numpy", "broken_relu",
                                             "nosuchbackend"], budget=0.05)
    assert choice.name == "numpy" and choice.backend is ndlite.get_backend("numpy")
    assert list(choice.seconds) == ["numpy", "slow_matmul"]  # fastest first
    assert choice.seconds["slow_matmul"] > 0.004  # two matmuls forward, sleeping 2 ms each
    assert "relu kernel failed to build" in choice.skipped["broken_relu"]
    assert "nosuchbackend" in choice.skipped
    table = str(choice)
    assert "ms/step" in table and "1.00x" in table and "skipped: RuntimeError" in table


def test_the_model_is_left_as_it_was():
    model = _model()
    model.eval()
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    weight = model[0].weight
    weight.grad = ndlite.full((8, 6), 7.0)
    ndlite.select_backend(model, ndlite.randn(2, 6), backends=["slow_matmul", "numpy"],
                          budget=0.02)
    after = model.state_dict()
    assert all(np.array_equal(before[k], after[k].numpy()) for k in before)
    assert model[0].weight is weight and weight.backend.name == "numpy"
    assert weight.grad.tolist() == [[7.0] * 6] * 8 and not model.training


def test_default_backends_are_every_known_one():
    choice = ndlite.select_backend(_model(), ndlite.randn(2, 6), budget=0.01)
    names = set(choice.seconds) | set(choice.skipped)
    for kind in ("numpy", "cupy", "opencl", "slow_matmul"):  # measured, or skipped saying why
        assert any(n.split(":")[0] == kind for n in names), names


def test_no_backend_that_runs_is_an_error():
    with pytest.raises(RuntimeError, match="no backend could run the model: broken_relu"):
        ndlite.select_backend(_model(), ndlite.randn(2, 6), backends=["broken_relu"])


def test_a_non_module_is_a_type_error():
    with pytest.raises(TypeError, match="ndlite.nn.Module"):
        ndlite.select_backend(lambda x: x, ndlite.randn(2, 6))


def test_seconds_per_call_and_machine_info():
    seconds = seconds_per_call(lambda: time.sleep(0.001), budget=0.02, repeats=3, warmup=1)
    assert 0.001 <= seconds < 0.01
    info = machine_info([ndlite.get_backend("numpy")])
    assert info["cpu"] and info["cpus"]["logical"] >= 1 and info["devices"]["numpy"]
    assert info["versions"]["numpy"] == np.__version__


def test_the_module_examples_run():
    import doctest

    from ndlite import benchmark, select

    for module in (benchmark, select):
        assert doctest.testmod(module).failed == 0
