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

The store is reached only through :class:`CompactableStore` (Java's
CompactableLedgerStorage). Each crash-relevant step is a :class:`CompactionPhase`;
observers added with :func:`add_phase_observer` are told of each (a test's
launcher adds one that stops the process there for a kill -9; production adds none).
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple, Protocol, runtime_checkable

from .entry_log import DamagedRecord, Placed
from .index import IndexRow, LogDeltas, Move

log = logging.getLogger("bookied.compaction")

#: a batch of copied records is switched in the index at least every this many bytes
#: (besides Java's compactionMaxOutstandingRequests entries), bounding the memory held
BATCH_BYTES_MAX = 16 * 1024 * 1024
#: ... and at least every this many entries: a switch rewrites (copy-on-write) every index
#: page holding one of its rows, and LMDB's file, which never shrinks, must hold those copies
#: beside the pages the last commit still uses. One switch per log (Java's default
#: compactionMaxOutstandingRequests, 100000, is more than a log holds) touched about every
#: leaf page under a Pulsar-like churn: the index file grew to twice the index (issue 56);
#: 1,024 rows are a few dozen pages, at one fdatasync and one commit per second of
#: compaction at Java's default rate
BATCH_ROWS_MAX = 1024


class CompactionPhase(str, enum.Enum):
    """The steps of compacting one log after which a crash leaves a different state on disk."""

    COPIED = "copied"  # a batch of live records is durable in the compaction log, not yet in the index
    SWITCHED = "switched"  # the index points at the copies and the old log's row is gone; file not unlinked
    UNLINKED = "unlinked"  # the old log's file is removed


PhaseObserver = Callable[[CompactionPhase, int], None]
_observers: list[PhaseObserver] = []


def add_phase_observer(observer: PhaseObserver) -> None:
    """Call ``observer(phase, log id)`` in the compacting thread at every phase (see
    ``tests/support/stopping_bookied.py``); nothing in bookied adds one."""
    _observers.append(observer)


def remove_phase_observer(observer: PhaseObserver) -> None:
    _observers.remove(observer)


def _reached(phase: CompactionPhase, log_id: int) -> None:
    for observer in list(_observers):
        observer(phase, log_id)


class LogsDeleted(NamedTuple):
    """Entry logs deleted whole -- not one live entry left in them (their ledgers deleted, or
    their entries written again elsewhere), so nothing was moved -- as against logs that
    compaction emptied: how many, and their committed bytes."""

    logs: int = 0
    bytes: int = 0


class LogUsage(NamedTuple):
    """One committed entry log's row of :meth:`CompactableStore.log_usage`."""

    size: int  # committed bytes
    live_bytes: int
    live_entries: int
    live_fraction: float  # of the bytes past the header, at most 1.0


class LiveRecord(NamedTuple):
    """A record of an entry log that the index still points to when scanned, and that
    index row's location (what :class:`~.index.Move` compares before switching it)."""

    ledger_id: int
    entry_id: int
    data: bytes
    location: bytes  # LOC bytes


class CompactionWriter(Protocol):
    """Appends copies into a compaction log of their own (:class:`~.entry_log.LogWriter`)."""

    def append(
        self, batches: Iterable[tuple[int, list[int], list[bytes]]], pause: Callable[[], None] | None = None
    ) -> tuple[list[Placed], LogDeltas]: ...


@runtime_checkable
class CompactableStore(Protocol):
    """What garbage collection and compaction call on an entry store (Java's
    CompactableLedgerStorage); :class:`~bookied.storage.store.EntryStore` is one."""

    @property
    def directory(self) -> str: ...

    @property
    def log_size_limit(self) -> int: ...

    @property
    def deleted_whole(self) -> LogsDeleted:
        """The logs deleted with no live entry left, not by compaction."""

    @property
    def ledgers_version(self) -> int:
        """Moves whenever a ledger is added or deleted."""

    def ledger_ids(self, ordered: bool = True) -> list[int]: ...

    def has_ledger(self, ledger_id: int) -> bool: ...

    def delete_ledgers(self, ledger_ids: list[int]) -> int: ...

    def delete_empty_logs(self) -> list[int]: ...

    def log_usage(self) -> dict[int, LogUsage]: ...

    def active_log_ids(self) -> list[int]: ...

    def compaction_candidates(self, threshold: float, min_size: int = 0) -> list[tuple[int, float]]: ...

    def log_size(self, log_id: int) -> int: ...

    def open_compaction_writer(self) -> CompactionWriter: ...

    def close_compaction_writer(self, writer: CompactionWriter) -> None: ...

    def live_records(self, log_id: int) -> Iterator[LiveRecord | DamagedRecord]: ...

    def rows_in_log(self, log_id: int, ids: list[tuple[int, int]] | None = None) -> list[IndexRow]: ...

    def read_record(self, row: IndexRow) -> bytes: ...

    def switch_locations(
        self, log_id: int, moves: list[Move], added: LogDeltas, before_unlink: Callable[[], None] | None = None
    ) -> tuple[int, bool]: ...

    def drop_log_if_empty(self, log_id: int, whole: bool = True) -> bool: ...


