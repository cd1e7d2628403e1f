"""An archive's catalogue read by ``bkctl backup list|show|verify`` (no cluster): a damaged
manifest is named and hides none of the others; ``show`` reads as text, not Python's reprs.
Each as an older bkctl wrote its manifests (``bkctl-backup/1``, every ledger in the head; ``/2``,
chunked, the missing and unreadable listed in the head) and as this one does (``/3``: those in
chunks of notes too)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from bkctl.backup.catalog import ensure_archive
from bkctl.backup.storage import LocalStorage
from bkctl.wire.backup.archive import (
    MANIFEST_FORMAT_V1,
    MANIFEST_FORMAT_V2,
    ChunkWriter,
    LedgerNote,
    Manifest,
    ManifestLedger,
    NoteWriter,
    UnreadableLedger,
)


def manifest(backup_id: str, ledgers=(1, 2, 3, 7), **kw) -> Manifest:
    return Manifest(
        id=backup_id,
        started=1_795_000_000_000,
        finished=1_795_000_001_000,
        source={"metadata_uri": "zk+hierarchical://zk:2181/ledgers", "instance_id": "abc", "host": "h"},
        selection={"topics": [], "namespaces": [], "ledgers": None},
        ledgers=[ManifestLedger(i, f"ledgers/{i}/none-0-0.json", 0, 0, True) for i in ledgers],
        topics=[],
        schemas=[],
        partitioned=[],
        missing=kw.pop("missing", []),
        deleted=kw.pop("deleted", {"ledgers": [], "topics": []}),
        format=MANIFEST_FORMAT_V1,
        **kw,
    )


def chunked(storage, m: Manifest, per_chunk: int = 3, fmt: str = "v3") -> Manifest:
    """``m`` as this bkctl writes it (``v3``: its ledgers and notes in chunks, written; a head),
    or as ``bkctl-backup/2`` did (``v2``: the notes in the head)."""
    writer = ChunkWriter(m.id, storage.put, per_chunk)
    for x in m.ledgers:
        writer.add(x)
    if fmt == "v2":
        return dataclasses.replace(
            m, format=MANIFEST_FORMAT_V2, ledgers=[], chunks=writer.finish(), counts=writer.counts
        )
    notes = NoteWriter(m.id, storage.put, per_chunk)
    for i in m.missing:
        notes.add(LedgerNote(i, "missing"))
    for u in m.unreadable:
        notes.add(LedgerNote(u.ledger_id, "unreadable", u.error))
    for i in m.deleted.get("ledgers", []):
        notes.add(LedgerNote(i, "deleted"))
    return dataclasses.replace(
        m,
        format=Manifest.format,
        ledgers=[],
        chunks=writer.finish(),
        counts={**writer.counts, **notes.counts},
        notes=notes.finish(),
        missing=[],
        unreadable=[],
    )


@pytest.fixture(params=["v1", "v2", "v3"])
def fmt(request):
    return request.param


def archive(tmp_path, fmt="v1") -> LocalStorage:
    storage = LocalStorage(str(tmp_path / "a"))
    ensure_archive(storage, 1_795_000_000.0)
    for i in ("20261101T000000000Z-aaaaaa", "20261103T000000000Z-cccccc"):
        m = manifest(i, unreadable=[UnreadableLedger(9, "NoSuchEntry: entry 6")] if "ccc" in i else [])
        if fmt != "v1":
            m = chunked(storage, m, fmt=fmt)
        storage.put(m.name, m.encode())
    storage.put("backups/20261102T000000000Z-bbbbbb.json", b'{"format": "bkctl-backup/1", "id": ')  # cut short
    return storage


def cli(capsys, *args):
    from bkctl.cli import run

    capsys.readouterr()
    code = run(list(map(str, args)))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_damaged_manifest_is_named_and_hides_none_of_the_others(tmp_path, capsys, fmt):
    storage = archive(tmp_path, fmt)
    code, out, err = cli(capsys, "--json", "backup", "list", storage.url)
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["id"][-6:], bool(r["damaged"])) for r in rows] == [
        ("aaaaaa", False),
        ("bbbbbb", True),
        ("cccccc", False),
    ]
    assert rows[2]["unreadable_ledgers"] == 1 and rows[2]["partial"]
    assert set(rows[1]) == {"id", "damaged"} and rows[0]["damaged"] is None  # a damaged line: why, nothing else
    code, out, err = cli(capsys, "backup", "list", storage.url)
    assert code == 0 and "bbbbbb  DAMAGED" in out and out.count("\n") == 3

    code, out, err = cli(capsys, "--json", "backup", "verify", storage.url)
    assert code == 1  # the damaged manifest is a problem; the two others' ledgers are still checked
    doc = json.loads(out)
    assert doc["backups"] == 3 and any("bbbbbb: its manifest is damaged" in p for p in doc["problems"])
    assert doc["ledger_copies"] == 4  # (their records are missing here: problems named, not a stop)

    code, out, err = cli(capsys, "backup", "show", storage.url, "--backup", "20261102T000000000Z-bbbbbb")
    assert code == 1 and "not a backup manifest" in err and err.count("\n") == 1


def test_show_reads_as_text_and_as_json(tmp_path, capsys, fmt):
    storage = archive(tmp_path, fmt)
    code, out, err = cli(capsys, "backup", "show", storage.url)
    assert code == 0, err
    assert "4 ledgers" in out and "ledgers: 1-3, 7" in out and "PARTIAL: 1 ledger could not be read" in out
    assert "[" not in out and "{" not in out and "'" not in out  # no Python reprs
    code, out, err = cli(capsys, "--json", "backup", "show", storage.url)
    doc = json.loads(out)
    assert [x["ledger_id"] for x in doc["ledgers"]] == [1, 2, 3, 7] and doc["unreadable"][0]["ledger_id"] == 9
