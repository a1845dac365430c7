"""DistributedDataParallel: one model replica per rank, gradients averaged over the ranks
during backward, so that every replica takes the same optimizer step (torch's DDP).

How a step goes:
- at construction, rank 0's parameters and buffers are broadcast to every rank, after a check
  that all ranks wrap the same parameter shapes; the parameters that require grad are cut
  into buckets in reverse order (the order backward produces their gradients), the first
  bucket small (1 MiB) so that communication starts early, the others `bucket_cap_mb`;
- each forward (with grad mode on, outside `no_sync`) broadcasts rank 0's buffers, then walks
  the autograd graph of the output once to learn how many gradients each parameter will
  receive; a parameter that takes no part raises an error at once, where waiting for its
  gradient would otherwise stall every rank;
- during backward, a post-accumulate-grad hook on each parameter copies its gradient into its
  bucket as soon as it is final; a bucket whose gradients are all in is all-reduced at once
  (on NCCL, on a side stream, overlapping the rest of backward), and buckets are launched in
  index order, the same on every rank. When the last one is launched, the sums are waited
  for, divided by the world size, and each `.grad` becomes a view of its bucket (torch's
  gradient_as_bucket_view=True: the next synchronized backward overwrites it).

The result is that of one process at the global batch (every rank's batch together) up to
the order of the additions. BatchNorm computes batch statistics per rank, as in torch.
"""

from __future__ import annotations

import contextlib
import functools
import weakref

import numpy as np

from .. import autograd
from ..distributed import collectives
from ..distributed.errors import DistributedError
from ..distributed.group import engine_of
from ..tensor import Tensor
from .module import Module

#: torch's first bucket (dist._DEFAULT_FIRST_BUCKET_BYTES): small, so reduction starts early
FIRST_BUCKET_BYTES = 1 << 20


class _Bucket:
    """Gradients of some parameters (one dtype) in one flat buffer, reduced together."""

    def __init__(self, index: int, members: list[int], params: list, direct: bool, engine):
        self.index, self.members = index, members
        first = params[members[0]]
        self.dtype, self.backend = first.dtype, first.backend
        sizes = [params[i].numel() for i in members]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int).tolist()
        total = self.offsets[-1]
        # direct: the backend's own buffer goes to the engine; else a host copy (MPI + OpenCL)
        self.flat = (self.backend.full((total,), 0, self.dtype) if direct
                     else np.zeros(total, self.dtype))
        self.views = [self.flat[self.offsets[k]:self.offsets[k + 1]].reshape(params[i].shape)
                      for k, i in enumerate(members)]
        self.events = engine.make_events()
        self.pending = len(members)
        self.work = None


def assign_buckets(sizes: list[int], dtypes: list, cap_bytes: int,
                   first_cap_bytes: int = FIRST_BUCKET_BYTES) -> list[list[int]]:
    """Parameter indices per bucket: parameters taken in reverse order, one open bucket per
    dtype, closed once it holds at least its cap (the first one of each dtype
    `first_cap_bytes`, later ones `cap_bytes`); buckets in the order they were opened.

    >>> assign_buckets([100, 100, 100, 100], ["float32"] * 4, cap_bytes=200, first_cap_bytes=100)
    [[3], [2, 1], [0]]
    """
    buckets: list[list[int]] = []
    open_: dict = {}  # dtype -> (position in buckets, bytes so far, its cap)
    caps: dict = {}
    for i in reversed(range(len(sizes))):
        key = str(dtypes[i])
        if key not in open_:
            cap = first_cap_bytes if key not in caps else cap_bytes
            caps[key] = True
            buckets.append([])
            open_[key] = [len(buckets) - 1, 0, cap]
        slot = open_[key]
        buckets[slot[0]].append(i)
        slot[1] += sizes[i]
        if slot[1] >= slot[2]:
            del open_[key]
    return buckets


def _tensors_in(value) -> list:
    """The tensors of a forward's output: a tensor, or tensors in tuples, lists, dicts."""
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors_in(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors_in(v)]
    return []


