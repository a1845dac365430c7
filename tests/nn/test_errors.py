"""Every bad input to the NN ops raises the intended error type, naming the op."""

import pytest

import ndlite
import ndlite.nn.functional as F
from ndlite.errors import DTypeError, ShapeError

X = ndlite.zeros(2, 4, 6, 6)
W = ndlite.zeros(8, 4, 3, 3)

CASES = [
    # conv2d
    ("rank", ShapeError, lambda: F.conv2d(ndlite.zeros(4, 6), W)),
    ("weight rank", ShapeError, lambda: F.conv2d(X, ndlite.zeros(8, 4, 3))),
    ("channels", ShapeError, lambda: F.conv2d(X, ndlite.zeros(8, 3, 3, 3))),
    ("groups", ShapeError, lambda: F.conv2d(X, ndlite.zeros(6, 1, 3, 3), groups=4)),
    ("groups zero", ValueError, lambda: F.conv2d(X, W, groups=0)),
    ("kernel too large", ShapeError, lambda: F.conv2d(X, ndlite.zeros(8, 4, 7, 7))),
    ("dilated kernel too large", ShapeError, lambda: F.conv2d(X, W, dilation=3)),
    ("negative padding", ValueError, lambda: F.conv2d(X, W, padding=-1)),
    ("zero stride", ValueError, lambda: F.conv2d(X, W, stride=0)),
    ("zero dilation", ValueError, lambda: F.conv2d(X, W, dilation=(1, 0))),
    ("bad padding string", ValueError, lambda: F.conv2d(X, W, padding="full")),
    ("same with stride", ValueError, lambda: F.conv2d(X, W, stride=2, padding="same")),
    ("bias shape", ShapeError, lambda: F.conv2d(X, W, ndlite.zeros(7))),
    ("int input", DTypeError, lambda: F.conv2d(X.long(), W)),
    ("mixed dtypes", DTypeError, lambda: F.conv2d(X.double(), W)),
    ("stride type", TypeError, lambda: F.conv2d(X, W, stride=1.5)),
    # pooling
    ("pool rank", ShapeError, lambda: F.max_pool2d(ndlite.zeros(6, 6), 2)),
    ("pool padding over half the kernel", ValueError, lambda: F.max_pool2d(X, 2, padding=2)),
    ("pool negative padding", ValueError, lambda: F.avg_pool2d(X, 2, padding=-1)),
    ("pool zero stride", ValueError, lambda: F.max_pool2d(X, 2, stride=0)),
    ("pool output < 1", ShapeError, lambda: F.max_pool2d(X, 7)),
    ("pool dilation 0", ValueError, lambda: F.max_pool2d(X, 2, dilation=0)),
    ("pool int input", DTypeError, lambda: F.max_pool2d(X.long(), 2)),
    ("adaptive size", ShapeError, lambda: F.adaptive_avg_pool2d(X, 0)),
    # losses
    ("float labels", DTypeError, lambda: F.nll_loss(ndlite.zeros(3, 4), ndlite.zeros(3))),
    ("labels out of range", IndexError, lambda: F.cross_entropy(ndlite.zeros(3, 4),
                                                                ndlite.tensor([0, 4, 1]))),
    ("negative label", IndexError, lambda: F.nll_loss(ndlite.zeros(3, 4),
                                                      ndlite.tensor([0, -1, 1]))),
    ("batch size", ShapeError, lambda: F.cross_entropy(ndlite.zeros(3, 4),
                                                       ndlite.tensor([0, 1]))),
    ("reduction", ValueError, lambda: F.nll_loss(ndlite.zeros(2, 4), ndlite.tensor([0, 1]),
                                                 reduction="avg")),
    ("class weight shape", ShapeError, lambda: F.cross_entropy(
        ndlite.zeros(2, 4), ndlite.tensor([0, 1]), weight=ndlite.ones(3))),
    ("probability shape", ShapeError, lambda: F.cross_entropy(ndlite.zeros(2, 4),
                                                              ndlite.zeros(2, 3))),
    ("label smoothing", ValueError, lambda: F.cross_entropy(
        ndlite.zeros(2, 4), ndlite.tensor([0, 1]), label_smoothing=1.5)),
    ("mse shapes", ShapeError, lambda: F.mse_loss(ndlite.zeros(3), ndlite.zeros(4))),
    ("l1 int", DTypeError, lambda: F.l1_loss(ndlite.zeros(3), ndlite.tensor([1, 2, 3]))),
    ("bce range", ValueError, lambda: F.binary_cross_entropy(ndlite.tensor([1.5]),
                                                             ndlite.tensor([1.0]))),
    ("bce reduction", ValueError, lambda: F.binary_cross_entropy_with_logits(
        ndlite.zeros(2), ndlite.zeros(2), reduction="max")),
    # activations, batch norm
    ("softmax dim", ShapeError, lambda: F.softmax(ndlite.zeros(2, 3), dim=2)),
    ("softmax int", DTypeError, lambda: F.log_softmax(ndlite.tensor([1, 2]), dim=0)),
    ("gelu approximate", ValueError, lambda: F.gelu(ndlite.zeros(2), approximate="fast")),
    ("dropout p", ValueError, lambda: F.dropout(ndlite.zeros(2), 1.5)),
    ("batch norm one value", ShapeError, lambda: F.batch_norm(ndlite.zeros(1, 3), None, None,
                                                              training=True)),
    ("batch norm channels", ShapeError, lambda: ndlite.nn.BatchNorm2d(3)(X)),
]


@pytest.mark.parametrize("what,error,call", CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises(what, error, call):
    with pytest.raises(error) as info:
        call()
    if error is not IndexError:
        assert any(name in str(info.value) for name in (
            "conv2d", "pool", "loss", "entropy", "softmax", "gelu", "dropout", "batch_norm",
            "BatchNorm", "stride", "padding", "dilation", "kernel")), str(info.value)


def test_labels_are_checked_before_anything_changes():
    logits = ndlite.zeros(2, 3, requires_grad=True)
    with pytest.raises(IndexError, match="out of bounds for 3 classes"):
        F.cross_entropy(logits, ndlite.tensor([0, 3]))
    assert logits.grad is None


def test_messages_name_the_shapes():
    with pytest.raises(ShapeError, match=r"\(2, 4, 6, 6\).*\(8, 3, 3, 3\)"):
        F.conv2d(X, ndlite.zeros(8, 3, 3, 3))
