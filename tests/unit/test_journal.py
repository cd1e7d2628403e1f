"""bookied.journal: records, group commit, rollover, checkpoints, damage, back-pressure, ENOSPC, kill -9."""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import random
import threading
import time

import pytest

from bkctl.bookied import journal as jmod
from bkctl.bookied.errors import JournalError, JournalFull, JournalNoSpace, JournalUnavailable
from bkctl.bookied.journal import EntryRecord, ExplicitLacRecord, FenceRecord, Journal, LogMark, MasterKeyRecord
from bkctl.wire import fastpath
from tests.support import crash
from tests.support.clocks import ManualClock

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WAIT = 10.0


def payload(i: int, size: int | None = None) -> bytes:
    if size is None:
        size = 1 + (i * 7919) % 300
    seed = hashlib.sha256(b"%d" % i).digest()
    return (seed * (size // 32 + 1))[:size]


class Acks:
    """Collects callback results; wait() until n have arrived."""

    def __init__(self):
        self.cond = threading.Condition()
        self.results: list = []

    def cb(self, tag):
        def done(err):
            with self.cond:
                self.results.append((tag, err))
                self.cond.notify_all()

        return done

    def wait(self, n: int, timeout: float = WAIT) -> list:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.results) >= n, timeout), (
                f"only {len(self.results)} of {n} callbacks"
            )
            return list(self.results)


def files(d) -> list[str]:
    cur = os.path.join(d, "current")
    return sorted(n for n in os.listdir(cur) if n.endswith(jmod.FILE_SUFFIX))


def replay_all(d, **kw) -> list:
    return list(Journal(d, twins=fastpath.selected()).replay(**kw))


@pytest.fixture
def jdir(tmp_path):
    return str(tmp_path / "journal")


def test_records_roundtrip(jdir):
    recs = [
        MasterKeyRecord(7, b"k" * 20),
        EntryRecord(7, 0, payload(0)),
        EntryRecord(7, 1, b""),
        ExplicitLacRecord(7, b"\x00" * 16 + b"digest"),
        FenceRecord(7),
        EntryRecord(2**62, 2**40, payload(5, 5000)),
        MasterKeyRecord(8, b""),
    ]
    acks = Acks()
    with Journal(jdir, max_group_wait_ms=0, twins=fastpath.selected()) as j:
        j.start()
        for n, r in enumerate(recs):
            j.append(r, acks.cb(n))
        res = acks.wait(len(recs))
    assert [t for t, _ in res] == list(range(len(recs)))
    assert all(e is None for _, e in res)
    assert replay_all(jdir) == recs


def test_encode_rejects_non_records():
    with pytest.raises(TypeError):
        jmod.encode_record(("not", "a", "record"))


def test_append_before_start_and_after_close(jdir):
    j = Journal(jdir, twins=fastpath.selected())
    with pytest.raises(JournalUnavailable):
        j.append(FenceRecord(1), lambda e: None)
    j.start()
    with pytest.raises(JournalError):
        j.start()
    with pytest.raises(JournalError):
        list(j.replay())
    j.close()
    with pytest.raises(JournalUnavailable):
        j.append(FenceRecord(1), lambda e: None)


def test_callback_after_fsync_and_deferred_before(jdir, monkeypatch):
    events = []
    real = os.fdatasync

    def fdatasync(fd):
        real(fd)
        events.append("fsync")

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    acks = Acks()
    with Journal(jdir, max_group_wait_ms=0, twins=fastpath.selected()) as j:
        j.start()
        j.append(EntryRecord(1, 0, b"a"), lambda e: (events.append("deferred"), acks.cb(0)(e)), sync=False)
        acks.wait(1)
        j.append(EntryRecord(1, 1, b"b"), lambda e: (events.append("sync"), acks.cb(1)(e)))
        acks.wait(2)
    assert events.index("deferred") < events.index("fsync")
    i_sync = events.index("sync")
    assert "fsync" in events[events.index("deferred") : i_sync]
    assert events[i_sync - 1] == "fsync"


def test_group_commit_one_write_and_fsync_per_group(jdir, monkeypatch):
    """Everything that arrives while an fsync runs is covered by the next single write + fsync."""
    gate = threading.Event()
    entered = threading.Event()
    real = os.fdatasync
    calls = []

    def slow_fdatasync(fd):
        calls.append(fd)
        entered.set()
        gate.wait(WAIT)
        real(fd)

    acks = Acks()
    with Journal(jdir, max_group_wait_ms=0, twins=fastpath.selected()) as j:
        j.start()
        monkeypatch.setattr(os, "fdatasync", slow_fdatasync)
        j.append(EntryRecord(1, 0, payload(0)), acks.cb(0))
        assert entered.wait(WAIT)
        for i in range(1, 1001):
            j.append(EntryRecord(1, i, payload(i)), acks.cb(i))
        assert j.pending_bytes > 0
        gate.set()
        res = acks.wait(1001)
        assert [t for t, _ in res] == list(range(1001))
        assert j.stats.groups == 2
        assert j.stats.writes == 2
        assert len(calls) == 2
        assert j.stats.max_group_records == 1000
    assert j.pending_bytes == 0


