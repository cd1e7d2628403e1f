"""``bkctl rebalance`` and ``bkctl drain``: read the cluster, plan, ask, move, report, over
:mod:`bkctl.wire.rebalance` (where the rules live: what moves, where, and how a move keeps
every copy).  The commands render what these return; events reach them through callbacks,
the moves' from the reactor thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from bkctl.wire.metadata.registration_state import RegistrationState
from bkctl.wire.rebalance.executor import MoveTally

from ..humanize import human_size, plural
from .errors import BadInput, Conflict, NotFound, OpFailed

if TYPE_CHECKING:
    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.client.placement import RandomPlacement
    from bkctl.wire.metadata.store import MetadataStore, WalkProgress
    from bkctl.wire.rebalance.executor import Run, RunRecord, Throttle
    from bkctl.wire.rebalance.plan import LedgerMove, MoveReason, Plan, Resumed
    from bkctl.wire.rebalance.survey import ClusterSurvey, UnmovableKind


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


#: what shows a walk's progress while it runs (:meth:`bkctl.app.App.walk_progress`)
Progress = Callable[[], AbstractContextManager["WalkProgress"]]


def read_cluster(
    store: MetadataStore,
    *,
    keep: Iterable[str] | None = None,
    placement: RandomPlacement | None = None,
    progress: Progress | None = None,
) -> ClusterSurvey:
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


def writable_bookies(store: MetadataStore) -> list[str]:
    from bkctl.wire.rebalance.executor import writable_bookies as writable

    return writable(store)


@dataclass(frozen=True, slots=True)
class BookieBytes:
    """A bookie's live bytes before the plan and after it."""

    bookie: str
    before: int
    after: int


@dataclass(frozen=True, slots=True)
class UnmovableReplica:
    """A replica the plan leaves where it is (``bookie`` None: the ledger's metadata does not decode)."""

    ledger_id: int
    bookie: str | None
    kind: UnmovableKind
    reason: str


@dataclass(frozen=True, slots=True)
class PlanSummary:
    """A plan as ``--json`` announces it (its moves are events of their own): how many moves and
    bytes, each bookie's bytes before and after, those outside the tolerance after, what cannot move."""

    moves: int
    bytes: int
    ledgers_walked: int
    mean: int
    tolerance: float | None
    bookies: list[BookieBytes]
    outside_after: list[str]
    unmovable: list[UnmovableReplica]
    notes: list[str]
    resumed: Resumed | None
    dry_run: bool


def plan_summary(plan: Plan, dry_run: bool) -> PlanSummary:
    """The plan as ``--json`` announces it."""
    bookies = sorted(set(plan.before) | set(plan.after))
    return PlanSummary(
        moves=len(plan.moves),
        bytes=plan.nbytes,
        ledgers_walked=plan.ledgers_walked,
        mean=round(plan.mean),
        tolerance=plan.tolerance,
        bookies=[BookieBytes(b, plan.before.get(b, 0), plan.after.get(b, 0)) for b in bookies],
        outside_after=plan.outside(),
        unmovable=[UnmovableReplica(u.ledger_id, u.bookie or None, u.kind, u.reason) for u in plan.unmovable],
        notes=plan.notes,
        resumed=plan.resumed,
        dry_run=dry_run,
    )


@dataclass(frozen=True, slots=True)
class ReplicaMove:
    """One replica of a ledger moving: its bookie and the one that takes it."""

    source: str
    target: str


@dataclass(frozen=True, slots=True)
class PlannedMove:
    """A ledger's moves as ``--json`` announces them: its replicas moving, the segments (their
    first entries), about how many bytes and entries the targets receive, and why."""

    ledger_id: int
    moves: list[ReplicaMove]
    segments: list[int]
    bytes: int
    entries: int
    why: MoveReason


def planned_move(move: LedgerMove) -> PlannedMove:
    """A ledger's moves as ``--json`` announces them."""
    return PlannedMove(
        move.ledger_id,
        [ReplicaMove(s, t) for s, t in move.pairs],
        [s.first_entry_id for s in move.segments],
        move.nbytes,
        move.entries,
        move.reason,
    )


def carry_out(
    bk: BlockingBookKeeper,
    moves: list[LedgerMove],
    listener: MoveListener,
    *,
    throttle: Throttle,
    run: Run | None = None,
) -> MoveTally:
    """Every move at ``throttle`` (:class:`~bkctl.wire.rebalance.executor.Throttle`), no new one
    once ``run`` is cancelled; ``listener`` hears the bytes copied and each result."""
    from bkctl.wire.rebalance.executor import carry_out as execute

    return execute(bk.client, moves, throttle, on_result=listener.result, on_bytes=listener.copied, run=run)


