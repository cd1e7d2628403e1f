"""Which replicas move where, decided from a :class:`~.survey.ClusterSurvey` alone (pure):
the moves of ``bkctl rebalance`` (live bytes evened out to within a tolerance of the mean),
of ``bkctl rebalance --fix-placement`` (ensembles that break the placement policy) and of
``bkctl drain`` (every replica off one bookie).

Every target is a writable bookie outside each segment the replica spans (never two copies
of an entry on one bookie), and a move never makes a segment break the placement policy
that met it.  A plan moves a replica at most once: its shape changes with the move (a
ledger two of whose replicas move moves in one :class:`LedgerMove`); a rebalance keeps its
plan while it runs, so that a rerun after a kill goes on with it (:mod:`.saved`).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from bkctl.wire.client.placement import FAIL, RandomPlacement
from bkctl.wire.client.quorum import QuorumSchedule
from bkctl.wire.domain.replica_size import replica_bytes

from .survey import ClusterSurvey, Replica, Shape, Unmovable, UnmovableKind

__all__ = [
    "LedgerMove",
    "MoveReason",
    "Plan",
    "Resumed",
    "SegmentMove",
    "plan_balance",
    "plan_drain",
    "plan_fix_placement",
]


class MoveReason(enum.Enum):
    BALANCE = "balance"
    DRAIN = "drain"
    PLACEMENT = "placement"


@dataclass(frozen=True)
class SegmentMove:
    """``source``'s copies in the segment from ``first_entry_id`` go to ``target``."""

    first_entry_id: int
    source: str
    target: str


@dataclass(frozen=True)
class LedgerMove:
    """The moves of one ledger, carried out together: every copy first, then one metadata
    write.  ``nbytes`` and ``entries``: about how many bytes, and how many entry copies,
    the targets receive."""

    ledger_id: int
    segments: tuple[SegmentMove, ...]
    nbytes: int
    entries: int
    reason: MoveReason

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """The distinct ``(source, target)`` of its segments, in order."""
        return list(dict.fromkeys((s.source, s.target) for s in self.segments))

    def describe(self) -> str:
        """``a -> b`` (``a -> b, c -> d`` when it moves more than one replica)."""
        return ", ".join(f"{source} -> {target}" for source, target in self.pairs)


@dataclass(frozen=True)
class Resumed:
    """What a plan goes on with: the kept plan of a run that did not end
    (:mod:`.saved`), made at ``planned_at`` (seconds since the epoch) with ``moves_planned`` moves."""

    planned_at: float
    moves_planned: int


@dataclass
class Plan:
    """The moves, what cannot move, and each bookie's live bytes before and after."""

    moves: list[LedgerMove]
    unmovable: list[Unmovable]
    before: dict[str, int]
    after: dict[str, int]
    #: the mean of the balanced bookies' live bytes, and the tolerance asked (rebalance only)
    mean: float = 0.0
    tolerance: float | None = None
    ledgers_walked: int = 0
    notes: list[str] = field(default_factory=list)
    #: the kept plan this one's moves are the rest of (None: planned now)
    resumed: Resumed | None = None

    @property
    def nbytes(self) -> int:
        return sum(m.nbytes for m in self.moves)

    def outside(self, use: dict[str, int] | None = None) -> list[str]:
        """The bookies of ``use`` (default :attr:`after`) outside the tolerance of the mean."""
        if self.tolerance is None:
            return []
        use = self.after if use is None else use
        lo, hi = self.mean * (1 - self.tolerance), self.mean * (1 + self.tolerance)
        return [b for b, n in sorted(use.items()) if not lo <= n <= hi]


class _PolicyCheck:
    """Whether a move keeps a segment within the placement policy, each ensemble judged once."""

    def __init__(self, placement: RandomPlacement):
        self.placement = placement
        self._seen: dict[tuple[tuple[str, ...], int], bool] = {}

    def meets(self, ensemble: tuple[str, ...], write_quorum: int) -> bool:
        key = (ensemble, write_quorum)
        found = self._seen.get(key)
        if found is None:
            found = self._seen[key] = self.placement.adherence(list(ensemble), write_quorum) != FAIL
        return found

    def allows(self, shape: Shape, source: str, target: str) -> bool:
        for _first, ensemble in shape.segments:
            if not self.meets(ensemble, shape.write_quorum):
                continue  # broke the policy already: a move cannot make it worse than failing
            moved = tuple(target if b == source else b for b in ensemble)
            if not self.meets(moved, shape.write_quorum):
                return False
        return True


def _move_of(replica: Replica, target: str, reason: MoveReason) -> LedgerMove:
    segments = tuple(SegmentMove(first, replica.bookie, target) for first, _ in replica.shape.segments)
    return LedgerMove(replica.ledger_id, segments, replica.nbytes, replica.entries, reason)


