"""Fast paths of a training step's small ops (protocol.py FAST_PATHS), with their fallbacks:
the specification, composed from the primitives. A GPU backend pays its host time per call
(tens of microseconds on CuPy), so two calls made one count on steps that launch hundreds:

- relu_grad(grad, out) -> grad where out > 0, else 0 (+0.0; NaN in out gives 0): ReLU's
  backward from its saved output, bitwise where(gt(out, 0), grad, 0);
- add_scalar_inplace(x, value) -> None: x += value in place, x keeping its dtype (a batch-norm
  layer's num_batches_tracked each step), bitwise assign(x, add(x, value)).
"""

from __future__ import annotations


def relu_grad(b, grad, out):
    return b.where(b.gt(out, 0), grad, 0.0)


def add_scalar_inplace(b, x, value) -> None:
    b.assign(x, b.add(x, value))


class StepPaths:
    """The step fast paths, mixed into the Backend base class; a backend with a fused kernel
    overrides the method."""

    def relu_grad(self, grad, out):
        return relu_grad(self, grad, out)

    def add_scalar_inplace(self, x, value) -> None:
        add_scalar_inplace(self, x, value)
