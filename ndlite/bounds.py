"""Integer ranges known on the host, so that index checks need not read the device.

nll_loss / cross_entropy and embedding check their integer inputs (class targets, row indices)
before they run, so that bad input is a clear IndexError naming the op, not a device fault
nor garbage. The check reads the values on the host: on a GPU that is a synchronization, the
host waiting for every queued kernel, then the GPU idle while the host queues the next ones.
A training step of the character GPT met three (token ids, position ids, targets): about 4 ms
of an H100's 43 ms step went idle around them.

Most such tensors are made from host data: `tensor()` of a NumPy batch, `arange()`. Those
record the smallest and largest value here, with the tensor's buffer and version, and a check
that finds the tensor (or the base it is a view of) in range reads nothing from the device.
Anything else (a tensor computed on the device, one changed in place since, one whose memory
was aliased by `set_` or `.data =`, exported through DLPack or written by a collective:
`forget`) is read as before. A range that fails the check is read too, so the error names
the offending value as before. Not on the NumPy backend: there reading costs nothing, and
`Tensor.numpy()` shares the buffer, which can then change behind the version counter.
"""

from __future__ import annotations

import weakref

import numpy as np

#: id(tensor) -> (a weak reference to it, its buffer, its version, lowest value, highest value)
#: when made from host data (by id: a WeakKeyDictionary compares keys with ==, which a tensor
#: answers elementwise); an entry goes when its tensor does
_KNOWN: dict = {}


def remember(t, array: np.ndarray) -> None:
    """Record the range of integer tensor `t` made from the host array `array`."""
    if array.dtype.kind in "iu" and array.size and t._backend.kind != "numpy":
        key = id(t)
        _KNOWN[key] = (weakref.ref(t, lambda _, key=key: _KNOWN.pop(key, None)), t._data,
                       _version(t), int(array.min()), int(array.max()))


def _version(t) -> int:
    box = t._vbox  # read, not made: Tensor._version would give t a version box
    return 0 if box is None else box[0]


def known(t) -> tuple[int, int] | None:
    """(lowest, highest) of `t` if recorded for it or for the base it is a view of (reshape,
    permute, expand, slice), the base unchanged since (same buffer, version), else None."""
    base = t if t._view is None else t._view[0]  # a view's values are some of its base's
    entry = _KNOWN.get(id(base))
    if entry is None or entry[0]() is not base or entry[1] is not base._data or \
            entry[2] != _version(base):
        return None
    return entry[3], entry[4]


def within(t, low: int, high: int) -> bool:
    """True when `t`'s values are known, without reading the device, to lie in [low, high]."""
    span = known(t)
    return span is not None and low <= span[0] and span[1] <= high


def forget(t) -> None:
    """Drop what is known of `t` (and of the base it is a view of): its memory may now change
    without its version counting it (set_ and .data = alias it, DLPack exports it, collective
    operations write it in place)."""
    for u in (t, None if t._view is None else t._view[0]):
        if u is not None:
            entry = _KNOWN.get(id(u))
            if entry is not None and entry[0]() is u:
                del _KNOWN[id(u)]
