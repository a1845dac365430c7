"""DataLoader worker processes: a spawn-context process pool (never fork, which would copy a
CUDA context) that maps lists of batch indices to collated batches. The dataset and
collate_fn travel once per worker, through the pool's initializer; results are yielded in
batch order whatever the workers' timing, with a few batches fetched ahead."""

from __future__ import annotations

import collections
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from .collate import collate_numpy

_worker_state: dict = {}


def fetch(dataset, indices: list, collate_fn):
    """One batch: the dataset's one-indexing `batch` when it has one and no collate_fn is
    given, else its items through collate_fn (NumPy arrays from the default collation)."""
    if collate_fn is None and hasattr(dataset, "batch"):
        return dataset.batch(np.asarray(indices, dtype=np.int64))
    items = [dataset[int(i)] for i in indices]
    return collate_numpy(items) if collate_fn is None else collate_fn(items)


def _init_worker(dataset, collate_fn) -> None:
    _worker_state["dataset"], _worker_state["collate_fn"] = dataset, collate_fn


def _fetch_in_worker(indices: list):
    return fetch(_worker_state["dataset"], indices, _worker_state["collate_fn"])


def fetch_in_workers(dataset, batches, collate_fn, num_workers: int, prefetch: int):
    """Yield fetch(dataset, batch, collate_fn) for each batch of `batches`, in order, computed
    by `num_workers` spawned processes with at most `prefetch` batches in flight."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(num_workers, mp_context=context, initializer=_init_worker,
                             initargs=(dataset, collate_fn)) as pool:
        pending = collections.deque()
        batches = iter(batches)
        try:
            for indices in batches:
                pending.append(pool.submit(_fetch_in_worker, list(indices)))
                if len(pending) >= prefetch:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()