def test_group_wait_and_threshold(jdir):
    clock = ManualClock()
    acks = Acks()
    records = [EntryRecord(1, i, b"x" * 100) for i in range(40)]
    threshold = sum(len(jmod.encode_record(r)) for r in records)  # reached by the 40th record exactly
    with Journal(
        jdir,
        max_group_wait_ms=60_000,
        buffered_writes_threshold=threshold,
        monotonic=clock.monotonic,
        wait_on=clock.wait_on,
        twins=fastpath.selected(),
    ) as j:
        j.start()
        j.append(records[0], acks.cb(0))
        clock.wait_for_sleepers(1)  # the writer holds the record back for company
        assert acks.results == []
        for i in range(1, 40):
            j.append(records[i], acks.cb(i))  # the 40th fills the group: written now
        acks.wait(40)  # the clock has not moved: the threshold alone wrote the group
        assert j.stats.groups == 1
        slept = clock.sleeps
        j.append(EntryRecord(1, 40, b"y"), acks.cb(40))
        clock.wait_for_sleepers(slept + 1)
        clock.advance(59.999)
        clock.wait_for_sleepers(slept + 2)  # woke, 1 ms still to wait
        assert len(acks.results) == 40
        clock.advance(0.001)  # the group wait is over: written alone
        assert acks.wait(41)[-1] == (40, None)
        assert j.stats.groups == 2
        slept = clock.sleeps
        j.append(EntryRecord(1, 41, b"z"), acks.cb(41))
        clock.wait_for_sleepers(slept + 1)
        assert len(acks.results) == 41
    # close() flushes what is still waiting
    assert len(acks.wait(42)) == 42
    assert [r.entry_id for r in replay_all(jdir)] == list(range(42))


def test_group_wait_is_timed_from_the_oldest_record(jdir):
    clock = ManualClock()
    acks = Acks()
    with Journal(
        jdir, max_group_wait_ms=30, monotonic=clock.monotonic, wait_on=clock.wait_on, twins=fastpath.selected()
    ) as j:
        j.start()
        j.append(EntryRecord(1, 0, b"x"), acks.cb(0))
        clock.wait_for_sleepers(1)
        clock.advance(0.020)
        clock.wait_for_sleepers(2)
        j.append(EntryRecord(1, 1, b"x"), acks.cb(1))  # joins the group; does not restart its wait
        clock.advance(0.009)
        clock.wait_for_sleepers(3)
        assert acks.results == []
        clock.advance(0.001)  # 30 ms after the first record
        assert acks.wait(2) == [(0, None), (1, None)]
        assert j.stats.groups == 1


def test_force_covers_deferred_records(jdir, monkeypatch):
    synced = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (real(fd), synced.append(len(acks.results))))
    acks = Acks()
    with Journal(jdir, max_group_wait_ms=0, twins=fastpath.selected()) as j:
        j.start()
        for i in range(10):
            j.append(EntryRecord(3, i, b"d"), acks.cb(i), sync=False)
        j.force(acks.cb("force"))
        res = acks.wait(11)
        assert res[-1] == ("force", None)
        assert synced and synced[-1] >= 10  # the last fsync ran after the deferred callbacks
    assert len(replay_all(jdir)) == 10


def test_force_with_nothing_pending(jdir):
    acks = Acks()
    with Journal(jdir, twins=fastpath.selected()) as j:
        j.start()
        j.force(acks.cb("f"))
        assert acks.wait(1) == [("f", None)]


