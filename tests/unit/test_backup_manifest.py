"""A backup's manifest at a cluster's scale (issue 74, ``bkctl-backup/2``): its ledger lines
written in chunks as the walk goes and the previous backup's read a chunk at a time, so that
what a backup holds does not grow with the ledgers (counted in objects, not in RSS); an empty
ledger has no objects of its own; a damaged or missing chunk is named; an older manifest
(``bkctl-backup/1``) still serves as the previous backup."""

from __future__ import annotations

import gc
import json

import pytest

from bkctl.backup.catalog import load_manifest, manifest_ledgers, manifest_notes
from bkctl.backup.storage import LocalStorage
from bkctl.backup.take import Selection, _Lines, _Previous, _Slot, take_backup
from bkctl.exitcodes import FAILED, CommandError
from bkctl.wire.backup.archive import (
    MANIFEST_FORMAT_V1,
    ChunkWriter,
    LedgerRecord,
    Manifest,
    ManifestLedger,
    NoteWriter,
    cluster_tag,
    decode_chunk,
    ledger_object,
)
from bkctl.wire.errors import ArchiveDamaged
from bkctl.wire.metadata.ledger import LedgerMetadata, parse_ledger_metadata
from tests.support.fake_store import FakeMetadataStore

BOOKIES = ["127.0.0.1:3181", "127.0.0.1:3182", "127.0.0.1:3183"]


class NoBookKeeper:
    """Empty closed ledgers need no client: opening one is a failure of the test."""

    def open(self, ledger_id: int):
        raise AssertionError(f"ledger {ledger_id} opened")


def _cluster(n: int) -> tuple[FakeMetadataStore, list[int]]:
    store = FakeMetadataStore().start()
    store.ledgers.parse = parse_ledger_metadata  # the ZooKeeper store's decoder, which take.py calls
    ids = [store.ledgers.create(LedgerMetadata.new(BOOKIES, 2, 2, password=b"pw").closed(-1, 0))[0] for _ in range(n)]
    return store, ids


def _deleted(storage: LocalStorage, m: Manifest) -> list[int]:
    return [n.ledger_id for n in manifest_notes(storage, m) if n.kind == "deleted"]


def _line(lid: int) -> ManifestLedger:
    return ManifestLedger(lid, f"ledgers/{lid}/none-0-1.json", 1, 10, True)


def _slot(line: ManifestLedger) -> _Slot:
    slot = _Slot(line.ledger_id)
    slot.line, slot.settled = line, True
    return slot


class HeldCounter:
    """Counts the :class:`ManifestLedger` objects alive, every ``every`` ledgers the walk reads."""

    def __init__(self, store: FakeMetadataStore, every: int = 200):
        self.most = 0
        read_many = store.ledgers.read_many_stored

        def counted(ids, **kw):
            for n, read in enumerate(read_many(ids, **kw)):
                if n % every == every - 1:
                    gc.collect()
                    self.most = max(self.most, sum(isinstance(o, ManifestLedger) for o in gc.get_objects()))
                yield read

        store.ledgers.read_many_stored = counted


def test_a_backup_holds_a_chunk_of_its_ledgers_not_all_of_them(tmp_path):
    store, ids = _cluster(1500)
    storage = LocalStorage(str(tmp_path / "a"))
    held = HeldCounter(store)
    full = take_backup(store, NoBookKeeper(), storage, Selection(), store.uri, parallel=2, chunk_ledgers=100)
    assert full.totals()["ledgers"] == 1500 and full.totals()["copied_ledgers"] == 1500
    assert held.most <= 300  # a chunk's lines and those under way, not 1500
    assert len(full.chunks) == 15 and [c.ledgers for c in full.chunks] == [100] * 15
    assert [x.ledger_id for x in manifest_ledgers(storage, full)] == ids  # ascending, every one
    assert list(storage.list("ledgers/")) == []  # empty ledgers: no objects, their records in their lines
    head = json.loads(storage.get(full.name))
    assert head["format"] == "bkctl-backup/3" and "ledgers" not in head  # the head names chunks only

    held.most = 0
    again = take_backup(store, NoBookKeeper(), storage, Selection(), store.uri, parallel=2, chunk_ledgers=100)
    assert held.most <= 300  # the previous backup's lines read a chunk at a time beside
    assert again.totals()["ledgers"] == 1500 and again.totals()["copied_ledgers"] == 0
    assert again.previous == full.id and _deleted(storage, again) == []
    lines = list(manifest_ledgers(storage, again))
    assert all(x.inline is not None and not x.copied for x in lines)  # the same records, kept from the last


