"""A backup ``bkctl backup`` says is done is on disk, in an order a crash cannot break: every
data object fsynced before the record naming it is renamed into place, every record before the
manifest chunk naming it, every chunk (and the archive's marker) before the manifest's head,
each folder made fsynced in its parent, and the head's folder fsynced last (docs/backup-format.md,
"Durability").  The calls are recorded as a real backup into a local archive makes them
(:mod:`tests.support.durability`) and replayed as POSIX promises them.  A restore's file journal
likewise: each ledger's id on disk (bytes and name) before the ledger is created."""

from __future__ import annotations

import json
from pathlib import Path

from bkctl.backup.storage import LocalStorage
from bkctl.backup.take import Selection, take_backup
from bkctl.wire.backup.archive import Manifest
from bkctl.wire.metadata.ledger import LedgerMetadata, LedgerState, parse_ledger_metadata
from bkctl.wire.objects import PART_MARK
from tests.support.backup_fakes import BOOKIES, FakeClient, NoFeed, closed_ledgers
from tests.support.durability import DiskLog, DiskOp, Replay, objects_named
from tests.support.fake_store import FakeMetadataStore


def _named(archive: Path, name: str) -> list[Path]:
    return [archive / n for n in objects_named(name, (archive / name).read_bytes())]


def _check(log: DiskLog, archive: Path, manifest: Manifest) -> Replay:
    """Each object renamed into place only when what it names is durable; the manifest durable
    at the end and only with the last call, an fsync of its folder."""
    replay = log.replay()
    head = archive / manifest.name
    named_checked = 0
    for n, op in enumerate(log.ops):
        replay.apply(op)
        if op.op == "replace" and op.path.is_relative_to(archive):
            name = op.path.relative_to(archive).as_posix()
            for needed in _named(archive, name):
                named_checked += 1
                assert replay.durable(needed), f"{name} renamed into place before {needed.name} was durable"
        last = n == len(log.ops) - 1
        assert replay.durable(head) == last, f"the manifest durable at call {n} of {len(log.ops)}: {op}"
    assert replay.problems == []
    assert log.ops[-1] == DiskOp("fsync", head.parent)
    made = [op.path for op in log.ops if op.op == "mkdir"]
    assert made and all(replay.durable(p) for p in made)  # each folder made: fsynced in its parent
    assert named_checked > 0
    return replay


def test_a_backup_is_durable_in_order_before_it_says_done(tmp_path, monkeypatch):
    store, ids = closed_ledgers(entries=40, size=64, ledgers=3)
    empty, _ = store.ledgers.create(LedgerMetadata(3, 2, 2, LedgerState.CLOSED, -1, 0, ((0, BOOKIES),)))
    bk = FakeClient(store, 64)
    archive = tmp_path / "archive"
    storage = LocalStorage(str(archive))
    log = DiskLog(tmp_path).install(monkeypatch)
    spec = ",".join(map(str, [*ids, empty]))
    first = take_backup(store, bk, storage, Selection(ledgers=spec), "zk://fake", parallel=2, chunk_ledgers=2)
    replay = _check(log, archive, first)
    assert {archive / "ledgers", archive / "chunks", archive / "backups"} <= replay.names
    records = [
        op.path for op in log.ops if op.op == "replace" and op.path.suffix == ".json" and "ledgers" in op.path.parts
    ]
    assert len(records) == 3 and len(first.chunks) == 2  # three copies (the empty one inline), two chunks

    # an incremental backup into folders that exist: the new ledger's copy and a new head
    _, more = closed_ledgers(entries=5, size=64, ledgers=1, store=store)
    log.restart()
    spec += f",{more[0]}"
    second = take_backup(store, bk, storage, Selection(ledgers=spec), "zk://fake", parallel=2, chunk_ledgers=2)
    _check(log, archive, second)
    assert second.totals()["copied_ledgers"] == 1


