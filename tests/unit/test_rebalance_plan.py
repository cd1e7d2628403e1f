"""Planning replica moves (bkctl.wire.rebalance: survey and plan), from metadata alone."""

from __future__ import annotations

import random

import pytest

from bkctl.wire.client.placement import RackAwarePlacement, RandomPlacement
from bkctl.wire.domain.disk_attribution import packed_entry_bytes
from bkctl.wire.metadata.ledger import LedgerMetadata
from bkctl.wire.metadata.store import LedgerRead
from bkctl.wire.rebalance.mover import problem_with
from bkctl.wire.rebalance.plan import MoveReason, plan_balance, plan_drain, plan_fix_placement
from bkctl.wire.rebalance.survey import ClusterSurvey, UnmovableKind

A, B, C, D, E = (f"127.0.0.1:{3181 + i}" for i in range(5))


def closed(ensemble, entries=10, length=10_000, qw=None):
    md = LedgerMetadata.new(list(ensemble), qw)
    return md.closed(entries - 1, length)


def survey_of(ledgers: dict[int, LedgerMetadata], **kw) -> ClusterSurvey:
    return ClusterSurvey(**kw).add_all(LedgerRead(lid, md, 0) for lid, md in sorted(ledgers.items()))


def apply(ledgers: dict[int, LedgerMetadata], plan) -> dict[int, LedgerMetadata]:
    out = dict(ledgers)
    for move in plan.moves:
        md = out[move.ledger_id]
        for seg in move.segments:
            md = md.replace_bookie(seg.first_entry_id, seg.source, seg.target)
        out[move.ledger_id] = md
    return out


def test_the_survey_counts_each_bookies_live_bytes_by_the_write_sets():
    # E3/Qw2: each bookie holds 2/3 of the entries; 9 entries of 100 bytes, each stored with
    # the header and digest the client packs around it (the one rule disk counts with too)
    md = closed([A, B, C], entries=9, length=900, qw=2)
    held = 6 * (100 + packed_entry_bytes(md))
    survey = survey_of({1: md})
    assert survey.used == {A: held, B: held, C: held}
    assert survey.ledgers == {A: 1, B: 1, C: 1}
    [replica] = survey.replicas(A)
    assert (replica.ledger_id, replica.entries, replica.nbytes) == (1, 6, held)


def test_an_open_ledgers_last_segment_is_unmovable_and_its_closed_ones_move():
    md = LedgerMetadata.new([A, B]).with_ensemble_change(5, [A, C])
    survey = survey_of({1: md})
    kinds = {(u.bookie, u.kind) for u in survey.unmovable}
    assert kinds == {(A, UnmovableKind.OPEN_TAIL), (C, UnmovableKind.OPEN_TAIL)}
    [on_b] = survey.replicas(B)
    assert [first for first, _ in on_b.shape.segments] == [0] and on_b.entries == 5 and on_b.nbytes == 0


def test_balance_moves_from_the_full_bookies_to_the_empty_ones_until_within_tolerance():
    rng = random.Random(7)
    ledgers = {}
    for lid in range(1, 301):
        pair = rng.sample([A, B, C], 2)
        size = rng.randint(1, 10) * 1_000_000
        ledgers[lid] = closed(pair, entries=100, length=size)
    survey = survey_of(ledgers)
    assert D not in survey.used and E not in survey.used
    plan = plan_balance(survey, [A, B, C, D, E], RandomPlacement(), tolerance=0.1)
    assert plan.moves and not plan.outside()
    mean = plan.mean
    assert all(abs(plan.after[b] - mean) <= 0.1 * mean for b in [A, B, C, D, E])
    assert len({m.ledger_id for m in plan.moves}) == len(plan.moves)  # a ledger's replicas move in one write
    for move in plan.moves:  # each fits the ledger as the mover finds it: no replica comes back
        assert problem_with(ledgers[move.ledger_id], move) is None, move
        assert not {t for _s, t in move.pairs} & {s for s, _t in move.pairs}
    moved = apply(ledgers, plan)
    for md in moved.values():  # never two copies on one bookie
        for _first, ensemble in md.ensembles:
            assert len(set(ensemble)) == len(ensemble)
    assert survey_of(moved).used == {b: n for b, n in plan.after.items() if n}  # the plan's figures hold


def test_balance_leaves_a_balanced_cluster_alone():
    ledgers = {1: closed([A, B]), 2: closed([B, C]), 3: closed([C, A])}
    plan = plan_balance(survey_of(ledgers), [A, B, C], RandomPlacement(), tolerance=0.1)
    assert plan.moves == [] and plan.after == plan.before


def test_balance_never_breaks_the_rack_policy():
    racks = {A: "/r1", B: "/r1", C: "/r2", D: "/r2", E: "/r1"}
    placement = RackAwarePlacement(racks)
    # every ledger on (A, C): one per rack; D (rack r2) and E (rack r1) empty
    ledgers = {lid: closed([A, C], length=1_000_000) for lid in range(1, 41)}
    plan = plan_balance(survey_of(ledgers), [A, B, C, D, E], placement, tolerance=0.1)
    assert plan.moves
    for md in apply(ledgers, plan).values():
        assert placement.adherence(list(md.ensembles[0][1]), md.write_quorum) == "MEETS_STRICT"


