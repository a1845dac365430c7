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