def test_the_marker_comes_first_and_the_last_steps_are_the_chunks_and_the_manifest(tmp_path, monkeypatch):
    """A new archive's marker is durable before any other object is renamed into place (a
    backup stopped midway leaves an archive), and once the last copy's record is stored only
    the last chunk and the manifest are written: their folders were made while the plan was
    read, so nothing but a file's fsync, its rename and its folder's fsync each is left."""
    store, ids = closed_ledgers(entries=40, size=64, ledgers=3)
    archive = tmp_path / "archive"
    log = DiskLog(tmp_path).install(monkeypatch)
    spec = ",".join(map(str, ids))
    manifest = take_backup(store, FakeClient(store, 64), LocalStorage(str(archive)), Selection(ledgers=spec), "zk://f")
    replaced = [op for op in log.ops if op.op == "replace"]
    assert replaced[0].path == archive / "archive.json"
    replay = log.replay()
    for op in log.ops:
        replay.apply(op)
        if op.op == "replace" and op.path != archive / "archive.json":
            assert replay.durable(archive / "archive.json"), f"{op.path} stored before the archive's marker"
    copies = [n for n, op in enumerate(log.ops) if op.path.is_relative_to(archive / "ledgers")]
    chunk, head = archive / manifest.chunks[0].name, archive / manifest.name
    last = [(op.op, Path(str(op.path).split(PART_MARK)[0])) for op in log.ops[copies[-1] + 1 :]]
    assert last == [  # (a file fsynced under its temporary name)
        ("fsync", chunk),
        ("replace", chunk),
        ("fsync", chunk.parent),
        ("fsync", head),
        ("replace", head),
        ("fsync", head.parent),
    ]


class CreatingBookKeeper:
    """Creates empty ledgers (nothing added: the backup's ledgers are empty), each creation
    marked in ``log`` among the journal's calls."""

    timeout = 5.0

    def __init__(self, log: DiskLog, journal: Path) -> None:
        self.log, self.journal = log, journal

    def create(self, *args, ledger_id: int, **kw):
        self.log.mark("create", self.journal, ledger_id)
        return self

    def close(self) -> None:
        pass

    def connect(self, bookie_ids) -> None:
        pass


def _ids_kept(journal: Path, size: int) -> set[int]:
    """The new ids the first ``size`` bytes of ``journal`` give."""
    lines = journal.read_bytes()[: max(size, 0)].splitlines()
    return {json.loads(x)[2] for x in lines if x.startswith(b'["id"')}


def test_a_file_journal_keeps_each_id_on_disk_before_its_ledger_is_created(tmp_path, monkeypatch):
    """docs/backup.md, "Stopped midway": the id each ledger gets is recorded before the ledger
    is created, appended to the file and synced -- on disk (the file's bytes and its name in
    its folder) when the ledger is created, whatever a crash keeps."""
    from bkctl.backup import restore as restoring

    store = FakeMetadataStore().start()
    store.ledgers.parse = parse_ledger_metadata
    for _ in range(5):
        store.ledgers.create(LedgerMetadata.new(list(BOOKIES), 2, 2, password=b"pw").closed(-1, 0))
    storage = LocalStorage(str(tmp_path / "archive"))
    take_backup(store, FakeClient(store, 0), storage, Selection(), "zk://fake")
    target = FakeMetadataStore().start()
    for b in BOOKIES:
        target.registration.register(b)
    (tmp_path / "j").mkdir()
    journal = tmp_path / "j" / "restore.journal"
    log = DiskLog(tmp_path / "j").install(monkeypatch)
    monkeypatch.setattr(restoring, "ChunkFeed", NoFeed)
    bk = CreatingBookKeeper(log, journal)
    restoring.restore_backup(target, bk, storage, "zk://t", remap=True, journal_path=str(journal))
    replay = log.replay()
    created = 0
    for op in log.ops:
        replay.apply(op)
        if op.op == "create":
            created += 1
            assert op.size in _ids_kept(journal, replay.durable_bytes(journal)), f"ledger {op.size} before its id"
    assert created == 5 and replay.problems == []
    assert replay.durable_bytes(journal) == journal.stat().st_size  # the head saying finished too
    assert b'"finished"' in journal.read_bytes().splitlines()[-1]

    # a kill cut its last line short: the restore run again writes the file anew, on disk too
    with open(journal, "ab") as f:
        f.write(b'["done",')
    log.restart()
    restoring.restore_backup(target, bk, storage, "zk://t", remap=True, journal_path=str(journal))
    replay = log.replay()
    for op in log.ops:
        replay.apply(op)
    assert any(op.op == "replace" for op in log.ops) and not any(op.op == "create" for op in log.ops)
    assert replay.problems == [] and replay.durable_bytes(journal) == journal.stat().st_size


