"""Module, Parameter, layers and init: registration, state dicts, modes, moving, printing,
PyTorch's default initializations, BatchNorm's running statistics."""

import math

import numpy as np
import pytest

import ndlite
from ndlite import nn
from ndlite.errors import ShapeError


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)
        self.bn = nn.BatchNorm2d(2)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(8, 3))
        self.scale = nn.Parameter(ndlite.ones(1))

    def forward(self, x):
        return self.head(self.bn(self.conv(x)).relu()) * self.scale


def test_parameters_buffers_and_children_are_registered():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["scale", "conv.weight", "conv.bias", "bn.weight", "bn.bias",
                     "head.1.weight", "head.1.bias"]
    assert [n for n, _ in net.named_buffers()] == ["bn.running_mean", "bn.running_var",
                                                   "bn.num_batches_tracked"]  # as PyTorch
    assert [type(c).__name__ for c in net.children()] == ["Conv2d", "BatchNorm2d", "Sequential"]
    assert len(list(net.modules())) == 6
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in net.parameters())
    assert not isinstance(ndlite.ones(2), nn.Parameter)


def test_gradients_reach_every_parameter_and_zero_grad_forgets_them():
    net = Net()
    net(ndlite.randn(4, 1, 4, 4)).sum().backward()
    assert all(p.grad is not None and p.grad.shape == p.shape for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_state_dict_round_trip_and_strict_loading():
    a, b = Net(), Net()
    state = a.state_dict()
    assert list(state) == ["scale", "conv.weight", "conv.bias", "bn.weight", "bn.bias",
                           "bn.running_mean", "bn.running_var", "bn.num_batches_tracked",
                           "head.1.weight",
                           "head.1.bias"]
    b.load_state_dict(state)
    x = ndlite.randn(2, 1, 4, 4)
    a.eval(), b.eval()
    np.testing.assert_array_equal(a(x).detach().numpy(), b(x).detach().numpy())
    partial = dict(state)
    del partial["scale"]
    partial["extra"] = ndlite.zeros(1)
    with pytest.raises(KeyError, match="scale.*extra"):
        b.load_state_dict(partial)
    result = b.load_state_dict(partial, strict=False)
    assert result.missing_keys == ["scale"] and result.unexpected_keys == ["extra"]
    state["conv.bias"] = ndlite.zeros(5)
    with pytest.raises(ShapeError, match="conv.bias"):
        b.load_state_dict(state)


def test_train_eval_switches_every_module():
    net = Net()
    assert net.training and net.bn.training
    net.eval()
    assert not net.training and not net.bn.training and not net.head[1].training
    net.train()
    assert net.head[0].training


def test_to_moves_in_place_so_optimizers_keep_their_parameters():
    net = Net()
    params = list(net.parameters())
    net.to(ndlite.float64)
    assert [id(p) for p in net.parameters()] == [id(p) for p in params]
    assert all(p.dtype == ndlite.float64 for p in net.parameters())
    assert net.bn.running_mean.dtype == ndlite.float64
    assert net(ndlite.randn(2, 1, 4, 4, dtype=ndlite.float64)).dtype == ndlite.float64
    assert net.to("numpy") is net


def test_repr_reads_like_pytorch():
    text = repr(nn.Sequential(nn.Conv2d(1, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Linear(512, 10)))
    assert text.splitlines()[0] == "Sequential("
    assert "(0): Conv2d(1, 32, kernel_size=(5, 5), stride=(1, 1))" in text
    assert "(3): Linear(in_features=512, out_features=10, bias=True)" in text


@pytest.mark.parametrize("layer,fan_in", [(nn.Linear(50, 7), 50),
                                          (nn.Conv2d(6, 4, (3, 2), groups=2), 18)])
def test_default_init_is_pytorchs(layer, fan_in):
    bound = 1 / math.sqrt(fan_in)  # kaiming_uniform_(a=sqrt(5)) and the bias rule agree
    w, b = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.8 * bound  # spread over the whole interval, not a narrow one
    ndlite.manual_seed(5)
    first = type(layer)(*((50, 7) if isinstance(layer, nn.Linear) else (6, 4, (3, 2))))
    ndlite.manual_seed(5)
    second = type(layer)(*((50, 7) if isinstance(layer, nn.Linear) else (6, 4, (3, 2))))
    np.testing.assert_array_equal(first.weight.detach().numpy(), second.weight.detach().numpy())


def test_init_functions():
    w = ndlite.empty(300, 200)
    nn.init.xavier_uniform_(w)
    assert np.abs(w.numpy()).max() <= math.sqrt(6 / 500)
    nn.init.kaiming_normal_(w, nonlinearity="relu")
    assert abs(w.numpy().std() - math.sqrt(2 / 200)) < 0.005
    nn.init.constant_(w, 0.25)
    assert (w.numpy() == 0.25).all()
    assert nn.init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)


def test_batchnorm_running_stats_and_eval():
    bn = nn.BatchNorm1d(3, momentum=0.5)
    x = ndlite.randn(16, 3) * 2 + 1
    bn(x)
    data = x.numpy()
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.5 * data.mean(0), rtol=1e-5)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.5 + 0.5 * data.var(0, ddof=1),
                               rtol=1e-5)
    bn.eval()
    before = bn.running_mean.numpy().copy()
    out = bn(x).detach().numpy()
    np.testing.assert_array_equal(bn.running_mean.numpy(), before)
    expected = (data - before) / np.sqrt(bn.running_var.numpy() + 1e-5)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_dropout_module_follows_the_mode():
    drop = nn.Dropout(0.5)
    x = ndlite.ones(100)
    assert (drop(x).numpy() == 0).any()
    drop.eval()
    assert drop(x) is x


def test_loss_modules_match_the_functions():
    x, y = ndlite.randn(4, 5), ndlite.tensor([0, 4, 2, 1])
    assert nn.CrossEntropyLoss(label_smoothing=0.1)(x, y).item() == pytest.approx(
        nn.functional.cross_entropy(x, y, label_smoothing=0.1).item())
    assert nn.NLLLoss(reduction="sum")(x, y).item() == pytest.approx(
        nn.functional.nll_loss(x, y, reduction="sum").item())
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss(reduction="avg")


def test_module_list_and_assigning_the_wrong_kind():
    layers = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])
    holder = nn.Module()
    holder.layers = layers
    assert len(list(holder.parameters())) == 4
    lin = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="weight"):
        lin.weight = ndlite.zeros(2, 2)
