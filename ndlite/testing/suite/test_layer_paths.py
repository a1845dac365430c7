"""Modes of the layer fast paths (ndlite/device/step_fallbacks.py) that the op cases of
test_ops.py do not reach: conv2d_bias with relu=True, what a Sequential runs for a Conv2d with
a bias and the ReLU after it (ops/conv.py Conv2dReLU, not a registered op: two of them
composed). A backend's override must give its fallback's bits, NaN, infinities and signed
zeros included, with and without the ReLU.
"""

import numpy as np
import pytest

from ndlite.device import step_fallbacks
from ndlite.testing.catalog import dtype_skip_reason

GEOMETRIES = [((1, 1), (0, 0), (1, 1), 1), ((2, 1), (1, 2), (1, 2), 2)]


def _bits(a):
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=["plain", "strided-grouped"])
@pytest.mark.parametrize("relu", [False, True], ids=["bias", "bias-relu"])
def test_conv2d_bias_gives_its_fallbacks_bits(ndlite_backend, dtype, geometry, relu):
    b = ndlite_backend
    why = dtype_skip_reason(b, dtype)
    if why:
        pytest.skip(why)
    r = np.random.default_rng(0)
    x = r.standard_normal((3, 4, 9, 8)).astype(dtype)
    x[0, 0, :2, :3] = [[np.nan, np.inf, -np.inf], [0.0, -0.0, 1e-3]]
    weight = r.standard_normal((6, 4 // geometry[3], 3, 2)).astype(dtype)
    bias = r.standard_normal(6).astype(dtype)
    bias[:2] = [-0.0, 0.0]
    args = [b.from_numpy(a) for a in (x, weight, bias)]
    got = b.to_numpy(b.conv2d_bias(*args, *geometry, relu))
    want = b.to_numpy(step_fallbacks.conv2d_bias(b, *args, *geometry, relu))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(_bits(got[~np.isnan(got)]), _bits(want[~np.isnan(want)]))
