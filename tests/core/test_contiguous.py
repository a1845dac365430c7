"""contiguous() and is_contiguous(): PyTorch programs write `x.transpose(1, 2).contiguous()
.view(...)` (nanoGPT's attention, word_language_model's batches); `.view()` refuses a tensor
whose elements are not in row-major order, so contiguous() must copy exactly then."""

import numpy as np
import pytest

import ndlite


@pytest.fixture(params=["numpy", "opencl"])
def backend(request):
    try:
        return ndlite.get_backend(request.param)
    except Exception as exc:  # noqa: BLE001 - any reason a backend is missing
        pytest.skip(f"backend {request.param} unavailable: {exc}")


def test_transpose_contiguous_view_is_numpys_and_differentiable(backend):
    a = np.arange(24.0).reshape(2, 3, 4)
    x = ndlite.tensor(a, backend=backend, requires_grad=True)
    t = x.transpose(1, 2)
    with pytest.raises(RuntimeError, match="not contiguous"):
        t.view(2, 12)
    y = t.contiguous().view(2, 12)
    np.testing.assert_array_equal(y.detach().numpy(), a.transpose(0, 2, 1).reshape(2, 12))
    weights = np.arange(24.0).reshape(2, 12)
    (y * ndlite.tensor(weights, backend=backend)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), weights.reshape(2, 4, 3).transpose(0, 2, 1))


@pytest.mark.parametrize("make, contiguous", [
    (lambda x: x, True), (lambda x: x[1:], True), (lambda x: x[:, 1:], False),
    (lambda x: x.transpose(0, 1), False), (lambda x: x.permute(2, 0, 1), False),
    (lambda x: x[0], True), (lambda x: x.reshape(6, 4), True),
    # evenly spaced elements flatten without a copy (PyTorch: not contiguous, but its view works)
    (lambda x: x[:, :, 0], True),
])
def test_is_contiguous_says_whether_a_flat_view_needs_a_copy(backend, make, contiguous):
    x = make(ndlite.arange(24.0, backend=backend).reshape(2, 3, 4))
    assert x.is_contiguous() is contiguous
    c = x.contiguous()
    assert (c is x) is contiguous and c.is_contiguous()
    np.testing.assert_array_equal(c.numpy(), x.numpy())
    assert c.view(-1).shape == (x.numel(),)