def test_threads_keep_per_thread_order(jdir):
    acks = Acks()
    n_threads, per = 4, 500
    with Journal(jdir, max_group_wait_ms=1, twins=fastpath.selected()) as j:
        j.start()

        def producer(t):
            for i in range(per):
                while True:
                    try:
                        j.append(EntryRecord(t, i, payload(i)), acks.cb((t, i)))
                        break
                    except JournalFull:
                        time.sleep(0.001)

        ths = [threading.Thread(target=producer, args=(t,)) for t in range(n_threads)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        acks.wait(n_threads * per)
        assert j.stats.groups < n_threads * per
    recs = replay_all(jdir)
    assert len(recs) == n_threads * per
    for t in range(n_threads):
        assert [r.entry_id for r in recs if r.ledger_id == t] == list(range(per))
        assert all(r.data == payload(r.entry_id) for r in recs)


def test_rollover_at_max_size(jdir):
    max_mb = 4096 / (1024 * 1024)  # 4 KiB files
    acks = Acks()
    with Journal(jdir, max_size_mb=max_mb, max_group_wait_ms=0, twins=fastpath.selected()) as j:
        j.start()
        for i in range(300):
            j.append(EntryRecord(1, i, payload(i, 100)), acks.cb(i))
            if i % 50 == 0:
                acks.wait(i + 1)  # several groups too
        acks.wait(300)
        assert j.stats.files_created > 5
    names = files(jdir)
    assert len(names) > 5
    for name in names[:-1]:
        assert os.path.getsize(os.path.join(jdir, "current", name)) <= 4096
    recs = replay_all(jdir)
    assert [r.entry_id for r in recs] == list(range(300))
    # a record larger than the file limit gets a file of its own
    with Journal(jdir, max_size_mb=max_mb, twins=fastpath.selected()) as j:
        j.start()
        j.append(EntryRecord(2, 0, payload(1, 10000)), acks.cb("big"))
        j.append(EntryRecord(2, 1, b"small"), acks.cb("small"))
        acks.wait(302)
    recs = replay_all(jdir)
    assert recs[-2:] == [EntryRecord(2, 0, payload(1, 10000)), EntryRecord(2, 1, b"small")]


def test_each_start_opens_a_new_file(jdir):
    ids = []
    for round_ in range(3):
        acks = Acks()
        j = Journal(jdir, twins=fastpath.selected())
        assert len(list(j.replay())) == round_
        j.start()
        ids.append(j.current_file_id)
        j.append(FenceRecord(round_), acks.cb(0))
        acks.wait(1)
        j.close()
    assert ids == sorted(ids) and len(set(ids)) == 3
    assert len(files(jdir)) == 3


def test_checkpoint_deletes_old_files_and_replay_starts_at_mark(jdir):
    max_mb = 2048 / (1024 * 1024)
    acks = Acks()
    j = Journal(jdir, max_size_mb=max_mb, max_group_wait_ms=0, twins=fastpath.selected())
    assert j.mark() == LogMark(0, 0)
    j.start()
    for i in range(100):
        j.append(EntryRecord(1, i, payload(i, 60)), acks.cb(i))
    acks.wait(100)
    mark = j.mark()
    assert mark.file_id == j.current_file_id
    for i in range(100, 150):
        j.append(EntryRecord(1, i, payload(i, 60)), acks.cb(i))
    acks.wait(150)
    with pytest.raises(ValueError):
        j.checkpoint(LogMark(j.mark().file_id + 5, 0))  # beyond durable data
    before = files(jdir)
    j.checkpoint(mark)
    after = files(jdir)
    assert len(after) < len(before)
    assert min(int(n.split(".")[0], 16) for n in after) == mark.file_id
    j.checkpoint(LogMark(1, 0))  # older marks are ignored
    assert files(jdir) == after
    j.close()
    j2 = Journal(jdir, twins=fastpath.selected())
    assert j2.last_checkpoint() == mark
    assert [r.entry_id for r in j2.replay()] == list(range(100, 150))
    # from the start of what is left: the mark's whole file, then the rest
    ids = [r.entry_id for r in Journal(jdir, twins=fastpath.selected()).replay(LogMark(0, 0))]
    assert ids == list(range(ids[0], 150)) and ids[0] < 100
    # the next start never reuses an id, even if every file was checkpointed away
    j2.start()
    m2 = j2.mark()
    j2.checkpoint(m2)
    assert files(jdir) == [jmod.file_name(m2.file_id)]
    j2.close()
    j3 = Journal(jdir, twins=fastpath.selected())
    assert list(j3.replay()) == []
    j3.start()
    assert j3.current_file_id == m2.file_id + 1
    j3.close()


def test_corrupt_mark_file_replays_everything(jdir, caplog):
    acks = Acks()
    with Journal(jdir, twins=fastpath.selected()) as j:
        j.start()
        j.append(EntryRecord(1, 0, b"a"), acks.cb(0))
        acks.wait(1)
        j.checkpoint(j.mark())
        j.append(EntryRecord(1, 1, b"b"), acks.cb(1))
        acks.wait(2)
    assert [r.entry_id for r in replay_all(jdir)] == [1]
    with open(os.path.join(jdir, "current", jmod.MARK_FILE), "r+b") as f:
        f.write(b"XXXX")
    with caplog.at_level(logging.ERROR, logger="bookied.journal"):
        assert [r.entry_id for r in replay_all(jdir)] == [0, 1]
    assert "checkpoint mark" in caplog.text


# ------------------------------------------------------------------ damaged files
def write_records(jdir, n, start=0, **kw) -> list:
    acks = Acks()
    with Journal(jdir, max_group_wait_ms=0, **kw, twins=fastpath.selected()) as j:
        for _ in j.replay():
            pass
        j.start()
        for i in range(start, start + n):
            j.append(EntryRecord(1, i, payload(i)), acks.cb(i))
        acks.wait(n)
        fid = j.current_file_id
        end = j.mark().offset
    return fid, end


def record_offsets(path) -> list[int]:
    return [off for off, _ in jmod.scan_file(path)]


def last_path(jdir):
    return os.path.join(jdir, "current", files(jdir)[-1])


def journal_said(caplog) -> list[str]:
    """What the journal logged: its own records only (another test's garbage, collected meanwhile,
    logs under other names)."""
    return [r.getMessage() for r in caplog.records if r.name == "bookied.journal"]


def test_torn_tail_truncated_mid_record(jdir, caplog):
    write_records(jdir, 20)
    path = last_path(jdir)
    offs = record_offsets(path)
    with open(path, "r+b") as f:
        f.truncate(offs[-1] + 11)  # cut the last record
    with caplog.at_level(logging.WARNING, logger="bookied.journal"):
        recs = replay_all(jdir)
    assert [r.entry_id for r in recs] == list(range(19))
    assert "replay of this file stops" in caplog.text
    assert os.path.getsize(path) == offs[-1]  # physically truncated
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="bookied.journal"):
        assert len(replay_all(jdir)) == 19
    assert journal_said(caplog) == []


