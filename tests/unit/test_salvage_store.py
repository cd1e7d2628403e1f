"""The store ``bookied --salvage`` serves (bookied/storage/salvage.py), on a Java bookie's captured
directories (tests/vectors/disk bk1): what its index files and journal hold, a damaged index file
reported and its entries served from the journal, a location past its log's end dropped once read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bkctl.bookied.storage import EntryCorrupted
from bkctl.bookied.storage.salvage import SalvageStore
from bkctl.wire.codecs.digest import entry_header

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "disk"


@pytest.fixture
def bk1(tmp_path) -> Path:
    for f in VECTORS.glob("bk1__*.bin"):
        dest = tmp_path / f.name[:-4].replace("__", "/").removesuffix(".head")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, dest)
    return tmp_path / "bk1"


def test_what_a_java_bookie_held_is_served(bk1):
    store = SalvageStore([str(bk1)])
    try:
        assert store.ledger_ids() == [0, 3, 5, 12] and store.damaged == []
        assert store.entry_ids(5) == [0, 1, 2] and store.last_entry_id(12) == 1
        for ledger_id in store.ledger_ids():
            for entry_id in store.entry_ids(ledger_id):
                assert entry_header(store.get_entry(ledger_id, entry_id))[:2] == (ledger_id, entry_id)
        assert store.get_entry(12, 7) is None and store.get_entry(99, 0) is None
        assert store.is_fenced(0) and not store.is_fenced(12) and store.get_master_key(12)
        assert store.set_fenced(12) is False  # no add is ever taken: fenced as far as a client can tell
    finally:
        store.close()


def test_a_damaged_index_is_reported_and_the_journal_serves_its_entries(bk1):
    (bk1 / "ledgers" / "current" / "0" / "0" / "0.idx").write_bytes(b"not an index file")
    store = SalvageStore([str(bk1)])
    try:
        assert [d.ledger_id for d in store.damaged] == [0]
        assert store.entry_ids(0) == [1, 2]  # from the journal
        assert entry_header(store.get_entry(0, 1))[:2] == (0, 1)
        assert store.summary()["from_journals"] >= 2
    finally:
        store.close()


def test_a_record_that_does_not_read_is_dropped_when_read(bk1):
    log = bk1 / "ledgers" / "current" / "0.log"
    log.write_bytes(log.read_bytes()[:1400])  # cuts ledger 5's entry 2 (at 1404) and ledger 12's
    for journal in (bk1 / "journal" / "current").glob("*.txn"):
        journal.unlink()  # no second copy
    store = SalvageStore([str(bk1)])
    try:
        assert store.entry_ids(5) == [0, 1, 2]
        with pytest.raises(EntryCorrupted):
            store.get_entry(5, 2)
        assert store.entry_ids(5) == [0, 1] and store.get_entry(5, 2) is None
        assert [(d.ledger_id, d.entry_id) for d in store.damaged] == [(5, 2)]
        assert entry_header(store.get_entry(5, 1))[:2] == (5, 1)
    finally:
        store.close()


def test_a_bookied_directory_whose_index_does_not_open_is_served_from_its_entry_logs(tmp_path):
    """Issue 73, point 10: bookied points a bookie whose index does not open at --salvage, which
    served only what the journals still held; it reads the entry logs then (the scan
    --rebuild-index reads them with), a damaged record reported and left out."""
    import os

    from bkctl.bookied.storage import EntryStore
    from bkctl.wire import fastpath

    s = EntryStore(str(tmp_path), log_size_limit=4096, twins=fastpath.selected())
    for e in range(40):
        s.put_entry(5, e, b"entry %d " % e * 30)
    s.flush()
    s.put_entry(5, 7, b"re-put")  # the later copy wins
    s.flush()
    s.close()
    current = tmp_path / "current"
    with open(current / "index.lmdb" / "data.mdb", "r+b") as f:
        f.write(b"\xa5" * 16384)
    (log,) = [n for n in sorted(os.listdir(current)) if n.endswith(".bel")][:1]
    data = bytearray((current / log).read_bytes())
    at = data.index(b"entry 2 ")  # entry 2's body
    data[at] ^= 0xFF
    (current / log).write_bytes(bytes(data))
    store = SalvageStore([str(tmp_path)])
    try:
        assert store.entry_ids(5) == [e for e in range(40) if e != 2]
        assert store.get_entry(5, 7) == b"re-put"
        assert all(store.get_entry(5, e) == b"entry %d " % e * 30 for e in range(40) if e not in (2, 7))
        assert any("index.lmdb" in d.where for d in store.damaged)
        assert any(d.entry_id == 2 for d in store.damaged)
    finally:
        store.close()
