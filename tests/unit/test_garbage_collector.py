"""Garbage collection and compaction: Java's schedule rules, the throttle's accounting on an
injected clock, the compaction keys' checks at load, and compaction racing adds, reads,
re-puts and deletions in a real entry store."""

from __future__ import annotations

import logging
import os
import threading
import time

import pytest
from twisted.internet import defer, task

from bkctl.bookied.config import ConfigError, load_config
from bkctl.bookied.garbage_collector import GarbageCollector
from bkctl.bookied.gc_listing import DeletedLedgerCollector
from bkctl.bookied.gc_policy import MAJOR, MINOR, GcPolicy, choose_compaction
from bkctl.bookied.storage import EntryStore, scan_log
from bkctl.bookied.storage.compactor import (
    CompactableStore,
    CompactionPhase,
    CompactionStopped,
    EntryLogCompactor,
    Throttle,
    add_phase_observer,
    remove_phase_observer,
)
from bkctl.bookied.storage.entry_log import DamagedRecord, scan_records
from bkctl.bookied.storage.index import LOC
from bkctl.wire import fastpath
from tests.support.compaction import compact_below, gc_on_clock

H = 3600 * 1000


def data(ledger: int, entry: int, size: int = 200) -> bytes:
    return (b"%d/%d:" % (ledger, entry)).ljust(size, b"x")


# -- Java's schedule ---------------------------------------------------------------------------


def test_major_before_minor_and_each_at_its_interval():
    p = GcPolicy()  # Java's defaults: minor 1 h below 0.2, major 24 h below 0.8
    assert choose_compaction(p, H, 0, 0, False, False, False) is None  # not yet due (strictly after)
    assert choose_compaction(p, H + 1, 0, 0, False, False, False) == MINOR
    assert choose_compaction(p, 24 * H + 1, 0, 0, False, False, False) == MAJOR
    assert choose_compaction(p, 24 * H + 1, 0, 0, False, True, False) == MINOR  # major suspended
    assert choose_compaction(p, 24 * H + 1, 0, 0, False, True, True) is None
    assert choose_compaction(p, 1, 0, 0, True, False, False) == MAJOR  # forced: whatever is enabled


def test_zero_disables_unless_force_allowed():
    off = GcPolicy(minor_interval_ms=0, major_interval_ms=0)
    assert choose_compaction(off, 10**12, 0, 0, True, False, False) is None
    forced = GcPolicy(minor_interval_ms=0, major_interval_ms=0, force_allow=True)
    assert choose_compaction(forced, 10**12, 0, 0, False, False, False) is None  # never periodically
    assert choose_compaction(forced, 1, 0, 0, True, False, False) == MAJOR
    assert choose_compaction(forced, 1, 0, 0, True, True, False) == MINOR
    # a threshold of 1 (or 0) is not forceable (Java: 0 < threshold < 1)
    one = GcPolicy(minor_interval_ms=0, major_interval_ms=0, major_threshold=1.0, force_allow=True)
    assert choose_compaction(one, 1, 0, 0, True, False, True) is None


# -- the throttle --------------------------------------------------------------------------------


class FakeTime:
    def __init__(self):
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def test_throttle_by_bytes_holds_the_rate():
    t = FakeTime()
    th = Throttle(1_000_000, True, clock=t.clock, sleep=t.sleep)
    sizes = [50_000] * 40 + [200_000] * 5
    for n in sizes:
        th.acquire(n)
        t.now += 0.001  # the copy itself takes a little time
    # every permit but the last is paid for before the next acquire returns: the bytes moved in
    # the elapsed time are exactly the rate's allowance (Guava's RateLimiter, first one free)
    elapsed = t.now - 100.0 - 0.001
    assert th.permits == sum(sizes)
    assert (sum(sizes) - sizes[-1]) / elapsed == pytest.approx(1_000_000, rel=1e-9)
    assert th.slept == pytest.approx(sum(t.sleeps))


def test_throttle_by_entries_counts_entries_not_bytes():
    t = FakeTime()
    th = Throttle(100, False, clock=t.clock, sleep=t.sleep)
    for _ in range(201):
        th.acquire(1_000_000)
    assert th.permits == 201 and t.now - 100.0 == pytest.approx(2.0)


def test_throttle_lifted_and_cancelled():
    t = FakeTime()
    th = Throttle(1, True, clock=t.clock, sleep=t.sleep)
    th.lifted = True
    for _ in range(10):
        th.acquire(10**6)
    assert t.sleeps == [] and th.permits == 0
    th.cancel()
    with pytest.raises(CompactionStopped):
        th.acquire(1)


# -- the keys at load ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, key, problem",
    [
        ({"minorCompactionThreshold": "1.5"}, "minorCompactionThreshold", "out of range (0..1)"),
        ({"majorCompactionThreshold": "-0.1"}, "majorCompactionThreshold", ""),
        ({"compactionRateByBytes": "0"}, "compactionRateByBytes", ""),
        ({"compactionRateByEntries": "0"}, "compactionRateByEntries", ""),
        ({"compactionMaxOutstandingRequests": "0"}, "compactionMaxOutstandingRequests", ""),
        ({"minorCompactionMaxTimeMillis": "-2"}, "minorCompactionMaxTimeMillis", ""),
        ({"logSizeLimit": "1000"}, "logSizeLimit", ""),
        ({"logSizeLimit": str(4 * 1024**3)}, "logSizeLimit", "out of range"),
        ({"isThrottleByBytes": "maybe"}, "isThrottleByBytes", ""),
        ({"gcWaitTime": "7200000"}, "minorCompactionInterval", "shorter than gcWaitTime"),
        ({"minorCompactionInterval": "86400"}, "minorCompactionInterval", "is not below majorCompactionInterval"),
        ({"minorCompactionThreshold": "0.9"}, "minorCompactionThreshold", "is not below majorCompactionThreshold"),
    ],
)
def test_compaction_keys_out_of_range_are_refused(tmp_path, overrides, key, problem):
    conf = tmp_path / "bk_server.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in overrides.items()))
    with pytest.raises(ConfigError) as err:
        load_config(str(conf))
    message = str(err.value)
    assert "\n" not in message and f"{key}: " in message and problem in message
    assert message.startswith(str(conf) + ":") or key != next(iter(overrides))


