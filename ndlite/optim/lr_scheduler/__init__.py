"""Learning-rate schedules with PyTorch's names and formulas (`ndlite.optim.lr_scheduler`):
the closed forms StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, LambdaLR, LinearLR,
OneCycleLR, SequentialLR and ReduceLROnPlateau (closed_form.py), and ConstantLR, PolynomialLR,
MultiplicativeLR, CosineAnnealingWarmRestarts and CyclicLR (more.py). Call
`scheduler.step()` once per epoch (per batch for OneCycleLR and CyclicLR), after the
optimizer's steps."""

from .closed_form import (
    CosineAnnealingLR,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    LRScheduler,
    MultiStepLR,
    OneCycleLR,
    ReduceLROnPlateau,
    SequentialLR,
    StepLR,
)
from .more import (
    ConstantLR,
    CosineAnnealingWarmRestarts,
    CyclicLR,
    MultiplicativeLR,
    PolynomialLR,
)

__all__ = ["ConstantLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "CyclicLR",
           "ExponentialLR", "LRScheduler", "LambdaLR", "LinearLR", "MultiStepLR",
           "MultiplicativeLR", "OneCycleLR", "PolynomialLR", "ReduceLROnPlateau", "SequentialLR",
           "StepLR"]
