"""The device contract itself (ndlite/device/protocol.py): its tables cover the Backend class,
and every derived primitive's fallback gives the built-in backends' own results bit for bit,
on the values where compositions go wrong: -0.0, NaN of both signs, infinities, the integer
extremes, bools, ties and Python scalars on either side."""

import numpy as np
import pytest

from ndlite.device import Backend, protocol

FLOATS = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5, np.inf, -np.inf, np.nan, -np.nan, 1e-30, -1e-30,
          88.7, -88.7, 1e4, -1e4, 3.0e38, -3.0e38]
INTS = {"int32": [0, 1, -1, 7, -7, 2**31 - 1, -2**31, -2**31 + 1],
        "int64": [0, 1, -1, 7, -7, 2**63 - 1, -2**63, -2**63 + 1]}


def _values(dtype: str) -> np.ndarray:
    if dtype == "bool":
        return np.array([True, False, False, True])
    if dtype in INTS:
        return np.array(INTS[dtype], dtype)
    return np.array(FLOATS, dtype)


def _pairs(dtype: str):
    """Every ordered pair of the edge values, as two flat arrays."""
    v = _values(dtype)
    return np.repeat(v, len(v)), np.tile(v, len(v))


def _derived(b, name):
    """The base class's fallback of `name`, bound to backend `b` (skipping b's override)."""
    return getattr(Backend, name).__get__(b)


def _same_bits(got: np.ndarray, want: np.ndarray, what: str, nan_sign: bool = True) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, what
    if want.dtype.kind == "f":  # NaN payloads may differ; their signs and every other bit not
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(got), nan), what
        signs = np.signbit(got) == np.signbit(want)
        assert np.all(signs if nan_sign else signs | nan), what
        assert np.array_equal(got[~nan], want[~nan]), what
    else:
        assert np.array_equal(got, want), what


def test_the_tables_cover_the_class_once():
    tables = protocol.REQUIRED + protocol.OPTIONAL
    assert len(tables) == len(set(tables))
    # the class and its mixins (the transformer paths' defaults live beside their fallbacks)
    methods = {n for klass in Backend.__mro__[:-1] for n, v in vars(klass).items()
               if callable(v) and not n.startswith("_")}
    assert methods == set(tables)
    assert len(protocol.REQUIRED) <= 30


@pytest.mark.parametrize("name", protocol.REQUIRED)
def test_required_primitives_have_no_default(name):
    args = {"from_numpy": 1, "to_numpy": 1, "full": 3, "astype": 2, "assign": 2, "where": 3,
            "sum": 3, "max": 3, "argmax": 3, "gather": 3, "scatter_add": 4, "put": 3}
    arity = args.get(name, 1 if name in ("neg", "exp", "log", "sqrt", "tanh") else 2)
    with pytest.raises(NotImplementedError):
        getattr(Backend(), name)(*[None] * arity)


def test_capabilities_default_to_doing_nothing():
    b = Backend()
    assert b.defer_host_check(None, lambda host: None) is False
    assert b.memory_in_use() is None and b.synchronize() is None


UNARY = [("sigmoid", ("float32", "float64")), ("relu", ("float32", "float64", "int32", "int64")),
         ("abs", ("float32", "float64", "int32", "int64", "bool")),
         ("sign", ("float32", "float64", "int32", "int64"))]


@pytest.mark.parametrize("name,dtypes", UNARY, ids=[u[0] for u in UNARY])
def test_derived_unary_give_the_backends_bits(backend, name, dtypes):
    b = backend
    for dtype in dtypes:
        if np.dtype(dtype) not in b.dtypes:
            continue
        x = b.from_numpy(_values(dtype))
        with np.errstate(all="ignore"):
            want = b.to_numpy(getattr(b, name)(x))
            got = b.to_numpy(_derived(b, name)(x))
        if name == "sigmoid":  # not a selection: the transcendental tolerance
            np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-14)
        else:
            # a NaN's sign is no part of the contract: GPUs make canonical NaNs
            _same_bits(got, want, f"{name} {dtype} on {b}", nan_sign=False)


BINARY = ["minimum", "ne", "le", "gt", "ge"]


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
def test_derived_binary_give_the_backends_bits(backend, name, dtype):
    b = backend
    if np.dtype(dtype) not in b.dtypes:
        pytest.skip(f"{b} has no {dtype}")
    a, c = _pairs(dtype)
    x, y = b.from_numpy(a), b.from_numpy(c)
    scalar = {"bool": True, "int32": -7, "int64": 2**40}.get(dtype, -0.0)
    for left, right in ((x, y), (x, scalar), (scalar, y)):
        _same_bits(b.to_numpy(_derived(b, name)(left, right)),
                   b.to_numpy(getattr(b, name)(left, right)), f"{name} {dtype} on {b}",
                   nan_sign=False)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
def test_derived_reductions_give_the_backends_bits(backend, dtype):
    b = backend
    if np.dtype(dtype) not in b.dtypes:
        pytest.skip(f"{b} has no {dtype}")
    rng = np.random.default_rng(0)
    # ties of 0.0 and -0.0 included: max and min keep the last in row-major order (NumPy's
    # fold), so max on the order reversed keeps the same element as min. A NaN's sign is not
    # compared: NumPy's reductions return an input's NaN or a new one, by memory layout
    host = rng.permutation(np.resize(_values(dtype), 6 * 8)).reshape(6, 8)
    x = b.from_numpy(host)
    for axes in [(0,), (1,), (0, 1)]:
        for keepdims in (False, True):
            _same_bits(b.to_numpy(_derived(b, "min")(x, axes, keepdims)),
                       b.to_numpy(b.min(x, axes, keepdims)), f"min {axes} {dtype}", False)
    for axis in (0, 1):  # where a NaN is, the backend's own argmax decides, as its argmin
        want = b.to_numpy(b.argmin(x, axis, False))
        assert np.array_equal(b.to_numpy(_derived(b, "argmin")(x, axis, False)), want)


def test_derived_movement_gives_the_backends_bits(backend):
    b = backend
    host = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = b.from_numpy(host)
    view = b.permute(x, (2, 0, 1))
    for source in (x, view):
        _same_bits(b.to_numpy(_derived(b, "copy")(source)), b.to_numpy(b.copy(source)), "copy")
        widths = ((1, 0), (0, 2), (3, 1))
        _same_bits(b.to_numpy(_derived(b, "pad")(source, widths, -0.0)),
                   b.to_numpy(b.pad(source, widths, -0.0)), "pad")
        for axis in range(3):
            _same_bits(b.to_numpy(_derived(b, "concatenate")([source, source], axis)),
                       b.to_numpy(b.concatenate([source, source], axis)), "concatenate")
    assert b.to_numpy(_derived(b, "empty")((2, 3), np.dtype("int32"))).shape == (2, 3)
