"""bookied's entry store: one ledger directory's write cache, entry logs, index and ledger state.

Entries reach the entry store right after (or while) the journal gets them;
the journal makes an ADD durable, the entry store makes it readable and lets
the journal be trimmed. :class:`EntryStore` composes the parts, as Java's
DbLedgerStorage composes WriteCache, EntryLogger and EntryLocationIndex:

* **Write cache** (``write_cache``). ``put_entry`` only stores the bytes in
  memory, so a just-added entry is read back from memory. Its size is bounded
  by ``write_cache_max_bytes``: past half of it ``on_flush_needed()`` is called
  once (wake the checkpoint thread), past all of it ``put_entry`` raises
  :class:`WriteCacheFull` (map it to ETOOMANYREQUESTS). ``flush()`` swaps the
  cache for an empty one and writes the old one out while adds go on.
* **Entry logs** (``entry_log``). ``flush()`` sorts the cached entries by
  (ledger, entry), appends them to the current entry log with one ``write`` per
  chunk, and fdatasyncs the log *before* committing the index rows that point
  into it. A log rolls at ``log_size_limit``; every open starts a new log
  (lazily, at the first flush that has entries).  The flush's batches and its
  index transaction live in :mod:`.flush`.
* **Index** (``index``). ``(ledgerId, entryId) -> (log id, offset, length)``,
  the per-ledger state and each log's live byte/entry counts in LMDB. One write
  transaction per flush, committed with an fsync. Re-putting an entry (recovery
  adds, journal replay) replaces its row; the old copy becomes dead space.

Why LMDB and not sqlite3 (measured on this 2-core machine with
``bench/bench_storage.py``: 200,000 index rows for 100-byte entries, batches
of 10,000 rows per transaction, point reads of random keys; the machine was
shared, so ranges over several runs):

    sqlite3 3.40 (WAL, synchronous=FULL, WITHOUT ROWID, executemany):
        0.33 - 0.54 M puts/s, 0.07 - 0.15 M point gets/s
    LMDB 0.9.36 via the ``lmdb`` package (putmulti; one read txn per get):
        0.66 - 3.9 M puts/s, 0.29 - 0.67 M point gets/s

LMDB won every run, by 1.6-7x on puts and 2-4x on gets.

The index is on the hot path twice: every flush inserts every entry (25,000
adds/s must cost the flush thread little CPU, since the protocol code shares
the two cores) and every read that misses the write cache looks one row up
(about 45,000/s for a catching-up reader). A sqlite point get costs ~6.7 us of
Python-held CPU against ~2 us for LMDB, i.e. ~0.3 of a core at 45 k reads/s
instead of ~0.1. LMDB also gives readers lock-free MVCC snapshots, so the
reactor thread's lookups never wait for the flush thread's write transaction,
and it commits crash-safely (copy-on-write B-tree, fsync on commit). The cost
is one binary dependency (``lmdb``, a wheel that bundles liblmdb) and a fixed
map size (``index_map_size``, 256 GiB of address space by default; the file
only grows as used).

Threads: ``put_entry``, ``get_entry``, ``get_entries``, ``entries_between``,
the ledger-state methods and ``last_entry_id`` are meant for the reactor
thread and never do write I/O (a read of a flushed entry does one ``pread``;
``get_entries`` one per run of nearby records); they are thread-safe.
``flush``, ``delete_ledger``, compaction's primitives and ``close`` do I/O and
are serialised by a lock; call them from a background thread.

Space reclamation: ``delete_ledger`` drops the ledger's index rows, its
state and its cached entries, and updates each log's live byte/entry counts;
a log whose live entry count drops to zero is deleted at once -- not the log
currently being appended to: that one goes once it rolls, at the next
``delete_empty_logs`` (each garbage collection pass; Java's doGcEntryLogs). Logs
deleted whole are counted apart from compaction's (``deleted_whole``).
Compaction rewrites logs whose live fraction is low through the primitives below (see :mod:`.compactor`:
the records the index still points to are copied into a compaction log, the index is switched to them in
one transaction, then the old log is deleted). A ledger deleted after its records were checkpointed out of
the journal stays deleted; one deleted while its records are still after the journal's checkpoint mark is
resurrected by a crash + replay, so GC must simply run again (as in Java, where GC works from the metadata
store's ledger list).

Several ledger directories are several EntryStore objects; the server shards
ledgers over them. Open a directory with one EntryStore at a time per process
(LMDB does not allow the same environment to be open twice in one process),
and from one bookie process only.

At open, log files the ``logs`` table does not know (written by a flush that
crashed before its commit) are deleted, known logs are truncated to their
committed size, and logs without live entries are removed.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from itertools import repeat

from bkctl.wire.bookie_disk import layout
from bkctl.wire.fastpath import Twins
from bkctl.wire.process.runtime import collector_held_off

from ..journal import EntryRecord, ExplicitLacRecord, FenceRecord, MasterKeyRecord, Record
from .compactor import CompactionWriter, LiveRecord, LogsDeleted, LogUsage
from .dir_lock import DirectoryLock
from .entry_log import LOG_HEADER_SIZE, DamagedRecord, EntryLogger, LogWriter, check_record, log_name, scan_records
from .errors import EntryCorrupted, EntryStoreClosed, WriteCacheFull
from .flush import FlushResult, LedgerBatch, commit_flush, drop_flushed, ledger_batches
from .index import KEY, LOC, IndexRow, Location, LogDeltas, Move, apply_log_deltas, open_index
from .ledger_state import LedgerState
from .pacing import FLUSH_SLICE, FlushPace, let_go, sorted_in_slices
from .write_cache import WriteCache

log = logging.getLogger("bookied.entrystore")

#: :meth:`EntryStore.delete_ledgers` deletes at most this many ledgers per index transaction
#: (one fsync each; the flush lock is held meanwhile)
DELETE_BATCH = 1000


class EntryStore:
    """Entry storage in one ledger directory ``D`` (files in ``D/current/``).

    ``write_cache_max_bytes`` bounds the write cache (both halves together);
    ``log_size_limit`` is the entry log roll size (at most 3 GiB);
    ``index_map_size`` the LMDB map size; ``on_flush_needed()`` is called, in
    the thread of the ``put_entry`` that crossed it, when the cache passes half
    of its bound or first refuses an entry (once until the next flush);
    ``on_grow()`` when a new entry log is created.
    """

    def __init__(
        self,
        directory: str,
        *,
        write_cache_max_bytes: int = 64 * 1024 * 1024,
        log_size_limit: int = 1024**3,
        index_map_size: int = 256 * 1024**3,
        on_flush_needed: Callable[[], None] | None = None,
        on_grow: Callable[[], None] | None = None,
        twins: Twins,
    ):
        self.directory = layout.current_dir(directory)
        os.makedirs(self.directory, exist_ok=True)
        self._on_flush_needed = on_flush_needed

        self._lock = threading.Lock()  # in-memory state: the write cache and the ledgers
        self._flush_lock = threading.RLock()  # flush / delete / compact / close
        self._closed = False
        self._flush_requested = False
        self.last_flush: FlushResult | None = None
        #: the logs deleted whole since the store opened (:meth:`delete_empty_logs` and every log
        #: a flush or a ledger deletion left without a live entry; never compaction's)
        self.deleted_whole = LogsDeleted()

        self.write_cache = WriteCache(write_cache_max_bytes)
        self._ledgers: dict[int, LedgerState] = {}
        #: moves whenever a ledger is added to or deleted from the store: the garbage collector
        #: sends its ledger ids to the metadata listing again only then
        self.ledgers_version = 0
        self._dir_lock = DirectoryLock(self.directory)  # (DirectoryInUse: another bookied writes here)
        try:
            has_logs = bool(EntryLogger.logs_in(self.directory))
            self.index, next_log, self._ledgers = open_index(self.directory, index_map_size, has_logs)
        except BaseException:
            self._dir_lock.release()
            raise
        try:
            self.entry_log = EntryLogger(self.directory, log_size_limit, next_log, on_grow, twins=twins)
            self._writer = LogWriter(self.entry_log)  # the checkpoint's appends
            self._compaction_writers: list[LogWriter] = []
            self._repair_logs()
        except BaseException:
            self.index.close()
            self._dir_lock.release()
            raise

    @property
    def write_cache_max_bytes(self) -> int:
        return self.write_cache.max_bytes

    @property
    def log_size_limit(self) -> int:
        return self.entry_log.log_size_limit

    # ------------------------------------------------------------ open
    def _repair_logs(self) -> None:
        """Make the log files agree with the committed ``logs`` table."""
        logs = self.index.logs
        on_disk = self.entry_log.on_disk()
        changed = False
        for lid, path in sorted(on_disk.items()):
            row = logs.get(lid)
            if row is None:
                log.info("%s: removing entry log %s (no committed entries)", self.directory, path)
                os.unlink(path)
                changed = True
            elif os.path.getsize(path) > row[0]:
                os.truncate(path, row[0])
        for lid in logs:
            if lid not in on_disk:
                log.error("%s: entry log %s is missing; its entries cannot be read", self.directory, log_name(lid))
        if changed:
            layout.fsync_dir(self.directory)
        self.entry_log.next_log = max([self.entry_log.next_log] + [lid + 1 for lid in on_disk])

    # ------------------------------------------------------------ adds and state
    def put_entry(self, ledger_id: int, entry_id: int, data: bytes) -> None:
        """Store an entry in the write cache (replacing an earlier copy). Never does I/O.

        Raises WriteCacheFull when the cache is at its bound.
        """
        if ledger_id < 0 or entry_id < 0:
            raise ValueError(f"invalid ids {ledger_id}/{entry_id}")
        if not self.put_entries(ledger_id, (entry_id,), (data,)):
            raise WriteCacheFull(f"write cache full ({self.write_cache.used} bytes)")

    def put_entries(
        self, ledger_id: int, entry_ids: Sequence[int], bodies: Sequence[bytes], size: int | None = None
    ) -> int:
        """:meth:`put_entry` of each entry of one ledger, in order, under one lock,
        until one would overflow the cache; returns how many were put (the rest:
        not, as put_entry would have raised WriteCacheFull for the next one).
        Ids must be >= 0 (the caller checked); ``size``, the bodies' bytes if counted
        already.  A ledger gets its state with its first entry put."""
        notify = False
        cache = self.write_cache
        put = 0
        with self._lock:
            if self._closed:
                raise EntryStoreClosed("entry store is closed")
            if entry_ids and cache.put_new(ledger_id, entry_ids, bodies, size):  # all at once, as one by one
                led = self._ledger_put(ledger_id)
                led.last_entry, put = max(led.last_entry, max(entry_ids)), len(entry_ids)
            else:
                led = None
                for entry_id, data in zip(entry_ids, bodies):
                    if cache.would_overflow(len(data)):
                        notify, self._flush_requested = not self._flush_requested, True
                        break
                    led = led or self._ledger_put(ledger_id)
                    cache.put(ledger_id, entry_id, data)
                    led.last_entry = max(led.last_entry, entry_id)
                    put += 1
            if not self._flush_requested and cache.over_half():
                self._flush_requested = notify = True
        if notify:
            self._flush_needed()
        return put

    def _ledger_put(self, ledger_id: int) -> LedgerState:  # made with its first entry or update
        led = self._ledgers.get(ledger_id)
        if led is None:
            led = self._ledgers[ledger_id] = LedgerState()
            self.ledgers_version += 1
        return led

    def _flush_needed(self) -> None:
        if self._on_flush_needed is not None:
            try:
                self._on_flush_needed()
            except Exception:
                log.exception("on_flush_needed raised")

    def _ledger_for_update(self, ledger_id: int) -> LedgerState:
        if self._closed:
            raise EntryStoreClosed("entry store is closed")
        led = self._ledger_put(ledger_id)
        led.dirty = True
        return led

    def set_master_key(self, ledger_id: int, key: bytes) -> None:
        """Store the ledger's master key (creating the ledger). Persisted at the next flush."""
        with self._lock:
            self._ledger_for_update(ledger_id).master_key = bytes(key)

    def get_master_key(self, ledger_id: int) -> bytes | None:
        led = self._ledgers.get(ledger_id)
        return None if led is None else led.master_key

    def set_fenced(self, ledger_id: int) -> bool:
        """Mark the ledger fenced; True if it was not fenced before. Persisted at the next flush."""
        with self._lock:
            led = self._ledgers.get(ledger_id)
            if led is not None and led.fenced:
                return False
            self._ledger_for_update(ledger_id).fenced = True
            return True

    def is_fenced(self, ledger_id: int) -> bool:
        led = self._ledgers.get(ledger_id)
        return led is not None and led.fenced

    def set_explicit_lac(self, ledger_id: int, body: bytes) -> None:
        with self._lock:
            self._ledger_for_update(ledger_id).lac = bytes(body)

    def get_explicit_lac(self, ledger_id: int) -> bytes | None:
        led = self._ledgers.get(ledger_id)
        return None if led is None else led.lac

    def has_ledger(self, ledger_id: int) -> bool:
        return ledger_id in self._ledgers

    def ledger_ids(self, ordered: bool = True) -> list[int]:
        """Every ledger held, ascending (copied under the lock, sorted outside it in slices:
        (:func:`~.pacing.sorted_in_slices`); with ``ordered=False`` as they come, one copy.
        Taken after reading :attr:`ledgers_version`, they are at least the ledgers of that
        version (a change moves it under the same lock)."""
        with self._lock:
            ids = list(self._ledgers)
        return sorted_in_slices(ids) if ordered else ids

    def last_entry_id(self, ledger_id: int) -> int | None:
        """Highest entry id stored for the ledger (cached or flushed), None if it has no entries."""
        led = self._ledgers.get(ledger_id)
        if led is None or led.last_entry < 0:
            return None
        return led.last_entry

    def apply(self, record: Record) -> None:
        """Re-apply a journal record (replay). Idempotent; flushes when the cache is full."""
        if isinstance(record, EntryRecord):
            try:
                self.put_entry(record.ledger_id, record.entry_id, record.data)
            except WriteCacheFull:
                self.flush()
                self.put_entry(record.ledger_id, record.entry_id, record.data)
        elif isinstance(record, MasterKeyRecord):
            self.set_master_key(record.ledger_id, record.key)
        elif isinstance(record, FenceRecord):
            self.set_fenced(record.ledger_id)
        elif isinstance(record, ExplicitLacRecord):
            self.set_explicit_lac(record.ledger_id, record.body)
        else:
            raise TypeError(f"not a journal record: {record!r}")

    @property
    def cached_bytes(self) -> int:
        """Bytes in the write cache (including a flush in progress)."""
        return self.write_cache.used

    # ------------------------------------------------------------ reads
    def location(self, ledger_id: int, entry_id: int) -> Location | None:
        """Index row of a flushed entry."""
        raw = self.index.get(KEY.pack(ledger_id, entry_id))
        return None if raw is None else Location(*LOC.unpack(raw))

    def get_entry(self, ledger_id: int, entry_id: int) -> bytes | None:
        """The entry's bytes, from the write cache or the entry logs; None if absent.

        Raises EntryCorrupted (an OSError, EIO) if the stored copy fails its checksum.
        """
        with self._lock:
            data = self.write_cache.get(ledger_id, entry_id)
        if data is not None:
            return data
        if ledger_id not in self._ledgers or entry_id < 0:
            return None
        key = KEY.pack(ledger_id, entry_id)
        for _attempt in range(3):
            raw = self.index.get(key)
            if raw is None:
                return None
            log_id, offset, length = LOC.unpack(raw)
            data = self.entry_log.pread(log_id, length, offset)
            if data is None:
                continue  # compacted or deleted under us: look the row up again
            return check_record(data, ledger_id, entry_id, log_id, offset, length)
        raise EntryCorrupted(f"entry {ledger_id}/{entry_id}: its entry log is missing")

    def get_entries(self, ledger_id: int, entry_ids: list[int]) -> list:
        """:meth:`get_entry` of each of ``entry_ids`` (one ledger), in their order: per entry its
        bytes, None if absent, or the EntryCorrupted (OSError) :meth:`get_entry` would raise.

        Cached entries come from the write cache, the others looked up in one index
        transaction and read by :meth:`~.entry_log.EntryLogger.read_records` (records lying
        close together in one entry log with one ``pread``), each record checked on its own,
        so a bad one fails only its entry."""
        with self._lock:
            active, flushing = self.write_cache.halves_of(ledger_id)
            out: list = list(map(active.get, entry_ids)) if active is not None else [None] * len(entry_ids)
            if None not in out:  # a tail read: all in the active half, looked up with no loop in Python
                return out
            if active is None and flushing is None and min(entry_ids) >= 0:
                flushed: Sequence[int] = range(len(out))  # none cached: all from the index, no loop either
            else:
                missing: list[int] = []  # not cached: from the index
                for i, entry_id in enumerate(entry_ids):
                    if out[i] is None:
                        out[i] = flushing.get(entry_id) if flushing is not None else None
                        if out[i] is None and entry_id >= 0:
                            missing.append(i)
                flushed = missing
        if not flushed or ledger_id not in self._ledgers:
            return out
        first = entry_ids[0]
        # a run of reads (consecutive ids, none cached) is located a row at a time: from 4 on,
        # that costs less than its check
        span = type(flushed) is range and len(entry_ids) >= 4 and entry_ids[-1] - first == len(entry_ids) - 1
        for _attempt in range(3):
            if span and entry_ids == list(range(first, first + len(entry_ids))):
                rows = self.index.locate_range(ledger_id, first, len(entry_ids))
            else:
                rows = self.index.locate(zip(repeat(ledger_id), map(entry_ids.__getitem__, flushed), flushed))
            span = False
            if not rows:
                return out
            rows.sort()  # (those whose log went away under us are looked up again)
            flushed = self.entry_log.read_records(rows, ledger_id, entry_ids, out)
            if not flushed:
                return out
        for i in flushed:
            out[i] = EntryCorrupted(f"entry {ledger_id}/{entry_ids[i]}: its entry log is missing")
        return out

    def entry_ids(self, ledger_id: int) -> list[int]:
        """Every entry id stored for the ledger, ascending: the write cache's and the
        index's (GET_LIST_OF_ENTRIES_OF_LEDGER; as Java's, from the index: no entry is
        read, so its cost follows the entries stored, not the highest id)."""
        with self._lock:
            cached: set[int] = set()
            for half in self.write_cache.halves_of(ledger_id):
                if half:
                    cached.update(half)
        flushed = self.index.entry_ids(ledger_id) if ledger_id in self._ledgers else []
        if not cached:
            return flushed
        return sorted(cached.union(flushed))

    def entries_between(
        self,
        ledger_id: int,
        first: int,
        last: int | None = None,
        max_count: int | None = None,
        max_bytes: int | None = None,
    ) -> list[bytes]:
        """Consecutive entries ``first, first+1, ...`` (BATCH_READ).

        Stops at the first missing entry, after ``last``, after ``max_count``
        entries, or before the entry that would take the total past
        ``max_bytes`` (the first entry is always returned if it exists).
        """
        out: list[bytes] = []
        total = 0
        eid = first
        if ledger_id not in self._ledgers:
            return out
        while (last is None or eid <= last) and (max_count is None or len(out) < max_count):
            data = self.get_entry(ledger_id, eid)
            if data is None:
                break
            if out and max_bytes is not None and total + len(data) > max_bytes:
                break
            out.append(data)
            total += len(data)
            eid += 1
        return out

    # ------------------------------------------------------------ flush
    def flush(self, paced: bool = False) -> FlushResult:
        """Write the write cache to the entry log and index, fsynced. Call from a background thread.

        ``paced``: at about half a core (:class:`~.pacing.FlushPace`), for a periodic
        checkpoint that no add waits for (at full speed again once the cache asks
        for the next flush).  On an I/O error the entries stay
        cached (and readable) and the error propagates; the next flush retries them.
        """
        t0 = time.perf_counter()
        with self._flush_lock, collector_held_off():  # (its lists walked by no collection)
            with self._lock:
                if self._closed:
                    raise EntryStoreClosed("entry store is closed")
                flushing = self.write_cache.swap()
                nbytes, ledgers = self.write_cache.flushing_bytes, len(flushing)
                self._flush_requested = False
                ids = list(self._ledgers)
            dirty = self._take_dirty(ids, flushing)
            del ids
            pause = FlushPace(hurry=self._flush_asked) if paced else None
            try:
                batches = self._write_flush(flushing, dirty, pause)
            except BaseException:
                with self._lock:
                    for lid, led in dirty:
                        if self._ledgers.get(lid) is led:
                            led.dirty = True
                raise
            with self._lock:
                self.write_cache.flushed()
            n = sum(len(b.entry_ids) for b in batches)
            drop_flushed(flushing, batches, pause)  # (no reader reaches the half now)
            let_go(dirty, pause)
            result = FlushResult(n, nbytes, ledgers, time.perf_counter() - t0)
            self.last_flush = result
            return result

    def _take_dirty(self, ids: list[int], flushing: dict) -> list[tuple[int, LedgerState]]:
        """Of the ledgers ``ids``, those whose state a flush writes (changed since their row was
        written, or with entries in ``flushing``), their flags cleared: under the state lock a
        slice at a time, which every add and read waits for (a whole scan held it 12 ms for
        10^5 ledgers).  One changed meanwhile is written by this flush or the next: its row is
        encoded at the commit, after its flag is cleared here."""
        dirty = []
        get = self._ledgers.get
        for i in range(0, len(ids), FLUSH_SLICE):
            with self._lock:
                for lid in ids[i : i + FLUSH_SLICE]:
                    led = get(lid)
                    if led is not None and (led.dirty or lid in flushing):
                        led.dirty = False
                        dirty.append((lid, led))
        return dirty

    def _flush_asked(self) -> bool:
        """Whether the write cache asked for another flush since this one began (a read
        without the lock: a stale answer costs one more nap at most)."""
        return self._flush_requested

    def _writing_logs(self) -> set[int]:
        """Logs still being appended to: never removed for having no live entries."""
        return {w.log_id for w in [self._writer, *self._compaction_writers]} - {0}

    def active_log_ids(self) -> list[int]:
        """The entry logs being written (the checkpoint's, and a compaction's while it runs):
        never compacted until they roll."""
        return sorted(self._writing_logs())

    def _write_flush(self, flushing: dict, dirty: list, pause: Callable[[], None] | None) -> list[LedgerBatch]:
        """Append the half ``flushing`` to the entry log, commit its index rows and ``dirty``
        ledgers' state, publish them; returns the batches written (freed by the caller, after
        the write cache has let go of the half)."""
        batches = ledger_batches(flushing, pause)
        if not batches and not dirty:
            return batches
        writer = self._writer
        touched = len(writer.created), writer.log_id
        try:
            placed, added = writer.append(batches, pause)
            new_logs, emptied, sizes, max_flushed = commit_flush(
                self.index, batches, placed, added, dirty, self.entry_log.next_log, self._writing_logs(), pause
            )
        except BaseException:
            self._cut_uncommitted(writer.created[touched[0] :] + [touched[1]])
            raise
        with self._lock:
            self.index.logs = new_logs
            for lid, last in max_flushed.items():
                led = self._ledgers.get(lid)
                if led is not None and last > led.persisted_last:
                    led.persisted_last = last
        self._unlink_whole(emptied, sizes)
        let_go(placed, pause)
        return batches

    def _cut_uncommitted(self, log_ids: list[int]) -> None:
        """After a failed flush, what it wrote goes now, not at the next open: on a full disk it is the
        room the next checkpoint needs.  The writer leaves its log (the next flush starts a new one)."""
        self._writer.close()
        self.entry_log.cut_to_committed(log_ids, {lid: row[0] for lid, row in self.index.logs.items()})

    # ------------------------------------------------------------ GC
    def delete_ledger(self, ledger_id: int) -> int:
        """Forget a ledger: cached entries, index rows, state. Returns the number of index rows dropped.

        Entry logs left without live entries are deleted. Does I/O: call it from a background thread.
        """
        return self.delete_ledgers([ledger_id])

    def delete_ledgers(self, ledger_ids: list[int]) -> int:
        """:meth:`delete_ledger` of each of ``ledger_ids``, up to :data:`DELETE_BATCH` of them per
        index transaction (one fsync per batch, not per ledger). Returns the index rows dropped."""
        count = 0
        for start in range(0, len(ledger_ids), DELETE_BATCH):
            count += self._delete_batch(ledger_ids[start : start + DELETE_BATCH])
        return count

    def _delete_batch(self, ledger_ids: list[int]) -> int:
        with self._flush_lock:
            with self._lock:
                if self._closed:
                    raise EntryStoreClosed("entry store is closed")
                self.ledgers_version += 1
                for ledger_id in ledger_ids:
                    self._ledgers.pop(ledger_id, None)
                    self.write_cache.drop_ledger(ledger_id)
            index = self.index
            dead: dict[int, list[int]] = {}
            count = 0
            with index.write() as txn:
                for ledger_id in ledger_ids:
                    count += index.delete_ledger_rows(txn, ledger_id, dead)
                new_logs = apply_log_deltas(index.logs, {}, dead, LOG_HEADER_SIZE)
                emptied = index.put_log_rows(txn, new_logs, dead, self._writing_logs())
                sizes = self.index.committed_bytes(emptied)
            with self._lock:
                index.logs = new_logs
            self._unlink_whole(emptied, sizes)
            return count

    def _unlink_whole(self, log_ids: list[int], nbytes: int) -> None:
        """Unlink logs deleted whole (their rows already gone from the committed index) and count them."""
        if not log_ids:
            return
        self.entry_log.unlink(log_ids)
        with self._lock:
            done = self.deleted_whole
            self.deleted_whole = LogsDeleted(done.logs + len(log_ids), done.bytes + nbytes)

    def delete_empty_logs(self) -> list[int]:
        """Delete every log left without a live entry that is no longer appended to (Java's
        doGcEntryLogs): a log emptied while it was being written -- its ledgers deleted
        before it rolled -- is kept until it rolls, and goes at the next call. Returns the ids."""
        with self._flush_lock:
            if self._closed:
                raise EntryStoreClosed("entry store is closed")
            index = self.index
            writing = self._writing_logs()
            empty = [lid for lid, row in index.logs.items() if row[2] == 0 and lid not in writing]
            if not empty:
                return []
            sizes = self.index.committed_bytes(empty)
            with index.write() as txn:
                new_logs = dict(index.logs)
                for lid in empty:
                    index.drop_log_row(txn, new_logs, lid)
            with self._lock:
                index.logs = new_logs
            self._unlink_whole(empty, sizes)
            return empty

    # -- compaction's primitives (bookied.storage.compactor)
    def log_usage(self) -> dict[int, LogUsage]:
        """The usage of every committed log, by log id."""
        out = {}
        for lid, (size, live, entries) in sorted(self.index.logs.items()):
            out[lid] = LogUsage(size, live, entries, min(1.0, live / max(1, size - LOG_HEADER_SIZE)))
        return out

    def compaction_candidates(self, threshold: float, min_size: int = 0) -> list[tuple[int, float]]:
        """``(log id, live fraction)`` of the logs below ``threshold`` that are not being
        appended to (and hold at least ``min_size`` bytes), emptiest first (Java compacts from
        the lowest usage up)."""
        writing = self._writing_logs()
        found = [
            (usage, lid)
            for lid, (size, _l, entries, usage) in self.log_usage().items()
            if lid not in writing and (entries == 0 or usage < threshold) and size >= min_size
        ]
        return [(lid, usage) for usage, lid in sorted(found)]

    def log_size(self, log_id: int) -> int:
        row = self.index.logs.get(log_id)
        return row[0] if row is not None else 0

    def open_compaction_writer(self) -> LogWriter:
        with self._lock:
            if self._closed:
                raise EntryStoreClosed("entry store is closed")
            writer = LogWriter(self.entry_log)
            self._compaction_writers.append(writer)
            return writer

    def close_compaction_writer(self, writer: CompactionWriter) -> None:
        """Stop a compaction writer (one :meth:`open_compaction_writer` gave); the logs it started
        that no commit made known (a failed write, ENOSPC) are removed now rather than at the next open."""
        with self._flush_lock:
            mine = next((w for w in self._compaction_writers if w is writer), None)
            if mine is None:
                raise ValueError("not an open compaction writer of this store")
            mine.close()
            with self._lock:
                self._compaction_writers.remove(mine)
            if not self._closed:
                self.entry_log.unlink([lid for lid in mine.created if lid not in self.index.logs])

    def live_records(self, log_id: int) -> Iterator[LiveRecord | DamagedRecord]:
        """Yield the records of a log that the index points to when scanned, and a
        :class:`DamagedRecord` for each run of bytes that is not a valid record (no lock
        held: the log is no longer appended to)."""
        get = self.index.get
        for rec in scan_records(self.entry_log.path(log_id), self.log_size(log_id)):
            if isinstance(rec, DamagedRecord):
                yield rec
                continue
            off, length, ledger_id, entry_id, data = rec
            raw = get(KEY.pack(ledger_id, entry_id))
            if raw is not None and LOC.unpack(raw) == (log_id, off, length):
                yield LiveRecord(ledger_id, entry_id, data, raw)

    def rows_in_log(self, log_id: int, ids: list[tuple[int, int]] | None = None) -> list[IndexRow]:
        """The index rows pointing into ``log_id``: of the entries ``ids`` only, or of every
        entry (a walk of the whole index: compaction does it only for a log whose damaged
        records hid the ids of live entries)."""
        if ids is None:
            return self.index.rows(log_id)
        keys = [KEY.pack(lid, eid) for lid, eid in ids]
        return [
            IndexRow(k, v)
            for k, v in zip(keys, self.index.get_many(keys))
            if v is not None and LOC.unpack(v)[0] == log_id
        ]

    def read_record(self, row: IndexRow) -> bytes:
        """The entry an index row points at, checked: EntryCorrupted if its record is damaged."""
        ledger_id, entry_id = row.ids()
        log_id, offset, length = row.where()
        data = self.entry_log.pread(log_id, length, offset)
        if data is None:
            raise EntryCorrupted(f"entry {ledger_id}/{entry_id}: its entry log is missing")
        return check_record(data, ledger_id, entry_id, log_id, offset, length)

    def switch_locations(
        self, log_id: int, moves: list[Move], added: LogDeltas, before_unlink: Callable[[], None] | None = None
    ) -> tuple[int, bool]:
        """In one transaction, point the rows of ``moves`` (the
        copies durable in the compaction writer's log, ``added`` its accounting) that still
        hold their old row at the copies, and move the live counts; the old log's row goes
        when none is left. A move whose new row is None deletes the row (an entry whose
        record is damaged: never served, and no longer keeping its log). Returns (rows
        switched or deleted, old log deleted)."""
        with self._flush_lock:
            if self._closed:
                raise EntryStoreClosed("entry store is closed")
            index = self.index
            dead: dict[int, list[int]] = {}
            with index.write() as txn:
                switched = index.switch(txn, moves, dead)
                new_logs = apply_log_deltas(index.logs, added, dead, LOG_HEADER_SIZE)
                emptied = index.put_log_rows(txn, new_logs, set(added) | set(dead), self._writing_logs())
                index.put_next_log(txn, self.entry_log.next_log)
            with self._lock:
                index.logs = new_logs
            if emptied and before_unlink is not None:
                before_unlink()
            self.entry_log.unlink(emptied)
            return switched, log_id in emptied

    def drop_log_if_empty(self, log_id: int, whole: bool = True) -> bool:
        """Delete a log that has no live entries left (and is not appended to); ``whole``:
        it counts as deleted whole (:attr:`deleted_whole`), else as compaction's."""
        with self._flush_lock:
            index = self.index
            row = index.logs.get(log_id)
            if row is None or row[2] != 0 or log_id in self._writing_logs():
                return False
            with index.write() as txn:
                new_logs = dict(index.logs)
                index.drop_log_row(txn, new_logs, log_id)
            with self._lock:
                index.logs = new_logs
            if whole:
                self._unlink_whole([log_id], row[0])
            else:
                self.entry_log.unlink([log_id])
            return True

    # ------------------------------------------------------------ misc
    def log_ids(self) -> list[int]:
        """Entry logs that hold committed entries, ascending."""
        return sorted(self.index.logs)

    def disk_usage(self) -> dict:
        """Bytes on disk: entry logs (total and live) and the index."""
        logs = dict(self.index.logs)
        total = 0
        for lid in logs:
            try:
                total += os.path.getsize(self.entry_log.path(lid))
            except OSError:
                pass
        return {
            "entry_logs": len(logs),
            "entry_log_bytes": total,
            "live_bytes": sum(r[1] for r in logs.values()),
            "live_entries": sum(r[2] for r in logs.values()),
            "index_bytes": self.index.size_on_disk(),
            "cached_bytes": self.cached_bytes,
        }

    def close(self, *, flush: bool = True) -> None:
        """Flush (unless ``flush=False``), then close files and the index. Idempotent."""
        with self._flush_lock:
            if self._closed:
                return
            try:
                if flush:
                    self.flush()
            finally:
                with self._lock:
                    self._closed = True
                self._writer.close()
                for writer in self._compaction_writers:
                    writer.close()
                self.entry_log.close()
                self.index.close()
                self._dir_lock.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
