"""A first-order backward adds the gradients of several slices of one tensor into the slice of
one buffer it holds (ndlite/slice_grads.py) instead of a zeros buffer per piece and full-size
adds. The values must be the plain path's (the same sums in the same order), checked against
that path forced (`plain_path()`) and against float64 central differences; create_graph,
hooks, retain_grad and leaves keep their semantics.

On the backend NDLITE_BACKEND names (tests/core otherwise runs on the reference): the
in-place adds are backend calls on views (`slice`, `add`, `assign`), so each backend runs them.
"""

import contextlib
import os

import numpy as np
import pytest

import ndlite
from ndlite.ops.movement import Slice
from ndlite.slice_grads import SLICING
from ndlite.testing.gradcheck import gradcheck, gradgradcheck

BACKEND = os.environ.get("NDLITE_BACKEND", "numpy").split(":")[0]
if BACKEND not in ("numpy", "opencl"):
    BACKEND = "numpy"


@contextlib.contextmanager
def plain_path():
    """Backward as before: every slice gradient materialized, then summed full-size."""
    SLICING.discard(Slice)
    try:
        yield
    finally:
        SLICING.add(Slice)


def tensor(a, requires_grad=True):
    return ndlite.tensor(a, backend=BACKEND, requires_grad=requires_grad)


def _qkv(x):
    qkv = (x * 1.5).reshape(2, 5, 3, 2, 4).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    return (q * k * v).sum()


def _split(x):
    y = x.tanh()
    a, b, c = ndlite.split(y, [1, 2, 3], dim=2)
    d, e = ndlite.split(y, 2, dim=1)
    return a.exp().sum() + (b * b).sum() * 0.5 + (c * 3).sum() + (d * e).sum()


def _chunk_narrow(x):
    y = x * x
    gates = ndlite.chunk(y, 4, dim=-1)
    out = gates[0].sigmoid() * gates[1].tanh() + gates[2] * gates[3]
    return out.sum() + ndlite.narrow(y, 0, 1, 1).sum() * 2.0


def _unbind_like(x):
    y = x + 0.25
    rows = [y[i] for i in range(y.shape[0])]
    total = rows[0] * 0
    for i, r in enumerate(rows):
        total = total + r * (i + 1)
    return (total * total).sum()


def _overlapping(x):
    y = x.exp()
    pieces = [y[:, :3], y[:, 1:], y[:, ::2], y[:, ::-1], y[0], y[1, 2], y[None, 0, :2]]
    return sum((p * (i + 2)).sum() * p.mean() for i, p in enumerate(pieces))


def _full_then_slices(x):
    y = x * 2.0
    return (y * y).sum() + (y[:, 1:3] ** 3).sum() + y[0].sum()


def _passed_through(x):
    # an add hands one gradient buffer to both of its inputs: neither may be added into (in
    # this order the slices of a and b arrive after it)
    a, b = x * 2.0, x * 3.0
    s = a + b
    return (a[0] * 5).sum() + (b[1:] ** 2).sum() + (s * s).sum()


def _slice_of_slice(x):
    y = x.sin()
    top = y[:2]
    return (top[0] * top[1]).sum() + (y[1:] * 2).sum() + (top[:, 1:] ** 2).sum()


PATTERNS = {"qkv": (_qkv, (2, 5, 24)), "split": (_split, (3, 4, 6)),
            "chunk_narrow": (_chunk_narrow, (3, 8)), "unbind_like": (_unbind_like, (4, 3, 2)),
            "overlapping": (_overlapping, (3, 5)), "full_then_slices": (_full_then_slices, (3, 5)),
            "passed_through": (_passed_through, (3, 5)),
            "passed_through_leaf": (lambda x: (x[0] * 5).sum() + (x + x[1]).sum(), (3, 5)),
            "slice_of_slice": (_slice_of_slice, (4, 5))}


def _grads(fn, x0, dtype):
    x = tensor(x0.astype(dtype))
    fn(x).backward()
    return x.grad.numpy()


