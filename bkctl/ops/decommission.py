"""``bkctl decommission``: a planner over the one executor of replica moves, and the one rule
for deleting a retired bookie's cookie.

Apart from :mod:`.recovery` (re-replicating what lost bookies held, ``bkctl recover``) because
a decommission is not a re-replication of its own any more: it plans the moves of a stopped
bookie's replicas as ``drain`` plans a running one's (:func:`~bkctl.wire.rebalance.plan.plan_drain`)
and hands them to the executor ``rebalance`` and ``drain`` use
(:func:`~bkctl.wire.rebalance.executor.carry_out`: the replication lock, the copy, one
compare-and-set swap; its throttle; its running record, so that one mover runs at a time per
cluster and ``bkctl rebalance --cancel`` stops it).  What differs from a drain: the sources are
stopped (read from the other copies only), a ledger marked under-replicated is moved all the same
(the mark is the stopped bookie's), and an open ledger whose last segment names the bookie is
recovered (fenced and closed) first, its writer being unable to leave a bookie that is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeAlias

from ..humanize import plural as _plural
from .errors import Conflict
from .recovery import (
    autorecovery_available,
    check_bookie_ids,
    check_known,
    daemon_rows,
    describe_left,
    ledgers_on,
    left_rows,
    lost_line,
    lost_with,
    registered_message,
    repair_states,
    retire_cookie,
    still_on,
    surveyed,
)
from .results import inlined, not_in_json, omitted_unless

if TYPE_CHECKING:
    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.client.ledger_report import LedgerReport
    from bkctl.wire.client.placement import RandomPlacement
    from bkctl.wire.metadata.ledger import LedgerMetadata
    from bkctl.wire.metadata.store import MetadataStore
    from bkctl.wire.rebalance.executor import Throttle
    from bkctl.wire.rebalance.mover import MoveResult
    from bkctl.wire.rebalance.plan import LedgerMove, Plan

    from .recovery import LeftLedger, WaitingLedger

    #: a ledger's metadata as a batch read gives it: None (gone) or the error reading it
    _Read = LedgerMetadata | Exception | None

__all__ = ["Decommissioned", "DecommissionMode", "LostLedger", "decommission"]


class DecommissionMode(Enum):
    """Who copies the replicas: the autorecovery daemons, or this process."""

    AUTORECOVERY = "autorecovery"
    LOCAL = "local"


@dataclass(frozen=True, slots=True)
class LostLedger:
    """A ledger with entries no other bookie holds (lost unless the bookie returns), and why."""

    ledger_id: int
    reason: str


@dataclass(frozen=True, slots=True)
class PlannedLedger:
    """A local dry run's row: the ledger's row as ``recover`` plans it, and why it would lose
    data (None: it would not)."""

    data_lost: str | None
    report: LedgerReport = inlined()


@dataclass(frozen=True, slots=True)
class ByTheDaemons:
    """A ledger the autorecovery daemons move: ``status`` ``planned`` (a dry run: with
    ``data_lost``, as :class:`PlannedLedger`) or ``replicated`` (off the bookie now)."""

    ledger_id: int
    status: str
    data_lost: str | None = omitted_unless("planned")
    #: a dry run's row (``data_lost`` in the document)
    planned: bool = not_in_json(False)
    #: the daemons' bytes are not seen from here
    bytes: int = not_in_json(0)


#: a decommission's row of a ledger
LedgerRow: TypeAlias = "LedgerReport | PlannedLedger | ByTheDaemons | WaitingLedger"


@dataclass(frozen=True, slots=True)
class Decommissioned:
    """A decommission's outcome (or a dry run's plan).  ``ledgers``: a row per ledger as
    ``recover`` has them (with the daemons ``ledger_id``, ``status`` and, for one left,
    ``repair`` and ``error``: :class:`~.recovery.WaitingLedger`); ``entries_copied``/``lost_entries``: None with the daemons;
    ``left``: :func:`~.recovery.left_rows`; ``stopped``: why it stopped before the end;
    ``error``: None, or -- ledgers left, cookie kept -- the one line saying how many and why."""

    bookie_id: str
    mode: DecommissionMode
    passes: int
    #: recover's rows (:mod:`.recovery`'s, named with them), and those the daemons left
    ledgers: list[LedgerRow]
    entries_copied: int | None
    lost_entries: int | None
    remaining_ledgers: list[int]
    left: list[LeftLedger]
    lost: list[LostLedger]
    registered: bool
    cookie_deleted: bool
    dry_run: bool
    stopped: str | None
    error: str | None


@dataclass
class _Passes:
    """What a local decommission's passes add up, as they go."""

    passes: int = 0
    entries_copied: int = 0
    lost_entries: int = 0
    ledgers: dict[int, LedgerReport] = field(default_factory=dict)


