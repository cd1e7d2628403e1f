"""``bkctl backup list|show|verify``: what an archive holds and whether it reads back whole."""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple

from bkctl.wire.backup.archive import LedgerRecord, Manifest, ManifestLedger, unb64
from bkctl.wire.backup.data_read import PY_READER, ArchiveReader, read_runs
from bkctl.wire.errors import ArchiveDamaged, ObjectMissing

from ..exitcodes import FAILED, CommandError
from ..ops.results import fields_of, inlined
from .catalog import load_manifest, manifest_ids, manifest_ledgers, manifest_notes, read_manifest, require_archive
from .storage import ArchiveStorage
from .take import submitted

__all__ = [
    "BackedUpTopic",
    "BackupShown",
    "BackupSummary",
    "DamagedBackup",
    "DeletedSince",
    "LedgerLine",
    "ListedBackup",
    "UnreadableLedger",
    "VerifyReport",
    "list_backups",
    "show_backup",
    "verify_archive",
]


def _when(ms: int) -> str:
    from bkctl.wire.text import utc_iso

    return utc_iso(ms) or ""


@dataclass(frozen=True)
class BackupSummary:
    """A backup as ``backup list`` lists it and ``backup show`` begins: when, from where, its
    totals and its notes' counts (its document: :func:`bkctl.ops.results.to_json`)."""

    id: str
    started: str  #: ISO 8601 UTC ("" unset)
    finished: str
    source: str | None  #: the metadata URI backed up
    instance_id: str | None
    previous: str | None  #: the backup this one is incremental to
    #: what was asked for, as the manifest records it (``topics``, ``namespaces``, ``ledgers``)
    selection: dict[str, Any]
    ledgers: int
    entries: int
    bytes: int
    copied_ledgers: int
    copied_bytes: int
    topics: int
    schemas: int
    unreadable_ledgers: int
    deleted_ledgers: int
    missing_ledgers: int
    partial: bool  #: some ledgers could not be read (``unreadable_ledgers``)


@dataclass(frozen=True)
class ListedBackup:
    """A line of ``backup list``: a backup whose manifest reads (``damaged`` null)."""

    summary: BackupSummary = inlined()
    damaged: None = None

    @property
    def id(self) -> str:
        return self.summary.id


@dataclass(frozen=True)
class DamagedBackup:
    """A line of ``backup list``: a backup whose manifest does not read, and why."""

    id: str
    damaged: str


@dataclass(frozen=True)
class BackedUpTopic:
    """A topic a backup holds: its managed ledger, its ledgers' ids and its cursors' names."""

    managed_ledger: str
    ledgers: list[int]
    cursors: list[str]


@dataclass(frozen=True)
class LedgerLine:
    """A ledger a backup holds (its manifest's line): entries, payload bytes, whether this
    backup copied it (else an earlier one's copy)."""

    ledger_id: int
    entries: int
    bytes: int
    copied: bool


@dataclass(frozen=True)
class UnreadableLedger:
    """A ledger a backup could not read, and why."""

    ledger_id: int
    error: str


@dataclass(frozen=True)
class DeletedSince:
    """What was deleted since the previous backup: ledger ids (read as they are taken) and topics."""

    ledgers: Iterator[int]
    topics: list[str]


@dataclass(frozen=True)
class BackupShown:
    """``backup show``: a backup's summary, topics, schemas and partitioned topics, and -- read a
    chunk at a time as they are taken, once -- its ledgers and notes."""

    summary: BackupSummary
    topics: list[BackedUpTopic]
    schemas: list[str]
    partitioned: list[str]
    ledgers: Iterator[LedgerLine]
    missing: Iterator[int]
    unreadable: Iterator[UnreadableLedger]
    deleted: DeletedSince

    def to_json(self) -> dict[str, Any]:
        """The document ``backup show --json`` writes, its keys in this order (the summary's,
        the lists in place of their counts, then the rest); its iterators left as they are for
        the writer to write item by item."""
        doc = fields_of(self.summary)
        doc.update(ledgers=self.ledgers, topics=self.topics, schemas=self.schemas)
        doc.update(partitioned=self.partitioned, missing=self.missing, unreadable=self.unreadable)
        doc["deleted"] = {"ledgers": self.deleted.ledgers, "topics": self.deleted.topics}
        return doc


@dataclass(frozen=True)
class VerifyReport:
    """``backup verify``: what was re-read, and what is wrong (``problems`` empty: ``ok``)."""

    archive: str
    backups: int
    ledger_copies: int
    entries: int
    bytes: int
    problems: list[str]
    ok: bool


