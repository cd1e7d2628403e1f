"""Where each ledger's repair stands (issue 36): the replication worker's status
(every ledger it holds and why, every failed attempt), the repair model every view
reads (wire/autorecovery/repairstate.py), and lost bookies as the help defines them
-- on the in-memory store and a task.Clock, no ZooKeeper."""

from __future__ import annotations

import json

import pytest
from twisted.internet import defer, task

from bkctl.wire.autorecovery import repairstate as R
from bkctl.wire.autorecovery import worker as worker_module
from bkctl.wire.autorecovery.config import AutoRecoveryConfig
from bkctl.wire.autorecovery.status import AuditorStatus, Hold, WorkerStatus
from bkctl.wire.autorecovery.worker import ReplicationWorker
from bkctl.wire.metadata.store import UnderreplicatedMark
from tests.support.fake_store import FakeMetadataStore

NOW = 1_800_000_000_000
STUCK = "need 1 writable bookie outside the ensemble [a:3181, b:3181, c:3181]"


class _Client:
    """The worker's BookKeeper client: ZooKeeper calls run inline."""

    def __init__(self, store):
        self.store = store

    def run_blocking(self, fn, *args, **kw):
        try:
            return defer.succeed(fn(*args, **kw))
        except Exception:  # noqa: BLE001
            return defer.fail()


def _done(coro):
    """The result of a coroutine that does not wait on anything (inline ZooKeeper calls)."""
    d = defer.ensureDeferred(coro)
    out = []
    d.addBoth(out.append)
    assert out, "the coroutine waited"
    if isinstance(out[0], Exception) or hasattr(out[0], "raiseException"):
        out[0].raiseException()
    return out[0]


def _worker(store, clock, **config):
    cfg = AutoRecoveryConfig(lock_release_of_failed_ledger_grace_period=300.0, worker_poll_interval=1.0, **config)
    w = ReplicationWorker(_Client(store), cfg, clock, hostname="vm", worker_id="w1:3181")
    w.running = True
    return w


@pytest.fixture
def store():
    s = FakeMetadataStore().start()
    for b in ("a:3181", "b:3181"):
        s.registration.register(b)
    return s


def _snapshot(store, worker, now_ms):
    """A Snapshot as read_snapshot reads it, with this worker's status node."""
    doc = worker.status()
    return R.Snapshot(
        now_ms=now_ms,
        enabled=store.underreplication.is_enabled(),
        delay=store.underreplication.lost_bookie_recovery_delay(),
        auditor=None,
        auditor_doc=None,
        workers={"w1:3181": doc},
        marks={m.ledger_id: m for m in store.underreplication.marks()},
        locks=store.underreplication.locks(),
        registered=set(store.registration.writable_bookies()),
        cookies=set(store.registration.all_bookies()),
    )


def test_every_failed_ledger_is_held_after_a_failure_not_being_rereplicated(store, monkeypatch):
    """20 ledgers fail at once: each is 'held after a failed attempt' with its reason and
    retry time (the old status kept only the worker's last failure, so 19 of 20 looked
    'being re-replicated'); the lock holds the worker's bookie id, not the host."""
    clock = task.Clock()
    clock.advance(NOW / 1000)
    w = _worker(store, clock)

    def read(_lid):
        raise RuntimeError(STUCK)

    monkeypatch.setattr(store.ledgers, "read", read)
    for lid in range(1, 21):
        store.underreplication.mark(lid, ["c:3181"])
    for _ in range(20):
        mark, version = store.underreplication.acquire(w.lock_holder, skip=tuple(w.held))
        assert _done(w.rereplicate(mark.ledger_id, version)) == "failed"
    assert set(store.underreplication.locks().values()) == {"w1:3181"}
    snap = _snapshot(store, w, NOW + 1000)
    rows = [R.ledger_state(snap, lid) for lid in range(1, 21)]
    assert {r.state for r in rows} == {R.LedgerRepairState.HELD_FAILED}
    assert all(r.worker == "w1:3181" and r.until == NOW + 300_000 for r in rows)
    assert all([a.reason for a in r.attempts] == [STUCK] for r in rows)
    assert "held after a failed attempt by w1:3181: need 1 writable" in R.state_text(rows[0], NOW + 1000)
    assert "retried in 299 s" in R.state_text(rows[0], NOW + 1000)