def running_line(record: RunRecord | None) -> str:
    """``a drain of B (pid 123 on host, since 2026-11-28 06:00:00 UTC, at most 10.0 MiB/s, 16 moves
    at once, 8 into one bookie)``: the running run, for a refusal and for ``--cancel``."""
    from ..humanize import human_size

    if record is None:
        return "a rebalance or drain (its record does not read)"
    what = f"a {record.kind} of {record.bookie}" if record.bookie else f"a {record.kind}"
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(record.since))
    t = record.throttle
    rate = f"at most {human_size(int(t.rate))}/s" if t.rate else "no rate limit"
    return (
        f"{what} (pid {record.pid} on {record.host}, since {when}, {rate}, "
        f"{plural(t.concurrency, 'move')} at once, {t.per_bookie} into one bookie)"
    )


def begin_run(
    store: MetadataStore, kind: str, throttle: Throttle, bookie: str | None = None, *, poll: float = 1.0
) -> Run:
    """Record this run as the cluster's one running rebalance or drain; exit 4 naming the one
    that runs already."""
    from bkctl.wire.errors import RunInProgress
    from bkctl.wire.rebalance.executor import RunRecord, begin

    try:
        mine = RunRecord.mine(kind, throttle, bookie, session_timeout=getattr(store, "session_timeout", None))
        return begin(store, mine, poll=poll)
    except RunInProgress as e:
        record = e.record if isinstance(e.record, RunRecord) else None  # wire's errors name no executor type
        raise Conflict(
            f"{running_line(record)} is running: one rebalance, drain or decommission at a time per cluster; "
            "wait for it to end, or stop it with bkctl rebalance --cancel" + _left_by_a_kill(record),
        ) from None


def _left_by_a_kill(record: RunRecord | None) -> str:
    """For a run on another host: if its process was killed, its record stays until its
    ZooKeeper session expires -- and in how long at most."""
    if record is None or not record.elsewhere():
        return ""
    when = (
        f"in at most {record.session_timeout:g} s (its session timeout)"
        if record.session_timeout is not None
        else "(its session timeout is not recorded: bkctl's --timeout on that host)"
    )
    return (
        f"; if its process on {record.host} was killed (kill -9, a crash), its record goes by itself "
        f"when that ZooKeeper session expires, {when}"
    )


