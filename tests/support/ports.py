"""Ports for the processes tests start, safe under parallel workers.

``bind(0)`` hands out ports from the kernel's ephemeral range, the range every
outgoing connection (ZooKeeper clients, bkctl processes...) also draws its
local port from: between choosing a bookie's port that way and the bookie
binding it, another connection can take it ("bookiePort ... is in use").
These ports lie below that range, and each xdist worker hands out its own
block of them, in turn from a random start; a port something already holds
is skipped.  Two runs at once (``./dev test`` runs the fast-paths-off suites
beside the whole suite, each with workers gw0, gw1...) keep apart by
``BKCTL_TEST_PORT_BLOCK``: the first block of the run's workers (default 0).
Sharing blocks, one run's bookie could take a port the other had just chosen;
the other's bookie then exited ("in use") while its test, connecting to the
port, took the first for it.  The ZooKeeper both runs share
(tests/support/shared_zookeeper.py) takes its port from the block after theirs.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import threading

from bkctl.sandbox.zookeeper import ephemeral_port_low

_FIRST = 20000
_BLOCK = 1000
_lock = threading.Lock()
_next: int | None = None


def block_start() -> int:
    """The first port of this worker's block: its xdist worker's number (gw0, gw1, ...) plus
    ``BKCTL_TEST_PORT_BLOCK`` (the blocks a run side by side keeps to), among the blocks of
    1,000 ports below the ephemeral range."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")  # gw0, gw1, ...
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    index += int(os.environ.get("BKCTL_TEST_PORT_BLOCK") or 0)
    low = ephemeral_port_low()
    blocks = max(1, (low - _FIRST) // _BLOCK)
    return _FIRST + (index % blocks) * _BLOCK


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port on 127.0.0.1 that nothing holds, outside the ephemeral range, this worker's own."""
    global _next
    with _lock:
        start = block_start()
        if _next is None:
            _next = random.randrange(_BLOCK)
        for _ in range(_BLOCK):
            port = start + _next
            _next = (_next + 1) % _BLOCK
            if _free(port):
                return port
    raise RuntimeError(f"no free port in {start}-{start + _BLOCK - 1}")


@contextlib.contextmanager
def held(port: int):
    """Someone else listening on 127.0.0.1:``port`` meanwhile (a process that wants it cannot start)."""
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        yield
    finally:
        squatter.close()


class Silent:
    """A peer on 127.0.0.1 that takes every connection and never says a word, as a ZooKeeper
    stopped dead would: a client connecting to it waits for its own timeout.  Unlike a port
    nobody listens on, it tells the test that a process has got as far as connecting
    (:meth:`called`), the moment to interrupt it: a signal sent after a fixed sleep instead
    reaches a process still starting on a loaded machine, before its handlers are in place."""

    def __init__(self) -> None:
        self.port = free_port()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", self.port))
        self._listener.listen(16)
        self._callers: list[socket.socket] = []  # held open, unanswered, until close()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def called(self, timeout: float = 0.0) -> bool:
        """Whether a connection has come (waiting up to ``timeout`` seconds for the first one)."""
        if self._callers:
            return True
        self._listener.settimeout(timeout if timeout > 0 else 0.0)
        try:
            caller, _ = self._listener.accept()
        except (BlockingIOError, TimeoutError):
            return False
        self._callers.append(caller)
        return True

    def wait_for_caller(self, timeout: float = 60.0) -> None:
        """Return once something has connected; ``timeout`` is a hang guard."""
        if not self.called(timeout):
            raise AssertionError(f"nothing connected to {self.address} within {timeout:g} s")

    def close(self) -> None:
        for caller in self._callers:
            caller.close()
        self._listener.close()

    def __enter__(self) -> Silent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
