"""The journal's inline mode: commits run by the owner (reactor) thread, in order, falling back to
the writer thread when the disk is slow; fast paths on or off (``BKCTL_FASTPATHS=0``, which
``./dev test`` runs the unit suite with too), as it is no twin but the same code in another thread."""

import os
import queue
import threading

import pytest

from bkctl.bookied.journal import EntryRecord, Journal
from bkctl.wire import fastpath
from tests.support.clocks import ManualClock

WAIT = 30.0


def replayed_ids(directory, ledger_id):
    return [r.entry_id for r in Journal(directory, twins=fastpath.selected()).replay() if r.ledger_id == ledger_id]


def test_inline_mode_orders_and_acks(tmp_path):
    q = queue.Queue()

    def owner():
        while True:
            fn = q.get()
            if fn is None:
                return
            fn()

    t = threading.Thread(target=owner, name="owner")
    t.start()
    acked = {}
    lock = threading.Lock()
    all_acked = threading.Event()
    clock = ManualClock()  # fsyncs take no time on it: the disk always counts as fast
    j = Journal(
        str(tmp_path),
        max_group_wait_ms=0,
        inline=q.put,
        monotonic=clock.monotonic,
        wait_on=clock.wait_on,
        twins=fastpath.selected(),
    )
    j.start()

    def producer(tid, n):
        for i in range(n):

            def cb(err, key=(tid, i)):
                with lock:
                    assert key not in acked
                    acked[key] = (err, threading.current_thread().name)
                    if len(acked) == 2000:
                        all_acked.set()

            j.append(EntryRecord(tid, i, b"x" * 50), cb)

    ths = [threading.Thread(target=producer, args=(k, 500)) for k in range(4)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert all_acked.wait(WAIT), f"{len(acked)} of 2000 acknowledged"
    assert all(e is None for e, _ in acked.values())
    names = {n for _, n in acked.values()}
    assert "owner" in names  # with fast fsyncs the owner thread committed (some) groups itself
    j.close()
    q.put(None)
    t.join()
    for k in range(4):
        assert replayed_ids(str(tmp_path), k) == list(range(500))


def test_inline_then_slow_disk_falls_back(tmp_path, monkeypatch):
    clock = ManualClock()
    real = os.fdatasync

    def slow_fdatasync(fd):  # 50 ms on the journal's clock: the average goes above the 2 ms limit
        real(fd)
        clock.advance(0.05)

    monkeypatch.setattr(os, "fdatasync", slow_fdatasync)
    calls = []
    j = Journal(
        str(tmp_path),
        max_group_wait_ms=0,
        inline=calls.append,
        inline_max_fsync_ms=2,
        monotonic=clock.monotonic,
        wait_on=clock.wait_on,
        twins=fastpath.selected(),
    )
    j.start()
    done = threading.Event()
    j.append(EntryRecord(1, 0, b"a"), lambda e: done.set())
    # average 0 < limit: scheduled in the owner's thread, nothing written until it runs
    assert len(calls) == 1 and not done.is_set()
    calls[0]()
    assert done.is_set()
    assert j.fsync_average > 0.002
    # now the average is above the limit: the writer thread takes it
    done2 = threading.Event()
    j.append(EntryRecord(1, 1, b"b"), lambda e: done2.set())
    assert len(calls) == 1
    assert done2.wait(WAIT)
    j.close()
    assert replayed_ids(str(tmp_path), 1) == [0, 1]


def test_close_with_scheduled_commit_pending(tmp_path):
    calls = []
    j = Journal(str(tmp_path), max_group_wait_ms=0, inline=calls.append, twins=fastpath.selected())
    j.start()
    done = threading.Event()
    j.append(EntryRecord(1, 0, b"a"), lambda e: done.set())
    j.close()  # the writer drains what is queued
    assert done.is_set()
    assert len(calls) == 1
    for late in calls:
        late()  # the late scheduled commit does nothing
    assert replayed_ids(str(tmp_path), 1) == [0]


@pytest.mark.parametrize("fastpaths", [True, False])
def test_inline_commits_do_not_depend_on_the_fast_path_switch(tmp_path, fastpaths):
    """Fast paths off, the owner's thread commits as with them on (the Python twins are
    measured with the C ones' group hand-over)."""
    calls = []
    j = Journal(str(tmp_path), max_group_wait_ms=0, inline=calls.append, twins=fastpath.build(fastpaths))
    j.start()
    done = threading.Event()
    j.append(EntryRecord(1, 0, b"a"), lambda e: done.set())
    assert len(calls) == 1 and not done.is_set()
    calls[0]()
    assert done.is_set()
    j.close()
    assert replayed_ids(str(tmp_path), 1) == [0]
