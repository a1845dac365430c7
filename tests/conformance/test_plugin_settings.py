"""The kit's pytest plugin keeps hypothesis working under heavy parametrization: hypothesis'
own plugin chains one settings object per invocation of a parametrized @given test, and the
kit's test_op (over a thousand parameter sets) ended in a RecursionError without the reset."""

import subprocess
import sys
import textwrap


def test_a_test_parametrized_1500_times_runs_to_the_end(tmp_path):
    (tmp_path / "test_many.py").write_text(textwrap.dedent("""
        import pytest
        from hypothesis import given, settings, strategies as st

        @pytest.mark.parametrize("i", range(1500))
        @settings(max_examples=1, database=None)
        @given(st.just(0))
        def test_many(i, zero):
            assert zero == 0
    """))
    (tmp_path / "conftest.py").write_text(textwrap.dedent("""
        from importlib.metadata import entry_points

        if not any(ep.name == "ndlite" for ep in entry_points(group="pytest11")):
            pytest_plugins = ["ndlite.pytest_plugin"]  # a source checkout: load it here
    """))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(tmp_path / "test_many.py")],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:]
    assert "1500 passed" in run.stdout
