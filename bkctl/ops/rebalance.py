"""``bkctl rebalance`` and ``bkctl drain``: read the cluster, plan, ask, move, report, over
:mod:`bkctl.wire.rebalance` (where the rules live: what moves, where, and how a move keeps
every copy).  The commands render what these return; events reach them through callbacks,
the moves' from the reactor thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..exitcodes import CONFLICT, NOT_FOUND, USAGE, CommandError
from ..humanize import plural


class MoveListener(Protocol):
    """What a rebalance or a drain tells as it goes (the commands render it): the plan, the
    start of the moves (after any question), each move's bytes as they are copied and its
    outcome (these two from the reactor thread), and notes."""

    def plan(self, plan: Any) -> None: ...

    def start(self, plan: Any) -> None: ...

    def copied(self, nbytes: int) -> None: ...

    def result(self, result: Any) -> None: ...

    def note(self, text: str) -> None: ...


class Unheard:
    """A :class:`MoveListener` that hears nothing."""

    def plan(self, plan: Any) -> None:
        pass

    def start(self, plan: Any) -> None:
        pass

    def copied(self, nbytes: int) -> None:
        pass

    def result(self, result: Any) -> None:
        pass

    def note(self, text: str) -> None:
        pass


@dataclass
class MoveTally:
    """What the moves came to: counts by outcome, bytes and entries copied, and each result
    that did not move (the ledger, why)."""

    moved: int = 0
    skipped: int = 0
    abandoned: int = 0
    failed: int = 0
    nbytes: int = 0
    entries: int = 0
    left: list[Any] = field(default_factory=list)  # MoveResult of each move not carried out

    def add(self, result) -> None:
        from bkctl.wire.rebalance.mover import MoveOutcome

        setattr(self, result.outcome.value, getattr(self, result.outcome.value) + 1)
        self.entries += result.entries_copied
        if result.outcome is MoveOutcome.MOVED:
            self.nbytes += result.move.nbytes
        else:
            self.left.append(result)

    def merge(self, other: MoveTally) -> None:
        """Add another pass's counts; its moves left are the ones left now."""
        self.moved += other.moved
        self.skipped += other.skipped
        self.abandoned += other.abandoned
        self.failed += other.failed
        self.nbytes += other.nbytes
        self.entries += other.entries
        self.left = other.left

    def as_json(self) -> dict[str, Any]:
        return {
            "moved": self.moved,
            "skipped": self.skipped,
            "abandoned": self.abandoned,
            "failed": self.failed,
            "bytes": self.nbytes,
            "entries_copied": self.entries,
        }


def read_cluster(store, *, keep=None, placement=None, progress=None):
    """One walk of every ledger's metadata into a :class:`~bkctl.wire.rebalance.survey.ClusterSurvey`
    (``placement``: also note the ledgers whose segments break it; ``progress``: a context
    manager factory hearing the walk, :meth:`bkctl.app.App.walk_progress`)."""
    from bkctl.wire.client.placement import segments_not_adhering
    from bkctl.wire.rebalance.survey import ClusterSurvey

    check = (lambda md: segments_not_adhering(md, placement)) if placement is not None else None
    survey = ClusterSurvey(keep=keep, placement_check=check)
    if progress is None:
        return survey.add_all(store.ledgers.walk())
    with progress() as shown:
        return survey.add_all(store.ledgers.walk(progress=shown))


def writable_bookies(store) -> list[str]:
    readonly = set(store.registration.readonly_bookies())
    return sorted(b for b in store.registration.writable_bookies() if b not in readonly)