def cancel(
    store: MetadataStore,
    *,
    wait: float = 60.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> str:
    """Ask the running rebalance or drain to stop and wait (up to ``wait`` s) for it to end; the
    line to print.  Exit 3 when none runs, 1 when it did not end in time."""
    import os
    import socket

    from bkctl.wire.rebalance.executor import request_cancel, wait_ended

    asked = request_cancel(store, f"pid {os.getpid()} on {socket.gethostname()}")
    if asked.record is None:
        if asked.was_gone:
            return "no rebalance or drain was running (a record whose run is gone was removed)"
        raise NotFound("no rebalance or drain is running: nothing to cancel")
    line = running_line(asked.record)
    if asked.was_gone:
        return f"{line} is gone (its process ended): its record removed; nothing was moving"
    if not wait_ended(store, asked.record, wait, clock=clock, sleep=sleep):
        raise OpFailed(f"asked {line} to stop; it has not ended after {wait:g} s (its moves under way finish whole)")
    return f"stopped {line}: no move was left half done"


def rebalance(
    bk: BlockingBookKeeper,
    store: MetadataStore,
    *,
    placement: RandomPlacement,
    tolerance: float = 0.1,
    fix_placement: bool = False,
    max_moves: int | None = None,
    dry_run: bool = False,
    throttle: Throttle | None = None,
    confirm: Callable[[Any], Any] | None = None,
    listener: MoveListener | None = None,
    progress: Progress | None = None,
    replan: bool = False,
    wall_clock: Callable[[], float] = time.time,
    poll: float = 1.0,
) -> tuple[Plan, MoveTally]:
    """Plan (one walk) and, unless ``dry_run``, carry out: ``(plan, tally)``.

    A run records itself as the cluster's one running rebalance or drain (exit 4 while another
    runs), goes on with the kept plan of a run that did not end, if there is one
    (:mod:`bkctl.wire.rebalance.saved`; ``replan``: forget it and plan again), and keeps its
    own plan while its moves are carried out (:mod:`bkctl.wire.rebalance.executor`)."""
    from bkctl.wire.rebalance.executor import Throttle, forget_plan, keep_plan
    from bkctl.wire.rebalance.plan import plan_balance, plan_fix_placement

    throttle = throttle or Throttle()
    with nullcontext() if dry_run else begin_run(store, "rebalance", throttle, poll=poll) as run:
        bookies = writable_bookies(store)
        placement.refresh(store.registration.all_bookies())  # the racks as they are now
        plan = None
        if not fix_placement:
            if replan and not dry_run:
                forget_plan(store)
            elif not replan:
                plan = kept_plan(store, tolerance=tolerance, max_moves=max_moves)
        if plan is None:
            if len(bookies) < 2 and not fix_placement:
                raise Conflict(f"{plural(len(bookies), 'writable bookie')}: nothing to balance between")
            survey = read_cluster(store, placement=placement if fix_placement else None, progress=progress)
            if fix_placement:
                plan = plan_fix_placement(survey, bookies, placement)
            else:
                plan = plan_balance(survey, bookies, placement, tolerance, max_moves=max_moves)
        heard = listener or Unheard()
        heard.plan(plan)
        if dry_run or not plan.moves:
            if plan.resumed is not None and not dry_run:
                forget_plan(store)  # every kept move is done
            return plan, MoveTally()
        if confirm is not None:
            confirm(plan)
        heard.start(plan)
        if not fix_placement:
            keep_plan(store, plan, wall_clock())
        tally = carry_out(bk, plan.moves, heard, throttle=throttle, run=run)
        if not fix_placement:
            forget_plan(store)  # the run ended (or was cancelled): a rerun plans from what the cluster holds
        return plan, tally


def kept_plan(store: MetadataStore, *, tolerance: float, max_moves: int | None) -> Plan | None:
    """The rest of the kept plan of a rebalance that did not end
    (:func:`bkctl.wire.rebalance.executor.kept_plan`); exit 4 for one that does not read."""
    from bkctl.wire.errors import SavedPlanError
    from bkctl.wire.rebalance.executor import kept_plan as kept

    try:
        return kept(store, tolerance=tolerance, max_moves=max_moves)
    except SavedPlanError as e:
        raise Conflict(f"{e}: bkctl rebalance --replan forgets it and plans again") from None


@dataclass
class DrainReport:
    bookie: str
    passes: int = 0
    tally: MoveTally = field(default_factory=MoveTally)
    #: ledgers still naming the bookie at the end (a dry run: those that cannot move): ledger id -> why
    left: dict[int, str] = field(default_factory=dict)
    #: ledgers some entry of which has no readable copy but the bookie's: ledger id -> why
    lost: dict[int, str] = field(default_factory=dict)
    #: a dry run's ledgers that cannot move yet but may in the run (an open ledger's writer, a repair): id -> why
    waiting: dict[int, str] = field(default_factory=dict)
    read_only_set: bool = False
    #: the bookie is read-only at the end (turned so by this drain, or before it)
    read_only: bool = False
    cookie_deleted: bool = False
    dry_run: bool = False
    #: why it stopped before the end: cancelled, interrupted (Ctrl-C); None when it did not
    stopped: str | None = None
    interrupted: bool = False
    #: seconds its passes took, the wait for writers in them (None: it did not move)
    waited: float | None = None
    #: some ledger left is open: its writer may yet leave the bookie
    waiting_for_writers: bool = False

    @property
    def drained(self) -> bool:
        return not self.left and self.stopped is None

    def ending(self, wait: float) -> str:
        """The one line a drain that did not end says: what moved, what is left, that the bookie
        is left read-only and the one command that undoes it."""
        t = self.tally
        took = wait if self.waited is None else self.waited
        why = self.stopped or f"after {took:.1f} s" + (
            f" (before --wait {wait:g} s ran out: no ledger left that waiting would move)" if took < wait else ""
        )
        line = (
            f"drain of {self.bookie} stopped {why}: {plural(t.moved, 'ledger')} moved"
            + (f" ({human_size(t.nbytes)})" if t.moved else "")
            + f", {plural(len(self.left), 'ledger')} still on it"
            + (" (listed above)" if self.left else "")
        )
        if self.read_only:
            undo = (
                f"bkctl bookie readonly {self.bookie} off makes it writable again"
                if self.read_only_set
                else "it was read-only before the drain"
            )
            line += f"; {self.bookie} is left read-only ({undo}; bkctl drain {self.bookie} goes on)"
        return line

    def as_json(self) -> dict[str, Any]:
        return {
            "bookie_id": self.bookie,
            "drained": self.drained,
            "passes": self.passes,
            **self.tally.as_json(),
            "left": [{"ledger_id": lid, "reason": why} for lid, why in sorted(self.left.items())],
            "lost": [{"ledger_id": lid, "reason": why} for lid, why in sorted(self.lost.items())],
            "waiting": [{"ledger_id": lid, "reason": why} for lid, why in sorted(self.waiting.items())],
            "read_only_set": self.read_only_set,
            "left_read_only": self.read_only and not self.drained,
            "cookie_deleted": self.cookie_deleted,
            "dry_run": self.dry_run,
            "stopped": self.stopped,
        }


#: what a replica waits for that may end by itself (a writer rolls its ledger, a repair ends)
_WAITING_KINDS = ("open-tail", "in-recovery", "locked", "under-replicated")


def drain(
    bk: BlockingBookKeeper,
    store: MetadataStore,
    bookie: str,
    *,
    placement: RandomPlacement,
    dry_run: bool = False,
    wait: float = 600.0,
    poll: float = 5.0,
    throttle: Throttle | None = None,
    http: str | None = None,
    decommission: bool = False,
    confirm: Callable[[str], Any] | None = None,
    listener: MoveListener | None = None,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Any] = time.sleep,
    run_poll: float = 1.0,
) -> tuple[DrainReport, Any]:
    """Turn ``bookie`` read-only, then move every replica it holds, pass after pass (an open
    ledger's last segment waits for its writer to roll or close it, up to ``wait`` seconds),
    until no ledger names it.  ``decommission``: then, once the bookie is stopped (waited for
    up to ``wait``), delete its cookie.  Returns the report and the first pass's plan: one
    that did not drain (``--wait`` out, cancelled, Ctrl-C) says so (:meth:`DrainReport.ending`).
    A dry run lists in ``left`` every ledger that cannot move, in ``waiting`` those that may
    once their writer or repair is done, and in ``lost`` those whose entries have no readable
    copy but the bookie's."""
    from bkctl.wire.rebalance.executor import Throttle

    from .bookie_http import registration
    from .recovery import check_bookie_ids, ledgers_on, lost_with

    throttle = throttle or Throttle()
    [bookie] = check_bookie_ids([bookie])
    state = registration(store, bookie)
    if state is RegistrationState.NOT_REGISTERED:
        known = store.cookies.get(bookie) is not None or bool(ledgers_on(store, [bookie]))
        if not known:
            raise NotFound(f"unknown bookie {bookie}: not registered, no cookie, in no ledger")
        raise Conflict(
            f"bookie {bookie} is not running: drain copies from a live bookie; "
            f"for a stopped one, bkctl decommission {bookie}",
        )
    targets = [b for b in writable_bookies(store) if b != bookie]
    if not targets:
        raise Conflict(f"no writable bookie but {bookie}: nowhere to move its replicas")
    placement.refresh(store.registration.all_bookies())
    report = DrainReport(bookie, dry_run=dry_run, read_only=state is RegistrationState.READ_ONLY)
    if dry_run:
        from bkctl.wire.rebalance.plan import plan_drain

        survey = read_cluster(store, keep=[bookie], progress=progress)
        plan = plan_drain(survey, bookie, targets, placement)
        (listener or Unheard()).plan(plan)
        report.left = {u.ledger_id: u.reason for u in plan.unmovable if u.kind.value not in _WAITING_KINDS}
        report.waiting = {u.ledger_id: u.reason for u in plan.unmovable if u.kind.value in _WAITING_KINDS}
        report.lost = {
            lid: f"{why}: data would be lost if {bookie} left before those copies are repaired"
            for lid, why in lost_with(bk, store, ledgers_on(store, [bookie]), bookie).items()
        }
        return report, plan
    with begin_run(store, "drain", throttle, bookie, poll=run_poll) as run:
        plan = _drain_passes(
            _DrainPasses(
                bk=bk,
                store=store,
                report=report,
                state=state,
                run=run,
                placement=placement,
                wait=wait,
                poll=poll,
                throttle=throttle,
                http=http,
                confirm=confirm,
                heard=listener or Unheard(),
                progress=progress,
                clock=clock,
                sleep=sleep,
            )
        )
    if report.drained and decommission:
        report.cookie_deleted = _decommission_when_stopped(
            store, bookie, clock() + wait, clock, sleep, (listener or Unheard()).note
        )
    return report, plan


