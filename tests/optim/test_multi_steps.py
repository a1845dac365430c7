"""SGD, RMSprop and Adam update all of a group's parameters in one backend call (sgd_steps,
rmsprop_steps, adam_steps: ndlite/device/step_fallbacks.py; CuPy launches one kernel for all
of them, OpenCL one per 16; Adam makes one call per step count). Against the one-parameter
fused steps (sgd_step, rmsprop_step, adam_step) called one by one, which the optimizer tests
hold to PyTorch and the reference: the same bits, on every backend."""

import numpy as np
import pytest

import ndlite
from ndlite.errors import ShapeError

SHAPES = [(3, 5), (7,), (4, 1, 3, 3), (5000,), (1,)]  # (5000: more than one block of a chunk)


def _params(backend, dtype, seed=0):
    r = np.random.default_rng(seed)
    return [ndlite.nn.Parameter(ndlite.tensor(r.standard_normal(s), dtype=dtype,
                                              backend=backend)) for s in SHAPES]


def _grads(params, step):
    r = np.random.default_rng(100 + step)
    for i, p in enumerate(params):
        p.grad = None if i == 1 and step == 1 else ndlite.tensor(  # a step without a gradient
            r.standard_normal(p.shape), dtype=p.dtype, backend=p.backend)


def _one_by_one(opt):
    """The optimizer's group update without its `batch`: one backend call per parameter."""
    original = opt.group_update

    def single(group):
        update = original(group)
        return lambda param, grad, state: update(param, grad, state)

    opt.group_update = single
    return opt


CASES = [(ndlite.optim.SGD, dict(lr=0.1)),
         (ndlite.optim.SGD, dict(lr=0.05, momentum=0.9, weight_decay=1e-2)),
         (ndlite.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True)),
         (ndlite.optim.SGD, dict(lr=0.05, momentum=0.5, dampening=0.3)),
         (ndlite.optim.RMSprop, dict(lr=1e-2)),
         (ndlite.optim.RMSprop, dict(lr=1e-2, momentum=0.9, centered=True, weight_decay=0.1)),
         (ndlite.optim.Adam, dict(lr=1e-2)),
         (ndlite.optim.Adam, dict(lr=1e-2, weight_decay=0.1, amsgrad=True)),
         (ndlite.optim.AdamW, dict(lr=1e-2, weight_decay=0.1))]
METHODS = {ndlite.optim.SGD: "sgd_steps", ndlite.optim.RMSprop: "rmsprop_steps",
           ndlite.optim.Adam: "adam_steps", ndlite.optim.AdamW: "adam_steps"}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cls, settings", CASES, ids=lambda c: str(c))
def test_one_call_per_group_gives_the_bits_of_one_call_per_parameter(backend, cls, settings,
                                                                     dtype, monkeypatch):
    if np.dtype(dtype) not in backend.dtypes:
        pytest.skip(f"{dtype} not on {backend.name}")
    batched, single = _params(backend, dtype), _params(backend, dtype)
    opt_b, opt_s = cls(batched, **settings), _one_by_one(cls(single, **settings))
    calls = []
    method = METHODS[cls]
    original = getattr(backend, method)
    monkeypatch.setattr(backend, method, lambda *a: calls.append(len(a[0])) or original(*a))
    for step in range(3):
        _grads(batched, step)
        _grads(single, step)
        opt_b.step()
        opt_s.step()
    n = len(SHAPES)
    # Adam: the parameter without a gradient at step 1 is a step count behind at step 2
    want = [n, n - 1, n - 1, 1] if METHODS[cls] == "adam_steps" else [n, n - 1, n]
    assert calls == want, "one call per step (and per step count)"
    for a, b in zip(batched, single):
        np.testing.assert_array_equal(a.detach().numpy().view(np.uint8),
                                      b.detach().numpy().view(np.uint8))
    for sa, sb in zip(opt_b.state_dict()["state"].values(), opt_s.state_dict()["state"].values()):
        assert sa.keys() == sb.keys()
        for key in sa:
            va, vb = sa[key], sb[key]
            if hasattr(va, "numpy"):
                np.testing.assert_array_equal(va.numpy(), vb.numpy())
            else:
                assert va == vb


