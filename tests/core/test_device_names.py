"""PyTorch's device idioms: names, Tensor.device, ndlite.cuda / accelerator queries, TF32 flags."""

import pytest

import ndlite
from ndlite import BackendUnavailableError


def test_device_objects_print_and_compare_like_torch():
    d = ndlite.device("cuda", 1)
    assert repr(d) == "device(type='cuda', index=1)" and str(d) == "cuda:1"
    assert d == "cuda:1" and d == ndlite.device("cuda:1") and d != "cuda:0" and d != "cpu"
    assert ndlite.device("numpy") == "cpu" and str(ndlite.device("cupy:0")) == "cuda:0"
    assert f"{ndlite.device('cpu'):>5}" == "  cpu"


def test_cpu_names_the_numpy_backend_everywhere():
    x = ndlite.zeros(2, device="cpu")
    assert x.device == "cpu" and x.device == "numpy" and str(x.device) == "cpu"
    assert x.to("cpu") is x and x.cpu() is x and x.to(ndlite.device("cpu")) is x
    model = ndlite.nn.Linear(2, 2).to("cpu").cpu()
    assert all(p.device == "cpu" for p in model.parameters())
    assert ndlite.get_backend("cpu") is ndlite.get_backend("numpy")
    y = ndlite.ones(3, dtype=ndlite.float64)
    assert x.to(y).dtype == ndlite.float64


def test_torch_device_idiom_runs_without_cuda():
    device = ndlite.device("cuda" if ndlite.cuda.is_available() else "cpu")
    x = ndlite.ones(2).to(device)
    assert x.device == device
    assert ndlite.cuda.is_bf16_supported() in ((True, False) if ndlite.cuda.is_available()
                                               else (False,))
    assert isinstance(ndlite.cuda.device_count(), int)
    assert ndlite.accelerator.is_available() == ndlite.cuda.is_available()
    if not ndlite.cuda.is_available():
        assert ndlite.accelerator.current_accelerator() is None


def test_unknown_name_suggests_the_closest():
    with pytest.raises(BackendUnavailableError, match="did you mean 'cuda'"):
        ndlite.zeros(1, device="cdua")


def test_tf32_switches_are_off_by_default_and_settable():
    assert ndlite.backends.cuda.matmul.allow_tf32 is False
    assert ndlite.backends.cudnn.allow_tf32 is False
    try:
        ndlite.backends.cuda.matmul.allow_tf32 = True
        assert ndlite.backends.cuda.matmul.allow_tf32 is True
    finally:
        ndlite.backends.cuda.matmul.allow_tf32 = False


def test_script_idioms_that_are_no_ops_here():
    x = ndlite.ones(2).pin_memory().to("cpu", non_blocking=True)
    assert isinstance(x.device, ndlite.device) and not isinstance("cpu", ndlite.device)
    model = ndlite.nn.Linear(2, 2)
    assert ndlite.compile(model) is model