def _segment_ends(md: LedgerMetadata) -> dict[int, tuple[int | None, tuple[str, ...]]]:
    return {first: (last, tuple(ensemble)) for first, last, ensemble in md.segment_ranges()}


def _row(
    ledger_id: int,
    md: _Read,
    move: LedgerMove | None,
    *,
    status: str,
    copied: int = 0,
    closed_first: bool = False,
    error: str | None = None,
    cause: str | None = None,
    reason: str | None = None,
    lost_entries: int = 0,
) -> LedgerReport:
    """A ledger's row, as ``recover`` has them (its fragments the move's segments)."""
    from bkctl.wire.client.ledger_report import FragmentReport, LedgerReport
    from bkctl.wire.client.quorum import QuorumSchedule

    known = md if md is not None and not isinstance(md, Exception) else None
    ends = _segment_ends(known) if known is not None else {}
    fragments = []
    for seg in move.segments if move is not None else ():
        last, ensemble = ends.get(seg.first_entry_id, (None, ()))
        entries = None
        if known is not None and last is not None and seg.source in ensemble:
            counts = QuorumSchedule(len(ensemble), known.write_quorum).held_by_position(seg.first_entry_id, last)
            entries = counts[ensemble.index(seg.source)]
        fragments.append(FragmentReport(seg.first_entry_id, last, (seg.source,), {seg.source: seg.target}, entries))
    return LedgerReport(
        ledger_id,
        state=None if known is None else known.state.name,
        status=status,
        closed_first=closed_first,
        fragments=tuple(fragments),
        entries_copied=copied,
        bytes=0 if move is None else move.nbytes,
        error=error,
        cause=cause,
        reason=reason,
        lost_entries=lost_entries,
    )


def _result_row(result: MoveResult, md: _Read, closed_first: bool) -> LedgerReport:
    from bkctl.wire.client.replication_causes import LOCKED, OTHER
    from bkctl.wire.rebalance.mover import MoveOutcome

    if result.outcome is MoveOutcome.MOVED:
        return _row(
            result.move.ledger_id,
            md,
            result.move,
            status="recovered",
            copied=result.entries_copied,
            closed_first=closed_first,
            lost_entries=result.lost_entries,
        )
    status = "failed" if result.outcome is MoveOutcome.FAILED else "skipped"
    cause = result.cause or (LOCKED if "replication lock" in (result.reason or "") else OTHER)
    return _row(
        result.move.ledger_id,
        md,
        result.move,
        status=status,
        copied=result.entries_copied,
        closed_first=closed_first,
        error=result.reason or result.outcome.value,
        cause=cause,
        reason=result.reason or result.outcome.value,
    )


def _close_open(
    bk: BlockingBookKeeper, store: MetadataStore, ids: list[int], bookie: str, dry_run: bool
) -> tuple[set[int], dict[int, LedgerReport]]:
    """Recover (fence and close) each open ledger whose last segment names ``bookie``: its writer
    cannot leave a bookie that is gone.  Returns the ledgers closed (a dry run: to close) and
    the rows of those that could not be."""
    from bkctl.wire.client.replication_causes import failure_cause

    closed: set[int] = set()
    failed: dict[int, LedgerReport] = {}
    for lid, md, _version in store.ledgers.read_many(ids, naming=[bookie]):
        if md is None or isinstance(md, Exception) or md.is_closed or bookie not in md.last_ensemble:
            continue
        if not dry_run:
            try:
                bk.recover(lid).close()
            except Exception as exc:  # noqa: BLE001 - reported with its cause, the others go on
                cause, reason = failure_cause(exc)
                failed[lid] = _row(
                    lid, md, None, status="failed", error=str(exc) or type(exc).__name__, cause=cause, reason=reason
                )
                continue
        closed.add(lid)
    return closed, failed


def _plan(store: MetadataStore, bookie: str, placement: RandomPlacement) -> Plan:
    from bkctl.wire.rebalance.plan import plan_drain

    from .rebalance import read_cluster, writable_bookies

    survey = read_cluster(store, keep=[bookie])
    return plan_drain(survey, bookie, [b for b in writable_bookies(store) if b != bookie], placement)


