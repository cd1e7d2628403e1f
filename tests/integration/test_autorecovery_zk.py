"""Autorecovery's ZooKeeper protocol against a real ZooKeeper: the auditor election
(one auditor, failover, stepping down when the session expires), replication locks
(exactly one taker; the lock goes with the session; a re-marked ledger stays marked),
Java-written nodes, the auditor's lostBookieRecoveryDelay and its streaming full check."""

from __future__ import annotations

import threading
import time

import pytest
from kazoo.client import KazooClient

from bkctl.wire import fastpath
from bkctl.wire.client.blocking import run_in_reactor
from bkctl.wire.metadata import paths as P
from bkctl.wire.metadata.ledger import LedgerMetadata
from bkctl.wire.metadata.zk import ZKMetadataStore
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def stores(metadata_uri):
    opened: list[ZKMetadataStore] = []

    def make(session_timeout: float = 20, timeout: float = 20) -> ZKMetadataStore:
        store = ZKMetadataStore(
            metadata_uri, timeout=timeout, session_timeout=session_timeout, twins=fastpath.selected()
        )
        store.start()
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def expire_session(store: ZKMetadataStore) -> None:
    """Expire ``store``'s session for real: another client joins it and closes it."""
    session_id, password = store.client.client_id
    thief = KazooClient(hosts=store.hosts, client_id=(session_id, password))
    thief.start(timeout=10)
    thief.stop()
    thief.close()


class Voter:
    """An :class:`AuditorElection` on the reactor thread, recording what it was told."""

    def __init__(self, store, bookie_id):
        from twisted.internet import reactor, threads

        from bkctl.wire.autorecovery.election import AuditorElection

        self.events: list[str] = []

        def run_blocking(fn, *args):
            return threads.deferToThread(fn, *args)

        def make():
            return AuditorElection(
                store,
                bookie_id,
                reactor,
                run_blocking,
                lambda: self.events.append("elected"),
                lambda: self.events.append("demoted"),
                retry_delay=0.2,
            )

        self.election = run_in_reactor(make)
        run_in_reactor(self.election.start)

    @property
    def is_auditor(self) -> bool:
        return self.election.is_auditor

    def stop(self):
        run_in_reactor(self.election.stop)


def test_one_auditor_then_failover_then_step_down_on_session_expiry(stores):
    a_store, b_store = stores(session_timeout=6), stores(session_timeout=6)
    a = Voter(a_store, "10.0.0.1:3181")
    wait_for(lambda: a.is_auditor, what="the first voter to be elected")
    b = Voter(b_store, "10.0.0.2:3181")
    wait_for(lambda: len(a_store.auditor.votes()) == 2, what="both votes")
    time.sleep(0.5)
    assert (a.is_auditor, b.is_auditor) == (True, False)
    assert a_store.auditor.current() == "10.0.0.1:3181"
    election = P.underreplication_node(P.UR_AUDITOR_ELECTION, a_store.root)
    assert a_store.client.get(election)[0] == b'bookieId: "10.0.0.1:3181"\n'
    votes = a_store.auditor.votes()
    assert all(v.startswith("V_") and len(v) == 12 for v in votes)
    assert a_store.client.get(f"{election}/{votes[1]}")[0] == b'bookieId: "10.0.0.2:3181"\n'

    expire_session(a_store)  # the auditor's session ends: it steps down, the other takes over
    wait_for(lambda: b.is_auditor, timeout=30, what="the second voter to take over")
    wait_for(lambda: "demoted" in a.events, timeout=30, what="the old auditor to step down")
    assert b_store.auditor.current() == "10.0.0.2:3181"
    # The first voter votes again with its new session, behind the new auditor.
    wait_for(lambda: len(b_store.auditor.votes()) == 2, timeout=30, what="a new vote")
    assert not a.is_auditor and b.is_auditor

    b.stop()  # leaving deletes the vote at once: no wait for a session timeout
    wait_for(lambda: a.is_auditor, timeout=10, what="the first voter to be elected again")
    assert a.events == ["elected", "demoted", "elected"]
    a.stop()
    assert a_store.auditor.votes() == []