def test_deleted_ledgers_are_found_by_merging_the_previous_backup_in_id_order(tmp_path):
    store, ids = _cluster(30)
    storage = LocalStorage(str(tmp_path / "a"))
    take_backup(store, NoBookKeeper(), storage, Selection(), store.uri, chunk_ledgers=4)
    gone = [ids[0], ids[7], ids[8], ids[-1]]
    for lid in gone:
        store.ledgers.delete(lid)
    again = take_backup(store, NoBookKeeper(), storage, Selection(), store.uri, chunk_ledgers=4)
    assert _deleted(storage, again) == gone and again.note_counts()["deleted"] == 4
    assert [x.ledger_id for x in manifest_ledgers(storage, again)] == [i for i in ids if i not in gone]


def test_the_cursor_ledgers_copied_first_are_merged_into_the_lines_in_id_order(tmp_path):
    storage = LocalStorage(str(tmp_path / "a"))
    lines = _Lines(ChunkWriter("b", storage.put, 2), NoteWriter("b", storage.put), NoteWriter("b", storage.put), None)
    lines.hold([_slot(_line(50)), _slot(_line(5))])
    for lid in (1, 10, 60):
        lines.add(_slot(_line(lid)))
    chunks, _notes = lines.finish()
    m = Manifest("b", 0, 0, {}, {}, [], [], [], [], [], {}, chunks=chunks)
    assert [x.ledger_id for x in manifest_ledgers(storage, m)] == [1, 5, 10, 50, 60]
    writer = ChunkWriter("c", storage.put)
    writer.add(_line(3))
    with pytest.raises(ValueError, match="ascending"):
        writer.add(_line(2))


def test_an_older_manifest_serves_as_the_previous_backup(tmp_path):
    """A ``bkctl-backup/1`` manifest (every ledger in it, in the order copied, records as objects)."""
    store, ids = _cluster(6)
    storage = LocalStorage(str(tmp_path / "a"))
    take_backup(store, NoBookKeeper(), storage, Selection(ledgers=str(ids[0])), store.uri)  # the marker
    for name in storage.list("backups/"):
        storage.delete(name)
    cluster = cluster_tag(store.cluster.instance_id())
    old_lines = []
    for lid in [*reversed(ids), 999]:
        name = ledger_object(lid, cluster, 0, 0) + ".json"
        record = LedgerRecord(lid, cluster, 0, 0, 0, "CLOSED", 3, 2, 2, "CRC32C", "", {}, "", "x.data", "", 16, 0)
        storage.put(name, record.encode())
        old_lines.append(ManifestLedger(lid, name, 0, 0, True))
    old = Manifest(
        "20260101T000000000Z-000000", 0, 0, {}, Selection().to_json(), old_lines, [], [], [], [], {},
        format=MANIFEST_FORMAT_V1,
    )  # fmt: skip
    storage.put(old.name, old.encode())
    assert "ledgers" in json.loads(storage.get(old.name))
    again = take_backup(store, NoBookKeeper(), storage, Selection(), store.uri, chunk_ledgers=4)
    assert again.previous == old.id and _deleted(storage, again) == [999]
    lines = list(manifest_ledgers(storage, again))
    assert [x.ledger_id for x in lines] == ids
    assert not any(x.copied for x in lines) and all(x.inline is None for x in lines)  # its records kept


def _backup(tmp_path) -> tuple[LocalStorage, Manifest]:
    store, _ids = _cluster(10)
    storage = LocalStorage(str(tmp_path / "a"))
    return storage, take_backup(store, NoBookKeeper(), storage, Selection(), store.uri, chunk_ledgers=4)