def test_a_group_of_two_dtypes_makes_one_call_per_dtype(backend, monkeypatch):
    if np.dtype("float64") not in backend.dtypes:
        pytest.skip(f"no float64 on {backend.name}")
    batched = _params(backend, "float32")[:3] + _params(backend, "float64", seed=1)[:2]
    single = _params(backend, "float32")[:3] + _params(backend, "float64", seed=1)[:2]
    opt_b = ndlite.optim.SGD(batched, lr=0.1, momentum=0.9)
    opt_s = _one_by_one(ndlite.optim.SGD(single, lr=0.1, momentum=0.9))
    calls = []
    original = backend.sgd_steps
    monkeypatch.setattr(backend, "sgd_steps",
                        lambda *a: calls.append({p.dtype for p in a[0]}) or original(*a))
    for step in (0, 2):  # (step 1 leaves a parameter without a gradient)
        _grads(batched, step)
        _grads(single, step)
        opt_b.step()
        opt_s.step()
    assert calls == [{np.dtype("float32")}, {np.dtype("float64")}] * 2
    for a, b in zip(batched, single):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_a_failed_adam_call_leaves_the_step_counts(backend, monkeypatch):
    params = _params(backend, "float32")
    opt = ndlite.optim.Adam(params, lr=0.1)
    _grads(params, 0)
    opt.step()
    before = [p.detach().numpy().copy() for p in params]

    def refuse(*args):
        raise RuntimeError("refused")

    monkeypatch.setattr(backend, "adam_steps", refuse)
    _grads(params, 2)
    with pytest.raises(RuntimeError, match="refused"):
        opt.step()
    assert [opt.state[id(p)]["step"] for p in params] == [1] * len(params)
    for p, b in zip(params, before):
        np.testing.assert_array_equal(p.detach().numpy(), b)
    monkeypatch.undo()
    opt.step()  # the retry counts step 2, as if the failure had not happened
    assert [opt.state[id(p)]["step"] for p in params] == [2] * len(params)


# ---- the backend calls themselves, on lists longer than an OpenCL launch takes (16 slots)

#: 35 parameters: three launches of OpenCL's multi kernels; size-1 ones among them
MANY = [(3, 5), (1,), (7,), (4, 1, 3, 3), (1, 1)] * 7
#: parameters given as views the fused kernels refuse (another layout, an offset): they take
#: the one-parameter path, the others still go in the multi kernel
VIEWS = {0: "transposed", 8: "offset"}
#: each step's state lists (None: a state not kept for that parameter, which may differ from
#: one parameter to the next) and settings, one-parameter method first
STEPS = {
    "sgd_steps": ("sgd_step", ("momentum_buffers",), (0.05, 0.9, 0.1, False, 0.01)),
    "rmsprop_steps": ("rmsprop_step", ("square_avgs", "grad_avgs?", "momentum_buffers?"),
                      (1e-2, 0.9, 1e-6, 0.5, 0.01)),
    "adam_steps": ("adam_step", ("exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs?"),
                   (3, 1e-2, 0.9, 0.999, 1e-8, 0.01, True)),
}


def _floats(backend):
    return [d for d in ("float32", "float64", "float16", "bfloat16")
            if d in {str(t) for t in backend.dtypes}]


def _array(b, host, layout=None):
    if layout == "transposed":
        return b.permute(b.from_numpy(np.ascontiguousarray(host.T)), (1, 0))
    if layout == "offset":
        return b.slice(b.from_numpy(np.concatenate([host[:1], host])), (slice(1, None),))
    return b.from_numpy(host)


def _lists(b, name, dtypes, seed=0):
    """(params, grads, state lists, firsts) of MANY: the same values on every call."""
    r = np.random.default_rng(seed)
    draw = [(r.standard_normal(s) * 2).astype(dtypes[i % len(dtypes)])
            for i, s in enumerate(MANY)]
    params = [_array(b, x, VIEWS.get(i)) for i, x in enumerate(draw)]
    grads = [_array(b, r.standard_normal(x.shape).astype(x.dtype)) for x in draw]
    states = []
    for k, state in enumerate(STEPS[name][1]):
        optional = state.endswith("?")  # every third parameter (shifted per state) has none
        # the first state >= 1, the others small: RMSprop's centered square stays positive
        values = [np.abs(r.standard_normal(x.shape)) / 10 + (k == 0) for x in draw]
        states.append([None if optional and i % 3 == k % 3 else
                       _array(b, v.astype(x.dtype), VIEWS.get(i) if k == 0 else None)
                       for i, (x, v) in enumerate(zip(draw, values))])
    return params, grads, states, [i % 2 == 0 for i in range(len(MANY))]


def _call(b, name, lists, many: bool):
    params, grads, states, firsts = lists
    single, settings = STEPS[name][0], STEPS[name][2]
    last = (firsts,) if name == "sgd_steps" else ()
    if many:
        return getattr(b, name)(params, grads, *states, *settings, *last)
    for i, (param, grad) in enumerate(zip(params, grads)):
        extra = (firsts[i],) if name == "sgd_steps" else ()
        getattr(b, single)(param, grad, *(s[i] for s in states), *settings, *extra)


