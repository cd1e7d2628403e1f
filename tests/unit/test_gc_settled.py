"""Settled entry logs (issue 68): a rolled log whose live bytes have not changed for three GC
passes, below ``settledCompactionThreshold`` (and the threshold of a periodic compaction that
would take it anyway), is compacted at the next pass rather than at the next major compaction:
the policy's rule, the tracker of unchanged live bytes, and a real entry store under the
collector on an injected clock."""

from __future__ import annotations

import os

import pytest

from bkctl.bookied.config import load_config
from bkctl.bookied.gc_policy import GcPolicy, SettledLogs
from bkctl.bookied.storage import EntryStore
from bkctl.wire import fastpath
from tests.support.compaction import gc_on_clock


def data(ledger: int, entry: int, size: int = 200) -> bytes:
    return bytes([ledger % 251, entry % 251]) * (size // 2)


# -- the rule ----------------------------------------------------------------------------------------


def test_a_settled_log_below_the_threshold_is_taken_once_unchanged_for_three_passes():
    p = GcPolicy(gc_wait_ms=2000, minor_interval_ms=10_000, major_interval_ms=30_000)
    assert (p.settled_below, p.settled_delay_ms) == (0.5, 6000)
    assert p.takes_at_every_pass(0.05, 0)  # nearly empty: at once
    assert not p.takes_at_every_pass(0.25, 5999)  # its ledgers may still be dying
    assert p.takes_at_every_pass(0.25, 6000)
    assert p.takes_at_every_pass(0.49, 60_000) and not p.takes_at_every_pass(0.5, 60_000)
    assert p.to_status()["settledCompactionThreshold"] == 0.5 and p.to_status()["settledCompactionDelayMs"] == 6000


def test_the_settled_rule_takes_only_what_a_periodic_compaction_would_take():
    # never above the major threshold; without major compaction, never above the minor one
    assert GcPolicy(major_threshold=0.3).settled_below == 0.3
    assert GcPolicy(major_interval_ms=0).settled_below == 0.2
    assert GcPolicy(settled_threshold=0.1).settled_below == 0.1
    # off with the key at 0, or with minor compaction off (as the nearly-empty rule)
    for off in (GcPolicy(settled_threshold=0), GcPolicy(minor_interval_ms=0), GcPolicy(minor_threshold=0)):
        assert off.settled_below == 0 and not off.takes_at_every_pass(0.25, 10**9)


def test_the_key_loads_with_its_default_and_is_checked(tmp_path):
    conf = tmp_path / "bk_server.conf"
    conf.write_text("")
    assert GcPolicy.from_config(load_config(conf)).settled_threshold == 0.5
    conf.write_text("settledCompactionThreshold=0.3\n")
    assert GcPolicy.from_config(load_config(conf)).settled_threshold == 0.3
    conf.write_text("settledCompactionThreshold=1.5\n")
    with pytest.raises(Exception, match="settledCompactionThreshold"):
        load_config(conf)


def test_the_tracker_restarts_a_log_at_each_change_and_forgets_the_logs_gone():
    t = SettledLogs()
    assert t.unchanged_ms("d", 1, 10.0) == 0  # never seen
    t.observe("d", {1: 100, 2: 50}, 10.0)
    t.observe("e", {1: 7}, 11.0)  # another directory's log 1 is another log
    t.observe("d", {1: 100, 2: 40}, 12.0)
    assert t.unchanged_ms("d", 1, 15.0) == 5000 and t.unchanged_ms("d", 2, 15.0) == 3000
    assert t.unchanged_ms("e", 1, 15.0) == 4000
    t.observe("d", {2: 40}, 16.0)  # log 1 deleted: forgotten, so a new log 1 starts afresh
    t.observe("d", {1: 100, 2: 40}, 17.0)
    assert t.unchanged_ms("d", 1, 18.0) == 1000 and t.unchanged_ms("d", 2, 18.0) == 6000
    assert t.unchanged_ms("e", 1, 18.0) == 7000


# -- under the collector, in a real entry store ----------------------------------------------------


def one_pass(gc, clock, passes, seconds=1):
    clock.advance(seconds)
    gc()
    passes[-1].callback(None)


def long_and_short(tmp_path, layout=((1, 52), (2, 20)), deleted=(1,)) -> tuple[EntryStore, int]:
    """A full 16 KiB log of 72 records, by default 20 of the long-lived ledger 2 and 52 of the
    short-lived 1, which is deleted (28% live: above the minor threshold, below the major one);
    then a log being written."""
    s = EntryStore(str(tmp_path / "l"), log_size_limit=16 * 1024, twins=fastpath.selected())
    for lid, n in layout:
        for e in range(n):
            s.put_entry(lid, e, data(lid, e))
    s.flush()
    s.put_entry(3, 0, data(3, 0))
    s.flush()
    s.delete_ledgers(list(deleted))
    usage = s.log_usage()
    log, active = sorted(usage)
    assert s.active_log_ids() == [active] and 0.2 < usage[log][3] < 0.5
    return s, log


def test_a_settled_log_goes_at_the_pass_after_three_unchanged_ones(tmp_path):
    s, log = long_and_short(tmp_path)
    policy = GcPolicy(gc_wait_ms=1000, minor_interval_ms=10_000, major_interval_ms=30_000)
    gc, clock, passes = gc_on_clock(policy, [s])
    one_pass(gc, clock, passes)  # t=1: first seen
    [why] = [d["keptBecause"] for d in gc.details()[0]["entryLogs"] if d["logId"] == log]
    assert why == "below majorCompactionThreshold: the next major compaction takes it"
    one_pass(gc, clock, passes, 2)  # t=3: unchanged for 2 s of the 3 needed
    assert log in s.log_ids() and gc.status()["nearlyEmptyCompactionCounter"] == 0
    clock.advance(1)  # t=4: settled
    [why] = [d["keptBecause"] for d in gc.details()[0]["entryLogs"] if d["logId"] == log]
    assert why == (
        "settled (below settledCompactionThreshold 0.5, live bytes unchanged for 3 s): the next garbage "
        "collection pass takes it"
    )
    one_pass(gc, clock, passes, 0)
    assert log not in s.log_ids() and not os.path.exists(s.entry_log.path(log))
    st = gc.status()
    assert (st["nearlyEmptyCompactionCounter"], st["minorCompactionCounter"], st["majorCompactionCounter"]) == (1, 0, 0)
    assert (st["logsCompacted"], st["entriesMoved"]) == (1, 20)
    assert all(s.get_entry(2, e) == data(2, e) for e in range(20))
    s.close()


def test_a_deletion_in_the_log_restarts_its_wait(tmp_path):
    # 20 long-lived entries, 12 of a ledger deleted later, 40 deleted at once: 44% live, then 28%
    s, log = long_and_short(tmp_path, layout=((1, 40), (5, 12), (2, 20)))
    gc, clock, passes = gc_on_clock(GcPolicy(gc_wait_ms=1000, minor_interval_ms=10_000, major_interval_ms=30_000), [s])
    one_pass(gc, clock, passes)  # t=1: first seen
    one_pass(gc, clock, passes, 2)  # t=3
    s.delete_ledgers([5])
    one_pass(gc, clock, passes, 0)  # t=3: seen changed
    one_pass(gc, clock, passes, 2)  # t=5: unchanged for 2 s only
    assert log in s.log_ids() and gc.status()["nearlyEmptyCompactionCounter"] == 0
    one_pass(gc, clock, passes, 1)  # t=6: settled
    assert log not in s.log_ids() and gc.status()["entriesMoved"] == 20
    s.close()


def test_with_the_key_at_zero_a_log_waits_for_the_major_compaction_as_in_java(tmp_path):
    s, log = long_and_short(tmp_path)
    off = GcPolicy(gc_wait_ms=1000, minor_interval_ms=10_000, major_interval_ms=30_000, settled_threshold=0)
    gc, clock, passes = gc_on_clock(off, [s])
    for _ in range(29):
        one_pass(gc, clock, passes, 1)
    st = gc.status()
    assert log in s.log_ids() and (st["nearlyEmptyCompactionCounter"], st["minorCompactionCounter"]) == (0, 2)
    one_pass(gc, clock, passes, 2)  # t=31: the major compaction is due
    st = gc.status()
    assert log not in s.log_ids() and (st["majorCompactionCounter"], st["nearlyEmptyCompactionCounter"]) == (1, 0)
    s.close()


# -- the order a compaction takes its logs in --------------------------------------------------------


def test_a_compaction_takes_next_the_log_emptiest_now_not_when_it_began(tmp_path):
    from bkctl.bookied.storage.compactor import CompactionPhase, add_phase_observer, remove_phase_observer

    s = EntryStore(str(tmp_path / "l"), log_size_limit=16 * 1024, twins=fastpath.selected())
    for batch in (((1, 50), (2, 22)), ((3, 36), (4, 36)), ((5, 20), (6, 38), (7, 14)), ((8, 1),)):
        for lid, n in batch:
            for e in range(n):
                s.put_entry(lid, e, data(lid, e))
        s.flush()
    s.delete_ledgers([1, 3, 5])
    usage = s.log_usage()
    a, b, c, active = sorted(usage)
    assert s.active_log_ids() == [active]
    assert usage[a][3] < usage[b][3] < usage[c][3] < 0.8  # 31%, 50%, 72% live
    order: list[int] = []

    def observe(phase, log_id):
        if phase is CompactionPhase.COPIED and log_id not in order:
            order.append(log_id)
        if phase is CompactionPhase.UNLINKED and log_id == a:
            s.delete_ledgers([6])  # while ``a`` is compacted, most of ``c`` dies: 19% live now

    gc, clock, passes = gc_on_clock(GcPolicy(gc_wait_ms=1000), [s])
    add_phase_observer(observe)
    try:
        gc.trigger()  # a forced pass: major compaction, every log below 0.8
        passes[-1].callback(None)
    finally:
        remove_phase_observer(observe)
    assert order == [a, c, b]
    assert set(s.log_ids()).isdisjoint({a, b, c}) and gc.status()["entriesMoved"] == 22 + 36 + 14
    assert all(s.get_entry(7, e) == data(7, e) for e in range(14)) and s.get_entry(6, 0) is None
    s.close()
