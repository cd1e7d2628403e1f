"""``bkctl backup`` at a cluster's scale (issue 74): the incremental check of a closed ledger
whose copy the archive holds opens no handle (no second metadata read a ledger), and the
ledgers are handed to the copying threads a window at a time, not a million futures at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from bkctl.backup.catalog import manifest_ledgers
from bkctl.backup.storage import LocalStorage
from bkctl.backup.storing import Finisher
from bkctl.backup.take import Silent, _Copier, submitted
from bkctl.wire.metadata.ledger import LedgerMetadata, parse_ledger_metadata
from tests.support.fake_store import FakeMetadataStore

BOOKIES = ["127.0.0.1:3181", "127.0.0.1:3182", "127.0.0.1:3183"]


class CountingBookKeeper:
    """Opens handles of empty ledgers (nothing to read), counting them."""

    def __init__(self) -> None:
        self.opened: list[int] = []

    def open(self, ledger_id: int):
        self.opened.append(ledger_id)
        return self

    def connect(self, bookie_ids) -> None:
        pass


def test_a_closed_ledger_already_copied_opens_no_handle(tmp_path):
    store = FakeMetadataStore().start()
    store.ledgers.parse = parse_ledger_metadata  # the ZooKeeper store's decoder, which take.py calls
    ledger_id, _ = store.ledgers.create(LedgerMetadata.new(BOOKIES, 2, 2, password=b"").closed(-1, 0))
    bk = CountingBookKeeper()
    storage = LocalStorage(str(tmp_path))
    first = _Copier(store, bk, storage, Silent(), Finisher(1))
    slot = first.copy(ledger_id)
    first.finisher.wait()
    assert slot.line.copied and slot.line.inline is not None  # an empty ledger: its record in its line
    assert bk.opened == [] and list(storage.list("ledgers/")) == []  # no handle, no objects


def test_ledgers_are_submitted_a_window_at_a_time():
    taken: list[int] = []

    def ids():
        for i in range(10_000):
            taken.append(i)
            yield i

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = submitted(pool, lambda i: None, ids(), window=8)
        next(futures).result()
        assert len(taken) <= 8  # not every ledger's future made before the first is taken
        assert sum(1 for f in futures if f.result() is None) == 9_999


def test_the_incremental_check_reads_no_ledger_one_by_one(tmp_path):
    from bkctl.backup.take import Selection, take_backup

    store = FakeMetadataStore().start()
    store.ledgers.parse = parse_ledger_metadata
    ids = [store.ledgers.create(LedgerMetadata.new(BOOKIES, 2, 2, password=b"").closed(-1, 0))[0] for _ in range(5)]
    bk = CountingBookKeeper()
    storage = LocalStorage(str(tmp_path))
    first = take_backup(store, bk, storage, Selection(), store.uri)
    assert [x.ledger_id for x in manifest_ledgers(storage, first)] == ids
    store.calls.clear()
    again = take_backup(store, bk, storage, Selection(), store.uri)
    lines = list(manifest_ledgers(storage, again))
    assert [x.ledger_id for x in lines] == ids and not any(x.copied for x in lines)
    assert [c for c in store.calls if c[0].endswith("read_bytes")] == []  # the walk's reads serve the check
    assert bk.opened == []  # empty closed ledgers: never opened


def test_the_finisher_forgets_the_jobs_done_well_and_raises_a_failure():
    import gc
    from concurrent.futures import Future

    import pytest

    finisher = Finisher(2)
    for _ in range(500):
        finisher.submit(lambda: None)
    finisher.wait()
    gc.collect()
    assert sum(isinstance(o, Future) for o in gc.get_objects()) < 50  # not one a ledger copied

    def fails() -> None:
        raise OSError("archive not writable")

    finisher = Finisher(2)
    finisher.submit(lambda: None)
    finisher.submit(fails)
    with pytest.raises(OSError, match="not writable"):
        finisher.wait()


def test_a_full_backup_keeps_the_znode_the_walk_read_without_reading_it_again(tmp_path):
    """A closed ledger's record keeps its znode as stored, taken from the walk's read (a second
    read a ledger was most of a full backup's time for empty ledgers)."""
    import base64

    from bkctl.backup.take import Selection, take_backup

    store = FakeMetadataStore().start()
    store.ledgers.parse = parse_ledger_metadata
    ids = [store.ledgers.create(LedgerMetadata.new(BOOKIES, 2, 2, password=b"").closed(-1, 0))[0] for _ in range(5)]
    storage = LocalStorage(str(tmp_path))
    store.calls.clear()
    full = take_backup(store, CountingBookKeeper(), storage, Selection(), store.uri)
    lines = list(manifest_ledgers(storage, full))
    assert [x.ledger_id for x in lines] == ids and all(x.copied for x in lines)
    assert [c for c in store.calls if c[0].endswith("read_bytes")] == []  # no second read a ledger
    for x in lines:  # the record keeps the znode byte for byte
        assert base64.b64decode(x.inline.metadata_b64) == store.ledgers.read_bytes(x.ledger_id)[0]


def test_a_backup_of_named_ledgers_reads_each_znode_once(tmp_path):
    """The plan's probe of a ledger spec is the walk's read (issue 74: the front of a backup
    read the named ledgers' metadata twice before its first bookie byte)."""
    from bkctl.backup.take import Selection, take_backup

    store = FakeMetadataStore().start()
    store.ledgers.parse = parse_ledger_metadata
    ids = [store.ledgers.create(LedgerMetadata.new(BOOKIES, 2, 2, password=b"").closed(-1, 0))[0] for _ in range(4)]
    storage = LocalStorage(str(tmp_path))
    asked: list[int] = []
    read_many_stored = store.ledgers.read_many_stored

    def counted(ledger_ids):
        ledger_ids = list(ledger_ids)
        asked.extend(ledger_ids)
        return read_many_stored(ledger_ids)

    store.ledgers.read_many_stored = counted
    store.calls.clear()
    spec = f"{ids[2]},{ids[0]}-{ids[1]}"
    done = take_backup(store, CountingBookKeeper(), storage, Selection(ledgers=spec), store.uri)
    assert [x.ledger_id for x in manifest_ledgers(storage, done)] == ids[:3]
    assert sorted(asked) == ids[:3]  # each read once: the plan's read is the walk's
    assert [c for c in store.calls if c[0] in ("ledgers.read_many", "ledgers.read_bytes")] == []


def test_the_walk_takes_the_plans_reads_in_order_among_the_stores():
    from bkctl.backup.take import _reads

    store = FakeMetadataStore().start()
    store.ledgers.parse = parse_ledger_metadata
    ids = [store.ledgers.create(LedgerMetadata.new(BOOKIES, 2, 2, password=b"").closed(-1, 0))[0] for _ in range(5)]
    known = {r.ledger_id: r for r in store.ledgers.read_many_stored([ids[0], ids[2], ids[4]])}
    asked: list[list[int]] = []

    class Ledgers:
        @staticmethod
        def read_many_stored(ledger_ids):
            asked.append(list(ledger_ids))
            return store.ledgers.read_many_stored(asked[-1])

    class Store:
        ledgers = Ledgers

    got = list(_reads(Store, iter(ids), known))
    assert [r.ledger_id for r in got] == ids and all(r.raw is not None for r in got)
    assert asked == [[ids[1], ids[3]]]  # only what the plan did not read
    assert known == {}  # taken out: not held past the walk
    assert [r.ledger_id for r in _reads(Store, iter(ids[:2]), {})] == ids[:2]