def test_torn_tail_header_only_prefix(jdir, caplog):
    write_records(jdir, 3)
    path = last_path(jdir)
    offs = record_offsets(path)
    with open(path, "r+b") as f:
        f.truncate(offs[-1] + 3)  # not even a complete length field
    with caplog.at_level(logging.WARNING, logger="bookied.journal"):
        assert [r.entry_id for r in replay_all(jdir)] == [0, 1]
    assert "stops at offset" in caplog.text


def test_garbage_after_last_record(jdir, caplog):
    _fid, end = write_records(jdir, 10)
    path = last_path(jdir)
    with open(path, "r+b") as f:
        f.seek(end)
        f.write(os.urandom(300))
    with caplog.at_level(logging.WARNING, logger="bookied.journal"):
        assert [r.entry_id for r in replay_all(jdir)] == list(range(10))
    assert "discarding" in caplog.text
    assert os.path.getsize(path) == end


def test_garbage_far_in_preallocated_tail(jdir, caplog):
    _fid, end = write_records(jdir, 5)
    path = last_path(jdir)
    size = os.path.getsize(path)
    assert size > end + 1000  # preallocated
    with open(path, "r+b") as f:
        f.seek(size - 10)
        f.write(b"\x01" * 10)
    with caplog.at_level(logging.WARNING, logger="bookied.journal"):
        assert len(replay_all(jdir)) == 5
    assert "garbage" in caplog.text


def test_clean_preallocated_tail_is_silent(jdir, caplog):
    write_records(jdir, 5)
    with caplog.at_level(logging.WARNING, logger="bookied.journal"):
        assert len(replay_all(jdir)) == 5
    assert journal_said(caplog) == []


def test_bit_flip_in_last_record(jdir, caplog):
    write_records(jdir, 10)
    path = last_path(jdir)
    offs = record_offsets(path)
    with open(path, "r+b") as f:
        f.seek(offs[-1] + 30)
        b = f.read(1)
        f.seek(offs[-1] + 30)
        f.write(bytes([b[0] ^ 0x10]))
    with caplog.at_level(logging.WARNING, logger="bookied.journal"):
        assert [r.entry_id for r in replay_all(jdir)] == list(range(9))
    assert "bad checksum" in caplog.text


def test_corruption_followed_by_valid_records_in_last_file(jdir, caplog):
    """A bad record ends the last file's replay even if valid records follow (they were never acked)."""
    write_records(jdir, 10)
    path = last_path(jdir)
    offs = record_offsets(path)
    with open(path, "r+b") as f:
        f.seek(offs[4] + 5)  # inside the length field of record 4
        f.write(b"\xff")
    with caplog.at_level(logging.WARNING, logger="bookied.journal"):
        assert [r.entry_id for r in replay_all(jdir)] == list(range(4))
    assert "discarding" in caplog.text
    assert os.path.getsize(path) == offs[4]


