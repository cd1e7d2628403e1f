"""bookied.storage: write cache, entry logs, LMDB index, ledger state, GC, replay, kill -9."""

from __future__ import annotations

import hashlib
import os
import random
import threading
import time

import pytest

from bkctl.bookied import storage as es
from bkctl.bookied.journal import EntryRecord, ExplicitLacRecord, FenceRecord, Journal, MasterKeyRecord
from bkctl.bookied.storage import EntryCorrupted, EntryStore, WriteCacheFull, entry_log
from bkctl.wire import fastpath
from tests.support import crash
from tests.support.compaction import compact_below

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def data(ledger: int, entry: int, size: int = 100, tag: bytes = b"") -> bytes:
    seed = hashlib.sha256(b"%d/%d/%s" % (ledger, entry, tag)).digest()
    return (seed * (size // 32 + 1))[:size]


def log_files(d) -> list[str]:
    return sorted(n for n in os.listdir(os.path.join(d, "current")) if n.endswith(es.LOG_SUFFIX))


@pytest.fixture
def sdir(tmp_path):
    return str(tmp_path / "ledgers")


def test_put_get_from_cache_then_disk_then_reopen(sdir):
    s = EntryStore(sdir, twins=fastpath.selected())
    assert s.get_entry(1, 0) is None and s.last_entry_id(1) is None and not s.has_ledger(1)
    for l in (1, 2):
        for e in range(50):
            s.put_entry(l, e, data(l, e))
    assert s.get_entry(1, 7) == data(1, 7)
    assert s.last_entry_id(2) == 49 and s.has_ledger(2) and s.ledger_ids() == [1, 2]
    assert s.cached_bytes == 100 * 100
    assert log_files(sdir) == []  # nothing written before a flush
    res = s.flush()
    assert res.entries == 100 and res.bytes == 100 * 100 and s.cached_bytes == 0
    assert len(log_files(sdir)) == 1
    assert all(s.get_entry(l, e) == data(l, e) for l in (1, 2) for e in range(50))
    assert s.get_entry(1, 50) is None and s.get_entry(3, 0) is None
    loc = s.location(2, 3)
    assert loc is not None and loc.length == 100 + 24
    s.close()
    s = EntryStore(sdir, twins=fastpath.selected())
    assert s.ledger_ids() == [1, 2] and s.last_entry_id(1) == 49
    assert all(s.get_entry(l, e) == data(l, e) for l in (1, 2) for e in range(50))
    # a new log per open, created lazily
    s.put_entry(1, 50, data(1, 50))
    s.flush()
    assert len(log_files(sdir)) == 2
    s.close()
    s = EntryStore(sdir, twins=fastpath.selected())
    assert s.get_entry(1, 50) == data(1, 50) and s.last_entry_id(1) == 50
    s.close()


def test_invalid_ids_rejected(sdir):
    with EntryStore(sdir, twins=fastpath.selected()) as s:
        with pytest.raises(ValueError):
            s.put_entry(1, -1, b"x")
        with pytest.raises(ValueError):
            s.put_entry(-5, 0, b"x")
        assert s.get_entry(1, -1) is None


def test_ledger_state_persists(sdir):
    s = EntryStore(sdir, twins=fastpath.selected())
    s.set_master_key(9, b"K" * 20)
    assert s.has_ledger(9) and s.get_master_key(9) == b"K" * 20
    assert s.last_entry_id(9) is None and not s.is_fenced(9)
    assert s.set_fenced(9) is True
    assert s.set_fenced(9) is False
    s.set_explicit_lac(9, b"lacbody")
    s.set_master_key(10, b"")
    s.flush()
    s.set_explicit_lac(9, b"lac2")  # not flushed: close() flushes
    s.close()
    s = EntryStore(sdir, twins=fastpath.selected())
    assert s.get_master_key(9) == b"K" * 20 and s.is_fenced(9) and s.get_explicit_lac(9) == b"lac2"
    assert s.get_master_key(10) == b"" and not s.is_fenced(10) and s.get_explicit_lac(10) is None
    assert s.get_master_key(11) is None and s.get_explicit_lac(11) is None and not s.is_fenced(11)
    s.close()
    s = EntryStore(sdir, twins=fastpath.selected())
    s.set_fenced(10)
    s.close(flush=False)  # state changes without a flush are lost (the journal has them)
    s = EntryStore(sdir, twins=fastpath.selected())
    assert not s.is_fenced(10)
    s.close()


def test_reput_replaces_in_cache_and_on_disk(sdir):
    s = EntryStore(sdir, twins=fastpath.selected())
    for e in range(10):
        s.put_entry(1, e, data(1, e))
    s.put_entry(1, 3, b"new3")
    assert s.get_entry(1, 3) == b"new3"
    assert s.cached_bytes == 9 * 100 + 4
    s.flush()
    assert s.get_entry(1, 3) == b"new3"
    s.close()
    s = EntryStore(sdir, twins=fastpath.selected())
    old_logs = log_files(sdir)
    for e in range(10):  # recovery re-adds every entry: the old log has no live entry left
        s.put_entry(1, e, data(1, e, tag=b"v2"))
    s.flush()
    assert all(s.get_entry(1, e) == data(1, e, tag=b"v2") for e in range(10))
    assert old_logs[0] not in log_files(sdir)
    usage = s.disk_usage()
    assert usage["live_entries"] == 10 and usage["entry_logs"] == 1
    s.close()


def test_delete_ledger_and_log_gc(sdir):
    s = EntryStore(sdir, log_size_limit=4096, twins=fastpath.selected())
    for e in range(100):  # ledger 1 fills logs on its own, then both ledgers share logs
        s.put_entry(1, e, data(1, e))
    s.flush()
    for e in range(100, 150):
        s.put_entry(1, e, data(1, e))
        s.put_entry(2, e, data(2, e))
    s.set_master_key(1, b"k")
    s.set_fenced(1)
    s.flush()
    logs_before = log_files(sdir)
    assert len(logs_before) > 3
    s.put_entry(1, 150, b"cached")
    assert s.delete_ledger(1) == 150
    assert not s.has_ledger(1) and s.get_entry(1, 5) is None and s.get_entry(1, 150) is None
    assert s.last_entry_id(1) is None and s.get_master_key(1) is None and not s.is_fenced(1)
    assert s.ledger_ids() == [2]
    logs_after = log_files(sdir)
    assert len(logs_after) < len(logs_before)
    assert all(s.get_entry(2, e) == data(2, e) for e in range(100, 150))
    s.close()
    s = EntryStore(sdir, log_size_limit=4096, twins=fastpath.selected())
    assert s.ledger_ids() == [2] and s.get_entry(1, 5) is None
    assert all(s.get_entry(2, e) == data(2, e) for e in range(100, 150))
    assert s.delete_ledger(2) == 50
    assert s.delete_ledger(2) == 0
    assert log_files(sdir) == []
    assert s.disk_usage()["entry_logs"] == 0
    s.close()


def test_compaction_rewrites_sparse_logs(sdir):
    s = EntryStore(sdir, log_size_limit=8192, twins=fastpath.selected())
    for e in range(200):
        for l in (1, 2, 3, 4):
            s.put_entry(l, e, data(l, e))
        if e % 4 == 3:
            s.flush()  # each flush writes 4 entries of every ledger: the logs mix all ledgers
    s.close()
    s = EntryStore(sdir, log_size_limit=8192, twins=fastpath.selected())
    for l in (1, 2, 3):
        s.delete_ledger(l)
    before = s.disk_usage()
    assert before["live_bytes"] < before["entry_log_bytes"] / 2
    stats = compact_below(s, 0.5)
    assert stats["logs"] > 0 and stats["moved_entries"] == 200
    after = s.disk_usage()
    assert after["entry_log_bytes"] < before["entry_log_bytes"] / 2
    assert after["live_entries"] == 200
    assert all(s.get_entry(4, e) == data(4, e) for e in range(200))
    assert compact_below(s, 0.5)["logs"] == 0
    s.close()
    s = EntryStore(sdir, twins=fastpath.selected())
    assert all(s.get_entry(4, e) == data(4, e) for e in range(200))
    s.close()


def test_write_cache_bound_and_flush_hint(sdir):
    hints = []
    s = EntryStore(
        sdir, write_cache_max_bytes=10_000, on_flush_needed=lambda: hints.append(1), twins=fastpath.selected()
    )
    for e in range(49):
        s.put_entry(1, e, b"x" * 100)
    assert hints == []
    s.put_entry(1, 49, b"x" * 100)  # half full
    assert hints == [1]
    for e in range(50, 100):
        s.put_entry(1, e, b"x" * 100)
    with pytest.raises(WriteCacheFull):
        s.put_entry(1, 100, b"x")
    assert hints == [1]
    assert s.last_entry_id(1) == 99
    s.flush()
    s.put_entry(1, 100, b"x")
    s.close()
    # a single entry larger than the cache is still accepted into an empty cache
    with EntryStore(sdir, write_cache_max_bytes=10, twins=fastpath.selected()) as s:
        s.put_entry(5, 0, b"y" * 100)
        assert s.get_entry(5, 0) == b"y" * 100


def test_entries_between(sdir):
    s = EntryStore(sdir, twins=fastpath.selected())
    for e in range(20):
        s.put_entry(1, e, data(1, e, 50))
    s.flush()
    for e in range(20, 30):
        s.put_entry(1, e, data(1, e, 50))  # half cached, half on disk
    s.put_entry(1, 31, b"after a gap")
    want = [data(1, e, 50) for e in range(30)]
    assert s.entries_between(1, 0) == want
    assert s.entries_between(1, 15, 24) == want[15:25]
    assert s.entries_between(1, 15, max_count=3) == want[15:18]
    assert s.entries_between(1, 15, max_bytes=120) == want[15:17]
    assert s.entries_between(1, 15, max_bytes=10) == want[15:16]  # always at least one
    assert s.entries_between(1, 30) == []
    assert s.entries_between(2, 0) == []
    s.close()


def flushed_store(sdir, entries: int, **kw) -> EntryStore:
    """A store holding entries 0..entries-1 of ledger 1, flushed to its entry logs."""
    s = EntryStore(sdir, **kw, twins=fastpath.selected())
    for e in range(entries):
        s.put_entry(1, e, data(1, e))
    s.flush()
    return s


def corrupt(s: EntryStore, sdir, ledger: int, entry: int) -> None:
    """Overwrite two bytes in the middle of the entry's record."""
    loc = s.location(ledger, entry)
    with open(os.path.join(sdir, "current", es.log_name(loc.log_id)), "r+b") as f:
        f.seek(loc.offset + 40)
        f.write(b"\xff\xee")


def test_corrupted_log_detected_on_read(sdir):
    s = flushed_store(sdir, 5)
    corrupt(s, sdir, 1, 2)
    with pytest.raises(EntryCorrupted) as info:
        s.get_entry(1, 2)
    assert isinstance(info.value, OSError)
    assert s.get_entry(1, 3) == data(1, 3)
    s.close()


def test_open_cleans_uncommitted_log_data(sdir):
    s = EntryStore(sdir, twins=fastpath.selected())
    s.put_entry(1, 0, b"committed")
    s.flush()
    s.close()
    cur = os.path.join(sdir, "current")
    (log,) = log_files(sdir)
    size = os.path.getsize(os.path.join(cur, log))
    with open(os.path.join(cur, log), "ab") as f:
        f.write(b"torn flush tail")
    orphan = os.path.join(cur, es.log_name(77))
    with open(orphan, "wb") as f:
        f.write(entry_log.encode_log_header(77) + es.encode_log_record(1, 1, b"never indexed"))
    s = EntryStore(sdir, twins=fastpath.selected())
    assert not os.path.exists(orphan)
    assert os.path.getsize(os.path.join(cur, log)) == size
    assert s.get_entry(1, 0) == b"committed" and s.get_entry(1, 1) is None
    s.put_entry(1, 1, b"new")
    s.flush()
    assert max(int(n.split(".")[0], 16) for n in log_files(sdir)) > 77  # ids never reused
    s.close()


def flush_failing(s: EntryStore, monkeypatch) -> None:
    """A flush of ``s`` whose fdatasync fails (EIO): it raises, the entries stay cached."""

    def broken(fd):
        raise OSError(5, "EIO")

    with monkeypatch.context() as m:
        m.setattr(os, "fdatasync", broken)
        with pytest.raises(OSError):
            s.flush()


def test_flush_failure_keeps_entries_and_retries(sdir, monkeypatch):
    s = EntryStore(sdir, twins=fastpath.selected())
    s.put_entry(1, 0, b"a")
    flush_failing(s, monkeypatch)
    s.put_entry(1, 1, b"b")
    assert s.get_entry(1, 0) == b"a" and s.get_entry(1, 1) == b"b"
    assert s.flush().entries == 2
    s.close()
    s = EntryStore(sdir, twins=fastpath.selected())
    assert s.get_entry(1, 0) == b"a" and s.get_entry(1, 1) == b"b"
    s.close()


def test_after_a_failed_flush_the_cache_counts_its_bytes_as_they_are(sdir, monkeypatch):
    """The next flush merges the adds since into the half a failed one left: newer copies win,
    and the bytes counted are those held (a re-put of another size replaces its old count)."""
    s = EntryStore(sdir, twins=fastpath.selected())
    for e in range(10):
        s.put_entry(1, e, data(1, e, 100))
    s.put_entry(2, 0, data(2, 0, 50))
    flush_failing(s, monkeypatch)
    s.put_entry(1, 3, data(1, 3, 30))  # a newer copy of an entry in the failed flush's half
    s.put_entry(1, 10, data(1, 10, 70))
    s.put_entry(3, 0, data(3, 0, 20))
    held = 9 * 100 + 30 + 70 + 50 + 20
    assert s.cached_bytes == held + 100  # (both copies of 1/3 held until the halves merge)
    flush_failing(s, monkeypatch)  # (merged, and left in the write cache again)
    assert s.cached_bytes == held
    result = s.flush()
    assert (result.entries, result.bytes, s.cached_bytes) == (13, held, 0)
    assert s.get_entry(1, 3) == data(1, 3, 30) and s.get_entry(3, 0) == data(3, 0, 20)
    s.close()


def test_a_failed_flush_gives_back_the_bytes_it_wrote(sdir, monkeypatch):
    """Issue 73, point 9: a flush that met ENOSPC left what it wrote in the entry logs until the
    next open -- on a full disk, the room the next checkpoint needed.  It is cut back at once: the
    log with committed entries to its committed size, a log the flush started is removed."""
    s = EntryStore(sdir, log_size_limit=4096, twins=fastpath.selected())
    s.put_entry(1, 0, b"committed")
    s.flush()
    cur = os.path.join(sdir, "current")
    before = {name: os.path.getsize(os.path.join(cur, name)) for name in log_files(sdir)}
    for e in range(1, 40):  # more than one log's worth: the flush rolls into new logs
        s.put_entry(1, e, data(1, e, size=500))
    real = os.fdatasync

    def no_space(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fdatasync", no_space)
    with pytest.raises(OSError):
        s.flush()
    monkeypatch.setattr(os, "fdatasync", real)
    assert {name: os.path.getsize(os.path.join(cur, name)) for name in log_files(sdir)} == before
    assert s.get_entry(1, 39) == data(1, 39, size=500)  # still in the write cache
    assert s.flush().entries == 39  # and the next flush writes it
    s.close()
    s = EntryStore(sdir, twins=fastpath.selected())
    assert [s.get_entry(1, e) for e in range(40)] == [b"committed"] + [data(1, e, size=500) for e in range(1, 40)]
    s.close()


def test_journal_replay_is_idempotent(sdir):
    recs = (
        [MasterKeyRecord(3, b"key")]
        + [EntryRecord(3, e, data(3, e)) for e in range(30)]
        + [ExplicitLacRecord(3, b"lac"), FenceRecord(3), EntryRecord(3, 5, b"recovery re-add")]
    )
    s = EntryStore(sdir, write_cache_max_bytes=1000, twins=fastpath.selected())  # forces flushes during apply
    for r in recs:
        s.apply(r)
    s.close()
    s = EntryStore(sdir, write_cache_max_bytes=1000, twins=fastpath.selected())
    for r in recs:  # the same records again (crash before the checkpoint)
        s.apply(r)
    s.flush()
    assert s.get_master_key(3) == b"key" and s.is_fenced(3) and s.get_explicit_lac(3) == b"lac"
    assert s.get_entry(3, 5) == b"recovery re-add" and s.get_entry(3, 29) == data(3, 29)
    assert s.last_entry_id(3) == 29
    assert s.disk_usage()["live_entries"] == 30
    with pytest.raises(TypeError):
        s.apply("nope")
    s.close()


def test_reads_during_concurrent_flushes(sdir):
    s = EntryStore(sdir, log_size_limit=64 * 1024, twins=fastpath.selected())
    stop = threading.Event()
    errors = []

    def flusher():
        try:
            while not stop.is_set():
                s.flush()
                time.sleep(0.001)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=flusher)
    t.start()
    try:
        for e in range(3000):
            s.put_entry(1, e, data(1, e))
            back = random.randrange(0, e + 1)
            assert s.get_entry(1, back) == data(1, back)
            assert s.get_entry(1, e) == data(1, e)
    finally:
        stop.set()
        t.join()
    assert not errors
    s.close()


def test_reads_at_every_piece_of_a_flush_of_big_ledgers_find_every_entry(sdir, monkeypatch):
    """A flush works a big ledger a slice at a time and frees the flushed half after the write
    cache let go of it: at each of its pauses (paced) another thread reads every entry, from the
    cache or the log, and finds it; the log holds each ledger's entries in id order, however
    they came in."""
    from bkctl.bookied.storage import pacing
    from bkctl.bookied.storage import store as store_module

    n = 4 * pacing.FLUSH_SLICE + 100  # past where a ledger's dict is let go of in slices
    ids = list(range(n))
    late = ids[pacing.FLUSH_SLICE : 2 * pacing.FLUSH_SLICE]  # (recovery adds: a slice out of order)
    order = {1: ids, 2: ids[: pacing.FLUSH_SLICE] + ids[2 * pacing.FLUSH_SLICE :] + late, 3: ids[::-1]}
    s = EntryStore(sdir, twins=fastpath.selected())
    for lid, eids in order.items():
        s.put_entries(lid, eids, [data(lid, e, 40) for e in eids])
    want = {lid: [data(lid, e, 40) for e in ids] for lid in order}
    go, done = threading.Event(), threading.Event()
    pauses, wrong = [], []

    class ReadAtEachPause(pacing.FlushPace):
        def __init__(self, hurry=None):
            super().__init__(hurry=hurry)

        def __call__(self) -> None:
            pauses.append(s.cached_bytes)
            go.set()
            assert done.wait(30)
            done.clear()

    def reader():
        while go.wait(30) and pauses[-1] >= 0:
            go.clear()
            for lid in order:
                got = s.get_entries(lid, ids)
                if got != want[lid] or s.get_entry(lid, n - 1) != want[lid][-1]:
                    wrong.append((lid, len(pauses)))
            done.set()

    monkeypatch.setattr(store_module, "FlushPace", ReadAtEachPause)
    t = threading.Thread(target=reader)
    t.start()
    try:
        result = s.flush(paced=True)
    finally:
        pauses.append(-1)
        go.set()
        t.join()
    assert result.entries == 3 * n and result.bytes == 3 * n * 40 and result.ledgers == 3
    assert not wrong and len(pauses) > 3 * 2 * (n // pacing.FLUSH_SLICE)  # (slices batched, freed)
    assert pauses[0] > 0 and pauses[-2] == 0  # the last pauses: the half freed, not cached
    assert s.cached_bytes == 0
    for lid in order:
        offsets = [s.location(lid, e).offset for e in ids]
        assert offsets == sorted(offsets)
    s.close()
    s = EntryStore(sdir, twins=fastpath.selected())
    assert all(s.get_entries(lid, ids) == want[lid] for lid in order)
    s.close()


def test_ledger_state_changed_while_a_flush_looks_for_it_is_written_by_that_flush_or_the_next(sdir):
    """A flush takes the changed ledgers a slice at a time under the state lock: a ledger
    fenced (or given its first entry) meanwhile, in another thread, is persisted by this flush
    or the next -- none is lost once both have run."""
    from bkctl.bookied.storage import pacing

    n = 3 * pacing.FLUSH_SLICE
    s = EntryStore(sdir, twins=fastpath.selected())
    for lid in range(n):
        s.set_master_key(lid, b"k%d" % lid)
    s.flush()
    start = threading.Barrier(2)

    def change():
        start.wait(30)
        for lid in reversed(range(n)):
            s.set_fenced(lid)
            if lid % 3 == 0:
                s.put_entry(lid, 0, data(lid, 0))

    t = threading.Thread(target=change)
    t.start()
    try:
        for lid in range(0, n, 2):  # (dirty again: this flush has rows to write)
            s.set_explicit_lac(lid, b"lac")
        start.wait(30)
        s.flush()
    finally:
        t.join()
    s.flush()
    s.close(flush=False)
    s = EntryStore(sdir, twins=fastpath.selected())
    assert all(s.is_fenced(lid) for lid in range(n))
    assert all(s.get_entry(lid, 0) == data(lid, 0) and s.last_entry_id(lid) == 0 for lid in range(0, n, 3))
    assert all(s.get_explicit_lac(lid) == b"lac" for lid in range(0, n, 2))
    s.close()


def test_index_survives_reopen_many_ledgers(sdir):
    s = EntryStore(sdir, twins=fastpath.selected())
    for l in range(200):
        s.set_master_key(l, b"%d" % l)
        for e in range(5):
            s.put_entry(l, e, data(l, e, 20))
    s.flush()
    s.close()
    s = EntryStore(sdir, twins=fastpath.selected())
    assert s.ledger_ids() == list(range(200))
    assert all(s.get_master_key(l) == b"%d" % l and s.last_entry_id(l) == 4 for l in range(200))
    assert all(s.get_entry(l, e) == data(l, e, 20) for l in range(200) for e in range(5))
    s.close()
    with pytest.raises(es.EntryStoreClosed):
        s.put_entry(1, 0, b"x")
    s.close()  # idempotent


# ------------------------------------------------------------------ kill -9, journal + entry store
CHILD = r"""
import os, sys, hashlib, threading, time
sys.path.insert(0, sys.argv[1])
from bkctl.bookied.errors import JournalFull
from bkctl.bookied.journal import Journal, EntryRecord, MasterKeyRecord, FenceRecord
from bkctl.bookied.storage import EntryStore, WriteCacheFull
from bkctl.wire import fastpath

d, first = sys.argv[2], int(sys.argv[3])

def payload(l, e):
    seed = hashlib.sha256(b"%d/%d/" % (l, e)).digest()
    return (seed * 8)[:1 + (e * 31) % 250]

store = EntryStore(d, write_cache_max_bytes=256 * 1024, log_size_limit=64 * 1024, twins=fastpath.selected())
j = Journal(d, max_group_wait_ms=1, max_size_mb=0.1, preallocate_mb=0.05, twins=fastpath.selected())
for rec in j.replay():
    store.apply(rec)
j.start()
m = j.mark()
store.flush()
j.checkpoint(m)
os.write(1, b"ready\n")

def checkpointer():
    while True:
        time.sleep(0.02)
        m = j.mark()
        store.flush()
        j.checkpoint(m)

threading.Thread(target=checkpointer, daemon=True).start()

def ack(tag):
    def cb(err):
        if err is None:
            os.write(1, tag + b"\n")
    return cb

i = first
while True:
    l, e = i % 7, i
    if e % 50 == 0:
        store.set_master_key(l, b"key%d" % l)
        j.append(MasterKeyRecord(l, b"key%d" % l), ack(b"k %d" % l))
    if e % 333 == 0:
        store.set_fenced(100 + l)
        j.append(FenceRecord(100 + l), ack(b"f %d" % (100 + l)))
    try:
        store.put_entry(l, e, payload(l, e))
    except WriteCacheFull:
        time.sleep(0.001)
        continue
    while True:
        try:
            j.append(EntryRecord(l, e, payload(l, e)), ack(b"e %d %d" % (l, e)))
            break
        except JournalFull:
            time.sleep(0.0005)
    i += 1
"""


def child_payload(l: int, e: int) -> bytes:
    seed = hashlib.sha256(b"%d/%d/" % (l, e)).digest()
    return (seed * 8)[: 1 + (e * 31) % 250]


def run_and_kill(args: list[str], rng: random.Random, max_run: float) -> list[str]:
    return crash.run_and_kill(CHILD, [REPO, *args], rng, 0.05, max_run)


def recover(d) -> EntryStore:
    store = EntryStore(d, write_cache_max_bytes=256 * 1024, log_size_limit=64 * 1024, twins=fastpath.selected())
    j = Journal(d, twins=fastpath.selected())
    for rec in j.replay():
        store.apply(rec)
    return store


def test_kill_minus_9_with_checkpoints_loses_nothing(tmp_path):
    d = str(tmp_path / "bookie")
    rng = random.Random(int(os.environ.get("STORE_CRASH_SEED", "99")))
    entries: set[tuple[int, int]] = set()
    keys: set[int] = set()
    fenced: set[int] = set()
    deadline = time.monotonic() + 20
    rounds = 0
    while rounds < 5 and time.monotonic() < deadline:
        for line in run_and_kill([d, str(rounds * 1_000_000)], rng, 0.6):
            kind, *rest = line.split()
            if kind == "e":
                entries.add((int(rest[0]), int(rest[1])))
            elif kind == "k":
                keys.add(int(rest[0]))
            elif kind == "f":
                fenced.add(int(rest[0]))
        rounds += 1
        store = recover(d)
        try:
            lost = [(l, e) for (l, e) in entries if store.get_entry(l, e) != child_payload(l, e)]
            assert not lost, f"round {rounds}: lost {len(lost)} acknowledged entries, e.g. {lost[:5]}"
            assert all(store.get_master_key(l) == b"key%d" % l for l in keys)
            assert all(store.is_fenced(l) for l in fenced)
            for l in range(7):
                mine = [e for (ll, e) in entries if ll == l]
                if mine:
                    assert store.last_entry_id(l) >= max(mine)
        finally:
            store.close(flush=False)
    assert rounds >= 3 and len(entries) > 500
    # checkpoints really trimmed the journal
    names = os.listdir(os.path.join(d, "current"))
    assert "bookied.lastmark" in names


def test_a_new_entry_log_calls_on_grow(tmp_path):
    grown = []
    store = EntryStore(str(tmp_path / "ledgers"), on_grow=lambda: grown.append(1), twins=fastpath.selected())
    try:
        store.put_entry(1, 0, b"x" * 100)
        store.flush()
        assert grown == [1]  # the bookie's write-path disk check
        store.put_entry(1, 1, b"y" * 100)
        store.flush()
        assert grown == [1]  # same log: nothing created
    finally:
        store.close()


def one_by_one(s: EntryStore, ledger: int, entries: list[int]) -> list:
    """What get_entries must give: get_entry of each, its EntryCorrupted in place of raising."""
    out = []
    for e in entries:
        try:
            out.append(s.get_entry(ledger, e))
        except EntryCorrupted as exc:
            out.append(exc)
    return out


def same_outcomes(got: list, want: list) -> bool:
    return len(got) == len(want) and all(
        (type(g) is type(w) and str(g) == str(w)) if isinstance(w, Exception) else g == w for g, w in zip(got, want)
    )


@pytest.fixture
def preads(monkeypatch):
    """The (length, offset) of every os.pread the entry store does."""
    calls = []
    real = os.pread

    def pread(fd, n, off):
        calls.append((n, off))
        return real(fd, n, off)

    monkeypatch.setattr(entry_log.os, "pread", pread)
    return calls


def test_get_entries_reads_cache_and_logs_like_get_entry(sdir, preads):
    s = EntryStore(sdir, twins=fastpath.selected())
    for e in range(0, 60):
        s.put_entry(1, e, data(1, e))
        s.put_entry(2, e, data(2, e))
    s.flush()
    for e in range(60, 70):
        s.put_entry(1, e, data(1, e))  # still in the write cache
    wanted = [5, 3, 61, 200, 3, -1, 59, 0, 65, 70, 2**62]
    want = [data(1, e) if 0 <= e < 70 else None for e in wanted]
    assert one_by_one(s, 1, wanted) == want
    preads.clear()
    assert s.get_entries(1, wanted) == want
    # the five flushed records (3 twice) lie in one log within the gap: one pread
    assert len(preads) == 1
    assert s.get_entries(1, []) == []
    assert s.get_entries(9, [0, 1]) == [None, None]
    every_other = list(range(0, 60, 2))
    preads.clear()
    assert s.get_entries(1, every_other) == [data(1, e) for e in every_other]
    assert len(preads) == 1
    s.close()


def test_get_entries_caps_the_span_and_the_gap_of_one_pread(sdir, preads, monkeypatch):
    s = flushed_store(sdir, 100)
    rec = s.location(1, 1).offset - s.location(1, 0).offset  # one record's bytes
    monkeypatch.setattr(entry_log, "READ_SPAN_MAX", 10 * rec)
    preads.clear()
    assert s.get_entries(1, list(range(100))) == [data(1, e) for e in range(100)]
    assert len(preads) == 10 and max(n for n, _ in preads) <= 10 * rec
    monkeypatch.setattr(entry_log, "READ_SPAN_MAX", 1024 * 1024)
    monkeypatch.setattr(entry_log, "READ_GAP_MAX", 2 * rec)
    preads.clear()
    ids = [0, 1, 4, 8, 9, 50]  # gaps of 2 records are read over, 3 and 40 are not
    assert s.get_entries(1, ids) == [data(1, e) for e in ids]
    assert sorted(preads) == sorted(
        [(5 * rec, s.location(1, 0).offset), (2 * rec, s.location(1, 8).offset), (rec, s.location(1, 50).offset)]
    )
    s.close()


def test_get_entries_a_corrupt_record_fails_only_its_entry(sdir, preads):
    s = flushed_store(sdir, 10)
    corrupt(s, sdir, 1, 4)
    ids = list(range(10))
    preads.clear()
    got = s.get_entries(1, ids)
    assert len(preads) == 1
    assert isinstance(got[4], EntryCorrupted) and isinstance(got[4], OSError)
    assert got[:4] + got[5:] == [data(1, e) for e in ids if e != 4]
    assert same_outcomes(got, one_by_one(s, 1, ids))
    s.close()


def test_get_entries_a_truncated_log_fails_the_records_past_its_end(sdir):
    s = flushed_store(sdir, 10)
    loc = s.location(1, 7)
    os.truncate(os.path.join(sdir, "current", es.log_name(loc.log_id)), loc.offset + 10)
    got = s.get_entries(1, list(range(10)))
    assert got[:7] == [data(1, e) for e in range(7)]
    assert all(isinstance(g, EntryCorrupted) for g in got[7:])
    assert same_outcomes(got, one_by_one(s, 1, list(range(10))))
    s.close()


def test_get_entries_after_compaction_and_deletion(sdir, monkeypatch):
    s = EntryStore(sdir, log_size_limit=8192, twins=fastpath.selected())
    for e in range(200):
        for l in (1, 2):
            s.put_entry(l, e, data(l, e))
        if e % 4 == 3:
            s.flush()
    ids = list(range(0, 200, 3))
    assert s.get_entries(2, ids) == [data(2, e) for e in ids]  # read fds now open on the old logs
    s.delete_ledger(1)
    assert s.get_entries(1, ids) == [None] * len(ids)
    assert compact_below(s, 0.9)["logs"] > 0
    assert s.get_entries(2, ids) == [data(2, e) for e in ids]
    # a log that goes away between the index lookup and its open is looked up again
    real_open, gone = s.entry_log.open_reader, []

    def open_reader(log_id):
        if not gone:
            gone.append(log_id)
            return None
        return real_open(log_id)

    s.entry_log.readers.clear()  # (leaks the fds of this test's store only)
    monkeypatch.setattr(s.entry_log, "open_reader", open_reader)
    assert s.get_entries(2, ids) == [data(2, e) for e in ids] and gone
    s.close()


def test_get_entries_of_a_missing_entry_log_is_eio_like_get_entry(sdir):
    flushed_store(sdir, 5).close()
    s = EntryStore(sdir, twins=fastpath.selected())
    for name in log_files(sdir):
        os.unlink(os.path.join(sdir, "current", name))
    got = s.get_entries(1, [0, 3, 9])
    assert isinstance(got[0], EntryCorrupted) and isinstance(got[1], EntryCorrupted) and got[2] is None
    assert "entry log is missing" in str(got[1])
    assert same_outcomes(got, one_by_one(s, 1, [0, 3, 9]))
    s.close()


def test_get_entries_an_entry_log_that_cannot_be_opened_fails_its_entries_only(sdir, monkeypatch):
    flushed_store(sdir, 5).close()
    s = EntryStore(sdir, twins=fastpath.selected())  # no read fd open yet
    s.put_entry(1, 9, b"cached")

    def out_of_fds(log_id):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(s.entry_log, "open_reader", out_of_fds)
    got = s.get_entries(1, [0, 9, 3, 7])
    assert isinstance(got[0], OSError) and got[0].errno == 24 and got[3] is None
    assert got[1] == b"cached" and isinstance(got[2], OSError)
    with pytest.raises(OSError):
        s.get_entry(1, 0)
    s.close()


def _puts_one_by_one(store, ledger_id, entry_ids, bodies) -> int:
    """put_entries' count as put_entry gives it, entry after entry."""
    put = 0
    for entry_id, body in zip(entry_ids, bodies):
        try:
            store.put_entry(ledger_id, entry_id, body)
        except es.WriteCacheFull:
            break
        put += 1
    return put


@pytest.mark.parametrize("counted", [False, True], ids=["size-counted-here", "size-given"])
@pytest.mark.parametrize(
    "before, entry_ids",
    [
        ([], [0, 1, 2, 3]),  # a new ledger's run: all at once
        ([0, 1], [2, 3, 4]),  # the next ones
        ([0, 1], [1, 2, 3]),  # one of them replaces a cached entry
        ([], [5, 6, 6, 7]),  # one twice
        ([0, 1], [2, 3, 3, 4]),  # one twice, after cached ones (which stay)
        ([], [9, 4, 7]),  # out of order: the highest is the last entry id
        ([0], list(range(1, 12))),  # more than the cache takes: those that fit
        ([], []),
    ],
)
def test_a_run_of_entries_is_put_as_one_by_one(tmp_path, before, entry_ids, counted):
    stores = [EntryStore(str(tmp_path / name), write_cache_max_bytes=1000, twins=fastpath.selected()) for name in "ab"]
    bodies = [data(1, e) + bytes([i]) for i, e in enumerate(entry_ids)]  # a replaced entry changes size
    try:
        for s in stores:
            for e in before:
                s.put_entry(1, e, data(1, e))
        size = sum(map(len, bodies)) if counted else None
        counts = (stores[0].put_entries(1, entry_ids, bodies, size), _puts_one_by_one(stores[1], 1, entry_ids, bodies))
        assert counts[0] == counts[1]
        for s in stores:
            assert (s.cached_bytes, s.last_entry_id(1), s.has_ledger(1)) == (
                stores[1].cached_bytes,
                stores[1].last_entry_id(1),
                stores[1].has_ledger(1),
            )
            assert [s.get_entry(1, e) for e in range(12)] == [stores[1].get_entry(1, e) for e in range(12)]
    finally:
        for s in stores:
            s.close()
