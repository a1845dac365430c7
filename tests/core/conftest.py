import pytest

import ndlite
from ndlite_numpy import NumpyBackend


class SecondNumpy(NumpyBackend):
    """The NumPy backend under another name: a second backend without a GPU."""

    kind = "numpy2"
    name = "numpy2"


@pytest.fixture
def second_numpy():
    ndlite.register_backend("numpy2", lambda device: SecondNumpy())
    return ndlite.get_backend("numpy2")
