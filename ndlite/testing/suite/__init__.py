"""The conformance suite as pytest tests, shipped inside the package so that any backend can
run it: `pytest --pyargs ndlite.testing.suite --ndlite-backend NAME` (the `ndlite_backend`
fixture comes from `ndlite.pytest_plugin`). ndlite's own `tests/conformance/` runs the same
tests on every backend the machine has."""
