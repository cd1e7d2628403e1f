"""bookied.journal_zeros: zeros written and fsynced ahead of the journal's records, so that its
fsyncs commit no metadata -- and never on a record, whatever the writer does meanwhile."""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import random
import threading
import time

import pytest

from bkctl.bookied.errors import JournalNoSpace
from bkctl.bookied.journal import EntryRecord, Journal
from bkctl.bookied.journal_zeros import ZERO_MIN, ZeroAhead
from bkctl.wire import fastpath
from tests.support import crash, smallfs
from tests.support.waiting import wait_for
from tests.unit import test_journal

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WAIT = 10.0
MB = 1024 * 1024


def payload(i: int, size: int) -> bytes:
    seed = hashlib.sha256(b"%d" % i).digest()
    return (seed * (size // 32 + 1))[:size]


def zeroing_journal(jdir: str, **kw) -> Journal:
    settings = {"max_group_wait_ms": 0, "preallocate_mb": 2, "zero_ahead_mb": 1, **kw}
    return Journal(jdir, twins=fastpath.selected(), **settings)


def add_all(j: Journal, records: list, group_bytes: int = 64 * 1024) -> list:
    """Append ``records`` and return their callbacks' errors, in order, once all have come;
    a batch of about ``group_bytes`` at a time (zeros stop while groups are large)."""
    done = threading.Semaphore(0)
    errors: list = []

    def cb(err):
        errors.append(err)
        done.release()

    pending = queued = 0
    for rec in records:
        j.append(rec, cb)
        pending += 1
        queued += len(rec.data)
        if queued >= group_bytes:
            for _ in range(pending):
                assert done.acquire(timeout=WAIT)
            pending = queued = 0
    for _ in range(pending):
        assert done.acquire(timeout=WAIT)
    return errors


def zeroer_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "bookied-journal-zeros"]


def replay_all(jdir: str) -> list:
    return list(Journal(jdir, twins=fastpath.selected()).replay())


def current_path(j: Journal) -> str:
    return os.path.join(j.directory, f"{j.current_file_id:016x}.bjn")


@pytest.fixture
def jdir(tmp_path):
    return str(tmp_path / "journal")


def test_replay_stops_at_the_last_record_inside_durable_zeros(jdir, caplog):
    j = zeroing_journal(jdir)
    j.start()
    zeros = j.file.zeros
    assert zeros is not None
    records = [EntryRecord(3, i, payload(i, 1000)) for i in range(300)]
    assert add_all(j, records) == [None] * 300
    end = j.file.offset
    wait_for(lambda: zeros.durable >= end + ZERO_MIN, timeout=WAIT, what="zeros ahead of the records")
    durable = zeros.durable
    path = current_path(j)
    j.close()
    assert zeroer_threads() == []
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) >= durable and data[end:durable] == bytes(durable - end)
    with caplog.at_level(logging.WARNING):
        assert replay_all(jdir) == records
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert os.path.getsize(path) == len(data)  # a clean end: nothing truncated


