"""A periodic checkpoint's flush is paced (``EntryStore.flush(paced=True)``): after each
piece of its work the flushing thread sleeps as long as the piece took, at most
``FlushPace.MAX_NAP``, and frees its rows a slice at a time -- and writes exactly
what an unpaced flush writes.  Paced or not, a big ledger is batched and freed a slice at a time."""

from __future__ import annotations

import hashlib
import os

import pytest

from bkctl.bookied.storage import EntryStore, entry_log, pacing
from bkctl.bookied.storage import store as store_module
from bkctl.bookied.storage.flush import drop_flushed, ledger_batches
from bkctl.bookied.storage.pacing import FlushPace, let_go
from bkctl.wire import fastpath


class FakeClock:
    def __init__(self):
        self.now = 100.0
        self.naps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.naps.append(seconds)
        self.now += seconds


def test_each_piece_is_followed_by_a_sleep_as_long_as_it_up_to_the_cap():
    clock = FakeClock()
    pace = FlushPace(sleep=clock.sleep, clock=clock)
    clock.now += 0.0004  # a piece of 0.4 ms
    pace()
    clock.now += 0.010  # a piece of 10 ms: the sleep stops at the cap
    pace()
    pace()  # nothing done since the last sleep: no sleep
    assert clock.naps == pytest.approx([0.0004, FlushPace.MAX_NAP])
    assert pace.slept == pytest.approx(0.0004 + FlushPace.MAX_NAP)


def test_no_sleep_once_hurried():
    clock = FakeClock()
    hurried = []
    pace = FlushPace(sleep=clock.sleep, clock=clock, hurry=lambda: bool(hurried))
    clock.now += 0.001
    pace()
    hurried.append(True)  # the write cache asked for the next flush
    clock.now += 0.001
    pace()
    assert clock.naps == pytest.approx([0.001])


def test_rows_are_freed_a_slice_at_a_time_with_a_pause_after_each():
    rows = [(b"k%d" % i, b"v") for i in range(2 * pacing.FLUSH_SLICE + 1)]
    pauses = []
    let_go(rows, lambda: pauses.append(len(rows)))
    assert rows == []
    assert pauses == [pacing.FLUSH_SLICE + 1, 1, 0]


def test_a_flushed_half_is_batched_and_freed_a_ledger_and_a_slice_at_a_time():
    """Neither end of a flush holds the GIL over a whole ledger: a big one is batched and
    freed with a pause after each slice; what the batches hold is what the half held, ids in
    order whichever order they came in, and nothing of the half is left after."""
    n = 5 * pacing.FLUSH_SLICE
    ids = list(range(n))
    shuffled = ids[pacing.FLUSH_SLICE :] + ids[: pacing.FLUSH_SLICE]
    half = {7: {e: b"%d" % e for e in shuffled}, 8: {e: b"x%d" % e for e in ids}, 9: {3: b"s", 1: b"f"}, 10: {}}
    pauses: list[int] = []
    batches = ledger_batches(half, lambda: pauses.append(1))
    assert [(b.ledger_id, b.entry_ids) for b in batches] == [(7, ids), (8, ids), (9, [1, 3])]
    assert batches[0].bodies == [b"%d" % e for e in ids] and batches[2].bodies == [b"f", b"s"]
    assert len(pauses) >= 2 * 5 + 1  # each big ledger's slices looked up, and the small one
    pauses.clear()
    held = list(batches)
    drop_flushed(half, batches, lambda: pauses.append(1))
    assert half == {} and batches == [] and all(b.entry_ids == [] and b.bodies == [] for b in held)
    assert len(pauses) >= 2 * 2 * 5  # ids and bodies, a slice at a time, of both big ledgers


def test_the_ledgers_of_a_half_of_many_are_batched_in_id_order():
    lids = list(range(1, 3 * pacing.SORT_SLICE, 2))
    shuffled = lids[1::2] + lids[::2][::-1]  # (as a cache holds them: by their first add)
    batches = ledger_batches({lid: {0: b"%d" % lid} for lid in shuffled}, None)
    assert [b.ledger_id for b in batches] == lids and batches[5].bodies == [b"%d" % lids[5]]


def body(ledger: int, entry: int) -> bytes:
    return hashlib.sha256(b"%d/%d" % (ledger, entry)).digest() * 5