def plan_json(plan) -> dict[str, Any]:
    """The plan as ``--json`` prints it (its moves are events of their own)."""
    bookies = sorted(set(plan.before) | set(plan.after))
    return {
        "moves": len(plan.moves),
        "bytes": plan.nbytes,
        "ledgers_walked": plan.ledgers_walked,
        "mean": round(plan.mean),
        "tolerance": plan.tolerance,
        "bookies": [{"bookie": b, "before": plan.before.get(b, 0), "after": plan.after.get(b, 0)} for b in bookies],
        "outside_after": plan.outside(),
        "unmovable": [
            {"ledger_id": u.ledger_id, "bookie": u.bookie or None, "kind": u.kind.value, "reason": u.reason}
            for u in plan.unmovable
        ],
        "notes": plan.notes,
        "resumed": None
        if plan.resumed is None
        else {"planned_at": plan.resumed.planned_at, "moves_planned": plan.resumed.moves_planned},
    }


def move_json(move) -> dict[str, Any]:
    return {
        "ledger_id": move.ledger_id,
        "moves": [{"source": s, "target": t} for s, t in move.pairs],
        "segments": [s.first_entry_id for s in move.segments],
        "bytes": move.nbytes,
        "entries": move.entries,
        "why": move.reason.value,
    }


def carry_out(bk, moves, listener: MoveListener, *, concurrency: int = 16, rate: float = 0) -> MoveTally:
    """Every move, at most ``concurrency`` at a time and ``rate`` bytes/s (0: no limit) written
    to the targets; ``listener`` hears the bytes copied and each result."""
    from bkctl.wire.client.blocking import run_in_reactor
    from bkctl.wire.rebalance.mover import move_ledgers

    tally = MoveTally()
    if not moves:
        return tally
    throttle = None
    if rate:
        from twisted.internet import reactor

        from bkctl.wire.autorecovery.worker import RateLimiter

        throttle = RateLimiter(rate, reactor, cork=bk.client.pool.cork)

    def heard(result) -> None:
        tally.add(result)
        listener.result(result)

    run_in_reactor(
        move_ledgers,
        bk.client,
        moves,
        concurrency=concurrency,
        on_result=heard,
        on_bytes=listener.copied,
        throttle=throttle,
        timeout=None,
    )
    return tally


def rebalance(
    bk,
    store,
    *,
    placement,
    tolerance: float = 0.1,
    fix_placement: bool = False,
    max_moves: int | None = None,
    dry_run: bool = False,
    concurrency: int = 16,
    rate: float = 0,
    confirm: Callable[[Any], Any] | None = None,
    listener: MoveListener | None = None,
    progress=None,
    replan: bool = False,
    wall_clock: Callable[[], float] = time.time,
) -> tuple[Any, MoveTally]:
    """Plan (one walk) and, unless ``dry_run``, carry out: ``(plan, tally)``.

    A balance goes on with the kept plan of a run that did not end, if there is one
    (:mod:`bkctl.wire.rebalance.saved`; ``replan``: forget it and plan again), and keeps its
    own plan while its moves are carried out."""
    from bkctl.wire.rebalance.plan import plan_balance, plan_fix_placement
    from bkctl.wire.rebalance.saved import SavedPlan

    bookies = writable_bookies(store)
    placement.refresh(store.registration.all_bookies())  # the racks as they are now
    plan = None
    if not fix_placement:
        if replan and not dry_run:
            store.rebalance.clear()
        elif not replan:
            plan = kept_plan(store, tolerance=tolerance, max_moves=max_moves)
    if plan is None:
        if len(bookies) < 2 and not fix_placement:
            raise CommandError(f"{plural(len(bookies), 'writable bookie')}: nothing to balance between", CONFLICT)
        survey = read_cluster(store, placement=placement if fix_placement else None, progress=progress)
        if fix_placement:
            plan = plan_fix_placement(survey, bookies, placement)
        else:
            plan = plan_balance(survey, bookies, placement, tolerance, max_moves=max_moves)
    heard = listener or Unheard()
    heard.plan(plan)
    if dry_run or not plan.moves:
        if plan.resumed is not None and not dry_run:
            store.rebalance.clear()  # every kept move is done
        return plan, MoveTally()
    if confirm is not None:
        confirm(plan)
    heard.start(plan)
    if not fix_placement and plan.resumed is None:
        store.rebalance.write(SavedPlan(plan, wall_clock()).encode())
    tally = carry_out(bk, plan.moves, heard, concurrency=concurrency, rate=rate)
    if not fix_placement:
        store.rebalance.clear()  # the run ended: a rerun plans from what the cluster holds
    return plan, tally


