"""DLPack both ways, zero-copy: NumPy and PyTorch CPU here (PyTorch tests skip where it is not
installed); OpenCL exports a host copy only when asked; tensors that require grad are refused
as PyTorch refuses them. CuPy and PyTorch CUDA: tests/interop/test_dlpack_cuda.py."""

import numpy as np
import pytest

import ndlite
from ndlite.errors import DTypeError


def _numpy_tensor(values, dtype=np.float32):
    return ndlite.tensor(np.asarray(values, dtype=dtype), backend="numpy")


# ---- NumPy ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_numpy_reads_a_tensor_without_a_copy(dtype):
    t = _numpy_tensor([[1, 0, 1], [0, 1, 1]], dtype)
    a = np.from_dlpack(t)
    assert a.dtype == dtype and a.shape == (2, 3)
    assert np.shares_memory(a, t.buffer)
    np.testing.assert_array_equal(a, t.numpy())


def test_writes_through_numpy_show_in_the_tensor():
    t = _numpy_tensor(np.arange(6).reshape(2, 3))
    np.from_dlpack(t)[1, 2] = -1.0
    assert t.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, -1.0]]


def test_views_export_their_strides():
    t = _numpy_tensor(np.arange(12).reshape(3, 4)).T[1:, ::2]
    a = np.from_dlpack(t)
    np.testing.assert_array_equal(a, t.numpy())
    assert np.shares_memory(a, t.buffer)


def test_an_expanded_tensor_exports_read_only_or_copies_for_old_consumers():
    t = _numpy_tensor([1, 2, 3]).expand(2, 3)
    a = np.from_dlpack(t)  # DLPack 1.0 marks it read-only
    np.testing.assert_array_equal(a, [[1, 2, 3], [1, 2, 3]])
    assert t.__dlpack__() is not None  # a DLPack 0.x consumer gets a copy


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_from_dlpack_shares_a_numpy_array(dtype):
    a = np.array([[1, 0], [1, 1]], dtype=dtype)
    t = ndlite.from_dlpack(a)
    assert t.backend.name == "numpy" and t.dtype == np.dtype(dtype) and t.shape == (2, 2)
    assert np.shares_memory(t.buffer, a)
    a[0, 1] = 1
    assert t.numpy()[0, 1] == 1


def test_from_dlpack_copies_when_asked():
    a = np.zeros(3, np.float32)
    t = ndlite.from_dlpack(a, copy=True)
    a[0] = 5.0
    assert t.tolist() == [0.0, 0.0, 0.0] and not np.shares_memory(t.buffer, a)


def test_an_imported_tensor_takes_part_in_autograd():
    w = ndlite.from_dlpack(np.array([1.0, 2.0], np.float32)).requires_grad_()
    (w * w).sum().backward()
    assert w.grad.tolist() == [2.0, 4.0]


def test_unsupported_dtype_says_what_ndlite_supports():
    with pytest.raises(DTypeError, match=r"ndlite has no uint8 .*float32.*convert first"):
        ndlite.from_dlpack(np.zeros(3, np.uint8))


def test_an_object_without_dlpack_is_a_type_error():
    with pytest.raises(TypeError, match="expected an array with __dlpack__"):
        ndlite.from_dlpack([1.0, 2.0])


def test_a_tensor_that_requires_grad_is_refused_like_pytorch():
    w = ndlite.ones(3, requires_grad=True, backend="numpy")
    with pytest.raises(BufferError, match=r"Can't export tensors that require gradient, "
                                          r"use tensor.detach\(\)"):
        np.from_dlpack(w)
    with pytest.raises(BufferError, match="require gradient"):
        np.from_dlpack(w * 2)  # a result recorded for backward
    assert np.from_dlpack(w.detach()).tolist() == [1.0, 1.0, 1.0]


def test_device_of_a_numpy_tensor_is_the_cpu():
    assert _numpy_tensor([1.0]).__dlpack_device__() == (1, 0)


