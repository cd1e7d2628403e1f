"""maxAddsInProgressLimit / maxReadsInProgressLimit: how a bookie limits the
requests in progress over all its connections (back-pressure, never an error answer).

The limits are the bookie's (:class:`InProgressLimit`, one per kind, held by the server
factory); a connection's side of them is its :class:`Throttle`, which takes a place for the
request being dispatched, stops the connection being read while none is free, and hands the
place to the :class:`CountedBookie` that gives it back once the request is answered.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable

from bkctl.wire.codecs import v2
from bkctl.wire.codecs.protocol import OpCode, OperationType

_I32 = struct.Struct(">i")
_OP = OperationType


class InProgressLimit:
    """maxAddsInProgressLimit or maxReadsInProgressLimit: at most ``limit``
    requests of one kind in progress (read, not yet answered) over all
    connections.  A connection whose next request finds no place stops being
    read and waits in ``waiting``, first come first served, as Java's bookie
    blocks on a fair semaphore with autoRead off; back-pressure, never an
    error answer."""

    __slots__ = ("limit", "count", "waiting")

    def __init__(self, limit: int):
        self.limit = limit
        self.count = 0
        self.waiting: deque[Throttle] = deque()

    def try_start(self) -> bool:
        if self.count < self.limit:
            self.count += 1
            return True
        return False

    def finish(self) -> None:
        self.count -= 1
        while self.waiting and self.count < self.limit:
            self.waiting.popleft().wake()


class Throttle:
    """One connection's side of the bookie's in-progress limits (``adds``, ``reads``:
    None for no limit).  :meth:`admit` takes a place for the request being dispatched
    (:attr:`gate`) or stops the connection being read (``pause()``) and queues it on the
    limit, which calls :meth:`wake` once a place is free (then ``resume()``: the
    connection serves what it held back)."""

    __slots__ = ("adds", "reads", "throttled", "gate", "gone", "_pause", "_resume")

    def __init__(
        self,
        adds: InProgressLimit | None,
        reads: InProgressLimit | None,
        pause: Callable[[], None],
        resume: Callable[[], None],
    ) -> None:
        self.adds = adds
        self.reads = reads
        #: True while a request waits for a place.
        self.throttled = False
        #: The limit whose place the request being dispatched took (None: no limit).
        self.gate: InProgressLimit | None = None
        #: True once the connection is gone: a free place passes it by.
        self.gone = False
        self._pause = pause
        self._resume = resume

    @property
    def limited(self) -> bool:
        return self.adds is not None or self.reads is not None

    def limit_for(self, kind: str, msg) -> InProgressLimit | None:
        """The limit a request counts under: ``msg`` a parsed v3 request (``kind``
        "v3") or a v2 payload."""
        if kind == "v3":
            op = msg.header.operation
            return self.adds if op == _OP.ADD_ENTRY else self.reads if op == _OP.READ_ENTRY else None
        if len(msg) < 4:
            return None
        op = v2.unpack_header(_I32.unpack_from(msg)[0])[1]
        if op == OpCode.ADD_ENTRY:
            return self.adds
        return self.reads if op in (OpCode.READ_ENTRY, OpCode.BATCH_READ_ENTRY) else None

    def admit(self, limit: InProgressLimit | None) -> bool:
        """Take a place under ``limit`` for the next request, or stop reading
        this connection until one is free (Java's bookie turns autoRead off and
        blocks on its semaphore)."""
        if limit is None or limit.try_start():
            self.gate = limit
            return True
        self.throttled = True
        self._pause()
        limit.waiting.append(self)
        return False

    def wake(self) -> None:
        """A place is free: serve the held requests (called by the limit)."""
        if not self.gone:
            self.throttled = False
            self._resume()

    def take_gate(self) -> InProgressLimit | None:
        """:attr:`gate`, now the caller's to give back (``finish()``) once the request is answered."""
        gate, self.gate = self.gate, None
        return gate

    def settle(self) -> None:
        """After a dispatch: a place the request did not use (answered without
        the bookie: a bad version, a missing field) is given back."""
        gate, self.gate = self.gate, None
        if gate is not None:
            gate.finish()


class CountedBookie:
    """The bookie as a limited connection sees it: the callback of an add or
    read that took a place (the ``throttle``'s gate) gives the place back when it
    is called, i.e. once the request is answered."""

    def __init__(self, bookie, throttle: Throttle):
        self._bookie = bookie
        self._throttle = throttle

    def __getattr__(self, name):
        return getattr(self._bookie, name)

    def _counted(self, callback):
        gate = self._throttle.take_gate()
        if gate is None:
            return callback

        def done(*args):
            gate.finish()
            callback(*args)

        return done

    def add_entry(self, ledger_id, entry_id, master_key, body, callback, **kw):
        self._bookie.add_entry(ledger_id, entry_id, master_key, body, self._counted(callback), **kw)

    def read_entry(self, ledger_id, entry_id, callback):
        self._bookie.read_entry(ledger_id, entry_id, self._counted(callback))

    def fence_and_read(self, ledger_id, entry_id, master_key, callback):
        self._bookie.fence_and_read(ledger_id, entry_id, master_key, self._counted(callback))

    def batch_read(self, ledger_id, start, max_count, max_size, callback, **kw):
        self._bookie.batch_read(ledger_id, start, max_count, max_size, self._counted(callback), **kw)

    def wait_lac(self, ledger_id, previous, timeout_ms, callback):
        gate = self._throttle.gate
        cancel = self._bookie.wait_lac(ledger_id, previous, timeout_ms, self._counted(callback))
        if cancel is None or gate is None:
            return cancel

        def cancel_and_give_back() -> None:  # an unanswered poll gives its place back too
            cancel()
            gate.finish()

        return cancel_and_give_back
