"""The Optimizer base: parameter groups, per-parameter state, zero_grad, state dicts.

A subclass implements `update(param, grad, state, group)`, which changes the parameter's
buffer in place through a fused backend step. `step` calls it for every parameter that has a
gradient, under no_grad, then bumps the parameter's version (autograd then knows saved
copies of the old value are stale).
"""

from __future__ import annotations

import numbers

from .. import graph
from ..creation import tensor
from ..dtypes import is_floating
from ..errors import DTypeError
from ..tensor import Tensor


class Optimizer:
    """Base class: `Optimizer(params, defaults)`, params an iterable of tensors or of dicts
    (parameter groups with their own hyperparameters). Every optimizer also takes PyTorch's
    `maximize` (ascend) and accepts its implementation switches `foreach`, `fused` and
    `capturable` (ndlite chooses its fused steps itself)."""

    def __init__(self, params, defaults: dict, *, maximize: bool = False, foreach=None,
                 fused=None, capturable: bool = False, differentiable: bool = False):
        # PyTorch's implementation switches: ndlite picks its fused and multi-parameter steps
        # itself (foreach, fused), and a captured step (ndlite.cuda.capture) replays any
        # optimizer (capturable); a differentiable step it does not have
        if differentiable:
            raise NotImplementedError(f"{type(self).__name__}: differentiable=True is not "
                                      "supported: ndlite's steps record no graph")
        self.defaults = dict(defaults, maximize=bool(maximize))
        self.state: dict[int, dict] = {}
        self.param_groups: list[dict] = []
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        if not isinstance(params[0], dict):
            params = [{"params": params}]
        for group in params:
            self.add_param_group(group)

    def add_param_group(self, group: dict) -> None:
        group = dict(group)
        params = group["params"]
        group["params"] = [params] if isinstance(params, Tensor) else list(params)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        for p in group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError(f"{type(self).__name__}: can only optimize tensors, got "
                                f"{type(p).__name__}")
            if not is_floating(p.dtype) or not p.requires_grad:
                raise DTypeError(f"{type(self).__name__}: parameters must be floating tensors "
                                 f"that require grad (got {p.dtype}, shape {p.shape})")
            if id(p) in seen:
                raise ValueError(f"{type(self).__name__}: a parameter appears in more than one "
                                 "group")
            seen.add(id(p))
        for key, value in self.defaults.items():
            group.setdefault(key, value)
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the gradients (None, or zeros with set_to_none=False)."""
        if set_to_none:
            for group in self.param_groups:
                for p in group["params"]:
                    p.grad = None
            return
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad = Tensor._make(p.backend.full(p.shape, 0, p.dtype), p.backend)

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns closure() if given."""
        loss = None
        if closure is not None:
            with graph.enable_grad():
                loss = closure()
        with graph.no_grad():
            state = self.state
            for group in self.param_groups:
                # the group's settings read once per step, not once per parameter
                update = self.group_update(group)
                maximize = group.get("maximize", False)  # ascend: the negated gradient
                batch = getattr(update, "batch", None)  # all of them in one backend call
                todo = []
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    if grad._backend is not p._backend or grad._data.dtype != p._data.dtype:
                        grad = grad.to(p._backend, p._data.dtype)
                    if maximize:
                        grad = -grad
                    entry = state.get(id(p))
                    if entry is None:
                        entry = state[id(p)] = {}
                    if batch is None:
                        update(p, grad, entry)
                        p._bump()
                    else:
                        todo.append((p, grad, entry))
                if todo:
                    batch(todo)
                    for p, _, _ in todo:
                        p._bump()
        return loss

    def update(self, param: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        """One parameter's update. An optimizer with a fused step defines `_bind(group)`
        instead (SGD, RMSprop, Adam): the update with the group's settings bound."""
        bind = getattr(self, "_bind", None)
        if bind is None:
            raise NotImplementedError
        bind(group)(param, grad, state)

    def group_update(self, group: dict):
        """`update` for the parameters of `group`, as a function (param, grad, state): step
        calls it once per group; optimizers with fused steps bind the group's settings (a
        subclass that overrides `update` is called through it instead). A function with a
        `batch` attribute is given all of a step's (param, grad, state) of the group at once
        instead (the backends' multi-parameter steps: step_fallbacks.py)."""
        if type(self).update is Optimizer.update and hasattr(self, "_bind"):
            return self._bind(group)
        update = self.update
        return lambda param, grad, state: update(param, grad, state, group)

    @staticmethod
    def buffer(state: dict, name: str, like: Tensor) -> Tensor:
        """The state tensor `name`, created as zeros like `like` on first use."""
        t = state.get(name)
        if t is None:
            b = like._backend
            t = state[name] = Tensor._make(b.full(like.shape, 0, like.dtype), b)
        return t

    # ---- state dicts -------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """{"state": {index: {name: tensor or number}}, "param_groups": [...]}, parameters
        named by their position across groups (PyTorch's layout)."""
        index, groups = 0, []
        state = {}
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            ids = []
            for p in group["params"]:
                if id(p) in self.state:
                    state[index] = dict(self.state[id(p)])
                ids.append(index)
                index += 1
            packed["params"] = ids
            groups.append(packed)
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups) or any(
                len(g["params"]) != len(own["params"])
                for g, own in zip(groups, self.param_groups, strict=True)):
            raise ValueError(f"{type(self).__name__}.load_state_dict: the saved parameter "
                             "groups do not match this optimizer's (different model?)")
        params = [p for g in self.param_groups for p in g["params"]]
        saved_ids = [i for g in groups for i in g["params"]]
        by_saved = dict(zip(saved_ids, params, strict=True))
        self.state = {}
        for key, entry in state_dict["state"].items():
            p = by_saved[int(key)]
            self.state[id(p)] = {
                name: value if isinstance(value, numbers.Number) else _as_state_tensor(value, p)
                for name, value in entry.items()}
        for own, saved in zip(self.param_groups, groups, strict=True):
            for k, v in saved.items():
                if k != "params":
                    own[k] = v

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(group):
                if k != "params":
                    lines.append(f"    {k}: {group[k]}")
        return "\n".join(lines + [")"])


def _as_state_tensor(value, like: Tensor) -> Tensor:
    if isinstance(value, Tensor):
        return value.detach().to(like.backend, like.dtype).clone()
    return tensor(value, dtype=like.dtype, backend=like.backend)


def batched(items: list, states_of, call) -> None:
    """A step of `items` (param, grad, state) in one backend call per backend and dtype:
    call(backend, params, grads, *columns), the columns those of states_of(param, state) (a
    tuple per parameter: its state buffers and flags, as the one-parameter update takes them)."""
    parts: dict = {}
    for item in items:
        parts.setdefault((id(item[0]._backend), item[0]._data.dtype), []).append(item)
    for part in parts.values():
        columns = [list(c) for c in zip(*(states_of(p, state) for p, _, state in part))]
        call(part[0][0]._backend, [p._data for p, _, _ in part], [g._data for _, g, _ in part],
             *columns)