@pytest.mark.parametrize("damage", ["edited", "cut", "missing"])
def test_a_damaged_or_missing_chunk_is_named(tmp_path, capsys, damage):
    from bkctl.cli import run

    storage, m = _backup(tmp_path)
    victim = m.chunks[1].name
    if damage == "missing":
        storage.delete(victim)
    else:
        data = storage.get(victim)
        storage.put(victim, data.replace(b'"entries":0', b'"entries":7', 1) if damage == "edited" else data[:-20])
    with pytest.raises(CommandError, match=victim) as err:
        load_manifest(storage, m.id)  # what restore and show read first
    assert err.value.code == FAILED
    capsys.readouterr()
    assert run(["--json", "backup", "verify", storage.url]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert any(victim in p for p in doc["problems"])
    assert run(["backup", "show", storage.url]) == 1
    err_text = capsys.readouterr().err
    assert victim in err_text and err_text.count("\n") == 1
    assert run(["backup", "list", storage.url]) == 0  # a head and its totals: the chunks not read


def test_a_chunk_checks_its_order_count_and_inline_records():
    writer = ChunkWriter("b", lambda name, data: None, 10)
    for lid in (1, 2, 3):
        writer.add(_line(lid))
    [ref] = writer.finish()
    good = b"".join(json.dumps(_line(i).to_json()).encode() + b"\n" for i in (1, 2, 3))
    import hashlib

    def ref_for(data: bytes):
        return type(ref)(ref.name, ref.first, ref.last, ref.ledgers, hashlib.sha256(data).hexdigest())

    assert [x.ledger_id for x in decode_chunk(good, ref_for(good))] == [1, 2, 3]
    swapped = b"".join(json.dumps(_line(i).to_json()).encode() + b"\n" for i in (1, 3, 2))
    with pytest.raises(ArchiveDamaged, match="not the 3|out of order"):
        decode_chunk(swapped, ref_for(swapped))
    with pytest.raises(ArchiveDamaged, match="SHA-256"):
        decode_chunk(good.replace(b"10", b"11", 1), ref_for(good))
    bad = _line(2).to_json() | {"inline": {**_record(9), "entries": 0}, "entries": 0}
    data = b"".join(json.dumps(d).encode() + b"\n" for d in (_line(1).to_json(), bad, _line(3).to_json()))
    with pytest.raises(ArchiveDamaged, match="ledger 2's record in its line"):
        decode_chunk(data, ref_for(data))


def _record(lid: int) -> dict:
    from dataclasses import asdict

    return asdict(LedgerRecord(lid, "none", 0, 0, 0, "CLOSED", 3, 2, 2, "CRC32C", "", {}, "", "", "", 0, 0))


def test_a_previous_backup_with_a_damaged_chunk_calls_nothing_deleted(tmp_path):
    storage, m = _backup(tmp_path)
    first = [x.ledger_id for x in manifest_ledgers(storage, m)][: m.chunks[0].ledgers]
    storage.put(m.chunks[1].name, b"{}\n")
    previous = _Previous(storage, m)
    assert previous.find(first[0]) is not None
    assert previous.passed(float("inf")) == first[1:]  # the first chunk's, then it stops
    assert previous.damaged


def test_verify_expects_the_bytes_of_a_copy_two_backups_name_once(tmp_path):
    from bkctl.backup.catalog import ensure_archive
    from bkctl.backup.inspect import expected_bytes

    storage = LocalStorage(str(tmp_path / "a"))
    ensure_archive(storage, 0.0)
    for backup_id in ("20260101T000000000Z-aaaaaa", "20260102T000000000Z-bbbbbb"):
        writer = ChunkWriter(backup_id, storage.put)
        writer.add(_line(1))
        m = Manifest(backup_id, 0, 0, {}, {}, [], [], [], [], [], {}, chunks=writer.finish(), counts=writer.counts)
        storage.put(m.name, m.encode())
    assert expected_bytes(storage) == 10  # (the progress bar's total: ledger 1's copy read once)