def test_attempts_accumulate_and_the_hold_ends_when_a_bookie_registers(store, monkeypatch):
    clock = task.Clock()
    clock.advance(NOW / 1000)
    w = _worker(store, clock)
    monkeypatch.setattr(store.ledgers, "read", lambda _lid: (_ for _ in ()).throw(RuntimeError(STUCK)))
    store.underreplication.mark(7, ["c:3181"])
    mark, version = store.underreplication.acquire(w.lock_holder)
    _done(w.rereplicate(7, version))
    clock.advance(300)  # the grace period ends: the lock is released
    assert store.underreplication.locks() == {} and w.holds == {}
    mark, version = store.underreplication.acquire(w.lock_holder)
    _done(w.rereplicate(7, version))
    assert w.holds[7].until == int(clock.seconds() * 1000) + 600_000  # doubled
    assert len(w.attempts[7]) == 2
    assert R.ledger_state(_snapshot(store, w, NOW), 7).state == R.LedgerRepairState.HELD_FAILED

    w._release_on_new_bookies({"a:3181", "b:3181"})  # nothing new: still held
    assert 7 in store.underreplication.locks()
    store.registration.register("c:3181")  # the lost bookie is back
    w._release_on_new_bookies(w._registered())
    assert store.underreplication.locks() == {} and w.holds == {}
    row = R.ledger_state(_snapshot(store, w, NOW), 7)
    assert row.state == R.LedgerRepairState.WAITING_WORKER and len(row.attempts) == 2


def test_an_open_ledger_in_its_grace_period_is_waiting_for_its_writer(store, monkeypatch):
    from bkctl.wire.metadata.ledger import LedgerMetadata

    clock = task.Clock()
    clock.advance(NOW / 1000)
    w = _worker(store, clock, open_ledger_rereplication_grace_period=30.0)
    md = LedgerMetadata.new(("a:3181", "b:3181", "c:3181"), 2, 2)
    lid, _ = store.ledgers.create(md)

    async def missing(*_args):
        return {"c:3181"}

    monkeypatch.setattr(worker_module, "bookies_missing_replicas", missing)
    store.underreplication.mark(lid, ["c:3181"])
    _mark, version = store.underreplication.acquire(w.lock_holder)
    assert _done(w.rereplicate(lid, version)) == "waiting"
    row = R.ledger_state(_snapshot(store, w, NOW + 5000), lid)
    assert row.state == R.LedgerRepairState.WAITING_GRACE and row.until == NOW + 30_000 and row.worker == "w1:3181"
    assert "waits for its writer before fencing it" in R.state_text(row, NOW + 5000)
    assert "25 s left" in R.state_text(row, NOW + 5000)

    clock.advance(5)
    store.registration.register("x:3181")  # another bookie, still missing c: held for what is left
    w._release_on_new_bookies(w._registered())
    assert w.holds[lid].until == NOW + 30_000 and lid in store.underreplication.locks()

    async def none_missing(*_args):
        return set()

    monkeypatch.setattr(worker_module, "bookies_missing_replicas", none_missing)
    store.registration.register("c:3181")  # the lost bookie is back: nothing to fence, the mark goes
    w._release_on_new_bookies(w._registered())
    assert store.underreplication.get(lid) is None and store.underreplication.locks() == {} and w.holds == {}
    snap = _snapshot(store, w, NOW + 6000)
    assert R.ledger_state(snap, lid, ["c:3181"]).state == R.LedgerRepairState.DONE


def _snap(**kw):
    """A Snapshot whose status nodes are given as the JSON documents the daemons write."""
    base = dict(now_ms=NOW, auditor="w1:3181", registered={"a:3181", "b:3181"}, cookies={"a:3181", "b:3181"})
    base.update(kw)
    if isinstance(base.get("auditor_doc"), dict):
        base["auditor_doc"] = AuditorStatus.from_json(base["auditor_doc"])
    base["workers"] = {wid: WorkerStatus.from_json(doc) for wid, doc in base.get("workers", {}).items()}
    return R.Snapshot(**base)


