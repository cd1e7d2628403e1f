"""A rebalance killed midway, run again: it goes on with its kept plan, so no replica moves
twice (bkctl.ops.rebalance over bkctl.wire.rebalance.saved, on the in-memory store)."""

from __future__ import annotations

import random

import pytest

from bkctl.exitcodes import CONFLICT, exit_code_for
from bkctl.ops import rebalance as ops
from bkctl.wire.client.placement import RandomPlacement
from bkctl.wire.errors import BKError, SavedPlanError
from bkctl.wire.metadata.ledger import LedgerMetadata
from bkctl.wire.rebalance.plan import LedgerMove, MoveReason, Plan, SegmentMove
from bkctl.wire.rebalance.saved import SavedPlan, is_done
from tests.support.fake_store import FakeMetadataStore

A, B, C, D, E = (f"127.0.0.1:{3181 + i}" for i in range(5))


class Killed(Exception):
    """The run's process gone (kill -9) after some of its moves."""


class Mover:
    """Carries moves out on the store's metadata as the real mover's last write does; the
    first ``until`` moves only, then the run is killed (None: all of them)."""

    def __init__(self, store, until: int | None = None):
        self.store, self.until = store, until
        self.carried: list[LedgerMove] = []

    def __call__(self, _bk, moves, listener, *, throttle, run=None):
        for n, move in enumerate(moves):
            if self.until is not None and n == self.until:
                raise Killed
            md, version = self.store.ledgers.read(move.ledger_id)
            for seg in move.segments:
                md = md.replace_bookie(seg.first_entry_id, seg.source, seg.target)
            self.store.ledgers.update(move.ledger_id, md, version)
            self.carried.append(move)
        return ops.MoveTally(moved=len(moves))


@pytest.fixture
def store():
    """12 closed ledgers of 1-10 kB on three bookies; two bookies added, empty.  (This cluster
    and the kill after 5 of its 7 moves: a plan made again moves a placed replica.)"""
    s = FakeMetadataStore().start()
    for b in (A, B, C, D, E):
        s.registration.register(b)
    rng = random.Random(191)
    for lid in range(12):
        md = LedgerMetadata.new(rng.sample([A, B, C], 2), password=b"pw")
        s.ledgers.create(md.closed(99, rng.randint(1, 10) * 1000), lid)
    return s


def run(store, monkeypatch, mover, **kw):
    monkeypatch.setattr(ops, "carry_out", mover)
    return ops.rebalance(None, store, placement=RandomPlacement(), wall_clock=lambda: 1_800_000_000.0, **kw)


def placed_again(first: Mover, second: Mover) -> set[tuple[int, str]]:
    placed = {(m.ledger_id, t) for m in first.carried for _s, t in m.pairs}
    return placed & {(m.ledger_id, s) for m in second.carried for s, _t in m.pairs}


def test_a_rerun_after_a_kill_goes_on_with_the_kept_plan_and_moves_nothing_twice(store, monkeypatch):
    first = Mover(store, until=4)
    with pytest.raises(Killed):
        run(store, monkeypatch, first)
    assert len(first.carried) == 4 and store.rebalance.read() is not None  # kept: the run did not end
    second = Mover(store)
    plan, tally = run(store, monkeypatch, second)
    assert plan.resumed is not None and plan.resumed.moves_planned == 7
    assert len(second.carried) == 3 and tally.moved == 3
    assert "3 of its 7 moves left" in plan.notes[0]
    assert placed_again(first, second) == set()
    assert store.rebalance.read() is None  # the run ended: nothing kept
    plan, _ = run(store, monkeypatch, Mover(store))  # and the next run plans anew: nothing to move
    assert plan.resumed is None and not plan.moves