def decommission(
    bk: BlockingBookKeeper,
    store: MetadataStore,
    bookie: str,
    *,
    placement: RandomPlacement | None = None,
    throttle: Throttle | None = None,
    passes: int = 3,
    confirm: Callable[[list[int]], Any] | None = None,
    on_start: Callable[[int, int | None], Any] | None = None,
    on_ledger: Callable[[LedgerReport | ByTheDaemons], Any] | None = None,
    on_bytes: Callable[[int], Any] | None = None,
    on_note: Callable[[str], Any] | None = None,
    use_daemons: bool | None = None,
    timeout: float = 3600.0,
    poll: float = 1.0,
    heartbeat: float = 15.0,
    dry_run: bool = False,
    progress: Callable[[], Any] | None = None,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], Any] | None = None,
    run_poll: float = 1.0,
) -> Decommissioned:
    """Move every replica off a stopped bookie, verify, delete its cookie.

    The bookie must not be registered (exit 4 otherwise; registered but not answering: its
    ZooKeeper session has not expired yet, and the message says so).  One walk finds its
    ledgers (``progress()`` makes what hears it, :meth:`bkctl.app.App.walk_progress`).  A
    decommission is the cluster's one running mover while it lasts (the running record of
    :mod:`bkctl.wire.rebalance.executor`): refused (exit 4) while a rebalance, a drain or
    another decommission runs, naming it; ``bkctl rebalance --cancel`` stops it (no further
    move starts; the cookie is kept).

    When autorecovery is enabled and an auditor is elected (``use_daemons`` None: decided so;
    True/False force it), the daemons do the copying, as Java's ``decommissionbookie`` lets
    them: the audit is triggered and the ledgers' metadata read again until none names the
    bookie, for at most ``timeout`` seconds; ``on_note(text)`` hears the start and, every
    ``heartbeat`` seconds, what the ledgers left wait for (:func:`~.recovery.repair_states`).
    Otherwise this process plans the moves of the bookie's replicas (``drain``'s plan:
    :func:`~bkctl.wire.rebalance.plan.plan_drain`, over ``placement``) and the executor carries
    them out at ``throttle`` (:class:`~bkctl.wire.rebalance.executor.Throttle`), copying from
    the other copies; open ledgers whose last segment names it are recovered and closed
    first; pass after pass (up to ``passes``, none once a pass moved nothing) until no ledger
    names it.  An entry with no good copy does not stop its ledger: the others are copied,
    the swap made, the lost entries recorded (``lost_entries``, as the autorecovery workers
    do).  ``on_start(count, bytes)``, ``on_ledger(row)`` and ``on_bytes(n)`` hear the
    progress.

    Returns a :class:`Decommissioned`.  ``dry_run`` makes every check and changes nothing:
    the rows are the plan."""
    import time

    clock = clock or time.monotonic
    sleep = sleep or time.sleep
    note = on_note or (lambda _text: None)
    [bookie] = check_bookie_ids([bookie])
    registered = store.registration.is_registered(bookie)
    if registered and not dry_run:
        raise Conflict(registered_message(store, bookie))
    found = surveyed(store, [bookie], progress)
    check_known(store, [bookie], found.named)
    ids = found.ledger_ids
    if use_daemons is None:
        use_daemons = bool(ids) and autorecovery_available(store)
    if use_daemons and ids and not autorecovery_available(store):
        raise Conflict(
            "autorecovery is disabled or no auditor is elected: decommission without the daemons (--no-daemons)",
        )
    if placement is None and bk is not None:
        placement = bk.client.placement
    mode = DecommissionMode.AUTORECOVERY if use_daemons else DecommissionMode.LOCAL

    def outcome(
        ledgers: Sequence[LedgerRow],
        lost: dict[int, str],
        *,
        tally: _Passes | None = None,
        remaining: list[int] = ids,
        left: list[LeftLedger] | None = None,
        cookie_deleted: bool = False,
        stopped: str | None = None,
        error: str | None = None,
    ) -> Decommissioned:
        local = not use_daemons
        return Decommissioned(
            bookie_id=bookie,
            mode=mode,
            passes=tally.passes if tally else 0,
            ledgers=list(ledgers),
            entries_copied=(tally.entries_copied if tally else 0) if local else None,
            lost_entries=(tally.lost_entries if tally else 0) if local else None,
            remaining_ledgers=remaining,
            left=left or [],
            lost=[LostLedger(lid, why) for lid, why in lost.items()],
            registered=registered,
            cookie_deleted=cookie_deleted,
            dry_run=dry_run,
            stopped=stopped,
            error=error,
        )

    if dry_run:
        lost = lost_with(bk, store, ids, bookie)
        planned: list[LedgerRow] = []
        if use_daemons:
            planned = [ByTheDaemons(lid, "planned", lost.get(lid), planned=True) for lid in ids]
        elif ids:
            planned = [
                PlannedLedger(lost.get(r.ledger_id), r) for r in _planned_rows(bk, store, bookie, ids, placement)
            ]
        return outcome(planned, lost)
    from bkctl.wire.rebalance.executor import Throttle

    from .rebalance import begin_run

    throttle = throttle or Throttle()
    tally = _Passes()
    with begin_run(store, "decommission", throttle, bookie, poll=run_poll) as run:
        if confirm is not None:  # even with no data: the cookie goes
            confirm(ids)
        mover = _Mover(
            bk=bk,
            store=store,
            bookie=bookie,
            run=run,
            on_start=on_start,
            on_ledger=on_ledger,
            on_bytes=on_bytes,
            note=note,
            placement=placement,
            throttle=throttle,
            passes=passes,
            timeout=timeout,
            poll=poll,
            heartbeat=heartbeat,
            clock=clock,
            sleep=sleep,
        )
        by_ledger: dict[int, LedgerRow] = {}
        if use_daemons and ids:
            by_ledger.update(_by_the_daemons(mover, ids))
        elif ids:
            _locally(mover, ids, found.bytes, tally)
            by_ledger.update(tally.ledgers)
        stopped = run.stop_reason
    ids = ledgers_on(store, [bookie])
    if use_daemons:
        by_ledger.update({row.ledger_id: row for row in daemon_rows(repair_states(store, ids, bookie))})
    lost = lost_with(bk, store, ids, bookie)
    left_now = left_rows([_outcome(by_ledger.get(lid), lid) for lid in ids], lost)
    ledger_rows = [by_ledger[k] for k in sorted(by_ledger)]
    if ids or stopped:
        waited = f" after {timeout:g} s" if use_daemons else ""
        why = f"stopped ({stopped}): " if stopped else ""
        error = (
            f"{why}{_plural(len(ids), 'ledger')} still {'uses' if len(ids) == 1 else 'use'} bookie {bookie}"
            f"{waited}; cookie kept" + (f": {describe_left(left_now)}" if left_now else "")
        )
        if lost:
            error = f"{lost_line(list(lost), bookie)}; {error}"
        return outcome(ledger_rows, lost, tally=tally, remaining=ids, left=left_now, stopped=stopped, error=error)
    deleted = retire_cookie(store, bookie) == "deleted"
    return outcome(
        ledger_rows, lost, tally=tally, remaining=ids, left=left_now, cookie_deleted=deleted, stopped=stopped
    )


