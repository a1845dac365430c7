"""Optimizers with PyTorch's names and update rules: SGD, RMSprop, Adam, AdamW, and the
learning-rate schedulers in `ndlite.optim.lr_scheduler`. Each step runs the backend's fused
update (protocol.py) on the parameter's buffer in place, recording no graph."""

from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Adam", "AdamW", "Optimizer", "RMSprop", "SGD", "lr_scheduler"]