def kept_plan(store, *, tolerance: float, max_moves: int | None):
    """The rest of the kept plan of a rebalance that did not end (its moves the ledgers do not
    show done, and whose targets are still writable), or None when none is kept."""
    from bkctl.wire.errors import SavedPlanError
    from bkctl.wire.rebalance.plan import Plan, Resumed
    from bkctl.wire.rebalance.saved import SavedPlan

    data = store.rebalance.read()
    if data is None:
        return None
    try:
        kept = SavedPlan.decode(data)
    except SavedPlanError as e:
        raise CommandError(f"{e}: bkctl rebalance --replan forgets it and plans again", CONFLICT) from None
    old = kept.plan
    left = kept.left(store.ledgers.read_many([m.ledger_id for m in old.moves]))
    writable = set(writable_bookies(store))
    gone = sorted({t for m in left for _s, t in m.pairs if t not in writable})
    if gone:  # drained, turned read-only or stopped since: no copy goes there
        left = [m for m in left if all(t in writable for _s, t in m.pairs)]
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(kept.planned_at))
    notes = [
        f"going on with the rebalance planned at {when}, which did not end (killed or interrupted): "
        f"{len(left)} of its {plural(len(old.moves), 'move')} left; --replan forgets it and plans again"
    ]
    if gone:
        notes.append(
            f"its moves to {', '.join(gone)} are dropped: no longer writable; a rerun after this one plans again"
        )
    if old.tolerance is not None and (tolerance != old.tolerance or max_moves is not None):
        notes.append(
            f"its tolerance is ±{old.tolerance:.0%}; --tolerance and --max-moves apply to a new plan (--replan)"
        )
    return Plan(
        left,
        [],
        old.before,
        old.after,
        old.mean,
        old.tolerance,
        old.ledgers_walked,
        notes,
        resumed=Resumed(kept.planned_at, len(old.moves)),
    )


@dataclass
class DrainReport:
    bookie: str
    passes: int = 0
    tally: MoveTally = field(default_factory=MoveTally)
    #: ledgers still naming the bookie at the end: ledger id -> why
    left: dict[int, str] = field(default_factory=dict)
    read_only_set: bool = False
    cookie_deleted: bool = False
    dry_run: bool = False

    @property
    def drained(self) -> bool:
        return not self.left

    def as_json(self) -> dict[str, Any]:
        return {
            "bookie_id": self.bookie,
            "drained": self.drained,
            "passes": self.passes,
            **self.tally.as_json(),
            "left": [{"ledger_id": lid, "reason": why} for lid, why in sorted(self.left.items())],
            "read_only_set": self.read_only_set,
            "cookie_deleted": self.cookie_deleted,
            "dry_run": self.dry_run,
        }


