"""The one executor of ``bkctl rebalance`` and ``bkctl drain``: a run's life from its start to
its end, whichever planner made its moves.

* **One run at a time per cluster.**  A run records itself (:class:`RunRecord`: what it is,
  who runs it -- host and pid --, since when, its throttle) in an ephemeral node beside the
  cluster root (``<root>-bkctl-running``): it goes with the run's ZooKeeper session, so a run
  killed leaves none once its session expires; a record whose process is gone from this host
  is removed at once (the liveness rule: its host is ours and its pid is not running).  A
  second run is refused (:class:`~bkctl.wire.errors.RunInProgress`) naming the first.  Two
  runs at once fought over the kept plan: the second took it over at full speed, ignoring the
  first's rate, and the first copied its ledgers again and threw the copies away.
* **Cancel from elsewhere.**  :func:`request_cancel` marks the record; the run looks at it
  (:class:`Run`, every second) and starts no further move.  The moves under way finish or
  are abandoned whole (:mod:`.mover`: a move is one metadata write after its copies), so a
  cancelled run leaves no half move.
* **The kept plan** (:mod:`.saved`): a balance keeps its plan from just before its first
  move until it ends, so that a rerun after a kill goes on with it (:func:`kept_plan`).
* **The moves**, carried out by :func:`carry_out` at most ``concurrency`` at a time, at most
  ``per_bookie`` into any one target, and ``rate`` bytes per second written to the targets
  (:class:`~bkctl.wire.client.throttle.RateLimiter`).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from bkctl.wire.errors import RunInProgress
from bkctl.wire.metadata.registration_state import Registrations
from bkctl.wire.metadata.store import MetadataStore

from .mover import MoveOutcome, MoveResult
from .plan import LedgerMove, Plan, Resumed
from .saved import SavedPlan

if TYPE_CHECKING:
    from bkctl.wire.client.bookkeeper import BookKeeperClient

__all__ = [
    "CancelAsked",
    "MoveTally",
    "Run",
    "RunRecord",
    "Throttle",
    "begin",
    "carry_out",
    "forget_plan",
    "keep_plan",
    "kept_plan",
    "process_gone",
    "request_cancel",
    "wait_ended",
    "writable_bookies",
]


@dataclass(frozen=True)
class Throttle:
    """How fast a run goes: moves at once, moves at once into one bookie, bytes per second
    written to the targets (0: no limit)."""

    concurrency: int = 16
    per_bookie: int = 8
    rate: float = 0.0


@dataclass(frozen=True)
class RunRecord:
    """The running run, as recorded beside the cluster: ``kind`` (``rebalance``, ``drain`` or
    ``decommission``), the drained or decommissioned ``bookie``, its process (``host``, ``pid``), since when (seconds since the
    epoch), its throttle, who asked it to stop (None: nobody), and its ZooKeeper session's
    timeout in seconds (None: not known): a record left by a process killed on another host
    goes when that session expires, at most that long after the process's last word."""

    kind: str
    host: str
    pid: int
    since: float
    throttle: Throttle
    bookie: str | None = None
    cancel_by: str | None = None
    session_timeout: float | None = None

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> RunRecord | None:
        """The record, or None when it does not read (another version's, damaged)."""
        try:
            doc = json.loads(data)
            return cls(
                str(doc["kind"]),
                str(doc["host"]),
                int(doc["pid"]),
                float(doc["since"]),
                Throttle(**doc["throttle"]),
                doc.get("bookie"),
                doc.get("cancel_by"),
                None if doc.get("session_timeout") is None else float(doc["session_timeout"]),
            )
        except (ValueError, KeyError, TypeError):
            return None

    def same_run(self, other: RunRecord) -> bool:
        return (self.host, self.pid, self.since) == (other.host, other.pid, other.since)

    @classmethod
    def mine(
        cls,
        kind: str,
        throttle: Throttle,
        bookie: str | None = None,
        *,
        now: float | None = None,
        session_timeout: float | None = None,
    ) -> RunRecord:
        """This process's record."""
        when = time.time() if now is None else now
        return cls(kind, socket.gethostname(), os.getpid(), when, throttle, bookie, None, session_timeout)

    def elsewhere(self) -> bool:
        """Whether it runs on another host (its process's liveness cannot be seen from here)."""
        return self.host != socket.gethostname()


