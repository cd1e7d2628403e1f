"""maxAddsInProgressLimit / maxReadsInProgressLimit: how a bookie limits the
requests in progress over all its connections (back-pressure, never an error answer)."""
from __future__ import annotations

from collections import deque


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
        self.waiting: deque = deque()

    def try_start(self) -> bool:
        if self.count < self.limit:
            self.count += 1
            return True
        return False

    def finish(self) -> None:
        self.count -= 1
        while self.waiting and self.count < self.limit:
            proto = self.waiting.popleft()
            if not proto.closed:
                proto.unthrottle()


class CountedBookie:
    """The bookie as a limited connection sees it: the callback of an add or
    read that took a place (``proto.gate``) gives the place back when it is
    called, i.e. once the request is answered."""

    def __init__(self, bookie, proto):
        self._bookie = bookie
        self._proto = proto

    def __getattr__(self, name):
        return getattr(self._bookie, name)

    def _counted(self, callback):
        gate = self._proto.take_gate()
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
        gate = self._proto.gate
        cancel = self._bookie.wait_lac(ledger_id, previous, timeout_ms, self._counted(callback))
        if cancel is None or gate is None:
            return cancel

        def cancel_and_give_back() -> None:  # an unanswered poll gives its place back too
            cancel()
            gate.finish()

        return cancel_and_give_back