def gradient_counts(outputs, params: list) -> list[int]:
    """How many gradients backward from `outputs` delivers to each parameter: the edges into
    it in the autograd graph (one per use of the parameter by an op)."""
    where = {id(p): i for i, p in enumerate(params)}
    counts = [0] * len(params)
    stack, seen = [], set()
    for t in _tensors_in(outputs):
        if t.grad_fn is not None:
            stack.append(t.grad_fn)
        elif id(t) in where:
            counts[where[id(t)]] += 1  # the output is the parameter itself
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for target in node.next:
            if target is None:
                continue
            if isinstance(target, Tensor):
                if id(target) in where:
                    counts[where[id(target)]] += 1
            else:
                stack.append(target)
    return counts


def _gradient_ready(reducer_ref, param) -> None:
    reducer = reducer_ref()
    if reducer is not None:
        reducer.gradient_ready(param)


class _Reducer:
    """The buckets of one DDP module and the state of the backward in progress."""

    def __init__(self, engine, params: list, names: list[str], cap_bytes: int):
        self.engine, self.params, self.names = engine, params, names
        backend = params[0].backend
        direct = backend.kind == engine.native
        groups = assign_buckets([p.numel() * p.dtype.itemsize for p in params],
                                [p.dtype for p in params], cap_bytes)
        self.buckets = [_Bucket(k, members, params, direct, engine)
                        for k, members in enumerate(groups)]
        self.direct = direct
        self.place = {}  # parameter index -> (bucket, position in it)
        for bucket in self.buckets:
            for k, i in enumerate(bucket.members):
                self.place[i] = (bucket, k)
        self.index = {id(p): i for i, p in enumerate(params)}
        self.expected = [0] * len(params)
        self.received = [0] * len(params)
        self.armed = False
        self.next_bucket = 0
        ref = weakref.ref(self)
        self.handles = [p.register_post_accumulate_grad_hook(
            functools.partial(_gradient_ready, ref)) for p in params]

    # ---- forward ------------------------------------------------------------------------------

    def check_previous(self) -> None:
        """A backward that delivered some gradients but not all left buckets unreduced."""
        if self.armed and any(self.received):
            missing = [self.names[i] for i in range(len(self.params))
                       if self.received[i] < self.expected[i]]
            self.armed = False
            raise DistributedError(
                "DistributedDataParallel: the previous backward ended before every gradient "
                f"was reduced; no gradient reached {', '.join(missing)}. Backward must start "
                "from a loss that uses the whole output of the DDP module's forward")
        self.armed = False

    def prepare(self, outputs) -> None:
        """Learn how many gradients each parameter will get from this forward's output."""
        counts = gradient_counts(outputs, self.params)
        unused = [self.names[i] for i, c in enumerate(counts) if c == 0]
        if unused:
            raise DistributedError(
                f"DistributedDataParallel: {', '.join(unused)} take no part in this forward's "
                "output, so they would get no gradient and the other ranks would wait for "
                "their bucket. Freeze parameters a model does not use (requires_grad_(False)) "
                "before wrapping it, and run forwards that need no gradient under "
                "ndlite.no_grad()")
        self.expected = counts
        self.received = [0] * len(self.params)
        for bucket in self.buckets:
            bucket.pending = len(bucket.members)
            bucket.work = None
        self.next_bucket = 0
        self.armed = True

    # ---- backward -----------------------------------------------------------------------------

    def gradient_ready(self, param) -> None:
        """The hook: `param.grad` was just accumulated into."""
        if not self.armed:
            return  # no_sync, no_grad forward, or a backward outside DDP
        i = self.index[id(param)]
        self.received[i] += 1
        if self.received[i] < self.expected[i]:
            return
        if self.received[i] > self.expected[i]:
            self.armed = False
            raise DistributedError(
                f"DistributedDataParallel: {self.names[i]} received more gradients "
                f"({self.received[i]}) than its uses in the forward ({self.expected[i]}): it was "
                "used outside the DDP module, or backward ran twice through one forward; its "
                "bucket was already reduced")
        self.engine.progress([b.work for b in self.buckets[:self.next_bucket]])
        bucket, k = self.place[i]
        view, grad = bucket.views[k], param.grad
        if self.direct:
            grad.backend.assign(view, grad.buffer)
        else:
            view[...] = grad.backend.to_numpy(grad.buffer)
        bucket.pending -= 1
        if bucket.pending == 0:
            self._launch_ready()

    def _launch_ready(self) -> None:
        """Launch complete buckets in index order; after the last, finish the reduction."""
        buckets = self.buckets
        while self.next_bucket < len(buckets) and buckets[self.next_bucket].pending == 0:
            bucket = buckets[self.next_bucket]
            bucket.work = self.engine.all_reduce(bucket.flat, "sum", events=bucket.events)
            self.next_bucket += 1
        if self.next_bucket == len(buckets):
            self._finish()

    def _finish(self) -> None:
        self.armed = False
        for bucket in self.buckets:
            bucket.work.wait()
            self.engine.divide(bucket.flat)
            for k, i in enumerate(bucket.members):
                param, view = self.params[i], bucket.views[k]
                backend = param.backend
                if not self.direct:
                    view = backend.from_numpy(np.ascontiguousarray(view))
                param.grad = collectives.wrap(view, backend)

    def remove_hooks(self) -> None:
        for handle in self.handles:
            handle.remove()


