"""Checkpoints: `ndlite.save(obj, path)` and `ndlite.load(path)` for state dicts of models
and optimizers (nested dicts, lists and tuples of tensors, NumPy arrays, numbers, strings,
booleans and None).

The file is a plain `.npz` written and read with `allow_pickle=False`: arrays under
"t0", "t1", ..., and the structure as JSON text in "__ndlite__" (a uint8 array). Nothing in
a checkpoint can run code; a truncated or foreign file raises a ValueError saying so.
bfloat16 (which .npy cannot describe: NumPy writes it as raw void) is stored as its uint16 bit
pattern with `"dtype": "bfloat16"` beside its index, so it round-trips bitwise.
"""

from __future__ import annotations

import json
import os
import zipfile

import numpy as np

from .creation import tensor
from .dtypes import as_dtype
from .errors import DTypeError
from .tensor import Tensor

FORMAT = "ndlite-checkpoint"
VERSION = 1
_META = "__ndlite__"


def _contiguous(array: np.ndarray) -> np.ndarray:
    """A row-major copy that keeps a 0-d array 0-d (np.ascontiguousarray makes it (1,))."""
    return np.array(array, order="C", copy=True)


def _store(array: np.ndarray, arrays: list, key: str) -> dict:
    array = _contiguous(array)
    if array.dtype.name == "bfloat16":
        arrays.append(array.view(np.uint16))
        return {key: len(arrays) - 1, "dtype": "bfloat16"}
    arrays.append(array)
    return {key: len(arrays) - 1}


def _stored(node: dict, key: str, arrays) -> np.ndarray:
    array = arrays[f"t{node[key]}"]
    if node.get("dtype") == "bfloat16":
        return array.view(as_dtype("bfloat16"))  # a DTypeError naming ml_dtypes without it
    return array


def _encode(obj, arrays: list):
    if isinstance(obj, Tensor):
        return _store(obj.detach().numpy(), arrays, "tensor")
    if isinstance(obj, np.ndarray):
        if obj.dtype == object:
            raise TypeError("save: object arrays cannot be saved without pickle")
        return _store(obj, arrays, "array")
    if isinstance(obj, dict):
        return {"dict": [[_encode(k, arrays), _encode(v, arrays)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        return {"tuple" if isinstance(obj, tuple) else "list": [_encode(v, arrays) for v in obj]}
    if isinstance(obj, np.generic):
        obj = obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"value": obj}
    raise TypeError(f"save: cannot save a {type(obj).__name__}; checkpoints hold tensors, "
                    "arrays, numbers, strings, None and dicts/lists/tuples of them")


def _decode(node, arrays, backend):
    if "tensor" in node:
        return tensor(_stored(node, "tensor", arrays), backend=backend)
    if "array" in node:
        return _stored(node, "array", arrays)
    if "dict" in node:
        return {_decode(k, arrays, backend): _decode(v, arrays, backend) for k, v in node["dict"]}
    if "list" in node:
        return [_decode(v, arrays, backend) for v in node["list"]]
    if "tuple" in node:
        return tuple(_decode(v, arrays, backend) for v in node["tuple"])
    return node["value"]


def save(obj, path) -> None:
    """Write `obj` (e.g. `model.state_dict()`) to `path` as an .npz checkpoint.

    >>> import ndlite, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "model.npz")
    >>> ndlite.save({"w": ndlite.ones(2), "epoch": 3}, path)
    >>> ndlite.load(path)["epoch"]
    3
    """
    arrays: list = []
    tree = _encode(obj, arrays)
    meta = json.dumps({"format": FORMAT, "version": VERSION, "tree": tree})
    payload = {f"t{i}": a for i, a in enumerate(arrays)}
    payload[_META] = np.frombuffer(meta.encode(), dtype=np.uint8)
    path = os.fspath(path)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:  # a file object: np.savez would append ".npz" to a name
        np.savez(f, **payload)
    os.replace(tmp, path)


def load(path, backend=None):
    """Read a checkpoint written by `save`; tensors are created on `backend` (default: the
    current backend). Raises ValueError for a truncated, corrupt or foreign file."""
    path = os.fspath(path)
    what = f"load: {path!r} is not a readable ndlite checkpoint"
    try:
        with np.load(path, allow_pickle=False) as data:
            if not hasattr(data, "files") or _META not in data.files:
                raise ValueError(f"{what}: it has no ndlite metadata (a foreign file?); "
                                 "checkpoints are written by ndlite.save")
            meta = json.loads(bytes(data[_META]).decode())
            if not isinstance(meta, dict) or meta.get("format") != FORMAT:
                found = meta.get("format") if isinstance(meta, dict) else meta
                raise ValueError(f"{what}: unknown format {found!r}")
            if not isinstance(meta.get("version", 0), int) or meta.get("version", 0) > VERSION:
                raise ValueError(f"{what}: written by a newer ndlite (format version "
                                 f"{meta['version']}); upgrade ndlite")
            arrays = {name: data[name] for name in data.files if name != _META}
    except FileNotFoundError:
        raise
    except ValueError as exc:
        if str(exc).startswith(what):
            raise
        raise ValueError(f"{what} (truncated or corrupt: {exc}); save it again") from None
    except (zipfile.BadZipFile, OSError, EOFError, KeyError, json.JSONDecodeError,
            UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"{what} (truncated or corrupt: {exc}); save it again") from None
    try:
        return _decode(meta["tree"], arrays, backend)
    except DTypeError:  # bfloat16 without ml_dtypes: say which package, not "malformed"
        raise
    except (KeyError, AttributeError, TypeError, IndexError, ValueError, RecursionError) as exc:
        raise ValueError(f"{what}: its metadata is malformed ({type(exc).__name__}: {exc})") \
            from None