class CompactionStopped(Exception):
    """The garbage collector is shutting down; compaction stopped between two batches."""


class Throttle:
    """Java's compaction Throttler: at most ``rate`` permits a second, a permit being one
    entry or, ``by_bytes``, one byte. Like Guava's RateLimiter the first acquire is free and
    each one makes the next wait for its own permits. ``clock``/``sleep`` are injectable;
    ``slept`` and ``permits`` keep the accounting. ``lifted`` stops throttling (forced GC
    on a full disk); ``cancel()`` makes every wait raise CompactionStopped."""

    def __init__(
        self,
        rate: int,
        by_bytes: bool,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] | None = None,
    ):
        self.rate = max(1, int(rate))
        self.by_bytes = by_bytes
        self.clock = clock
        self._cancelled = threading.Event()
        self._sleep = sleep if sleep is not None else self._cancelled.wait
        self.lifted = False
        self._next_free: float | None = None  # clock time when the next acquire may proceed
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


class DamagedFound(NamedTuple):
    """A damaged record compaction met in ``log_id``, and the live entries whose index rows
    pointed into it (deleted: such an entry is gone from this bookie)."""

    log_id: int
    record: DamagedRecord
    dropped: tuple[tuple[int, int], ...]


class CompactionResult(NamedTuple):
    moved_entries: int
    moved_bytes: int
    reclaimed_bytes: int  # the old log's size less what was moved out of it, if compaction deleted it
    deleted: bool  # compaction moved what was live and deleted the log
    damaged: tuple[DamagedFound, ...] = ()
    #: no live entry was left in the log when compaction came to it, or after a collection
    #: between two batches (its ledgers deleted meanwhile): deleted whole, counted by the store
    #: (``deleted_whole``), not as compacted
    dead: bool = False