def drain(
    bk,
    store,
    bookie: str,
    *,
    placement,
    dry_run: bool = False,
    wait: float = 600.0,
    poll: float = 5.0,
    concurrency: int = 16,
    rate: float = 0,
    http: str | None = None,
    decommission: bool = False,
    confirm: Callable[[str], Any] | None = None,
    listener: MoveListener | None = None,
    progress=None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Any] = time.sleep,
) -> tuple[DrainReport, Any]:
    """Turn ``bookie`` read-only, then move every replica it holds, pass after pass (an open
    ledger's last segment waits for its writer to roll or close it, up to ``wait`` seconds),
    until no ledger names it.  ``decommission``: then, once the bookie is stopped (waited for
    up to ``wait``), delete its cookie.  Returns the report and the first pass's plan."""
    from .bookie_http import registration, set_readonly
    from .recovery import check_bookie_ids, ledgers_on

    heard = listener or Unheard()
    note = heard.note
    [bookie] = check_bookie_ids([bookie])
    state = registration(store, bookie)
    if state == "not registered":
        known = store.cookies.get(bookie) is not None or bool(ledgers_on(store, [bookie]))
        if not known:
            raise CommandError(f"unknown bookie {bookie}: not registered, no cookie, in no ledger", NOT_FOUND)
        raise CommandError(
            f"bookie {bookie} is not running: drain copies from a live bookie; "
            f"for a stopped one, bkctl decommission {bookie}",
            CONFLICT,
        )
    targets = [b for b in writable_bookies(store) if b != bookie]
    if not targets:
        raise CommandError(f"no writable bookie but {bookie}: nowhere to move its replicas", CONFLICT)
    placement.refresh(store.registration.all_bookies())
    report = DrainReport(bookie, dry_run=dry_run)
    first_plan = None
    deadline = clock() + wait
    while True:
        from bkctl.wire.rebalance.plan import plan_drain

        survey = read_cluster(store, keep=[bookie], progress=progress if report.passes == 0 else None)
        plan = plan_drain(survey, bookie, [b for b in writable_bookies(store) if b != bookie], placement)
        if first_plan is None:
            first_plan = plan
            heard.plan(plan)
            if dry_run:
                report.left = {u.ledger_id: u.reason for u in plan.unmovable}
                return report, plan
            if confirm is not None:
                confirm(f"turn {bookie} read-only and move its {plural(len(plan.moves), 'replica')} to other bookies")
            if state != "read-only":
                set_readonly(store, bookie, True, http)
                report.read_only_set = True
                note(f"{bookie} is read-only: new ledgers go elsewhere, it still serves reads")
            heard.start(plan)
        report.passes += 1
        pass_tally = carry_out(bk, plan.moves, heard, concurrency=concurrency, rate=rate)
        report.tally.merge(pass_tally)
        remaining = ledgers_on(store, [bookie])
        if not remaining:
            report.left = {}
            break
        why = {u.ledger_id: u.reason for u in plan.unmovable}
        why.update({r.move.ledger_id: r.reason or r.outcome.value for r in pass_tally.left})
        report.left = {lid: why.get(lid, "it names the bookie again: run drain again") for lid in remaining}
        waiting_only = (
            all(
                u.kind.value in ("open-tail", "in-recovery", "locked", "under-replicated")
                for u in plan.unmovable
                if u.ledger_id in report.left
            )
            and not pass_tally.failed
        )
        if clock() >= deadline or (not pass_tally.moved and not waiting_only):
            break
        note(
            f"{plural(len(remaining), 'ledger')} still on {bookie} (open ledgers wait for their writers "
            "to roll or close them); looking again"
        )
        sleep(min(poll, max(0.0, deadline - clock())))
    if report.drained and decommission:
        report.cookie_deleted = _decommission_when_stopped(store, bookie, deadline, clock, sleep, note)
    return report, first_plan


def _decommission_when_stopped(store, bookie: str, deadline: float, clock, sleep, note) -> bool:
    """Once the drained bookie is stopped (waited for until ``deadline``), delete its cookie."""
    from bkctl.wire.metadata.errors import NoSuchCookie

    from .recovery import ledgers_on

    if store.registration.is_registered(bookie):
        note(f"{bookie} holds nothing live: stop it, and its cookie is deleted (decommission)")
    while store.registration.is_registered(bookie):
        if clock() >= deadline:
            raise CommandError(
                f"{bookie} is drained but still running: stop it, then bkctl decommission {bookie}", CONFLICT
            )
        sleep(1.0)
    if ledgers_on(store, [bookie]):
        raise CommandError(f"a ledger names {bookie} again: run bkctl decommission {bookie}", CONFLICT)
    found = store.cookies.get(bookie)
    if found is None:
        return False
    try:
        store.cookies.delete(bookie, found[1])
    except NoSuchCookie:
        return False
    return True


def parse_rate(text: str) -> float:
    """``--max-rate``: bytes per second, ``10M`` and the like (0: no limit)."""
    from .ledger_meta import parse_size

    try:
        return float(parse_size(text))
    except ValueError as e:
        raise CommandError(f"--max-rate: {e}", USAGE) from None
