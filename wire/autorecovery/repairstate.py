"""Where each ledger's repair stands, and which bookies are lost: the one model
``autorecovery status``, ``query-status``, ``underreplicated``, ``decommission
--wait`` and ``bkctl top`` read (blocking: call it off the reactor thread).

A :class:`Snapshot` is read from ZooKeeper at one moment: the switch, the
delay, the elected auditor, the marks and the replication locks, the
registered bookies and the cookies, and the status nodes our daemons keep
(:mod:`.status`).  Everything below is computed from it, so a view changes as
soon as the cluster does: a lock gone is no longer "being re-replicated", a
bookie registered again is no longer lost, whatever a status node still says.

A ledger's state (:class:`LedgerRepairState`):

``waiting-delay``   not marked yet: a lost bookie of it is not due before
                    ``lostBookieRecoveryDelay`` (``until``)
``held-disabled``   autorecovery is disabled: not marked (the auditor holds
                    it back) or marked and not taken by any worker
``not-marked``      names a lost bookie, not marked yet, nothing known waits
                    for it (no auditor, or its audit has not run)
``waiting-worker``  marked, no worker holds it
``waiting-grace``   an open ledger's worker waits for its writer to replace
                    the bookie before fencing it (``openLedgerRereplication
                    GracePeriod``, ``until``)
``re-replicating``  a worker copies it (``worker``, ``since``)
``held-failed``     an attempt failed; the worker keeps its lock until
                    ``until`` (``lockReleaseOfFailedLedgerGracePeriod``),
                    then any worker retries it
``locked``          a worker that keeps no status holds its lock (Java's):
                    which ledger, by which host (the lock's content) and
                    since when (the lock's ctime) is all that can be known -- being copied,
                    waiting for an open ledger's writer or held after a
                    failure look the same
``done``            not marked, and a worker finished it lately

``attempts`` lists the failed attempts the running workers remember
(``worker``, ``reason``, ``cause`` (:data:`~bkctl.wire.client.rereplication.CAUSES`;
None when not known), ``at``, ``retry_at``; a worker's memory goes with its
daemon; Java's workers tell none).

Lost bookies are those with a cookie that are not registered, and those our
auditor found named by ledgers at its last audit (with no cookie: said so);
with a Java auditor, which publishes nothing, the unregistered bookies named
by marks stand for the latter.  A bookie whose cookie is gone and that no
ledger names (decommissioned) is not lost.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from bkctl.wire.metadata.store import MetadataStore, UnderreplicatedMark, registered_bookies

from .status import AuditedBookie, AuditorStatus, WorkerStatus

__all__ = [
    "Attempt",
    "LedgerRepair",
    "LedgerRepairState",
    "LostBookie",
    "Snapshot",
    "ledger_state",
    "ledger_states",
    "lost_bookies",
    "read_snapshot",
    "state_text",
]


class LedgerRepairState(Enum):
    """Where a ledger's repair stands (the module's docstring says what each means)."""

    WAITING_DELAY = "waiting-delay"
    HELD_DISABLED = "held-disabled"
    NOT_MARKED = "not-marked"
    WAITING_WORKER = "waiting-worker"
    WAITING_GRACE = "waiting-grace"
    REREPLICATING = "re-replicating"
    HELD_FAILED = "held-failed"
    LOCKED = "locked"
    DONE = "done"


@dataclass(frozen=True, slots=True)
class LostBookie:
    """A lost bookie (:func:`lost_bookies`), a row of ``autorecovery status``'s ``lost_bookies``:
    its fields are the document's keys."""

    bookie_id: str
    #: it has a cookie
    cookie: bool
    #: the ledgers naming it at the auditor's last audit (None: not known)
    named_by: int | None
    #: the marked ledgers missing a copy there now
    under_replicated: int
    #: its ledgers were marked (``due`` past, or the delay not waited for)
    marked: bool
    #: when our auditor saw it go (ms)
    lost_since: int | None
    #: when ``lostBookieRecoveryDelay`` makes it due (ms)
    due: int | None
    #: seconds until ``due`` (0.0 once past)
    due_in: float | None
    #: why the delay was not waited for
    not_waited: str | None
    seen_by_auditor: bool
    #: one line
    why: str


@dataclass(frozen=True, slots=True)
class Attempt:
    """A failed attempt a running worker remembers (``attempts`` of :class:`LedgerRepair`)."""

    #: the worker's bookie id (or its daemon id)
    worker: str | None
    reason: str | None
    #: :data:`~bkctl.wire.client.replication_causes.CAUSES` (None: not known)
    cause: str | None
    #: when it failed, and when any worker may retry (ms)
    at: int | None
    retry_at: int | None
    #: False for a daemon of before the attempts were kept (its last failure): no ``cause`` key
    has_cause: bool = field(default=True, compare=False)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"worker": self.worker, "reason": self.reason, "at": self.at, "retry_at": self.retry_at}
        if self.has_cause:
            doc["cause"] = self.cause
        return doc