def test_a_backup_leaves_its_data_objects_out_of_the_page_cache(tmp_path, monkeypatch):
    """Each data object, once synced, is advised out of the page cache (the backup does not read
    it again; fresh page cache for a large backup's bytes cost the kernel as much CPU as the copy
    itself): its file descriptor advised ``POSIX_FADV_DONTNEED`` over the whole file after its
    last fsync."""
    import os

    import pytest

    if not hasattr(os, "posix_fadvise"):
        pytest.skip("no posix_fadvise here")
    store, ids = closed_ledgers(entries=40, size=64, ledgers=3)
    archive = tmp_path / "archive"
    events: list[tuple[str, str]] = []
    real_fsync, real_fadvise = os.fsync, os.posix_fadvise

    def name(fd: int) -> str:
        return os.readlink(f"/proc/self/fd/{fd}")

    def fsync(fd: int) -> None:
        events.append(("fsync", name(fd)))
        real_fsync(fd)

    def fadvise(fd: int, offset: int, length: int, advice: int) -> None:
        assert (offset, length) == (0, 0)
        if advice == os.POSIX_FADV_DONTNEED:
            events.append(("dropped", name(fd)))
        real_fadvise(fd, offset, length, advice)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "posix_fadvise", fadvise)
    take_backup(
        store,
        FakeClient(store, 64),
        LocalStorage(str(archive)),
        Selection(ledgers=",".join(map(str, ids))),
        "zk://fake",
    )
    data = {path for what, path in events if what == "fsync" and ".data" in Path(path).name}
    assert len(data) == 3
    for path in data:
        synced = max(n for n, e in enumerate(events) if e == ("fsync", path))
        assert ("dropped", path) in events[synced:], f"{path} left in the page cache"


def test_a_folder_made_for_an_object_is_synced_before_its_rename_not_before_its_writing(tmp_path, monkeypatch):
    """A local archive's writer makes the folder of its object and writes at once (a backup's
    copy reads a new ledger's entries meanwhile); the folder's entry is synced in its parent
    before the object is renamed into place -- and a second writer into that folder, done
    first, syncs it before its own rename."""
    from bkctl.wire.objects import DirectoryObjects

    objects = DirectoryObjects(tmp_path / "archive")
    log = DiskLog(tmp_path).install(monkeypatch)
    with objects.writing("ledgers/7/copy.data") as f:
        f.write(b"entries")
        made = [op.path for op in log.ops if op.op == "mkdir"]
        assert made == [tmp_path / "archive", tmp_path / "archive" / "ledgers", tmp_path / "archive" / "ledgers" / "7"]
        assert not [op for op in log.ops if op.op == "fsync"]  # nothing synced while it is written
        objects.put("ledgers/7/copy.json", b"{}")  # another writer, into the same new folder
        replay = log.replay()
        for op in log.ops:
            replay.apply(op)
        assert replay.durable(tmp_path / "archive" / "ledgers" / "7" / "copy.json")
    replay = log.replay()
    for op in log.ops:
        replay.apply(op)
    assert replay.durable(tmp_path / "archive" / "ledgers" / "7" / "copy.data") and replay.problems == []
    assert objects.get("ledgers/7/copy.data") == b"entries"
