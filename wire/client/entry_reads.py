"""Reading entries one request each, with failover across their write sets
(the core of Java's ``PendingReadOp``).

An entry is asked of the first bookie of its write set, and on a missing
entry, a bad digest, a timeout or any other failure of the next one, in
write-set order; it fails only when every replica failed, with
:func:`read_error`'s error.  Requests go through the channel's callback read
(no Deferred per request).  :class:`EntryRead` reads one entry,
:class:`WindowedReads` a range, a window at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.python.failure import Failure

from bkctl.wire.codecs.digest import VerifiedEntry
from bkctl.wire.errors import BKError, DigestError

from .errors import MISSING_ON_BOOKIE, NoSuchEntry, Unauthorized
from .helpers import describe_errors
from .readable_ledger import ReadableLedger, StripeCursor

__all__ = ["EntryReads", "EntryRead", "WindowedReads", "read_error"]


def read_error(ledger_id: int, entry_id: int, bookies: list[str], errors: list[BaseException]) -> BKError:
    """The error of an entry none of ``bookies`` (its write set) could give:
    :class:`~bkctl.wire.client.errors.NoSuchEntry` when they all said
    "missing", :class:`~bkctl.wire.errors.DigestError` when a replica
    answered with bytes that do not verify (and the rest said "missing"),
    a wrong password as it is, else the last error."""
    where = f"entry {entry_id} of ledger {ledger_id}"
    if errors and all(isinstance(e, MISSING_ON_BOOKIE) for e in errors):
        return NoSuchEntry(f"{where} is missing on every bookie of its write set ({', '.join(bookies)})")
    digest = [e for e in errors if isinstance(e, DigestError)]
    if digest and all(isinstance(e, (DigestError,) + MISSING_ON_BOOKIE) for e in errors):
        return DigestError(
            f"{where} failed digest verification on every replica that has it "
            f"(wrong password or digest type, or corrupt data): {describe_errors(digest)}"
        )
    for e in errors:
        if isinstance(e, Unauthorized):
            return e
    last = errors[-1] if errors else None
    if isinstance(last, BKError):
        return last
    return BKError(f"cannot read {where}: {describe_errors(errors)}")


class EntryReads:
    """Single-entry reads with failover over the ledger ``ledger``: a
    subclass gets each outcome through :meth:`_entry_read` (with what
    ``check(body, entry_id)`` made of the bytes) and :meth:`_entry_failed`."""

    def __init__(self, ledger: ReadableLedger, check: Callable[[bytes, int], Any]):
        self.ledger = ledger
        self._ledger_id = ledger.ledger_id
        self._pool = ledger.client.pool
        self._check = check
        #: entries that failed on some replica: their write set (kept from the
        #: first failure on) and the errors so far
        self._failing: dict[int, tuple[tuple[str, ...], list[BaseException]]] = {}
        #: write sets of the segment last read from
        self._stripe = StripeCursor(ledger)

    def _write_set(self, entry_id: int) -> tuple[str, ...]:
        return self._stripe.write_set(entry_id)

    def _read(self, entry_id: int, replica: int = 0, bookies: tuple[str, ...] | None = None) -> None:
        if bookies is None:
            bookies = self._write_set(entry_id)
        bookie = bookies[replica]
        try:
            self._pool.get(bookie).read_with_callback(self._ledger_id, entry_id, self._answered, entry_id, replica)
        except Exception as exc:  # noqa: BLE001 - a closed pool and such: that replica failed
            self._answered(entry_id, replica, bookie, exc)

    def _runs(self, first: int, count: int) -> list[Any] | None:
        """The entries ``first..first+count-1`` as runs for the first bookies of
        their write sets, ``[(connection, entry_ids), ...]``, when every one of
        those connections takes its run at once (``takes_reads``); None when
        one does not, or the entries are not all in one striped segment: then
        they are read one by one, as :meth:`_read` reads them."""
        stripe = self._stripe
        stripe.write_set(first)  # the stripe of first's segment
        last = first + count - 1
        if not stripe.covers(first, last):
            return None
        sets = stripe.sets
        n = len(sets)
        runs = []
        bookies = set()
        try:
            for entry_id in range(first, first + min(n, count)):
                bookie = sets[entry_id % n][0]
                if bookie in bookies:
                    return None
                bookies.add(bookie)
                ids = range(entry_id, last + 1, n)
                conn = self._pool.get(bookie)
                if not conn.takes_reads(len(ids)):
                    return None
                runs.append((conn, ids))
        except Exception:  # noqa: BLE001 - a closed pool and such: one by one, as _read reports it
            return None
        return runs

    def _answered(self, entry_id: int, replica: int, bookie_id: str, result: Any) -> None:
        if type(result) is bytes:
            try:
                value = self._check(result, entry_id)
            except DigestError as exc:
                result = DigestError(f"bookie {bookie_id}: {exc}")
            else:
                if self._failing:
                    self._failing.pop(entry_id, None)
                self._entry_read(entry_id, value)
                return
        elif not isinstance(result, BaseException):  # not what a read answers
            result = BKError(f"bookie {bookie_id} answered a read of entry {entry_id} with {result!r}")
        failing = self._failing.get(entry_id)
        if failing is None:
            failing = self._failing[entry_id] = (self._write_set(entry_id), [])
        bookies, errors = failing
        errors.append(result)
        if replica + 1 < len(bookies):
            self._read(entry_id, replica + 1, bookies)
        else:
            del self._failing[entry_id]
            self._entry_failed(entry_id, read_error(self._ledger_id, entry_id, list(bookies), errors))

    def _entry_read(self, entry_id: int, value: Any) -> None:
        raise NotImplementedError

    def _entry_failed(self, entry_id: int, error: BaseException) -> None:
        raise NotImplementedError


class EntryRead(EntryReads):
    """One entry: fires with its :class:`~bkctl.wire.codecs.digest.VerifiedEntry`."""

    def __init__(self, ledger: ReadableLedger, entry_id: int):
        super().__init__(ledger, ledger.digest.verify)
        self.entry_id = entry_id
        self.done: defer.Deferred[Any] = defer.Deferred()

    def start(self) -> defer.Deferred[Any]:
        self._read(self.entry_id)
        return self.done

    def _entry_read(self, entry_id: int, value: VerifiedEntry) -> None:
        self.done.callback(value)

    def _entry_failed(self, entry_id: int, error: BaseException) -> None:
        self.done.errback(Failure(error))


class WindowedReads(EntryReads):
    """Entries ``first..last`` read one request each, at most ``window`` at a
    time; fires with ``[(entry_id, payload), ...]`` in order, or with the first
    failure (the reads still running are then ignored).

    The window is refilled once half of it is free, not after every answer
    (the silly-window rule of TCP): the new requests then leave in one write
    per bookie, and each bookie gets, serves and answers them as a run.
    Refilled one by one, a request went out for every few answers, and the
    sends and wake-ups that took on both sides were a good part of the cost
    of a read (measured: v3 reads of 100-byte entries 12% faster, client CPU
    per entry 15% lower).
    """

    def __init__(self, ledger: ReadableLedger, first: int, last: int, window: int):
        super().__init__(ledger, ledger.payload_checker())
        self.first = first
        self.count = last - first + 1
        self.window = window
        self.results: list[Any] = [None] * self.count
        self.done: defer.Deferred[Any] = defer.Deferred()
        self.next = 0
        self.running = 0
        self.finished = 0
        self.failed = False
        self._starting = False
        self._again = False
        #: more reads are started once no more than this many are running
        self._low_water = window // 2

    def start(self) -> defer.Deferred[Any]:
        self._start_more()
        return self.done

    def _start_more(self) -> None:
        # reads answered synchronously must not recurse once per entry
        if self._starting:
            self._again = True
            return
        self._starting = True
        cork = self._pool.cork
        holding = cork.hold()  # a burst: one write per bookie at its end (unless already held)
        try:
            self._again = True
            while self._again:
                self._again = False
                count = min(self.window - self.running, self.count - self.next)
                runs = self._runs(self.first + self.next, count) if count > 1 and not self.failed else None
                if runs is not None:  # each bookie takes its reads at once: one call each (a fast path)
                    self.next += count
                    self.running += count
                    for conn, entry_ids in runs:
                        conn.read_run(self._ledger_id, entry_ids, self._answered)
                while not self.failed and self.running < self.window and self.next < self.count:
                    index = self.next
                    self.next += 1
                    self.running += 1
                    self._read(self.first + index)
        finally:
            self._starting = False
            if holding:
                cork.release()

    def _entry_read(self, entry_id: int, payload: bytes) -> None:
        self.running -= 1
        if self.failed:
            return
        self.results[entry_id - self.first] = (entry_id, payload)
        self.finished += 1
        if self.finished == self.count:
            self.done.callback(self.results)
        elif self.running <= self._low_water and self.next < self.count:  # nothing left to start: no call
            self._start_more()

    def _entry_failed(self, entry_id: int, error: BaseException) -> None:
        self.running -= 1
        if not self.failed:
            self.failed = True
            self.done.errback(Failure(error))