def test_compaction_keys_load_with_java_defaults_and_old_rate_name(tmp_path):
    cfg = load_config()
    policy = GcPolicy.from_config(cfg)
    assert policy == GcPolicy()
    assert cfg.log_size_limit == 1024**3
    conf = tmp_path / "bk_server.conf"
    conf.write_text("compactionRate=250\nminorCompactionInterval=0\nisForceGCAllowWhenNoSpace=true\n")
    policy = GcPolicy.from_config(load_config(str(conf)))
    assert policy.rate_by_entries == 250 and not policy.minor_enabled and policy.force_when_no_space
    # one of the pair disabled: no ordering between them is required (Java's rule)
    conf.write_text("minorCompactionInterval=0\nminorCompactionThreshold=0.95\n")
    assert load_config(str(conf)).minor_compaction_threshold == 0.95


# -- compaction in a real store ------------------------------------------------------------------


def sparse_store(sdir, ledgers=8, entries=60, keep=(0,)) -> EntryStore:
    """Ledgers interleaved into small logs, all but ``keep`` deleted."""
    s = EntryStore(sdir, log_size_limit=16 * 1024, twins=fastpath.selected())
    for e in range(entries):
        for lid in range(ledgers):
            s.put_entry(lid, e, data(lid, e))
        if e % 10 == 9:
            s.flush()
    s.flush()
    for lid in range(ledgers):
        if lid not in keep:
            s.delete_ledger(lid)
    return s


def test_compaction_keeps_every_live_entry_and_frees_the_logs(tmp_path):
    s = sparse_store(str(tmp_path / "l"))
    before = s.disk_usage()
    assert before["entry_logs"] > 3 and before["live_bytes"] * 3 < before["entry_log_bytes"]
    stats = compact_below(s, 0.5)
    after = s.disk_usage()
    assert stats["logs"] >= before["entry_logs"] - 1 and stats["moved_entries"] >= 50
    assert after["entry_log_bytes"] <= 2 * after["live_bytes"] + 2 * 16 * 1024
    assert all(s.get_entry(0, e) == data(0, e) for e in range(60))
    s.close()
    s = EntryStore(str(tmp_path / "l"), twins=fastpath.selected())
    assert all(s.get_entry(0, e) == data(0, e) for e in range(60))
    assert s.disk_usage()["live_entries"] == 60
    s.close()


def test_a_row_changed_during_compaction_is_not_switched(tmp_path):
    """A re-put (recovery add) and a deleted ledger win over the compaction's copies."""
    s = sparse_store(str(tmp_path / "l"), keep=(0, 1, 2))
    victim = s.compaction_candidates(0.9)[0][0]
    in_victim = {}
    for lid, eid, _data, _row in s.live_records(victim):
        in_victim.setdefault(lid, []).append(eid)
    assert len(in_victim) >= 2
    re_put_ledger, deleted_ledger = sorted(in_victim)[:2]
    real = s.live_records

    def racing(log_id):  # after the scan, before the switch: a re-put and a delete land
        records = list(real(log_id))
        for eid in in_victim[re_put_ledger]:
            s.put_entry(re_put_ledger, eid, b"newer copy %d" % eid)
        s.flush()
        s.delete_ledger(deleted_ledger)
        return records

    s.live_records = racing
    throttle = Throttle(1, False)
    throttle.lifted = True
    with EntryLogCompactor(s, throttle, max_outstanding=7) as c:
        result = c.compact(victim)
    assert result.deleted and result.moved_entries < sum(map(len, in_victim.values()))
    assert all(s.get_entry(re_put_ledger, e) == b"newer copy %d" % e for e in in_victim[re_put_ledger])
    assert not s.has_ledger(deleted_ledger) and s.get_entry(deleted_ledger, in_victim[deleted_ledger][0]) is None
    usage = s.disk_usage()
    assert usage["live_entries"] == sum(1 for lid in (0, 1, 2) if lid != deleted_ledger for _ in range(60))
    s.close()


def test_reads_and_adds_go_on_while_compaction_is_throttled(tmp_path):
    s = sparse_store(str(tmp_path / "l"), keep=(0, 3))
    reading = threading.Event()
    errors = []

    def reader():
        while not reading.is_set():
            for lid in (0, 3):
                for e in range(0, 60, 7):
                    if s.get_entry(lid, e) != data(lid, e):
                        errors.append((lid, e))

    t = threading.Thread(target=reader)
    t.start()
    adds = []

    def slow_sleep(seconds):  # while compaction waits, the bookie adds and flushes
        e = 100 + len(adds)
        s.put_entry(9, e, data(9, e))
        adds.append(e)
        s.flush()

    th = Throttle(50, False, sleep=slow_sleep)
    try:
        stats = compact_below(s, 0.5, throttle=th, max_outstanding=5)
    finally:
        reading.set()
        t.join()
    assert not errors and stats["moved_entries"] >= 60 and len(adds) >= 60  # a wait per entry but the first
    assert all(s.get_entry(9, e) == data(9, e) for e in adds)
    assert all(s.get_entry(lid, e) == data(lid, e) for lid in (0, 3) for e in range(60))
    s.close()


# -- the thread's disk-pressure reactions, on task.Clock -------------------------------------------


