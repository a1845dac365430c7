"""The docstring examples of the NN layer run (nn, optim, data, checkpoints, NN ops)."""

import doctest
import importlib

import pytest

MODULES = [
    "ndlite.nn.module", "ndlite.nn.layers", "ndlite.nn.container", "ndlite.nn.init",
    "ndlite.nn.loss", "ndlite.nn.normalization", "ndlite.nn.models", "ndlite.ops.conv",
    "ndlite.ops.pool", "ndlite.ops.activation", "ndlite.ops.loss", "ndlite.optim.sgd",
    "ndlite.optim.rmsprop", "ndlite.optim.adam", "ndlite.optim.lr_scheduler.closed_form",
    "ndlite.optim.lr_scheduler.more", "ndlite.ops.composite", "ndlite.ops.composite_more",
    "ndlite.ops.activations_more",
    "ndlite.ops.nn_more", "ndlite.nn.activations_more", "ndlite.nn.layers_extra",
    "ndlite.data.dataset", "ndlite.data.dataloader", "ndlite.data.mnist",
    "ndlite.serialization",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
    assert result.attempted > 0 or name in ("ndlite.nn.loss",), f"no examples in {name}"