def _outcome(row: LedgerRow | None, ledger_id: int) -> LedgerReport | WaitingLedger | int:
    """What :func:`~.recovery.left_rows` reads of a ledger left: its row, or its id (no row: it
    named the bookie after the run started)."""
    return ledger_id if row is None or isinstance(row, (PlannedLedger, ByTheDaemons)) else row


def _planned_rows(
    bk: BlockingBookKeeper, store: MetadataStore, bookie: str, ids: list[int], placement: RandomPlacement
) -> list[LedgerReport]:
    """A dry run's rows: the open ledgers to close first, then the plan's moves and what cannot move."""
    closing, _ = _close_open(bk, store, ids, bookie, dry_run=True)
    plan = _plan(store, bookie, placement)
    moves = {m.ledger_id: m for m in plan.moves}
    reads = {lid: md for lid, md, _v in store.ledgers.read_many(ids, naming=[bookie])}
    rows = []
    why = {u.ledger_id: u for u in plan.unmovable}
    for lid in ids:
        md = reads.get(lid)
        if lid in moves or lid in closing:
            rows.append(_row(lid, md, moves.get(lid), status="planned", closed_first=lid in closing))
        elif lid in why:
            rows.append(
                _row(
                    lid,
                    md,
                    None,
                    status="skipped",
                    error=why[lid].reason,
                    cause=why[lid].kind.value,
                    reason=why[lid].reason,
                )
            )
    return rows


@dataclass(frozen=True)
class _Mover:
    """What a decommission's mover works with, locally (:func:`_locally`) or by the daemons
    (:func:`_by_the_daemons`): the decommission's arguments and its running record."""

    bk: BlockingBookKeeper
    store: MetadataStore
    bookie: str
    run: Any  #: the running record (:func:`~.rebalance.begin_run`)
    on_start: Callable[[int, int | None], Any] | None
    on_ledger: Callable[[LedgerReport | ByTheDaemons], Any] | None
    on_bytes: Callable[[int], Any] | None
    note: Callable[[str], Any]
    placement: Any
    throttle: Any
    passes: int
    timeout: float
    poll: float
    heartbeat: float
    clock: Callable[[], float]
    sleep: Callable[[float], Any]