def test_corruption_in_older_file_is_reported_not_truncated(jdir, caplog):
    write_records(jdir, 10)
    first = last_path(jdir)
    write_records(jdir, 5, start=10)
    offs = record_offsets(first)
    size = os.path.getsize(first)
    with open(first, "r+b") as f:
        f.seek(offs[6] + 20)
        f.write(b"\xde\xad")
    with caplog.at_level(logging.WARNING, logger="bookied.journal"):
        recs = replay_all(jdir)
    assert [r.entry_id for r in recs] == list(range(6)) + list(range(10, 15))
    assert os.path.basename(first) in caplog.text
    assert os.path.getsize(first) == size


def test_damaged_header(jdir, caplog):
    write_records(jdir, 3)
    write_records(jdir, 3, start=3)
    first = os.path.join(jdir, "current", files(jdir)[0])
    with open(first, "r+b") as f:
        f.write(b"NOPE")
    with caplog.at_level(logging.WARNING, logger="bookied.journal"):
        assert [r.entry_id for r in replay_all(jdir)] == [3, 4, 5]
    assert "bad magic" in caplog.text
    # a last file without a complete header (crash while creating it) is removed by replay
    last_id = int(files(jdir)[-1].split(".")[0], 16)
    for content in (b"BKD", b"", bytes(4096)):
        path = os.path.join(jdir, "current", jmod.file_name(999))
        with open(path, "wb") as f:
            f.write(content)
        assert [r.entry_id for r in replay_all(jdir)] == [3, 4, 5]
        assert not os.path.exists(path)
    # ... but not one that has data after a damaged header
    with open(path, "wb") as f:
        f.write(b"X" * 200)
    assert [r.entry_id for r in replay_all(jdir)] == [3, 4, 5]
    assert os.path.exists(path)
    os.unlink(path)
    j = Journal(jdir, twins=fastpath.selected())
    j.start()
    assert j.current_file_id == last_id + 1
    j.close()


# ------------------------------------------------------------------ back-pressure and errors
def test_back_pressure(jdir, monkeypatch):
    gate = threading.Event()
    entered = threading.Event()
    real = os.fdatasync

    def blocked(fd):
        entered.set()
        gate.wait(WAIT)
        real(fd)

    acks = Acks()
    j = Journal(jdir, max_group_wait_ms=0, max_queue_bytes=20_000, twins=fastpath.selected())
    j.start()
    monkeypatch.setattr(os, "fdatasync", blocked)
    accepted = 0
    rec_size = len(jmod.encode_record(EntryRecord(1, 0, payload(0, 100))))
    with pytest.raises(JournalFull):
        for i in range(10_000):
            j.append(EntryRecord(1, i, payload(i, 100)), acks.cb(i))
            accepted += 1
            if i == 0:
                assert entered.wait(WAIT)
    assert 0 < accepted < 10_000
    assert j.pending_bytes <= 20_000
    assert j.pending_bytes >= 20_000 - rec_size
    gate.set()
    res = acks.wait(accepted)
    assert all(e is None for _, e in res)
    deadline = time.monotonic() + WAIT
    while j.pending_bytes and time.monotonic() < deadline:
        time.sleep(0.01)
    assert j.pending_bytes == 0
    j.append(EntryRecord(1, accepted, payload(accepted, 100)), acks.cb("again"))
    acks.wait(accepted + 1)
    j.close()
    assert len(replay_all(jdir)) == accepted + 1


def test_single_record_larger_than_queue_limit_is_accepted_when_idle(jdir):
    acks = Acks()
    with Journal(jdir, max_queue_bytes=100, twins=fastpath.selected()) as j:
        j.start()
        j.append(EntryRecord(1, 0, b"z" * 1000), acks.cb(0))
        assert acks.wait(1) == [(0, None)]


def _enospc_on(monkeypatch, fd_getter, when):
    real = os.write

    def write(fd, data):
        if fd == fd_getter() and when():
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)