@dataclass(frozen=True)
class _DrainPasses:
    """What the passes of one drain work with: the drain's arguments, its report (filled in as
    the passes go) and its running record."""

    bk: BlockingBookKeeper
    store: MetadataStore
    report: DrainReport
    state: RegistrationState  #: the bookie's registration when the drain began
    run: Any  #: the running record (:func:`begin_run`)
    placement: Any
    wait: float
    poll: float
    throttle: Any
    http: str | None
    confirm: Callable[[str], Any] | None
    heard: MoveListener
    progress: Any
    clock: Callable[[], float]
    sleep: Callable[[float], Any]


def _drain_passes(d: _DrainPasses) -> Any:
    """The passes of a drain, until no ledger names the bookie, ``wait`` runs out, it is
    cancelled or interrupted (Ctrl-C): ``report`` says which.  Returns the first pass's plan."""
    from bkctl.wire.rebalance.plan import plan_drain

    from .bookie_http import set_readonly
    from .recovery import ledgers_on

    bookie = d.report.bookie
    heard = d.heard
    note = heard.note
    first_plan = None
    started = d.clock()
    deadline = started + d.wait
    try:
        while True:
            survey = read_cluster(d.store, keep=[bookie], progress=d.progress if d.report.passes == 0 else None)
            plan = plan_drain(survey, bookie, [b for b in writable_bookies(d.store) if b != bookie], d.placement)
            if first_plan is None:
                first_plan = plan
                heard.plan(plan)
                if d.confirm is not None:
                    d.confirm(
                        f"turn {bookie} read-only and move its {plural(len(plan.moves), 'replica')} to other bookies"
                    )
                if d.state is not RegistrationState.READ_ONLY:
                    set_readonly(d.store, bookie, True, d.http)
                    d.report.read_only_set = d.report.read_only = True
                    note(f"{bookie} is read-only: new ledgers go elsewhere, it still serves reads")
                heard.start(plan)
            d.report.passes += 1
            pass_tally = carry_out(d.bk, plan.moves, heard, throttle=d.throttle, run=d.run)
            d.report.tally.merge(pass_tally)
            remaining = ledgers_on(d.store, [bookie])
            if not remaining:
                d.report.left = {}
                break
            why = {u.ledger_id: u.reason for u in plan.unmovable}
            why.update({r.move.ledger_id: r.reason or r.outcome.value for r in pass_tally.left})
            d.report.left = {lid: why.get(lid, "it names the bookie again: run drain again") for lid in remaining}
            kinds = {u.ledger_id: u.kind.value for u in plan.unmovable}
            d.report.waiting_for_writers = any(kinds.get(lid) == "open-tail" for lid in d.report.left)
            waiting_only = not pass_tally.failed and all(
                kind in _WAITING_KINDS for lid, kind in kinds.items() if lid in d.report.left
            )
            if pass_tally.stopped is not None:
                d.report.stopped = pass_tally.stopped
                break
            if d.clock() >= deadline or (not pass_tally.moved and not waiting_only):
                break
            note(
                f"{plural(len(remaining), 'ledger')} still on {bookie}"
                + (
                    " (open ledgers wait for their writers to roll or close them)"
                    if d.report.waiting_for_writers
                    else ""
                )
                + "; looking again"
            )
            d.sleep(min(d.poll, max(0.0, deadline - d.clock())))
    except KeyboardInterrupt:
        d.report.stopped, d.report.interrupted = "interrupted (Ctrl-C)", True
        try:
            d.report.left = {lid: "interrupted before it moved" for lid in ledgers_on(d.store, [bookie])}
        except KeyboardInterrupt:
            pass
    d.report.waited = d.clock() - started
    return first_plan


def _decommission_when_stopped(
    store: MetadataStore,
    bookie: str,
    deadline: float,
    clock: Callable[[], float],
    sleep: Callable[[float], object],
    note: Callable[[str], object],
) -> bool:
    """Once the drained bookie is stopped (waited for until ``deadline``), delete its cookie by
    the one rule a decommission follows (:func:`~.decommission.retire_cookie`)."""
    from .recovery import retire_cookie

    if store.registration.is_registered(bookie):
        note(f"{bookie} holds nothing live: stop it, and its cookie is deleted (decommission)")
    while store.registration.is_registered(bookie):
        if clock() >= deadline:
            raise Conflict(f"{bookie} is drained but still running: stop it, then bkctl decommission {bookie}")
        sleep(1.0)
    outcome = retire_cookie(store, bookie)
    if outcome.startswith("kept: named"):
        raise Conflict(f"a ledger names {bookie} again ({outcome}): run bkctl decommission {bookie}")
    return outcome == "deleted"


def parse_rate(text: str) -> float:
    """``--max-rate``: bytes per second, ``10M`` and the like (0: no limit)."""
    from .ledger_meta import parse_size

    try:
        return float(parse_size(text))
    except ValueError as e:
        raise BadInput(f"--max-rate: {e}") from None