def test_a_lock_of_a_dead_daemon_or_a_status_without_a_lock_is_not_believed():
    doc = {"worker": "w1:3181", "active": {"5": NOW - 1000}, "holds": {}, "attempts": {}}
    snap = _snap(workers={"w1:3181": doc}, marks={5: UnderreplicatedMark(5, ("c:3181",), None)})
    assert R.ledger_state(snap, 5).state == R.LedgerRepairState.WAITING_WORKER  # no lock: not being re-replicated
    snap.locks = {5: "w1:3181"}
    row = R.ledger_state(snap, 5)
    assert row.state == R.LedgerRepairState.REREPLICATING and row.since == NOW - 1000
    snap.enabled, snap.locks = False, {}
    assert R.ledger_state(snap, 5).state == R.LedgerRepairState.HELD_DISABLED


def test_a_javas_worker_lock_says_what_can_be_known():
    """Java's worker writes its host name into the lock and keeps no status: which ledger,
    which host, and since when the lock is held."""
    store = FakeMetadataStore(now_ms=lambda: NOW - 42_000).start()
    store.underreplication.mark(5, ["c:3181"])
    store.underreplication.acquire("vm")  # as Java's ReplicationWorker takes it
    store.auditor.cast_vote("java-bookie:3181")
    from bkctl.ops.autorecovery import query_status

    [row] = query_status(store, NOW)
    assert row.repair.state == R.LedgerRepairState.LOCKED and row.repair.worker is None and row.repair.lock == "vm"
    assert row.repair.since == NOW - 42_000
    assert row.text.startswith("locked for 42 s by a worker that keeps no status (Java's? its lock names vm)")


def test_an_unmarked_ledger_waits_for_the_delay_until_its_bookie_is_due():
    auditor = {
        "auditor": "w1:3181",
        "lost": [
            {"bookie_id": "c:3181", "lost_since": NOW - 5000, "due": NOW + 55_000, "not_waited": None, "named_by": 3}
        ],
    }
    snap = _snap(auditor_doc=auditor, cookies={"a:3181", "b:3181", "c:3181"})
    row = R.ledger_state(snap, 9, ["a:3181", "c:3181"])
    assert row.state == R.LedgerRepairState.WAITING_DELAY and row.until == NOW + 55_000
    assert R.state_text(row, NOW) == "waiting for lostBookieRecoveryDelay: marked in 55 s"
    snap.enabled = False
    assert R.ledger_state(snap, 9, ["c:3181"]).state == R.LedgerRepairState.HELD_DISABLED


def test_lost_bookies_as_the_help_defines_them():
    """A decommissioned bookie (no cookie, no ledger names it) is not lost, even while
    a status node of an auditor still lists it; one named by ledgers without a cookie
    is said so; a cookie without registration is lost."""
    snap = _snap(cookies={"a:3181", "b:3181", "k:3181"})
    assert [(b.bookie_id, b.why) for b in R.lost_bookies(snap)] == [("k:3181", "has a cookie, not registered")]
    stale = {"auditor": "old:3181", "lost": [{"bookie_id": "gone:3181", "due": NOW + 1000}]}
    assert R.lost_bookies(_snap(auditor_doc=None, workers={}, marks={})) == []
    # read_snapshot keeps the auditor's node only while that daemon is the elected auditor
    assert stale["auditor"] != _snap().auditor
    named = {"auditor": "w1:3181", "lost": [{"bookie_id": "n:3181", "named_by": 4, "lost_since": NOW, "due": None}]}
    [row] = R.lost_bookies(_snap(auditor_doc=named))
    assert row.bookie_id == "n:3181" and not row.cookie and row.why == "named by ledgers, no cookie"
    # a Java auditor keeps no status: unregistered bookies named by marks stand for it
    [row] = R.lost_bookies(_snap(marks={5: UnderreplicatedMark(5, ("j:3181",), None)}))
    assert row.why == "named by under-replicated ledgers, no cookie"


