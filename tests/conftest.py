"""Shared test setup: hypothesis profiles and the `backend` fixture over every backend."""

import pytest

from ndlite.device.registry import probe
from ndlite.testing import register_profiles

PROFILE = register_profiles()
BACKENDS = ["numpy", "opencl", "cupy"]


def pytest_report_header(config):
    lines = [f"hypothesis profile: {PROFILE}"]
    for name in BACKENDS:
        backend, why = probe(name)
        lines.append(f"backend {name}: " + (f"available ({backend.device_name()})" if backend
                                           else f"skipped: {why}"))
    return lines


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS, indirect=True)


@pytest.fixture
def backend(request):
    """Each available backend in turn; a missing one is skipped with the reason."""
    found, why = probe(request.param)
    if found is None:
        pytest.skip(f"backend {request.param} unavailable: {why}")
    return found
