"""The requests fsck sends to the bookies (:class:`BookieRequests`: at most ``limit`` in flight,
counted) and what a bookie was found to hold of a ledger (:class:`Held`)."""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from .findings import Run

if TYPE_CHECKING:
    from bkctl.wire.client.channel import ReadDone
    from bkctl.wire.client.pool import BookiePool

#: bytes one BATCH_READ_ENTRY of fsck's may bring back (a bookie gives fewer entries past it: the
#: rest are read one by one)
BATCH_BYTES = 4 * 1024 * 1024

__all__ = ["NOTHING", "BookieRequests", "Held"]


class Held:
    """The entries one bookie holds of a ledger, as sorted runs."""

    __slots__ = ("runs", "_starts")

    def __init__(self, runs: Sequence[Run]):
        self.runs = list(runs)
        self._starts = [first for first, _ in self.runs]

    def __contains__(self, entry_id: object) -> bool:
        if not isinstance(entry_id, int):
            return False
        i = bisect.bisect_right(self._starts, entry_id) - 1
        return i >= 0 and self.runs[i][1] >= entry_id

    def __bool__(self) -> bool:
        return bool(self.runs)


NOTHING = Held(())


class BookieRequests:
    """Every request fsck sends to a bookie: at most ``limit`` in flight, counted by kind
    (``availability``, ``read``, ``batch_read``) in :attr:`sent`.  A request past the limit waits
    its turn, in the order sent, whether it came with a Deferred (:meth:`availability`,
    :meth:`read`) or with a callback (:meth:`read_with_callback` and
    :meth:`batch_read_with_callback`, the healthy ledgers' fast path).  ``batch_pool``: v2
    connections to the same bookies, for BATCH_READ_ENTRY (None: no batch reads)."""

    def __init__(self, pool: BookiePool, limit: int = 64, batch_pool: BookiePool | None = None):
        self.pool = pool
        self.batch_pool = batch_pool
        self.limit = max(1, limit)
        #: requests in flight now
        self.busy = 0
        self._waiting: deque[Callable[[], None]] = deque()
        self._draining = False
        self.sent = {"availability": 0, "read": 0, "batch_read": 0}
        #: bookies that did not answer an entry list (a v2-only bookie; Java 4.17.2's
        #: DbLedgerStorage leaves GET_LIST_OF_ENTRIES_OF_LEDGER unanswered until the
        #: request times out): not asked again, their entries read one by one
        self.unlisted: set[str] = set()
        #: bookies whose BATCH_READ_ENTRY failed but for an entry they lack (a bookie older than
        #: 4.17, one unreachable over v2): not asked again, their entries read one by one
        self.unbatched: set[str] = set()

    def _release(self) -> None:
        self.busy -= 1
        if self._draining:  # a request answered as the queue is drained: the loop below goes on
            return
        self._draining = True
        try:
            while self._waiting and self.busy < self.limit:
                self._waiting.popleft()()
        finally:
            self._draining = False

    def _released(self, result: Any) -> Any:
        self._release()
        return result

    def _issue(self, kind: str, fn: Any, *args: Any) -> defer.Deferred[Any]:
        if self.busy < self.limit and not self._waiting:
            self.busy += 1
            self.sent[kind] += 1
            return defer.maybeDeferred(fn, *args).addBoth(self._released)
        waiting: defer.Deferred[Any] = defer.Deferred()

        def go() -> None:
            if waiting.called:  # cancelled while it waited
                return
            self.busy += 1
            self.sent[kind] += 1
            done = defer.maybeDeferred(fn, *args).addBoth(self._released)
            done.addBoth(lambda result: None if waiting.called else waiting.callback(result))

        self._waiting.append(go)
        return waiting

    def read_with_callback(
        self, bookie: str, ledger_id: int, entry_id: int, on_done: ReadDone, ctx: Any, slot: int
    ) -> None:
        """A read without a Deferred: ``on_done(ctx, slot, bookie, result)``, ``result`` the stored
        entry's bytes, None when the bookie does not have it, or the exception (any failure,
        ``pool.get`` included).  ``on_done`` may run before this returns."""
        if self.busy >= self.limit or self._waiting:
            self._waiting.append(lambda: self._send_read(bookie, ledger_id, entry_id, on_done, ctx, slot))
            return
        self._send_read(bookie, ledger_id, entry_id, on_done, ctx, slot)

    def _send_read(self, bookie: str, ledger_id: int, entry_id: int, on_done: ReadDone, ctx: Any, slot: int) -> None:
        self.busy += 1
        self.sent["read"] += 1
        try:
            conn = self.pool.get(bookie)
            conn.read_with_callback(ledger_id, entry_id, self._answered, (on_done, ctx), slot)
        except Exception as exc:  # noqa: BLE001 - reported as the read's outcome
            self._answered((on_done, ctx), slot, bookie, exc)

    def _answered(self, pair: tuple[ReadDone, Any], slot: int, bookie: str, result: Any) -> None:
        from bkctl.wire.errors import NotFound

        self._release()
        on_done, ctx = pair
        if isinstance(result, NotFound):
            result = None
        elif not isinstance(result, (bytes, BaseException)):
            result = bytes(result)
        on_done(ctx, slot, bookie, result)

    def batches(self, bookie: str) -> bool:
        """Whether ``bookie``'s consecutive entries are asked for with one BATCH_READ_ENTRY."""
        return self.batch_pool is not None and bookie not in self.unbatched

    def batch_read_with_callback(
        self, bookie: str, ledger_id: int, first: int, count: int, on_done: ReadDone, ctx: Any, slot: int
    ) -> None:
        """BATCH_READ_ENTRY of ``count`` entries from ``first`` over ``bookie``'s v2 connection:
        ``on_done(ctx, slot, bookie, result)``, ``result`` the list of the stored entries' bytes
        from ``first`` on (as many as the bookie gave: at most ``count``, maybe fewer), None when
        the bookie does not have ``first``, or the exception (any other failure, after which the
        bookie is :attr:`unbatched`).  ``on_done`` may run before this returns."""
        if self.busy >= self.limit or self._waiting:
            self._waiting.append(lambda: self._send_batch(bookie, ledger_id, first, count, on_done, ctx, slot))
            return
        self._send_batch(bookie, ledger_id, first, count, on_done, ctx, slot)

    def _send_batch(
        self, bookie: str, ledger_id: int, first: int, count: int, on_done: ReadDone, ctx: Any, slot: int
    ) -> None:
        self.busy += 1
        self.sent["batch_read"] += 1
        pair = (on_done, ctx)
        try:
            assert self.batch_pool is not None  # batches() said yes
            d = self.batch_pool.get(bookie).batch_read(ledger_id, first, count, BATCH_BYTES)
        except Exception as exc:  # noqa: BLE001 - reported as the read's outcome
            self._batch_answered(exc, pair, slot, bookie)
            return
        d.addCallbacks(
            self._batch_answered,
            self._batch_failed,
            callbackArgs=(pair, slot, bookie),
            errbackArgs=(pair, slot, bookie),
        )

    def _batch_failed(self, failure: Any, pair: tuple[ReadDone, Any], slot: int, bookie: str) -> None:
        self._batch_answered(failure.value, pair, slot, bookie)

    def _batch_answered(self, result: Any, pair: tuple[ReadDone, Any], slot: int, bookie: str) -> None:
        from bkctl.wire.errors import NotFound

        self._release()
        on_done, ctx = pair
        if isinstance(result, NotFound):
            result = None
        elif isinstance(result, BaseException):
            self.unbatched.add(bookie)
        else:
            result = [body if type(body) is bytes else bytes(body) for body in result]
        on_done(ctx, slot, bookie, result)

    async def availability(self, bookie: str, ledger_id: int) -> Held | None:
        """What ``bookie`` holds of the ledger; None when it cannot tell (a v2-only
        bookie, a timeout, a bad answer)."""
        from bkctl.wire.codecs.availability import decode_availability
        from bkctl.wire.errors import NotFound

        if bookie in self.unlisted:
            return None
        try:
            data = await self._issue("availability", self.pool.get(bookie).entry_availability, ledger_id)
        except NotFound:
            return NOTHING
        except Exception:  # noqa: BLE001 - unanswered: the caller reads entries instead
            self.unlisted.add(bookie)
            return None
        try:
            return Held(decode_availability(data)) if data else NOTHING
        except Exception:  # noqa: BLE001
            return None

    async def read(self, bookie: str, ledger_id: int, entry_id: int) -> bytes | None:
        """The stored entry; None when the bookie does not have it.  Other failures raise."""
        from bkctl.wire.errors import NotFound

        try:
            body = await self._issue("read", self.pool.get(bookie).read, ledger_id, entry_id)
        except NotFound:
            return None
        return bytes(body)
