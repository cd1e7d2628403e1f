"""A restore's ids (old -> new) and ledgers done at a cluster's scale (issue 74): kept in a file
(:class:`bkctl.backup.idtable.IdTable`), at most ``HELD`` of them waiting in memory however
many the restore gives -- counted by the table, not in RSS -- looked up, never copied or walked
a ledger; the result lists them only up to ``LISTED_IDS``, ``--remap-table`` all of them."""

from __future__ import annotations

import json
import os

import pytest

from bkctl.backup import idtable
from bkctl.backup import restore as restoring
from bkctl.backup.journal import FilePlace, Journal
from bkctl.backup.storage import LocalStorage
from tests.unit.test_restore_stream import CountingBookKeeper, NoFeed, _backup, _target


@pytest.fixture
def most_held(monkeypatch) -> list[int]:
    """HELD made small, and the most entries any table held in memory, counted at each write."""
    monkeypatch.setattr(idtable, "HELD", 64)
    seen = [0]
    give, finish = idtable.IdTable.give, idtable.IdTable.finish

    def counted(method):
        def wrapper(self, *args):
            method(self, *args)
            seen[0] = max(seen[0], self.held)

        return wrapper

    monkeypatch.setattr(idtable.IdTable, "give", counted(give))
    monkeypatch.setattr(idtable.IdTable, "finish", counted(finish))
    return seen


def test_the_table_holds_a_batch_and_answers_from_its_file(most_held):
    table = idtable.IdTable()
    pairs = {10**12 + old: 2**40 + 7 * old for old in range(1000, 0, -1)}  # given in descending ids
    table.give_many(pairs.items())
    for old in range(0, 1000, 3):
        table.finish(10**12 + old)
    assert most_held[0] <= 64 < len(pairs)
    assert table.ids == pairs and table.ids.get(5) is None and 10**12 + 1 in table.ids
    assert list(table.ids.pairs()) == sorted(pairs.items())  # ascending, read a page at a time
    assert table.done == {10**12 + old for old in range(0, 1000, 3)} and 10**12 + 1 not in table.done
    assert len(table.done) == 334 and table.done | {1} == {1, *table.done}
    table.give(10**12 + 1, 99)  # given again: the last one counts
    assert table.ids[10**12 + 1] == 99 and len(table.ids) == 1000
    assert os.listdir(table.directory) == ["ids.sqlite"]
    table.close()
    assert not os.path.exists(table.directory)


def test_a_restore_under_new_ids_holds_a_batch_of_them_and_writes_the_table_whole(tmp_path, monkeypatch, most_held):
    storage, ids = _backup(tmp_path, 1500)
    monkeypatch.setattr(restoring, "ChunkFeed", NoFeed)
    monkeypatch.setattr(restoring, "LISTED_IDS", 1000)
    monkeypatch.setattr(idtable.IdMap, "__iter__", lambda self: pytest.fail("every id walked"))
    bk = CountingBookKeeper()
    table = tmp_path / "ids.json"
    doc = restoring.restore_backup(_target(), bk, storage, "zk://t", remap=True, parallel=2, remap_table=str(table))
    assert doc.ledgers_written == 1500 and most_held[0] <= 64
    assert doc.ledger_ids is None and doc.ledger_ids_count == 1500 and doc.remap_table == str(table)
    written = json.loads(table.read_text())
    assert sorted(map(int, written)) == sorted(ids) and sorted(written.values()) == sorted(bk.created)


def test_a_restore_in_its_own_ids_lists_them_below_the_limit(tmp_path, monkeypatch, most_held):
    storage, ids = _backup(tmp_path, 300)
    monkeypatch.setattr(restoring, "ChunkFeed", NoFeed)
    monkeypatch.setattr(idtable.IdMap, "__iter__", lambda self: pytest.fail("every id walked"))
    bk = CountingBookKeeper()
    doc = restoring.restore_backup(_target(), bk, storage, "zk://t", parallel=2, journal_path=str(tmp_path / "j"))
    assert doc.ledger_ids == {str(i): i for i in ids} and doc.ledger_ids_count == 300
    assert sorted(bk.created) == sorted(ids) and most_held[0] <= 64