def test_drain_moves_every_replica_and_names_what_waits():
    ledgers = {
        1: closed([A, B]),
        2: closed([A, C]),
        3: LedgerMetadata.new([A, B]),  # open: its writer's
        4: closed([B, C]),
    }
    survey = survey_of(ledgers, keep=[A])
    plan = plan_drain(survey, A, [B, C, D], RandomPlacement())
    assert sorted(m.ledger_id for m in plan.moves) == [1, 2]
    assert all(m.reason is MoveReason.DRAIN and m.pairs[0][0] == A for m in plan.moves)
    assert [(u.ledger_id, u.kind) for u in plan.unmovable] == [(3, UnmovableKind.OPEN_TAIL)]
    for md in apply(ledgers, plan).values():
        if md.is_closed:
            assert A not in md.bookies


def test_drain_with_no_bookie_left_to_take_a_replica_says_so():
    plan = plan_drain(survey_of({1: closed([A, B])}, keep=[A]), A, [B], RandomPlacement())
    assert plan.moves == [] and [u.kind for u in plan.unmovable] == [UnmovableKind.NO_TARGET]


def test_fix_placement_replaces_the_fewest_members_that_make_an_ensemble_comply():
    racks = {A: "/r1", B: "/r1", C: "/r2", D: "/r2"}
    placement = RackAwarePlacement(racks, rng=random.Random(1))
    from bkctl.wire.client.placement import segments_not_adhering

    ledgers = {1: closed([A, B]), 2: closed([A, C]), 3: LedgerMetadata.new([A, B])}
    survey = survey_of(ledgers, placement_check=lambda md: segments_not_adhering(md, placement))
    assert [lid for lid, _md, _f in survey.not_adhering] == [1, 3]
    plan = plan_fix_placement(survey, [A, B, C, D], placement)
    [move] = plan.moves
    assert move.ledger_id == 1 and len(move.segments) == 1 and move.reason is MoveReason.PLACEMENT
    fixed = apply(ledgers, plan)[1]
    assert segments_not_adhering(fixed, placement) == []
    assert [(u.ledger_id, u.kind) for u in plan.unmovable] == [(3, UnmovableKind.OPEN_TAIL)]


@pytest.mark.parametrize("tolerance", [0.05, 0.1, 0.2])
def test_balance_converges_for_any_tolerance_when_replicas_are_small(tolerance):
    ledgers = {lid: closed([A, B], length=100_000) for lid in range(1, 201)}
    plan = plan_balance(survey_of(ledgers), [A, B, C, D], RandomPlacement(), tolerance=tolerance)
    assert not plan.outside()
    assert plan.nbytes == sum(m.nbytes for m in plan.moves) > 0


def test_a_ledger_whose_replicas_both_move_never_moves_one_back():
    rng = random.Random(3)
    bookies = [A, B, C, D, E, "127.0.0.1:3190", "127.0.0.1:3191"]
    ledgers = {
        lid: closed(rng.sample(bookies[:5], 3), entries=30, length=rng.randint(1, 100) * 3_000, qw=2)
        for lid in range(1, 2001)
    }
    plan = plan_balance(survey_of(ledgers), bookies, RandomPlacement(), tolerance=0.05)
    assert not plan.outside()
    assert any(len(m.pairs) > 1 for m in plan.moves)  # some ledgers move two replicas at once
    for move in plan.moves:
        assert problem_with(ledgers[move.ledger_id], move) is None, move
    for md in apply(ledgers, plan).values():
        assert len(set(md.ensembles[0][1])) == 3


def test_a_move_between_two_bookies_already_within_the_band_is_not_planned():
    # a cluster one bookie of which stays outside whatever moves (its replicas do not fit):
    # moves between bookies within the band would change nothing outside it, and a second run
    # after the first would take back replicas the first had placed
    rng = random.Random(12)
    ledgers = {
        lid: closed(rng.sample([A, B, C], 2), entries=100, length=rng.randint(1, 10) * 1000) for lid in range(12)
    }
    plan = plan_balance(survey_of(ledgers), [A, B, C, D, E], RandomPlacement(), tolerance=0.1)
    assert plan.moves and plan.outside() == [B]
    again = plan_balance(survey_of(apply(ledgers, plan)), [A, B, C, D, E], RandomPlacement(), tolerance=0.1)
    assert again.moves == [] and again.outside() == [B]


def test_a_drain_moves_a_ledger_whose_segments_together_name_every_bookie_segment_by_segment():
    """Segments [A, B] and [A, C] on bookies A, B, C: no one bookie can take A's replica (B is in
    the first segment, C in the second), but each segment has a bookie outside it."""
    md = LedgerMetadata.new([A, B]).with_ensemble_change(5, [A, C]).closed(9, 1000)
    ledgers = {1: md}
    plan = plan_drain(survey_of(ledgers), A, [B, C], RandomPlacement())
    assert plan.unmovable == []
    [move] = plan.moves
    assert [(s.first_entry_id, s.source, s.target) for s in move.segments] == [(0, A, C), (5, A, B)]
    after = apply(ledgers, plan)[1]
    assert after.ensembles == ((0, (C, B)), (5, (B, C)))
    assert problem_with(md, move) is None  # the mover takes it as it is


def test_a_drain_names_the_segment_no_bookie_can_take():
    md = LedgerMetadata.new([A, B, C], 3).closed(9, 1000)
    plan = plan_drain(survey_of({1: md}), A, [B, C], RandomPlacement())
    [stuck] = plan.unmovable
    assert stuck.kind is UnmovableKind.NO_TARGET
    assert (
        stuck.reason
        == f"no writable bookie outside its segment from entry 0 ({A}, {B}, {C}) can take it within the placement policy"
    )
