"""The pytest plugin of the conformance kit (registered through the `pytest11` entry point).

It adds `--ndlite-backend NAME` (repeatable) and an `ndlite_backend` fixture that runs a test
once per chosen backend; a backend that cannot start is skipped with the reason. Without the
option the built-in backends (numpy, opencl, cupy) are tried. A third-party backend runs the
whole suite with

    pytest --pyargs ndlite.testing.suite --ndlite-backend mybackend

The plugin loads into every pytest run of an environment that has ndlite, so it must never
break a run that does not use it: it lives outside `ndlite.testing` (whose import brings in
hypothesis) and imports no backend until a test asks for `ndlite_backend` or `--ndlite-backend`
is given; it parametrizes only the tests that ask, and prints its header only when
`--ndlite-backend` is given.
"""

from __future__ import annotations

import pytest

#: backends tried when no --ndlite-backend is given
DEFAULT_BACKENDS = ("numpy", "opencl", "cupy")


def pytest_addoption(parser) -> None:
    group = parser.getgroup("ndlite", "ndlite conformance kit")
    group.addoption("--ndlite-backend", action="append", default=[], metavar="NAME",
                    dest="ndlite_backends",
                    help="run ndlite_backend tests on this backend (repeatable; a registered "
                         "name with an optional device: numpy, opencl:0, mybackend). "
                         f"Default: {', '.join(DEFAULT_BACKENDS)}, each skipped if unavailable.")


def chosen_backends(config) -> list[str]:
    """The backend names a test session runs on."""
    names = []
    for value in config.getoption("ndlite_backends") or []:
        names += [n.strip() for n in value.split(",") if n.strip()]
    return names or list(DEFAULT_BACKENDS)


def report_lines(names) -> list[str]:
    """One line per backend: available (on which device) or skipped and why."""
    from ndlite.device.registry import probe

    lines = []
    for name in names:
        backend, why = probe(name)
        lines.append(f"ndlite backend {name}: " + (
            f"available ({backend.device_name()})" if backend else f"skipped: {why}"))
    return lines


def pytest_report_header(config):
    if config.getoption("ndlite_backends"):
        return report_lines(chosen_backends(config))
    return None


def pytest_generate_tests(metafunc) -> None:
    if "ndlite_backend" in metafunc.fixturenames:
        names = chosen_backends(metafunc.config)
        metafunc.parametrize("ndlite_backend", names, indirect=True, ids=names,
                             scope="session")


@pytest.fixture(scope="session")
def ndlite_backend(request):
    """Each chosen backend in turn (a Backend object); a missing one is skipped with why."""
    from ndlite.device.registry import probe

    name = getattr(request, "param", None) or chosen_backends(request.config)[0]
    found, why = probe(name)
    if found is None:
        pytest.skip(f"backend {name} unavailable: {why}")
    return found


# hypothesis' own pytest plugin (6.170) gives a parametrized @given test a new settings object
# on every invocation, whose parent is the one the previous invocation left: the chain grows
# by one per parameter set, and the kit's test_op (ops x dtypes x backends, over a thousand
# sets) ended in a RecursionError inside hypothesis. Each invocation gets back the settings
# the test had before it. (Attributes only: this imports no hypothesis.)
_SETTINGS = "_hypothesis_internal_use_settings"


def pytest_runtest_setup(item) -> None:
    fn = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
    if getattr(fn, "is_hypothesis_test", False):
        item._ndlite_hypothesis_settings = (fn, getattr(fn, _SETTINGS, None))


def pytest_runtest_teardown(item) -> None:
    saved = getattr(item, "_ndlite_hypothesis_settings", None)
    if saved is not None and saved[1] is not None:
        setattr(saved[0], _SETTINGS, saved[1])
