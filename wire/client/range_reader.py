"""Reading a range of entries batch by batch, one batch read ahead (an async
iterator over a :class:`~bkctl.wire.client.read_handle.ReadHandle`'s reads)."""
from __future__ import annotations

from collections.abc import Callable

from twisted.internet import defer

from .helpers import ignore_failure

__all__ = ["RangeReader"]


class RangeReader:
    """Batches of ``[(entry_id, payload), ...]`` over an entry range, with one
    batch read ahead.  ``next_batch()`` fires with the next batch, or None at
    the end; it is also an async iterator.  ``read_span(first, last)`` reads
    one batch: a Deferred of ``[(entry_id, payload), ...]``."""

    def __init__(self, read_span: Callable[[int, int], defer.Deferred], first: int, last: int, batch: int):
        self._read_span = read_span
        self.first = first
        self.last = last
        self.batch = batch
        self._next_start = first
        self._ahead: defer.Deferred | None = None
        self._finished = False

    def _fetch(self) -> defer.Deferred | None:
        if self._next_start > self.last:
            return None
        start = self._next_start
        stop = min(self.last, start + self.batch - 1)
        self._next_start = stop + 1
        return self._read_span(start, stop)

    def next_batch(self) -> defer.Deferred:
        if self._finished:
            return defer.succeed(None)
        current = self._ahead if self._ahead is not None else self._fetch()
        self._ahead = None
        if current is None:
            self._finished = True
            return defer.succeed(None)
        ahead = self._fetch()
        if ahead is not None:
            self._ahead = ahead  # its failure is handed to the call that asks for it
        result: defer.Deferred = defer.Deferred()

        def ok(entries):
            result.callback(entries)

        def bad(f):
            self._finished = True
            if self._ahead is not None:
                self._ahead.addErrback(ignore_failure)
                self._ahead = None
            result.errback(f)

        current.addCallbacks(ok, bad)
        return result

    def cancel(self) -> None:
        """Stop: forget the batch read ahead."""
        self._finished = True
        if self._ahead is not None:
            self._ahead.addErrback(ignore_failure)
            self._ahead = None

    def __aiter__(self) -> "RangeReader":
        return self

    async def __anext__(self):
        entries = await self.next_batch()
        if entries is None:
            raise StopAsyncIteration
        return entries


