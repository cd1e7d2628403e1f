"""Entry log compaction (Java's AbstractLogCompactor/EntryLogCompactor and its Throttler).

A log whose live fraction is low is rewritten: its records that the index still
points to are copied, at the throttle's rate, into a compaction log of their own
(not the checkpoint's current log, so flushes never wait for compaction), made
durable with an fdatasync, and then the index rows are switched to the copies
in one LMDB transaction that also moves the live counts from the old log to the
new one. When the old log's live count reaches zero that transaction drops its
row, and only after the commit is the file unlinked. So, at any kill -9:

* before the switch: the copies are in a log the ``logs`` table does not know
  (or past its committed size): the next open removes or truncates them, the
  index still points at the old log, which is still there;
* after the switch, before the unlink: the old log's row is gone; the next open
  removes the file.

A row is switched only if it still points at the scanned record (a flush that
re-put the entry, or a deleted ledger, wins), and a reader that looked up the
old row before the switch either reads the old file (still open or still there)
or, if the file is gone, looks the row up again.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Callable, NamedTuple

log = logging.getLogger("bookied.compaction")

#: a batch of copied records is switched in the index at least every this many bytes
#: (besides Java's compactionMaxOutstandingRequests entries), bounding the memory held
BATCH_BYTES_MAX = 16 * 1024 * 1024

#: env: the name of a compaction step at which bookied stops (sleeps) so that a test can
#: kill -9 it there; the step is logged first ("compaction: stopping at <step>")
STOP_AT_ENV = "BOOKIED_TEST_STOP_AT"
STEPS = ("copied", "switched", "unlinked")


class CompactionStopped(Exception):
    """The garbage collector is shutting down; compaction stopped between two batches."""


class Throttle:
    """Java's compaction Throttler: at most ``rate`` permits a second, a permit being one
    entry or, ``by_bytes``, one byte. Like Guava's RateLimiter the first acquire is free and
    each one makes the next wait for its own permits. ``clock``/``sleep`` are injectable;
    ``slept`` and ``permits`` keep the accounting. ``lifted`` stops throttling (forced GC
    on a full disk); ``cancel()`` makes every wait raise CompactionStopped."""

    def __init__(self, rate: int, by_bytes: bool, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], object] | None = None):
        self.rate = max(1, int(rate))
        self.by_bytes = by_bytes
        self.clock = clock
        self._cancelled = threading.Event()
        self._sleep = sleep if sleep is not None else self._cancelled.wait
        self.lifted = False
        self._next_free = None  # clock time when the next acquire may proceed
        self.slept = 0.0
        self.permits = 0

    def cancel(self) -> None:
        self._cancelled.set()

    def acquire(self, nbytes: int) -> None:
        if self._cancelled.is_set():
            raise CompactionStopped()
        if self.lifted:
            return
        permits = nbytes if self.by_bytes else 1
        now = self.clock()
        wait = 0.0 if self._next_free is None else max(0.0, self._next_free - now)
        self._next_free = max(now, self._next_free or now) + permits / self.rate
        self.permits += permits
        if wait > 0:
            self.slept += wait
            self._sleep(wait)
            if self._cancelled.is_set():
                raise CompactionStopped()


class CompactionResult(NamedTuple):
    moved_entries: int
    moved_bytes: int
    reclaimed_bytes: int  # the old log's size less what was moved out of it, if it was deleted
    deleted: bool


def stop_point(step: str) -> None:
    """A test's kill -9 point: sleep here for good when ``BOOKIED_TEST_STOP_AT`` names ``step``."""
    if os.environ.get(STOP_AT_ENV) == step:
        log.warning("compaction: stopping at %s (%s)", step, STOP_AT_ENV)
        while True:
            time.sleep(3600)


class EntryLogCompactor:
    """Compacts logs of one entry store through a compaction writer it opens and closes."""

    def __init__(self, store, throttle: Throttle, max_outstanding: int = 100000):
        self.store = store
        self.throttle = throttle
        self.max_outstanding = max(1, int(max_outstanding))
        self.writer = None

    def __enter__(self):
        self.writer = self.store.open_compaction_writer()
        return self

    def __exit__(self, *exc):
        self.store.close_compaction_writer(self.writer)
        self.writer = None

    def compact(self, log_id: int) -> CompactionResult:
        """Move the live records of ``log_id`` and delete it once none is left."""
        store = self.store
        size = store.log_size(log_id)
        batch: list = []  # (ledger id, entry id, data, old location bytes)
        batch_bytes = moved = moved_bytes = 0
        deleted = False
        for ledger_id, entry_id, data, old in store.live_records(log_id):
            self.throttle.acquire(len(data))
            batch.append((ledger_id, entry_id, data, old))
            batch_bytes += len(data)
            if len(batch) >= self.max_outstanding or batch_bytes >= BATCH_BYTES_MAX:
                n, deleted = self._switch(log_id, batch)
                moved += n
                moved_bytes += batch_bytes
                batch, batch_bytes = [], 0
        if batch:
            n, deleted = self._switch(log_id, batch)
            moved += n
            moved_bytes += batch_bytes
        if not deleted:
            deleted = store.drop_log_if_empty(log_id)
        if deleted:
            stop_point("unlinked")
        return CompactionResult(moved, moved_bytes, max(0, size - moved_bytes) if deleted else 0, deleted)

    def _switch(self, log_id: int, batch: list) -> tuple[int, bool]:
        rows, added = self.writer.append([(lid, [(eid, data)]) for lid, eid, data, _old in batch])
        stop_point("copied")
        return self.store.switch_locations(log_id, [(key, old, new) for (key, new), (*_x, old)
                                                    in zip(rows, batch)], added,
                                           before_unlink=lambda: stop_point("switched"))
