"""``bookied --rebuild-index`` (issue 73, point 10): a ledger directory's index made again from its
entry logs; a directory whose index does not open is refused by the store, never emptied."""

from __future__ import annotations

import os
import shutil

import pytest

from bkctl.bookied.storage import EntryStore
from bkctl.bookied.storage.errors import DirectoryInUse, IndexUnavailable
from bkctl.bookied.storage.rebuild import REBUILDING, rebuild_index
from bkctl.wire import fastpath


def body(ledger: int, entry: int) -> bytes:
    return b"%d/%d " % (ledger, entry) * 20


def filled(d) -> dict[int, dict[int, bytes]]:
    """Ledgers 1 (two flushes), 2 (fenced) and 3 (deleted after its entries were flushed into the
    logs it shares with the others); returns what should read back."""
    s = EntryStore(d, log_size_limit=8192, twins=fastpath.selected())
    for lid in (1, 2, 3):
        s.set_master_key(lid, b"key%d" % lid)
        for e in range(30):
            s.put_entry(lid, e, body(lid, e))
    s.set_fenced(2)
    s.flush()
    for e in range(30, 50):
        s.put_entry(1, e, body(1, e))
    s.put_entry(2, 3, body(2, 3) + b"again")  # a re-put: the later copy wins
    s.flush()
    s.delete_ledger(3)
    s.close()
    want = {1: {e: body(1, e) for e in range(50)}, 2: {e: body(2, e) for e in range(30)}}
    want[2][3] = body(2, 3) + b"again"
    return want


def read_back(d) -> tuple[dict, dict]:
    s = EntryStore(d, twins=fastpath.selected())
    try:
        got = {lid: {e: s.get_entry(lid, e) for e in s.entry_ids(lid)} for lid in s.ledger_ids()}
        states = {lid: (s.is_fenced(lid), s.get_master_key(lid)) for lid in s.ledger_ids()}
        return got, states
    finally:
        s.close()


def index_file(d) -> str:
    return os.path.join(d, "current", "index.lmdb", "data.mdb")


def test_an_index_that_opens_is_rebuilt_the_same_and_a_deleted_ledger_stays_deleted(tmp_path):
    d = str(tmp_path)
    want = filled(d)
    report = rebuild_index(d)
    assert report.deleted_ledgers_left_out == [3] and report.old_index is not None
    got, states = read_back(d)
    assert got == want
    assert states == {1: (False, b"key1"), 2: (True, b"key2")}
    again = rebuild_index(d)  # idempotent
    assert read_back(d) == (got, states) and again.entries == report.entries


@pytest.mark.parametrize("damage", ["corrupt", "deleted"])
def test_an_index_that_does_not_open_is_refused_then_rebuilt_from_the_entry_logs(tmp_path, damage):
    d = str(tmp_path)
    want = filled(d)
    logs = sorted(n for n in os.listdir(tmp_path / "current") if n.endswith(".bel"))
    if damage == "corrupt":
        with open(index_file(d), "r+b") as f:
            f.write(os.urandom(8192))
    else:
        shutil.rmtree(tmp_path / "current" / "index.lmdb")
    with pytest.raises(IndexUnavailable, match="does not open"):
        EntryStore(d, twins=fastpath.selected())
    # refused, not emptied: a new index would have had the store delete every log
    assert sorted(n for n in os.listdir(tmp_path / "current") if n.endswith(".bel")) == logs
    report = rebuild_index(d, metadata_exists=lambda ledger_id: ledger_id != 3)
    assert report.old_index is None and report.deleted_ledgers_left_out == [3]
    got, states = read_back(d)
    assert got == want
    # fencing unknown: every ledger fenced (a live writer changes its ensemble, nothing is lost)
    assert {lid: fenced for lid, (fenced, _key) in states.items()} == {1: True, 2: True}


def test_a_journal_still_holding_the_master_keys_and_fences_gives_them(tmp_path):
    from bkctl.bookied.journal import FenceRecord, Journal, MasterKeyRecord

    d = str(tmp_path / "ledgers")
    filled(d)
    j = Journal(str(tmp_path / "journal"), max_group_wait_ms=0, twins=fastpath.selected())
    j.start()
    done = []
    j.append(MasterKeyRecord(1, b"key1"), done.append)
    j.append(FenceRecord(2), done.append)
    j.force(done.append)
    j.close()
    shutil.rmtree(os.path.join(d, "current", "index.lmdb"))
    rebuild_index(d, [str(tmp_path / "journal")])
    _got, states = read_back(d)
    assert states[1] == (True, b"key1") and states[2] == (True, None) and 3 in states  # no metadata asked


def test_it_refuses_while_a_store_has_the_directory_open(tmp_path):
    d = str(tmp_path)
    filled(d)
    s = EntryStore(d, twins=fastpath.selected())
    try:
        with pytest.raises(DirectoryInUse, match="in use by another process"):
            rebuild_index(d)
        with pytest.raises(DirectoryInUse):
            EntryStore(d, twins=fastpath.selected())  # nor a second store
    finally:
        s.close()


def test_a_run_killed_before_it_put_its_index_in_place_is_started_over(tmp_path):
    d = str(tmp_path)
    want = filled(d)
    os.makedirs(tmp_path / "current" / REBUILDING)
    with open(tmp_path / "current" / REBUILDING / "data.mdb", "wb") as f:
        f.write(b"half written")
    # and killed between its two renames: the old index moved aside, no index.lmdb
    os.rename(tmp_path / "current" / "index.lmdb", tmp_path / "current" / "index.lmdb.replaced")
    report = rebuild_index(d)
    assert report.deleted_ledgers_left_out == [3]  # the moved-aside index still gave the ledger list
    assert read_back(d)[0] == want
    assert not (tmp_path / "current" / REBUILDING).exists()
    assert not (tmp_path / "current" / "index.lmdb.replaced").exists()
