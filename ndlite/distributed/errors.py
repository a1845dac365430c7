"""The error of ndlite.distributed: a rendezvous, a collective or a launch that cannot go on."""

from __future__ import annotations


class DistributedError(RuntimeError):
    """A process group, collective or gradient reduction failed: no process group, ranks
    that disagree (shapes, an unused parameter), or no answer from the other ranks within
    the timeout. The message says which rank, which call and what to do."""
