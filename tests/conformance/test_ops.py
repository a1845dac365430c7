"""The conformance suite of `ndlite.testing.suite`, run on every backend this machine has
(the `ndlite_backend` fixture of the kit's pytest plugin)."""

from ndlite.testing.suite.test_layer_paths import (  # noqa: F401
    test_conv2d_bias_gives_its_fallbacks_bits,
)
from ndlite.testing.suite.test_ops import test_op, test_second_order  # noqa: F401
