"""Random sampling with PyTorch's names: `Generator` (a seeded stream of its own), normal,
bernoulli, multinomial (with and without replacement), and the in-place fills
`Tensor.uniform_ / normal_ / bernoulli_ / random_ / exponential_`.

The numbers are drawn on the host (NumPy's PCG64, from the global stream that `manual_seed`
resets, or from a `Generator`) and copied to the backend, so one seed gives the same tensors on
NumPy, CuPy and OpenCL. Dropout, which draws a mask per call, takes one seed from that stream
and draws the mask on the device with a counter-based hash: the same bits on every backend.

>>> import ndlite
>>> g = ndlite.Generator().manual_seed(1)
>>> ndlite.multinomial(ndlite.tensor([0.0, 1.0, 0.0]), 2, replacement=True, generator=g).tolist()
[1, 1]
"""

from __future__ import annotations

import numbers

import numpy as np

from .creation import rng
from .creation import tensor as make_tensor
from .dtypes import as_dtype, bool_, default_float, is_floating
from .errors import DTypeError, ShapeError
from .graph import no_grad
from .ops.indexing import copy_
from .tensor import Tensor


class Generator:
    """A random stream of its own: `g = ndlite.Generator().manual_seed(42)`, then
    `ndlite.randn(3, generator=g)`. `device` is accepted (draws are on the host anyway)."""

    def __init__(self, device=None):
        self.device = device
        self._seed = 67280421310721  # PyTorch's default seed of a new generator
        self.host = np.random.default_rng(self._seed)

    def manual_seed(self, seed: int) -> Generator:
        if not isinstance(seed, numbers.Integral) or seed < 0:
            raise ValueError(f"Generator.manual_seed: seed must be a non-negative integer, "
                             f"got {seed!r}")
        self._seed = int(seed)
        self.host = np.random.default_rng(self._seed)
        return self

    def seed(self) -> int:
        """Reseed from fresh entropy; returns the new seed."""
        self.manual_seed(int(np.random.SeedSequence().entropy % (2**63)))
        return self._seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> dict:
        return self.host.bit_generator.state

    def set_state(self, state: dict) -> Generator:
        self.host.bit_generator.state = state
        return self


def _on(like: Tensor | None, values: np.ndarray, backend=None, device=None) -> Tensor:
    where = backend if backend is not None else device
    if where is None and like is not None:
        where = like._backend
    return make_tensor(values, backend=where)


def _host(value) -> np.ndarray:
    return value.detach().numpy() if isinstance(value, Tensor) else np.asarray(value)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, backend=None,
           device=None, requires_grad: bool = False) -> Tensor:
    """Normal samples: `normal(mean_tensor, std_tensor)` elementwise (broadcast), or
    `normal(0.0, 1.0, size=(2, 3))`."""
    like = mean if isinstance(mean, Tensor) else std if isinstance(std, Tensor) else None
    m, s = _host(mean), _host(std)
    if np.any(s < 0):
        raise ValueError("normal: std must be >= 0")
    shape = tuple(size) if size is not None else np.broadcast_shapes(m.shape, s.shape)
    dt = as_dtype(dtype) if dtype is not None else (like.dtype if like is not None and
                                                     is_floating(like.dtype) else default_float)
    values = (m + s * rng(generator).standard_normal(shape)).astype(dt)
    out = _on(like, values, backend, device)
    return out.requires_grad_() if requires_grad else out


def bernoulli(input: Tensor, p=None, *, generator=None) -> Tensor:
    """0/1 samples with the probabilities in `input` (or the number `p`), in input's dtype."""
    probs = _host(input) if p is None else np.full(input.shape, p)
    if np.any((probs < 0) | (probs > 1)):
        raise ValueError("bernoulli: probabilities must be in [0, 1]")
    draws = rng(generator).random(probs.shape) < probs
    return _on(input, draws.astype(input.dtype if is_floating(input.dtype) else default_float))


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,
                generator=None) -> Tensor:
    """Indices drawn from the (unnormalized) weights in each row of `input` (1-D or 2-D):
    int64 of shape (num_samples,) or (rows, num_samples). Without replacement an index comes
    at most once, so num_samples may not exceed the number of non-zero weights.

    >>> import ndlite
    >>> ndlite.manual_seed(0)
    >>> ndlite.multinomial(ndlite.tensor([[0.0, 3.0]]), 1).tolist()
    [[1]]
    """
    if not isinstance(input, Tensor) or not is_floating(input.dtype):
        raise DTypeError("multinomial: input must be a float tensor of weights")
    if input.ndim not in (1, 2):
        raise ShapeError(f"multinomial: input must be 1-D or 2-D, got shape {input.shape}")
    if num_samples < 1:
        raise ValueError(f"multinomial: num_samples must be >= 1, got {num_samples}")
    weights = _host(input).astype(np.float64).reshape(-1, input.shape[-1])
    if np.any(weights < 0) or not np.all(np.isfinite(weights)):
        raise ValueError("multinomial: weights must be finite and non-negative")
    totals = weights.sum(axis=1)
    if np.any(totals <= 0):
        raise ValueError("multinomial: every row of weights must have a positive sum")
    nonzero = (weights > 0).sum(axis=1)
    if not replacement and np.any(num_samples > nonzero):
        raise ValueError(f"multinomial: cannot draw {num_samples} samples without replacement "
                         f"from rows with {int(nonzero.min())} non-zero weights")
    host = rng(generator)
    rows = [host.choice(weights.shape[1], num_samples, replace=bool(replacement), p=w / t)
            for w, t in zip(weights, totals)]
    out = np.array(rows, dtype=np.int64).reshape(input.shape[:-1] + (num_samples,))
    return _on(input, out)


# ---- in-place fills (Tensor methods) ----------------------------------------------------------


def _fill(t: Tensor, values: np.ndarray) -> Tensor:
    with no_grad():
        return copy_(t, make_tensor(values.astype(t.dtype), backend=t._backend))


def uniform_(self: Tensor, a: float = 0.0, b: float = 1.0, *, generator=None) -> Tensor:
    return _fill(self, rng(generator).uniform(a, b, self.shape))


def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    return _fill(self, mean + std * rng(generator).standard_normal(self.shape))


def bernoulli_(self: Tensor, p=0.5, *, generator=None) -> Tensor:
    probs = _host(p)
    return _fill(self, rng(generator).random(self.shape) < probs)


def exponential_(self: Tensor, lambd: float = 1.0, *, generator=None) -> Tensor:
    return _fill(self, rng(generator).exponential(1.0 / lambd, self.shape))


def random_(self: Tensor, from_: int = 0, to: int | None = None, *, generator=None) -> Tensor:
    """Integers in [from_, to) (to=None: up to 2**24 for float32, 2**53 for float64, the
    dtype's maximum for integers; `random_(n)` means [0, n))."""
    if to is None and from_ != 0:
        from_, to = 0, from_
    if to is None:
        to = {"float32": 2**24, "float64": 2**53}.get(str(self.dtype),
                                                      np.iinfo(self.dtype).max
                                                      if self.dtype != bool_ else 2)
    return _fill(self, rng(generator).integers(from_, to, self.shape))


METHODS = {"uniform_": uniform_, "normal_": normal_, "bernoulli_": bernoulli_,
           "exponential_": exponential_, "random_": random_,
           "bernoulli": lambda self, p=None, generator=None: bernoulli(
               self, p, generator=generator),
           "multinomial": multinomial}
