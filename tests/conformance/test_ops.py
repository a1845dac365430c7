"""The conformance suite of `ndlite.testing.suite`, run on every backend this machine has
(the `ndlite_backend` fixture of the kit's pytest plugin)."""

from ndlite.testing.suite.test_ops import test_op, test_second_order  # noqa: F401
