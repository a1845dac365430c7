"""Shared test setup: hypothesis profiles, and `backend`, the kit plugin's `ndlite_backend`
fixture under its short name (every available backend in turn, a missing one skipped with
the reason; pick others with `--ndlite-backend NAME`)."""

import pytest

from ndlite.testing import register_profiles
from ndlite.testing.plugin import chosen_backends, report_lines

PROFILE = register_profiles()


def pytest_report_header(config):
    lines = [f"hypothesis profile: {PROFILE}"]
    if not config.getoption("ndlite_backends"):  # else the plugin prints them
        lines += report_lines(chosen_backends(config))
    return lines


@pytest.fixture(scope="session")
def backend(ndlite_backend):
    """Each available backend in turn (the plugin's `ndlite_backend`)."""
    return ndlite_backend