def test_a_file_journal_is_read_back_a_batch_at_a_time(tmp_path, most_held):
    path = tmp_path / "journal"
    archive = LocalStorage(str(tmp_path / "a"))
    journal = Journal.open(FilePlace(str(path)), {"backup": "b1"}, archive, "k")
    for old in range(1000):
        journal.assign(old, 5000 + old)
    journal.save()
    for old in range(600):
        journal.finish_ledger(old)
    journal.save()
    journal.close()
    most_held[0] = 0
    again = Journal.open(FilePlace(str(path)), {}, archive, "k")
    assert most_held[0] <= 64
    assert again.ids == {old: 5000 + old for old in range(1000)} and again.done == set(range(600))
    assert again.doc["backup"] == "b1"
    again.close()


def test_a_restore_into_an_empty_cluster_asks_no_ledger_one_at_a_time(tmp_path, monkeypatch):
    storage, ids = _backup(tmp_path, 300)
    monkeypatch.setattr(restoring, "ChunkFeed", NoFeed)
    target = _target()
    monkeypatch.setattr(target.ledgers, "exists", lambda lid: pytest.fail(f"ledger {lid} asked alone"))
    doc = restoring.restore_backup(target, CountingBookKeeper(), storage, "zk://t", journal_path=str(tmp_path / "j"))
    assert doc.ledgers_written == 300


def test_the_ids_taken_in_the_target_are_found_beside_the_backups(tmp_path, monkeypatch):
    from bkctl.exitcodes import CONFLICT, CommandError
    from bkctl.wire.metadata.ledger import LedgerMetadata

    storage, ids = _backup(tmp_path, 300)
    target = _target()
    for _ in range(ids[150] + 1):  # the target holds ledgers 0..ids[150]: 151 of the backup's ids
        target.ledgers.create(LedgerMetadata.new(["127.0.0.1:3181"], 1, 1, password=b"pw").closed(-1, 0))
    with pytest.raises(CommandError) as err:
        restoring.restore_backup(target, CountingBookKeeper(), storage, "zk://t", journal_path=str(tmp_path / "j"))
    assert err.value.code == CONFLICT
    assert f"ledger {ids[0]} exists in the target cluster (151 of the backup's 300 ledger ids" in str(err.value)


def test_the_id_generator_is_moved_past_the_restored_ledgers_many_ids_a_call():
    from bkctl.ops.metadata_backup import move_id_generator_past

    target = _target()
    calls: list[int] = []
    one, many = target.ledger_ids.generate, target.ledger_ids.generate_many
    target.ledger_ids.generate = lambda: calls.append(1) or one()
    target.ledger_ids.generate_many = lambda n: calls.append(n) or many(n)
    above = move_id_generator_past(target, 25_000)
    assert above is not None and above > 25_000 and one() == above + 1
    assert len(calls) <= 5  # 25,001 ids in a few calls, not one a call


def test_a_restore_of_ledgers_alone_saves_its_journal_twice_ids_first(tmp_path, monkeypatch):
    """In the cluster, a restore with no Pulsar values saves its journal twice: every id before
    the first ledger is created, then the ledgers done with the head saying finished (one save,
    after the last ledger is closed, on the command's critical path)."""
    from bkctl.backup import journal as journaling

    storage, ids = _backup(tmp_path, 20)
    monkeypatch.setattr(restoring, "ChunkFeed", NoFeed)
    monkeypatch.setattr(journaling, "_JOURNAL_EVERY", 3600.0)  # no save while ledgers finish
    target = _target()
    bk = CountingBookKeeper()
    saves: list[tuple[int, int]] = []  # (ledgers created by then, done lines in the save)
    save = target.restores.save

    def counted(key, chunks, head, count):
        saves.append((len(bk.created), b"".join(chunks.values()).count(b'["done"')))
        assert (b'"finished"' in head) == (len(saves) == 2)
        save(key, chunks, head, count)

    monkeypatch.setattr(target.restores, "save", counted)
    doc = restoring.restore_backup(target, bk, storage, "zk://t", remap=True, parallel=2)
    assert doc.ledgers_written == 20 and saves == [(0, 0), (20, 20)]