def summary(m: Manifest) -> BackupSummary:
    noted = m.note_counts()
    totals = m.totals()
    return BackupSummary(
        id=m.id,
        started=_when(m.started),
        finished=_when(m.finished),
        source=m.source.get("metadata_uri"),
        instance_id=m.source.get("instance_id"),
        previous=m.previous,
        selection=m.selection,
        ledgers=totals["ledgers"],
        entries=totals["entries"],
        bytes=totals["bytes"],
        copied_ledgers=totals["copied_ledgers"],
        copied_bytes=totals["copied_bytes"],
        topics=totals["topics"],
        schemas=totals["schemas"],
        unreadable_ledgers=totals["unreadable_ledgers"],
        deleted_ledgers=noted["deleted"],
        missing_ledgers=noted["missing"],
        partial=bool(noted["unreadable"]),
    )


def list_backups(storage: ArchiveStorage) -> list[ListedBackup | DamagedBackup]:
    """A summary of every backup, oldest first; one whose manifest does not read is a row of its
    own (:class:`DamagedBackup`: why) and hides none of the others."""
    require_archive(storage)
    rows: list[ListedBackup | DamagedBackup] = []
    for i in manifest_ids(storage):
        try:  # a head: its totals there, its chunks not read
            rows.append(ListedBackup(summary(read_manifest(storage, i))))
        except ArchiveDamaged as exc:
            rows.append(DamagedBackup(i, str(exc)))
    return rows


def show_backup(storage: ArchiveStorage, backup_id: str | None = None) -> BackupShown:
    """One backup (default: the newest): its summary, topics, schemas, and -- read a chunk at
    a time as they are taken, :class:`~bkctl.wire.errors.ArchiveDamaged` from a damaged chunk
    -- its ledgers, missing, unreadable and deleted ledgers (iterators), so that what is held
    does not grow with the ledgers."""
    from bkctl.wire.pulsar.managed_ledger import parse_managed_ledger_info

    require_archive(storage)
    m = load_manifest(storage, backup_id, ledgers=False)
    try:  # every chunk read once first: a damaged one is one line, before anything is printed
        for _ in manifest_ledgers(storage, m):
            pass
        for _ in manifest_notes(storage, m):
            pass
    except ArchiveDamaged as exc:
        raise CommandError(f"{exc} (the other backups are readable: backup list)", FAILED) from None
    topics = []
    for t in m.topics:
        info = parse_managed_ledger_info(unb64(t.value_b64))
        topics.append(BackedUpTopic(t.managed_ledger, [li.ledgerId for li in info.ledgerInfo], sorted(t.cursors_b64)))
    return BackupShown(
        summary=summary(m),
        topics=topics,
        schemas=[s.key for s in m.schemas],
        partitioned=[p.key for p in m.partitioned],
        ledgers=(LedgerLine(x.ledger_id, x.entries, x.payload_bytes, x.copied) for x in manifest_ledgers(storage, m)),
        missing=noted(storage, m, "missing"),
        unreadable=unreadable(storage, m),
        deleted=DeletedSince(noted(storage, m, "deleted"), m.deleted.get("topics", [])),
    )


def noted(storage: ArchiveStorage, m: Manifest, kind: str) -> Iterator[int]:
    """The ids of the ledgers backup ``m`` notes as ``kind`` (``missing``, ``deleted``,
    ``unreadable``), read a chunk of notes at a time as they are taken: what ``backup show``
    and ``backup --json`` write, item by item, never held as a list."""
    for note in manifest_notes(storage, m):
        if note.kind == kind:
            yield note.ledger_id


def unreadable(storage: ArchiveStorage, m: Manifest) -> Iterator[UnreadableLedger]:
    """The ledgers backup ``m`` could not read and why, read as :func:`noted` reads them."""
    for note in manifest_notes(storage, m):
        if note.kind == "unreadable":
            yield UnreadableLedger(note.ledger_id, note.error)


class _Copy(NamedTuple):
    """A ledger copy to check: its record's name and what the manifests say it holds."""

    record: str
    ledger_id: int
    entries: int
    payload_bytes: int