@dataclass(frozen=True, slots=True)
class LedgerRepair:
    """One ledger's state (:func:`ledger_state`): the document's keys are its fields (``note``
    only when set)."""

    ledger_id: int
    state: LedgerRepairState
    #: the worker's bookie id, or None
    worker: str | None
    #: the lock's content: ours hold the worker's bookie id, Java's the host name
    lock: str | None
    #: ms, or None
    since: int | None
    until: int | None
    attempts: tuple[Attempt, ...]
    #: of its mark (none: not marked)
    missing_replicas: tuple[str, ...]
    ctime: int | None
    #: why nothing moves it, when that needs saying
    note: str | None = None

    @property
    def last_attempt(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "ledger_id": self.ledger_id,
            "state": self.state.value,
            "worker": self.worker,
            "lock": self.lock,
            "since": self.since,
            "until": self.until,
            "attempts": [a.to_json() for a in self.attempts],
            "missing_replicas": list(self.missing_replicas),
            "ctime": self.ctime,
        }
        if self.note is not None:
            doc["note"] = self.note
        return doc


@dataclass
class Snapshot:
    """What ZooKeeper said at ``now_ms``."""

    now_ms: int
    enabled: bool = True
    delay: int | None = None
    #: the elected auditor's id (Java's or ours)
    auditor: str | None = None
    #: our auditor's status node, only while it is the elected auditor (else None)
    auditor_doc: AuditorStatus | None = None
    #: worker id -> its status node (our running daemons)
    workers: dict[str, WorkerStatus] = field(default_factory=dict)
    #: ledger id -> :class:`~bkctl.wire.metadata.store.UnderreplicatedMark`
    marks: dict[int, UnderreplicatedMark] = field(default_factory=dict)
    #: ledger id -> the lock's content (ours: the worker's bookie id; Java's: its host name)
    locks: dict[int, str | None] = field(default_factory=dict)
    #: ledger id -> when its lock was taken (ms, ZooKeeper's clock)
    lock_ctimes: dict[int, int] = field(default_factory=dict)
    registered: set[str] = field(default_factory=set)
    cookies: set[str] = field(default_factory=set)
    #: (key, lost bookies by id), computed once for the many ledgers asked about
    lost_cache: tuple[tuple[int, int], dict[str, LostBookie]] | None = field(default=None, repr=False, compare=False)


def read_snapshot(store: MetadataStore, now_ms: int, *, marks: bool = True) -> Snapshot:
    """Read a :class:`Snapshot` (``marks=False`` leaves the marks out: a caller that
    asks about a few ledgers reads theirs with :func:`ledger_states`)."""
    from .status import read_daemon_status

    daemons = read_daemon_status(store)
    auditor = store.auditor.current()
    doc = daemons.auditor
    if doc is not None and doc.auditor != auditor:
        doc = None  # a daemon that is no longer the auditor, or none of ours is
    return Snapshot(
        now_ms=now_ms,
        enabled=store.underreplication.is_enabled(),
        delay=store.underreplication.lost_bookie_recovery_delay(),
        auditor=auditor,
        auditor_doc=doc,
        workers=dict(daemons.workers),
        marks={m.ledger_id: m for m in store.underreplication.marks()} if marks else {},
        locks=dict(store.underreplication.locks()),
        lock_ctimes=dict(store.underreplication.lock_ctimes()),
        registered=registered_bookies(store.registration),
        cookies=set(store.registration.all_bookies()),
    )


# -- lost bookies ---------------------------------------------------------------------
def _audited(snap: Snapshot) -> dict[str, AuditedBookie]:
    return {} if snap.auditor_doc is None else {b.bookie_id: b for b in snap.auditor_doc.lost}


