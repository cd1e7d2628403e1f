"""The rebalance/drain executor on the in-memory store: one run at a time (a second refused,
exit 4, naming the first), a cancel from elsewhere that stops the run between moves, a record
whose process is gone taken over, and moves bounded per target bookie as well as overall."""

from __future__ import annotations

import os
import socket

import pytest
from twisted.internet import defer

from bkctl.exitcodes import CONFLICT, NOT_FOUND, exit_code_for
from bkctl.ops import rebalance as ops
from bkctl.wire.client.placement import RandomPlacement
from bkctl.wire.errors import BKError
from bkctl.wire.metadata.ledger import LedgerMetadata
from bkctl.wire.rebalance import mover
from bkctl.wire.rebalance.executor import RunRecord, Throttle, begin, request_cancel
from bkctl.wire.rebalance.mover import MoveOutcome, MoveResult, move_ledgers
from bkctl.wire.rebalance.plan import LedgerMove, MoveReason, SegmentMove
from tests.support.fake_store import FakeMetadataStore
from tests.unit.test_rebalance_resume import store  # noqa: F401 - the same cluster of 12 ledgers

A, B, C, D, E = (f"127.0.0.1:{3181 + i}" for i in range(5))


def rebalance(store, monkeypatch, carry, **kw):
    monkeypatch.setattr(ops, "carry_out", carry)
    return ops.rebalance(None, store, placement=RandomPlacement(), **kw)


def test_a_second_rebalance_while_one_runs_is_refused_naming_it(store, monkeypatch):
    refused = []

    def first_run(_bk, moves, _listener, *, throttle, run=None):
        with pytest.raises(BKError) as second:  # from another terminal, meanwhile
            ops.rebalance(None, store, placement=RandomPlacement(), throttle=Throttle(rate=0))
        refused.append(second.value)
        return ops.MoveTally()

    rebalance(store, monkeypatch, first_run, throttle=Throttle(concurrency=3, per_bookie=2, rate=10 * 2**20))
    [error] = refused
    assert exit_code_for(error) == CONFLICT
    text = str(error)
    assert "a rebalance (pid" in text and "is running" in text and "--cancel" in text
    assert "10.0 MiB/s" in text and "3 moves at once" in text
    assert store.rebalance.running() is None  # the first ended: its record went
    rebalance(store, monkeypatch, lambda *_a, **_k: ops.MoveTally())  # and a run goes again


def test_a_drain_is_refused_while_a_rebalance_runs(store, monkeypatch):
    with begin(store, RunRecord.mine("rebalance", Throttle())), pytest.raises(BKError) as e:
        ops.drain(None, store, A, placement=RandomPlacement(), http="127.0.0.1:1")
    assert exit_code_for(e.value) == CONFLICT and "is running" in str(e.value)


def test_cancel_from_another_terminal_stops_the_run_between_moves(store, monkeypatch):
    carried = []

    def cancel_after_two(_bk, moves, listener, *, throttle, run=None):
        asked = []
        for n, move in enumerate(moves):
            if n == 2:
                asked.append(request_cancel(store, "pid 1 on elsewhere"))
            run.look()
            if run.cancelled():
                tally = ops.MoveTally()
                tally.stopped = run.stop_reason
                return tally
            carried.append(move)
        return ops.MoveTally()

    plan, tally = rebalance(store, monkeypatch, cancel_after_two)
    assert len(plan.moves) > 2 and len(carried) == 2
    assert tally.stopped == "cancelled by pid 1 on elsewhere"
    assert store.rebalance.running() is None and store.rebalance.read() is None  # the run ended
    with pytest.raises(BKError) as none:
        ops.cancel(store, wait=0)
    assert exit_code_for(none.value) == NOT_FOUND


