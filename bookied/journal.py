"""bookied's write-ahead journal, with group commit.

Every ADD (and every master-key, fence and explicit-LAC change) is appended to
the journal and acknowledged only once the journal is durable; the entry store
(:mod:`bkctl.bookied.storage`) catches up lazily, and after a crash the journal
is replayed from the last checkpoint mark into the entry store.

Threads and callbacks
---------------------
* ``append``/``force``/``mark``/``pending_bytes`` may be called from any
  thread (normally the reactor thread). ``append`` never blocks on I/O: it
  encodes the record, takes a short lock and queues it.
* One writer thread (``bookied-journal``) takes every record queued while the
  previous write + fsync ran, waits for more until the oldest one has waited
  ``max_group_wait_ms`` or ``buffered_writes_threshold`` bytes are queued,
  then writes the whole group with one ``write`` and one ``fdatasync``.
* Callbacks run in the writer thread, through ``dispatch(callbacks, error)``
  once per group (default: call each ``callback(error)`` in turn, logging
  exceptions). A server on Twisted passes e.g.
  ``dispatch=lambda cbs, err: reactor.callFromThread(Journal.call_all, cbs, err)``
  so that one reactor wake-up completes a whole group. ``error`` is None on
  success, else the OSError that failed the group.
* With ``inline`` (see :class:`Journal`) the thread that owns the callbacks
  commits the groups itself while the disk is fast, and calls them back
  directly through ``inline_dispatch``; the writer thread only takes over
  when a commit is already running or fsyncs are slow. One lock orders the
  groups whoever writes them.
* A sync record's callback runs after the fsync that covers it; a
  ``sync=False`` record's (v3 DEFERRED_SYNC) right after its write, before
  that fsync. ``force(cb)`` calls back once everything appended before it is
  fsynced (FORCE_LEDGER).
* Back-pressure: ``append`` raises :class:`JournalFull` (map it to
  ETOOMANYREQUESTS) when queued plus in-flight bytes would exceed
  ``max_queue_bytes``; nothing is queued then and the callback is not called.
* An I/O error (ENOSPC, EIO...) fails the group's callbacks and every queued
  one with that OSError, sets ``journal.failed`` (the bookie should go
  read-only) and stops the writer; later appends raise :class:`JournalUnavailable`.
  Records acknowledged before the error were fsynced and stay replayable.

Checkpoints
-----------
``mark()`` is the position just past the last fsynced byte. The bookie
checkpoints like this: ``m = journal.mark()``; ``store.flush()``;
``journal.checkpoint(m)``. That is only correct if every record covered by
``m`` was already handed to the entry store, so the server must put an entry
into the entry store *before* (or while, in the same reactor turn as) it
appends its journal record, never from the journal callback.
``checkpoint`` writes the mark file atomically and deletes the journal files
older than the mark's file, but for the newest ``max_backups`` of them. On
start the bookie replays from the last checkpoint (``replay()``), re-applies
the records to the entry store (all operations are idempotent), then calls
``start()``, which always opens a new journal file, as Java does at each
restart.

The records, the files and the mark are in :mod:`bkctl.bookied.journal_format`,
as is how replay treats damaged files.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator

from bkctl.wire.bookie_disk import layout
from bkctl.wire.fastpath import Twins

from .errors import JournalError, JournalFull, JournalNoSpace, JournalUnavailable
from .journal_file import JournalFile

# the format's names, as the journal's users have always imported them from here
from .journal_format import (  # noqa: F401
    FILE_SUFFIX,
    FORMAT_VERSION,
    HEADER_SIZE,
    MARK_FILE,
    MAX_RECORD_BYTES,
    T_ENTRY,
    EntryRecord,
    ExplicitLacRecord,
    FenceRecord,
    FileScan,
    LogMark,
    MasterKeyRecord,
    Record,
    encode_entry,
    encode_header,
    encode_record,
    file_name,
    list_file_ids,
    read_mark_file,
    replay_files,
    scan_file,
    write_mark_file,
)
from .journal_stats import JournalStats

log = logging.getLogger("bookied.journal")


# ---------------------------------------------------------------- the journal
def _call_all(callbacks: list, error: BaseException | None) -> None:
    for cb in callbacks:
        try:
            cb(error)
        except Exception:  # a callback's bug must not kill the journal
            log.exception("journal callback %r raised", cb)


_IDLE = 1
_GROUPING = 2


def _wait_on(condition: threading.Condition, seconds: float) -> None:
    condition.wait(seconds)


class Journal:
    """A journal in one directory ``D`` (files in ``D/current/``).

    ``max_group_wait_ms`` (journalMaxGroupWaitMSec): how long the oldest
    queued record may wait for company before its group is written; 0 writes
    as soon as the writer is free (records that arrive during an fsync still
    share the next one). ``buffered_writes_threshold``
    (journalBufferedWritesThreshold): write at once when this many bytes are
    queued; ``buffered_entries_threshold`` (journalBufferedEntriesThreshold):
    write at once when more than this many records are queued (0: no limit).
    ``sync_data`` (journalSyncData): False acknowledges a group once it is
    written, without its fsync (the file is fsynced only when it rolls and at
    close; a power failure can lose acknowledged records).
    ``max_backups`` (journalMaxBackups): how many of the files a checkpoint
    no longer needs it keeps (the newest ones).
    ``max_size_mb`` (journalMaxSizeMB): file roll size.
    ``max_queue_bytes``: back-pressure bound on queued + in-flight bytes.
    ``preallocate_mb``: posix_fallocate step (0 = off). ``zero_ahead_mb``
    (journalZeroAheadMB; 0, the default here, is off): zeros written and fsynced
    that far ahead of the records, inside the preallocated space, by a thread of
    the journal's own, so that the group commits' fsyncs commit no metadata
    (:mod:`bkctl.bookied.journal_zeros`; never with ``sync_data`` off, which has
    no fsyncs to speed up). ``drop_synced_pages``
    (journalRemovePagesFromCache): after an fsync, what it made durable is
    dropped from the page cache (``POSIX_FADV_DONTNEED``) but for the last
    :data:`PAGE_CACHE_LAG` bytes, in steps of at least :data:`PAGE_CACHE_DROP_STEP`,
    and the whole file once it rolls, as Java's JournalChannel does: the
    journal is only read back at a restart, and its pages would otherwise
    push the entry logs' pages, which reads need, out of memory (and on this
    kind of host, new page-cache pages cost more to fill than recycled ones).
    ``dispatch``: see the
    module doc. ``on_group(records)``: each group's record count once it is durable
    (by whichever thread committed it). ``on_fsync(seconds)``: called after each journal fsync, by
    whichever thread committed (one at a time), e.g. to feed a histogram.

    Time: ``monotonic()`` (default :func:`time.monotonic`) dates the group
    wait and times the fsyncs; ``wait_on(condition, seconds)`` (default:
    ``condition.wait(seconds)``) is how the writer sleeps, holding
    ``condition``, until a record arrives or the group wait is over.  A test
    passes a manual clock for both and sees the group-commit timing
    deterministically.

    ``inline`` (with ``max_group_wait_ms`` 0 only): commit in the caller's
    thread instead of handing every group to the writer thread and back.
    It is ``schedule(fn)``, which must run ``fn()`` soon in the thread that
    owns the callbacks -- for a Twisted server, at the end of the current
    reactor iteration, so that every request read in that iteration joins
    the group. When a record is appended while the writer thread is idle
    and fsyncs have been fast (an average below ``inline_max_fsync_ms``),
    the journal calls ``schedule(commit)`` (once until it has run) instead
    of waking the writer; ``commit`` writes, fsyncs and calls back through
    ``inline_dispatch`` (default: each callback in turn) in that thread.
    Otherwise -- a commit is already running, or the disk is slow -- the
    writer thread takes the records, as without ``inline``. Each add then
    crosses no thread on its way to disk and back, which saves two thread
    wake-ups per group (and their scheduling delays, which dominate the
    latency tail on a busy machine); the cost is that the owner's thread
    waits for the fsync, which is why a slow disk goes back to the writer.
    Inline commits are no twin of the writer thread's but the same code run by
    another thread: fast paths off (``BKCTL_FASTPATHS=0``, :mod:`bkctl.wire.fastpath`)
    they are made all the same, so that the Python twins are measured with the
    group hand-over the C ones have.

    ``patient`` records (``append(..., patient=True)``: a bookie's recovery
    adds, the copies re-replication writes) may wait for company longer:
    a group made of them alone waits up to ``patient_wait_ms`` from its
    oldest record (or ``max_group_wait_ms``, if longer), and the first
    record that is not patient ends the wait, so a live writer's add never
    waits for them.  Each is still acknowledged only after the fsync that
    covers it; what changes is how many fsyncs a stream of copies costs the
    disk (and the owner's thread, in the ``inline`` mode, where
    ``inline_later(seconds, fn)`` must run ``fn()`` in the owner's thread
    that much later; without it patient records are committed as others
    there).  The writer thread keeps the same wait.

    Several journal directories are several Journal objects; the server
    shards ledgers over them (e.g. ``ledger_id % n``).
    """

    call_all = staticmethod(_call_all)

    def __init__(
        self,
        directory: str,
        *,
        max_group_wait_ms: float = 2.0,
        buffered_writes_threshold: int = 512 * 1024,
        buffered_entries_threshold: int = 0,
        sync_data: bool = True,
        max_backups: int = 0,
        max_size_mb: float = 2048,
        max_queue_bytes: int = 64 * 1024 * 1024,
        preallocate_mb: float = 16,
        zero_ahead_mb: float = 0,
        drop_synced_pages: bool = True,
        dispatch: Callable[[list, BaseException | None], None] | None = None,
        inline: Callable[[Callable[[], None]], None] | None = None,
        inline_dispatch: Callable[[list, BaseException | None], None] | None = None,
        inline_max_fsync_ms: float = 2.0,
        patient_wait_ms: float = 0.0,
        inline_later: Callable[[float, Callable[[], None]], None] | None = None,
        on_fsync: Callable[[float], None] | None = None,
        on_group: Callable[[int], None] | None = None,
        on_grow: Callable[[], None] | None = None,
        twins: Twins,
        monotonic: Callable[[], float] = time.monotonic,
        wait_on: Callable[[threading.Condition, float], None] = _wait_on,
    ):
        self.directory = layout.current_dir(directory)
        os.makedirs(self.directory, exist_ok=True)
        self.max_group_wait = max(0.0, max_group_wait_ms) / 1000.0
        self.buffered_writes_threshold = max(1, int(buffered_writes_threshold))
        self.buffered_entries_threshold = max(0, int(buffered_entries_threshold))
        self.sync_data = bool(sync_data)
        self.max_backups = max(0, int(max_backups))
        self.max_queue_bytes = max(1, int(max_queue_bytes))
        self._dispatch = dispatch or _call_all
        self._inline = inline if self.max_group_wait == 0 else None
        #: a run's records (``twins.records.journal_entries``: the same bytes as encode_entry
        #: of each, joined; C or Python, :mod:`bkctl.wire.bookie_disk.records`)
        self.encode_entries = twins.records.journal_entries
        self._monotonic = monotonic
        self._wait_on = wait_on
        self._inline_dispatch = inline_dispatch or _call_all
        self._inline_max_fsync = max(0.0, inline_max_fsync_ms) / 1000.0
        self._inline_scheduled = False
        #: how long a group of patient records alone may wait (seconds; never below the group wait)
        self.patient_wait = max(self.max_group_wait, max(0.0, patient_wait_ms) / 1000.0)
        self._inline_later = inline_later if self._inline is not None and self.patient_wait > 0 else None
        self._later_scheduled = False
        self._on_group = on_group
        self.stats = JournalStats()
        #: the current file (``on_grow``: the bookie checks its disk usage on the write path too)
        self.file = JournalFile(
            self.directory,
            max_size=max(HEADER_SIZE + 1, int(max_size_mb * 1024 * 1024)),
            preallocate=max(0, int(preallocate_mb * 1024 * 1024)),
            drop_synced_pages=drop_synced_pages,
            stats=self.stats,
            zero_ahead=int(zero_ahead_mb * 1024 * 1024) if self.sync_data else 0,
            on_grow=on_grow,
            on_fsync=on_fsync,
            monotonic=monotonic,
        )
        #: The OSError that failed the journal, or None.
        self.failed: BaseException | None = None

        self._cond = threading.Condition(threading.Lock())
        self._queue: list = []  # (bytes | None, callback, sync, records in the bytes)
        self._queue_bytes = 0
        self._queue_records = 0
        self._pending_bytes = 0  # queued + being written
        self.writing_records = 0  # taken from the queue, not yet called back (Java's force-write queue)
        self._first_arrival = 0.0
        self._impatient = False  # a queued record (or force) is not patient
        self._waiting = 0
        self._closing = False
        self._started = False
        self._thread: threading.Thread | None = None
        self._ckpt_lock = threading.Lock()
        # Held while a group is written and fsynced (by the writer thread or an
        # inline commit); the queue is taken under it, so groups stay in order.
        self._commit_lock = threading.Lock()

        self._checkpointed = self._load_mark()
        self._durable = self._checkpointed or LogMark(0, 0)

    # ------------------------------------------------------------ properties
    @property
    def drop_synced_pages(self) -> bool:
        """Whether fsynced bytes leave the page cache (off too once the file system refused)."""
        return self.file.synced_pages.enabled

    @property
    def fsync_average(self) -> float:
        """Moving average of the fsync latency, seconds (decides inline commits)."""
        return self.file.fsync_average

    @property
    def pending_bytes(self) -> int:
        """Bytes appended but not yet completed (queued plus being written)."""
        return self._pending_bytes

    @property
    def queued_records(self) -> int:  # Java's JOURNAL_QUEUE_SIZE
        return self._queue_records

    @property
    def current_file_id(self) -> int:
        return self.file.file_id

    def mark(self) -> LogMark:
        """Position just past the last fsynced record (before start: the last checkpoint)."""
        return self._durable

    def last_checkpoint(self) -> LogMark | None:
        return self._checkpointed

    def file_ids(self) -> list[int]:
        return list_file_ids(self.directory)

    def disk_usage(self) -> int:
        total = 0
        for fid in self.file_ids():
            try:
                total += os.path.getsize(os.path.join(self.directory, file_name(fid)))
            except OSError:
                pass
        return total

    def _load_mark(self) -> LogMark | None:
        try:
            return read_mark_file(self.directory)
        except (OSError, ValueError) as e:
            log.error("cannot use the journal checkpoint mark (%s); replay starts from the oldest journal file", e)
            return None

    # ------------------------------------------------------------ replay
    def replay(self, from_mark: LogMark | None = None, *, repair: bool = True) -> Iterator[Record]:
        """Yield the records from ``from_mark`` (default: the last checkpoint) to the end, in order.

        Damaged data ends a file's replay with a warning (see the module doc);
        with ``repair`` the last file is truncated after its last good record.
        Must run before ``start()``."""
        if self._started:
            raise JournalError("replay() must run before start()")
        if from_mark is None:
            from_mark = self._checkpointed or LogMark(0, 0)
        yield from replay_files(self.directory, self.file_ids(), from_mark, repair=repair)

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Open a new journal file and start the writer thread."""
        if self._started:
            raise JournalError("journal already started")
        ids = self.file_ids()
        last = max(ids[-1] if ids else 0, self._checkpointed.file_id if self._checkpointed else 0)
        self.file.file_id = last
        try:
            self.file.open(last + 1)
        except JournalNoSpace:
            # a full disk does not keep the bookie from starting (read-only): no preallocation
            # (the next mark in it, the files before can go), else the first group with room
            self._open_unpreallocated(last + 1)
        self._durable = self.file.position
        self._started = True
        self._thread = threading.Thread(target=self._run, name="bookied-journal", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Write and fsync everything queued, call back, stop the writer, close the file."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self.file.fd >= 0:
            if not self.sync_data and self.failed is None:
                try:  # what journalSyncData=false left in the page cache
                    os.fdatasync(self.file.fd)
                except OSError as e:
                    log.error("journal %s: fsync at close failed: %s", self.directory, e)
            self.file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------ appends
    def append(
        self,
        record: Record,
        callback: Callable[[BaseException | None], None],
        *,
        sync: bool = True,
        patient: bool = False,
    ) -> None:
        """Queue ``record``; ``callback(error_or_None)`` runs in the writer thread when it is durable
        (``patient``: see the class doc).

        Raises JournalFull (back-pressure) or JournalUnavailable (not started,
        closed or failed) without queueing anything.
        """
        data = encode_record(record)
        if len(data) > MAX_RECORD_BYTES + 25:
            raise ValueError(f"journal record of {len(data)} bytes is too large")
        self._enqueue(data, callback, sync, 1, patient)

    def append_entries(
        self,
        ledger_id: int,
        entry_ids: list,
        bodies: list,
        callback: Callable[[BaseException | None], None],
        patient: bool = False,
    ) -> None:
        """:meth:`append` (sync) of an EntryRecord per entry of one ledger, as one item: the
        same bytes, in one group, ``callback`` once for all; the same errors, for all or none."""
        data = self.encode_entries(ledger_id, entry_ids, bodies, T_ENTRY)
        self._enqueue(data, callback, True, len(bodies), patient)

    def _enqueue(self, data: bytes, callback, sync: bool, records: int, patient: bool) -> None:
        n = len(data)
        with self._cond:
            if not self._started or self._closing or self.failed is not None:
                raise self._unavailable()
            if self._pending_bytes and self._pending_bytes + n > self.max_queue_bytes:
                raise JournalFull(f"journal queue is full ({self._pending_bytes} bytes pending)")
            q = self._queue
            if not q:
                self._first_arrival = self._monotonic()
            q.append((data, callback, sync, records))
            self._pending_bytes += n
            self._queue_bytes += n
            self._queue_records += records
            hurry = not patient and not self._impatient  # ends a patient group's wait
            if hurry:
                self._impatient = True
            schedule = self._wake_idle_writer()
            if self._waiting == _GROUPING and (hurry or self._group_is_full()):
                self._cond.notify()
        if schedule is not None:
            schedule()

    def force(self, callback: Callable[[BaseException | None], None]) -> None:
        """``callback(error_or_None)`` once everything appended before this call is fsynced."""
        with self._cond:
            if not self._started or self._closing or self.failed is not None:
                raise self._unavailable()
            if not self._queue:
                self._first_arrival = self._monotonic()
            self._queue.append((None, callback, True, 0))
            hurry = not self._impatient
            self._impatient = True
            schedule = self._wake_idle_writer()
            if self._waiting == _GROUPING and hurry:
                self._cond.notify()
        if schedule is not None:
            schedule()

    def _group_is_full(self) -> bool:
        """With the lock held: whether the queued records make a group without
        waiting any longer (journalBufferedWritesThreshold bytes, or more than
        journalBufferedEntriesThreshold records, as Java counts them)."""
        if self._queue_bytes >= self.buffered_writes_threshold:
            return True
        limit = self.buffered_entries_threshold
        return limit > 0 and self._queue_records > limit

    def _wake_idle_writer(self):
        """With the lock held: get an idle writer going.  Returns what to call
        (outside the lock) to schedule an inline commit in the owner's thread
        -- soon, or after the patient wait -- else None (the writer thread was
        notified, or is busy, or a commit is scheduled already)."""
        if self._waiting != _IDLE:
            return None
        if self._inline is not None and self.fsync_average < self._inline_max_fsync:
            if self._inline_scheduled:
                return None
            if not self._impatient and self._inline_later is not None and not self._group_is_full():
                if self._later_scheduled:
                    return None
                self._later_scheduled = True
                return self._schedule_later
            self._inline_scheduled = True
            return self._schedule_soon
        self._cond.notify()
        return None

    def _schedule_soon(self) -> None:  # scheduled only with an _inline
        if self._inline is not None:
            self._inline(self.commit)

    def _schedule_later(self) -> None:  # scheduled only with an _inline_later
        if self._inline_later is not None:
            self._inline_later(self.patient_wait, self._commit_patient)

    def commit(self) -> None:
        """Write, fsync and call back what is queued, in the calling thread
        (the ``inline`` mode's scheduled call; see the class doc). Does
        nothing when the writer thread is writing a group: it takes whatever
        is queued after that one."""
        with self._cond:
            self._inline_scheduled = False
        self._commit_here()

    def _commit_patient(self) -> None:
        """:meth:`commit`, as scheduled for a group of patient records (its
        wait over; what an earlier commit took is gone from the queue)."""
        with self._cond:
            self._later_scheduled = False
        self._commit_here()

    def _commit_here(self) -> None:
        if not self._commit_lock.acquire(blocking=False):
            return
        try:
            if self.file.fd >= 0 or (self._started and not self._closing):  # no file yet: see start
                self._take_and_commit(self._inline_dispatch)
        finally:
            self._commit_lock.release()

    def _unavailable(self) -> JournalUnavailable:
        if self.failed is not None:
            return JournalUnavailable(f"journal failed: {self.failed}", self.failed)
        if self._closing:
            return JournalUnavailable("journal is closed")
        return JournalUnavailable("journal is not started")

    # ------------------------------------------------------------ checkpoint
    def checkpoint(self, mark: LogMark) -> None:
        """Persist ``mark`` as the replay start and delete the journal files before its file.

        Call it only after the entry store has durably absorbed every record
        before ``mark`` (see the module doc). Older marks are ignored."""
        mark = LogMark(*mark)
        with self._ckpt_lock:
            if mark > self._durable:
                raise ValueError(f"checkpoint {mark} is beyond the durable journal position {self._durable}")
            if self._checkpointed is not None and mark <= self._checkpointed:
                return
            write_mark_file(self.directory, mark)
            self._checkpointed = mark
            self._trim(self.max_backups)

    def _trim(self, keep: int) -> int:
        """With the checkpoint lock held: delete the files before the mark's (and the current) file
        but the newest ``keep`` (journalMaxBackups: never replayed); returns the bytes freed."""
        assert self._checkpointed is not None
        limit = min(self._checkpointed.file_id, self.file.file_id) if self._started else self._checkpointed.file_id
        older = [fid for fid in self.file_ids() if fid < limit]
        freed = 0
        for fid in older[: max(0, len(older) - keep)]:
            path = os.path.join(self.directory, file_name(fid))
            try:
                size = os.stat(path).st_blocks * 512
                os.unlink(path)
            except FileNotFoundError:
                continue
            freed += size or 1
        if freed:
            layout.fsync_dir(self.directory)
        return freed

    def reclaim(self) -> int:
        """A full disk's way out of what the journal holds and no replay needs
        (the disk check calls it over diskUsageThreshold); returns the bytes freed. A file goes
        once the mark is in a newer one, and a journal that filled a disk below journalMaxSizeMB
        never rolled: a current file wholly checkpointed is closed for a new, unpreallocated
        one; then every file before the mark goes, journalMaxBackups's backups too."""
        with self._commit_lock:
            current = self.file.position
            done = self._checkpointed is not None and current <= self._checkpointed and current.offset > HEADER_SIZE
            done = done and self._started and not self._closing and self.failed is None and self.file.fd >= 0
            done = done and self._open_unpreallocated(current.file_id + 1)
        if done:
            self.checkpoint(LogMark(current.file_id + 1, HEADER_SIZE))  # (the new file's start: nothing past it)
        with self._ckpt_lock:
            freed = self._trim(0) if self._checkpointed is not None else 0
        if freed:
            log.warning("journal %s: disk full: freed %d bytes of checkpointed files", self.directory, freed)
        return freed

    def _open_unpreallocated(self, file_id: int) -> bool:
        """Open ``file_id`` without preallocating it (no room for that); False: no room at all."""
        try:
            self.file.open_unpreallocated(file_id)
        except JournalNoSpace as e:
            log.warning("journal %s: %s; the file is created once there is room", self.directory, e)
            return False
        self._durable = self.file.position
        return True

    # ------------------------------------------------------------ writer thread
    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._queue and not self._closing:
                    self._waiting = _IDLE
                    cond.wait()
                self._waiting = 0
                if not self._queue:
                    return  # closing, nothing left
                if self.patient_wait > 0:  # (never below max_group_wait)
                    while not self._group_is_full() and not self._closing:
                        wait = self.max_group_wait if self._impatient else self.patient_wait
                        remaining = self._first_arrival + wait - self._monotonic()
                        if remaining <= 0:
                            break
                        self._waiting = _GROUPING
                        self._wait_on(cond, remaining)
                    self._waiting = 0
            with self._commit_lock:
                self._take_and_commit(self._dispatch)
            if self.failed is not None:  # not after a JournalNoSpace: the next group tries again
                return

    def _take_and_commit(self, dispatch) -> BaseException | None:
        """With the commit lock held: write and fsync everything queued as one
        group, call back through ``dispatch``; return the error that failed it."""
        cond = self._cond
        with cond:
            batch = self._queue
            nbytes = self._queue_bytes
            self._queue = []
            self._queue_bytes = 0
            self.writing_records, self._queue_records = self._queue_records, 0
            self._impatient = False
        if not batch:
            return None
        error = self.failed
        if error is None:
            error = self._commit(batch, dispatch)
        else:  # failed meanwhile (by the other committer): nothing more is written
            self._deliver([cb for _d, cb, _s, _n in batch], error, dispatch)
        with cond:
            self._pending_bytes -= nbytes
            self.writing_records = 0
            if error is not None:
                leftovers = self._queue
                self._queue = []
                self._queue_bytes = 0
                self._queue_records = 0
                self._impatient = False
                self._pending_bytes = 0
            else:
                leftovers = None
        if leftovers:
            self._deliver([cb for _d, cb, _s, _n in leftovers], error, dispatch)
        return error

    def _deliver(self, callbacks: list, error: BaseException | None, dispatch=None) -> None:
        if not callbacks:
            return
        try:
            (dispatch or self._dispatch)(callbacks, error)
        except Exception:
            log.exception("journal dispatch of %d callbacks raised", len(callbacks))

    def _commit(self, batch: list, dispatch=None) -> BaseException | None:
        """Write and fsync one group, run its callbacks; return the error that failed it, if any."""
        jf = self.file
        synced: list = []
        deferred: list = []
        parts: list = []
        size = 0
        records = 0
        try:
            if jf.fd < 0:  # started on a full disk (see start)
                jf.open(jf.file_id + 1)
            for data, cb, sync, count in batch:
                if data is None:
                    synced.append(cb)
                    continue
                n = len(data)
                end = jf.offset + size
                if end > HEADER_SIZE and end + n > jf.max_size:
                    # roll: what is already in this file is written and fsynced first
                    if parts:
                        jf.write(parts)
                        parts, size = [], 0
                    jf.sync(rolling=True)
                    self._durable = jf.position
                    jf.open(jf.file_id + 1)
                parts.append(data)
                size += n
                records += count
                (synced if sync else deferred).append(cb)
            if parts:
                jf.write(parts)
        except BaseException as e:  # OSError (ENOSPC, EIO...) or a bug: fail, never hang callers
            if isinstance(e, JournalNoSpace):
                # nothing was written where the next group goes: only this group fails
                log.warning("journal %s: %s", self.directory, e)
            else:
                self._fail(e)
            # every callback of the group, including those of records not reached yet
            self._deliver([cb for _d, cb, _s, _n in batch], e, dispatch)
            return e
        if not self.sync_data:
            # journalSyncData=false: written to the page cache is enough (fsyncs only at a roll
            # and at close); everything is called back now, in order
            self._durable = jf.position
            self._count_group(records)
            self._deliver([cb for _d, cb, _s, _n in batch], None, dispatch)
            return None
        self._deliver(deferred, None, dispatch)  # DEFERRED_SYNC: written, not yet fsynced
        try:
            jf.sync()
        except BaseException as e:
            self._fail(e)
            self._deliver(synced, e, dispatch)
            return e
        self._durable = jf.position
        self._count_group(records)
        self._deliver(synced, None, dispatch)
        return None

    def _count_group(self, records: int) -> None:
        if self._on_group is not None:
            self._on_group(records)
        st = self.stats
        st.groups += 1
        st.records += records
        if records > st.max_group_records:
            st.max_group_records = records

    def _fail(self, error: BaseException) -> None:
        if isinstance(error, OSError):
            log.error("journal %s failed: %s; no more appends are accepted", self.directory, error)
        else:
            log.error("journal %s writer crashed; no more appends are accepted", self.directory, exc_info=error)
        with self._cond:
            if self.failed is None:
                self.failed = error