def test_full_disk_suspends_compaction_or_forces_it_with_limits_lifted(tmp_path):
    gc, clock, passes = gc_on_clock(GcPolicy(gc_wait_ms=1000))
    gc.disk_almost_full()
    assert gc.suspend_major and not gc.suspend_minor and not passes
    gc.disk_full()
    assert gc.suspend_major and gc.suspend_minor and not passes
    gc.disk_writable()
    assert not (gc.suspend_major or gc.suspend_minor)

    s = sparse_store(str(tmp_path / "l"))
    gc, clock, passes = gc_on_clock(
        GcPolicy(gc_wait_ms=1000, force_when_no_space=True, rate_by_entries=1, major_max_ms=1), [s]
    )
    gc.disk_full()
    assert len(passes) == 1 and gc.in_force_gc()
    gc.disk_full()  # the next disk check: no second pass while one runs
    assert len(passes) == 1
    clock.advance(1)
    passes[0].callback(None)  # runs the pass: rate 1 entry/s and 1 ms max would take minutes
    assert gc.major_count == 1 and gc.entries_moved == 60 and gc.reclaimed_by_compaction > 0
    assert len(passes) == 1 and not gc.in_force_gc()
    gc.disk_full()  # the next disk check finds it still full (as Java's allDisksFull): forced again
    assert len(passes) == 2 and gc.in_force_gc() and gc.no_space
    passes[1].callback(None)
    gc.disk_writable()
    assert not gc.in_force_gc() and len(passes) == 2
    s.close()


def test_a_full_disk_asks_again_after_each_forced_pass_even_a_failed_one(caplog):
    checks = []

    def look_at_the_disks():  # what the bookie does after a pass
        checks.append(1)
        gc.disk_full()

    def forced() -> int:
        """The passes started forced so far (each says so in the log)."""
        return sum(r.getMessage().startswith("garbage collection forced") for r in caplog.records)

    caplog.set_level(logging.INFO, logger="bookied.gc")
    gc, clock, passes = gc_on_clock(GcPolicy(gc_wait_ms=1000, force_when_no_space=True), on_pass_done=look_at_the_disks)
    gc.disk_full()
    assert len(passes) == 1
    passes[0].errback(OSError("No space left on device"))
    assert checks and len(passes) == 1  # the check right after the pass starts none...
    gc.disk_full()  # ...the next periodic one does, although the pass failed
    assert len(passes) == 2
    passes[1].callback(None)
    assert forced() == 2
    gc()  # a periodic pass while still full (force_gc dropped after the last): not forced
    assert len(passes) == 3 and forced() == 2
    gc.disk_full()  # asks for a forced pass after it
    passes[2].callback(None)
    assert len(passes) == 4 and forced() == 3


def test_an_almost_full_disk_forces_once_per_change():
    gc, clock, passes = gc_on_clock(GcPolicy(gc_wait_ms=1000, force_when_no_space=True))
    gc.disk_almost_full()
    assert len(passes) == 1
    passes[0].callback(None)
    gc.disk_almost_full()
    assert len(passes) == 1 and not gc.in_force_gc()  # Java's diskAlmostFull: on the change only
    gc.disk_writable()
    gc.disk_almost_full()
    assert len(passes) == 2


def test_a_compaction_that_fails_to_write_leaves_no_file_behind(tmp_path, monkeypatch):
    s = sparse_store(str(tmp_path / "l"))
    victim = s.compaction_candidates(0.5)[0][0]
    logs_before = sorted(os.listdir(s.directory))
    real = os.fdatasync
    calls = []

    def full_disk(fd):  # the compaction log's first fdatasync fails as on a full disk
        calls.append(fd)
        raise OSError(28, "No space left on device")

    throttle = Throttle(1, False)
    throttle.lifted = True
    with pytest.raises(OSError), EntryLogCompactor(s, throttle) as c:
        monkeypatch.setattr(os, "fdatasync", full_disk)
        try:
            c.compact(victim)
        finally:
            monkeypatch.setattr(os, "fdatasync", real)
    assert calls and sorted(os.listdir(s.directory)) == logs_before  # the copy's log is gone, the old one kept
    assert all(s.get_entry(0, e) == data(0, e) for e in range(60))
    s.close()


# -- the store's shape and the compaction phases -------------------------------------------------


def test_the_entry_store_is_a_compactable_store_and_the_phases_come_in_crash_order(tmp_path):
    s = sparse_store(str(tmp_path / "l"), keep=(0, 1))
    assert isinstance(s, CompactableStore)
    victim = s.compaction_candidates(0.9)[0][0]
    seen = []

    def observe(phase, log_id):
        seen.append((phase, log_id, log_id in s.log_ids(), os.path.exists(s.entry_log.path(log_id))))

    add_phase_observer(observe)
    try:
        compact_below(s, 0.9, max_outstanding=10**6)
    finally:
        remove_phase_observer(observe)
    mine = [(phase, known, present) for phase, lid, known, present in seen if lid == victim]
    # copied: still the index's and on disk; switched: forgotten by the index, file still there;
    # unlinked: gone
    assert mine == [
        (CompactionPhase.COPIED, True, True),
        (CompactionPhase.SWITCHED, False, True),
        (CompactionPhase.UNLINKED, False, False),
    ]
    s.close()


def test_deleted_ledger_collector_deletes_the_ledgers_whose_metadata_is_gone(tmp_path):
    from tests.support.fake_store import FakeMetadataStore
    from tests.support.ledgers import make_ledgers

    zk = FakeMetadataStore().start()
    make_ledgers(zk, range(4))
    s = EntryStore(str(tmp_path / "l"), twins=fastpath.selected())
    for lid in range(4):
        s.put_entry(lid, 0, data(lid, 0))
    s.flush()
    zk.ledgers.delete(1)
    zk.ledgers.delete(3)
    assert DeletedLedgerCollector(zk.ledgers)([s]) == 2
    assert s.ledger_ids() == [0, 2] and s.get_entry(1, 0) is None
    s.close()


def test_an_entry_stores_ledgers_version_moves_when_a_ledger_comes_or_goes_not_with_its_entries(tmp_path):
    s = EntryStore(str(tmp_path / "l"), twins=fastpath.selected())
    v0 = s.ledgers_version
    s.put_entry(1, 0, data(1, 0))
    v1 = s.ledgers_version
    s.put_entry(1, 1, data(1, 1))
    s.set_master_key(1, b"k")
    s.flush()
    assert v1 != v0 and s.ledgers_version == v1  # the ledger's entries, key and flush: the same ledgers
    s.set_master_key(2, b"k")  # a fence or a key creates the ledger too
    v2 = s.ledgers_version
    s.delete_ledgers([1])
    assert v2 != v1 and s.ledgers_version != v2 and s.ledger_ids() == [2]
    s.close()