def test_exactly_one_worker_takes_a_marked_ledger(stores):
    owner, *workers = stores(), stores(), stores(), stores()
    owner.underreplication.mark(7, ["10.0.0.9:3181"])
    got: list = []
    barrier = threading.Barrier(len(workers) * 3)

    def take(store, name):
        barrier.wait()
        got.append((name, store.underreplication.acquire(name)))

    threads = [threading.Thread(target=take, args=(s, f"host{i}-{j}")) for i, s in enumerate(workers) for j in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [(name, result) for name, result in got if result is not None]
    assert len(winners) == 1
    name, (mark, version) = winners[0]
    assert mark.ledger_id == 7 and mark.replicas == ("10.0.0.9:3181",)
    assert owner.underreplication.lock_holder(7) == name
    assert owner.underreplication.locks() == {7: name}
    winner = workers[int(name[4])]
    loser = next(s for s in workers if s is not winner)
    assert loser.underreplication.acquire("late") is None
    loser.underreplication.release(7)  # not its lock: nothing happens
    assert owner.underreplication.lock_holder(7) == name

    owner.underreplication.mark(7, ["10.0.0.8:3181"])  # re-marked during the copy
    assert winner.underreplication.mark_replicated(7, version) is False
    assert owner.underreplication.get(7).replicas == ("10.0.0.9:3181", "10.0.0.8:3181")
    assert owner.underreplication.lock_holder(7) is None  # the lock was released all the same

    mark, version = loser.underreplication.acquire("second")
    loser.close()  # a worker that dies: its lock goes with its session, the marker stays
    assert owner.underreplication.locks() == {}
    mark, version = winner.underreplication.acquire("third")
    assert winner.underreplication.mark_replicated(7, version) is True
    assert owner.underreplication.get(7) is None
    base = P.underreplication_node(P.UR_LEDGERS, owner.root)
    assert owner.client.get_children(base) == []  # empty hex directories pruned


def test_a_marker_written_by_java_is_taken(stores):
    java, worker = stores(), stores()
    java.underreplication.ensure_layout()
    path = P.underreplication_path(0x1_0002_0003, java.root)
    java.client.create(
        path, b'replica: "10.0.0.3:3181"\nreplica: "10.0.0.4:3181"\nctime: 1700000000000\n', makepath=True
    )
    assert path.endswith("/0000/0001/0002/0003/urL4295098371")
    mark, version = worker.underreplication.acquire("worker-host")
    assert (mark.ledger_id, mark.replicas, mark.ctime) == (
        0x1_0002_0003,
        ("10.0.0.3:3181", "10.0.0.4:3181"),
        1700000000000,
    )
    lock = P.underreplication_lock_path(0x1_0002_0003, java.root)
    assert java.client.get(lock)[0] == b'bookieId: "worker-host"\n'


def test_the_auditor_waits_lost_bookie_recovery_delay(stores):
    """Bookies here are only registrations (the bookie audit reads metadata and
    registrations, never the bookies): one goes, and its ledgers are marked no
    sooner than the delay after it went; a ledger not naming it never is."""
    from twisted.internet import reactor

    from bkctl.wire.autorecovery.auditor import Auditor
    from bkctl.wire.autorecovery.config import AutoRecoveryConfig
    from bkctl.wire.client.bookkeeper import BookKeeperClient

    admin, bookie_session = stores(), stores(session_timeout=4)
    bookies = ["10.1.0.1:3181", "10.1.0.2:3181", "10.1.0.3:3181"]
    for b in bookies[:2]:
        admin.registration.register(b)
    bookie_session.registration.register(bookies[2])
    on_lost = admin.ledgers.create(LedgerMetadata.new((bookies[0], bookies[2]), password=b"pw"))[0]
    elsewhere = admin.ledgers.create(LedgerMetadata.new((bookies[0], bookies[1]), password=b"pw"))[0]
    admin.underreplication.set_lost_bookie_recovery_delay(3)
    config = AutoRecoveryConfig(auditor_periodic_check_interval=0, auditor_periodic_bookie_check_interval=0)
    auditor_store = stores()
    now = [1_000_000.0]  # the auditor's clock: lost_since and the delay are read on it
    client = run_in_reactor(lambda: BookKeeperClient(auditor_store, reactor))
    auditor = run_in_reactor(lambda: Auditor(client, config, reactor, clock=lambda: now[0]))
    run_in_reactor(auditor.start)
    try:
        wait_for(lambda: auditor.current is not None and auditor.current.called, what="the first audit")
        assert admin.underreplication.count() == 0
        bookie_session.close()
        wait_for(lambda: bookies[2] in auditor.lost_since, what="the auditor to see the bookie lost")
        run_in_reactor(auditor.request_audit)  # (the audit that saw it, or one after it)
        assert admin.underreplication.count() == 0  # lost, but not for the delay yet
        now[0] += 2.9
        run_in_reactor(auditor.request_audit)
        assert admin.underreplication.count() == 0
        now[0] += 0.1  # the delay has passed since the bookie went
        run_in_reactor(auditor.request_audit)
        mark = wait_for(lambda: admin.underreplication.get(on_lost), what="the mark")
        assert mark.replicas == (bookies[2],)
        assert admin.underreplication.get(elsewhere) is None
    finally:
        run_in_reactor(auditor.stop)


def test_the_auditor_placement_check_reports_what_ledger_list_not_adhering_lists(stores, rack_map):
    """Racks from the /bookies rack map; one ledger keeps both copies of some entries in one rack."""
    from twisted.internet import reactor

    from bkctl.wire.autorecovery.auditor import Auditor
    from bkctl.wire.autorecovery.config import AutoRecoveryConfig, AutoRecoveryStats
    from bkctl.wire.client.bookkeeper import BookKeeperClient
    from bkctl.wire.metadata.racks import build_placement

    admin = stores()
    bookies = ["10.2.0.1:3181", "10.2.0.2:3181", "10.2.1.1:3181", "10.2.2.1:3181"]
    for b in bookies:
        admin.registration.register(b)
    admin.racks.write({"default": {b: {"rack": "/r" + b.split(".")[2]} for b in bookies}}, None)
    good = admin.ledgers.create(
        LedgerMetadata.new((bookies[0], bookies[2], bookies[3]), write_quorum=2, ack_quorum=2, password=b"pw")
    )[0]
    bad = admin.ledgers.create(
        LedgerMetadata.new((bookies[0], bookies[1], bookies[2]), write_quorum=2, ack_quorum=2, password=b"pw")
    )[0]
    config = AutoRecoveryConfig(
        auditor_periodic_check_interval=0,
        auditor_periodic_bookie_check_interval=0,
        auditor_placement_policy_check_interval=3600,
    )
    auditor_store = stores()
    stats = AutoRecoveryStats()
    client = run_in_reactor(
        lambda: BookKeeperClient(auditor_store, reactor, placement=build_placement("rack", store=auditor_store))
    )
    auditor = run_in_reactor(lambda: Auditor(client, config, reactor, stats))
    run_in_reactor(auditor.start)
    try:
        wait_for(lambda: stats.last_placement_check is not None, what="the placement check")
        assert stats.last_placement_check == {"ledgers": 2, "not_adhering": 1, "ledger_ids": [bad]}
        assert good != bad
        assert admin.client.exists(P.underreplication_node(P.UR_PLACEMENT_POLICY_CHECK_CTIME, admin.root))
    finally:
        run_in_reactor(auditor.stop)


def test_the_auditors_full_check_streams_and_its_session_outlives_a_slow_check(stores, monkeypatch):
    """1,200 ledgers read 600 at a time while they are checked, the first check taking longer
    than the session timeout (4 s; Java's auditor lost its session over such a check,
    apache/bookkeeper#2802): the auditor's session stays the same one, the walk, idle
    meanwhile, goes on where it was, and every ledger is checked once and marked as it should be
    (the lost bookie's ledgers and those the check found short), only ids kept meanwhile."""
    from twisted.internet import reactor, task

    from bkctl.wire.autorecovery import auditor as auditor_module
    from bkctl.wire.autorecovery.auditor import Auditor
    from bkctl.wire.autorecovery.config import AutoRecoveryConfig, AutoRecoveryStats
    from bkctl.wire.client.bookkeeper import BookKeeperClient
    from bkctl.wire.metadata.ledger import serialize_ledger_metadata

    admin = stores()
    up, other, gone = "10.3.0.1:3181", "10.3.0.2:3181", "10.3.0.3:3181"
    for b in (up, other):
        admin.registration.register(b)
    n = 1200
    tx = admin.client.transaction()
    for ledger_id in range(1, n + 1):
        path = admin.ledgers.path(ledger_id)
        admin.client.ensure_path(path.rsplit("/", 1)[0])
        md = LedgerMetadata.new((up, gone if ledger_id % 3 == 0 else other), password=b"pw").closed(9, 100)
        tx.create(path, serialize_ledger_metadata(md))
    assert not [r for r in tx.commit() if isinstance(r, Exception)]
    admin.underreplication.set_lost_bookie_recovery_delay(0)
    checked: list[int] = []

    async def slow_check(_client, ledger_id, _md, _registered, _known_lost=()):
        checked.append(ledger_id)
        if len(checked) == 1:  # longer than the session timeout, with no ZooKeeper request of the walk's
            await task.deferLater(reactor, 5, lambda: None)
        return {up} if ledger_id % 5 == 0 else set()

    monkeypatch.setattr(auditor_module, "bookies_missing_replicas", slow_check)
    monkeypatch.setattr(auditor_module, "WALK_CHUNK", 600)
    auditor_store = stores(session_timeout=4, timeout=4)  # the walk's connection too: 4 s
    session = auditor_store.client.client_id
    config = AutoRecoveryConfig(auditor_periodic_check_interval=0, auditor_periodic_bookie_check_interval=0)
    stats = AutoRecoveryStats()
    client = run_in_reactor(lambda: BookKeeperClient(auditor_store, reactor))
    auditor = run_in_reactor(lambda: Auditor(client, config, reactor, stats))
    run_in_reactor(auditor.start)
    try:
        wait_for(lambda: auditor.current is not None and auditor.current.called, what="the first audit")
        run_in_reactor(lambda: auditor.request_audit(check_ledgers=True))  # (after one running, if any)
        wait_for(lambda: len(checked) == n and auditor.current.called, timeout=60, what="the full check")
        assert checked == list(range(1, n + 1))
        assert auditor_store.client.client_id == session and auditor_store.client.connected
        marks = {m.ledger_id: set(m.replicas) for m in admin.underreplication.marks()}
        want = {lid: ({gone} if lid % 3 == 0 else set()) | ({up} if lid % 5 == 0 else set()) for lid in range(1, n + 1)}
        assert marks == {lid: bookies for lid, bookies in want.items() if bookies}
        assert auditor.status().lost[0].named_by == n // 3
    finally:
        run_in_reactor(auditor.stop)


def test_taking_ledgers_one_after_the_other_lists_the_crowded_directory_once(stores, monkeypatch):
    """Every mark has a leaf directory of its own below one directory per 65,536 ids: a worker
    taking 40 ledgers lists that crowded directory once (kept for a while; here longer than
    the test), not once a ledger, and still takes each ledger exactly once."""
    from bkctl.wire.metadata.zk import underreplication as zk_ur

    monkeypatch.setattr(zk_ur, "_LISTING_TTL", 3600.0)
    owner, worker = stores(), stores()
    ids = [0x10000 + i * 3 for i in range(40)]
    for ledger_id in ids:
        owner.underreplication.mark(ledger_id, ["10.0.0.9:3181"])
    crowded = P.underreplication_path(ids[0], owner.root).rsplit("/", 2)[0]
    listed: list[str] = []
    plain = worker.client.get_children

    def counting(path, *args, **kwargs):
        listed.append(path)
        return plain(path, *args, **kwargs)

    monkeypatch.setattr(worker.client, "get_children", counting)
    taken = []
    while (got := worker.underreplication.acquire("w1")) is not None:
        taken.append(got[0].ledger_id)
        assert worker.underreplication.mark_replicated(got[0].ledger_id, got[1])
    assert sorted(taken) == ids and owner.underreplication.count() == 0
    assert listed.count(crowded) == 1, listed
