"""Fast paths of a training step's small ops (protocol.py FAST_PATHS), with their fallbacks:
the specification, composed from the primitives. A GPU backend pays its host time per call
(tens of microseconds on CuPy), so two calls made one count on steps that launch hundreds:

- relu_grad(grad, out) -> grad where out > 0, else 0 (+0.0; NaN in out gives 0): ReLU's
  backward from its saved output, bitwise where(gt(out, 0), grad, 0);
- add_scalar_inplace(x, value) -> None: x += value in place, x keeping its dtype (a batch-norm
  layer's num_batches_tracked each step), bitwise assign(x, add(x, value));
- sgd_steps(params, grads, momentum_buffers, lr, momentum, dampening, nesterov, weight_decay,
  first_steps) and rmsprop_steps(params, grads, square_avgs, grad_avgs, momentum_buffers, lr,
  alpha, eps, momentum, weight_decay) -> None: sgd_step / rmsprop_step (protocol.py) for every
  parameter of a list (an entry of a state list may be None, as there), one group's settings
  shared: a GPU backend updates them all in one launch, bitwise as one by one;
- adam_steps(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, step, lr, beta1, beta2,
  eps, weight_decay, decoupled_weight_decay) -> None: adam_step for every parameter of a list
  that share one step count (the optimizer calls it once per distinct count);
- conv2d_bias(x, weight, bias, stride, padding, dilation, groups, relu=False) -> conv2d
  (protocol.py) plus bias (C,) added to every channel, then relu if asked: a Conv2d layer's
  forward (and the ReLU after it in a Sequential), bitwise add(conv2d(...), reshape(bias,
  (1, C, 1, 1))), then relu;
- linear_grad(grad, x, weight, needs) -> (grad_x, grad_weight, grad_bias): a Linear layer's
  first-order gradients for grad (..., out) of x (..., in) and weight (out, in), each None
  unless `needs` (three bools) asks for it: grad @ weight, grad^T @ x with the leading dims
  flattened, grad summed over the leading dims; agrees within the contraction tolerance;
- log_softmax_grad(grad, out, axis) -> grad - exp(out) * sum(grad, axis): log_softmax's
  backward from its saved output; agrees within the transcendental tolerance.
"""

from __future__ import annotations

import sys


def relu_grad(b, grad, out):
    return b.where(b.gt(out, 0), grad, 0.0)


def add_scalar_inplace(b, x, value) -> None:
    b.assign(x, b.add(x, value))


def sgd_steps(b, params, grads, momentum_buffers, lr, momentum, dampening, nesterov,
              weight_decay, first_steps) -> None:
    for param, grad, buf, first in zip(params, grads, momentum_buffers, first_steps,
                                       strict=True):
        b.sgd_step(param, grad, buf, lr, momentum, dampening, nesterov, weight_decay, first)


def rmsprop_steps(b, params, grads, square_avgs, grad_avgs, momentum_buffers, lr, alpha, eps,
                  momentum, weight_decay) -> None:
    for param, grad, square_avg, grad_avg, buf in zip(params, grads, square_avgs, grad_avgs,
                                                      momentum_buffers, strict=True):
        b.rmsprop_step(param, grad, square_avg, grad_avg, buf, lr, alpha, eps, momentum,
                       weight_decay)


def adam_steps(b, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, step, lr, beta1, beta2,
               eps, weight_decay, decoupled_weight_decay) -> None:
    for param, grad, exp_avg, exp_avg_sq, vmax in zip(params, grads, exp_avgs, exp_avg_sqs,
                                                      max_exp_avg_sqs, strict=True):
        b.adam_step(param, grad, exp_avg, exp_avg_sq, vmax, step, lr, beta1, beta2, eps,
                    weight_decay, decoupled_weight_decay)


def conv2d_bias(b, x, weight, bias, stride, padding, dilation, groups, relu=False):
    out = b.conv2d(x, weight, stride, padding, dilation, groups)
    out = b.add(out, b.reshape(bias, (1, bias.shape[0], 1, 1)))
    return b.relu(out) if relu else out


def linear_grad(b, grad, x, weight, needs) -> tuple:
    grad_x = grad_weight = grad_bias = None
    out_features, in_features = weight.shape
    if needs[0]:
        grad_x = b.matmul(grad, weight)
    if needs[1]:
        rows = b.reshape(grad, (grad.size // out_features if out_features else 0, out_features))
        cols = b.reshape(x, (x.size // in_features if in_features else 0, in_features))
        grad_weight = b.matmul(b.permute(rows, (1, 0)), cols)
    if needs[2]:
        grad_bias = b.sum(grad, tuple(range(len(grad.shape) - 1)), False)
    return grad_x, grad_weight, grad_bias


def log_softmax_grad(b, grad, out, axis):
    return b.sub(grad, b.mul(b.exp(out), b.sum(grad, (axis,), True)))


class StepPaths:
    """The step fast paths, mixed into the Backend base class; a backend with a fused kernel
    overrides the method, or names a module of its own (functions taking the backend first)
    in `_step_kernels` for the multi-parameter steps, in `_layer_kernels` for conv2d_bias,
    linear_grad and log_softmax_grad."""

    _step_kernels = _layer_kernels = sys.modules[__name__]

    def sgd_steps(self, params, grads, momentum_buffers, lr, momentum, dampening, nesterov,
                  weight_decay, first_steps) -> None:
        self._step_kernels.sgd_steps(self, params, grads, momentum_buffers, lr, momentum,
                                     dampening, nesterov, weight_decay, first_steps)

    def rmsprop_steps(self, params, grads, square_avgs, grad_avgs, momentum_buffers, lr, alpha,
                      eps, momentum, weight_decay) -> None:
        self._step_kernels.rmsprop_steps(self, params, grads, square_avgs, grad_avgs,
                                         momentum_buffers, lr, alpha, eps, momentum,
                                         weight_decay)

    def adam_steps(self, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, step, lr, beta1,
                   beta2, eps, weight_decay, decoupled_weight_decay) -> None:
        self._step_kernels.adam_steps(self, params, grads, exp_avgs, exp_avg_sqs,
                                      max_exp_avg_sqs, step, lr, beta1, beta2, eps,
                                      weight_decay, decoupled_weight_decay)

    def relu_grad(self, grad, out):
        return relu_grad(self, grad, out)

    def add_scalar_inplace(self, x, value) -> None:
        add_scalar_inplace(self, x, value)

    def conv2d_bias(self, x, weight, bias, stride, padding, dilation, groups, relu=False):
        return self._layer_kernels.conv2d_bias(self, x, weight, bias, stride, padding,
                                               dilation, groups, relu)

    def linear_grad(self, grad, x, weight, needs) -> tuple:
        return self._layer_kernels.linear_grad(self, grad, x, weight, needs)

    def log_softmax_grad(self, grad, out, axis):
        return self._layer_kernels.log_softmax_grad(self, grad, out, axis)
