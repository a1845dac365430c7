import pytest
from ndlite_numpy import NumpyBackend

import ndlite


class SecondNumpy(NumpyBackend):
    """The NumPy backend under another name: a second backend without a GPU."""

    kind = "numpy2"
    name = "numpy2"


@pytest.fixture
def second_numpy():
    ndlite.register_backend("numpy2", lambda device: SecondNumpy())
    return ndlite.get_backend("numpy2")


@pytest.fixture(autouse=True)
def _reference_backend():
    """Core semantics are checked on the reference backend, whatever NDLITE_BACKEND says;
    every other backend is held to the reference by the conformance kit (tests/conformance)."""
    previous = ndlite.current_backend()
    ndlite.set_backend("numpy")
    yield
    ndlite.set_backend(previous)