def test_replan_forgets_the_kept_plan_and_a_plan_made_again_can_move_a_replica_twice(store, monkeypatch):
    first = Mover(store, until=5)
    with pytest.raises(Killed):
        run(store, monkeypatch, first)
    dry, _ = run(store, monkeypatch, Mover(store), dry_run=True, replan=True)
    assert dry.resumed is None and store.rebalance.read() is not None  # a dry run forgets nothing
    second = Mover(store)
    plan, _ = run(store, monkeypatch, second, replan=True)
    assert plan.resumed is None
    assert placed_again(first, second)  # why the plan is kept: this one takes back a placed replica
    assert store.rebalance.read() is None


def test_a_dry_run_shows_what_is_left_of_the_kept_plan_and_keeps_it(store, monkeypatch):
    with pytest.raises(Killed):
        run(store, monkeypatch, Mover(store, until=3))
    plan, tally = run(store, monkeypatch, Mover(store), dry_run=True, tolerance=0.2)
    assert plan.resumed is not None and len(plan.moves) == 4 and tally.moved == 0
    assert any("--tolerance and --max-moves apply to a new plan" in n for n in plan.notes)
    assert store.rebalance.read() is not None


def test_a_kept_plan_all_done_is_forgotten(store, monkeypatch):
    plan, _ = run(store, monkeypatch, Mover(store), dry_run=True)
    store.rebalance.write(SavedPlan(plan, 1.0).encode())  # killed after its last move, before forgetting
    Mover(store)(None, plan.moves, None, throttle=None)
    again, tally = run(store, monkeypatch, Mover(store))
    assert again.resumed is not None and not again.moves and tally.moved == 0
    assert store.rebalance.read() is None


def test_a_kept_plan_that_does_not_read_is_one_line_and_replan_gets_past_it(store, monkeypatch):
    store.rebalance.write(b"not a plan")
    with pytest.raises(BKError) as e:
        run(store, monkeypatch, Mover(store))
    assert exit_code_for(e.value) == CONFLICT and "--replan" in str(e.value) and "\n" not in str(e.value)
    plan, _ = run(store, monkeypatch, Mover(store), replan=True)
    assert plan.moves and plan.resumed is None


def test_the_kept_plan_reads_back_as_written_and_knows_a_move_done():
    move = LedgerMove(7, (SegmentMove(0, A, D), SegmentMove(5, A, D)), 1234, 10, MoveReason.BALANCE)
    plan = Plan([move], [], {A: 2, D: 0}, {A: 1, D: 1}, 1.0, 0.1, 12)
    back = SavedPlan.decode(SavedPlan(plan, 5.5).encode())
    assert back.plan.moves == [move] and back.planned_at == 5.5
    assert (back.plan.before, back.plan.after, back.plan.tolerance, back.plan.ledgers_walked) == (
        plan.before,
        plan.after,
        0.1,
        12,
    )
    md = LedgerMetadata.new([A, B]).with_ensemble_change(5, [A, C]).closed(9, 100)
    assert not is_done(md, move)
    half = md.replace_bookie(0, A, D)
    assert not is_done(half, move)  # one segment of two: not done
    assert is_done(half.replace_bookie(5, A, D), move)
    with pytest.raises(SavedPlanError, match="format"):
        SavedPlan.decode(__import__("zlib").compress(b'{"format": 99}'))


def test_kept_moves_to_a_bookie_no_longer_writable_are_dropped_and_said(store, monkeypatch):
    first = Mover(store, until=4)
    with pytest.raises(Killed):
        run(store, monkeypatch, first)
    kept = SavedPlan.decode(store.rebalance.read()).plan.moves[4:]
    target = kept[0].pairs[0][1]
    store.registration.unregister(target)
    store.registration.register(target, readonly=True)  # drained meanwhile
    second = Mover(store)
    plan, _ = run(store, monkeypatch, second)
    assert plan.moves == [m for m in kept if target not in {t for _s, t in m.pairs}]
    assert all(target not in {t for _s, t in m.pairs} for m in second.carried)
    assert any(f"its moves to {target} are dropped" in n for n in plan.notes)
    assert store.rebalance.read() is None
