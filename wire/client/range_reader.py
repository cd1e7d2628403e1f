"""Reading a range of entries batch by batch, with batches read ahead (an
async iterator over a :class:`~bkctl.wire.client.read_handle.ReadHandle`'s reads)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from twisted.internet import defer

from .helpers import ignore_failure

#: a batch of entries read: ``[(entry_id, payload), ...]``
Entries = list[tuple[int, bytes]]

__all__ = ["RangeReader"]


class RangeReader:
    """Batches of ``[(entry_id, payload), ...]`` over an entry range, with
    ``ahead`` batches read ahead of the one asked for.  ``next_batch()`` fires
    with the next batch, or None at the end; it is also an async iterator.
    ``read_span(first, last)`` reads one batch: a Deferred of
    ``[(entry_id, payload), ...]``.

    Why more than one batch ahead: a batch's reads finish in a trickle (the
    slowest bookie's answers last), and with nothing more requested the
    connections idle until the caller asks again. Java's clients keep several
    batches outstanding for the same reason. At most ``ahead + 1`` batches
    are being read or held here; the caller holds the one handed out."""

    def __init__(
        self,
        read_span: Callable[[int, int], defer.Deferred[Entries]],
        first: int,
        last: int,
        batch: int,
        ahead: int = 1,
    ):
        if ahead < 1:
            raise ValueError("ahead must be >= 1")
        self._read_span = read_span
        self.first = first
        self.last = last
        self.batch = batch
        self.ahead = ahead
        self._next_start = first
        self._reading: deque[defer.Deferred[Entries]] = deque()
        self._finished = False

    def _fill(self, batches: int) -> None:
        while len(self._reading) < batches and self._next_start <= self.last:
            start = self._next_start
            stop = min(self.last, start + self.batch - 1)
            self._next_start = stop + 1
            self._reading.append(self._read_span(start, stop))

    def next_batch(self) -> defer.Deferred[Entries | None]:
        if self._finished:
            return defer.succeed(None)
        self._fill(1)
        if not self._reading:
            self._finished = True
            return defer.succeed(None)
        current = self._reading.popleft()
        self._fill(self.ahead)  # read while this one is waited for and used
        result: defer.Deferred[Entries | None] = defer.Deferred()

        def bad(f: Any) -> None:
            self.cancel()
            result.errback(f)

        current.addCallbacks(result.callback, bad)  # later batches' failures go to the calls that ask for them
        return result

    def cancel(self) -> None:
        """Stop: forget the batches read ahead."""
        self._finished = True
        while self._reading:
            self._reading.popleft().addErrback(ignore_failure)

    def __aiter__(self) -> RangeReader:
        return self

    async def __anext__(self) -> Entries:
        entries = await self.next_batch()
        if entries is None:
            raise StopAsyncIteration
        return entries