def _locally(mover: _Mover, ids: list[int], nbytes: int | None, tally: _Passes) -> None:
    """The passes of a local decommission: close, plan, carry out, until no ledger names the
    bookie; ``tally`` hears each ledger's row and the counts."""
    from bkctl.wire.rebalance.executor import carry_out

    by_ledger = tally.ledgers
    if mover.on_start is not None:
        mover.on_start(len(ids), nbytes)
    while ids and tally.passes < mover.passes and not mover.run.cancelled():
        tally.passes += 1
        closed, failed = _close_open(mover.bk, mover.store, ids, mover.bookie, dry_run=False)
        by_ledger.update(failed)
        plan = _plan(mover.store, mover.bookie, mover.placement)
        reads = {lid: md for lid, md, _v in mover.store.ledgers.read_many([m.ledger_id for m in plan.moves])}
        for u in plan.unmovable:
            if u.ledger_id not in failed:
                by_ledger[u.ledger_id] = _row(
                    u.ledger_id, None, None, status="skipped", error=u.reason, cause=u.kind.value, reason=u.reason
                )

        def heard(move_result: MoveResult, _reads: Mapping[int, _Read] = reads, _closed: set[int] = closed) -> None:
            row = _result_row(
                move_result, _reads.get(move_result.move.ledger_id), move_result.move.ledger_id in _closed
            )
            by_ledger[row.ledger_id] = row
            if mover.on_ledger is not None:
                mover.on_ledger(row)

        moved = carry_out(
            mover.bk.client,
            plan.moves,
            mover.throttle,
            on_result=heard,
            on_bytes=mover.on_bytes,
            run=mover.run,
            read_sources=False,
            past_marks=True,
        )
        for lid in sorted(closed - set(by_ledger)):  # its recovery left the bookie (an ensemble change)
            by_ledger[lid] = _row(lid, None, None, status="recovered", closed_first=True)
            if mover.on_ledger is not None:
                mover.on_ledger(by_ledger[lid])
        tally.entries_copied += moved.entries
        tally.lost_entries += moved.lost_entries
        ids = ledgers_on(mover.store, [mover.bookie])
        if not moved.moved:
            break  # nothing moved this pass: another would fail alike (no bookie free, copies down)


def _by_the_daemons(mover: _Mover, ids: list[int]) -> dict[int, ByTheDaemons]:
    """Trigger the audit and wait (up to ``timeout``) for the autorecovery daemons to move every
    ledger off the bookie, saying every ``heartbeat`` seconds what those left wait for."""
    from bkctl.wire.autorecovery.control import trigger_audit

    by_ledger: dict[int, ByTheDaemons] = {}
    if mover.on_start is not None:
        mover.on_start(len(ids), None)  # the daemons' bytes are not seen from here: ledgers only
    auditor, _delay = trigger_audit(mover.store)
    lost_first = lost_with(mover.bk, mover.store, ids, mover.bookie)
    if lost_first:
        mover.note(lost_line(list(lost_first), mover.bookie))
    mover.note(
        f"audit triggered (auditor {auditor}): waiting up to {mover.timeout:g} s for the autorecovery daemons "
        f"to move {_plural(len(ids), 'ledger')} off {mover.bookie}"
    )
    waiting = list(ids)
    deadline = mover.clock() + mover.timeout
    told = mover.clock()
    while True:
        left = still_on(mover.store, waiting, mover.bookie)
        for lid in sorted(set(waiting) - set(left)):
            by_ledger[lid] = ByTheDaemons(lid, "replicated")
            if mover.on_ledger is not None:
                mover.on_ledger(by_ledger[lid])
        waiting = left
        if not waiting or mover.clock() >= deadline or set(waiting) <= set(lost_first) or mover.run.cancelled():
            break  # (no worker can copy what has no copy left: waiting longer changes nothing)
        if mover.clock() - told >= mover.heartbeat:
            told = mover.clock()
            mover.note(
                f"{_plural(len(waiting), 'ledger')} still on {mover.bookie}: "
                f"{describe_left(daemon_rows(repair_states(mover.store, waiting, mover.bookie)))}"
            )
        mover.sleep(mover.poll)
    return by_ledger