def test_a_writer_that_outruns_the_zeroer_loses_nothing(jdir, monkeypatch):
    real = os.pwrite

    def slow_pwrite(fd, data, offset):  # only the zeroer writes with pwrite
        time.sleep(0.002)
        return real(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", slow_pwrite)
    j = zeroing_journal(jdir, max_size_mb=3)
    j.start()
    rng = random.Random(7)
    records = [EntryRecord(1, i, payload(i, rng.choice([100, 5000, 70000, 300000]))) for i in range(120)]
    for n in range(0, len(records), 10):  # groups of up to 10, big and small, through two rolls
        assert add_all(j, records[n : n + 10]) == [None] * len(records[n : n + 10])
    assert j.file.zeros is not None and j.file.zeros.zeroed > 0  # it did write zeros meanwhile
    j.close()
    assert replay_all(jdir) == records  # any zero written on a record would fail its checksum


def test_rolled_files_start_zeroed_too(jdir):
    j = zeroing_journal(jdir, max_size_mb=1.5, preallocate_mb=1)
    j.start()
    zeros = j.file.zeros
    assert zeros is not None
    first = j.current_file_id
    records = [EntryRecord(2, i, payload(i, 40000)) for i in range(50)]  # 2 MB: one roll
    assert add_all(j, records) == [None] * 50
    assert j.current_file_id == first + 1
    start = j.file.offset
    wait_for(lambda: zeros.durable >= start + ZERO_MIN, timeout=WAIT, what="zeros in the rolled file")
    j.close()
    assert replay_all(jdir) == records


def test_no_zeros_while_groups_are_large_and_again_once_they_are_small(jdir):
    j = zeroing_journal(jdir, preallocate_mb=16)
    j.start()
    zeros = j.file.zeros
    assert zeros is not None
    big = [EntryRecord(1, i, payload(i, 256 * 1024)) for i in range(40)]
    for rec in big:  # a group each: 10 MB in groups of 256 KiB
        assert add_all(j, [rec]) == [None]
    assert zeros.zeroed <= 3 * MB  # what it wrote before the groups' average passed ZERO_MAX_GROUP
    start = zeros.zeroed
    small = [EntryRecord(1, 40 + i, payload(i, 100)) for i in range(12000)]  # 1.6 MB in small groups
    for n in range(0, len(small), 20):
        assert add_all(j, small[n : n + 20]) == [None] * 20
    wait_for(lambda: zeros.durable > j.file.offset, timeout=WAIT, what="zeros ahead again")
    assert zeros.zeroed > start
    j.close()
    assert replay_all(jdir) == big + small


def test_the_zeroer_keeps_half_its_distance_from_the_writer(jdir, monkeypatch):
    """Zeros start no closer than half of zero_ahead past the writer's end: a zeroer that fell
    behind leaves the stretch between to the writer (fallocated, as without zeros) rather than
    zero where the writer is about to write, which its next fdatasync would write back."""
    ahead = 1 * MB  # zeroing_journal's zero_ahead_mb
    told = [0]  # the writer's end, as last told to the zeroer
    seen: list[tuple[int, int]] = []  # (where a pwrite of zeros went, the writer's end then)
    real_after, real_pwrite = ZeroAhead.after_write, os.pwrite

    def after_write(self, end):
        real_after(self, end)
        told[0] = end

    def pwrite(fd, data, offset):  # only the zeroer writes with pwrite
        seen.append((offset, told[0]))
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(ZeroAhead, "after_write", after_write)
    monkeypatch.setattr(os, "pwrite", pwrite)
    j = zeroing_journal(jdir, preallocate_mb=8, max_size_mb=64)
    j.start()
    zeros = j.file.zeros
    assert zeros is not None
    records = [EntryRecord(1, i, payload(i, 1000)) for i in range(6000)]  # 6 MB in groups of 16
    for n in range(0, len(records), 16):
        assert add_all(j, records[n : n + 16]) == [None] * 16
    j.close()
    assert len(seen) >= 3  # zeros were written all along
    # (a quarter, not a half: the writer may have moved on by a group or two between the zeroer's
    # look at its end and the pwrite; without the distance, zeros start at the writer's end)
    assert all(offset >= end + ahead // 4 for offset, end in seen), seen
    assert replay_all(jdir) == records


def test_no_room_for_zeros_stops_them_for_that_file_only(jdir, monkeypatch, caplog):
    def no_space(fd, data, offset):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", no_space)
    j = zeroing_journal(jdir, max_size_mb=1.5, preallocate_mb=1)
    zeros = j.file.zeros
    assert zeros is not None
    with caplog.at_level(logging.INFO, logger="bookied.journal"):
        j.start()
        first = [EntryRecord(1, i, payload(i, 30000)) for i in range(20)]
        assert add_all(j, first) == [None] * 20
        wait_for(lambda: "no room to write zeros" in caplog.text, timeout=WAIT, what="the zeroer giving up")
    assert j.failed is None and zeros.zeroed == 0 and zeroer_threads()
    monkeypatch.undo()
    second = [EntryRecord(1, 20 + i, payload(i, 30000)) for i in range(40)]  # into the next file
    assert add_all(j, second) == [None] * 40
    wait_for(lambda: zeros.zeroed > 0, timeout=WAIT, what="zeros in the next file")
    j.close()
    assert zeroer_threads() == []
    assert replay_all(jdir) == first + second


def test_an_error_while_zeroing_stops_the_zeroer_not_the_journal(jdir, monkeypatch, caplog):
    def broken(fd, data, offset):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "pwrite", broken)
    j = zeroing_journal(jdir)
    records = [EntryRecord(1, i, payload(i, 20000)) for i in range(30)]
    with caplog.at_level(logging.WARNING, logger="bookied.journal"):
        j.start()
        assert add_all(j, records) == [None] * 30
        wait_for(lambda: not zeroer_threads(), timeout=WAIT, what="the zeroer thread's end")
    assert "writing zeros ahead" in caplog.text and j.failed is None
    monkeypatch.undo()
    assert add_all(j, [EntryRecord(1, 30, b"after")]) == [None]
    j.close()
    assert replay_all(jdir) == [*records, EntryRecord(1, 30, b"after")]


def test_zeroing_is_off_without_sync_data_and_by_default(jdir):
    assert zeroing_journal(jdir, sync_data=False).file.zeros is None
    assert Journal(jdir, twins=fastpath.selected()).file.zeros is None


def test_kill_minus_9_while_zeroing_loses_no_acknowledged_record(jdir):
    rng = random.Random(int(os.environ.get("JOURNAL_CRASH_SEED", "4321")))
    # files of 3 MB, preallocated 0.5 MB at a time, zeros 0.25 MB ahead (test_journal's child)
    settings = json.dumps({"max_size_mb": 3, "preallocate_mb": 0.5, "zero_ahead_mb": 0.25, "max_queue_bytes": MB})
    acked: list[int] = []
    for rounds in range(5):
        args = [REPO, jdir, str(rounds * 10_000_000), "0", settings]
        lines = crash.run_and_kill(test_journal.CHILD, args, rng, 0.05, 0.5, wait=WAIT)
        acked += [int(x) for x in lines]
        found = {r.entry_id: r for r in replay_all(jdir)}
        missing = [i for i in acked if i not in found]
        assert not missing, f"round {rounds + 1}: {len(missing)} acknowledged records lost, e.g. {missing[:5]}"
    assert len(acked) > 100
    assert all(found[i].data == test_journal.child_payload(i) for i in acked)


def test_a_full_disk_is_reported_by_the_writer_as_without_zeros(tmp_path):
    """On a real full filesystem (a small tmpfs): zeros only go into what the writer
    preallocated, so the writer meets ENOSPC where it did, its groups fail with
    JournalNoSpace and the journal goes on once there is room."""
    fs = tmp_path / "fs"
    smallfs.mount_or_explain(fs, 8)
    try:
        j = zeroing_journal(str(fs / "journal"), preallocate_mb=1)
        j.start()
        filler = smallfs.fill(fs, "filler", 1536 * 1024)
        errors = add_all(j, [EntryRecord(1, i, payload(i, 60000)) for i in range(60)])  # 3.6 MB
        assert any(isinstance(e, JournalNoSpace) for e in errors) and j.failed is None
        assert zeroer_threads() and j.file.zeros is not None and j.file.zeros.zeroed > 0
        assert os.path.getsize(current_path(j)) <= j.file.offset + MB  # no zeros past the preallocated space
        os.unlink(filler)
        assert add_all(j, [EntryRecord(1, 100, b"room again")]) == [None]
        j.close()
        assert zeroer_threads() == []
        acked = [EntryRecord(1, i, payload(i, 60000)) for i, e in enumerate(errors) if e is None]
        assert replay_all(str(fs / "journal")) == [*acked, EntryRecord(1, 100, b"room again")]
    finally:
        smallfs.unmount(fs)


def test_where_o_direct_is_refused_the_zeros_are_buffered_and_still_ahead(tmp_path, monkeypatch, caplog):
    """On a file system whose open refuses O_DIRECT (a ramfs: EINVAL) the zeroer opens the file
    buffered and goes on: zeros ahead of the writer, inside what it preallocated (the zeroer never
    grows the file), never on a record."""
    fs = tmp_path / "ramfs"
    smallfs.ramfs_or_explain(fs)
    try:
        probe = fs / "probe"
        probe.write_bytes(b"")
        with pytest.raises(OSError) as refused:  # the premise: this file system refuses it
            os.close(os.open(probe, os.O_WRONLY | os.O_DIRECT))
        assert refused.value.errno == errno.EINVAL

        ahead = 1 * MB  # zeroing_journal's zero_ahead_mb
        told = [0]  # the writer's end, as last told to the zeroer
        seen: list[tuple[int, int, int, int]] = []  # each pwrite of zeros: offset, length, writer's end, file size
        real_after, real_pwrite = ZeroAhead.after_write, os.pwrite

        def after_write(self, end):
            real_after(self, end)
            told[0] = end

        def pwrite(fd, data, offset):  # only the zeroer writes with pwrite
            seen.append((offset, len(data), told[0], os.fstat(fd).st_size))
            return real_pwrite(fd, data, offset)

        monkeypatch.setattr(ZeroAhead, "after_write", after_write)
        monkeypatch.setattr(os, "pwrite", pwrite)
        jdir = str(fs / "journal")
        j = zeroing_journal(jdir, preallocate_mb=4, max_size_mb=8)
        zeros = j.file.zeros
        assert zeros is not None
        records = [EntryRecord(1, i, payload(i, 1000)) for i in range(3008)]  # 3 MB in groups of 16
        with caplog.at_level(logging.INFO, logger="bookied.journal"):
            j.start()
            for n in range(0, len(records), 16):
                assert add_all(j, records[n : n + 16]) == [None] * 16
            end = j.file.offset
            wait_for(lambda: zeros.durable >= end + ZERO_MIN, timeout=WAIT, what="buffered zeros ahead of the records")
        assert not caplog.records  # not stopped, for the file nor for good
        durable, path = zeros.durable, current_path(j)
        j.close()
        monkeypatch.undo()
        assert zeros.zeroed > 0 and len(seen) >= 3 and zeroer_threads() == []
        # never closer than a quarter of the way ahead (see the test of the distance), never past
        # the file's preallocated end; buffered: not page-aligned writes are fine too
        assert all(offset >= writer + ahead // 4 for offset, _, writer, _ in seen), seen
        assert all(offset + n <= size for offset, n, _, size in seen), seen
        with open(path, "rb") as f:
            data = f.read()
        assert data[end:durable] == bytes(durable - end)
        assert replay_all(jdir) == records  # a zero on a record would fail its checksum
    finally:
        smallfs.unmount(fs)