def test_enospc_fails_callbacks_and_keeps_acked_records(jdir, monkeypatch):
    acks = Acks()
    j = Journal(jdir, max_group_wait_ms=0, twins=fastpath.selected())
    j.start()
    for i in range(50):
        j.append(EntryRecord(1, i, payload(i)), acks.cb(i))
    acks.wait(50)
    failing = threading.Event()
    _enospc_on(monkeypatch, lambda: j.file.fd, failing.is_set)
    failing.set()
    accepted = 50
    for i in range(50, 80):
        try:
            j.append(EntryRecord(1, i, payload(i)), acks.cb(i))
            accepted += 1
        except JournalUnavailable:
            break
    res = acks.wait(accepted)  # every accepted append is called back, failed or not
    time.sleep(0.05)
    assert sorted(t for t, _ in acks.results) == list(range(accepted))  # each exactly once
    ok = [t for t, e in res if e is None]
    failed = [(t, e) for t, e in res if e is not None]
    assert ok == list(range(50))
    assert failed and all(isinstance(e, OSError) and e.errno == errno.ENOSPC for _, e in failed)
    assert isinstance(j.failed, OSError) and j.failed.errno == errno.ENOSPC
    with pytest.raises(JournalUnavailable) as info:
        j.append(EntryRecord(1, 99, b"x"), acks.cb(99))
    assert info.value.cause is j.failed
    with pytest.raises(JournalUnavailable):
        j.force(acks.cb("f"))
    j.close()
    monkeypatch.undo()
    recs = replay_all(jdir)
    assert recs[:50] == [EntryRecord(1, i, payload(i)) for i in range(50)]
    assert all(r.entry_id in range(80) for r in recs)


