"""Hypothesis profiles for the suite when it runs on its own (`pytest --pyargs`)."""

from ndlite.testing import register_profiles

PROFILE = register_profiles()


def pytest_report_header(config):
    return [f"hypothesis profile: {PROFILE}"]
