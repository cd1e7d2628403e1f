"""Bookie semantics (BookKeeper's bookie/BookieImpl.java and the
proto/*ProcessorV3.java request processors), between the protocol and storage.

Everything here runs on the reactor thread.  Callers pass a callback per
request; it is called exactly once, with an :class:`~bkctl.wire.codecs.protocol.RC` (and
the data for reads).  Durability: an add's callback runs only after the
journal has fsynced its record (``deferred_sync`` adds: after the write).

An entry goes to the entry store *before* its journal record is queued, so
a checkpoint (mark, flush, trim) never trims a record whose entry is not in
the store yet.  Ledgers are sharded over journals and entry stores by id.
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

from bkctl.wire.codecs.availability import encode_availability
from bkctl.wire.codecs.plain import ReadOutcome, RunOfAdds, lac_of_entry
from bkctl.wire.codecs.protocol import LAST_ADD_CONFIRMED, RC
from bkctl.wire.codecs.v2 import BATCH_ENTRY_OVERHEAD, BATCH_RESPONSE_OVERHEAD

from .errors import JournalFull, JournalNoSpace, JournalUnavailable
from .journal import EntryRecord, ExplicitLacRecord, FenceRecord, MasterKeyRecord
from .storage import EntryCorrupted, WriteCacheFull

log = logging.getLogger("bookied.bookie")

_LAC_IN_BODY = struct.Struct(">q")  # at offset 8 of a LAC body
#: Java's default maxBatchReadSize.
MAX_BATCH_READ_SIZE = 5 * 1024 * 1024
#: Entries a BATCH_READ_ENTRY asks the store for at first, and at most, per call (the
#: calls double up to the second).
_BATCH_STEP, _BATCH_STEP_MAX = 16, 1024


class BatchRead(NamedTuple):
    """What a BATCH_READ_ENTRY is answered (:meth:`Bookie.batch_entries`): its rc and the
    entries' bytes, from the first asked for on (none unless EOK)."""

    rc: int
    entries: list[bytes]


def _lac_of_body(body: bytes) -> int:
    return _LAC_IN_BODY.unpack_from(body, 8)[0] if len(body) >= 16 else -1