def test_a_record_whose_process_is_gone_from_this_host_is_taken_over(store):
    dead = RunRecord("rebalance", socket.gethostname(), 2**22 + 7, 1.0, Throttle())  # no such pid
    assert store.rebalance.claim(dead.encode()) is None
    with begin(store, RunRecord.mine("drain", Throttle(), B)) as run:
        assert RunRecord.decode(store.rebalance.running()[0]).same_run(run.record)
    elsewhere = RunRecord("rebalance", "another-host", os.getpid(), 1.0, Throttle())
    store.rebalance.claim(elsewhere.encode())
    with pytest.raises(Exception, match="running"):
        begin(store, RunRecord.mine("drain", Throttle(), B))  # alive until its session expires


class Client:
    def __init__(self, store):
        self.store = store

    def run_blocking(self, fn, *args, **kwargs):
        return defer.maybeDeferred(fn, *args, **kwargs)


def test_moves_are_bounded_per_target_bookie_and_others_go_meanwhile(store, monkeypatch):
    running: dict[int, defer.Deferred] = {}
    started: list[int] = []

    async def fake_move(_client, move, **_options):
        started.append(move.ledger_id)
        d = running[move.ledger_id] = defer.Deferred()
        await d
        return MoveResult(move, MoveOutcome.MOVED)

    monkeypatch.setattr(mover, "move_ledger", fake_move)
    to_d = [LedgerMove(lid, (SegmentMove(0, A, D),), 10, 1, MoveReason.BALANCE) for lid in range(6)]
    to_e = [LedgerMove(lid, (SegmentMove(0, A, E),), 10, 1, MoveReason.BALANCE) for lid in (6, 7)]
    results = []
    defer.ensureDeferred(move_ledgers(Client(store), to_d + to_e, concurrency=4, per_bookie=2)).addBoth(results.append)
    assert started == [0, 1, 6, 7]  # two into D, then E's go past D's line
    running.pop(0).callback(None)
    assert started == [0, 1, 6, 7, 2]
    for lid in (1, 6, 7, 2):
        running.pop(lid).callback(None)
    assert started == [0, 1, 6, 7, 2, 3, 4]
    running.pop(3).callback(None)
    running.pop(4).callback(None)
    running.pop(5).callback(None)
    assert [r.move.ledger_id for r in results[0]] == [0, 1, 6, 7, 2, 3, 4, 5]


class Heard(ops.Unheard):
    def __init__(self):
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)


@pytest.fixture
def drain_cluster(monkeypatch):
    """A, B, C up (X down): ledger 1 on A B (moves to C), 2 on A and the dead X (A's copy the only
    one readable), 3 on A B C with Qw 3 (nowhere to go: every other bookie is in it)."""
    s = FakeMetadataStore().start()
    for b in (A, B, C):
        s.registration.register(b)
    x = "127.0.0.1:3999"
    s.ledgers.create(LedgerMetadata.new([A, B], password=b"pw").closed(9, 100), 1)
    s.ledgers.create(LedgerMetadata.new([A, x], password=b"pw").closed(9, 100), 2)
    s.ledgers.create(LedgerMetadata.new([A, B, C], write_quorum=3, ack_quorum=2, password=b"pw").closed(9, 100), 3)
    turned = []
    monkeypatch.setattr("bkctl.ops.bookie_http.set_readonly", lambda _s, b, on, _http: turned.append((b, on)))
    s.turned = turned
    return s


def test_a_drain_dry_run_names_what_cannot_move_and_what_would_lose_data(drain_cluster):
    from tests.unit.test_decommission_executor import Bk, hold

    bk = Bk()
    hold(bk, drain_cluster, 1, {B})
    hold(bk, drain_cluster, 3, {B, C})
    report, _plan = ops.drain(bk, drain_cluster, A, placement=RandomPlacement(), dry_run=True)
    assert set(report.left) == {3} and "no writable bookie outside its segment from entry 0" in report.left[3]
    assert set(report.lost) == {2} and "data would be lost" in report.lost[2]
    assert drain_cluster.turned == []  # a dry run changes nothing