def _host(b, lists):
    params, grads, states, _ = lists
    return [None if x is None else b.to_numpy(x) for x in [*params, *sum(states, [])]]


def _assert_same_bits(got, want):
    for a, w in zip(got, want, strict=True):
        assert (a is None) == (w is None)
        if a is not None:
            assert a.dtype == w.dtype
            np.testing.assert_array_equal(a.view(f"u{a.itemsize}"), w.view(f"u{w.itemsize}"))


@pytest.mark.parametrize("name", list(STEPS))
def test_many_parameters_views_and_missing_states_give_the_bits_of_one_call_each(backend,
                                                                                name):
    for dtypes in [[d] for d in _floats(backend)] + [_floats(backend)]:  # the last one mixed
        batched, single = _lists(backend, name, dtypes), _lists(backend, name, dtypes)
        _call(backend, name, batched, many=True)
        _call(backend, name, single, many=False)
        _assert_same_bits(_host(backend, batched), _host(backend, single))


def _opencl(backend):
    if backend.kind != "opencl":
        pytest.skip("OpenCL's multi-parameter kernels")
    from ndlite_opencl import optim
    return optim


def _launched(monkeypatch) -> list:
    """The names of the kernels launched from now on."""
    import pyopencl

    launched = []
    enqueue = pyopencl.enqueue_nd_range_kernel
    monkeypatch.setattr(pyopencl, "enqueue_nd_range_kernel", lambda queue, kernel, *a, **k:
                        launched.append(kernel.function_name) or enqueue(queue, kernel, *a,
                                                                          **k))
    return launched


@pytest.mark.parametrize("name", list(STEPS))
def test_opencl_updates_the_list_in_launches_of_its_slots(backend, name, monkeypatch):
    optim = _opencl(backend)
    launched = _launched(monkeypatch)
    _call(backend, name, _lists(backend, name, ["float32"]), many=True)
    slots = optim._slots(backend, name, np.dtype("float32"))
    fused = len(MANY) - len(VIEWS)
    assert slots >= 2 and launched.count(name) == -(-fused // slots) >= 2
    assert STEPS[name][0] not in launched  # (the views took the core's fallback: map kernels)


@pytest.mark.parametrize("limit, slots", [(300, 4), (64, 0)])
def test_opencl_takes_fewer_slots_where_fewer_argument_bytes_fit(backend, monkeypatch, limit,
                                                                slots):
    """RMSprop's 48 bytes a slot (64-bit pointers) and 40 more: 4 slots in 300 bytes, none in
    64 (then a launch per parameter)."""
    optim = _opencl(backend)
    monkeypatch.setattr(optim, "ARGUMENT_BYTES", limit)
    monkeypatch.setitem(backend.__dict__, "_multi_step_kernels", {})
    assert optim._slots(backend, "rmsprop_steps", np.dtype("float32")) == slots
    launched = _launched(monkeypatch)
    batched = _lists(backend, "rmsprop_steps", ["float32"])
    _call(backend, "rmsprop_steps", batched, many=True)
    fused = len(MANY) - len(VIEWS)
    assert launched.count("rmsprop_steps") == (-(-fused // slots) if slots else 0)
    assert launched.count("rmsprop_step") == (0 if slots else fused)
    single = _lists(backend, "rmsprop_steps", ["float32"])
    _call(backend, "rmsprop_steps", single, many=False)
    _assert_same_bits(_host(backend, batched), _host(backend, single))


def test_opencl_checks_the_lists_before_updating_anything(backend):
    _opencl(backend)
    params, grads, states, firsts = lists = _lists(backend, "rmsprop_steps", ["float32"])
    before = _host(backend, lists)
    with pytest.raises(ValueError, match="rmsprop_steps: 35 parameters but a list of 34"):
        backend.rmsprop_steps(params, grads[:-1], *states, 1e-2, 0.9, 1e-6, 0.5, 0.01)
    _assert_same_bits(_host(backend, lists), before)
    # a gradient of the wrong shape last: the views before it are not updated either
    wrong = grads[:-1] + [backend.from_numpy(np.zeros((1, 2, 3), np.float32))]
    with pytest.raises(ShapeError, match="rmsprop_steps: a parameter of shape"):
        backend.rmsprop_steps(params, wrong, *states, 1e-2, 0.9, 1e-6, 0.5, 0.01)
    _assert_same_bits(_host(backend, lists), before)