def process_gone(record: RunRecord) -> bool:
    """The liveness rule: whether ``record``'s process is known gone -- it ran on this host and
    its pid runs no more.  A run on another host is taken as alive until its session expires."""
    if record.host != socket.gethostname():
        return False
    try:
        os.kill(record.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class Run:
    """This process's run, recorded while it lasts (:func:`begin`): :meth:`cancelled` says
    whether another terminal asked it to stop (a thread looks every ``poll`` seconds), or its
    record went (its session lost: another run could start, so this one stops too); :meth:`end`
    removes the record."""

    def __init__(self, store: MetadataStore, record: RunRecord, poll: float = 1.0):
        self.store = store
        self.record = record
        self.poll = poll
        #: why it stops (None: it goes on)
        self.stop_reason: str | None = None
        self._ended = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="bkctl-run-watch", daemon=True)
        self._thread.start()

    def cancelled(self) -> bool:
        return self.stop_reason is not None

    def look(self) -> None:
        """Read the record once (the watch does, every ``poll`` seconds)."""
        try:
            found = self.store.rebalance.running()
        except Exception:  # noqa: BLE001 - ZooKeeper away for a moment: look again later
            return
        if found is None:
            self.stop_reason = "its running record went (its ZooKeeper session was lost)"
            return
        now = RunRecord.decode(found[0])
        if now is None or not now.same_run(self.record):
            self.stop_reason = "another run took its place (its ZooKeeper session was lost)"
        elif now.cancel_by is not None:
            self.stop_reason = f"cancelled by {now.cancel_by}"

    def _watch(self) -> None:
        while not self._ended.wait(self.poll):
            self.look()
            if self.stop_reason is not None:
                return

    def end(self) -> None:
        self._ended.set()
        try:
            self.store.rebalance.drop_running()
        except Exception:  # noqa: BLE001 - ZooKeeper gone: the record goes with the session
            pass

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.end()


def begin(
    store: MetadataStore, record: RunRecord, *, poll: float = 1.0, gone: Callable[[RunRecord], bool] = process_gone
) -> Run:
    """Record ``record``'s run as the one running (:class:`Run`); a run going already is
    :class:`~bkctl.wire.errors.RunInProgress` -- unless its process is ``gone`` (the liveness
    rule), its record then removed."""
    for _ in range(3):
        other = store.rebalance.claim(record.encode())
        if other is None:
            return Run(store, record, poll)
        data, version = other
        theirs = RunRecord.decode(data)
        if theirs is not None and gone(theirs):
            store.rebalance.drop_running(version)
            continue
        raise RunInProgress("a rebalance or drain is running", theirs)
    raise RunInProgress("a rebalance or drain is running", None)


@dataclass(frozen=True)
class CancelAsked:
    """What :func:`request_cancel` found: the run (None: none runs), and whether its process
    was gone already (its record then removed)."""

    record: RunRecord | None
    was_gone: bool = False


def request_cancel(store: MetadataStore, by: str, *, gone: Callable[[RunRecord], bool] = process_gone) -> CancelAsked:
    """Ask the running run to stop (it starts no further move; those under way finish whole)."""
    for _ in range(10):
        found = store.rebalance.running()
        if found is None:
            return CancelAsked(None)
        data, version = found
        record = RunRecord.decode(data)
        if record is None:
            store.rebalance.drop_running(version)
            return CancelAsked(None, True)
        if gone(record):
            store.rebalance.drop_running(version)
            return CancelAsked(record, True)
        if store.rebalance.update_running(replace(record, cancel_by=by).encode(), version):
            return CancelAsked(record)
    raise RunInProgress("the running record keeps changing; try again", None)


def wait_ended(
    store: MetadataStore,
    record: RunRecord,
    timeout: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Any] = time.sleep,
) -> bool:
    """Whether ``record``'s run ended (its record gone) within ``timeout`` seconds."""
    deadline = clock() + timeout
    while True:
        found = store.rebalance.running()
        now = None if found is None else RunRecord.decode(found[0])
        if now is None or not now.same_run(record):
            return True
        if clock() >= deadline:
            return False
        sleep(0.2)