def moves_none(store, skipped=()):
    def carry(_bk, moves, _listener, *, throttle, run=None):
        tally = ops.MoveTally()
        for move in moves:
            if move.ledger_id in skipped:
                tally.add(MoveResult(move, MoveOutcome.SKIPPED, "its replication lock is held by worker-1"))
                continue
            md, version = store.ledgers.read(move.ledger_id)
            for seg in move.segments:
                md = md.replace_bookie(seg.first_entry_id, seg.source, seg.target)
            store.ledgers.update(move.ledger_id, md, version)
            tally.add(MoveResult(move, MoveOutcome.MOVED))
        return tally

    return carry


def test_a_drain_that_cannot_finish_says_the_bookie_is_left_read_only_and_how_to_undo_it(drain_cluster, monkeypatch):
    monkeypatch.setattr(ops, "carry_out", moves_none(drain_cluster))
    now = [0.0]
    report, _ = ops.drain(
        None,
        drain_cluster,
        A,
        placement=RandomPlacement(),
        wait=5,
        poll=1,
        clock=lambda: now[0],
        sleep=lambda s: now.__setitem__(0, now[0] + s),
    )
    assert not report.drained and set(report.left) == {3}
    assert drain_cluster.turned == [(A, True)]
    line = report.ending(5)
    assert "2 ledgers moved" in line and "1 ledger still on it" in line
    assert "stopped after 1.0 s (before --wait 5 s ran out" in line  # the time it took, not --wait
    assert f"{A} is left read-only" in line and f"bkctl bookie readonly {A} off" in line
    assert report.as_json()["left_read_only"] is True


def test_ctrl_c_mid_drain_says_what_moved_and_that_the_bookie_is_left_read_only(drain_cluster, monkeypatch):
    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(ops, "carry_out", interrupted)
    report, _ = ops.drain(None, drain_cluster, A, placement=RandomPlacement(), wait=5)
    assert report.interrupted and not report.drained and set(report.left) == {1, 2, 3}
    line = report.ending(5)
    assert "interrupted (Ctrl-C)" in line and f"{A} is left read-only" in line
    assert store_run_gone(drain_cluster)


def store_run_gone(store):
    return store.rebalance.running() is None


def test_open_ledger_wording_only_when_an_open_ledger_is_left(drain_cluster, monkeypatch):
    drain_cluster.ledgers.delete(3)
    monkeypatch.setattr(ops, "carry_out", moves_none(drain_cluster, skipped={1}))
    now = [0.0]
    heard = Heard()
    report, _ = ops.drain(
        None,
        drain_cluster,
        A,
        placement=RandomPlacement(),
        wait=10,
        poll=4,
        listener=heard,
        clock=lambda: now[0],
        sleep=lambda s: now.__setitem__(0, now[0] + s),
    )
    assert set(report.left) == {1} and "worker-1" in report.left[1]
    assert f"drain of {A} stopped after 10.0 s:" in report.ending(10)  # waited the whole --wait
    assert heard.notes and not any("writers" in n for n in heard.notes)  # closed: no writer to wait for


def test_a_record_left_on_another_host_says_it_goes_when_its_session_expires(store):
    """A run SIGKILLed on another host leaves its record until its ZooKeeper session expires:
    the refusal names whose it is, since when, and that it goes by itself, in how long at most."""
    killed = RunRecord("rebalance", "host-b", 4242, 1.7e9, Throttle(), session_timeout=10.0)
    store.rebalance.claim(killed.encode())
    with pytest.raises(BKError) as refused:
        ops.rebalance(None, store, placement=RandomPlacement())
    text = str(refused.value)
    assert exit_code_for(refused.value) == CONFLICT
    assert "a rebalance (pid 4242 on host-b, since 2023-11-14 22:13:20 UTC" in text
    assert "if its process on host-b was killed" in text and "when that ZooKeeper session expires" in text
    assert "in at most 10 s" in text
    mine = RunRecord.mine("drain", Throttle(), B, session_timeout=3.0)
    assert RunRecord.decode(mine.encode()) == mine and not mine.elsewhere()