class LedgerIds:
    """What the collector reads of an entry store: its ledgers (and what it deleted)."""

    def __init__(self, ids):
        self.ids = set(ids)
        self.deleted = []
        self.ledgers_version = 0
        self.taken = 0

    def add(self, ledger_id):
        self.ids.add(ledger_id)
        self.ledgers_version += 1

    def ledger_ids(self, ordered=True):
        self.taken += 1
        return sorted(self.ids) if ordered else list(self.ids)

    def has_ledger(self, ledger_id):
        return ledger_id in self.ids

    def delete_ledgers(self, ledger_ids):
        self.ledgers_version += 1
        self.ids.difference_update(ledger_ids)
        self.deleted.extend(ledger_ids)
        return len(ledger_ids)


def test_the_collector_lists_ledger_ranges_not_ledgers():
    from tests.support.fake_store import FakeMetadataStore
    from tests.support.ledgers import make_ledgers

    zk = FakeMetadataStore().start()
    make_ledgers(zk, range(0, 30000, 3))  # 10,000 ledgers in 3 ranges of 10,000 ids
    make_ledgers(zk, [10**6 + 1])
    for lid in (3, 15000, 29997):
        zk.ledgers.delete(lid)
    # ledgers in a range with no metadata at all, and past the last range, are garbage too
    a, b = LedgerIds(range(0, 30000, 3)), LedgerIds([10**6 + 1, 500000, 2 * 10**6])
    zk.calls.clear()
    assert DeletedLedgerCollector(zk.ledgers)([a, b]) == 5
    assert sorted(a.deleted + b.deleted) == [3, 15000, 29997, 500000, 2 * 10**6]
    assert zk.ledgers.ranges_listed == 4 and not zk.called("ledgers.exists") and not zk.called("ledgers.read_many")


def test_the_bookies_ledgers_are_taken_before_the_listing_and_verify_rereads_the_missing():
    from tests.support.fake_store import FakeMetadataStore
    from tests.support.ledgers import make_ledgers

    zk = FakeMetadataStore().start()
    make_ledgers(zk, [1, 2])
    store = LedgerIds([1, 2])
    real = zk.ledgers.ranges

    def creating_meanwhile(*, watched=False):
        assert watched  # a pass's walk is a repeated one: ZooKeeper's watches spare it the unchanged leaves
        for rng in real():  # the range is listed, then a ledger of it is created (metadata, an entry here)
            make_ledgers(zk, [7])
            store.ids.add(7)
            yield rng

    # taken before the listing, the bookie's ledgers do not include it: not deleted
    zk.ledgers.ranges = creating_meanwhile
    assert DeletedLedgerCollector(zk.ledgers)([store]) == 0 and store.ids == {1, 2, 7}
    # verify (Java's verifyMetadataOnGC): a ledger the listing missed is read again and kept

    def missing_two(*, watched=False):
        for rng in real():
            yield rng._replace(ledgers=rng.ledgers - {2})

    zk.ledgers.ranges = missing_two
    assert DeletedLedgerCollector(zk.ledgers, verify=True)([store]) == 0 and store.ids == {1, 2, 7}
    assert DeletedLedgerCollector(zk.ledgers)([store]) == 1 and store.ids == {1, 7}


def test_with_a_listing_process_the_collector_hands_it_the_ids_as_they_come_and_deletes_its_answer():
    a, b = LedgerIds([5, 1, 9]), LedgerIds([7, 3, 5])  # 5 in both directories
    asked = []

    answer = [3, 5, 9]

    def listing(local):
        asked.append(sorted(local.ids()))
        return answer

    collector = DeletedLedgerCollector(None, listing=listing)
    assert collector([a, b]) == 3 and collector.active == 5
    assert asked == [[1, 3, 5, 5, 7, 9]]  # the listing sorts and dedups them, in its own process
    assert sorted(a.deleted) == [5, 9] and sorted(b.deleted) == [3, 5] and a.ids == {1} and b.ids == {7}
    # the stores changed (the deletion): taken and packed again; then unchanged: what was sent is sent again
    answer = []
    assert collector([a, b]) == 0 and asked[-1] == [1, 7] and (a.taken, b.taken) == (2, 2)
    assert collector([a, b]) == 0 and asked[-1] == [1, 7] and (a.taken, b.taken) == (2, 2)
    b.add(11)  # a ledger added to one store: both are taken again
    assert collector([a, b]) == 0 and asked[-1] == [1, 7, 11] and (a.taken, b.taken) == (3, 3)
    assert collector.active == 3


def test_the_listing_works_half_its_time():
    from bkctl.bookied.gc_listing import paced

    def ranges():
        for end in range(3):
            until = time.monotonic() + 0.02  # a leaf's getChildren and its comparison
            while time.monotonic() < until:
                pass
            yield end

    started = time.monotonic()
    assert list(paced(ranges(), 0.5)) == [0, 1, 2]
    assert time.monotonic() - started >= 0.11  # 60 ms of work, as long asleep


# -- damaged records ---------------------------------------------------------------------------