def lost_bookies(snap: Snapshot) -> list[LostBookie]:
    """The lost bookies, sorted (:class:`LostBookie`): ``under_replicated`` is what is left of
    ``named_by`` once its ledgers were marked, ``due`` past, and are being re-replicated."""
    audited = _audited(snap)
    in_marks = {b for m in snap.marks.values() for b in m.replicas}
    candidates = (snap.cookies | set(audited)) - snap.registered
    if snap.auditor_doc is None:  # no auditor of ours: the marks name what the auditor found
        candidates |= in_marks - snap.registered
    rows = []
    for bookie in sorted(candidates):
        d = audited.get(bookie)
        due = None if d is None else d.due
        not_waited = None if d is None else d.not_waited
        cookie = bookie in snap.cookies
        if not cookie:
            why = "named by ledgers, no cookie" if bookie in audited else "named by under-replicated ledgers, no cookie"
        elif snap.auditor_doc is not None and bookie not in audited:
            why = "has a cookie, not registered; no ledger names it"
        else:
            why = "has a cookie, not registered"
        marked = bool(not_waited) or (due is not None and due <= snap.now_ms)
        rows.append(
            LostBookie(
                bookie_id=bookie,
                cookie=cookie,
                named_by=None if d is None else d.named_by,
                under_replicated=sum(1 for m in snap.marks.values() if bookie in m.replicas),
                marked=marked,
                lost_since=None if d is None else d.lost_since,
                due=due,
                due_in=None if due is None else max(0.0, round((due - snap.now_ms) / 1000.0, 1)),
                not_waited=not_waited,
                seen_by_auditor=bookie in audited,
                why=why,
            )
        )
    return rows


# -- one ledger -----------------------------------------------------------------------
def _attempts(snap: Snapshot, ledger_id: int) -> tuple[Attempt, ...]:
    out = []
    for worker_id, doc in snap.workers.items():
        worker = doc.worker or worker_id
        for a in (doc.attempts or {}).get(ledger_id, ()):
            out.append(Attempt(worker, a.reason, a.cause, a.at, a.retry_at))
        failure = doc.last_failure  # a daemon of before the attempts were kept
        if doc.attempts is None and failure is not None and failure.ledger_id == ledger_id:
            out.append(Attempt(worker, failure.reason, None, failure.at, None, has_cause=False))
    return tuple(sorted(out, key=lambda a: a.at or 0))


def _holder(snap: Snapshot, ledger_id: int, lock: str | None) -> tuple[str | None, WorkerStatus | None]:
    """(worker id, its status node) of our worker holding the ledger's lock."""
    for worker_id, doc in snap.workers.items():
        if (
            ledger_id in doc.active
            or ledger_id in (doc.holds or {})
            or doc.current == ledger_id
            or ledger_id in doc.held
        ):
            return doc.worker or worker_id, doc
    for worker_id, doc in snap.workers.items():
        if lock is not None and lock in (worker_id, doc.worker):
            return doc.worker or worker_id, doc
    return (lock if _is_bookie_id(lock) else None), None


def _is_bookie_id(text: str | None) -> bool:
    """Our workers' locks hold their bookie id (host:port); Java's hold a host name."""
    from bkctl.wire.metadata.bookieid import bookie_id_problem

    return text is not None and ":" in text and bookie_id_problem(text) is None


def _named_lost(snap: Snapshot, bookies: Iterable[str]) -> list[LostBookie]:
    key = (snap.now_ms, len(snap.marks))  # asked for many ledgers of one snapshot: computed once
    cached = snap.lost_cache
    if cached is None or cached[0] != key:
        cached = snap.lost_cache = (key, {row.bookie_id: row for row in lost_bookies(snap)})
    lost = cached[1]
    return [lost[b] for b in bookies if b in lost]


def ledger_state(snap: Snapshot, ledger_id: int, bookies: Iterable[str] = ()) -> LedgerRepair:
    """One ledger's state (:class:`LedgerRepair`).  ``bookies`` (those its metadata names) let
    an unmarked ledger say what it waits for."""
    mark = snap.marks.get(ledger_id)
    lock = snap.locks.get(ledger_id)
    attempts = _attempts(snap, ledger_id)

    def row(
        state: LedgerRepairState,
        worker: str | None = None,
        since: int | None = None,
        until: int | None = None,
        note: str | None = None,
    ) -> LedgerRepair:
        replicas = tuple(mark.replicas) if mark else ()
        ctime = mark.ctime if mark else None
        return LedgerRepair(ledger_id, state, worker, lock, since, until, attempts, replicas, ctime, note)

    if ledger_id in snap.locks:
        worker, doc = _holder(snap, ledger_id, lock)
        if doc is None:
            return row(LedgerRepairState.LOCKED, worker, since=snap.lock_ctimes.get(ledger_id))
        if ledger_id in doc.active:
            return row(LedgerRepairState.REREPLICATING, worker, since=doc.active[ledger_id])
        hold = (doc.holds or {}).get(ledger_id)
        if hold is not None:
            state = LedgerRepairState.WAITING_GRACE if hold.why == "grace" else LedgerRepairState.HELD_FAILED
            return row(state, worker, since=hold.since, until=hold.until)
        if doc.holds is None and ledger_id in doc.held and attempts:
            return row(LedgerRepairState.HELD_FAILED, worker)  # a daemon of before holds were kept
        # just taken: its status node says so a moment later
        return row(LedgerRepairState.REREPLICATING, worker, since=snap.lock_ctimes.get(ledger_id))
    if mark is not None:
        note = "no worker of ours is running (Java's keep no status)" if snap.enabled and not snap.workers else None
        return row(LedgerRepairState.WAITING_WORKER if snap.enabled else LedgerRepairState.HELD_DISABLED, note=note)
    done: LedgerRepair | None = None
    for doc in snap.workers.values():
        for d in doc.done:
            if d.ledger_id == ledger_id:
                done = row(LedgerRepairState.DONE, doc.worker, since=d.at)
    if done is not None:
        return done
    lost = _named_lost(snap, bookies)
    if lost and not snap.enabled:
        return row(LedgerRepairState.HELD_DISABLED)
    dues = [b.due for b in lost if b.due is not None and b.due > snap.now_ms]
    if dues:
        return row(LedgerRepairState.WAITING_DELAY, until=min(dues))
    if snap.auditor is None:
        note = "no auditor is elected"
    elif snap.auditor_doc is None:
        note = (
            f"the auditor {snap.auditor} keeps no status (Java's?): it marks it once "
            "lostBookieRecoveryDelay has passed since it saw the bookie go"
        )
    else:
        note = f"the auditor {snap.auditor} marks it at its next audit"
    return row(LedgerRepairState.NOT_MARKED, note=note)