class DistributedDataParallel(Module):
    """Wrap `module` for data-parallel training over the default process group (call
    ndlite.distributed.init_process_group first). Use it like the module; each rank feeds
    its own share of the batch (ndlite.data.DistributedSampler).

        ddp = DistributedDataParallel(model)
        loss_fn(ddp(x), y).backward()           # gradients averaged over the ranks
        with ddp.no_sync():                     # accumulate on each rank ...
            loss_fn(ddp(x1), y1).backward()
        loss_fn(ddp(x2), y2).backward()         # ... and reduce the sum here
    """

    def __init__(self, module: Module, broadcast_buffers: bool = True,
                 bucket_cap_mb: float = 25, process_group=None):
        super().__init__()
        engine = engine_of(process_group, "DistributedDataParallel")
        if bucket_cap_mb <= 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got "
                             f"{bucket_cap_mb}")
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self.require_backward_grad_sync = True
        named = list(module.named_parameters())
        backends = {p.backend.name for _, p in named} | {b.backend.name for b in module.buffers()}
        if len(backends) > 1:
            raise DistributedError(f"DistributedDataParallel: the module lives on several "
                                   f"backends ({', '.join(sorted(backends))}); move it to one")
        self._check_same_model(named)
        with autograd.no_grad():
            for t in [p for _, p in named] + list(module.buffers()):
                collectives.broadcast(t, 0)
        trained = [(name, p) for name, p in named if p.requires_grad]
        self._reducer = None
        if trained:
            self._reducer = _Reducer(engine, [p for _, p in trained], [n for n, _ in trained],
                                     int(bucket_cap_mb * (1 << 20)))
            weakref.finalize(self, self._reducer.remove_hooks)

    def _check_same_model(self, named) -> None:
        """Every rank must wrap the same parameters, or the reductions would not match."""
        import zlib

        from ..creation import tensor

        layout = ";".join(f"{tuple(p.shape)}{p.dtype}{p.requires_grad}" for _, p in named)
        mine = [len(named), sum(p.numel() for _, p in named), zlib.crc32(layout.encode())]
        backend = named[0][1].backend if named else None
        engine = engine_of(None, "DistributedDataParallel")
        everyone = [tensor([0, 0, 0], dtype="int64", backend=backend)
                    for _ in range(engine.world_size)]
        collectives.all_gather(everyone, tensor(mine, dtype="int64", backend=backend))
        for rank, theirs in enumerate(everyone):
            if theirs.tolist() != mine:
                raise DistributedError(
                    f"DistributedDataParallel: rank {rank} wraps a different model (parameters, "
                    f"elements, layout checksum: {theirs.tolist()}) than rank {engine.rank} "
                    f"({mine}); every rank must build the same model")

    @property
    def bucket_sizes(self) -> list[int]:
        """Elements per gradient bucket, in reduction order."""
        return [] if self._reducer is None else [b.offsets[-1] for b in self._reducer.buckets]

    @contextlib.contextmanager
    def no_sync(self):
        """Inside, forward and backward reduce nothing: gradients accumulate on each rank
        and the first backward after it (of a forward outside) reduces the sum."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

    def forward(self, *inputs, **kwargs):
        reducer = self._reducer
        if reducer is not None:
            reducer.check_previous()
        sync = autograd.is_grad_enabled() and self.require_backward_grad_sync
        if sync and self.broadcast_buffers:
            with autograd.no_grad():
                for buffer in self.module.buffers():
                    collectives.broadcast(buffer, 0)
        outputs = self.module(*inputs, **kwargs)
        if sync and reducer is not None:
            reducer.prepare(outputs)
        return outputs