def corrupt(path: str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


def live_in(s, log_id):
    return [
        (lid, eid, off)
        for lid, eid, off in ((lid, eid, LOC.unpack(row)[1]) for lid, eid, _d, row in s.live_records(log_id))
    ]


def test_compaction_moves_the_live_records_after_a_damaged_one_and_reclaims_the_log(tmp_path):
    s = sparse_store(str(tmp_path / "l"), keep=(0, 5))
    victim = s.compaction_candidates(0.5)[0][0]
    live = live_in(s, victim)
    assert len(live) >= 4
    rotten_lid, rotten_eid, rotten_off = live[1]  # a live record's data rots: its checksum fails
    corrupt(s.entry_log.path(victim), rotten_off + 40)
    with pytest.raises(OSError):
        s.get_entry(rotten_lid, rotten_eid)  # the read path never serves it
    throttle = Throttle(1, False)
    throttle.lifted = True
    with EntryLogCompactor(s, throttle) as c:
        result = c.compact(victim)
    assert result.deleted and victim not in s.log_ids()
    assert result.moved_entries == len(live) - 1  # the ones after the damaged record too
    [found] = result.damaged
    assert (found.log_id, found.record.offset, found.record.reason) == (victim, rotten_off, "checksum mismatch")
    assert found.dropped == ((rotten_lid, rotten_eid),)
    assert s.get_entry(rotten_lid, rotten_eid) is None  # gone from this bookie, never served damaged
    for lid, eid, _off in live[2:] + live[:1]:
        assert s.get_entry(lid, eid) == data(lid, eid)
    s.close()


def test_a_damaged_length_in_a_dead_record_is_resynchronised_past(tmp_path):
    s = sparse_store(str(tmp_path / "l"), keep=(5,))  # a flush writes ledgers in order: dead ones first
    victim, live, dead = next(
        (lid, live, dead)
        for lid, _u in s.compaction_candidates(0.5)
        for live in [live_in(s, lid)]
        for dead in scan_log(s.entry_log.path(lid))
        if dead[2] != 5 and dead[0] < live[-1][2]
    )
    corrupt(s.entry_log.path(victim), dead[0] + 5)  # the length field of a deleted ledger's record
    damaged = [r for r in scan_records(s.entry_log.path(victim)) if type(r) is DamagedRecord]
    assert damaged == [DamagedRecord(dead[0], dead[1], None, None, damaged[0].reason)]  # resynchronised
    stats = compact_below(s, 0.5)
    assert stats["moved_entries"] >= len(live) and victim not in s.log_ids()
    assert all(s.get_entry(5, e) == data(5, e) for e in range(60))
    s.close()


def test_the_collector_reports_a_damaged_record_once_and_counts_it(tmp_path, caplog):
    s = sparse_store(str(tmp_path / "l"), keep=(0,))
    victim = s.compaction_candidates(0.5)[0][0]
    _lid, _eid, off = live_in(s, victim)[0]
    corrupt(s.entry_log.path(victim), off + 30)
    gc, _clock, passes = gc_on_clock(GcPolicy(gc_wait_ms=1000, force_allow=True), [s])
    with caplog.at_level("WARNING", logger="bookied.gc"):
        for _ in range(2):
            gc.trigger(force_major=True)
            passes[-1].callback(None)
    lines = [r.getMessage() for r in caplog.records if "damaged record" in r.getMessage()]
    assert len(lines) == 1 and f"entry log {victim} at offset {off}" in lines[0]
    status = gc.status()
    assert status["damagedRecordCount"] == 1 and status["damagedRecords"][0]["offset"] == off
    assert victim not in s.log_ids()
    s.close()


# -- what the collector says it is doing ---------------------------------------------------------


def test_the_state_is_collecting_then_compacting_only_while_compaction_runs_then_idle(tmp_path):
    s = sparse_store(str(tmp_path / "l"), keep=(0,))
    seen = []

    def look(what):
        details = gc.details()[0]
        seen.append(
            (
                what,
                gc.status()["state"],
                gc.status()["compacting"],
                details["majorCompacting"],
                details["minorCompacting"],
            )
        )

    clock, passes = task.Clock(), []

    def in_thread(fn):
        d = defer.Deferred()
        d.addCallback(lambda _: fn())
        passes.append(d)
        return d

    gc = GarbageCollector(
        GcPolicy(gc_wait_ms=1000, force_allow=True), [s], lambda stores: look("collect") or 0, clock, in_thread
    )
    observe = lambda phase, log_id: look(phase.value)  # noqa: E731
    add_phase_observer(observe)
    try:
        gc.trigger(force_major=True)
        passes[-1].callback(None)
    finally:
        remove_phase_observer(observe)
    look("after")
    assert seen[0] == ("collect", "collecting", None, False, False)  # Java: not compacting while collecting
    assert ("copied", "major compacting", "major", True, False) in seen
    assert seen[-1] == ("after", "idle", None, False, False)
    status = gc.status()
    assert status["lastCompaction"] is not None and status["lastCompaction"]["reclaimedBytes"] > 0
    # a later pass that reclaims nothing is the last run, not the last compaction
    gc.trigger(force_major=True)
    passes[-1].callback(None)
    status = gc.status()
    assert status["lastCompactionRun"]["reclaimedBytes"] == 0 and status["lastCompaction"]["reclaimedBytes"] > 0
    s.close()


def test_details_mark_the_active_log_and_say_why_dead_data_stays(tmp_path):
    s = EntryStore(str(tmp_path / "l"), log_size_limit=1024**2, twins=fastpath.selected())
    for e in range(50):
        s.put_entry(1, e, data(1, e))
        s.put_entry(2, e, data(2, e))
    s.flush()
    s.delete_ledgers([1])
    gc, _clock, passes = gc_on_clock(GcPolicy(gc_wait_ms=1000, force_allow=True), [s])
    gc.trigger(force_major=True)
    passes[-1].callback(None)
    [log_doc] = gc.details()[0]["entryLogs"]
    assert log_doc["active"] is True and log_doc["liveRatio"] < 0.6  # half dead, but being written
    assert (
        log_doc["keptBecause"].startswith("being written") and "logSizeLimit (1048576 bytes)" in log_doc["keptBecause"]
    )
    assert gc.status()["lastCompactionRun"]["candidateLogs"] == 0
    s.close()


# -- logs deleted whole, counted apart from logs compacted -----------------------------------------


def test_a_log_emptied_while_written_goes_at_the_next_pass_once_it_rolled_counted_as_deleted(tmp_path):
    s = EntryStore(str(tmp_path / "l"), log_size_limit=16 * 1024, twins=fastpath.selected())
    for e in range(72):  # 72 records of 224 bytes: the log is full to 192 bytes
        s.put_entry(1, e, data(1, e))
    s.flush()
    [first] = s.log_ids()
    s.delete_ledgers([1])  # its only ledger gone while it is still the log being written
    assert s.log_ids() == [first] and s.deleted_whole == (0, 0)
    for e in range(100):  # the checkpoint's log rolls past 16 KiB
        s.put_entry(2, e, data(2, e))
    s.flush()
    assert first in s.log_ids() and first not in s.active_log_ids()
    size = s.log_usage()[first][0]
    gc, _clock, passes = gc_on_clock(GcPolicy(gc_wait_ms=1000), [s])
    [doc] = [d for d in gc.details()[0]["entryLogs"] if d["logId"] == first]
    assert doc["keptBecause"] == "no live entry left: the next garbage collection pass deletes it whole"
    gc()  # a periodic pass, no compaction due: Java's doGcEntryLogs still removes it
    passes[-1].callback(None)
    assert first not in s.log_ids() and not os.path.exists(s.entry_log.path(first))
    status = gc.status()
    assert status["logsDeleted"] == 1 and status["reclaimedSpaceViaDeletes"] == size
    assert status["logsCompacted"] == 0 and status["reclaimedSpaceViaCompaction"] == 0
    assert gc.details()[0]["logsDeleted"] == 1
    assert all(s.get_entry(2, e) == data(2, e) for e in range(100))
    s.close()


def test_deletions_are_counted_exactly_while_a_flush_grows_the_logs(tmp_path):
    """The bytes of logs deleted whole were the committed bytes before the collection less those
    after it; a checkpoint committing meanwhile (both run every 2 s) hid them. Now they are the
    sizes of the logs unlinked, and a compacted log counts as compacted only."""
    s = EntryStore(str(tmp_path / "l"), log_size_limit=16 * 1024, twins=fastpath.selected())
    for e in range(120):  # more than a log of ledger 1 alone, then 2 and 3 interleaved
        s.put_entry(1, e, data(1, e))
    s.flush()
    for e in range(60):
        for lid in (2, 3):
            s.put_entry(lid, e, data(lid, e))
        if e % 10 == 9:
            s.flush()
    s.flush()
    usage = s.log_usage()
    only_1 = [lid for lid in usage if {r[0] for r in s.live_records(lid)} == {1}]
    assert only_1, "a log holding only ledger 1"
    whole = sum(usage[lid][0] for lid in only_1)

    def collect(stores):  # ledger 1's metadata is gone; a flush of new entries commits meanwhile
        for e in range(150):
            s.put_entry(9, e, data(9, e, 400))
        s.flush()
        s.delete_ledgers([1, 2])
        return 2

    gc, _clock, passes = gc_on_clock(GcPolicy(gc_wait_ms=1000, force_allow=True), [s], collect)
    gc.trigger(force_major=True)
    passes[-1].callback(None)
    status = gc.status()
    assert status["gcRuns"] == 1 and status["ledgersRemoved"] == 2
    assert status["reclaimedSpaceViaDeletes"] >= whole and status["logsDeleted"] >= len(only_1)
    assert status["logsCompacted"] >= 1 and status["reclaimedSpaceViaCompaction"] > 0
    assert s.deleted_whole == (status["logsDeleted"], status["reclaimedSpaceViaDeletes"])
    assert all(s.get_entry(3, e) == data(3, e) for e in range(60))
    s.close()


def forced_pass_deleting_at_the_second_collection(s, ledgers) -> tuple[GarbageCollector, list]:
    """A forced major pass over ``s`` with gcWaitTime 1 ms whose second collection deletes
    ``ledgers``: (the collector, one item per collection).  Time is a manual clock that moves
    2 ms with each batch the compaction switches, nothing else: a collection is due after a
    batch, never before the first, however loaded the machine (on the wall clock a slow start
    made the second collection come before any batch: 1,000 entries moved, not 1,024)."""
    from tests.support.clocks import ManualClock

    calls: list[int] = []
    time_ = ManualClock()
    switch = s.switch_locations

    def switch_and_tick(*args, **kwargs):
        try:
            return switch(*args, **kwargs)
        finally:
            time_.advance(0.002)

    def collect(stores):
        calls.append(len(calls))
        if len(calls) == 2:
            s.delete_ledgers(ledgers)
            return len(ledgers)
        return 0

    s.switch_locations = switch_and_tick
    # minutes, not the default hour and day between periodic compactions: status() finds the next
    # ones a gcWaitTime at a time, and at 1 ms a day was 90 million steps (some 4 CPU-s a call);
    # the forced pass runs within a few manual milliseconds, long before either is due
    policy = GcPolicy(gc_wait_ms=1, force_allow=True, minor_interval_ms=60_000, major_interval_ms=120_000)
    gc, _clock, passes = gc_on_clock(policy, [s], collect, time_.monotonic)
    gc.trigger(force_major=True)
    passes[-1].callback(None)
    return gc, calls


def test_a_long_compaction_collects_deleted_ledgers_between_logs(tmp_path):
    """Compaction at its rate limit can take longer than gcWaitTime: the ledgers deleted meanwhile
    are collected between two logs, and a candidate they empty is deleted whole, not compacted."""
    s = sparse_store(str(tmp_path / "l"), keep=(0, 1))
    candidates = [lid for lid, _u in s.compaction_candidates(0.8)]
    assert len(candidates) >= 3
    gc, calls = forced_pass_deleting_at_the_second_collection(s, [1])  # between the first and the second log
    status = gc.status()
    assert len(calls) >= 3 and status["ledgersRemoved"] == 1  # once at the start, then between logs
    assert status["logsCompacted"] >= 1
    assert status["logsCompacted"] + status["logsDeleted"] >= len(candidates)
    assert not any(lid in s.log_ids() for lid in candidates)
    assert not s.has_ledger(1) and all(s.get_entry(0, e) == data(0, e) for e in range(60))
    assert "not reclaimed" not in str(gc.details()) and not gc.not_reclaimed
    s.close()


def one_closed_log(tmp_path, ledgers, entries, deleted) -> tuple[EntryStore, int]:
    """A store with one log no longer written (reopened) holding ``entries`` records of 100 bytes
    of each of ``ledgers``, ``deleted`` gone: (the store, the log, a compaction candidate)."""
    s = EntryStore(str(tmp_path / "l"), log_size_limit=4 * 1024**2, twins=fastpath.selected())
    for lid in ledgers:
        for e in range(entries):
            s.put_entry(lid, e, data(lid, e, 100))
    s.flush()
    s.delete_ledgers(deleted)
    s.close()
    s = EntryStore(str(tmp_path / "l"), log_size_limit=4 * 1024**2, twins=fastpath.selected())
    [victim] = [lid for lid, _u in s.compaction_candidates(0.8)]
    return s, victim


def test_compaction_switches_at_most_1024_rows_per_index_transaction(tmp_path):
    """Whatever compactionMaxOutstandingRequests says (Java's default 100,000 is more than a log
    holds), a switch rewrites at most 1,024 rows: each rewritten index page is copied, and the
    index file never shrinks (issue 56)."""
    s, victim = one_closed_log(tmp_path, ledgers=(1, 2), entries=3000, deleted=[2])
    switched = []
    real = s.switch_locations

    def counting(log_id, moves, added, before_unlink=None):
        switched.append(len(moves))
        return real(log_id, moves, added, before_unlink)

    s.switch_locations = counting
    stats = compact_below(s, 0.8)
    assert stats["moved_entries"] == 3000 and stats["logs"] == 1 and victim not in s.log_ids()
    assert switched == [1024, 1024, 952]
    assert all(s.get_entry(1, e) == data(1, e, 100) for e in range(3000))
    s.close()


def test_a_collection_between_two_batches_spares_the_copies_of_ledgers_deleted_meanwhile(tmp_path):
    """At the rate limit one log can take longer than gcWaitTime: deleted ledgers are collected
    between two of its batches, their records are no longer copied, and a log left without a
    live entry by that is deleted whole -- counted so, not as compacted, and not 'not reclaimed'."""
    s, victim = one_closed_log(tmp_path, ledgers=(1, 2, 3, 4), entries=1000, deleted=[4])
    # the second collection comes after the first batch of 1,024 records was switched to the copies
    gc, calls = forced_pass_deleting_at_the_second_collection(s, [2, 3])
    status = gc.status()
    assert len(calls) >= 2 and status["ledgersRemoved"] == 2
    assert status["entriesMoved"] == 1024  # ledger 1's 1,000 and 24 of ledger 2's; ledger 3's none
    assert victim not in s.log_ids() and not os.path.exists(s.entry_log.path(victim))
    assert (status["logsDeleted"], status["logsCompacted"], status["reclaimedSpaceViaCompaction"]) == (1, 0, 0)
    assert not gc.not_reclaimed
    assert all(s.get_entry(1, e) == data(1, e, 100) for e in range(1000))
    assert not s.has_ledger(2) and s.get_entry(2, 0) is None
    s.close()


def test_ledger_ids_come_sorted_in_slices_and_the_stores_lists_are_merged():
    import random

    from bkctl.bookied.storage.pacing import SORT_SLICE, sorted_in_slices
    from tests.support.fake_store import FakeMetadataStore
    from tests.support.ledgers import make_ledgers

    ids = random.Random(57).sample(range(10**9), 3 * SORT_SLICE + 17)
    assert sorted_in_slices(ids) == sorted(ids) and sorted_in_slices(ids[:5]) == sorted(ids[:5])
    zk = FakeMetadataStore().start()
    make_ledgers(zk, [1, 2])
    a, b = LedgerIds([1, 5, 9]), LedgerIds([2, 6])
    assert DeletedLedgerCollector(zk.ledgers)([a, b]) == 3
    assert (a.deleted, b.deleted) == ([5, 9], [6])


# -- nearly empty logs: compacted at every pass (bookied's rule) -----------------------------------


def nearly_empty_and_sparse(tmp_path) -> tuple[EntryStore, tuple[int, int, int]]:
    """Two full 16 KiB logs of 72 records: ``a`` with 1 live (1.4%), ``b`` with 10 (14%: below
    the minor threshold only); ``c`` is being written."""
    s = EntryStore(str(tmp_path / "l"), log_size_limit=16 * 1024, twins=fastpath.selected())
    for batch in (((1, 71), (2, 1)), ((3, 62), (4, 10)), ((5, 10),)):
        for lid, n in batch:
            for e in range(n):
                s.put_entry(lid, e, data(lid, e))
        s.flush()
    s.delete_ledgers([1, 3])
    usage = s.log_usage()
    a, b, c = sorted(usage)
    assert usage[a][2:] == (1, pytest.approx(1 / 72)) and usage[b][2] == 10 and 0.1 < usage[b][3] < 0.2
    assert s.active_log_ids() == [c]
    return s, (a, b, c)


def test_a_pass_without_compaction_due_compacts_the_nearly_empty_logs_only(tmp_path):
    s, (a, b, c) = nearly_empty_and_sparse(tmp_path)
    policy = GcPolicy(gc_wait_ms=1000, minor_interval_ms=10_000, major_interval_ms=30_000)
    gc, clock, passes = gc_on_clock(policy, [s])
    docs = {d["logId"]: d["keptBecause"] for d in gc.details()[0]["entryLogs"] if d["logId"] != c}
    assert docs[a] == (
        "nearly empty (below nearlyEmptyCompactionThreshold 0.1): the next garbage collection pass takes it"
    )
    assert docs[b] == "below minorCompactionThreshold: the next minor compaction takes it"
    minor_due = gc.next_compaction_ms(MINOR)
    clock.advance(1)
    gc()  # neither of Java's compactions is due
    passes[-1].callback(None)
    assert a not in s.log_ids() and not os.path.exists(s.entry_log.path(a)) and b in s.log_ids()
    st = gc.status()
    assert (st["nearlyEmptyCompactionCounter"], st["minorCompactionCounter"], st["majorCompactionCounter"]) == (1, 0, 0)
    assert (st["logsCompacted"], st["entriesMoved"], st["logsDeleted"]) == (1, 1, 0)  # compacted, not deleted whole
    assert st["lastCompactionRun"]["kind"] == "nearly empty" and st["lastCompactionRun"]["candidateLogs"] == 1
    assert gc.next_compaction_ms(MINOR) == minor_due  # it restarts no interval
    assert s.get_entry(2, 0) == data(2, 0)
    # the log that compaction wrote is small: the rule leaves such logs to Java's compactions
    [copy] = set(s.log_ids()) - {b, c}
    assert s.log_usage()[copy][0] < 8 * 1024 and s.compaction_candidates(1.01, 8 * 1024) == [(b, s.log_usage()[b][3])]
    assert not gc.kept_because(0.05, False, 16 * 1024, 1, size=4 * 1024).startswith("nearly empty")
    assert gc.kept_because(0.05, False, 16 * 1024, 1, size=8 * 1024).startswith("nearly empty")
    clock.advance(1)
    gc()  # nothing nearly empty left: no compaction at all
    passes[-1].callback(None)
    assert gc.status()["nearlyEmptyCompactionCounter"] == 1 and gc.status()["lastCompactionRun"]["timeMs"] == 1000
    clock.advance(9)
    gc()  # the minor interval has passed: the minor compaction takes ``b``
    passes[-1].callback(None)
    st = gc.status()
    assert b not in s.log_ids() and (st["nearlyEmptyCompactionCounter"], st["minorCompactionCounter"]) == (1, 1)
    assert all(s.get_entry(4, e) == data(4, e) for e in range(10))
    s.close()


def test_no_nearly_empty_compaction_while_minor_compaction_is_suspended_or_off(tmp_path):
    assert GcPolicy(nearly_empty_threshold=0.5).nearly_empty_below == 0.2  # never above the minor threshold
    assert GcPolicy(minor_interval_ms=0).nearly_empty_below == 0
    assert GcPolicy(minor_threshold=0).nearly_empty_below == 0
    assert GcPolicy(nearly_empty_threshold=0).to_status()["nearlyEmptyCompactionThreshold"] == 0
    s, (a, _b, _c) = nearly_empty_and_sparse(tmp_path)
    for policy, full in (
        (GcPolicy(gc_wait_ms=1000), True),
        (GcPolicy(gc_wait_ms=1000, nearly_empty_threshold=0), False),
    ):
        gc, clock, passes = gc_on_clock(policy, [s])
        if full:
            gc.disk_full()  # minor compaction suspended (isForceGCAllowWhenNoSpace off)
        clock.advance(1)
        gc()
        passes[-1].callback(None)
        assert a in s.log_ids() and gc.status()["nearlyEmptyCompactionCounter"] == 0
        [why] = [d["keptBecause"] for d in gc.details()[0]["entryLogs"] if d["logId"] == a]
        assert not why.startswith("nearly empty")
    s.close()


def test_bookie_gc_status_shows_the_nearly_empty_compactions_when_the_rule_is_on(monkeypatch):
    import bkctl.render
    from bkctl.commands.bookie_admin import _print_gc
    from bkctl.ops.bookie_http import GcRun

    shown: list = []
    monkeypatch.setattr(bkctl.render, "fields", lambda app, pairs: shown.extend(pairs))
    for policy in (
        GcPolicy(gc_wait_ms=1000),
        GcPolicy(gc_wait_ms=1000, settled_threshold=0),
        GcPolicy(gc_wait_ms=1000, nearly_empty_threshold=0, settled_threshold=0),
    ):
        gc, _clock, _passes = gc_on_clock(policy)
        gc.nearly_empty_count = 3
        shown.clear()
        _print_gc(
            None,
            "b:3181",
            GcRun(
                bookie_id="b:3181",
                http="http://127.0.0.1:8000",
                triggered=False,
                message=None,
                kind=None,
                is_in_force_gc=False,
                status=gc.status(),
                details=gc.details(),
                error=None,
                no_compaction=None,
            ),
        )
        lines = dict(shown)
        if policy.settled_below:
            assert lines["nearly empty compaction"] == (
                "3 runs, at any pass without another, of the logs over half logSizeLimit below 0.1 live or "
                "settled below 0.5 live (live bytes unchanged for 3 s) (bookied's)"
            )
        elif policy.nearly_empty_below:
            assert lines["nearly empty compaction"] == (
                "3 runs, at any pass without another, of the logs over half logSizeLimit below 0.1 live (bookied's)"
            )
        else:
            assert "nearly empty compaction" not in lines


@pytest.mark.parametrize(
    ("wait_ms", "interval_ms", "advanced_ms"),
    [(1000, 10_000, 0), (1000, 10_000, 9_999), (1000, 10_000, 10_000), (3, 10_000, 17), (7, 1_000, 2_000)],
)
def test_the_next_compaction_is_the_first_periodic_pass_after_it_is_due(wait_ms, interval_ms, advanced_ms):
    """The time a compaction will next run (the bookie's gc status) is the first pass of the
    gc_wait_ms cycle strictly after it is due -- worked out at once, not a wait at a time."""
    policy = GcPolicy(gc_wait_ms=wait_ms, minor_interval_ms=interval_ms, major_interval_ms=3 * interval_ms)
    gc, clock, _ = gc_on_clock(policy)
    clock.advance(advanced_ms / 1000)
    for kind, interval in ((MINOR, interval_ms), (MAJOR, 3 * interval_ms)):
        due = gc.last_minor_ms + interval if kind == MINOR else gc.last_major_ms + interval
        nxt = gc.next_compaction_ms(kind)
        assert nxt is not None and nxt > due and nxt - wait_ms <= due
        assert (nxt - gc.next_run_ms) % wait_ms == 0  # on the passes' cycle


def test_a_day_long_interval_and_a_1_ms_wait_say_the_next_compaction_at_once():
    policy = GcPolicy(gc_wait_ms=1, minor_interval_ms=86_400_000, major_interval_ms=7 * 86_400_000)
    gc, _clock, _ = gc_on_clock(policy)
    assert gc.next_compaction_ms(MAJOR) == gc.last_major_ms + 7 * 86_400_000 + 1  # (a week of 1 ms steps before)