def fill(store: EntryStore, ledgers: int, entries: int) -> None:
    for e in range(entries):
        for ledger in range(1, ledgers + 1):
            store.put_entry(ledger, e, body(ledger, e))


def logs_records(directory: str) -> dict[str, bytes]:
    """Each entry log's bytes after its header (which differs from log to log)."""
    current = os.path.join(directory, "current")
    return {
        n: open(os.path.join(current, n), "rb").read()[entry_log.LOG_HEADER_SIZE :]
        for n in sorted(os.listdir(current))
        if n.endswith(entry_log.LOG_SUFFIX)
    }


def test_a_paced_flush_writes_what_an_unpaced_one_writes_and_sleeps_between_pieces(tmp_path, monkeypatch):
    made: list[FlushPace] = []

    class RecordingPace(FlushPace):
        def __init__(self, hurry=None):
            self.naps: list[float] = []
            super().__init__(sleep=self.naps.append, hurry=hurry)
            made.append(self)

    monkeypatch.setattr(store_module, "FlushPace", RecordingPace)
    ledgers, entries = 4, 1500  # 6,000 rows of 160 B: several entry log chunks and index slices
    stores = {}
    for paced in (True, False):
        d = str(tmp_path / f"paced-{paced}")
        s = EntryStore(d, twins=fastpath.selected())
        fill(s, ledgers, entries)
        result = s.flush(paced=paced)
        assert result.entries == ledgers * entries
        s.close()
        stores[paced] = d
    assert len(made) == 1  # the unpaced flush made no pace
    chunks = -(-ledgers * entries * (160 + 24) // entry_log._WRITE_CHUNK)
    slices = -(-ledgers * entries // pacing.FLUSH_SLICE)
    # a pause after each ledger sorted, each chunk written, each index slice and each slice freed
    assert len(made[0].naps) >= ledgers + chunks + 2 * slices
    assert all(0 < nap <= FlushPace.MAX_NAP for nap in made[0].naps)
    records = logs_records(stores[True])
    assert records == logs_records(stores[False]) and sum(map(len, records.values())) > 6000 * 160
    reopened = EntryStore(stores[True], twins=fastpath.selected())
    try:
        for ledger in range(1, ledgers + 1):
            for entry in (0, entries // 2, entries - 1):
                assert reopened.get_entry(ledger, entry) == body(ledger, entry)
    finally:
        reopened.close()


def test_a_paced_flush_stops_napping_once_the_write_cache_asks_for_the_next_one(tmp_path, monkeypatch):
    store = EntryStore(str(tmp_path / "s"), twins=fastpath.selected())
    naps: list[float] = []

    class CacheFillsAtFirstNap(FlushPace):
        def __init__(self, hurry=None):
            super().__init__(sleep=self.nap, hurry=hurry)

        def nap(self, seconds: float) -> None:
            naps.append(seconds)
            store._flush_requested = True  # what put_entry sets when the active half passes half the bound

    monkeypatch.setattr(store_module, "FlushPace", CacheFillsAtFirstNap)
    try:
        fill(store, 4, 1500)
        assert store.flush(paced=True).entries == 6000
        assert len(naps) == 1  # full speed from then on
    finally:
        store.close()


def test_no_collection_walks_a_flush_and_the_collector_is_back_on_after_even_a_failed_one(tmp_path, monkeypatch):
    """A flush's lists (two per ledger, every entry in them) are walked by no garbage collection
    while it runs: the collector is off from its start to its end, and on again after it,
    whether it succeeded or not."""
    import gc

    seen: list[bool] = []

    class LookAtTheCollector(FlushPace):
        def __init__(self, hurry=None):
            super().__init__(sleep=lambda s: seen.append(gc.isenabled()), hurry=hurry)

    monkeypatch.setattr(store_module, "FlushPace", LookAtTheCollector)
    enabled = gc.isenabled()
    store = EntryStore(str(tmp_path / "s"), twins=fastpath.selected())
    try:
        gc.enable()
        fill(store, 4, 1500)
        assert store.flush(paced=True).entries == 6000
        assert seen and not any(seen) and gc.isenabled()
        fill(store, 1, 10)

        def full_disk(*args):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(entry_log.layout, "write_all", full_disk)
        with pytest.raises(OSError):
            store.flush()
        assert gc.isenabled()
    finally:
        monkeypatch.undo()
        store.close()
        if not enabled:
            gc.disable()
