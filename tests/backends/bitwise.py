"""Helpers the CuPy backend tests share (test_cupy.py, test_cupy_indexing.py): a seeded
generator and the contract's bitwise comparison."""

import numpy as np


def rng(seed=0):
    return np.random.default_rng(seed)


def bits(a: np.ndarray) -> np.ndarray:
    """The raw bits of a float array (so -0.0 differs from 0.0)."""
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


def assert_same_bits(actual: np.ndarray, expected: np.ndarray, what: str = "") -> None:
    """Bitwise equal as the contract means it: -0.0 differs from 0.0; any NaN equals any NaN
    (CUDA may return its canonical NaN where NumPy keeps the input's payload)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, what
    nan = np.isnan(actual)
    np.testing.assert_array_equal(nan, np.isnan(expected), err_msg=f"{what}: NaN positions")
    np.testing.assert_array_equal(bits(actual)[~nan], bits(expected)[~nan], err_msg=what)