#: up to how many ledgers :func:`ledger_states` reads the marks of one by one
_ONE_BY_ONE = 50


def ledger_states(
    store: MetadataStore,
    ledger_ids: Iterable[int],
    now_ms: int,
    bookies_of: Callable[[int], Collection[str]] | None = None,
) -> dict[int, LedgerRepair]:
    """:func:`ledger_state` of each of ``ledger_ids`` (their marks only are read);
    ``bookies_of(ledger_id)`` names the bookies its metadata names."""
    ids = list(ledger_ids)
    snap = read_snapshot(store, now_ms, marks=False)
    if len(ids) > _ONE_BY_ONE:  # many: every mark in one pipelined walk, not a read each
        wanted = set(ids)
        snap.marks = {m.ledger_id: m for m in store.underreplication.marks() if m.ledger_id in wanted}
    else:
        for lid in ids:
            mark = store.underreplication.get(lid)
            if mark is not None:
                snap.marks[lid] = mark
    return {lid: ledger_state(snap, lid, bookies_of(lid) if bookies_of else ()) for lid in ids}


def _seconds(ms: int | None, now_ms: int) -> str:
    if ms is None:
        return "?"
    return f"{max(0.0, abs(ms - now_ms) / 1000.0):.0f} s"


def state_text(row: LedgerRepair, now_ms: int) -> str:
    """One line for people: ``held after a failed attempt by b1:3181: <reason>; retried in 240 s``."""
    state, worker, last = row.state, row.worker, row.last_attempt
    tries = f" ({len(row.attempts)} failed attempts)" if len(row.attempts) > 1 else ""
    if state is LedgerRepairState.WAITING_DELAY:
        return f"waiting for lostBookieRecoveryDelay: marked in {_seconds(row.until, now_ms)}"
    if state is LedgerRepairState.HELD_DISABLED:
        return "held: autorecovery is disabled" + ("" if row.missing_replicas else " (not marked)")
    if state is LedgerRepairState.NOT_MARKED:
        return "not marked yet" + (f": {row.note}" if row.note else "")
    if state is LedgerRepairState.WAITING_WORKER:
        text = "waiting for a worker" + (f" ({row.note})" if row.note else "")
        return text + (f"; last failed attempt by {last.worker}: {last.reason}{tries}" if last else "")
    if state is LedgerRepairState.WAITING_GRACE:
        return (
            f"open ledger: {worker} waits for its writer before fencing it "
            f"(openLedgerRereplicationGracePeriod), {_seconds(row.until, now_ms)} left"
        )
    if state is LedgerRepairState.REREPLICATING:
        since = f" for {_seconds(row.since, now_ms)}" if row.since else ""
        return f"being re-replicated by {worker}{since}"
    if state is LedgerRepairState.HELD_FAILED:
        reason = f": {last.reason}" if last else ""
        retry = f"; retried in {_seconds(row.until, now_ms)}" if row.until else ""
        return f"held after a failed attempt by {worker}{reason}{retry}{tries}"
    if state is LedgerRepairState.LOCKED:
        since = f" for {_seconds(row.since, now_ms)}" if row.since else ""
        return (
            f"locked{since} by a worker that keeps no status (Java's? its lock names "
            f"{row.lock or '?'}): being re-replicated, waiting for an open ledger's writer, "
            "or held after a failure"
        )
    return "done" + (f" by {worker}" if worker else "")
