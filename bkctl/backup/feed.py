"""A restored ledger's adds fed from the thread that reads the archive, chunk after chunk,
without the pipeline running dry between chunks.

``BlockingLedger.add_many(chunk)`` returns once every entry of the chunk is acknowledged: the
adds in flight drain at the end of each chunk, and the next chunk is read from the archive
(and its CRC32Cs checked) while the bookies have nothing of this ledger to do.
:meth:`ChunkFeed.add` returns as soon as the chunk's last entry is *started* (handed to the
ledger's pipeline, which holds at most its ``max_inflight``), so the next chunk is read while
the bookies still take this one's; :meth:`ChunkFeed.finish` waits for every entry.  The
chunks are added in order (a chunk is started only after the one before is wholly started:
entry ids follow the archive's), and what a restore guarantees is unchanged: a ledger is
closed only once every entry was acknowledged, and any failure of an add is raised by the
next :meth:`add` or by :meth:`finish`.
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
        #: reactor thread: the first failure of an add (the handle fails with it: later adds too)
        self.failure: Any = None

    def add(self, chunk: list[bytes]) -> None:
        """Start adding ``chunk``; returns once its last entry is in the pipeline (raises the
        failure of an add, this chunk's or an earlier one's)."""
        from bkctl.wire.client.blocking import run_in_reactor

        if chunk:
            run_in_reactor(self._start, chunk, timeout=self.timeout)

    def finish(self) -> None:
        """Wait until every entry added is acknowledged (raises the first failure)."""
        from bkctl.wire.client.blocking import run_in_reactor

        run_in_reactor(self._wait, timeout=self.timeout)

    # -- reactor thread
    def _start(self, chunk: list[bytes]) -> Any:
        from twisted.internet import defer

        if self.failure is not None:
            return self.failure
        taken: defer.Deferred[None] = defer.Deferred()

        def feed() -> Iterator[bytes]:
            yield from chunk
            if not taken.called:
                taken.callback(None)  # the last one started: the caller reads the next chunk

        def failed(failure: Any) -> None:
            if self.failure is None:
                self.failure = failure
            if not taken.called:
                taken.errback(failure)

        done = self.handle.add_entries(feed())
        done.addErrback(failed)  # told through taken, or by the next add() or finish()
        self.last = done
        return taken

    def _wait(self) -> Any:
        def told(_: object) -> Any:
            return self.failure  # None: every add acknowledged

        return told(None) if self.last is None else self.last.addCallback(told)