def plan_balance(
    survey: ClusterSurvey,
    bookies: Sequence[str],
    placement: RandomPlacement,
    tolerance: float = 0.1,
    max_moves: int | None = None,
) -> Plan:
    """Moves from the fullest of ``bookies`` (the writable ones: they are the targets too)
    to the emptiest until each holds within ``tolerance`` of their mean live bytes.

    Greedy, one pass over each bookie's replicas from the largest: a bookie above the mean
    gives a replica to the emptiest bookie below it that can take it (outside the replica's
    segments, within the placement policy) when neither ends outside the tolerance band by
    it and one of them is outside it now (a move between two bookies within the band would
    change nothing outside it, and a run after a finished one would take back what that one
    placed, for nothing); a replica too large for that now stays too large, so no replica is looked at twice
    and a plan over 10^6 ledgers costs about one look at each of their replicas.  It stops
    once every bookie is within the tolerance, or no move fits (the plan says which bookies
    stay outside)."""
    bookies = list(dict.fromkeys(bookies))
    used = {b: survey.used.get(b, 0) for b in bookies}
    before = dict(used)
    mean = sum(used.values()) / len(bookies) if bookies else 0.0
    lo, hi = mean * (1 - tolerance), mean * (1 + tolerance)
    policy = _PolicyCheck(placement)
    swapped: dict[int, dict[str, str]] = {}  # ledger -> the replicas this plan moves: source -> target
    planned: dict[int, int] = {}  # ledger -> its move's index in moves
    moves: list[LedgerMove] = []
    looked: dict[str, int] = dict.fromkeys(bookies, 0)  # how far each bookie's replicas were looked at
    largest_first: dict[str, list[int]] = {}

    def shape_now(replica: Replica) -> Shape:
        """The replica's segments as the moves planned so far leave its ledger."""
        done = swapped.get(replica.ledger_id)
        if not done:
            return replica.shape
        return Shape(
            replica.shape.write_quorum,
            tuple((first, tuple(done.get(b, b) for b in ens)) for first, ens in replica.shape.segments),
        )

    def move(replica: Replica, target: str) -> None:
        step = _move_of(replica, target, MoveReason.BALANCE)
        swapped.setdefault(replica.ledger_id, {})[replica.bookie] = target
        if replica.ledger_id in planned:  # another replica of a ledger already moving: one move
            earlier = moves[planned[replica.ledger_id]]
            moves[planned[replica.ledger_id]] = LedgerMove(
                replica.ledger_id,
                earlier.segments + step.segments,
                earlier.nbytes + step.nbytes,
                earlier.entries + step.entries,
                MoveReason.BALANCE,
            )
        else:
            planned[replica.ledger_id] = len(moves)
            moves.append(step)
        used[replica.bookie] -= replica.nbytes
        used[target] += replica.nbytes

    def unbalanced() -> bool:
        return not all(lo <= n <= hi for n in used.values())

    while unbalanced() and (max_moves is None or len(moves) < max_moves):
        progress = False
        for source in sorted((b for b in bookies if used[b] > mean), key=lambda b: -used[b]):
            sizes = survey.sizes(source)
            if source not in largest_first:
                largest_first[source] = sorted((i for i in range(len(sizes)) if sizes[i] > 0), key=lambda i: -sizes[i])
            order = largest_first[source]
            while looked[source] < len(order) and used[source] > mean and unbalanced():
                if max_moves is not None and len(moves) >= max_moves:
                    break
                i = order[looked[source]]
                looked[source] += 1
                size = sizes[i]
                if used[source] - size < lo:
                    continue  # too large for what this bookie can give (and so for good)
                replica = survey.replica(source, i)
                shape = shape_now(replica)
                for target in sorted((b for b in bookies if used[b] < mean), key=used.__getitem__):
                    if used[target] + size > hi:
                        break  # the emptiest cannot take it without passing the band: none can
                    if used[source] <= hi and used[target] >= lo:
                        break  # both within the band already: the move would change nothing outside it
                    if target in swapped.get(replica.ledger_id, ()):
                        continue  # it gave this ledger's replica away in this plan: no round trip
                    if not shape.names(target) and policy.allows(shape, source, target):
                        move(replica, target)
                        progress = True
                        break
        if not progress:
            break
    plan = Plan(moves, [], before, used, mean, tolerance, survey.walked)
    if plan.outside():
        plan.notes.append(
            f"{len(plan.outside())} of {len(bookies)} bookies stay outside ±{tolerance:.0%} of the mean: "
            "no closed ledger's replica fits (too few, too large, or the placement policy forbids the move)"
        )
    return plan


