"""Apache BookKeeper's (Java) bookie files, read-only: journal ``.txn``, entry log ``.log``,
InterleavedLedgerStorage index ``.idx``, ``lastMark`` and ``lastId`` (BookKeeper's
bookie/JournalChannel.java, Journal.java, DefaultEntryLogger.java, FileInfo.java).

Pure decoders over bytes (a file's content or an mmap of it); no I/O.  Every
field is big-endian.  Used by ``bkctl bookie inspect`` and ``bookie check``;
bookied's own files have their own formats (``bkctl.bookied.journal`` and
``storage``).
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from bkctl.wire.codecs.varint import decode_at
from bkctl.wire.errors import CodecError

#: what the readers take: a file's bytes, or its map
Buffer = bytes | bytearray | memoryview | mmap.mmap

__all__ = [
    "IndexFile",
    "JournalRecord",
    "LogEntry",
    "index_relpath",
    "DbLedgerData",
    "parse_db_ledger_data",
    "parse_db_location",
    "parse_db_location_key",
    "parse_index",
    "parse_last_id",
    "parse_last_mark",
    "read_entry_at",
    "scan_entry_log",
    "scan_journal",
]

JOURNAL_MAGIC = b"BKLG"
ENTRY_LOG_MAGIC = b"BKLO"
INDEX_MAGIC = b"BKLE"
ENTRY_LOG_HEADER_SIZE = 1024
INDEX_HEADER_SIZE = 1024
JOURNAL_V5_HEADER_SIZE = 512
PADDING_MARK = -0x100  # i32 0xFFFFFF00
#: special entry ids in journal records
MASTER_KEY = -0x1000
FENCE = -0x2000
FORCE_LEDGER = -0x4000
EXPLICIT_LAC = -0x8000
SPECIAL_KINDS = {MASTER_KEY: "master_key", FENCE: "fence", FORCE_LEDGER: "force_ledger", EXPLICIT_LAC: "explicit_lac"}
#: ledgers-map records in an entry log carry these in the ledger/entry id fields
_LEDGERS_MAP_IDS = (-1, -2)

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_II = struct.Struct(">qq")
_MAX_RECORD = 256 * 1024 * 1024


class JournalRecord(NamedTuple):
    offset: int  # of the record's length field
    ledger_id: int
    entry_id: int  # negative for the special records
    kind: str  # entry, master_key, fence, explicit_lac, force_ledger, unknown
    data: bytes  # an entry: the packaged entry (header included); the master key; the LAC body


class LogEntry(NamedTuple):
    offset: int  # of the entry bytes (just past the size field): the location's offset
    ledger_id: int
    entry_id: int
    data: bytes  # the packaged entry, header included


class IndexFile(NamedTuple):
    version: int
    master_key: bytes
    fenced: bool
    explicit_lac: bytes | None
    locations: dict[int, tuple[int, int]]  # entry id -> (entry log id, offset)


def scan_journal(buf: Buffer) -> tuple[int, Iterator[JournalRecord]]:
    """``(format version, records)`` of a journal file; version 1 files have no header.

    Records stop at a zero length (the preallocated tail), at the end of the
    data, or at a record that runs past it.
    """
    view = memoryview(buf)
    version, pos = 1, 0
    if bytes(view[:4]) == JOURNAL_MAGIC:
        if len(view) < 8:
            raise CodecError("journal header is truncated")
        version = _I32.unpack_from(view, 4)[0]
        pos = JOURNAL_V5_HEADER_SIZE if version >= 5 else 8

    def records() -> Iterator[JournalRecord]:
        p = pos
        while p + 4 <= len(view):
            size = _I32.unpack_from(view, p)[0]
            if size == PADDING_MARK:
                if p + 8 > len(view):
                    return
                padding = _I32.unpack_from(view, p + 4)[0]
                if padding < 0:  # Java's scan cannot read it either: the records end here
                    return
                p += 8 + padding
                continue
            if size <= 0 or size > _MAX_RECORD or p + 4 + size > len(view) or size < 16:
                return
            ledger_id, entry_id = _II.unpack_from(view, p + 4)
            rest = bytes(view[p + 20 : p + 4 + size])
            if entry_id >= 0:
                kind, data = "entry", bytes(view[p + 4 : p + 4 + size])
            else:
                kind = SPECIAL_KINDS.get(entry_id, "unknown")
                data = rest
                if entry_id in (MASTER_KEY, EXPLICIT_LAC) and len(rest) >= 4:
                    n = _I32.unpack_from(rest, 0)[0]
                    data = rest[4 : 4 + n]
            yield JournalRecord(p, ledger_id, entry_id, kind, data)
            p += 4 + size

    return version, records()


def entry_log_header(buf: Buffer) -> tuple[int, int, int]:
    """``(header version, ledgers-map offset, ledgers count)`` of an entry log."""
    view = memoryview(buf)
    if len(view) < 20 or bytes(view[:4]) != ENTRY_LOG_MAGIC:
        raise CodecError("not a BookKeeper entry log (no BKLO header)")
    version = _I32.unpack_from(view, 4)[0]
    offset = _I64.unpack_from(view, 8)[0]
    count = _I32.unpack_from(view, 16)[0]
    return version, offset, count


def scan_entry_log(buf: Buffer) -> Iterator[LogEntry]:
    """The entries of an entry log, in file order; ledgers-map records are skipped, and
    (as Java's scanner) a size <= 0 is stepped over byte by byte."""
    view = memoryview(buf)
    entry_log_header(view)
    p = ENTRY_LOG_HEADER_SIZE
    while p + 4 <= len(view):
        size = _I32.unpack_from(view, p)[0]
        if size <= 0:
            p += 1
            continue
        if p + 4 + size > len(view) or size < 16:
            return
        ledger_id, entry_id = _II.unpack_from(view, p + 4)
        if ledger_id not in _LEDGERS_MAP_IDS:
            yield LogEntry(p + 4, ledger_id, entry_id, bytes(view[p + 4 : p + 4 + size]))
        p += 4 + size


def read_entry_at(buf: Buffer, offset: int) -> bytes:
    """The entry whose location offset is ``offset`` (its size field is just before it)."""
    view = memoryview(buf)
    if offset < ENTRY_LOG_HEADER_SIZE + 4 or offset > len(view):
        raise CodecError(f"offset {offset} is outside the entry log")
    size = _I32.unpack_from(view, offset - 4)[0]
    if size < 16 or offset + size > len(view):
        raise CodecError(f"no entry at offset {offset} (size field {size})")
    return bytes(view[offset : offset + size])


def index_relpath(ledger_id: int) -> str:
    """``xx/yy/<hex id>.idx`` below ``current/`` (no zero padding)."""
    return f"{(ledger_id >> 8) & 0xFF:x}/{ledger_id & 0xFF:x}/{ledger_id:x}.idx"


def parse_index(buf: Buffer) -> IndexFile:
    view = memoryview(buf)
    if len(view) < INDEX_HEADER_SIZE or bytes(view[:4]) != INDEX_MAGIC:
        raise CodecError("not a BookKeeper index file (no BKLE header)")
    version = _I32.unpack_from(view, 4)[0]
    key_len = _I32.unpack_from(view, 8)[0]
    if not 0 <= key_len <= INDEX_HEADER_SIZE - 20:
        raise CodecError(f"index file master key length {key_len} is out of range")
    pos = 12
    key = bytes(view[pos : pos + key_len])
    pos += key_len
    state = _I32.unpack_from(view, pos)[0]
    pos += 4
    lac = None
    if version >= 1:
        lac_len = _I32.unpack_from(view, pos)[0]
        if lac_len > 0:
            lac = bytes(view[pos + 4 : pos + 4 + lac_len])
    locations = {}
    for i, p in enumerate(range(INDEX_HEADER_SIZE, len(view) - 7, 8)):
        loc = _I64.unpack_from(view, p)[0]
        if loc:
            locations[i] = ((loc >> 32) & 0xFFFFFFFF, loc & 0xFFFFFFFF)
    return IndexFile(version, key, bool(state & 1), lac, locations)


def parse_last_mark(buf: Buffer) -> tuple[int, int]:
    """``(journal file id, byte offset)`` of a ``lastMark`` file."""
    if len(buf) < 16:
        raise CodecError(f"lastMark holds {len(buf)} bytes, not 16")
    file_id, offset = _II.unpack_from(buf, 0)
    return file_id, offset


def parse_last_id(buf: Buffer) -> int:
    """The last allocated entry log id of a ``lastId`` file (hex text)."""
    try:
        return int(bytes(buf).decode("ascii").strip(), 16)
    except (UnicodeDecodeError, ValueError):
        raise CodecError(f"lastId does not hold a hex number: {bytes(buf)[:32]!r}") from None


# -- DbLedgerStorage's RocksDB rows (the databases themselves are read by the caller) ----------


@dataclass
class DbLedgerData:
    """A ``ledgers`` database value of DbLedgerStorage (protobuf ``LedgerData``)."""

    exists: bool = False
    fenced: bool = False
    master_key: bytes = b""
    explicit_lac: bytes | None = None
    limbo: bool = False


#: LedgerData's fields: number -> (attribute, wire type)
_LEDGER_DATA = {1: ("exists", 0), 2: ("fenced", 0), 3: ("master_key", 2), 4: ("explicit_lac", 2), 5: ("limbo", 0)}


def parse_db_ledger_data(raw: bytes) -> DbLedgerData:
    """A ``ledgers`` database value: protobuf ``LedgerData`` {1 exists, 2 fenced, 3 masterKey,
    4 explicitLac, 5 limbo}; unknown fields are skipped, a known one of another wire type refused."""
    out = DbLedgerData()
    raw = bytes(raw)
    pos = 0
    try:
        while pos < len(raw):
            tag, pos = decode_at(raw, pos)
            field, wire = tag >> 3, tag & 7
            known = _LEDGER_DATA.get(field)
            if known is not None and known[1] != wire:
                raise CodecError(f"LedgerData field {field} has wire type {wire}")
            if wire == 0:
                value, pos = decode_at(raw, pos)
                if known is not None:
                    setattr(out, known[0], bool(value))
            elif wire == 2:
                n, pos = decode_at(raw, pos)
                if pos + n > len(raw):
                    raise CodecError("LedgerData field runs past the value")
                if known is not None:
                    setattr(out, known[0], raw[pos : pos + n])
                pos += n
            elif wire in (1, 5):
                pos += 8 if wire == 1 else 4
            else:
                raise CodecError(f"LedgerData has an unsupported wire type {wire}")
    except IndexError:
        raise CodecError("LedgerData is truncated") from None
    return out


def parse_db_location_key(key: bytes) -> tuple[int, int]:
    """A ``locations`` database key: ``(ledger id, entry id)``."""
    if len(key) != 16:
        raise CodecError(f"location key of {len(key)} bytes, not 16")
    return _II.unpack(key)


def parse_db_location(value: bytes) -> tuple[int, int]:
    """A ``locations`` database value: ``(entry log id, offset)``."""
    if len(value) != 8:
        raise CodecError(f"location of {len(value)} bytes, not 8")
    loc = _I64.unpack(value)[0]
    return (loc >> 32) & 0xFFFFFFFF, loc & 0xFFFFFFFF


def db_ledger_key(ledger_id: int) -> bytes:
    return _I64.pack(ledger_id)


def db_location_key(ledger_id: int, entry_id: int) -> bytes:
    return _II.pack(ledger_id, entry_id)