class EntryLogCompactor:
    """Compacts logs of one entry store through a compaction writer it opens and closes.

    ``between()`` is called after each batch switched but the last of a log (the garbage
    collector collects deleted ledgers there when gcWaitTime has passed: the records of a
    ledger deleted then are not copied, and a log its deletion empties goes at once)."""

    def __init__(
        self,
        store: CompactableStore,
        throttle: Throttle,
        max_outstanding: int = 100000,
        between: Callable[[], None] | None = None,
    ):
        self.store = store
        self.throttle = throttle
        self.batch_rows = min(max(1, int(max_outstanding)), BATCH_ROWS_MAX)
        self.between = between
        self.writer: CompactionWriter | None = None

    def __enter__(self) -> EntryLogCompactor:
        self.writer = self.store.open_compaction_writer()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.writer is not None:
            self.store.close_compaction_writer(self.writer)
        self.writer = None

    def compact(self, log_id: int) -> CompactionResult:
        """Move the live records of ``log_id`` and delete it once none is left.

        Damaged records (bytes that are not a valid record) do not stop the scan: the
        records after them are moved too. If the log still holds live entries after that,
        their index rows are looked up (by the ids a damaged header claims, else by a walk
        of the whole index): a readable one is moved, one whose record is damaged has its
        row deleted (it is never served; the ledger's other replicas hold it), so that the
        log can go."""
        store = self.store
        size = store.log_size(log_id)
        batch: list[LiveRecord] = []
        batch_bytes = moved = moved_bytes = 0
        deleted = False
        damaged: list[DamagedRecord] = []
        for rec in store.live_records(log_id):
            if isinstance(rec, DamagedRecord):
                damaged.append(rec)
                continue
            self.throttle.acquire(len(rec.data))
            batch.append(rec)
            batch_bytes += len(rec.data)
            if len(batch) >= self.batch_rows or batch_bytes >= BATCH_BYTES_MAX:
                n, deleted = self._switch(log_id, batch)
                moved += n
                moved_bytes += batch_bytes
                batch, batch_bytes = [], 0
                if self.between is not None and not deleted:
                    self.between()
        if batch:
            n, deleted = self._switch(log_id, batch)
            moved += n
            moved_bytes += batch_bytes
        # its last live ledgers deleted by a collection ``between`` two batches: deleted whole
        gone = not deleted and not store.log_size(log_id)
        found: list[DamagedFound] = []
        if damaged and not deleted and not gone:
            n, nbytes, deleted, found = self._rescue(log_id, damaged)
            moved += n
            moved_bytes += nbytes
        else:
            found = [DamagedFound(log_id, d, ()) for d in damaged]
        dead = gone
        if not deleted and not gone:
            whole = moved == 0 and not damaged  # nothing was live: not compaction's doing
            if store.drop_log_if_empty(log_id, whole):
                deleted, dead = not whole, whole
                if whole:
                    _reached(CompactionPhase.UNLINKED, log_id)
        if deleted:
            _reached(CompactionPhase.UNLINKED, log_id)
        return CompactionResult(
            moved, moved_bytes, max(0, size - moved_bytes) if deleted else 0, deleted, tuple(found), dead
        )

    def _rescue(self, log_id: int, damaged: list[DamagedRecord]) -> tuple[int, int, bool, list[DamagedFound]]:
        """The live entries left in a log with damaged records: move the readable, drop the
        damaged. Returns (moved, bytes moved, log deleted, [DamagedFound])."""
        store = self.store
        claimed = [(d.ledger_id, d.entry_id) for d in damaged if d.ledger_id is not None and d.entry_id is not None]
        rows = store.rows_in_log(log_id, claimed)
        usage = store.log_usage().get(log_id)
        if usage is not None and usage.live_entries > len(rows):
            # a damaged header hid which entries: ask the whole index
            rows = store.rows_in_log(log_id)
        good: list[LiveRecord] = []
        held: dict[int, list[tuple[int, int]]] = {d.offset: [] for d in damaged}
        drops: list[Move] = []
        for row in rows:
            ledger_id, entry_id = row.ids()
            try:
                data = store.read_record(row)
            except OSError:  # EntryCorrupted, or unreadable: never served again from here
                drops.append(Move(row.key, row.location, None))
                offset = row.where().offset
                owner = next((d.offset for d in damaged if d.offset <= offset < d.offset + d.length), None)
                held.setdefault(owner if owner is not None else offset, []).append((ledger_id, entry_id))
                continue
            self.throttle.acquire(len(data))
            good.append(LiveRecord(ledger_id, entry_id, data, row.location))
        nbytes = sum(len(g.data) for g in good)
        moved, deleted = self._switch(log_id, good, drops) if good or drops else (0, False)
        by_offset = {d.offset: d for d in damaged}
        found = [
            DamagedFound(log_id, by_offset.get(off) or DamagedRecord(off, 0, *ids[0], "damaged record"), tuple(ids))
            for off, ids in held.items()
        ]
        return moved - len(drops), nbytes, deleted, found

    def _switch(self, log_id: int, batch: list[LiveRecord], drops: list[Move] | None = None) -> tuple[int, bool]:
        rows: list[tuple[bytes, bytes]] = []
        added: LogDeltas = {}
        if batch:
            if self.writer is None:
                raise RuntimeError("compaction outside its writer (use the compactor as a context manager)")
            placed, added = self.writer.append([(r.ledger_id, [r.entry_id], [r.data]) for r in batch])
            rows = [row for p in placed for row in p.rows()]
        _reached(CompactionPhase.COPIED, log_id)
        moves = [Move(key, rec.location, new) for (key, new), rec in zip(rows, batch)]
        return self.store.switch_locations(
            log_id,
            moves + drops if drops else moves,
            added,
            before_unlink=lambda: _reached(CompactionPhase.SWITCHED, log_id),
        )
