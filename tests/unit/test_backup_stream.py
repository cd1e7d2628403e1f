"""``backup show`` and ``backup verify`` at a cluster's scale (issue 74, ``bkctl-backup/3``): they
read a backup's chunks one at a time as they go, so that what they hold does not grow with the
ledgers (counted in lines read ahead and objects alive, not in RSS); the missing, unreadable and
deleted ledgers are in chunks of notes, not in the head; a damaged chunk of notes is named."""

from __future__ import annotations

import gc
import json

import pytest

from bkctl.backup.catalog import ensure_archive, manifest_notes
from bkctl.backup.storage import LocalStorage
from bkctl.wire.backup.archive import ChunkWriter, LedgerNote, Manifest, ManifestLedger, NoteWriter

BACKUP = "20261101T000000000Z-aaaaaa"


class Watched(LocalStorage):
    """Counts the ledger lines its chunks handed out and the records asked for, and the
    :class:`ManifestLedger` objects alive at each chunk read."""

    def __init__(self, root: str):
        super().__init__(root)
        self.lines_read = self.records_asked = 0
        self.most_ahead = self.most_alive = 0

    def get(self, name: str) -> bytes:
        if name.startswith("chunks/"):
            data = super().get(name)
            gc.collect()
            self.most_alive = max(self.most_alive, sum(isinstance(o, ManifestLedger) for o in gc.get_objects()))
            self.lines_read += data.count(b"\n")
            self.most_ahead = max(self.most_ahead, self.lines_read - self.records_asked)
            return data
        if name.startswith("ledgers/"):
            self.records_asked += 1
        return super().get(name)


def _archive(tmp_path, n: int, per_chunk: int, notes: list[LedgerNote] = ()) -> Watched:
    storage = Watched(str(tmp_path / "a"))
    ensure_archive(storage, 0.0)
    writer = ChunkWriter(BACKUP, storage.put, per_chunk)
    for lid in range(1, n + 1):  # each names a record (not there: a problem verify names, not a stop)
        writer.add(ManifestLedger(lid, f"ledgers/{lid}/none-0-1.json", 1, 10, True))
    noted = NoteWriter(BACKUP, storage.put, per_chunk)
    for note in notes:
        noted.add(note)
    m = Manifest(
        BACKUP, 0, 0, {}, {}, [], [], [], [], [], {"topics": []},
        chunks=writer.finish(), counts={**writer.counts, **noted.counts}, notes=noted.finish(),
    )  # fmt: skip
    storage.put(m.name, m.encode())
    return storage


def test_verify_checks_the_copies_a_chunk_at_a_time(tmp_path):
    from bkctl.backup.inspect import verify_archive

    storage = _archive(tmp_path, 1200, per_chunk=100)
    storage.lines_read = 0
    report = verify_archive(storage, parallel=2)
    assert report.ledger_copies == 1200 and len(report.problems) == 1200  # every copy checked
    assert storage.lines_read == 1200
    assert storage.most_ahead <= 100 + 2 * 4 + 2  # a chunk and the window under way, not 1200


def test_show_streams_its_ledgers_as_json(tmp_path, capsys, monkeypatch):
    from bkctl.backup import storage as storages
    from bkctl.cli import run

    notes = [LedgerNote(5000, "missing"), LedgerNote(5001, "unreadable", "NoSuchEntry: entry 3")]
    notes += [LedgerNote(i, "deleted") for i in range(6000, 6250)]
    storage = _archive(tmp_path, 1200, per_chunk=100, notes=notes)
    monkeypatch.setattr(storages, "open_storage", lambda where, endpoint=None: storage)
    capsys.readouterr()
    assert run(["--json", "backup", "show", storage.url]) == 0
    assert storage.lines_read >= 1200 and storage.most_alive <= 2 * 100  # a chunk's lines at a time, not 1200
    doc = json.loads(capsys.readouterr().out)
    assert [x["ledger_id"] for x in doc["ledgers"]] == list(range(1, 1201))
    assert doc["missing"] == [5000] and doc["unreadable"] == [{"ledger_id": 5001, "error": "NoSuchEntry: entry 3"}]
    assert doc["deleted"]["ledgers"] == list(range(6000, 6250)) and doc["deleted_ledgers"] == 250
    assert run(["backup", "show", storage.url]) == 0
    out = capsys.readouterr().out
    assert "1,200 ledgers" in out or "1200 ledgers" in out
    assert "ledgers: 1-1200" in out and "ledger 5001: NoSuchEntry" in out and "ledgers 6000-6249" in out


def test_the_head_lists_no_ledger_its_notes_chunks_do(tmp_path):
    notes = [LedgerNote(i, "deleted") for i in range(10, 40)] + [LedgerNote(7, "unreadable", "why")]
    storage = _archive(tmp_path, 3, per_chunk=8, notes=notes)
    head = json.loads(storage.get(f"backups/{BACKUP}.json"))
    assert head["format"] == "bkctl-backup/3"
    assert "missing" not in head and "unreadable" not in head and head["deleted"] == {"topics": []}
    assert [c["ledgers"] for c in head["notes"]] == [8, 8, 8, 7]
    m = Manifest.decode(json.dumps(head).encode())
    assert m.note_counts() == {"missing": 0, "unreadable": 1, "deleted": 30} and m.totals()["unreadable_ledgers"] == 1
    assert [n.ledger_id for n in manifest_notes(storage, m)] == [*range(10, 40), 7]


@pytest.mark.parametrize("damage", ["edited", "missing"])
def test_a_damaged_chunk_of_notes_is_named(tmp_path, capsys, damage):
    from bkctl.cli import run

    storage = _archive(tmp_path, 3, per_chunk=8, notes=[LedgerNote(i, "deleted") for i in range(10, 30)])
    victim = f"chunks/{BACKUP}/notes-000001.jsonl"
    if damage == "missing":
        storage.delete(victim)
    else:
        storage.put(victim, storage.get(victim).replace(b"deleted", b"missing", 1))
    capsys.readouterr()
    assert run(["backup", "show", storage.url]) == 1
    captured = capsys.readouterr()
    assert victim in captured.err and captured.err.count("\n") == 1 and captured.out == ""
    assert run(["--json", "backup", "verify", storage.url]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert any(victim in p for p in doc["problems"])


def test_the_notes_are_read_a_chunk_at_a_time_as_they_are_taken(tmp_path):
    """``backup --json`` and ``show`` write the notes item by item from :func:`noted` and
    :func:`unreadable`: taking the first unreadable ledger reads the first chunk of notes, not the
    40 of them."""
    from bkctl.backup.inspect import UnreadableLedger, noted, unreadable

    notes = [LedgerNote(i, "unreadable", f"why {i}") for i in range(10, 410)]
    storage = _archive(tmp_path, 3, per_chunk=10, notes=notes)
    m = Manifest.decode(storage.get(f"backups/{BACKUP}.json"))
    read: list[str] = []
    get = storage.get
    storage.get = lambda name: read.append(name) or get(name)  # type: ignore[method-assign]
    items = unreadable(storage, m)
    assert next(items) == UnreadableLedger(10, "why 10") and len(read) == 1
    assert [u.ledger_id for u in items] == list(range(11, 410)) and len(read) == 40
    assert list(noted(storage, m, "missing")) == []
