"""The records bookied writes for every entry it stores, and the one interface of their codecs.

bookied writes each entry twice: once into its journal (:mod:`bkctl.bookied.journal_format`:
a record with a type byte) and once into an entry log at a checkpoint
(:mod:`bkctl.bookied.storage.entry_log`: a record without one, located by an index row), and
reads entry log records back with one ``pread`` per span.  Both records are a CRC32C of what
follows it, a head and the entry's bytes (all integers big-endian)::

    journal:    u32 crc | u32 len (17 + data) | u8 type | i64 ledgerId | i64 entryId | data
    entry log:  u32 crc | u32 len (16 + data) |           i64 ledgerId | i64 entryId | data

This module is the one Python owner of their C twins (``wire/codecs/_records.c``): it holds
the records' encoders and check, an index row's key and location (:data:`KEY`, :data:`LOC`,
which :mod:`bkctl.bookied.storage.index` stores), the record offsets the entry log's twin gives
(:data:`START`), and :class:`RecordTwins`, the
interface both twins implement whole:

* :attr:`~RecordTwins.journal_entries` -- the journal records of a run of one ledger's entries,
  one after the other (:func:`py_journal_entries`);
* :attr:`~RecordTwins.log_records` -- the entry log records of one ledger's entries from
  ``start`` on, while they fit in the log and the write chunk, and where each starts (packed,
  no object per entry: the index stores runs of them) (:func:`py_log_records`);
* :attr:`~RecordTwins.span_records` -- the entries whose records one ``pread`` read, checked,
  up to the first record that does not pass (:func:`py_span_records`): its reader then says
  why, with its own error (the C twin stops at a row of another shape too, which the reader's
  check then takes).

The twin selector (:mod:`bkctl.wire.fastpath`, ``Twins.records``) takes the C twins when
``_records`` is built and fast paths are on (:func:`twins_of`), else :data:`PYTHON`.  A C
function hands what it does not cover (an id past 64 bits, a body that is not ``bytes``, a
record past a 32-bit offset) to its Python twin itself: it is given it here
(:func:`functools.partial`), so that its callers take what it returns, whole.  The two give
the same bytes, rows and entries (tests/unit/test_entry_log_records.py,
test_journal_entries_c.py).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

from crc32c import crc32c

__all__ = [
    "KEY",
    "LOC",
    "PYTHON",
    "START",
    "RecordTwins",
    "RecordsModule",
    "encode_journal_entry",
    "encode_log_record",
    "log_record_data",
    "py_journal_entries",
    "py_log_records",
    "py_span_records",
    "twins_of",
]

#: an index row's key: ledger id, entry id (i64 each)
KEY = struct.Struct(">qq")
#: an index row's location: log id (u64), the record's offset in it and its length (u32 each)
LOC = struct.Struct(">QII")

_U32 = struct.Struct(">I")
_JOURNAL_HEAD = struct.Struct(">IBqq")  # len, type, ledger, entry (after the crc)
_LOG_HEAD = struct.Struct(">Iqq")  # len, ledger, entry (after the crc)
_LOG_CHECK = struct.Struct(">IIqq")  # crc, len, ledger, entry

#: an index row of an entry to read: ``(log id, offset, length, i)``, its bytes going to ``out[i]``
Row = tuple[int, int, int, int]
#: where a record starts in its entry log, as :attr:`RecordTwins.log_records` gives it (u32 each)
START = struct.Struct(">I")
#: what :attr:`RecordTwins.log_records` gives: the records' bytes and where each starts (:data:`START` each)
LogChunk = tuple[bytes, bytes]
#: the interface's fields (see the module documentation), the NamedTuple's and the C slot's
JournalEntries = Callable[[int, list[int], list[bytes], int], bytes]
LogRecords = Callable[[int, list[int], list[bytes], int, int, int, int], LogChunk]
SpanRecords = Callable[[bytes, int, list[Row], int, int, int, list[int], list[Any]], int]


def encode_journal_entry(ledger_id: int, entry_id: int, data: bytes, record_type: int) -> bytes:
    """The journal record of one entry (the record type the journal gives entries)."""
    head = _JOURNAL_HEAD.pack(len(data) + 17, record_type, ledger_id, entry_id)
    return _U32.pack(crc32c(data, crc32c(head))) + head + data


def encode_log_record(ledger_id: int, entry_id: int, data: bytes) -> bytes:
    """The entry log record of one entry."""
    head = _LOG_HEAD.pack(len(data) + 16, ledger_id, entry_id)
    return _U32.pack(crc32c(data, crc32c(head))) + head + data


def log_record_data(record: bytes, ledger_id: int, entry_id: int) -> bytes | None:
    """The entry in the entry log record ``record`` (at least 24 bytes, as long as its index
    row says), or None if its length field, its ids or its checksum are not what was written."""
    crc, length, lid, eid = _LOG_CHECK.unpack_from(record, 0)
    if length != len(record) - 8 or lid != ledger_id or eid != entry_id or crc32c(memoryview(record)[4:]) != crc:
        return None
    return record[24:]


def py_journal_entries(ledger_id: int, entry_ids: list[int], bodies: list[bytes], record_type: int) -> bytes:
    """The journal records of ``ledger_id``'s entries ``entry_ids`` (``bodies``, pairwise), one
    after the other: :func:`encode_journal_entry`'s bytes of each, inlined (a call per entry
    was a fifth of the Python twins' add)."""
    pack, u32 = _JOURNAL_HEAD.pack, _U32.pack
    out: list[bytes] = []
    for e, body in zip(entry_ids, bodies):
        head = pack(len(body) + 17, record_type, ledger_id, e)
        out += (u32(crc32c(body, crc32c(head))), head, body)
    return b"".join(out)


