"""The journal's on-disk format: its records, its files and the checkpoint mark,
read back by replay (:meth:`bkctl.bookied.journal.Journal.replay`) and ``bkctl``'s
journal inspection; :mod:`bkctl.bookied.journal` writes them.


On-disk format (ours, not Java's; version 1)
--------------------------------------------
Files live in ``D/current/`` and are named ``<16 lowercase hex digits>.bjn``
after their id; ids only grow (a new file gets max(existing ids, checkpoint
file id) + 1). Each file starts with a 64-byte header::

    0  4s  magic "BKDJ"
    4  u32 format version (1)
    8  u64 file id
    16 u64 creation time, ms since the epoch
    24 u32 CRC32C of bytes 0..24
    28 zero padding up to 64

then records, back to back (all integers big-endian)::

    u32 crc     CRC32C of everything after this field (len .. end of body)
    u32 len     number of bytes after this field (type byte + body)
    u8  type    1 entry, 2 master key, 3 fence, 4 explicit LAC
    i64 ledgerId
    body        entry:        i64 entryId | packaged entry bytes
                master key:   key bytes
                fence:        nothing
                explicit LAC: LAC body bytes

Files are preallocated with ``posix_fallocate`` (``preallocate_mb`` at a
time), and with ``zero_ahead_mb`` zeros are written into that space ahead of
the records (:mod:`bkctl.bookied.journal_zeros`), so the tail of a file
is normally zeros, read from fallocated blocks or written ones alike; a zero
``len`` ends it (a crash while zeros were written leaves zeros too). A file
rolls to the next id once adding a group would take it past ``max_size_mb``
(a group is split at record boundaries; a single record larger than the limit
gets a file to itself). The checkpoint mark is ``D/current/bookied.lastmark``:
``"BKDM" | u32 version 1 | u64 file id | u64 offset | u32 CRC32C`` (28 bytes).

Replay and damaged files
------------------------
A file is written strictly sequentially and a record is acknowledged only
after the fsync that covers it *and everything before it*. So in any file,
replay stops at the first record that is incomplete, has a bad length or a
bad checksum: whatever follows was never acknowledged (a torn write may have
persisted later sectors of the last group but not earlier ones), unless the
medium corrupted acknowledged data in place, which no replay can repair.
Replay logs a warning (logger ``bkctl.bookied.journal``) giving the file, the offset
and how many non-zero bytes it discards, never raises for it, and goes on with
the next file. With ``repair=True`` (the default) the LAST file -- the one a
crash can tear -- is also truncated physically at that offset, so the next
replay is clean; damage in older files is reported but left in place. A
corrupt or unreadable checkpoint mark file is logged and replay starts from
the oldest journal file (safe, since re-applying records is idempotent).
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import re
import struct
import time
from collections.abc import Iterator
from typing import NamedTuple

from crc32c import crc32c

from bkctl.wire.bookie_disk import layout
from bkctl.wire.bookie_disk.records import encode_journal_entry

log = logging.getLogger("bookied.journal")

FORMAT_VERSION = 1
FILE_MAGIC = b"BKDJ"
MARK_MAGIC = b"BKDM"
HEADER_SIZE = 64
FILE_SUFFIX = ".bjn"
MARK_FILE = "bookied.lastmark"
#: Largest record body accepted (and believed when replaying).
MAX_RECORD_BYTES = 256 * 1024 * 1024

T_ENTRY = 1
T_MASTER_KEY = 2
T_FENCE = 3
T_EXPLICIT_LAC = 4

_FILE_HEADER = struct.Struct(">4sIQQ")  # 24 bytes, then u32 crc
_MARK = struct.Struct(">4sIQQ")  # 24 bytes, then u32 crc
_U32 = struct.Struct(">I")
_CRC_LEN = struct.Struct(">II")
_HEAD = struct.Struct(">IBq")  # len, type, ledger
_LEDGER_ENTRY = struct.Struct(">qq")
_I64 = struct.Struct(">q")
_NAME_RE = re.compile(r"^([0-9a-f]{16})" + re.escape(FILE_SUFFIX) + "$")
_ZEROS = bytes(1 << 20)


# ---------------------------------------------------------------- records
class EntryRecord(NamedTuple):
    """An added entry: ``data`` is the packaged entry exactly as received."""

    ledger_id: int
    entry_id: int
    data: bytes


class MasterKeyRecord(NamedTuple):
    """The master key stored for a ledger (first add, or WRITE_LAC/fencing read on a new ledger)."""

    ledger_id: int
    key: bytes


class FenceRecord(NamedTuple):
    ledger_id: int


class ExplicitLacRecord(NamedTuple):
    """The explicit LAC payload of WRITE_LAC (``ledgerId | lac | digest``)."""

    ledger_id: int
    body: bytes


Record = EntryRecord | MasterKeyRecord | FenceRecord | ExplicitLacRecord


class LogMark(NamedTuple):
    """A position in the journal: file id and byte offset in that file. Ordered as a tuple."""

    file_id: int
    offset: int


def encode_record(rec: Record) -> bytes:
    """The on-disk bytes of one record (checksum included)."""
    if isinstance(rec, EntryRecord):
        return encode_entry(rec.ledger_id, rec.entry_id, rec.data)
    if isinstance(rec, MasterKeyRecord):
        typ, body = T_MASTER_KEY, rec.key
    elif isinstance(rec, FenceRecord):
        typ, body = T_FENCE, b""
    elif isinstance(rec, ExplicitLacRecord):
        typ, body = T_EXPLICIT_LAC, rec.body
    else:
        raise TypeError(f"not a journal record: {rec!r}")
    head = _HEAD.pack(len(body) + 9, typ, rec.ledger_id)
    return _U32.pack(crc32c(body, crc32c(head))) + head + body


def encode_entry(ledger_id: int, entry_id: int, data: bytes) -> bytes:
    """The record of an added entry (:func:`~bkctl.wire.bookie_disk.records.encode_journal_entry`,
    whose twins write a run of them: :meth:`~bkctl.bookied.journal.Journal.append_entries`)."""
    return encode_journal_entry(ledger_id, entry_id, data, T_ENTRY)


def _decode_body(typ: int, buf, start: int, end: int) -> Record | None:
    """Decode a checksummed record whose type byte is at ``start``; None for an unknown type."""
    ledger_id = _I64.unpack_from(buf, start + 1)[0]
    if typ == T_ENTRY:
        if end - start < 17:
            return None
        entry_id = _I64.unpack_from(buf, start + 9)[0]
        return EntryRecord(ledger_id, entry_id, bytes(buf[start + 17 : end]))
    if typ == T_MASTER_KEY:
        return MasterKeyRecord(ledger_id, bytes(buf[start + 9 : end]))
    if typ == T_FENCE:
        return FenceRecord(ledger_id)
    if typ == T_EXPLICIT_LAC:
        return ExplicitLacRecord(ledger_id, bytes(buf[start + 9 : end]))
    return None


# ---------------------------------------------------------------- file helpers
def file_name(file_id: int) -> str:
    return f"{file_id:016x}{FILE_SUFFIX}"


def list_file_ids(directory: str) -> list[int]:
    """Ids of the journal files in ``directory`` (a ``current/`` dir), ascending."""
    ids = []
    for name in os.listdir(directory):
        m = _NAME_RE.match(name)
        if m:
            ids.append(int(m.group(1), 16))
    ids.sort()
    return ids


def encode_header(file_id: int) -> bytes:
    head = _FILE_HEADER.pack(FILE_MAGIC, FORMAT_VERSION, file_id, int(time.time() * 1000))
    return (head + _U32.pack(crc32c(head))).ljust(HEADER_SIZE, b"\0")


def _check_header(buf, file_id: int | None) -> str | None:
    """Problem with a file header, or None."""
    if len(buf) < HEADER_SIZE:
        return f"incomplete header ({len(buf)} bytes)"
    magic, version, fid, _ms = _FILE_HEADER.unpack_from(buf, 0)
    if magic != FILE_MAGIC:
        return f"bad magic {bytes(magic)!r}"
    if _U32.unpack_from(buf, 24)[0] != crc32c(buf[:24]):
        return "bad header checksum"
    if version != FORMAT_VERSION:
        return f"unsupported format version {version}"
    if file_id is not None and fid != file_id:
        return f"header says file id {fid:x}"
    return None


class FileScan:
    """Outcome of scanning one journal file (filled in as ``scan_file`` runs)."""

    def __init__(self, path: str):
        self.path = path
        self.records = 0
        self.end = 0  # offset just past the last good record
        self.size = 0  # file size
        self.problem: str | None = None  # why the scan stopped early (None: clean end)
        self.discarded_nonzero = 0  # non-zero bytes after ``end``
        self.unknown_records = 0


def _nonzero_count(view, start: int, end: int) -> int:
    n = 0
    pos = start
    while pos < end:
        stop = min(end, pos + len(_ZEROS))
        chunk = view[pos:stop]
        if chunk != _ZEROS[: stop - pos]:
            n += (stop - pos) - bytes(chunk).count(0)
        pos = stop
    return n


def scan_file(path: str, start: int = 0, scan: FileScan | None = None) -> Iterator[tuple[int, Record]]:
    """Yield ``(offset, record)`` for the good records of one journal file from ``start``.

    Stops at the first bad record or at the zero tail. Never raises for damaged
    content; the outcome is left in ``scan`` (a :class:`FileScan`).
    """
    if scan is None:
        scan = FileScan(path)
    m = _NAME_RE.match(os.path.basename(path))
    file_id = int(m.group(1), 16) if m else None
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        scan.size = size
        if size == 0:
            scan.problem = "empty file"
            return
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    view = memoryview(mm)
    try:
        problem = _check_header(view[:HEADER_SIZE], file_id)
        if problem:
            scan.problem = problem
            scan.end = 0
            scan.discarded_nonzero = _nonzero_count(view, 0, size)
            return
        pos = max(start, HEADER_SIZE)
        scan.end = pos
        unpack = _CRC_LEN.unpack_from
        while pos + 8 <= size:
            crc, ln = unpack(view, pos)
            if ln == 0 and crc == 0:
                break  # preallocated zeros: the end (checked below)
            body_end = pos + 8 + ln
            if ln < 9 or ln > MAX_RECORD_BYTES + 17:
                scan.problem = f"bad record length {ln} at offset {pos}"
                break
            if body_end > size:
                scan.problem = f"record at offset {pos} runs past the end of the file"
                break
            if crc32c(view[pos + 4 : body_end]) != crc:
                scan.problem = f"bad checksum at offset {pos}"
                break
            typ = view[pos + 8]
            rec = _decode_body(typ, view, pos + 8, body_end)
            if rec is None:
                scan.unknown_records += 1
                log.warning("%s: skipping record of unknown type %d at offset %d", path, typ, pos)
            else:
                scan.records += 1
                scan.end = body_end
                yield pos, rec
            pos = body_end
            scan.end = pos
        if scan.problem is None and pos < size:
            tail = _nonzero_count(view, pos, size)
            if tail:
                scan.problem = f"garbage after the last good record at offset {pos}"
        if scan.problem is not None:
            scan.discarded_nonzero = _nonzero_count(view, scan.end, size)
    finally:
        view.release()
        mm.close()


# ---------------------------------------------------------------- mark file
def read_mark_file(directory: str) -> LogMark | None:
    """The checkpoint mark stored in ``directory`` (a ``current/`` dir), None if absent.

    Raises ValueError if the file is damaged.
    """
    path = os.path.join(directory, MARK_FILE)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    if len(raw) != _MARK.size + 4:
        raise ValueError(f"{path}: {len(raw)} bytes, expected {_MARK.size + 4}")
    magic, version, file_id, offset = _MARK.unpack_from(raw, 0)
    if magic != MARK_MAGIC or _U32.unpack_from(raw, _MARK.size)[0] != crc32c(raw[: _MARK.size]):
        raise ValueError(f"{path}: bad magic or checksum")
    if version != FORMAT_VERSION:
        raise ValueError(f"{path}: unsupported version {version}")
    return LogMark(file_id, offset)


def write_mark_file(directory: str, mark: LogMark) -> None:
    """Store ``mark``: a new file renamed over the old one; on a disk with no room left for the new
    file (ENOSPC), the old one is overwritten in place instead (its bytes are already allocated, and
    only a checkpoint lets the journal give the disk back).  A write torn by a crash then leaves a
    mark whose checksum fails, which replay treats as no mark: it replays from the oldest file, more
    than needed, never less."""
    raw = _MARK.pack(MARK_MAGIC, FORMAT_VERSION, mark.file_id, mark.offset)
    data = raw + _U32.pack(crc32c(raw))
    path = os.path.join(directory, MARK_FILE)
    try:
        layout.atomic_write(path, data)
    except OSError as e:
        if e.errno != errno.ENOSPC or not os.path.isfile(path) or os.path.getsize(path) != len(data):
            raise
        fd = os.open(path, os.O_WRONLY)
        try:
            layout.write_all(fd, data, "the journal's mark")
            os.fsync(fd)
        finally:
            os.close(fd)


def replay_files(directory: str, file_ids: list[int], from_mark: LogMark, *, repair: bool = True) -> Iterator[Record]:
    """The records of the journal files ``file_ids`` in ``directory`` from ``from_mark`` to the end, in
    order (:meth:`bkctl.bookied.journal.Journal.replay`); damaged data ends a file's replay with a
    warning (see the module doc), and with ``repair`` the last file is truncated after its last good
    record, or removed when a crash while creating it left it without any."""
    ids = [i for i in file_ids if i >= from_mark.file_id]
    for n, fid in enumerate(ids):
        path = os.path.join(directory, file_name(fid))
        start = from_mark.offset if fid == from_mark.file_id else 0
        scan = FileScan(path)
        for _off, rec in scan_file(path, start, scan):
            yield rec
        if scan.problem is None:
            continue
        is_last = n == len(ids) - 1
        if (
            is_last
            and repair
            and scan.end < HEADER_SIZE
            and (scan.size < HEADER_SIZE + 9 or scan.discarded_nonzero == 0)
        ):
            # a crash while the file was being created: it cannot hold any record
            log.warning("journal %s: %s and no records; removing it", path, scan.problem)
            os.unlink(path)
            layout.fsync_dir(directory)
            continue
        repaired = is_last and repair and scan.end >= HEADER_SIZE
        log.warning(
            "journal %s: %s; replay of this file stops at offset %d, discarding %d non-zero byte(s) after it%s",
            path,
            scan.problem,
            scan.end,
            scan.discarded_nonzero,
            " (truncated)" if repaired else "",
        )
        if repaired:
            _truncate(path, scan.end)


def _truncate(path: str, size: int) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)
