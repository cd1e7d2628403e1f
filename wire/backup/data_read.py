"""Reading a backup's data objects (their format: :mod:`bkctl.wire.backup.archive`): a block's
entries decoded and checked a run at a time (:data:`DecodeRun`: the C twin of ``_archive``, which
the twin selector chooses, ``Twins.archive_reader``, or :func:`py_entry_run`, the reference), the
object's index SHA-256 checked at its end (:func:`read_runs`).  What does not read as it should
is :class:`~bkctl.wire.errors.ArchiveDamaged`, naming the ledger and the entry."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from ..codecs import checksums
from ..errors import ArchiveDamaged
from ..objects import ByteStream
from .archive import DATA_HEADER, ENTRY_HEAD, MAGIC, PartsModule

__all__ = [
    "PY_READER",
    "READ_BLOCK",
    "RUN_BAD_CRC",
    "RUN_BAD_ID",
    "RUN_NEEDS_BYTES",
    "ArchiveModule",
    "ArchiveReader",
    "DecodeRun",
    "EntryRun",
    "RunOfEntries",
    "py_entry_run",
    "read_data",
    "read_runs",
    "reader_of",
]

#: bytes a data object is read in at a time (:func:`read_runs`): larger blocks cost more in
#: fresh memory than they save in calls
READ_BLOCK = 64 << 10

#: why a run of a data object's entries (:class:`EntryRun`) stopped: the next entry's head or
#: payload is not all in the buffer (``need`` bytes from ``end`` would hold it), which is also
#: how a buffer ending between two entries ends a run
RUN_NEEDS_BYTES = 0
#: ... the next entry's id (``found``) is not ``next_id``
RUN_BAD_ID = 1
#: ... entry ``next_id``'s payload does not match the CRC32C in its head
RUN_BAD_CRC = 2


class RunOfEntries(Protocol):
    """What :data:`DecodeRun` gives: the Python twin's :class:`EntryRun` or the C twin's struct
    sequence of the same fields (see :class:`EntryRun`)."""

    @property
    def payloads(self) -> list[bytes]: ...

    @property
    def heads(self) -> bytes: ...

    @property
    def size(self) -> int: ...

    @property
    def end(self) -> int: ...

    @property
    def next_id(self) -> int: ...

    @property
    def stop(self) -> int: ...

    @property
    def need(self) -> int: ...

    @property
    def found(self) -> int: ...


class EntryRun(NamedTuple):
    """The entries of a data object a buffer holds from a position on (:func:`py_entry_run`):
    ``payloads`` those whose ids ran on from the one expected and whose CRC32Cs matched, in
    order, ``heads`` their heads joined (what the index SHA-256 takes of them), ``size`` their
    payloads' bytes; ``end`` the position after the last, ``next_id`` the id the next must
    have; ``stop`` why the run ended (:data:`RUN_NEEDS_BYTES`, :data:`RUN_BAD_ID`,
    :data:`RUN_BAD_CRC`), ``need`` the bytes from ``end`` that would hold the next entry (for
    :data:`RUN_NEEDS_BYTES`, else 0) and ``found`` the id its head has (for :data:`RUN_BAD_ID`,
    else 0)."""

    payloads: list[bytes]
    heads: bytes
    size: int
    end: int
    next_id: int
    stop: int
    need: int
    found: int


#: a run of a data object's entries: ``(buffer, position, expected entry id)`` -> the
#: :class:`RunOfEntries` from there (:func:`py_entry_run`, and ``_archive``'s C twin)
DecodeRun = Callable[[bytes, int, int], RunOfEntries]


def py_entry_run(buf: bytes, pos: int, expected: int) -> EntryRun:
    """:data:`DecodeRun` in Python: the reference (tests/unit/test_archive_runs.py)."""
    payloads: list[bytes] = []
    heads: list[bytes] = []
    unpack = ENTRY_HEAD.unpack_from
    crc32c = checksums.crc32c_function()
    head_size = ENTRY_HEAD.size
    n = len(buf)
    size = 0
    stop = RUN_NEEDS_BYTES
    need = found = 0
    while True:
        if n - pos < head_size:
            need = head_size
            break
        entry_id, length, crc = unpack(buf, pos)
        if entry_id != expected:
            stop, found = RUN_BAD_ID, entry_id
            break
        start = pos + head_size
        if start + length > n:
            need = head_size + length
            break
        payload = buf[start : start + length]
        if crc32c(payload) != crc:
            stop = RUN_BAD_CRC
            break
        heads.append(buf[pos:start])
        payloads.append(payload)
        size += length
        pos = start + length
        expected += 1
    return EntryRun(payloads, b"".join(heads), size, pos, expected, stop, need, found)


class ArchiveModule(PartsModule, Protocol):
    """The slot ``_archive`` (C) fills: what :func:`reader_of` takes (and, of its writing,
    :func:`~bkctl.wire.backup.archive.parts_twin`), each function given its Python twin first
    (the fallback); the twin selector holds the C module's stub to it (:mod:`bkctl.wire.fastpath`,
    under TYPE_CHECKING: mypy fails when the stub does not fit)."""

    @property
    def entry_run(self) -> Callable[[Callable[[bytes, int, int], EntryRun], bytes, int, int], RunOfEntries]: ...


@dataclass(frozen=True)
class ArchiveReader:
    """How a data object's entries are decoded (the twin selector's ``Twins.archive_reader``):
    ``run`` the :data:`DecodeRun` in use, ``c`` the C module behind it (None: the Python twin)."""

    run: DecodeRun
    c: ArchiveModule | None = None


#: the Python twin alone (what a caller not given the selector's uses)
PY_READER = ArchiveReader(py_entry_run)


def reader_of(c: ArchiveModule | None) -> ArchiveReader:
    """The C twin of the module ``c`` (``_archive``, which the twin selector loads), given the
    Python twin; :data:`PY_READER` for None."""
    if c is None:
        return PY_READER
    return ArchiveReader(functools.partial(c.entry_run, py_entry_run), c)


def read_runs(
    f: ByteStream,
    ledger_id: int,
    expect_sha256: str | None = None,
    reader: ArchiveReader = PY_READER,
    size: int | None = None,
) -> Iterator[RunOfEntries]:
    """The entries of a data object a run at a time (``reader``'s :data:`DecodeRun`: each
    block's entries decoded and checked against their CRC32Cs at once), never an empty run;
    at the end the SHA-256 of the object's index (:class:`DataWriter`) against
    ``expect_sha256`` (:class:`ArchiveDamaged` on any mismatch, after the runs before the
    damage).  The object is read in blocks of :data:`READ_BLOCK` (two reads an entry cost more
    than the entry's CRC, more still from S3), an entry larger than that in one read.  With
    ``size``, the object's as its record says, an entry whose head says more bytes than the
    object has left is damage found before they are read: a wrong length field (up to 4 GiB)
    would otherwise have the rest of the object read into memory first."""
    sha = hashlib.sha256()
    buf = b""
    pos = 0
    gone = 0  # the object's bytes before buf's
    ended = False

    def have(need: int) -> bool:
        """Whether ``buf[pos:]`` holds ``need`` bytes, reading blocks until it does or the object ends."""
        nonlocal buf, pos, gone, ended
        while len(buf) - pos < need and not ended:
            block = f.read(max(READ_BLOCK, need - (len(buf) - pos)))
            if not block:
                ended = True
            else:
                buf = buf[pos:] + block
                gone += pos
                pos = 0
        return len(buf) - pos >= need

    if not have(DATA_HEADER.size):
        raise ArchiveDamaged(f"ledger {ledger_id}: data object ends early")
    magic, lid = DATA_HEADER.unpack_from(buf, pos)
    sha.update(buf[pos : pos + DATA_HEADER.size])
    pos += DATA_HEADER.size
    if magic != MAGIC or lid != ledger_id:
        raise ArchiveDamaged(f"ledger {ledger_id}: not its data object (header {magic!r}, ledger {lid})")
    expected = 0
    decode = reader.run
    while True:
        run = decode(buf, pos, expected)
        pos, expected = run.end, run.next_id
        if run.payloads:
            sha.update(run.heads)
            yield run
        if run.stop == RUN_BAD_ID:
            raise ArchiveDamaged(f"ledger {ledger_id}: entry {run.found} where {expected} was expected")
        if run.stop == RUN_BAD_CRC:
            raise ArchiveDamaged(f"ledger {ledger_id} entry {expected}: CRC32C does not match")
        left = None if size is None else size - gone - pos  # (what the record says is left)
        if left is not None and 0 < left < run.need:
            raise ArchiveDamaged(f"ledger {ledger_id}: data object ends early, {_cut(run.need, left, expected)}")
        if not have(run.need):
            if pos == len(buf):
                break  # the end, between two entries
            raise ArchiveDamaged(
                f"ledger {ledger_id}: data object ends early, {_cut(run.need, len(buf) - pos, expected)}"
            )
    if expect_sha256 is not None and sha.hexdigest() != expect_sha256:
        raise ArchiveDamaged(f"ledger {ledger_id}: the data object's index SHA-256 is not the recorded one")


def _cut(need: int, left: int, entry_id: int) -> str:
    """Where a data object that ends early was cut (``left`` bytes of entry ``entry_id``'s
    ``need``): in its head, or in a payload shorter than its head says (a wrong length too)."""
    if need == ENTRY_HEAD.size:
        return f"within entry {entry_id}'s head"
    return f"entry {entry_id}'s head says {need - ENTRY_HEAD.size} bytes and {left - ENTRY_HEAD.size} follow it"


def read_data(
    f: ByteStream,
    ledger_id: int,
    expect_sha256: str | None = None,
    reader: ArchiveReader = PY_READER,
    size: int | None = None,
) -> Iterator[tuple[int, bytes]]:
    """:func:`read_runs`' entries one at a time, ``(entry id, payload)``."""
    for run in read_runs(f, ledger_id, expect_sha256, reader, size):
        yield from zip(range(run.next_id - len(run.payloads), run.next_id), run.payloads)
