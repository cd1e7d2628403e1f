"""The journal's inline mode: commits run by the owner (reactor) thread, in order, falling back to the writer thread."""
import queue
import threading
import time

from bkctl.bookied.journal import Journal, EntryRecord

def test_inline_mode_orders_and_acks(tmp_path):
    q = queue.Queue()
    owner_calls = []
    def owner():
        while True:
            fn = q.get()
            if fn is None: return
            fn()
    t = threading.Thread(target=owner); t.start()
    acked = {}
    lock = threading.Lock()
    j = Journal(str(tmp_path), max_group_wait_ms=0, inline=q.put, inline_max_fsync_ms=1000)
    j.start()
    def producer(tid, n):
        for i in range(n):
            def cb(err, key=(tid, i)):
                with lock:
                    assert key not in acked
                    acked[key] = (err, threading.current_thread().name)
            j.append(EntryRecord(tid, i, b"x" * 50), cb)
            if i % 97 == 0: time.sleep(0.001)
    ths = [threading.Thread(target=producer, args=(k, 500)) for k in range(4)]
    for th in ths: th.start()
    for th in ths: th.join()
    deadline = time.time() + 20
    while len(acked) < 2000 and time.time() < deadline: time.sleep(0.01)
    assert len(acked) == 2000 and all(e is None for e, _ in acked.values())
    names = {n for _, n in acked.values()}
    assert t.name in names  # with fast fsyncs the owner thread committed (some) groups itself
    j.close(); q.put(None); t.join()
    j2 = Journal(str(tmp_path))
    recs = list(j2.replay())
    for k in range(4):
        ids = [r.entry_id for r in recs if r.ledger_id == k]
        assert ids == list(range(500))

def test_inline_then_slow_disk_falls_back(tmp_path, monkeypatch):
    calls = []
    j = Journal(str(tmp_path), max_group_wait_ms=0, inline=lambda fn: calls.append(fn), inline_max_fsync_ms=0.000001)
    j.start()
    done = threading.Event()
    j.append(EntryRecord(1, 0, b"a"), lambda e: done.set())  # average 0 < limit: inline
    assert len(calls) == 1 and not done.is_set()
    calls[0]()
    assert done.is_set()
    # now the average is above the tiny limit: the writer thread takes it
    done2 = threading.Event()
    j.append(EntryRecord(1, 1, b"b"), lambda e: done2.set())
    assert len(calls) == 1
    assert done2.wait(5)
    j.close()

def test_close_with_scheduled_commit_pending(tmp_path):
    calls = []
    j = Journal(str(tmp_path), max_group_wait_ms=0, inline=lambda fn: calls.append(fn))
    j.start()
    done = threading.Event()
    j.append(EntryRecord(1, 0, b"a"), lambda e: done.set())
    j.close()  # the writer drains what is queued
    assert done.is_set()
    calls[0]()  # the late scheduled commit does nothing
    assert [r.entry_id for r in Journal(str(tmp_path)).replay()] == [0]