# ------------------------------------------------------------------------- the moves


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
    #: entries with no good copy anywhere, recorded lost by the moves that met them
    lost_entries: int = 0
    #: each move not carried out
    left: list[MoveResult] = field(default_factory=list)
    #: why the run stopped before its last move (a cancel), None when it did not
    stopped: str | None = None

    def add(self, result: MoveResult) -> None:
        setattr(self, result.outcome.value, getattr(self, result.outcome.value) + 1)
        self.entries += result.entries_copied
        self.lost_entries += result.lost_entries
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
        self.lost_entries += other.lost_entries
        self.left = other.left
        self.stopped = other.stopped or self.stopped

    def as_json(self) -> dict[str, Any]:
        return {
            "moved": self.moved,
            "skipped": self.skipped,
            "abandoned": self.abandoned,
            "failed": self.failed,
            "bytes": self.nbytes,
            "entries_copied": self.entries,
            "lost_entries": self.lost_entries,
            "stopped": self.stopped,
        }


def carry_out(
    client: BookKeeperClient,
    moves: list[LedgerMove],
    throttle: Throttle,
    *,
    on_result: Callable[[MoveResult], Any] | None = None,
    on_bytes: Callable[[int], Any] | None = None,
    run: Run | None = None,
    read_sources: bool = True,
    past_marks: bool = False,
) -> MoveTally:
    """Every move (blocking: in the reactor's thread, waited for here) at ``throttle``;
    ``on_result`` and ``on_bytes`` hear each result and the bytes copied (from the reactor
    thread).  With ``run``, no move starts once it is cancelled.  ``read_sources``: False
    when the sources are stopped, ``past_marks`` True to move marked ledgers too (a
    decommission: :func:`~.mover.move_ledger`)."""
    from bkctl.wire.client.blocking import run_in_reactor
    from bkctl.wire.client.throttle import RateLimiter

    from .mover import move_ledgers

    tally = MoveTally()
    if not moves:
        return tally
    limiter = None
    if throttle.rate:
        from twisted.internet import reactor

        limiter = RateLimiter(throttle.rate, reactor, cork=client.pool.cork)

    def heard(result: MoveResult) -> None:
        tally.add(result)
        if on_result is not None:
            on_result(result)

    run_in_reactor(
        move_ledgers,
        client,
        moves,
        concurrency=throttle.concurrency,
        per_bookie=throttle.per_bookie,
        on_result=heard,
        on_bytes=on_bytes,
        throttle=limiter,
        stopping=None if run is None else run.cancelled,
        read_sources=read_sources,
        past_marks=past_marks,
        timeout=None,
    )
    if run is not None and run.cancelled():
        tally.stopped = run.stop_reason
    return tally


def writable_bookies(store: MetadataStore) -> list[str]:
    """The bookies a move may target: registered writable, not read-only."""
    return sorted(Registrations.read(store.registration).taking_writes)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def kept_plan(store: MetadataStore, *, tolerance: float, max_moves: int | None) -> Plan | None:
    """The rest of the kept plan of a rebalance that did not end (its moves the ledgers do not
    show done, and whose targets are still writable), or None when none is kept;
    :class:`~bkctl.wire.errors.SavedPlanError` for one that does not read."""
    data = store.rebalance.read()
    if data is None:
        return None
    kept = SavedPlan.decode(data)
    old = kept.plan
    left = kept.left(store.ledgers.read_many([m.ledger_id for m in old.moves]))
    writable = set(writable_bookies(store))
    gone = sorted({t for m in left for _s, t in m.pairs if t not in writable})
    if gone:  # drained, turned read-only or stopped since: no copy goes there
        left = [m for m in left if all(t in writable for _s, t in m.pairs)]
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(kept.planned_at))
    notes = [
        f"going on with the rebalance planned at {when}, which did not end (killed or interrupted): "
        f"{len(left)} of its {_plural(len(old.moves), 'move')} left; --replan forgets it and plans again"
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


def keep_plan(store: MetadataStore, plan: Plan, planned_at: float) -> None:
    """Keep ``plan`` while its moves are carried out (a resumed plan is kept already)."""
    if plan.resumed is None:
        store.rebalance.write(SavedPlan(plan, planned_at).encode())


def forget_plan(store: MetadataStore) -> None:
    """The run ended (its moves done, or it was cancelled): a rerun plans from what the cluster holds."""
    store.rebalance.clear()