def test_a_bookie_marked_at_once_stays_marked_at_the_next_audit(store):
    """After a triggered audit marked a lost bookie's ledgers, the next audit (a registration
    change) showed it waiting for lostBookieRecoveryDelay again, with a countdown."""
    from bkctl.wire.autorecovery.auditor import Auditor
    from bkctl.wire.metadata.ledger import LedgerMetadata

    clock = task.Clock()
    clock.advance(NOW / 1000)
    store.registration.register("d:3181")
    for _ in range(2):
        store.ledgers.create(LedgerMetadata.new(("a:3181", "b:3181", "c:3181"), 2, 2))
    auditor = Auditor(
        _Client(store),
        AutoRecoveryConfig(lost_bookie_recovery_delay=60),
        clock,
        clock=clock.seconds,
        auditor_id="w1:3181",
    )
    auditor.running = True
    auditor.delay = 60
    auditor.request_audit()
    [lost] = auditor.status().lost
    assert lost.due == NOW + 60_000 and lost.named_by == 2 and store.underreplication.count() == 0
    auditor.request_audit(force=True)  # trigger-audit, or decommission
    assert store.underreplication.count() == 2
    clock.advance(5)
    auditor.request_audit()  # a bookie registers or goes
    [lost] = auditor.status().lost
    assert lost.due is None and lost.not_waited == "audit triggered"
    for call in clock.getDelayedCalls():
        call.cancel()


def test_a_decommissioned_bookie_leaves_the_lost_bookies_when_its_cookie_goes():
    """Its ledgers re-replicated and its cookie deleted, the bookie is not lost: the
    auditor audits again when a lost bookie's cookie goes (it listed the bookie until
    the next registration change or trigger-audit), and `autorecovery status` reads
    the model."""
    from bkctl.ops.autorecovery import autorecovery_report
    from bkctl.wire.autorecovery.auditor import Auditor
    from bkctl.wire.metadata.cookie import Cookie
    from bkctl.wire.metadata.ledger import LedgerMetadata
    from tests.support.reactor_clock import ReactorClock

    store, reactor = FakeMetadataStore().start(), ReactorClock()
    reactor.advance(NOW / 1000)
    for bookie in ("a:3181", "b:3181", "c:3181"):
        store.registration.register(bookie)
        store.cookies.put(bookie, Cookie(bookie, ("/j",), ("/l",), "instance"))
    store.ledgers.create(LedgerMetadata.new(("a:3181", "b:3181"), password=b""), 1)
    auditor = Auditor(
        _Client(store),
        AutoRecoveryConfig(auditor_periodic_check_interval=0, auditor_periodic_bookie_check_interval=0),
        reactor,
        clock=reactor.seconds,
        auditor_id="a:3181",
    )
    store.auditor.cast_vote("a:3181")
    auditor.start()
    reactor.run()
    store.registration.unregister("a:3181")
    reactor.run()
    [lost] = autorecovery_report(store, NOW).lost_bookies
    assert lost.bookie_id == "a:3181" and lost.cookie and lost.named_by == 1
    # a worker moves ledger 1 off a:3181, then decommission deletes the cookie
    md, version = store.ledgers.read(1)
    store.ledgers.update(1, LedgerMetadata.new(("c:3181", "b:3181"), password=b""), version)
    _mark, mark_version = store.underreplication.acquire("w")
    store.underreplication.mark_replicated(1, mark_version)
    assert [b.bookie_id for b in autorecovery_report(store, NOW).lost_bookies] == ["a:3181"]  # cookie
    store.cookies.delete("a:3181")
    reactor.run()
    assert autorecovery_report(store, NOW).lost_bookies == []
    auditor.stop()


def test_every_workers_attempts_on_a_ledger_are_told_in_order():
    w1 = {
        "worker": "w1:3181",
        "attempts": {"5": [{"reason": "first", "at": NOW - 600_000, "retry_at": NOW - 300_000}]},
        "holds": {},
        "active": {},
    }
    w2 = {
        "worker": "w2:3181",
        "attempts": {"5": [{"reason": "second", "at": NOW - 1000, "retry_at": NOW + 299_000}]},
        "holds": {"5": {"why": "failed", "since": NOW - 1000, "until": NOW + 299_000}},
        "active": {},
    }
    snap = _snap(
        workers={"w1:3181": w1, "w2:3181": w2},
        marks={5: UnderreplicatedMark(5, ("c:3181",), None)},
        locks={5: "w2:3181"},
    )
    row = R.ledger_state(snap, 5)
    assert row.state == R.LedgerRepairState.HELD_FAILED and row.worker == "w2:3181" and row.until == NOW + 299_000
    assert [(a.worker, a.reason) for a in row.attempts] == [("w1:3181", "first"), ("w2:3181", "second")]
    assert R.state_text(row, NOW) == (
        "held after a failed attempt by w2:3181: second; retried in 299 s (2 failed attempts)"
    )


