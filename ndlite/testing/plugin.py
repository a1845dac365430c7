"""Where the kit's pytest plugin lived before it moved to `ndlite.pytest_plugin`, outside this
package (whose import brings in hypothesis). Kept so that an environment installed from an
older checkout, whose pytest11 entry point still names this module, keeps loading the plugin;
reinstalling ndlite points the entry point at the new place."""

from ndlite.pytest_plugin import *  # noqa: F403
from ndlite.pytest_plugin import (  # noqa: F401 - the hooks and the fixture, by name
    ndlite_backend,
    pytest_addoption,
    pytest_generate_tests,
    pytest_report_header,
)
