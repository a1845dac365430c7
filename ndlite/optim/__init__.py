"""Optimizers with PyTorch's names and update rules: SGD, RMSprop, Adam, AdamW (each step runs
the backend's fused update, protocol.py, on the parameter's buffer in place), Adagrad,
Adadelta, Adamax, NAdam and RAdam (composed from tensor ops), and the learning-rate schedulers in
`ndlite.optim.lr_scheduler`. Steps record no graph."""

from . import lr_scheduler
from .adam import Adam, AdamW
from .adaptive import Adadelta, Adagrad, Adamax, NAdam, RAdam
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Adadelta", "Adagrad", "Adam", "AdamW", "Adamax", "NAdam", "Optimizer", "RAdam",
           "RMSprop", "SGD", "lr_scheduler"]