def test_an_unexpected_error_on_one_ledger_does_not_stop_the_worker(store, monkeypatch):
    """ZooKeeper away just as the worker unmarks a ledger: the error used to escape the loop,
    stopping this worker for good with the ledger's lock held for the rest of its session."""
    from bkctl.wire.metadata.errors import NoSuchLedger

    clock = task.Clock()
    clock.advance(NOW / 1000)
    w = _worker(store, clock)
    monkeypatch.setattr(store.ledgers, "read", lambda lid: (_ for _ in ()).throw(NoSuchLedger(lid)))
    unmark = store.underreplication.mark_replicated
    calls = []

    def flaky_unmark(lid, version):
        calls.append(lid)
        if len(calls) == 1:
            raise RuntimeError("connection lost")
        return unmark(lid, version)

    monkeypatch.setattr(store.underreplication, "mark_replicated", flaky_unmark)
    store.underreplication.mark(5, ["c:3181"])
    w.start()
    assert not w._loop.called  # still looking for work
    assert w.holds[5].why == "failed" and "connection lost" in (w.attempts[5][0].reason or "")
    store.underreplication.mark(6, ["c:3181"])
    clock.advance(1.0)
    assert store.underreplication.get(6) is None and calls == [5, 6]
    w.stop()


class _SlowClient(_Client):
    """ZooKeeper calls that end when the test says (a thread pool's writes may end in any order)."""

    def __init__(self, store):
        super().__init__(store)
        self.calls: list[tuple[defer.Deferred, object, tuple]] = []

    def run_blocking(self, fn, *args, **kw):
        d = defer.Deferred()
        self.calls.append((d, fn, args))
        return d

    def finish(self, k: int) -> None:
        d, fn, args = self.calls.pop(k)
        d.callback(fn(*args))


def test_status_writes_go_one_at_a_time_and_the_last_one_is_the_current_status(store):
    """Two status writes in the thread pool could land out of order: an open ledger's
    worker then said "re-replicating" long after it had gone on to wait for its writer."""
    from bkctl.wire.autorecovery import status

    clock = task.Clock()
    clock.advance(NOW / 1000)
    client = _SlowClient(store)
    w = ReplicationWorker(client, AutoRecoveryConfig(), clock, hostname="vm", worker_id="w1:3181")
    w.running = True
    w.active[7] = NOW
    w._publish()  # the ledger is being re-replicated ...
    del w.active[7]
    w.holds[7] = Hold("grace", NOW, NOW + 600_000)
    w._publish()  # ... and now waits for its writer: no second write while the first runs
    w._publish()
    assert len(client.calls) == 1
    client.finish(0)
    assert len(client.calls) == 1  # the two asks made one more write, of the status as it is now
    assert client.calls[0][2][2].active == {} and 7 in client.calls[0][2][2].holds
    client.finish(0)
    assert client.calls == []
    doc = json.loads(store.underreplication.daemon_statuses()[f"{status.WORKERS}/w1:3181"])
    assert doc["active"] == {} and doc["holds"]["7"]["why"] == "grace"


def test_a_failed_attempts_hold_ends_exactly_the_grace_period_after_the_failure(store, monkeypatch):
    clock = task.Clock()
    clock.advance(NOW / 1000 + 0.0004)  # a clock between two milliseconds
    w = _worker(store, clock)

    def read(_lid):
        raise RuntimeError(STUCK)

    record = w._record_attempt

    def slow_record(*args):  # the real clock moves on while the failure is written down
        record(*args)
        clock.advance(0.0009)

    monkeypatch.setattr(store.ledgers, "read", read)
    monkeypatch.setattr(w, "_record_attempt", slow_record)
    store.underreplication.mark(3, ["c:3181"])
    mark, version = store.underreplication.acquire(w.lock_holder)
    assert _done(w.rereplicate(mark.ledger_id, version)) == "failed"
    assert w.holds[3].until - w.last_failure.at == 300_000 == w.holds[3].until - w.holds[3].since