def py_log_records(
    ledger_id: int, entry_ids: Sequence[int], bodies: Sequence[bytes], start: int, pos: int, limit: int, budget: int
) -> LogChunk:
    """The entry log records of one ledger's entries ``entry_ids[start:]`` (``bodies``
    pairwise) written into an entry log from offset ``pos``, and where each starts (a
    big-endian u32 each, :data:`START`): from ``entry_ids[start]`` (which the caller placed)
    on, stopping before a record that would end past ``limit`` and after the one that makes
    them ``budget`` bytes or more.  ``struct.error`` for an id past 64 bits or an offset
    past 32."""
    parts: list[bytes] = []
    starts: list[bytes] = []
    pack_head, pack_u32 = _LOG_HEAD.pack, _U32.pack
    total = 0
    for i in range(start, len(entry_ids)):
        entry_id, data = entry_ids[i], bodies[i]
        n = len(data) + 24
        if i > start and pos + n > limit:
            break
        head = pack_head(n - 8, ledger_id, entry_id)
        parts += (pack_u32(crc32c(data, crc32c(head))), head, data)
        starts.append(pack_u32(pos))
        pos += n
        total += n
        if total >= budget:
            break
    return b"".join(parts), b"".join(starts)


def py_span_records(
    span: bytes,
    base: int,
    rows: Sequence[Row],
    start: int,
    end: int,
    ledger_id: int,
    entry_ids: Sequence[int],
    out: list[Any],
) -> int:
    """The entries of the records one read gave: ``span`` is the bytes read from offset
    ``base`` of a log, ``rows[start:end]`` the index rows of entries in it.  ``out[i]`` is
    set to the entry's bytes for each row whose record passes its checks (inside ``span``,
    its length, ledger, entry ``entry_ids[i]`` and checksum as written); returns the index of
    the first row whose record does not (``end`` when all do), which the reader checks again
    to say why."""
    for k in range(start, end):
        _log_id, offset, length, i = rows[k]
        pos = offset - base
        record = span[pos : pos + length]
        if pos < 0 or length < 24 or len(record) != length:
            return k
        data = log_record_data(record, ledger_id, entry_ids[i])
        if data is None:
            return k
        out[i] = data
    return max(start, end)


class RecordTwins(NamedTuple):
    """One implementation of each (see the module documentation): the C twins of ``c`` (the
    ``_records`` module they come from), or the Python twins (``c`` None)."""

    journal_entries: JournalEntries
    log_records: LogRecords
    span_records: SpanRecords
    c: RecordsModule | None = None


class RecordsModule(Protocol):
    """The slot ``_records`` (C) fills: what :func:`twins_of` takes, each function given its
    Python twin first (the fallback); the twin selector holds the C module's stub to it
    (:mod:`bkctl.wire.fastpath`, under TYPE_CHECKING: mypy fails when the stub does not fit)."""

    @property
    def journal_entries(self) -> Callable[[JournalEntries, int, list[int], list[bytes], int], bytes]: ...

    @property
    def log_records(
        self,
    ) -> Callable[[LogRecords, int, list[int], list[bytes], int, int, int, int], LogChunk]: ...

    @property
    def span_records(self) -> SpanRecords: ...


#: The Python twins (the reference).
PYTHON = RecordTwins(py_journal_entries, py_log_records, py_span_records)


def twins_of(c: RecordsModule | None) -> RecordTwins:
    """The C twins of the module ``c`` (``_records``, which the twin selector loads), each
    given the Python twin it hands what it does not cover; :data:`PYTHON` for None."""
    if c is None:
        return PYTHON
    return RecordTwins(
        functools.partial(c.journal_entries, py_journal_entries),
        functools.partial(c.log_records, py_log_records),
        c.span_records,
        c,
    )
