"""An archive's catalogue: its marker object and its backups' manifests, newest last; a
manifest's ledgers read chunk by chunk (:func:`manifest_ledgers`) or whole (:func:`with_ledgers`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from bkctl.wire.backup.archive import (
    MARKER,
    LedgerNote,
    Manifest,
    ManifestLedger,
    UnreadableLedger,
    check_marker,
    decode_chunk,
    decode_notes,
    encode_marker,
)
from bkctl.wire.errors import ArchiveDamaged, ObjectMissing

from ..exitcodes import FAILED, NOT_FOUND, USAGE, CommandError
from .storage import ArchiveStorage

__all__ = [
    "ensure_archive",
    "latest_manifest",
    "load_manifest",
    "manifest_ids",
    "manifest_ledgers",
    "manifest_notes",
    "new_marker",
    "read_manifest",
    "require_archive",
    "with_ledgers",
    "with_notes",
]


def ensure_archive(storage: ArchiveStorage, now: float) -> None:
    """Make ``storage`` an archive (its marker) unless it is one; another archive's marker, or
    other files where there is no marker: exit 2."""
    marker = new_marker(storage, now)
    if marker is not None:
        storage.put(MARKER, marker)


def new_marker(storage: ArchiveStorage, now: float) -> bytes | None:
    """The marker that makes ``storage`` an archive, for the caller to store (:data:`MARKER`);
    None when it is one already.  Another archive's marker, or other files where there is no
    marker: exit 2."""
    if storage.exists(MARKER):
        require_archive(storage)
        return None
    other = next(iter(storage.list("")), None)
    if other is not None:
        raise CommandError(
            f"{storage.url} holds other files ({other}, ...), not a backup archive: give an empty place", USAGE
        )
    return encode_marker(int(now * 1000))


def require_archive(storage: ArchiveStorage) -> None:
    """Exit 3 when there is no archive at ``storage``, 2 when something else is there."""
    try:
        check_marker(storage.get(MARKER))
    except ObjectMissing:
        raise CommandError(f"{storage.url}: no backup archive there ({MARKER} missing)", NOT_FOUND) from None
    except ArchiveDamaged as exc:
        raise CommandError(f"{storage.url}: {exc}", USAGE) from None


def manifest_ids(storage: ArchiveStorage) -> list[str]:
    """Every backup's id, oldest first (ids start with their UTC time)."""
    return [n[len("backups/") : -len(".json")] for n in storage.list("backups/") if n.endswith(".json")]


def load_manifest(
    storage: ArchiveStorage, backup_id: str | None = None, *, ledgers: bool = True, notes: bool = False
) -> Manifest:
    """Backup ``backup_id``'s manifest (default: the newest), with its ledgers unless not
    ``ledgers`` (:func:`with_ledgers`), with its notes when ``notes`` (:func:`with_notes`);
    exit 3 when there is none, 1 when it or one of its chunks is damaged (naming it)."""
    ids = manifest_ids(storage)
    if backup_id is None:
        if not ids:
            raise CommandError(f"{storage.url}: the archive holds no backup yet", NOT_FOUND)
        backup_id = ids[-1]
    elif backup_id not in ids:
        raise CommandError(f"{storage.url}: no backup {backup_id} (there are {len(ids)})", NOT_FOUND)
    try:
        m = read_manifest(storage, backup_id)
        if ledgers:
            return with_ledgers(storage, m)
        return with_notes(storage, m) if notes else m
    except ArchiveDamaged as exc:
        raise CommandError(f"{exc} (the other backups are readable: backup list)", FAILED) from None


def read_manifest(storage: ArchiveStorage, backup_id: str) -> Manifest:
    """Backup ``backup_id``'s manifest; :class:`ArchiveDamaged` when it does not read."""
    name = f"backups/{backup_id}.json"
    try:
        return Manifest.decode(storage.get(name), name)
    except ObjectMissing:
        raise ArchiveDamaged(f"{name}: gone while the archive was read") from None


def latest_manifest(storage: ArchiveStorage) -> Manifest | None:
    """The newest backup's readable manifest (a damaged one is passed over), None when there is none."""
    for backup_id in reversed(manifest_ids(storage)):
        try:
            return read_manifest(storage, backup_id)
        except ArchiveDamaged:
            continue
    return None


def manifest_ledgers(storage: ArchiveStorage, m: Manifest) -> Iterator[ManifestLedger]:
    """``m``'s ledgers in ascending ids, a chunk at a time (an older manifest's, sorted);
    :class:`ArchiveDamaged` when a chunk is missing or damaged."""
    if not m.chunked:
        yield from sorted(m.ledgers, key=lambda x: x.ledger_id)
        return
    after = -1
    for ref in m.chunks:
        try:
            data = storage.get(ref.name)
        except ObjectMissing:
            raise ArchiveDamaged(f"{ref.name}: a chunk of backup {m.id}'s manifest is missing") from None
        lines = decode_chunk(data, ref, after)
        after = ref.last
        yield from lines


def manifest_notes(storage: ArchiveStorage, m: Manifest) -> Iterator[LedgerNote]:
    """The ledgers ``m`` names without holding them (missing, unreadable, deleted), a chunk at
    a time (an older manifest's from its head); :class:`ArchiveDamaged` when a chunk is
    missing or damaged."""
    if not m.noted:
        yield from (LedgerNote(i, "missing") for i in m.missing)
        yield from (LedgerNote(u.ledger_id, "unreadable", u.error) for u in m.unreadable)
        yield from (LedgerNote(i, "deleted") for i in m.deleted.get("ledgers", []))
        return
    for ref in m.notes:
        try:
            data = storage.get(ref.name)
        except ObjectMissing:
            raise ArchiveDamaged(f"{ref.name}: a chunk of backup {m.id}'s notes is missing") from None
        yield from decode_notes(data, ref)


def with_ledgers(storage: ArchiveStorage, m: Manifest) -> Manifest:
    """``m`` with every ledger in ``ledgers`` (read from its chunks) and its notes in
    ``missing``, ``unreadable`` and ``deleted``, as ``bkctl-backup/1`` held them: for what
    needs them all at once; :class:`ArchiveDamaged` when a chunk is damaged."""
    if not m.chunked:
        return m
    return dataclasses.replace(with_notes(storage, m), ledgers=list(manifest_ledgers(storage, m)))


def with_notes(storage: ArchiveStorage, m: Manifest) -> Manifest:
    """``m`` with its notes in ``missing``, ``unreadable`` and ``deleted`` (as ``bkctl-backup/2``
    held them), its ledgers still in their chunks; :class:`ArchiveDamaged` when a chunk of
    notes is damaged."""
    if m.noted:
        noted: dict[str, list[LedgerNote]] = {"missing": [], "unreadable": [], "deleted": []}
        for note in manifest_notes(storage, m):
            noted[note.kind].append(note)
        m = dataclasses.replace(
            m,
            missing=sorted(n.ledger_id for n in noted["missing"]),
            unreadable=[UnreadableLedger(n.ledger_id, n.error) for n in sorted(noted["unreadable"], key=_id)],
            deleted={**m.deleted, "ledgers": sorted(n.ledger_id for n in noted["deleted"])},
        )
    return m


def _id(note: LedgerNote) -> int:
    return note.ledger_id
