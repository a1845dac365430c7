"""Module backward hooks, PyTorch's `register_full_backward_hook` and
`register_full_backward_pre_hook`: a call of a module that has them passes its tensor input
and its output through an identity (a copy) whose backward hands the gradients to the hooks.

A backward pre-hook is called as `hook(module, grad_output)` when the gradient of the output
is known and may return a new grad_output; a backward hook as `hook(module, grad_input,
grad_output)` once the gradient of the input is (with grad_input (None,) at once when the
input needs none) and may return a new grad_input. Gradients are tuples, as PyTorch's. Like
PyTorch's, the module's input and output seen by autograd are new tensors (copies here).
Supported: one tensor input that may require grad and one tensor output (a layer, a block);
a module called otherwise raises NotImplementedError while it has backward hooks.
"""

from __future__ import annotations

from ..graph import mode
from ..ops.dispatch import unary
from ..ops.registry import Op
from ..tensor import Tensor


class HookIdentity(Op):
    """x itself (a copy): its backward runs the module's backward hooks on the gradient."""

    name = "backward_hook"

    @staticmethod
    def forward(b, x, state, role):
        return b.copy(x)

    @staticmethod
    def backward(node, grad):
        state = node.params["state"]
        return state.output_grad(grad) if node.params["role"] == "output" else \
            state.input_grad(grad)


class State:
    """One call's gradients: grad_output once the output's is known, then the hooks."""

    def __init__(self, module, has_input: bool):
        self.module, self.has_input, self.grad_output = module, has_input, None

    def output_grad(self, grad):
        for hook in list((self.module._backward_pre_hooks or {}).values()):
            result = hook[0](self.module, (grad,))
            if result is not None:
                grad = _one(result, grad, "backward pre-hook")
        self.grad_output = (grad,)
        if not self.has_input:
            self._run((None,))
        return grad

    def input_grad(self, grad):
        result = self._run((grad,))
        return grad if result[0] is None else result[0]

    def _run(self, grad_input: tuple) -> tuple:
        for hook in list((self.module._backward_hooks or {}).values()):
            result = hook[0](self.module, grad_input, self.grad_output)
            if result is not None:
                grad_input = (_one(result, grad_input[0], "backward hook"),)
        return grad_input


def _one(result, like: Tensor, what: str) -> Tensor:
    """The single gradient a hook returned (a one-tuple, or the tensor), checked against
    the one it replaces."""
    value = result[0] if isinstance(result, (tuple, list)) and len(result) == 1 else result
    if like is not None and (not isinstance(value, Tensor) or value.shape != like.shape):
        got = f"shape {value.shape}" if isinstance(value, Tensor) else type(value).__name__
        raise RuntimeError(f"{what}: must return None or one gradient of shape {like.shape} "
                           f"(as a tensor or a one-tuple), got {got}")
    return value


def wrap_input(module, args: tuple):
    """(args with the tensor input passed through the identity, the call's State), or
    (args, None) when grad mode is off."""
    if not mode.enabled:
        return args, None
    tensors = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    if len(tensors) > 1:
        raise NotImplementedError(f"{type(module).__name__}: backward hooks on a module called "
                                  f"with {len(tensors)} tensor inputs are not supported (one)")
    needs = [i for i in tensors if args[i].requires_grad]
    state = State(module, bool(needs))
    if needs:
        args = list(args)
        args[needs[0]] = unary(HookIdentity, args[needs[0]], state=state, role="input")
        args = tuple(args)
    return args, state


def wrap_output(module, output, state):
    """The output passed through the identity, so that its gradient reaches the hooks."""
    if state is None:
        return output
    if not isinstance(output, Tensor):
        raise NotImplementedError(f"{type(module).__name__}: backward hooks on a module whose "
                                  f"output is a {type(output).__name__} are not supported "
                                  "(one tensor)")
    if not output.requires_grad:
        return output
    return unary(HookIdentity, output, state=state, role="output")
