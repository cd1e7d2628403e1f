"""How ``bkctl backup`` copies ledgers (:mod:`bkctl.backup.take`), with an in-memory store
and a fake client: batches sized by bytes, the data object stored while the next ledger is
read, and an archive that cannot be written stopping the backup."""

from __future__ import annotations

import contextlib

import pytest

from bkctl.backup.catalog import manifest_ledgers
from bkctl.backup.storage import LocalStorage
from bkctl.backup.take import Selection, batch_entries, take_backup, unreadable
from bkctl.wire.backup.archive import LedgerRecord
from bkctl.wire.backup.data_read import read_data
from bkctl.wire.errors import ObjectDenied, ObjectMissing, ObjectUnreachable
from tests.support.backup_fakes import FakeClient, closed_ledgers, payload


def test_a_batch_is_sized_by_bytes():
    assert batch_entries(1024 * 4096, 1024) == 256  # 4 KiB entries: 1 MiB a batch
    assert batch_entries(100 * 100_000, 100_000) == 8192  # small entries: many a batch, at most 8192
    assert batch_entries(1 << 30, 64) == 64  # large entries: at least 64
    assert batch_entries(0, 10) == 256  # an open ledger: its length is not known


def test_the_archive_failing_stops_the_backup_rather_than_naming_a_ledger_unreadable():
    for error in (ObjectDenied("read-only"), ObjectUnreachable("gone"), ObjectMissing("no folder")):
        assert unreadable(error) is None


def test_a_copy_reads_its_next_ledger_while_the_last_one_is_stored(tmp_path):
    store, ids = closed_ledgers(entries=300, size=512)
    bk = FakeClient(store, 512)
    overlapped: list[bool] = []

    class SlowStore(LocalStorage):
        """Storing a data object waits (a bounded time) for the next ledger's read to begin."""

        @contextlib.contextmanager
        def writing(self, name):
            with super().writing(name) as f:
                yield f
                if name.startswith(f"ledgers/{ids[0]}/") and name.endswith(".data"):
                    overlapped.append(bk.read_begun.wait(10))

    storage = SlowStore(str(tmp_path / "archive"))
    manifest = take_backup(store, bk, storage, Selection(ledgers=",".join(map(str, ids))), "zk://fake", parallel=1)
    assert overlapped == [True]  # one thread: the second ledger was read while the first was stored
    lines = list(manifest_ledgers(storage, manifest))
    assert [x.ledger_id for x in lines] == ids
    assert bk.batches == [2048, 2048]  # 1 MiB of 512-byte entries: 2048 a batch
    # each closed ledger's handle opened on the metadata the walk read: its znode not read again
    assert bk.opened == [] and bk.opened_closed == [(i, store.ledgers.read(i)[1]) for i in ids]
    for x in lines:  # every copy whole, its record written after its data
        record = LedgerRecord.decode(storage.get(x.record))
        with storage.open_read(record.data_object) as f:
            got = list(read_data(f, x.ledger_id, record.index_sha256))
        assert got == [(e, payload(x.ledger_id, e, 512)) for e in range(300)]


def test_a_copy_reads_its_next_ledger_while_the_last_one_is_still_written(tmp_path):
    """The thread that reads a copy does not write it (storing.py): with one thread, the next
    ledger's reads begin before a byte of the last one is written -- and what is stored is
    still every entry, each data object before its record (test_backup_durable.py)."""
    store, ids = closed_ledgers(entries=50, size=512)
    bk = FakeClient(store, 512)
    before_writing: list[bool] = []

    class SlowStore(LocalStorage):
        """Nothing of the first data object is written before the second ledger's read begins
        (a bounded wait)."""

        @contextlib.contextmanager
        def writing(self, name):
            with super().writing(name) as f:
                if name.startswith(f"ledgers/{ids[0]}/") and name.endswith(".data"):
                    before_writing.append(bk.read_begun.wait(10))
                yield f

    storage = SlowStore(str(tmp_path / "archive"))
    manifest = take_backup(store, bk, storage, Selection(ledgers=",".join(map(str, ids))), "zk://fake", parallel=1)
    assert before_writing == [True]
    for x in manifest_ledgers(storage, manifest):
        record = LedgerRecord.decode(storage.get(x.record))
        with storage.open_read(record.data_object) as f:
            assert [e for e, _ in read_data(f, x.ledger_id, record.index_sha256)] == list(range(50))


def test_a_copy_whose_reading_fails_leaves_no_object_and_is_named_unreadable(tmp_path):
    """A ledger whose reading fails midway (its bookies' answer) is unreadable; its writer,
    in a thread of its own, removes what it wrote; the other ledgers are copied."""
    from bkctl.backup.catalog import manifest_notes
    from bkctl.wire.client.errors import NoSuchEntry

    store, ids = closed_ledgers(entries=3000, size=512, ledgers=3)
    bk = FakeClient(store, 512)
    read_range = FakeClient.read_closed

    def failing(self, ledger_id, *args):
        for n, batch in enumerate(read_range(self, ledger_id, *args)):
            if ledger_id == ids[1] and n == 1:
                raise NoSuchEntry(f"ledger {ledger_id}: no bookie holds entry 2048")
            yield batch

    bk.read_closed = failing.__get__(bk)
    storage = LocalStorage(str(tmp_path / "archive"))
    manifest = take_backup(store, bk, storage, Selection(ledgers=",".join(map(str, ids))), "zk://fake", parallel=1)
    assert [x.ledger_id for x in manifest_ledgers(storage, manifest)] == [ids[0], ids[2]]
    assert [(n.ledger_id, n.kind) for n in manifest_notes(storage, manifest)] == [(ids[1], "unreadable")]
    assert list(storage.list(f"ledgers/{ids[1]}/")) == [] and storage.clean_partial() == 0


def test_a_record_that_cannot_be_stored_stops_the_backup_and_no_manifest_is_written(tmp_path):
    store, ids = closed_ledgers(entries=10, size=100)
    bk = FakeClient(store, 100)

    class NoRecords(LocalStorage):
        def put(self, name, data):
            if name.endswith(".json") and name.startswith("ledgers/"):
                raise ObjectDenied(f"{name}: permission denied")
            super().put(name, data)

    storage = NoRecords(str(tmp_path / "archive"))
    with pytest.raises(ObjectDenied):
        take_backup(store, bk, storage, Selection(ledgers=",".join(map(str, ids))), "zk://fake", parallel=2)
    assert list(storage.list("backups/")) == []


def test_a_first_backup_connects_to_its_ledgers_bookies_before_its_first_copy(tmp_path):
    """Issue 74: the bookies of the ledgers named are looked up in one go and connected to up
    front; a backup of the same selection into the archive again (which may copy nothing)
    connects at its first copy, as before."""
    from tests.support.backup_fakes import BOOKIES

    store, ids = closed_ledgers(entries=10, size=100, ledgers=3)
    bk = FakeClient(store, 100)
    connected_at_first_read: list[int] = []
    reading = bk.reading

    def first_read(ledger_id: int) -> None:
        connected_at_first_read.append(len(bk.connected))
        reading(ledger_id)

    bk.reading = first_read
    storage = LocalStorage(str(tmp_path / "archive"))
    selection = Selection(ledgers=",".join(map(str, ids)))
    take_backup(store, bk, storage, selection, "zk://fake", parallel=1)
    assert bk.connected == [set(BOOKIES)] and connected_at_first_read[0] == 1
    take_backup(store, bk, storage, selection, "zk://fake", parallel=1)
    assert bk.connected == [set(BOOKIES)]  # not again: the second backup copies nothing