def test_from_dlpack_of_an_ndlite_tensor():
    t = _numpy_tensor([1.0, 2.0])
    assert ndlite.from_dlpack(t).buffer is t.buffer
    assert not np.shares_memory(ndlite.from_dlpack(t, copy=True).buffer, t.buffer)


# ---- OpenCL: a host copy only when asked ---------------------------------------------------

@pytest.fixture(scope="module")
def opencl():
    backend, why = ndlite.device.registry.probe("opencl")
    if backend is None:
        pytest.skip(f"opencl unavailable: {why}")
    return backend


def test_opencl_device_is_reported_as_opencl(opencl):
    t = ndlite.ones(2, backend=opencl)
    assert t.__dlpack_device__()[0] == 4  # kDLOpenCL


def test_opencl_refuses_a_zero_copy_export(opencl):
    t = ndlite.arange(3.0, backend=opencl)
    with pytest.raises(BufferError, match="copy=True"):
        np.from_dlpack(t)
    with pytest.raises(BufferError, match="copy=True"):
        t.__dlpack__()


def test_opencl_exports_a_host_copy_when_asked(opencl):
    t = ndlite.arange(6.0, backend=opencl).reshape(2, 3).T
    a = np.from_dlpack(t, copy=True)
    np.testing.assert_array_equal(a, np.arange(6.0).reshape(2, 3).T)
    a[0, 0] = 99.0
    assert t.tolist()[0][0] == 0.0  # a copy


def test_opencl_import_copies_unless_told_not_to(opencl):
    a = np.arange(4, dtype=np.float32)
    t = ndlite.from_dlpack(a, backend=opencl)
    assert t.backend.name == opencl.name and t.tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(BufferError, match="cannot be shared with backend opencl"):
        ndlite.from_dlpack(a, backend=opencl, copy=False)


# ---- PyTorch on the CPU --------------------------------------------------------------------

@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch", reason="PyTorch is not installed")


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
def test_torch_reads_a_tensor_without_a_copy(torch, dtype):
    t = _numpy_tensor([[1, 0, 1], [0, 1, 1]], dtype)
    x = torch.from_dlpack(t)
    assert x.data_ptr() == t.buffer.ctypes.data and str(x.dtype) == f"torch.{dtype}"
    x[0, 0] = 0
    assert t.numpy()[0, 0] == 0


def test_ndlite_reads_a_torch_tensor_without_a_copy(torch):
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()  # a strided view
    t = ndlite.from_dlpack(x)
    assert t.backend.name == "numpy" and t.buffer.ctypes.data == x.data_ptr()
    np.testing.assert_array_equal(t.numpy(), x.numpy())
    x[0, 0] = -5.0
    assert t.tolist()[0][0] == -5.0


def test_a_torch_tensor_that_requires_grad_is_refused_by_torch(torch):
    with pytest.raises(BufferError, match="require gradient"):
        ndlite.from_dlpack(torch.ones(2, requires_grad=True))
    assert ndlite.from_dlpack(torch.ones(2, requires_grad=True).detach()).tolist() == [1, 1]


def test_torch_and_ndlite_refuse_alike(torch):
    with pytest.raises(BufferError) as ours:
        torch.from_dlpack(ndlite.ones(2, requires_grad=True, backend="numpy"))
    with pytest.raises(BufferError) as theirs:
        torch.ones(2, requires_grad=True).__dlpack__()
    assert str(ours.value) == str(theirs.value)


def test_torch_takes_a_host_copy_of_an_opencl_tensor(torch, opencl):
    t = ndlite.arange(4.0, backend=opencl)
    with pytest.raises(BufferError, match="copy=True"):
        torch.from_dlpack(t)
    x = torch.from_dlpack(t, device="cpu", copy=True)
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_a_round_trip_through_torch_is_the_same_memory(torch):
    t = _numpy_tensor([1.0, 2.0, 3.0])
    back = ndlite.from_dlpack(torch.from_dlpack(t))
    assert back.buffer.ctypes.data == t.buffer.ctypes.data


def test_the_module_examples_run():
    import doctest

    from ndlite import interop

    assert doctest.testmod(interop).failed == 0
