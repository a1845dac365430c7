"""Shared test setup: hypothesis profiles, and `backend`, the kit plugin's `ndlite_backend`
fixture under its short name (every available backend in turn, a missing one skipped with
the reason; pick others with `--ndlite-backend NAME`)."""

from importlib.metadata import entry_points

import pytest

from ndlite.pytest_plugin import chosen_backends, report_lines
from ndlite.testing import register_profiles

PROFILE = register_profiles()

# Installed, the kit's plugin arrives through its pytest11 entry point; from a source checkout
# on PYTHONPATH (no entry points) it is loaded here instead.
# (An install from an older checkout names ndlite.testing.plugin, which forwards here.)
if not any(ep.name == "ndlite" for ep in entry_points(group="pytest11")):
    pytest_plugins = ["ndlite.pytest_plugin"]


def pytest_report_header(config):
    lines = [f"hypothesis profile: {PROFILE}"]
    if not config.getoption("ndlite_backends"):  # else the plugin prints them
        lines += report_lines(chosen_backends(config))
    return lines


@pytest.fixture(scope="session")
def backend(ndlite_backend):
    """Each available backend in turn (the plugin's `ndlite_backend`)."""
    return ndlite_backend
