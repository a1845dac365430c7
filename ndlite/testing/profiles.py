"""Hypothesis profiles (DESIGN.md): `ci` is derandomized with no deadline and no database, so
CI runs are reproducible; `thorough` draws hundreds of examples per op; `dev` is the quick
default on a workstation. `HYPOTHESIS_PROFILE` picks one; with `CI` set, `ci` is the default."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                     HealthCheck.data_too_large,
                                                     HealthCheck.filter_too_much])


def register_profiles() -> str:
    """Register the profiles and load the chosen one; returns its name. Each profile's parent
    is hypothesis' own default: registered against the current default (the loaded profile),
    each call would chain one more fallback, and a process that calls this per run (the CLI
    in the tests) ended in a RecursionError inside hypothesis."""
    base = settings.get_profile("default")
    settings.register_profile("ci", parent=base, derandomize=True, database=None,
                              print_blob=True, max_examples=25, **_COMMON)
    settings.register_profile("dev", parent=base, max_examples=25, **_COMMON)
    settings.register_profile("thorough", parent=base, max_examples=250, **_COMMON)
    name = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
    settings.load_profile(name)
    return name
