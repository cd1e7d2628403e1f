"""``decommission`` is a planner over the executor ``rebalance`` and ``drain`` use, shown by
behaviour on the in-memory store: refused (exit 4, naming it) while another mover runs, stopped
by ``rebalance --cancel``, its moves those of the executor (read from the other copies, marked
ledgers moved too), one cookie rule, and the ledgers left said with why -- the lost ones first."""

from __future__ import annotations

import pytest

from bkctl.exitcodes import CONFLICT, exit_code_for
from bkctl.ops import decommission as ops
from bkctl.ops.recovery import LOST, retire_cookie
from bkctl.ops.results import to_json
from bkctl.wire.client import replication_causes as R
from bkctl.wire.client.credentials import ledger_credentials
from bkctl.wire.client.placement import RandomPlacement
from bkctl.wire.codecs.digest import DigestManager
from bkctl.wire.errors import BKError
from bkctl.wire.metadata.cookie import Cookie
from bkctl.wire.metadata.ledger import LedgerMetadata
from bkctl.wire.rebalance import executor
from bkctl.wire.rebalance.executor import MoveTally, RunRecord, Throttle, request_cancel
from bkctl.wire.rebalance.mover import MoveOutcome, MoveResult
from tests.support.fake_bookie import FakePool
from tests.support.fake_store import FakeMetadataStore

A, B, C, D, E = (f"10.0.0.{i}:3181" for i in range(1, 6))


class Client:
    def __init__(self):
        self.pool = FakePool(auto=True)


class Bk:
    """What a decommission uses of a blocking client: its client's fake bookies (what they hold,
    :func:`hold`, is what the data-loss rule reads)."""

    def __init__(self):
        self.client = Client()


def hold(bk, store, ledger_id, bookies):
    """``bookies`` hold their copies of the closed ledger, as its write sets say."""
    md, _version = store.ledgers.read(ledger_id)
    password, digest_type = ledger_credentials(ledger_id, md)
    digest = DigestManager(ledger_id, digest_type, password)
    for first, last, _ensemble in md.segment_ranges():
        for e in range(first, last + 1):
            body = digest.package(e, e - 1, e + 1, b"x%d" % e)
            for b in md.write_set(e):
                if b in bookies:
                    bk.client.pool.get(b).stored[(ledger_id, e)] = body


def closed(ensemble=(A, B, C), last=9, length=1000, quorum=2):
    return LedgerMetadata.new(list(ensemble), quorum, quorum, password=b"pw").closed(last, length)


def cluster(*live):
    store = FakeMetadataStore().start()
    for b in live:
        store.registration.register(b)
    store.cookies.put(B, Cookie(B, ("/j",), ("/l",), "instance"))
    return store


def decommission(store, bk=None, **kw):
    if bk is None:
        bk = Bk()
        for lid, md, _v in store.ledgers.walk():
            hold(bk, store, lid, set(md.bookies) - {B})
    result = ops.decommission(bk, store, B, placement=RandomPlacement(), use_daemons=False, **kw)
    assert result.mode is ops.DecommissionMode.LOCAL
    return to_json(result)  # the --json document, which the assertions read


def carrying(store, outcome=None, heard=None):
    """The executor's carry_out, its moves done on the store (or all ending with ``outcome``)."""

    def carry(_client, moves, throttle, *, on_result=None, on_bytes=None, run=None, **options):
        if heard is not None:
            heard.append((list(moves), throttle, run, options))
        tally = MoveTally()
        for move in moves:
            if outcome is not None:
                result = MoveResult(move, outcome, "needs 1 writable bookie", cause=R.NO_BOOKIE)
            else:
                md, version = store.ledgers.read(move.ledger_id)
                for seg in move.segments:
                    md = md.replace_bookie(seg.first_entry_id, seg.source, seg.target)
                store.ledgers.update(move.ledger_id, md, version)
                result = MoveResult(move, MoveOutcome.MOVED, entries_copied=7)
            tally.add(result)
            if on_result is not None:
                on_result(result)
        return tally

    return carry


def test_a_decommission_carries_out_its_plan_through_the_executor_and_deletes_the_cookie(monkeypatch):
    store = cluster(A, C, D)
    for lid in (4, 5):
        store.ledgers.create(closed((A, B, C)), lid)
    store.underreplication.mark(5, [B])  # the stopped bookie's mark: this move is its repair
    heard = []
    monkeypatch.setattr(executor, "carry_out", carrying(store, heard=heard))
    doc = decommission(store, throttle=Throttle(3, 2, 1000.0))
    [(moves, throttle, run, options)] = heard
    assert sorted(m.ledger_id for m in moves) == [4, 5] and all(m.pairs == [(B, D)] for m in moves)
    assert throttle == Throttle(3, 2, 1000.0) and run is not None
    assert options == {"read_sources": False, "past_marks": True}
    assert doc["error"] is None and doc["cookie_deleted"] and store.cookies.get(B) is None
    assert doc["entries_copied"] == 14 and [r["status"] for r in doc["ledgers"]] == ["recovered"] * 2
    assert store.rebalance.running() is None  # its running record went with it


