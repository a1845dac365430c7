"""A small key-value store over TCP, for the rendezvous of NCCL ranks (torch's TCPStore).

NCCL needs its 128-byte unique id, made by rank 0, on every rank before the communicator can
be created. Rank 0 serves this store on MASTER_ADDR:MASTER_PORT (a thread of its own); every
rank, rank 0 included, connects as a client, and `ndlite.distributed` closes it again as
soon as the communicator exists, so no thread or socket outlives the rendezvous. Every call
waits at most `timeout` seconds and then raises `DistributedError`.

Messages are a 4-byte big-endian length and a JSON object; values are bytes (base64).

>>> store = TCPStore("127.0.0.1", 0, world_size=1, is_master=True, timeout=5)
>>> store.set("greeting", b"hello")
>>> store.get("greeting")
b'hello'
>>> store.add("count", 2), store.add("count", 3)
(2, 5)
>>> store.close()
"""

from __future__ import annotations

import base64
import json
import select
import socket
import struct
import threading
import time

from .errors import DistributedError

#: how often blocked server threads look at the clock and at the closed flag (seconds)
TICK = 0.05


def _send(sock: socket.socket, message: dict) -> None:
    body = json.dumps(message).encode()
    sock.sendall(struct.pack(">I", len(body)) + body)


def _receive_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise ConnectionError("the other side closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _receive(sock: socket.socket) -> dict:
    (length,) = struct.unpack(">I", _receive_exactly(sock, 4))
    return json.loads(_receive_exactly(sock, length))


class _Server:
    """The store itself, on rank 0: a listening socket and one thread per client."""

    def __init__(self, host: str, port: int):
        self.listener = socket.create_server((host, port))
        self.port = self.listener.getsockname()[1]
        self.data: dict[str, bytes] = {}
        self.changed = threading.Condition()
        self.closed = False
        self.threads: list[threading.Thread] = []
        self.acceptor = threading.Thread(target=self._accept, name="ndlite-store", daemon=True)
        self.acceptor.start()

    def _accept(self) -> None:
        while not self.closed:
            ready, _, _ = select.select([self.listener], [], [], TICK)
            if not ready or self.closed:
                continue
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True,
                                      name="ndlite-store-client")
            self.threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while not self.closed:
                ready, _, _ = select.select([conn], [], [], TICK)
                if not ready:
                    continue
                try:
                    request = _receive(conn)
                except (ConnectionError, OSError, ValueError):
                    return  # the client left
                try:
                    _send(conn, self._answer(request))
                except OSError:
                    return

    def _answer(self, request: dict) -> dict:
        op, key = request.get("op"), request.get("key", "")
        deadline = time.monotonic() + float(request.get("timeout", 0))
        with self.changed:
            if op == "set":
                self.data[key] = base64.b64decode(request["value"])
                self.changed.notify_all()
                return {"ok": True}
            if op == "add":
                value = int(self.data.get(key, b"0")) + int(request["amount"])
                self.data[key] = str(value).encode()
                self.changed.notify_all()
                return {"ok": True, "value": value}
            if op in ("get", "wait_count"):
                while not self._has(op, key, request) and not self.closed:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return {"ok": False, "error": "timeout"}
                    self.changed.wait(min(left, TICK))
                if self.closed:
                    return {"ok": False, "error": "the store was closed"}
                return {"ok": True, "value": base64.b64encode(self.data[key]).decode()}
        return {"ok": False, "error": f"unknown request {op!r}"}

    def _has(self, op: str, key: str, request: dict) -> bool:
        if key not in self.data:
            return False
        return op == "get" or int(self.data[key]) >= int(request["count"])

    def close(self) -> None:
        self.closed = True
        with self.changed:
            self.changed.notify_all()
        self.acceptor.join(timeout=5)
        self.listener.close()
        for thread in self.threads:
            thread.join(timeout=5)


class TCPStore:
    """A client of the store at host:port; with `is_master`, also the server (port 0 picks
    a free port: see `.port`). Every call gives up after `timeout` seconds."""

    def __init__(self, host: str, port: int, world_size: int, is_master: bool,
                 timeout: float = 300.0):
        self.host, self.world_size, self.timeout = host, world_size, float(timeout)
        self._server = _Server(host, port) if is_master else None
        self.port = self._server.port if self._server else port
        self._sock = self._connect()

    def _connect(self) -> socket.socket:
        deadline = time.monotonic() + self.timeout
        delay = 0.01
        while True:
            try:
                sock = socket.create_connection((self.host, self.port),
                                                timeout=min(self.timeout, 10.0))
                sock.settimeout(None)
                return sock
            except OSError as exc:
                if time.monotonic() + delay > deadline:
                    self.close()
                    raise DistributedError(
                        f"rendezvous: no store at {self.host}:{self.port} after "
                        f"{self.timeout:g} s ({exc}); rank 0 serves it: is it running, and "
                        "do MASTER_ADDR and MASTER_PORT name it?") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    def _call(self, request: dict, what: str) -> dict:
        # the reply of a blocking request comes within its own timeout, plus a margin
        self._sock.settimeout(float(request.get("timeout", 0)) + 10.0)
        try:
            _send(self._sock, request)
            answer = _receive(self._sock)
        except (OSError, ConnectionError, ValueError) as exc:
            raise DistributedError(f"rendezvous: {what}: the store at {self.host}:{self.port} "
                                   f"stopped answering ({exc})") from None
        if not answer.get("ok"):
            error = answer.get("error")
            if error == "timeout":
                error = (f"not there after {self.timeout:g} s: a rank did not arrive (check "
                         "that every rank started and that WORLD_SIZE is the number of ranks)")
            raise DistributedError(f"rendezvous: {what}: {error}")
        return answer

    def set(self, key: str, value: bytes) -> None:
        self._call({"op": "set", "key": key, "value": base64.b64encode(value).decode()},
                   f"set {key!r}")

    def get(self, key: str) -> bytes:
        """The value of `key`, waiting until some rank sets it."""
        answer = self._call({"op": "get", "key": key, "timeout": self.timeout}, f"get {key!r}")
        return base64.b64decode(answer["value"])

    def add(self, key: str, amount: int = 1) -> int:
        """Add `amount` to the counter `key` (0 when new); returns the new value."""
        return self._call({"op": "add", "key": key, "amount": int(amount)},
                          f"add to {key!r}")["value"]

    def wait_count(self, key: str, count: int) -> None:
        """Wait until the counter `key` reaches `count`."""
        self._call({"op": "wait_count", "key": key, "count": int(count),
                    "timeout": self.timeout}, f"wait for {key!r} to reach {count}")

    def barrier(self, name: str) -> None:
        """Wait until all `world_size` ranks have called barrier(name)."""
        self.add(f"barrier/{name}", 1)
        self.wait_count(f"barrier/{name}", self.world_size)

    def close(self) -> None:
        """Disconnect; on rank 0 also stop the server and its threads."""
        sock, self._sock = getattr(self, "_sock", None), None
        if sock is not None:
            sock.close()
        server, self._server = self._server, None
        if server is not None:
            server.close()
