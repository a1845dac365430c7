"""Reference models: the seed CNN that ndlite grew from (MNIST, 28x28 grey digits)."""

from __future__ import annotations

from .activation import LogSoftmax, ReLU
from .container import Sequential
from .layers import Conv2d, Flatten, Linear, MaxPool2d


def mnist_cnn() -> Sequential:
    """conv 1→32 5x5, maxpool 2, conv 32→64 5x5, maxpool 2, conv 64→128 3x3, flatten 512,
    fc 128, fc 10, log_softmax; ReLU after each conv and the hidden fc. Train it with
    nll_loss (the output is log-probabilities).

    >>> import ndlite
    >>> ndlite.nn.models.mnist_cnn()(ndlite.zeros(2, 1, 28, 28)).shape
    (2, 10)
    """
    return Sequential(
        Conv2d(1, 32, 5), ReLU(), MaxPool2d(2),
        Conv2d(32, 64, 5), ReLU(), MaxPool2d(2),
        Conv2d(64, 128, 3), ReLU(),
        Flatten(),
        Linear(512, 128), ReLU(),
        Linear(128, 10),
        LogSoftmax(dim=1),
    )