class Bookie:
    def __init__(
        self,
        journals,
        stores,
        *,
        clock,
        max_frame_size: int = 5 * 1024 * 1024,
        allow_high_priority_writes_when_readonly: bool = True,
        journal_write_data: bool = True,
        max_throttle_time: float = 10.0,
    ):
        self.journals = list(journals)
        #: journalWriteData: False puts entries in the entry store only and
        #: acknowledges them at once (durable at the next checkpoint), as Java's
        #: bookie does; master keys and fences are still journaled.
        self.journal_write_data = journal_write_data
        self.stores = list(stores)
        self.clock = clock
        self.max_frame_size = max_frame_size
        self.allow_high_priority_writes = allow_high_priority_writes_when_readonly
        #: True while any cause in :attr:`readonly_causes` holds (a plain
        #: attribute: every add reads it).
        self.readonly = False
        #: Why the bookie is read-only, by cause (see :meth:`mark_readonly`).
        self.readonly_causes: dict[str, str] = {}
        #: The reasons, joined; None when writable.
        self.readonly_reason: str | None = None
        self.on_readonly_change: Callable[[bool], None] | None = None
        self._lac: dict[int, int] = {}
        self._lac_waiters: dict[int, list] = {}
        self._fencing: dict[int, list] = {}  # ledger -> callbacks waiting for the fence record
        self.connections: set = set()
        #: dbStorage_maxThrottleTimeMs, in seconds: how long an add waits for room
        #: in a full write cache before it is refused with ETOOMANYREQUESTS (as
        #: Java's bookie, which blocks the add rather than refuse it at once: a
        #: client takes the refusal as a failed bookie and changes its ensemble).
        self.max_throttle_time = max_throttle_time
        #: adds waiting for the write cache, oldest first: (deadline, args, kwargs)
        self._throttled: deque = deque()
        self._journal_full = False  # an add found a journal's queue full (it waits in _throttled)
        self._journal_check = None  # the call of _journal_room due on the next turn
        self._throttle_timer = None
        self._draining = False
        #: entry bytes stored and read (Java's bookie_WRITE_BYTES / bookie_READ_BYTES)
        self.bytes_written = self.bytes_read = 0

    # -- sharding ---------------------------------------------------------------
    def _store(self, ledger_id: int):
        return self.stores[ledger_id % len(self.stores)]

    def _journal(self, ledger_id: int):
        return self.journals[ledger_id % len(self.journals)]

    # -- connections (for the server's bookkeeping) -------------------------------
    def connection_opened(self, proto) -> None:
        self.connections.add(proto)

    def connection_closed(self, proto) -> None:
        self.connections.discard(proto)

    # -- start-up --------------------------------------------------------------
    def replay(self) -> int:
        """Re-apply every journal record after the last checkpoint; returns the record count."""
        n = 0
        for journal in self.journals:
            for record in journal.replay():
                self._store(record.ledger_id).apply(record)
                if type(record) is EntryRecord:
                    self._raise_lac(record.ledger_id, lac_of_entry(record.data))
                elif type(record) is ExplicitLacRecord:
                    self._raise_lac(record.ledger_id, _lac_of_body(record.body))
                n += 1
        return n

    # -- read-only mode ---------------------------------------------------------
    def mark_readonly(self, cause: str, reason: str) -> None:
        """Read-only because of ``cause`` ("disk", "journal", "ledger",
        "admin", "config"), explained by ``reason``.  Each cause is cleared on its own
        (:meth:`clear_readonly`): the bookie is writable again only once none
        holds -- a disk that drains does not undo a failed journal."""
        self.readonly_causes[cause] = reason
        self._readonly_causes_changed()

    def clear_readonly(self, cause: str) -> None:
        if self.readonly_causes.pop(cause, None) is not None:
            self._readonly_causes_changed()

    def _readonly_causes_changed(self) -> None:
        readonly = bool(self.readonly_causes)
        self.readonly_reason = "; ".join(self.readonly_causes.values()) if readonly else None
        if readonly == self.readonly:
            return
        self.readonly = readonly
        log.warning(
            "bookie is now %s%s",
            "read-only" if readonly else "writable",
            f" ({self.readonly_reason})" if readonly else "",
        )
        if self.on_readonly_change is not None:
            self.on_readonly_change(readonly)

    def journal_failed(self, journal, error) -> None:
        if isinstance(error, JournalNoSpace):
            # the journal itself still works: read-only until the disk check finds room
            # again (below diskUsageLwmThreshold), not until a restart
            self.mark_readonly("disk", f"journal: {error}")
            return
        self.mark_readonly("journal", f"journal write failed: {error}")

    # -- master key ------------------------------------------------------------
    def _check_key(self, ledger_id: int, key: bytes) -> int:
        """EOK if ``key`` is the ledger's key; a new ledger adopts it (journaled)."""
        store = self._store(ledger_id)
        stored = store.get_master_key(ledger_id)
        if stored is None:
            store.set_master_key(ledger_id, bytes(key))
            try:
                self._journal(ledger_id).append(MasterKeyRecord(ledger_id, bytes(key)), _ignore)
            except (JournalFull, JournalUnavailable) as e:
                # the key stays in the store; it is persisted with the entry's record anyway
                log.debug("master key record for ledger %d not journaled: %s", ledger_id, e)
            return RC.EOK
        return RC.EOK if stored == key else RC.EUA

    # -- adds ------------------------------------------------------------------
    def add_entry(
        self,
        ledger_id: int,
        entry_id: int,
        master_key: bytes,
        body: bytes,
        callback: Callable[[int], None],
        *,
        recovery: bool = False,
        high_priority: bool = False,
        deferred_sync: bool = False,
    ) -> None:
        if ledger_id < 0 or entry_id < 0:  # no client makes them; the store keeps none
            callback(RC.EBADREQ)
            return
        if self.readonly and not (high_priority and self.allow_high_priority_writes):
            callback(RC.EREADONLY)
            return
        stores = self.stores
        store = stores[ledger_id % len(stores)] if len(stores) > 1 else stores[0]
        if store.get_master_key(ledger_id) != master_key:  # a new ledger, or the wrong key
            rc = self._check_key(ledger_id, master_key)
            if rc != RC.EOK:
                callback(rc)
                return
        if not recovery and store.is_fenced(ledger_id):
            callback(RC.EFENCED)
            return
        journals = self.journals
        journal = journals[ledger_id % len(journals)] if len(journals) > 1 else journals[0]
        write_data = self.journal_write_data
        if write_data and journal.failed is not None:
            callback(RC.EIO)
            return
        if self._throttled and not self._draining:  # behind the adds already waiting
            self._throttle(ledger_id, entry_id, master_key, body, callback, recovery, high_priority, deferred_sync)
            return
        try:
            store.put_entry(ledger_id, entry_id, body)
        except WriteCacheFull:
            self._throttle(ledger_id, entry_id, master_key, body, callback, recovery, high_priority, deferred_sync)
            return
        self.bytes_written += len(body)

        if write_data and not self._journaled(
            journal,
            lambda: journal.append(
                EntryRecord(ledger_id, entry_id, body),
                _Durable(self, journal, callback),
                sync=not deferred_sync,
                patient=recovery,
            ),
            callback,
            lambda: self._throttle(
                ledger_id, entry_id, master_key, body, callback, recovery, high_priority, deferred_sync
            ),
        ):
            return
        self._note_lac(ledger_id, lac_of_entry(body))
        if not write_data:
            callback(RC.EOK)

    def add_entries(
        self,
        ledger_id: int,
        master_key: bytes,
        run: RunOfAdds,
        reply,
        *,
        recovery: bool = False,
        high_priority: bool = False,
    ) -> None:
        """:meth:`add_entry` of a run of sync adds to one ledger with one key (a
        request chunk's consecutive adds, as ``plain.add_run`` took them apart: their
        entryIds and bodies, and the bodies' LAC and bytes): checked once, put into the
        store under one lock, journaled as one item, and answered together, ``reply(rc)``
        once for all of them.  Whenever a check would treat an entry apart (an error, a
        full write cache, adds already waiting for one), each entry goes through
        :meth:`add_entry` instead, with ``reply.one(k)`` as the k-th's callback, so
        the answers are exactly those of the one-by-one path."""
        entry_ids, bodies, lac, size = run.entry_ids, run.bodies, run.lac, run.size
        store, journal = self._store(ledger_id), self._journal(ledger_id)
        if (
            ledger_id < 0
            or min(entry_ids) < 0
            or self.readonly
            or not self.journal_write_data
            or self._throttled
            or journal.failed is not None
            or store.get_master_key(ledger_id) != master_key
            or (not recovery and store.is_fenced(ledger_id))
        ):
            self._add_each(ledger_id, master_key, entry_ids, bodies, reply, 0, recovery, high_priority)
            return
        put = store.put_entries(ledger_id, entry_ids, bodies, size)
        if put < len(entry_ids):  # the cache filled up: those left wait for it, one by one
            self._add_each(ledger_id, master_key, entry_ids, bodies, reply, put, recovery, high_priority)
            if not put:
                return
            entry_ids, bodies = entry_ids[:put], bodies[:put]
            reply = reply.first(put)
            lac, size = max(map(lac_of_entry, bodies)), sum(map(len, bodies))
        self.bytes_written += size
        if self._journaled(
            journal,
            lambda: journal.append_entries(ledger_id, entry_ids, bodies, _Durable(self, journal, reply), recovery),
            reply,
            lambda: self._add_each(ledger_id, master_key, entry_ids, bodies, reply, 0, recovery, high_priority),
        ):
            self._note_lac(ledger_id, lac)

    def _journaled(
        self, journal, append: Callable[[], None], callback: Callable[[int], None], wait: Callable[[], None]
    ) -> bool:
        """``append()`` an add's journal record(s) and return True; else False, having
        called ``wait()`` when the journal's queue is full (the add waits, as for a full
        write cache, until the journal has taken its queue: Java's bookie blocks on its
        journal queue, its client's adds are not refused) or answered ``callback`` EIO
        when the journal failed (the bookie then going read-only)."""
        try:
            append()
        except JournalFull:
            self._journal_full = True
            wait()
            return False
        except JournalUnavailable as e:
            callback(RC.EIO)
            self.journal_failed(journal, e)
            return False
        return True

    def _note_lac(self, ledger_id: int, lac: int) -> None:
        """An added entry carried ``lac``: raise the ledger's known LAC to it."""
        known = self._lac.get(ledger_id)
        if known is None or lac > known:
            self._raise_lac(ledger_id, lac)

    def _add_each(self, ledger_id, master_key, entry_ids, bodies, reply, start, recovery, high_priority) -> None:
        for k in range(start, len(entry_ids)):
            self.add_entry(
                ledger_id,
                entry_ids[k],
                master_key,
                bodies[k],
                reply.one(k),
                recovery=recovery,
                high_priority=high_priority,
            )

    def _throttle(
        self, ledger_id, entry_id, master_key, body, callback, recovery, high_priority, deferred_sync
    ) -> None:
        if self.max_throttle_time <= 0:
            callback(RC.ETOOMANYREQUESTS)
            return
        deadline = self.clock.seconds() + self.max_throttle_time
        self._throttled.append(
            (
                deadline,
                (ledger_id, entry_id, master_key, body, callback),
                dict(recovery=recovery, high_priority=high_priority, deferred_sync=deferred_sync),
            )
        )
        if self._throttle_timer is None:
            self._arm_throttle_timer()

    def _arm_throttle_timer(self) -> None:
        """(Re)start the one timer, for the oldest waiting add's deadline (none: no timer)."""
        if self._throttle_timer is not None and self._throttle_timer.active():
            self._throttle_timer.cancel()
        self._throttle_timer = None
        if self._throttled:
            delay = max(0.0, self._throttled[0][0] - self.clock.seconds())
            self._throttle_timer = self.clock.callLater(delay, self._throttle_expired)

    def _throttle_expired(self) -> None:
        """Refuse the adds that waited dbStorage_maxThrottleTimeMs for the write cache (or the journal)."""
        now, waiting = self.clock.seconds(), self._throttled
        refused = 0
        while waiting and waiting[0][0] <= now:
            waiting.popleft()[1][4](RC.ETOOMANYREQUESTS)
            refused += 1
        if refused:
            log.warning(
                "%d adds refused (ETOOMANYREQUESTS): the write cache (or the journal's queue) "
                "stayed full for dbStorage_maxThrottleTimeMs",
                refused,
            )
        self._arm_throttle_timer()

    @property
    def throttled_adds(self) -> int:
        """Adds waiting for room in the write cache or the journal's queue."""
        return len(self._throttled)

    def journal_progressed(self) -> None:
        """A journal group completed: adds that found a journal's queue full try again
        once every journal has at most half its bound queued.  Looked at on the next
        reactor turn: a group's callbacks run before its bytes leave the count."""
        if self._journal_full and self._journal_check is None:
            self._journal_check = self.clock.callLater(0, self._journal_room)

    def _journal_room(self) -> None:
        self._journal_check = None
        if self._journal_full and all(j.pending_bytes <= j.max_queue_bytes // 2 for j in self.journals):
            self._journal_full = False
            self.write_cache_drained()

    def write_cache_drained(self) -> None:
        """A checkpoint ended (flushed or not), or the journals took their queues: the
        waiting adds try again, oldest first, through every check an add passes (a
        bookie read-only by now refuses them)."""
        waiting, self._throttled = self._throttled, deque()
        self._draining = True
        try:
            while waiting:
                deadline, args, kwargs = waiting.popleft()
                self.add_entry(*args, **kwargs)
                if self._throttled:  # full again: it and the rest keep their place and deadlines
                    self._throttled[0] = (deadline,) + self._throttled[0][1:]
                    self._throttled.extend(waiting)
                    break
        finally:
            self._draining = False
        self._arm_throttle_timer()

    # -- reads -----------------------------------------------------------------
    def get_entry(self, ledger_id: int, entry_id: int) -> bytes | None:
        return self._store(ledger_id).get_entry(ledger_id, entry_id)

    def _read(self, ledger_id: int, entry_id: int) -> tuple[int, bytes | None]:
        store = self._store(ledger_id)
        if not store.has_ledger(ledger_id):
            return RC.ENOLEDGER, None
        if entry_id == LAST_ADD_CONFIRMED:
            last = store.last_entry_id(ledger_id)
            if last is None:
                return RC.ENOENTRY, None
            entry_id = last
        try:
            body = store.get_entry(ledger_id, entry_id)
        except OSError as e:
            return _read_failed(ledger_id, entry_id, e)
        if body is None:
            return RC.ENOENTRY, None
        self.bytes_read += len(body)
        return RC.EOK, body

    def read_bodies(self, ledger_id: int, entry_ids: list[int]) -> list[ReadOutcome]:
        """``_read(ledger_id, e)`` of each of ``entry_ids``, in their order, with one
        :meth:`EntryStore.get_entries` (one index transaction, coalesced preads), without a
        tuple per entry (a run of plain reads, the hot path): each entry's bytes where it was
        read (EOK), else the rc (an int) it failed with."""
        store = self._store(ledger_id)
        if not store.has_ledger(ledger_id):
            return [RC.ENOLEDGER] * len(entry_ids)
        if LAST_ADD_CONFIRMED in entry_ids:
            last = store.last_entry_id(ledger_id)
            last = -1 if last is None else last  # no entries: ENOENTRY, as _read
            entry_ids = [last if e == LAST_ADD_CONFIRMED else e for e in entry_ids]
        got = store.get_entries(ledger_id, entry_ids)
        try:  # every entry read (the common case): no loop in Python
            self.bytes_read += sum(map(len, got))
        except TypeError:  # one is missing (None) or failed (an OSError): answered with an rc
            got = [
                body
                if body.__class__ is bytes or not (body is None or isinstance(body, OSError))
                else _read_failed(ledger_id, entry_id, body)[0]
                for entry_id, body in zip(entry_ids, got)
            ]
            self.bytes_read += sum([len(body) for body in got if not isinstance(body, int)])
        return got

    def read_entry(self, ledger_id: int, entry_id: int, callback) -> None:
        rc, body = self._read(ledger_id, entry_id)
        callback(rc, body)

    def fence_and_read(self, ledger_id: int, entry_id: int, master_key: bytes | None, callback) -> None:
        """A fencing read: persist the fence, then answer the read."""
        self._fence(
            ledger_id,
            master_key,
            lambda rc: callback(*(self._read(ledger_id, entry_id) if rc == RC.EOK else (rc, None))),
        )

    def _fence(self, ledger_id: int, master_key: bytes | None, then: Callable[[int], None]) -> None:
        if master_key is None:
            then(RC.EUA)
            return
        rc = self._check_key(ledger_id, master_key)
        if rc != RC.EOK:
            then(rc)
            return
        waiting = self._fencing.get(ledger_id)
        if waiting is not None:  # a fence record for this ledger is on its way to disk
            waiting.append(then)
            return
        store = self._store(ledger_id)
        if not store.set_fenced(ledger_id):  # already fenced (and persisted)
            then(RC.EOK)
            return
        waiting = self._fencing[ledger_id] = [then]

        def persisted(error):
            callbacks = self._fencing.pop(ledger_id, [])
            rc = RC.EOK if error is None else RC.EIO
            if error is not None:
                self.journal_failed(self._journal(ledger_id), error)
            for cb in callbacks:
                cb(rc)

        try:
            self._journal(ledger_id).append(FenceRecord(ledger_id), persisted)
        except (JournalFull, JournalUnavailable) as e:
            # the fence holds in memory; without a durable record we must not say EOK
            log.error("fence record for ledger %d not journaled: %s", ledger_id, e)
            self._fencing.pop(ledger_id, None)
            for cb in waiting:
                cb(RC.EIO)

    def batch_read(
        self,
        ledger_id: int,
        start: int,
        max_count: int,
        max_size: int,
        callback,
        *,
        fence_key: bytes | None = None,
        fencing: bool = False,
    ) -> None:
        """A BATCH_READ_ENTRY: ``callback(rc, entries)`` (:meth:`batch_entries`), after the
        fence is persisted for a fencing one."""

        def read(rc: int = RC.EOK) -> None:
            if rc != RC.EOK:
                callback(rc, [])
                return
            callback(*self.batch_entries(ledger_id, start, max_count, max_size))

        if fencing:
            self._fence(ledger_id, fence_key, read)
        else:
            read()

    def batch_entries(self, ledger_id: int, start: int, max_count: int, max_size: int) -> BatchRead:
        """The entries of a BATCH_READ_ENTRY of ``ledger_id`` from ``start`` (Java's
        BatchedReadEntryProcessor): ``start`` as :meth:`_read` reads it (its rc when it is
        not EOK), then the ones after it while they are stored and readable, at most
        ``max_count`` in all (<= 0: no limit), within ``max_size`` bytes of answer (capped at
        Java's maxBatchReadSize and the frame size; the first is given even past it).  The
        store is asked with :meth:`EntryStore.get_entries` (one index transaction,
        coalesced preads), a few entries at first, more per call while the batch goes on
        (entries past the last one stored are asked for too: they end the batch)."""
        budget = min(max_size, MAX_BATCH_READ_SIZE, self.max_frame_size) - BATCH_RESPONSE_OVERHEAD
        want = max_count if max_count > 0 else 1 << 62
        if start < 0:  # -1 is the highest stored entry, and the next one asked is then 0
            rc, first = self._read(ledger_id, start)
            if rc != RC.EOK or first is None:
                return BatchRead(rc, [])
            return BatchRead(
                RC.EOK, self._batch_rest(ledger_id, [first], BATCH_ENTRY_OVERHEAD + len(first), start + 1, want, budget)
            )
        store = self._store(ledger_id)
        if not store.has_ledger(ledger_id):
            return BatchRead(RC.ENOLEDGER, [])
        entries: list[bytes] = []
        used = read = 0
        step = _BATCH_STEP
        entry_id = start
        while True:
            end = min(entry_id + step, start + want)
            try:
                got = store.get_entries(ledger_id, list(range(entry_id, end)))
            except OSError as e:  # the store failed as a whole: as get_entry after get_entry would
                if not entries:
                    return BatchRead(_read_failed(ledger_id, start, e)[0], [])
                self.bytes_read += read
                return BatchRead(RC.EOK, self._batch_rest(ledger_id, entries, used, entry_id, want, budget))
            for body in got:
                if body is None or isinstance(body, OSError):
                    if not entries:
                        return BatchRead(_read_failed(ledger_id, start, body)[0], [])
                    end = -1
                    break
                if entries and used + BATCH_ENTRY_OVERHEAD + len(body) > budget:
                    end = -1
                    break
                entries.append(body)
                used += BATCH_ENTRY_OVERHEAD + len(body)
                read += len(body)
            if end < 0 or end >= start + want:
                break
            entry_id = end
            step = min(step * 2, _BATCH_STEP_MAX)
        self.bytes_read += read
        return BatchRead(RC.EOK, entries)

    def _batch_rest(
        self, ledger_id: int, entries: list[bytes], used: int, entry_id: int, want: int, budget: int
    ) -> list[bytes]:
        """:meth:`batch_entries`' ``entries`` (of ``used`` bytes in the answer) followed by
        those from ``entry_id`` on, read one at a time."""
        store = self._store(ledger_id)
        while len(entries) < want:
            try:
                body = store.get_entry(ledger_id, entry_id)
            except OSError:
                break
            if body is None or used + BATCH_ENTRY_OVERHEAD + len(body) > budget:
                break
            entries.append(body)
            used += BATCH_ENTRY_OVERHEAD + len(body)
            self.bytes_read += len(body)
            entry_id += 1
        return entries

    # -- LAC -------------------------------------------------------------------
    def lac(self, ledger_id: int) -> int:
        """The highest LAC this bookie has seen for the ledger (piggybacked or explicit)."""
        known = self._lac.get(ledger_id)
        if known is not None:
            return known
        store = self._store(ledger_id)
        lac = -1
        last = store.last_entry_id(ledger_id)
        if last is not None:
            try:
                body = store.get_entry(ledger_id, last)
            except OSError:
                body = None
            if body is not None:
                lac = lac_of_entry(body)
        explicit = store.get_explicit_lac(ledger_id)
        if explicit is not None:
            lac = max(lac, _lac_of_body(explicit))
        if store.has_ledger(ledger_id):
            self._lac[ledger_id] = lac
        return lac

    def _raise_lac(self, ledger_id: int, lac: int) -> None:
        current = self._lac.get(ledger_id)
        if current is None:
            current = self.lac(ledger_id)
        if lac > current:
            self._lac[ledger_id] = lac
            waiters = self._lac_waiters.pop(ledger_id, None)
            if waiters:
                for previous, cb, timer in waiters:
                    if lac > previous:
                        if timer.active():
                            timer.cancel()
                        cb(RC.EOK, lac)
                    else:
                        self._lac_waiters.setdefault(ledger_id, []).append((previous, cb, timer))

    def wait_lac(self, ledger_id: int, previous: int, timeout_ms: int, callback) -> Callable[[], None] | None:
        """Long poll: answer once the LAC passes ``previous``, or at the timeout with the LAC known then.
        Returns what forgets the poll unanswered (its connection is gone), or None when it was answered now."""
        if not self._store(ledger_id).has_ledger(ledger_id):
            callback(RC.ENOLEDGER, -1)
            return None
        lac = self.lac(ledger_id)
        if lac > previous or timeout_ms <= 0:
            callback(RC.EOK, lac)
            return None
        waiters = self._lac_waiters.setdefault(ledger_id, [])

        def forget() -> bool:
            pending = self._lac_waiters.get(ledger_id, [])
            for i, item in enumerate(pending):
                if item[2] is timer:
                    del pending[i]
                    break
            else:
                return False
            if not pending:
                self._lac_waiters.pop(ledger_id, None)
            return True

        def expire():
            forget()
            callback(RC.EOK, self.lac(ledger_id))

        def cancel() -> None:
            if forget() and timer.active():
                timer.cancel()

        timer = self.clock.callLater(timeout_ms / 1000.0, expire)
        waiters.append((previous, callback, timer))
        return cancel

    def long_polls(self, ledger_id: int) -> int:
        """How many long polls (:meth:`wait_lac`) of ``ledger_id`` wait for its LAC now."""
        return len(self._lac_waiters.get(ledger_id, ()))

    def polled_ledgers(self) -> set[int]:
        """The ledgers a long poll waits on now (tailing readers): each is kept, with a timer
        per poll, until the poll is answered, times out or its connection goes."""
        return set(self._lac_waiters)

    def read_lac(self, ledger_id: int) -> tuple[int, bytes | None, bytes | None]:
        store = self._store(ledger_id)
        explicit = store.get_explicit_lac(ledger_id)
        rc, last = self._read(ledger_id, LAST_ADD_CONFIRMED)
        if explicit is None and rc != RC.EOK:
            # Java answers ENOENTRY here even for a ledger it has never seen (vectors, v3-flow 5)
            return (RC.EIO if rc == RC.EIO else RC.ENOENTRY), None, None
        return RC.EOK, explicit, last if rc == RC.EOK else None

    def write_lac(
        self, ledger_id: int, lac: int, master_key: bytes, body: bytes, callback, *, high_priority: bool = False
    ) -> None:
        if self.readonly and not (high_priority and self.allow_high_priority_writes):
            callback(RC.EREADONLY)
            return
        rc = self._check_key(ledger_id, master_key)
        if rc != RC.EOK:
            callback(rc)
            return
        self._store(ledger_id).set_explicit_lac(ledger_id, bytes(body))
        journal = self._journal(ledger_id)

        def written(error):
            callback(RC.EOK if error is None else RC.EIO)

        try:
            journal.append(ExplicitLacRecord(ledger_id, bytes(body)), written)
        except JournalFull:
            callback(RC.ETOOMANYREQUESTS)
            return
        except JournalUnavailable:
            callback(RC.EIO)
            return
        self._raise_lac(ledger_id, lac)

    def force_ledger(self, ledger_id: int, callback) -> None:
        try:
            self._journal(ledger_id).force(lambda error: callback(RC.EOK if error is None else RC.EIO))
        except JournalUnavailable:
            callback(RC.EIO)

    # -- info ------------------------------------------------------------------
    def disk_space(self) -> tuple[int, int]:
        """(total, free) bytes over the distinct filesystems of the ledger directories."""
        seen = set()
        total = free = 0
        for store in self.stores:
            st = os.statvfs(store.directory)
            if st.f_fsid in seen:
                continue
            seen.add(st.f_fsid)
            total += st.f_blocks * st.f_frsize
            free += st.f_bavail * st.f_frsize
        return total, free

    def entry_availability(self, ledger_id: int) -> tuple[int, bytes | None]:
        """GET_LIST_OF_ENTRIES_OF_LEDGER: runs of stored entry ids, one group per run."""
        store = self._store(ledger_id)
        if not store.has_ledger(ledger_id):
            return RC.ENOLEDGER, None
        # from the stored ids: walking 0..last took as long as the highest id (2^63 at worst)
        return RC.EOK, encode_availability(store.entry_ids(ledger_id))


class _Durable:
    """The journal callback of an add: EOK once durable, else EIO (and the
    bookie goes read-only). A slotted object rather than a closure: one
    object per add waiting for its fsync."""

    __slots__ = ("bookie", "journal", "callback")

    def __init__(self, bookie: Bookie, journal, callback: Callable[[int], None]):
        self.bookie = bookie
        self.journal = journal
        self.callback = callback

    def __call__(self, error: BaseException | None) -> None:
        if error is None:
            self.callback(RC.EOK)
        else:
            self.callback(RC.EIO)
            self.bookie.journal_failed(self.journal, error)


def _ignore(error) -> None:
    if error is not None:
        log.error("journal write failed: %s", error)


def _read_failed(ledger_id: int, entry_id: int, e: OSError | None) -> tuple[int, None]:
    """A read the store failed with ``e`` (logged, answered EIO), or found nothing for (None: ENOENTRY)."""
    if e is None:
        return RC.ENOENTRY, None
    if isinstance(e, EntryCorrupted):
        log.error("%s", e)
    else:
        log.error("reading entry %d/%d: %s", ledger_id, entry_id, e)
    return RC.EIO, None
