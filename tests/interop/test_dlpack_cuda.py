"""DLPack on a CUDA GPU, zero-copy both ways: ndlite's CuPy backend with CuPy and with PyTorch
CUDA. Skips, saying why, without a GPU (CI); the GPU machine runs it."""

import numpy as np
import pytest

import ndlite


@pytest.fixture(scope="module")
def cuda():
    backend, why = ndlite.device.registry.probe("cupy")
    if backend is None:
        pytest.skip(f"cupy unavailable: {why}")
    return backend


@pytest.fixture(scope="module")
def torch_cuda(cuda):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip(f"PyTorch {torch.__version__} has no CUDA here")
    return torch


def _ptr(t):
    return t.buffer.data.ptr


# ---- CuPy ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
def test_cupy_reads_a_tensor_without_a_copy(cuda, dtype):
    cupy = cuda.xp
    t = ndlite.tensor(np.array([[1, 0, 1], [0, 1, 1]], dtype=dtype), backend=cuda)
    a = cupy.from_dlpack(t)
    assert a.data.ptr == _ptr(t) and a.dtype == np.dtype(dtype)
    a[0, 1] = 1
    assert t.numpy()[0, 1] == 1


def test_ndlite_reads_a_cupy_array_without_a_copy(cuda):
    cupy = cuda.xp
    a = cupy.arange(12, dtype=cupy.float32).reshape(3, 4).T  # a strided view
    t = ndlite.from_dlpack(a)
    assert t.backend.name == cuda.name and _ptr(t) == a.data.ptr
    np.testing.assert_array_equal(t.numpy(), cupy.asnumpy(a))
    a[0, 0] = -1.0
    assert t.tolist()[0][0] == -1.0
    assert (t * 2).sum().item() == float((a * 2).sum())


def test_the_device_of_a_cupy_tensor(cuda):
    t = ndlite.ones(2, backend=cuda)
    assert t.__dlpack_device__() == (2, int(cuda.name.split(":")[1]))  # kDLCUDA


def test_a_cupy_tensor_that_requires_grad_is_refused(cuda):
    w = ndlite.ones(2, backend=cuda, requires_grad=True)
    with pytest.raises(BufferError, match="require gradient"):
        cuda.xp.from_dlpack(w)


def test_cuda_memory_moves_to_the_numpy_backend_only_by_copy(cuda):
    a = cuda.xp.arange(3, dtype=cuda.xp.float32)
    t = ndlite.from_dlpack(a, backend="numpy")
    assert t.backend.name == "numpy" and t.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(BufferError, match="cannot be shared"):
        ndlite.from_dlpack(a, backend="numpy", copy=False)


def test_imported_cuda_memory_takes_part_in_autograd(cuda):
    w = ndlite.from_dlpack(cuda.xp.array([1.0, 2.0], dtype=cuda.xp.float32)).requires_grad_()
    (w * w).sum().backward()
    assert w.grad.tolist() == [2.0, 4.0]


# ---- PyTorch CUDA ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
def test_torch_reads_a_cupy_tensor_without_a_copy(torch_cuda, cuda, dtype):
    t = ndlite.tensor(np.array([[1, 0, 1], [0, 1, 1]], dtype=dtype), backend=cuda)
    x = torch_cuda.from_dlpack(t)
    assert x.is_cuda and x.data_ptr() == _ptr(t) and str(x.dtype) == f"torch.{dtype}"
    x[1, 0] = 1
    torch_cuda.cuda.synchronize()
    assert t.numpy()[1, 0] == 1


def test_ndlite_reads_a_torch_cuda_tensor_without_a_copy(torch_cuda, cuda):
    torch = torch_cuda
    x = torch.arange(1_000_000, dtype=torch.float64, device="cuda")  # written on torch's stream
    t = ndlite.from_dlpack(x)
    assert t.backend.kind == "cupy" and _ptr(t) == x.data_ptr()
    assert t.sum().item() == 999_999 * 1_000_000 / 2
    strided = ndlite.from_dlpack(torch.ones(4, 6, device="cuda").t()[::2])
    assert strided.shape == (3, 4) and strided.sum().item() == 12.0


def test_a_torch_cuda_tensor_that_requires_grad_is_refused(torch_cuda, cuda):
    with pytest.raises(BufferError, match="require gradient"):
        ndlite.from_dlpack(torch_cuda.ones(2, device="cuda", requires_grad=True))
    with pytest.raises(BufferError, match="require gradient"):
        torch_cuda.from_dlpack(ndlite.ones(2, backend=cuda, requires_grad=True))