@pytest.mark.parametrize("name", sorted(PATTERNS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradients_equal_the_plain_path(name, dtype):
    fn, shape = PATTERNS[name]
    x0 = np.random.default_rng(1).standard_normal(shape)
    new = _grads(fn, x0, dtype)
    with plain_path():
        old = _grads(fn, x0, dtype)
    # the same sums in the same order: equal values (a zero's sign may differ)
    np.testing.assert_array_equal(new, old)


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_gradients_match_finite_differences(name):
    fn, shape = PATTERNS[name]
    x0 = np.random.default_rng(2).standard_normal(shape)
    gradcheck(lambda t: fn(t[0]), [x0], [0], backend=BACKEND, name=name)
    # through .backward (leaf accumulation) too, against central differences of the loss
    x = tensor(x0)
    fn(x).backward()
    d = np.random.default_rng(3).standard_normal(shape)
    eps = 1e-6
    with ndlite.no_grad():
        numeric = (fn(tensor(x0 + eps * d, False)).item()
                   - fn(tensor(x0 - eps * d, False)).item()) / (2 * eps)
    assert abs(float(np.sum(x.grad.numpy() * d)) - numeric) <= 1e-6 + 1e-6 * abs(numeric)


@pytest.mark.parametrize("name", ["qkv", "overlapping", "passed_through", "slice_of_slice"])
def test_second_order_through_slices(name):
    fn, shape = PATTERNS[name]
    x0 = np.random.default_rng(4).standard_normal(shape)
    gradgradcheck(lambda t: fn(t[0]), [x0], [0], backend=BACKEND, name=name)


def test_create_graph_gradient_equals_first_order():
    x0 = np.random.default_rng(5).standard_normal((3, 5))
    x = tensor(x0)
    (g,) = ndlite.autograd.grad(_overlapping(x), [x], create_graph=True)
    assert g.requires_grad
    np.testing.assert_array_equal(g.detach().numpy(), _grads(_overlapping, x0, np.float64))


def _sliced_leaf_loss(w):
    return (w[0] * w[1]).sum() + (w[1:] ** 2).sum() + (w[:, ::2] * 3).sum()


def test_a_sliced_leaf_gets_a_fresh_gradient_and_keeps_accumulating():
    w0 = np.random.default_rng(6).standard_normal((3, 4))
    w = tensor(w0)
    _sliced_leaf_loss(w).backward()
    first = w.grad
    snapshot = first.numpy().copy()
    with plain_path():
        ref = tensor(w0)
        _sliced_leaf_loss(ref).backward()
        np.testing.assert_array_equal(snapshot, ref.grad.numpy())
        _sliced_leaf_loss(ref).backward()
    # a second pass sums into a new buffer: the gradient the user holds does not change
    _sliced_leaf_loss(w).backward()
    assert w.grad is not first
    np.testing.assert_array_equal(first.numpy(), snapshot)
    np.testing.assert_array_equal(w.grad.numpy(), ref.grad.numpy())
    np.testing.assert_allclose(w.grad.numpy(), 2 * snapshot, rtol=1e-14)
    # the gradient is the leaf's own: writing into it changes nothing else
    w.grad.zero_()
    np.testing.assert_array_equal(first.numpy(), snapshot)


def test_a_leaf_given_gradient_through_one_slice_is_a_copy():
    w = tensor(np.zeros((2, 3)))
    seed = tensor(np.ones(3), requires_grad=False)
    w[1].backward(seed)
    seed.zero_()
    np.testing.assert_array_equal(w.grad.numpy(), [[0, 0, 0], [1, 1, 1]])


def test_autograd_grad_of_a_sliced_leaf():
    w0 = np.random.default_rng(7).standard_normal((3, 4))
    w = tensor(w0)
    (g,) = ndlite.autograd.grad(_sliced_leaf_loss(w), [w])
    assert w.grad is None
    with plain_path():
        (ref,) = ndlite.autograd.grad(_sliced_leaf_loss(w), [w])
    np.testing.assert_array_equal(g.numpy(), ref.numpy())


def test_post_accumulate_hooks_see_each_full_gradient_and_it_is_never_changed_after():
    w = tensor(np.random.default_rng(8).standard_normal((3, 4)))
    seen = []
    w.register_post_accumulate_grad_hook(lambda p: seen.append((p.grad, p.grad.numpy().copy())))
    _sliced_leaf_loss(w).backward()
    assert len(seen) == 4  # one per slice that reaches the leaf
    for grad, values in seen:
        assert grad.shape == (3, 4)
        np.testing.assert_array_equal(grad.numpy(), values)
    np.testing.assert_array_equal(seen[-1][1], w.grad.numpy())
    with plain_path():
        ref = tensor(w.detach().numpy())
        _sliced_leaf_loss(ref).backward()
    np.testing.assert_array_equal(w.grad.numpy(), ref.grad.numpy())


def test_retain_grad_on_the_sliced_tensor_and_on_a_piece():
    x0 = np.random.default_rng(9).standard_normal((3, 5))

    def run():
        x = tensor(x0)
        y = x * 2.0
        y.retain_grad()
        a, b = y[0], y[1:]
        a.retain_grad()
        ((a * a).sum() + (b ** 3).sum() + (y[:, 2] * a[2]).sum()).backward()
        return y.grad.numpy().copy(), a.grad.numpy().copy(), x.grad.numpy().copy(), y.grad

    new = run()
    with plain_path():
        old = run()
    for n, o in zip(new[:3], old[:3]):
        np.testing.assert_array_equal(n, o)
    np.testing.assert_array_equal(new[3].numpy(), new[0])  # not changed after it was kept


def test_the_in_place_path_runs_on_this_backend(monkeypatch):
    import ndlite.slice_grads as slice_grads

    owned, real = [], slice_grads.into_slice
    monkeypatch.setattr(slice_grads, "into_slice",
                        lambda prev, mine, *a: owned.append(mine) or real(prev, mine, *a))
    x = tensor(np.random.default_rng(12).standard_normal((2, 5, 24)))
    _qkv(x).backward()
    assert owned == [False, True, True]  # materialized once, then added into twice
    with plain_path():
        ref = tensor(x.detach().numpy())
        _qkv(ref).backward()
    np.testing.assert_array_equal(x.grad.numpy(), ref.grad.numpy())


@pytest.fixture
def spy():
    """Counts of the reference backend's `full` and `add` calls by size of the result."""
    if BACKEND != "numpy":
        pytest.skip("counts the NumPy backend's calls")
    b = ndlite.get_backend("numpy")
    calls = []
    saved = {n: b.__dict__.get(n) for n in ("full", "add")}
    full, add = b.full, b.add
    b.full = lambda shape, *a: calls.append(("full", int(np.prod(shape)))) or full(shape, *a)
    b.add = lambda x, y: calls.append(("add", int(np.size(x)))) or add(x, y)
    yield calls
    for n, fn in saved.items():
        if fn is None:
            del b.__dict__[n]
        else:
            setattr(b, n, fn)


def test_fewer_full_size_buffers_for_qkv(spy):
    x0 = np.random.default_rng(10).standard_normal((2, 5, 24)).astype(np.float32)
    size = x0.size

    def count():
        x = tensor(x0)
        loss = _qkv(x)
        spy.clear()
        loss.backward()
        return (sum(1 for k, n in spy if k == "full" and n == size),
                sum(1 for k, n in spy if k == "add" and n == size))

    new = count()
    with plain_path():
        old = count()
    assert old == (3, 2)  # three zero fills, two full-size sums
    assert new == (1, 0)  # one zero fill, the other pieces added into their slices


def test_gpt_block_gradients_unchanged():
    ndlite.manual_seed(0)
    from ndlite.nn.gpt import GPT

    model = GPT(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=8, dropout=0.0)
    model.to(BACKEND)
    data = np.random.default_rng(11).integers(0, 11, (2, 9))
    tokens = ndlite.tensor(data[:, :-1], backend=BACKEND)
    targets = ndlite.tensor(data[:, 1:], backend=BACKEND)

    def grads():
        model.zero_grad()
        model(tokens, targets)[1].backward()
        return [p.grad.numpy().copy() for p in model.parameters()]

    new = grads()
    with plain_path():
        old = grads()
    for n, o in zip(new, old):
        np.testing.assert_array_equal(n, o)


def test_only_the_sign_of_an_uncovered_zero_may_differ():
    # docs/DESIGN.md: where the first piece to arrive (the materialized one: here y[0], the
    # last one used) wrote -0.0 and no later piece covers it, the plain path adds the later
    # pieces' +0.0 (giving +0.0); the in-place path leaves -0.0
    def run():
        x = tensor(np.ones((2, 3)))
        y = x * 1.0
        y.retain_grad()
        ((y[1] * 2.0).sum() + (y[0] * -0.0).sum()).backward()
        return y.grad.numpy()

    new = run()
    with plain_path():
        old = run()
    np.testing.assert_array_equal(new, old)
    assert np.signbit(new[0]).all() and not np.signbit(old[0]).any()
