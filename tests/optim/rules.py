"""PyTorch's documented update rules (torch.optim docs, "Algorithm" boxes), written out
independently in NumPy float64 for one parameter, one step at a time."""

from __future__ import annotations

import numpy as np


def sgd(p, g, state, lr, momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.0):
    g = g + weight_decay * p
    if momentum:
        if "b" not in state:
            state["b"] = g.copy()
        else:
            state["b"] = momentum * state["b"] + (1 - dampening) * g
        g = g + momentum * state["b"] if nesterov else state["b"]
    return p - lr * g


def rmsprop(p, g, state, lr, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
            centered=False):
    g = g + weight_decay * p
    v = state["v"] = alpha * state.get("v", 0.0) + (1 - alpha) * g * g
    vt = v
    if centered:
        ga = state["g"] = alpha * state.get("g", 0.0) + (1 - alpha) * g
        vt = v - ga * ga
    if momentum > 0:
        b = state["b"] = momentum * state.get("b", 0.0) + g / (np.sqrt(vt) + eps)
        return p - lr * b
    return p - lr * g / (np.sqrt(vt) + eps)


def adam(p, g, state, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
         decoupled=False):
    b1, b2 = betas
    t = state["t"] = state.get("t", 0) + 1
    if decoupled:
        p = p - lr * weight_decay * p
    else:
        g = g + weight_decay * p
    m = state["m"] = b1 * state.get("m", 0.0) + (1 - b1) * g
    v = state["v"] = b2 * state.get("v", 0.0) + (1 - b2) * g * g
    m_hat = m / (1 - b1 ** t)
    if amsgrad:
        vmax = state["vmax"] = np.maximum(state.get("vmax", 0.0), v)
        v_hat = vmax / (1 - b2 ** t)
    else:
        v_hat = v / (1 - b2 ** t)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps)
