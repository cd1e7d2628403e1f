"""``bkctl backup list|show|verify``: what an archive holds and whether it reads back whole."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bkctl.wire.backup.archive import LedgerRecord, Manifest, read_data, unb64
from bkctl.wire.errors import ArchiveDamaged, ObjectMissing

from .catalog import load_manifest, manifest_ids, manifest_ledgers, read_manifest, require_archive
from .storage import ArchiveStorage

__all__ = ["list_backups", "show_backup", "verify_archive"]


def _when(ms: int) -> str:
    from bkctl.wire.text import utc_iso

    return utc_iso(ms) or ""


def summary(m: Manifest) -> dict[str, Any]:
    return {
        "id": m.id,
        "started": _when(m.started),
        "finished": _when(m.finished),
        "source": m.source.get("metadata_uri"),
        "instance_id": m.source.get("instance_id"),
        "previous": m.previous,
        "selection": m.selection,
        **m.totals(),
        "deleted_ledgers": len(m.deleted.get("ledgers", [])),
        "missing_ledgers": len(m.missing),
        "partial": bool(m.unreadable),
    }


def list_backups(storage: ArchiveStorage) -> list[dict[str, Any]]:
    """A summary of every backup, oldest first; one whose manifest does not read is a row of its
    own (``id``, ``damaged``: why) and hides none of the others."""
    require_archive(storage)
    rows = []
    for i in manifest_ids(storage):
        try:  # a head: its totals there, its chunks not read
            rows.append({**summary(read_manifest(storage, i)), "damaged": None})
        except ArchiveDamaged as exc:
            rows.append({"id": i, "damaged": str(exc)})
    return rows


def show_backup(storage: ArchiveStorage, backup_id: str | None = None) -> dict[str, Any]:
    """One backup (default: the newest): its summary, topics, schemas and ledgers."""
    from bkctl.wire.pulsar.managed_ledger import parse_managed_ledger_info

    require_archive(storage)
    m = load_manifest(storage, backup_id)
    doc = summary(m)
    topics = []
    for t in m.topics:
        info = parse_managed_ledger_info(unb64(t.value_b64))
        topics.append(
            {
                "managed_ledger": t.managed_ledger,
                "ledgers": [li.ledgerId for li in info.ledgerInfo],
                "cursors": sorted(t.cursors_b64),
            }
        )
    doc["topics"] = topics
    doc["schemas"] = [s.key for s in m.schemas]
    doc["partitioned"] = [p.key for p in m.partitioned]
    doc["ledgers"] = [
        {"ledger_id": x.ledger_id, "entries": x.entries, "bytes": x.payload_bytes, "copied": x.copied}
        for x in m.ledgers
    ]
    doc["missing"] = m.missing
    doc["unreadable"] = [{"ledger_id": u.ledger_id, "error": u.error} for u in m.unreadable]
    doc["deleted"] = m.deleted
    return doc


def verify_archive(
    storage: ArchiveStorage,
    backup_id: str | None = None,
    *,
    parallel: int = 4,
    advance: Callable[[int], None] = lambda n: None,
) -> dict[str, Any]:
    """Re-read every manifest (or ``backup_id``'s), every ledger record they name and every
    data object: each entry's CRC32C, each object's index SHA-256, entry counts and sizes, the
    Pulsar values' formats.  ``problems`` lists what is wrong (empty: the archive is whole)."""
    from bkctl.wire.pulsar.managed_ledger import parse_cursor_info, parse_managed_ledger_info

    require_archive(storage)
    ids = manifest_ids(storage)
    if backup_id is not None:
        if backup_id not in ids:
            load_manifest(storage, backup_id, ledgers=False)  # exit 3, naming how many there are
        ids = [backup_id]
    problems: list[str] = []
    lock = threading.Lock()
    records: dict[str, tuple[int, int, int]] = {}  # record -> ledger id, entries, bytes
    for i in ids:
        try:
            m = read_manifest(storage, i)
        except ArchiveDamaged as exc:
            problems.append(f"backup {i}: its manifest is damaged: {exc}")
            continue
        try:
            for x in manifest_ledgers(storage, m):
                if x.inline is None:
                    records[x.record] = (x.ledger_id, x.entries, x.payload_bytes)
                # a ledger with no entries has its record in its line: decode_chunk checked it
        except ArchiveDamaged as exc:
            problems.append(f"backup {i}: its manifest is damaged: {exc}")
        for t in m.topics:
            try:
                parse_managed_ledger_info(unb64(t.value_b64))
                for value in t.cursors_b64.values():
                    parse_cursor_info(unb64(value))
            except Exception as exc:  # noqa: BLE001 - any damage is a problem found
                problems.append(f"backup {i}: topic {t.managed_ledger}: {exc}")
    checked = {"bytes": 0, "entries": 0}

    def check(name: str) -> None:
        ledger_id, entries, size = records[name]
        try:
            record = LedgerRecord.decode(storage.get(name), name)
            if (record.ledger_id, record.entries, record.payload_bytes) != (ledger_id, entries, size):
                raise ArchiveDamaged(f"{name}: record says {record.entries} entries, manifest {entries}")
            n = got = 0
            with storage.open_read(record.data_object) as f:
                for _entry_id, payload in read_data(f, ledger_id, record.index_sha256):
                    n += 1
                    got += len(payload)
                    advance(len(payload))
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

    with ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="verify") as pool:
        list(pool.map(check, sorted(records)))
    return {
        "archive": storage.url,
        "backups": len(ids),
        "ledger_copies": len(records),
        "entries": checked["entries"],
        "bytes": checked["bytes"],
        "problems": sorted(problems),
        "ok": not problems,
    }


def expected_bytes(storage: ArchiveStorage, backup_id: str | None = None) -> int:
    """The payload bytes :func:`verify_archive` will read (for a progress bar)."""
    ids = [backup_id] if backup_id is not None else manifest_ids(storage)
    seen: dict[str, int] = {}
    for i in ids:
        try:
            m = read_manifest(storage, i)
        except ArchiveDamaged:
            continue  # verify names it
        try:
            for x in manifest_ledgers(storage, m):  # a copy two backups name counted once
                seen[x.record] = x.payload_bytes
        except ArchiveDamaged:
            continue  # verify names it
    return sum(seen.values())
