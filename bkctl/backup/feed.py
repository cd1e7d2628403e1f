"""A restored ledger's adds fed from the thread that reads the archive, chunk after chunk,
without the pipeline running dry between chunks.

``BlockingLedger.add_many(chunk)`` returns once every entry of the chunk is acknowledged: the
adds in flight drain at the end of each chunk, and the next chunk is read from the archive
(and its CRC32Cs checked) while the bookies have nothing of this ledger to do.  Returning once
the chunk's last entry is *started* (handed to the ledger's pipeline, which holds at most its
``max_inflight``) was not enough either: the reading thread, sharing the GIL with the reactor,
read the next chunk slower than the bookies answered the window, and a ledger had no add in
flight when one chunk in three or four came (sampled under load).

:meth:`ChunkFeed.add` returns as soon as the chunk is *queued*: at once when nothing of the
ledger waits to be started, else once the chunk before it is wholly started -- so the next
chunk is read while this one is fed, one chunk at most waiting behind the one being started
(what a ledger holds: its window in flight and two chunks).  :meth:`ChunkFeed.finish` waits
for every entry.  The chunks are added in order (a chunk is started only after the one
before is wholly started: entry ids follow the archive's), and what a restore guarantees is
unchanged: a ledger is closed only once every entry was acknowledged, and any failure of an
add is raised by the next :meth:`add` or by :meth:`finish`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["ChunkFeed"]


class ChunkFeed:
    """Adds to ``ledger`` (a :class:`~bkctl.wire.client.blocking.BlockingLedger` made by
    ``bk.create``), chunk by chunk, from one thread; ``timeout`` bounds each wait."""

    def __init__(self, ledger: Any, timeout: float | None):
        self.handle = ledger.handle  # the reactor's LedgerHandle
        self.timeout = timeout
        #: reactor thread: the last chunk's completion (completions come in order)
        self.last: Any = None
        #: reactor thread: fires once the last chunk queued is wholly started (None: none queued)
        self.taken: Any = None
        #: reactor thread: the first failure of an add (the handle fails with it: later adds too)
        self.failure: Any = None

    def add(self, chunk: list[bytes]) -> None:
        """Queue ``chunk``; returns once the chunk before it is wholly started (raises the
        failure of an add, of an earlier chunk)."""
        from bkctl.wire.client.blocking import run_in_reactor

        if chunk:
            run_in_reactor(self._queue, chunk, timeout=self.timeout)

    def finish(self) -> None:
        """Wait until every entry added is acknowledged (raises the first failure)."""
        from bkctl.wire.client.blocking import run_in_reactor

        run_in_reactor(self._wait, timeout=self.timeout)

    # -- reactor thread
    def _queue(self, chunk: list[bytes]) -> Any:
        from twisted.internet import defer, reactor

        if self.failure is not None:
            return self.failure
        before = self.taken
        taken: defer.Deferred[None] = defer.Deferred()
        self.taken = taken
        if before is None or before.called:
            self._start(chunk, taken)
            return None  # nothing waits to be started: the caller reads the next chunk
        queued: defer.Deferred[None] = defer.Deferred()

        def started() -> None:
            if queued.called:  # the wait was given up (a timeout, Ctrl-C): nothing more started
                taken.callback(None)
            elif self.failure is not None:  # the chunk before failed: this one is never started
                taken.callback(None)
                queued.errback(self.failure)
            else:
                self._start(chunk, taken)
                queued.callback(None)

        # a turn later: not from inside the handle's loop that pulls the chunk before
        clock: Any = reactor  # (the module's stub types callLater without its self)
        before.addCallback(lambda _: clock.callLater(0, started))
        return queued

    def _start(self, chunk: list[bytes], taken: Any) -> None:
        """Hand ``chunk`` to the ledger's pipeline; ``taken`` fires once its last entry is
        started, or once an add failed (never with a failure: :attr:`failure` tells it)."""

        def feed() -> Iterator[bytes]:
            yield from chunk
            if not taken.called:
                taken.callback(None)  # the last one started: the chunk queued behind may start

        def failed(failure: Any) -> None:
            if self.failure is None:
                self.failure = failure
            if not taken.called:
                taken.callback(None)

        done = self.handle.add_entries(feed())
        done.addErrback(failed)  # told by the next add() or finish()
        self.last = done

    def _wait(self) -> Any:
        def told(_: object) -> Any:
            return self.failure  # None: every add acknowledged

        return told(None) if self.last is None else self.last.addCallback(told)