def _copies(storage: ArchiveStorage, ids: list[str], problems: list[str]) -> Iterator[_Copy]:
    """Every ledger copy (not in its line) the backups ``ids`` name, each once, in ascending
    ledger ids: their chunks merged, one chunk of each backup held at a time.  A manifest or a
    chunk that does not read is a problem (the backup's lines end there)."""

    def lines(i: str) -> Iterator[ManifestLedger]:
        try:
            m = read_manifest(storage, i)
        except ArchiveDamaged as exc:
            problems.append(f"backup {i}: its manifest is damaged: {exc}")
            return
        try:
            for _ in manifest_notes(storage, m):
                pass  # (read: a damaged chunk of notes is a problem too)
            yield from manifest_ledgers(storage, m)
        except ArchiveDamaged as exc:
            problems.append(f"backup {i}: its manifest is damaged: {exc}")

    last, seen = -1, set[str]()
    for x in heapq.merge(*(lines(i) for i in ids), key=lambda x: x.ledger_id):
        if x.inline is not None:
            continue  # a ledger with no entries has its record in its line: decode_chunk checked it
        if x.ledger_id != last:
            last, seen = x.ledger_id, set()
        if x.record not in seen:  # a copy two backups name: checked once
            seen.add(x.record)
            yield _Copy(x.record, x.ledger_id, x.entries, x.payload_bytes)


def verify_archive(
    storage: ArchiveStorage,
    backup_id: str | None = None,
    *,
    parallel: int = 4,
    advance: Callable[[int], None] = lambda n: None,
    reader: ArchiveReader = PY_READER,
) -> VerifyReport:
    """Re-read every manifest (or ``backup_id``'s), every ledger record they name and every
    data object: each entry's CRC32C, each object's index SHA-256, entry counts and sizes, the
    Pulsar values' formats.  ``problems`` lists what is wrong (empty: the archive is whole).
    ``reader``: how the entries are decoded (the twin selector's ``archive_reader``)."""
    from bkctl.wire.pulsar.managed_ledger import parse_cursor_info, parse_managed_ledger_info

    require_archive(storage)
    ids = manifest_ids(storage)
    if backup_id is not None:
        if backup_id not in ids:
            load_manifest(storage, backup_id, ledgers=False)  # exit 3, naming how many there are
        ids = [backup_id]
    problems: list[str] = []
    lock = threading.Lock()
    for i in ids:
        try:
            m = read_manifest(storage, i)
        except ArchiveDamaged:
            continue  # named by _copies
        for t in m.topics:
            try:
                parse_managed_ledger_info(unb64(t.value_b64))
                for value in t.cursors_b64.values():
                    parse_cursor_info(unb64(value))
            except Exception as exc:  # noqa: BLE001 - any damage is a problem found
                problems.append(f"backup {i}: topic {t.managed_ledger}: {exc}")
    checked = {"bytes": 0, "entries": 0, "copies": 0}

    def check(copy: _Copy) -> None:
        name, ledger_id, entries, size = copy
        with lock:
            checked["copies"] += 1
        try:
            record = LedgerRecord.decode(storage.get(name), name)
            if (record.ledger_id, record.entries, record.payload_bytes) != (ledger_id, entries, size):
                raise ArchiveDamaged(f"{name}: record says {record.entries} entries, manifest {entries}")
            n = got = 0
            with storage.open_read(record.data_object) as f:
                for run in read_runs(f, ledger_id, record.index_sha256, reader, record.data_size):
                    n += len(run.payloads)
                    got += run.size
                    advance(run.size)
            if (n, got) != (record.entries, record.payload_bytes):
                raise ArchiveDamaged(f"ledger {ledger_id}: {n} entries of {got} bytes, {record.entries} recorded")
            with lock:
                checked["bytes"] += got
                checked["entries"] += n
        except ObjectMissing as exc:
            with lock:
                problems.append(f"ledger {ledger_id}: {exc}")
        except ArchiveDamaged as exc:
            with lock:
                problems.append(str(exc))

    workers = max(1, parallel)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="verify") as pool:
        for future in submitted(pool, check, _copies(storage, ids, problems), workers * 4):
            future.result()
    return VerifyReport(
        archive=storage.url,
        backups=len(ids),
        ledger_copies=checked["copies"],
        entries=checked["entries"],
        bytes=checked["bytes"],
        problems=sorted(problems),
        ok=not problems,
    )


def expected_bytes(storage: ArchiveStorage, backup_id: str | None = None) -> int:
    """The payload bytes :func:`verify_archive` will read (for a progress bar; a copy two
    backups name counted once)."""
    ids = [backup_id] if backup_id is not None else manifest_ids(storage)
    return sum(c.payload_bytes for c in _copies(storage, ids, []))  # (damage: verify names it)