def plan_drain(survey: ClusterSurvey, bookie: str, targets: Sequence[str], placement: RandomPlacement) -> Plan:
    """Every movable replica of ``bookie`` to the emptiest of ``targets`` that can take it
    (by live bytes, then by replicas given this plan); the rest, and the replicas that
    cannot move now (open ledgers' last segments), in :attr:`Plan.unmovable`."""
    targets = [t for t in dict.fromkeys(targets) if t != bookie]
    used = {b: survey.used.get(b, 0) for b in [bookie, *targets]}
    before = dict(used)
    given = dict.fromkeys(targets, 0)
    policy = _PolicyCheck(placement)
    moves: list[LedgerMove] = []
    unmovable = [u for u in survey.unmovable if u.bookie == bookie]
    for replica in survey.replicas(bookie):
        order = sorted(targets, key=lambda t: (used[t], given[t]))
        for target in order:
            if not replica.shape.names(target) and policy.allows(replica.shape, bookie, target):
                move = _move_of(replica, target, MoveReason.DRAIN)
                break
        else:  # its segments together name every target: each segment to a bookie outside it
            move_or_why = _per_segment(replica, order, policy)
            if isinstance(move_or_why, str):
                unmovable.append(Unmovable(replica.ledger_id, bookie, UnmovableKind.NO_TARGET, move_or_why))
                continue
            move = move_or_why
        moves.append(move)
        used[bookie] -= replica.nbytes
        share = replica.nbytes // len(move.segments)
        for seg in move.segments:
            used[seg.target] += share
            given[seg.target] += 1
    return Plan(moves, unmovable, before, used, ledgers_walked=survey.walked)


def _per_segment(replica: Replica, order: Sequence[str], policy: _PolicyCheck) -> LedgerMove | str:
    """The drain of a replica no one bookie can take (its segments together name every
    target): each segment's copies to the emptiest target outside that segment, within the
    placement policy -- or why not, naming the segment none can take."""
    segments = []
    for first, ensemble in replica.shape.segments:
        alone = Shape(replica.shape.write_quorum, ((first, ensemble),))
        target = next((t for t in order if t not in ensemble and policy.allows(alone, replica.bookie, t)), None)
        if target is None:
            return (
                f"no writable bookie outside its segment from entry {first} ({', '.join(ensemble)}) "
                "can take it within the placement policy"
            )
        segments.append(SegmentMove(first, replica.bookie, target))
    return LedgerMove(replica.ledger_id, tuple(segments), replica.nbytes, replica.entries, MoveReason.DRAIN)


def plan_fix_placement(survey: ClusterSurvey, targets: Sequence[str], placement: RandomPlacement) -> Plan:
    """For each ledger whose segment breaks the placement policy (:attr:`ClusterSurvey.not_adhering`),
    the fewest members replaced (one if one will do) for the segment to meet it, by the
    policy's own choice of replacements; an open ledger's last segment is its writer's and
    stays (unmovable)."""
    targets = list(dict.fromkeys(targets))
    used = {b: survey.used.get(b, 0) for b in targets}
    before = dict(used)
    policy = _PolicyCheck(placement)
    moves: list[LedgerMove] = []
    unmovable: list[Unmovable] = []
    for ledger_id, md, failing in survey.not_adhering:
        schedule = QuorumSchedule(md.ensemble_size, md.write_quorum)
        segments: list[SegmentMove] = []
        nbytes = entries = 0
        stuck = None
        for first, last, ensemble in md.segment_ranges():
            if first not in failing:
                continue
            if last is None:
                stuck = Unmovable(
                    ledger_id,
                    "",
                    UnmovableKind.OPEN_TAIL,
                    f"its open last segment (from entry {first}) breaks the placement policy: "
                    "it is its writer's until the ledger is closed",
                )
                continue
            fixed = _fixed_ensemble(tuple(ensemble), md.write_quorum, targets, placement, policy)
            if fixed is None:
                stuck = Unmovable(
                    ledger_id,
                    "",
                    UnmovableKind.NO_TARGET,
                    f"no writable bookies make its segment from entry {first} meet the placement policy",
                )
                continue
            counts = schedule.held_by_position(first, last)
            for position, (old, new) in enumerate(zip(ensemble, fixed)):
                if old != new:
                    segments.append(SegmentMove(first, old, new))
                    held = replica_bytes(md, counts[position])
                    entries += counts[position]
                    nbytes += held
                    used[new] = used.get(new, 0) + held
                    used[old] = used.get(old, 0) - held
        if segments:
            moves.append(LedgerMove(ledger_id, tuple(segments), nbytes, entries, MoveReason.PLACEMENT))
        if stuck is not None:
            unmovable.append(stuck)
    return Plan(moves, unmovable, before, used, ledgers_walked=survey.walked)


def _fixed_ensemble(
    ensemble: tuple[str, ...],
    write_quorum: int,
    targets: Sequence[str],
    placement: RandomPlacement,
    policy: _PolicyCheck,
) -> tuple[str, ...] | None:
    """``ensemble`` with as few members replaced as makes it meet the policy (None: no way)."""
    from bkctl.wire.client.errors import NotEnoughBookies

    writable = [t for t in targets if t not in ensemble]
    # one member replaced, then all but one: the policy picks the racks (rack/region-aware)
    tries: list[list[str]] = [[m] for m in ensemble]
    tries += [[m for m in ensemble if m != kept] for kept in ensemble]
    for failed in tries:
        try:
            candidate = tuple(placement.replace_bookies(list(ensemble), failed, writable, write_quorum=write_quorum))
        except (NotEnoughBookies, ValueError):
            continue
        if policy.meets(candidate, write_quorum):
            return candidate
    return None