def test_a_decommission_is_refused_while_a_rebalance_runs_naming_it(monkeypatch):
    store = cluster(A, C, D)
    store.ledgers.create(closed((A, B, C)), 4)
    store.rebalance.claim(RunRecord("rebalance", "other-host", 4242, 1.0e9, Throttle()).encode())
    monkeypatch.setattr(executor, "carry_out", carrying(store))
    with pytest.raises(BKError) as refused:
        decommission(store)
    assert exit_code_for(refused.value) == CONFLICT
    assert "a rebalance (pid 4242 on other-host" in str(refused.value) and "is running" in str(refused.value)
    assert set(store.ledgers.read(4)[0].bookies) == {A, B, C} and store.cookies.get(B) is not None


def test_rebalance_cancel_stops_a_decommission_and_keeps_the_cookie(monkeypatch):
    store = cluster(A, C, D)
    for lid in (4, 5):
        store.ledgers.create(closed((A, B, C)), lid)
    passes = []

    def cancelled_midway(_client, moves, throttle, *, run=None, **_options):
        passes.append(moves)
        request_cancel(store, "pid 1 on elsewhere")  # `bkctl rebalance --cancel` from another terminal
        run.look()
        tally = MoveTally()
        tally.moved = 1  # it moved one: another pass would run, were it not cancelled
        tally.stopped = run.stop_reason
        return tally

    monkeypatch.setattr(executor, "carry_out", cancelled_midway)
    doc = decommission(store)
    assert len(passes) == 1 and doc["stopped"] == "cancelled by pid 1 on elsewhere"
    assert doc["error"].startswith("stopped (cancelled by pid 1 on elsewhere): 2 ledgers still use bookie")
    assert not doc["cookie_deleted"] and store.cookies.get(B) is not None
    assert store.rebalance.running() is None


def test_a_decommission_that_moved_nothing_stops_and_says_why_for_each_ledger(monkeypatch):
    store = cluster(A, C, D)
    for lid in (4, 5):
        store.ledgers.create(closed((A, B, C)), lid)
    heard = []
    monkeypatch.setattr(executor, "carry_out", carrying(store, MoveOutcome.FAILED, heard))
    doc = decommission(store)
    assert len(heard) == 1  # a second pass would fail alike
    assert doc["remaining_ledgers"] == [4, 5] and doc["cookie_deleted"] is False
    assert [(r["ledger_id"], r["cause"]) for r in doc["left"]] == [(4, R.NO_BOOKIE), (5, R.NO_BOOKIE)]
    assert doc["error"] == f"2 ledgers still use bookie {B}; cookie kept: 2 no bookie to copy to"


def test_a_decommission_says_first_which_ledgers_are_lost_unless_the_bookie_returns(monkeypatch):
    """Ledger 6's only copy (write quorum 1), ledger 7's entries whose other copy is on a bookie
    down, and ledger 8's entry 3 whose other copy fails its digest are on B: lost unless B
    returns (ledger fsck's data_lost rule, the copies read), said before the ledgers merely left."""
    store = cluster(A, C)
    store.ledgers.create(closed((A, B, C)), 4)
    store.ledgers.create(closed((A, B, C), quorum=1), 6)
    store.ledgers.create(closed((B, D)), 7)  # D is down too
    store.ledgers.create(closed((A, B, C)), 8)  # every entry on A or C too, but A's entry 3 (on A and B) is bad
    bk = Bk()
    for lid in (4, 6, 8):
        hold(bk, store, lid, {A, C})
    body = bytearray(bk.client.pool.get(A).stored[(8, 3)])
    body[-1] ^= 1
    bk.client.pool.get(A).stored[(8, 3)] = bytes(body)
    monkeypatch.setattr(executor, "carry_out", carrying(store, MoveOutcome.FAILED))
    plan = decommission(store, bk, dry_run=True)
    assert [r["ledger_id"] for r in plan["lost"]] == [6, 7, 8]
    assert "entry 3" in plan["lost"][2]["reason"] and "fails its digest" in plan["lost"][2]["reason"]
    assert {r["ledger_id"]: r["data_lost"] is not None for r in plan["ledgers"]} == {
        4: False,
        6: True,
        7: True,
        8: True,
    }
    doc = decommission(store, bk)
    assert doc["error"].startswith(f"3 ledgers LOST unless bookie {B} returns (no other copy: 6, 7, 8); bring it back")
    assert [(r["ledger_id"], r["cause"]) for r in doc["left"]][:3] == [(6, LOST), (7, LOST), (8, LOST)]


def test_a_dry_run_decommission_of_a_running_bookie_shows_the_plan():
    store = cluster(A, B, C, D)
    store.ledgers.create(closed((A, B, C)), 4)
    plan = decommission(store, dry_run=True)
    assert plan["registered"] and plan["remaining_ledgers"] == [4] and plan["lost"] == []
    [row] = plan["ledgers"]
    assert row["status"] == "planned" and [f["replacements"] for f in row["fragments"]] == [{B: D}]
    assert row["fragments"][0]["entries"] == 7  # of entries 0..9, E3 Qw2: B holds positions 0 and 1's
    with pytest.raises(BKError, match="stop it before decommissioning it"):
        decommission(store)


def test_one_cookie_rule_keeps_the_cookie_of_a_bookie_a_ledger_still_names():
    store = cluster(A, C)
    store.ledgers.create(closed((A, B, C)), 4)
    assert retire_cookie(store, B) == "kept: named by ledger 4"
    store.ledgers.delete(4)
    assert retire_cookie(store, B) == "deleted" and store.cookies.get(B) is None
    store.registration.register(B)
    assert retire_cookie(store, B) == "kept: registered"
