"""Entry logs (Java's EntryLogger): append-only files of records, read back by offset.

Format (ours; version 1), ``D/current/<16 hex digits>.bel``: a 64-byte header::

    0 4s "BKDE" | 4 u32 version (1) | 8 u64 log id | 16 u64 creation ms |
    24 u32 CRC32C of bytes 0..24 | zero padding to 64

then records (big-endian)::

    u32 crc (CRC32C of the rest) | u32 len (16 + data length) |
    i64 ledgerId | i64 entryId | data (the packaged entry)

A compacted log is an ordinary log: compaction copies live records into a new
log with the same record format, so readers and ``bkctl bookie inspect`` need
no second parser.

:class:`EntryLogger` owns the directory's log ids, the read fds and file
creation/removal; a :class:`LogWriter` is one stream of appends (the
checkpoint's, or compaction's) that rolls to a new log at ``log_size_limit``.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import re
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from crc32c import crc32c

from bkctl.wire.bookie_disk import layout
from bkctl.wire.bookie_disk.records import KEY, LOC, START, encode_log_record, log_record_data  # noqa: F401 (its users' import)
from bkctl.wire.fastpath import Twins

from .errors import EntryCorrupted

log = logging.getLogger("bookied.entrystore")

FORMAT_VERSION = 1
LOG_MAGIC = b"BKDE"
LOG_HEADER_SIZE = 64
LOG_SUFFIX = ".bel"
MAX_LOG_SIZE = 3 * 1024**3  # offsets are u32 in the index

_LOG_HEADER = struct.Struct(">4sIQQ")
_U32 = struct.Struct(">I")
_CRC_LEN = struct.Struct(">II")
_LOG_NAME_RE = re.compile(r"^([0-9a-f]{16})" + re.escape(LOG_SUFFIX) + "$")

#: appends are written to the file in chunks of about this size: small enough that
#: building one (in C, the GIL held) and joining its parts take a fraction of a
#: millisecond, which a live add waits at most when it arrives during a flush
_WRITE_CHUNK = 256 * 1024
#: :meth:`EntryLogger.read_records` reads records of one entry log with one pread when
#: they lie within this span and at most this many bytes apart
READ_SPAN_MAX = 1024 * 1024
READ_GAP_MAX = 64 * 1024


def log_name(log_id: int) -> str:
    return f"{log_id:016x}{LOG_SUFFIX}"


def encode_log_header(log_id: int) -> bytes:
    head = _LOG_HEADER.pack(LOG_MAGIC, FORMAT_VERSION, log_id, int(time.time() * 1000))
    return (head + _U32.pack(crc32c(head))).ljust(LOG_HEADER_SIZE, b"\0")


class Placed(NamedTuple):
    """Entries of one ledger that an append wrote back to back into one entry log:
    ``entry_ids`` (in the order given), and ``offsets``, where each one's record starts
    and, last, where the last one ends (a big-endian u32 each, ``START``: one more than
    the entries).  Packed, not a row per entry: the index stores them a run at a time."""

    ledger_id: int
    log_id: int
    entry_ids: list[int]
    offsets: bytes

    def locations(self) -> list[tuple[int, int, int, int]]:
        """``(entry id, log id, offset, length)`` of each entry."""
        offs = struct.unpack(f">{len(self.entry_ids) + 1}I", self.offsets)
        log_id = self.log_id
        return [(eid, log_id, offs[j], offs[j + 1] - offs[j]) for j, eid in enumerate(self.entry_ids)]

    def rows(self) -> list[tuple[bytes, bytes]]:
        """The index rows ``(KEY bytes, LOC bytes)`` of its entries, in order."""
        key, loc, lid = KEY.pack, LOC.pack, self.ledger_id
        return [(key(lid, eid), loc(log_id, off, length)) for eid, log_id, off, length in self.locations()]


class DamagedRecord(NamedTuple):
    """Bytes of an entry log that are not a valid record: ``offset`` where the bad record
    starts, ``length`` up to the next valid record (or the end scanned), and the ids its
    header claims (None when the header itself is not plausible)."""

    offset: int
    length: int
    ledger_id: int | None
    entry_id: int | None
    reason: str


def _valid_at(view, pos: int, size: int) -> bool:
    """A whole record at ``pos`` whose checksum verifies."""
    if pos + 24 > size:
        return False
    crc, ln = _CRC_LEN.unpack_from(view, pos)
    end = pos + 8 + ln
    return ln >= 16 and end <= size and crc32c(view[pos + 4 : end]) == crc


def scan_records(path: str, limit: int | None = None) -> Iterator[tuple[int, int, int, int, bytes] | DamagedRecord]:
    """Yield each record of an entry log up to ``limit`` bytes (its committed size; the
    whole file when None): ``(offset, length, ledger_id, entry_id, data)`` for a good one,
    a :class:`DamagedRecord` for bytes that are not one.

    Past a damaged record the scan goes on. It first trusts the record's length field,
    as Java's EntryLogger scan does (Java stops only when a size is impossible), but only
    when a valid record (or the end) follows: the length is under the checksum too, so a
    failed checksum may mean a damaged length. Otherwise it resynchronises on the next
    offset where a whole record verifies its CRC32C (a false match needs a 32-bit
    checksum collision on a plausible header). Length first: a record whose data rotted
    is skipped in one step and the next record is found without a byte-by-byte search.
    """
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if limit is not None:
            size = min(size, limit)
        if size < LOG_HEADER_SIZE:
            return
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    view = memoryview(mm)
    try:
        magic, version, _lid, _ms = _LOG_HEADER.unpack_from(view, 0)
        if magic != LOG_MAGIC or version != FORMAT_VERSION or _U32.unpack_from(view, 24)[0] != crc32c(view[:24]):
            log.warning("%s: bad entry log header", path)
            return
        pos = LOG_HEADER_SIZE
        while pos < size:
            if _valid_at(view, pos, size):
                ln = _CRC_LEN.unpack_from(view, pos)[1]
                ledger_id, entry_id = KEY.unpack_from(view, pos + 8)
                yield pos, 8 + ln, ledger_id, entry_id, bytes(view[pos + 24 : pos + 8 + ln])
                pos += 8 + ln
                continue
            damaged = _damaged(view, pos, size)
            yield damaged
            pos += damaged.length
    finally:
        view.release()
        mm.close()


def _damaged_length(view, pos: int, size: int) -> int:
    """Bytes from ``pos`` (not a valid record) to the next valid record or ``size``."""
    if pos + 24 <= size:
        ln = _CRC_LEN.unpack_from(view, pos)[1]
        end = pos + 8 + ln
        if ln >= 16 and (end == size or (end < size and _valid_at(view, end, size))):
            return end - pos
    nxt = pos + 1
    while nxt + 24 <= size and not _valid_at(view, nxt, size):
        nxt += 1
    return (nxt if nxt + 24 <= size else size) - pos


def _damaged(view, pos: int, size: int) -> DamagedRecord:
    length = _damaged_length(view, pos, size)
    if pos + 24 > size:
        return DamagedRecord(pos, length, None, None, f"{size - pos} bytes, too short for a record")
    _crc, ln = _CRC_LEN.unpack_from(view, pos)
    ledger_id, entry_id = KEY.unpack_from(view, pos + 8)
    plausible = ln >= 16 and pos + 8 + ln <= size and ledger_id >= 0 and entry_id >= -1
    why = "checksum mismatch" if plausible else f"impossible record length {ln}"
    return DamagedRecord(pos, length, ledger_id if plausible else None, entry_id if plausible else None, why)


def record_at(view, offset: int) -> bytes:
    """The whole record at ``offset`` of a mapped entry log, as its length field gives it (unchecked:
    :func:`check_record` checks it)."""
    _crc, ln = _CRC_LEN.unpack_from(view, offset)
    return bytes(view[offset : offset + 8 + ln])


def scan_log(path: str, limit: int | None = None):
    """Yield ``(offset, length, ledger_id, entry_id, data)`` for each good record of an entry
    log (:func:`scan_records` without the damaged ones)."""
    for rec in scan_records(path, limit):
        if type(rec) is not DamagedRecord:
            yield rec


def check_record(data: bytes, ledger_id: int, entry_id: int, log_id: int, offset: int, length: int) -> bytes:
    """The entry in the record ``data`` read at the index row (``log_id``, ``offset``,
    ``length``: a Location's fields); EntryCorrupted if it is short, fails its
    checksum or holds another entry."""
    if len(data) != length or length < 24:
        raise EntryCorrupted(f"entry {ledger_id}/{entry_id}: short read in {log_name(log_id)}")
    entry = log_record_data(data, ledger_id, entry_id)
    if entry is None:
        raise EntryCorrupted(f"entry {ledger_id}/{entry_id}: bad record at {log_name(log_id)}:{offset}")
    return entry


class EntryLogger:
    """The entry logs of one directory: ids, creation, read fds, removal.

    ``on_grow()`` is called (in the creating thread) when a new log is created.
    """

    def __init__(
        self,
        directory: str,
        log_size_limit: int,
        next_log: int = 1,
        on_grow: Callable[[], None] | None = None,
        *,
        twins: Twins,
    ):
        #: the records' codecs (C or Python, :mod:`bkctl.wire.bookie_disk.records`): the C
        #: ones make their checksums and copies without the GIL, so that a checkpoint leaves
        #: the reactor thread its core
        self.records = twins.records
        self.directory = directory
        self.log_size_limit = min(MAX_LOG_SIZE, max(LOG_HEADER_SIZE + 1, int(log_size_limit)))
        self.next_log = next_log
        self._on_grow = on_grow
        self._id_lock = threading.Lock()
        self._files_lock = threading.Lock()  # read fds
        self.readers: dict[int, int] = {}  # log id -> read fd (pread under _files_lock)

    def path(self, log_id: int) -> str:
        return os.path.join(self.directory, log_name(log_id))

    def on_disk(self) -> dict[int, str]:
        """log id -> path of every entry log file in the directory."""
        return self.logs_in(self.directory)

    @staticmethod
    def logs_in(directory: str) -> dict[int, str]:
        """log id -> path of every entry log file in ``directory`` (a ``current/``)."""
        found = {}
        for name in os.listdir(directory):
            m = _LOG_NAME_RE.match(name)
            if m:
                found[int(m.group(1), 16)] = os.path.join(directory, name)
        return found

    def create(self) -> tuple[int, int]:
        """A new, empty log (header written and durable): ``(log id, write fd)``."""
        with self._id_lock:
            log_id = self.next_log
            self.next_log += 1
        fd = os.open(self.path(log_id), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            layout.write_all(fd, encode_log_header(log_id), "an entry log")
            os.fsync(fd)
            layout.fsync_dir(self.directory)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):  # (ENOSPC): not left for the next open to remove
                os.unlink(self.path(log_id))
            raise
        if self._on_grow is not None:
            self._on_grow()
        return log_id, fd

    def open_reader(self, log_id: int) -> int | None:
        """A read fd of the entry log, kept in ``readers``; None if the log is gone (compacted
        or deleted after the index row was read). Call with ``_files_lock`` held."""
        try:
            fd = os.open(self.path(log_id), os.O_RDONLY)
        except FileNotFoundError:
            return None
        self.readers[log_id] = fd
        return fd

    def pread(self, log_id: int, length: int, offset: int) -> bytes | None:
        """``length`` bytes at ``offset`` of the log; None if the log is gone."""
        with self._files_lock:
            fd = self.readers.get(log_id)
            if fd is None:
                fd = self.open_reader(log_id)
                if fd is None:
                    return None
            return os.pread(fd, length, offset)

    def read_records(self, rows: list, ledger_id: int, entry_ids: list[int], out: list) -> list[int]:
        """Read the records of one ledger's entries into ``out``: ``rows`` are their index rows
        ``(log id, offset, length, i)``, sorted, for ``entry_ids[i]`` whose bytes go to
        ``out[i]`` -- or the EntryCorrupted (OSError) of a record that fails its checks, or the
        OSError of a failed read.  Records of one log lying close together are read with one
        ``pread`` (at most :data:`READ_SPAN_MAX` bytes, skipping at most :data:`READ_GAP_MAX`
        bytes between records), each checked on its own.  Returns the ``i`` whose log is gone
        (compacted or deleted after the rows were read: look them up again)."""
        gone: list[int] = []
        n = len(rows)
        k = 0
        while k < n:
            log_id, start, length, _i = rows[k]
            end = k + 1
            stop = start + length
            most = start + READ_SPAN_MAX
            while end < n:
                nlog, noff, nlen, _ = rows[end]
                nstop = noff + nlen
                if nlog != log_id or noff - stop > READ_GAP_MAX or nstop > most:
                    break
                if nstop > stop:
                    stop = nstop
                end += 1
            try:
                span = self.pread(log_id, stop - start, start)
            except OSError as e:  # what a single read would raise, for these entries only
                for row in rows[k:end]:
                    out[row[3]] = e
                k = end
                continue
            if span is None:
                gone.extend(row[3] for row in rows[k:end])
                k = end
                continue
            take = self.records.span_records  # takes the records that pass, up to one that does not
            while k < end:
                k = take(span, start, rows, k, end, ledger_id, entry_ids, out)
                if k >= end:
                    break
                _, off, length, i = rows[k]  # check_record says why it did not pass
                pos = off - start
                try:
                    out[i] = check_record(span[pos : pos + length], ledger_id, entry_ids[i], log_id, off, length)
                except EntryCorrupted as e:
                    out[i] = e
                k += 1
        return gone

    def retire(self, log_id: int) -> None:
        with self._files_lock:
            fd = self.readers.pop(log_id, None)
            if fd is not None:
                os.close(fd)

    def unlink(self, log_ids: Iterable[int]) -> None:
        """Remove the logs (durably) and close their idle read fds."""
        removed = False
        for lid in log_ids:
            # unlink first so that no reader can reopen it, then close idle fds
            try:
                os.unlink(self.path(lid))
                removed = True
            except FileNotFoundError:
                pass
            self.retire(lid)
        if removed:
            layout.fsync_dir(self.directory)

    def cut_to_committed(self, log_ids: Iterable[int], committed: dict[int, int]) -> None:
        """Each of ``log_ids`` (0s ignored) cut back to its ``committed`` size, or removed when it
        has none (a failed flush's logs; errors logged: the next open does it then)."""
        gone = []
        for lid in {lid for lid in log_ids if lid}:
            size = committed.get(lid)
            if size is None:
                gone.append(lid)
                continue
            try:
                if os.path.getsize(self.path(lid)) > size:
                    os.truncate(self.path(lid), size)
            except OSError as e:
                log.error("%s: entry log %d not cut back to its committed size: %s", self.directory, lid, e)
        try:
            self.unlink(gone)
        except OSError as e:
            log.error("%s: entry logs %s not removed: %s", self.directory, gone, e)

    def close(self) -> None:
        with self._files_lock:
            for fd in self.readers.values():
                os.close(fd)
            self.readers.clear()


class LogWriter:
    """One stream of appends into the directory's entry logs; rolls at the logger's
    ``log_size_limit``. Not thread-safe: one thread appends at a time."""

    def __init__(self, logger: EntryLogger):
        self.logger = logger
        #: the record loop (``RecordTwins.log_records`` of :attr:`EntryLogger.records`)
        self.log_records = logger.records.log_records
        self.fd = -1
        self.log_id = 0  # 0: no log open (the next append creates one)
        self.offset = 0
        self.created: list[int] = []  # the logs this writer started

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            self.log_id = 0

    def _roll(self) -> None:
        self.close()
        self.log_id, self.fd = self.logger.create()
        self.created.append(self.log_id)
        self.offset = LOG_HEADER_SIZE

    def append(
        self, batches: Iterable[tuple[int, list[int], list[bytes]]], pause: Callable[[], None] | None = None
    ) -> tuple[list[Placed], dict]:
        """Append records (rolling as needed) and fdatasync what was written;
        ``pause()`` after each chunk written (a paced flush's, see ``FlushPace``).

        ``batches`` is ``[(ledger_id, entry_ids, bodies), ...]``. Returns ``(placed, added)``:
        where the entries went (a :class:`Placed` per ledger and log, in input order), and
        per log id ``[end offset, bytes added, entries added]``.
        """
        placed: list[Placed] = []
        added: dict[int, list[int]] = {}
        parts: list = []
        limit = self.logger.log_size_limit
        wlog = self.log_id if self.fd >= 0 else 0
        pos = written = self.offset  # end of queued data / end of data written to the file
        first = pos  # where this call started in the current log
        count = 0

        def write_out():
            nonlocal written
            if parts:
                layout.write_all(self.fd, b"".join(parts), "an entry log")
                if pause is not None:
                    pause()
                parts.clear()
                written = pos
                self.offset = pos

        def account():
            if wlog and pos > first:
                acc = added.setdefault(wlog, [0, 0, 0])
                acc[0] = pos
                acc[1] += pos - first
                acc[2] += count

        def roll():
            nonlocal wlog, pos, written, first, count
            write_out()
            account()
            if wlog:
                os.fdatasync(self.fd)
            self._roll()
            wlog = self.log_id
            pos = written = first = self.offset
            count = 0

        build = self.log_records
        end = START.pack
        try:
            for ledger_id, ids, bodies in batches:
                i = since = 0  # the next entry, the first of the ledger's in this log
                starts: list[bytes] = []
                while i < len(ids):
                    # the records from ids[i] on while they fit in the log and the write chunk
                    # has room (at least ids[i]'s, placed here)
                    if not wlog or (pos > LOG_HEADER_SIZE and pos + len(bodies[i]) + 24 > limit):
                        if starts:
                            placed.append(Placed(ledger_id, wlog, ids[since:i], b"".join(starts) + end(pos)))
                            starts, since = [], i
                        roll()
                    chunk, got = build(ledger_id, ids, bodies, i, pos, limit, _WRITE_CHUNK - (pos - written))
                    parts.append(chunk)
                    starts.append(got)
                    pos += len(chunk)
                    count += len(got) >> 2
                    i += len(got) >> 2
                    if pos - written >= _WRITE_CHUNK:
                        write_out()
                if starts:
                    placed.append(Placed(ledger_id, wlog, ids[since:] if since else ids, b"".join(starts) + end(pos)))
            write_out()
            account()
            if added:
                os.fdatasync(self.fd)
        except BaseException:
            # the file position is unknown now: stop using this log; bytes in it that no
            # committed index row covers are cut off at the next open
            self.close()
            raise
        return placed, added