def test_enospc_on_fsync_and_on_new_file(jdir, monkeypatch):
    acks = Acks()
    j = Journal(jdir, max_group_wait_ms=0, twins=fastpath.selected())
    j.start()
    j.append(EntryRecord(1, 0, b"ok"), acks.cb(0))
    acks.wait(1)

    def bad_sync(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", bad_sync)
    j.append(EntryRecord(1, 1, b"x"), acks.cb(1), sync=False)
    j.append(EntryRecord(1, 2, b"y"), acks.cb(2))
    res = acks.wait(3)
    assert res[0] == (0, None)
    assert res[1] == (1, None)  # deferred: acknowledged after the write, before the failed fsync
    assert res[2][0] == 2 and res[2][1].errno == errno.EIO
    assert j.failed is not None
    assert j.mark().offset < j.file.offset  # the mark never covers unsynced data
    j.close()
    monkeypatch.undo()
    # ENOSPC while preallocating / creating the next file at rollover
    jdir2 = jdir + "2"
    acks = Acks()
    j = Journal(jdir2, max_size_mb=1024 / (1024 * 1024), max_group_wait_ms=0, twins=fastpath.selected())
    j.start()

    def no_space(fd, off, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_space)
    accepted = 0
    for i in range(20):
        try:
            j.append(EntryRecord(1, i, payload(i, 100)), acks.cb(i))
            accepted += 1
        except JournalUnavailable:
            break
    res = acks.wait(accepted)
    # nothing was written where fallocate failed: the groups fail, the journal does not
    assert accepted == 20 and j.failed is None
    failed = [e for _, e in res if e is not None]
    assert failed and all(isinstance(e, JournalNoSpace) and e.errno == errno.ENOSPC for e in failed)
    time.sleep(0.05)
    assert sorted(t for t, _ in acks.results) == list(range(accepted))  # each exactly once
    acked = [t for t, e in res if e is None]
    monkeypatch.undo()
    # room again: the same journal takes records
    j.append(EntryRecord(1, 100, payload(100, 100)), acks.cb(100))
    assert acks.wait(accepted + 1)[-1] == (100, None)
    j.close()
    recs = [r.entry_id for r in replay_all(jdir2)]
    assert [e for e in recs if e in acked] == acked and recs[-1] == 100


def test_callback_exception_does_not_kill_writer(jdir, caplog):
    acks = Acks()

    def bad(err):
        raise RuntimeError("boom")

    with Journal(jdir, max_group_wait_ms=0, twins=fastpath.selected()) as j:
        j.start()
        with caplog.at_level(logging.ERROR, logger="bookied.journal"):
            j.append(FenceRecord(1), bad)
            j.append(FenceRecord(2), acks.cb(2))
            acks.wait(1)
        assert j.failed is None
    assert "boom" in caplog.text


def test_custom_dispatch_gets_whole_groups(jdir):
    groups = []
    done = threading.Event()

    def dispatch(callbacks, error):
        groups.append(len(callbacks))
        Journal.call_all(callbacks, error)
        if sum(groups) >= 100:
            done.set()

    with Journal(jdir, max_group_wait_ms=20, dispatch=dispatch, twins=fastpath.selected()) as j:
        j.start()
        for i in range(100):
            j.append(EntryRecord(1, i, b"p"), lambda e: None)
        assert done.wait(WAIT)
    assert sum(groups) == 100 and len(groups) < 100


# ------------------------------------------------------------------ kill -9
CHILD = r"""
import os, sys, hashlib, json, time
sys.path.insert(0, sys.argv[1])
from bkctl.bookied.errors import JournalFull
from bkctl.bookied.journal import Journal, EntryRecord
from bkctl.wire import fastpath

d, first, wait_ms = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])

def payload(i):
    size = 1 + (i * 7919) % 3000
    seed = hashlib.sha256(b"%d" % i).digest()
    return (seed * (size // 32 + 1))[:size]

# sys.argv[5], if given: JSON of Journal settings over these
settings = {"max_size_mb": 0.06, "preallocate_mb": 0.03, "max_queue_bytes": 256 * 1024}
settings.update(json.loads(sys.argv[5]) if len(sys.argv) > 5 else {})
j = Journal(d, max_group_wait_ms=wait_ms, twins=fastpath.selected(), **settings)
for _ in j.replay():
    pass
j.start()
os.write(1, b"ready\n")

def ack(i):
    def cb(err):
        if err is None:
            os.write(1, b"%d\n" % i)
    return cb

i = first
while True:
    try:
        j.append(EntryRecord(i % 5, i, payload(i)), ack(i), sync=(i % 11 != 0))
    except JournalFull:
        time.sleep(0.0005)
        continue
    if i % 97 == 0:
        j.force(lambda err: None)
    i += 1
"""


def child_payload(i: int) -> bytes:
    size = 1 + (i * 7919) % 3000
    seed = hashlib.sha256(b"%d" % i).digest()
    return (seed * (size // 32 + 1))[:size]


def run_and_kill(script: str, args: list[str], rng: random.Random, max_run: float) -> list[str]:
    return crash.run_and_kill(script, [REPO, *args], rng, 0.02, max_run, wait=WAIT)


def test_kill_minus_9_loses_no_acknowledged_record(jdir):
    rng = random.Random(int(os.environ.get("JOURNAL_CRASH_SEED", "1234")))
    acked: set[int] = set()
    rounds = 0
    while rounds < 6:
        wait_ms = rng.choice(["0", "1", "2"])
        lines = run_and_kill(CHILD, [jdir, str(rounds * 10_000_000), wait_ms], rng, 0.4)
        ids = [int(x) for x in lines]
        acked.update(ids)
        rounds += 1
        recs = {r.entry_id: r for r in replay_all(jdir)}
        missing = [i for i in ids if i not in recs]
        assert not missing, f"round {rounds}: {len(missing)} acknowledged records lost, e.g. {missing[:5]}"
    assert len(acked) > 100
    recs = {r.entry_id: r for r in replay_all(jdir)}
    for i in acked:
        r = recs[i]
        assert r.ledger_id == i % 5 and r.data == child_payload(i)
    assert len(files(jdir)) > rounds  # rollovers happened


# -- journalSyncData, journalBufferedEntriesThreshold, journalMaxBackups ---------------


def test_without_sync_data_records_are_acknowledged_unsynced_and_synced_at_close(jdir, monkeypatch):
    syncs = []
    real = os.fdatasync
    acks = Acks()
    j = Journal(jdir, max_group_wait_ms=0, sync_data=False, twins=fastpath.selected())
    j.start()
    monkeypatch.setattr(os, "fdatasync", lambda fd: (syncs.append(len(acks.results)), real(fd)))
    for i in range(20):
        j.append(EntryRecord(1, i, payload(i)), acks.cb(i))
    j.force(acks.cb("force"))
    res = acks.wait(21)
    assert [t for t, _ in res] == list(range(20)) + ["force"]  # in order, and FORCE_LEDGER too
    assert all(err is None for _, err in res)
    assert syncs == [] and j.stats.fsyncs == 0
    assert j.mark() > LogMark(j.current_file_id, jmod.HEADER_SIZE)  # checkpoints may pass what is written
    j.close()
    assert syncs == [21]  # what the page cache held is made durable at close
    assert [r.entry_id for r in replay_all(jdir)] == list(range(20))


def test_with_sync_data_every_group_is_fsynced_before_its_acks(jdir, monkeypatch):
    syncs = []
    real = os.fdatasync
    acks = Acks()
    with Journal(jdir, max_group_wait_ms=0, twins=fastpath.selected()) as j:
        j.start()
        monkeypatch.setattr(os, "fdatasync", lambda fd: (syncs.append(len(acks.results)), real(fd)))
        j.append(EntryRecord(1, 0, b"x"), acks.cb(0))
        acks.wait(1)
        assert syncs == [0]


def test_more_than_buffered_entries_threshold_records_make_a_group_without_waiting(jdir):
    acks = Acks()
    # the group wait is a minute: only the entries threshold can end it within the test's wait
    with Journal(jdir, max_group_wait_ms=60_000, buffered_entries_threshold=3, twins=fastpath.selected()) as j:
        j.start()
        for i in range(4):
            j.append(EntryRecord(1, i, b"x"), acks.cb(i))
        acks.wait(4, timeout=WAIT)
        # Java's rule: more than the threshold; three records would have waited for the fourth
        assert (j.stats.groups, j.stats.max_group_records) == (1, 4)


def test_checkpoint_keeps_journal_max_backups_old_files(jdir):
    acks = Acks()
    j = Journal(jdir, max_size_mb=1024 / (1024 * 1024), max_group_wait_ms=0, max_backups=2, twins=fastpath.selected())
    j.start()
    for i in range(60):
        j.append(EntryRecord(1, i, payload(i, 200)), acks.cb(i))
        acks.wait(i + 1)
    mark = j.mark()
    ids = [int(n.split(".")[0], 16) for n in files(jdir)]
    older = [fid for fid in ids if fid < mark.file_id]
    assert len(older) > 3
    j.checkpoint(mark)
    kept = [int(n.split(".")[0], 16) for n in files(jdir)]
    assert kept == older[-2:] + [fid for fid in ids if fid >= mark.file_id]
    j.close()
    # the backups are never replayed: replay starts at the mark
    assert list(Journal(jdir, twins=fastpath.selected()).replay()) == []
    j0 = Journal(jdir, max_backups=0, twins=fastpath.selected())
    j0.start()
    j0.checkpoint(j0.mark())
    assert files(jdir) == [jmod.file_name(j0.current_file_id)]
    j0.close()


def test_creating_and_preallocating_journal_files_calls_on_grow(jdir):
    grown = []
    j = Journal(
        jdir, max_group_wait_ms=0, preallocate_mb=0.001, on_grow=lambda: grown.append(1), twins=fastpath.selected()
    )
    j.start()
    assert len(grown) == 1  # the first file's preallocation
    acks = Acks()
    j.append(EntryRecord(1, 0, payload(0, 4000)), acks.cb(0))
    acks.wait(1)
    j.close()
    assert len(grown) >= 2  # grown past the first step: checked again


def test_reclaim_rolls_past_a_checkpointed_file_and_drops_the_backups(jdir):
    """A journal that filled its disk below journalMaxSizeMB never rolled, so
    its checkpointed file (and journalMaxBackups's backups) stayed for good:
    reclaim rolls to a file without preallocation and frees every file the
    mark is past; what is appended afterwards replays."""
    acks = Acks()
    j = Journal(jdir, max_group_wait_ms=0, max_backups=5, preallocate_mb=1, twins=fastpath.selected())
    j.start()
    for i in range(50):
        j.append(EntryRecord(1, i, payload(i, 2000)), acks.cb(i))
    acks.wait(50)
    first = j.current_file_id
    assert j.reclaim() == 0  # nothing checkpointed: everything is still needed
    j.checkpoint(j.mark())
    assert files(jdir) == [jmod.file_name(first)]  # the mark is in it: a checkpoint keeps it
    freed = j.reclaim()
    assert freed >= 1024 * 1024 and files(jdir) == [jmod.file_name(first + 1)]
    assert os.path.getsize(os.path.join(j.directory, jmod.file_name(first + 1))) < 4096  # not preallocated
    j.append(EntryRecord(1, 50, b"after"), acks.cb(50))
    acks.wait(51)
    assert j.reclaim() == 0  # a record not checkpointed: the file stays
    j.close()
    assert [(r.entry_id, r.data) for r in Journal(jdir, twins=fastpath.selected()).replay()] == [(50, b"after")]


def test_the_mark_is_written_in_place_when_the_disk_has_no_room_for_a_new_file(tmp_path, monkeypatch):
    """Issue 73, point 9: the checkpoint that lets a journal give a full disk back must be able to
    store its mark there; the mark file's bytes are already allocated."""
    from bkctl.bookied import journal_format

    d = str(tmp_path)
    journal_format.write_mark_file(d, LogMark(1, 100))

    def no_room(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(journal_format.layout, "atomic_write", no_room)
    journal_format.write_mark_file(d, LogMark(2, 4096))
    assert journal_format.read_mark_file(d) == LogMark(2, 4096)
    os.unlink(os.path.join(d, journal_format.MARK_FILE))
    with pytest.raises(OSError):  # no file to overwrite: still no room
        journal_format.write_mark_file(d, LogMark(3, 1))
