"""The TCP store of the NCCL rendezvous: values, counters and barriers between threads, and
bounded waits (loopback only)."""

import threading
import time

import pytest

from ndlite.distributed import DistributedError
from ndlite.distributed.store import TCPStore


def _clients(port: int, n: int, world: int) -> list[TCPStore]:
    return [TCPStore("127.0.0.1", port, world, is_master=False, timeout=10) for _ in range(n)]


def test_a_value_set_by_one_rank_reaches_the_others_even_if_they_asked_first():
    master = TCPStore("127.0.0.1", 0, world_size=3, is_master=True, timeout=10)
    others = _clients(master.port, 2, world=3)
    got = []
    readers = [threading.Thread(target=lambda s=s: got.append(s.get("nccl/id")))
               for s in others]
    for t in readers:
        t.start()
    time.sleep(0.2)
    master.set("nccl/id", bytes(range(128)))
    for t in readers:
        t.join(timeout=10)
    assert got == [bytes(range(128))] * 2
    for s in others:
        s.close()
    master.close()


def test_counters_and_a_barrier_of_three():
    master = TCPStore("127.0.0.1", 0, world_size=3, is_master=True, timeout=10)
    others = _clients(master.port, 2, world=3)
    assert sorted([master.add("n", 1), others[0].add("n", 1), others[1].add("n", 5)]) == [1, 2, 7]
    passed = []
    threads = [threading.Thread(target=lambda s=s: (s.barrier("b"), passed.append(1)))
               for s in others]
    for t in threads:
        t.start()
    time.sleep(0.2)
    assert passed == []  # the third has not arrived
    master.barrier("b")
    for t in threads:
        t.join(timeout=10)
    assert passed == [1, 1]
    for s in others:
        s.close()
    master.close()


def test_a_missing_key_times_out_with_a_reason():
    store = TCPStore("127.0.0.1", 0, world_size=2, is_master=True, timeout=0.5)
    start = time.monotonic()
    with pytest.raises(DistributedError, match="a rank did not arrive"):
        store.get("never")
    assert time.monotonic() - start < 5
    store.close()


def test_no_store_at_the_address_is_an_error_within_the_timeout():
    import socket

    with socket.socket() as s:  # a port that nobody serves
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(DistributedError, match="MASTER_ADDR and MASTER_PORT"):
        TCPStore("127.0.0.1", port, world_size=2, is_master=False, timeout=0.5)
    assert time.monotonic() - start < 5


def test_closing_the_store_ends_its_threads():
    before = threading.active_count()
    master = TCPStore("127.0.0.1", 0, world_size=2, is_master=True, timeout=10)
    other = TCPStore("127.0.0.1", master.port, world_size=2, is_master=False, timeout=10)
    other.set("k", b"v")
    other.close()
    master.close()
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() == before
