"""``bkctl top``'s data: one snapshot of a cluster's bookies and its autorecovery, no terminal.

A :class:`TopCollector` reads, each time it is asked: the registrations
(writable, read-only, down: a cookie and no registration) and the rack
map; each bookie's HTTP admin at once (``info``, ``gc``, ``gc_details``,
``/metrics``) with a short timeout, so a bookie that stopped answering
delays a refresh by that timeout only; and what autorecovery is doing,
from :func:`~bkctl.ops.autorecovery.autorecovery_report` -- the model
``bkctl autorecovery status`` shows (read every ``repair_every`` seconds:
it walks the marks).  Rates and latencies are the difference between this
scrape of a bookie's metrics and the one before (:mod:`bkctl.ops.prometheus`).

Each bookie is a :class:`TopRow` (``--once --json`` prints its document: its parts' keys beside its
own); sorting it by a column and filtering are here too, so the live view only draws.
"""

from __future__ import annotations

import operator
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, NamedTuple

from .bookie_reads import GC, GC_DETAILS, INFO, METRICS, BookieReading, read_bookies
from .bookies import BookieRow, Registration
from .prometheus import Rates, Scrape, rates
from .results import inlined, json_key

if TYPE_CHECKING:
    from bkctl.wire.metadata.store import MetadataStore

    from .autorecovery import AutorecoveryReport, RepairRow


class TopState(Enum):
    """A bookie as the view shows it: its registration's state, or ``unreachable`` (registered,
    its HTTP admin silent) or ``lost`` (the auditor counts it lost); in order of trouble."""

    LOST = "lost"
    DOWN = "down"
    UNREACHABLE = "unreachable"
    READ_ONLY = "read-only"
    WRITABLE = "writable"


#: the states, trouble first (the ``state`` column's order)
STATE_ORDER = {state: i for i, state in enumerate(TopState)}


class SortColumn(NamedTuple):
    """A column the view sorts by: the row's attribute (a dotted path into its parts) and
    whether the largest comes first."""

    attribute: str
    largest_first: bool


#: sort keys: name -> its column
SORTS = {
    "bookie": SortColumn("bookie_id", False),
    "state": SortColumn("state", False),
    "rack": SortColumn("rack", False),
    "adds": SortColumn("rates.add_rate", True),
    "add-latency": SortColumn("rates.add_p99_ms", True),
    "reads": SortColumn("rates.read_rate", True),
    "disk": SortColumn("disk.used_percent", True),
    "reclaimable": SortColumn("disk.reclaimable_bytes", True),
}


@dataclass(frozen=True, slots=True)
class TopDisk:
    """A bookie's disk as its HTTP admin says (None: not said): the filesystem, and its entry logs
    (bookied's ``gc_details``)."""

    used_bytes: int | None = None
    total_bytes: int | None = None
    used_percent: float | None = None
    entry_logs: int | None = None
    entry_log_bytes: int | None = None
    reclaimable_bytes: int | None = None
    lowest_live_ratio: float | None = None


@dataclass(frozen=True, slots=True)
class TopGc:
    """A bookie's garbage collector as its HTTP admin says (None: not said)."""

    gc_running: bool | None = None
    compacting: str | None = None
    gc_runs: int | None = None
    forced_gc: bool | None = None
    last_compaction: dict[str, Any] | None = None  #: the bookie's own document of it
    next_gc_ms: int | None = None
    reclaimed_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class TopRow:
    """One bookie of the view: who and where it is, what did not answer (``unread``: endpoint ->
    why), and its parts -- disk, gc, rates -- whose keys the document has beside these."""

    bookie_id: str
    state: TopState
    registration: str  #: its registration's state, or "not registered"
    rack: str | None
    http: str | None
    kind: str | None  #: bookied, java, or None (no answer)
    unread: dict[str, str]
    read_only_reason: str | None
    metrics: str | None  #: whose metric names its /metrics has (None: none read)
    disk: TopDisk = inlined()
    gc: TopGc = inlined()
    rates: Rates = inlined()


class ZooKeeperState(Enum):
    """Whether ZooKeeper answers the view's reads."""

    OK = "ok"
    UNREACHABLE = "unreachable"


@dataclass(frozen=True, slots=True)
class TopZooKeeper:
    """ZooKeeper as the view sees it: ``since`` (epoch ms) and ``error`` while it does not answer,
    ``read_at``: when the registrations and the report shown were read, ``latency_ms``: its last
    answer's."""

    state: ZooKeeperState
    since: int | None
    error: str | None
    read_at: int | None
    latency_ms: float | None


@dataclass(frozen=True, slots=True)
class TopCluster:
    """The bookies counted by state, and what autorecovery says (None: its report not read)."""

    bookies: int
    lost: int
    down: int
    unreachable: int
    writable: int
    under_replicated: int | None
    auditor: str | None
    autorecovery_enabled: bool | None
    read_only: int = json_key("read-only")  # last: written as a default to the type checker

    def count(self, state: TopState) -> int:
        """The bookies in ``state``."""
        return {
            TopState.LOST: self.lost,
            TopState.DOWN: self.down,
            TopState.UNREACHABLE: self.unreachable,
            TopState.READ_ONLY: self.read_only,
            TopState.WRITABLE: self.writable,
        }[state]


@dataclass(frozen=True, slots=True)
class TopSnapshot:
    """The cluster at ``time`` (epoch ms): its bookies, their counts, autorecovery's status report
    (``autorecovery``, the model ``autorecovery status`` shows; None, then ``autorecovery_error``
    says why) and ZooKeeper's state."""

    time: int
    cluster: TopCluster
    bookies: list[TopRow]
    autorecovery: AutorecoveryReport | None
    autorecovery_error: str | None
    zookeeper: TopZooKeeper


class _Pending:
    """One read of ZooKeeper in a daemon thread of its own: a ZooKeeper that stopped answering
    holds that thread, never a refresh of the view nor the process's exit (a pool's threads are
    joined at exit)."""

    def __init__(self, fn: Callable[[], Any], started: float) -> None:
        from concurrent.futures import Future

        self.started = started
        self.future: Future = Future()

        def run() -> None:
            try:
                self.future.set_result(fn())
            except BaseException as e:  # noqa: BLE001 - handed to whoever waits
                self.future.set_exception(e)

        threading.Thread(target=run, name="bkctl-top-zk", daemon=True).start()


class TopCollector:
    """Snapshots of one cluster, each compared with the one before (rates).

    ``store`` is the metadata store, or a function that connects one.  What
    ZooKeeper says (registrations, racks, the autorecovery report) is read in
    threads of their own, waited for at most ``zk_wait`` seconds: a ZooKeeper
    that stalls or dies leaves the last answers in place, named as old, while
    the bookies' HTTP admins (which need no ZooKeeper) are still read.
    ZooKeeper is called unreachable once a read has gone unanswered for
    ``zk_grace`` seconds, or failed as a ZooKeeper that is down fails."""

    def __init__(
        self,
        store: MetadataStore | Callable[[], MetadataStore],
        timeout: float = 0.8,
        repair_every: float = 3.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        zk_wait: float = 1.0,
        zk_grace: float = 2.0,
    ):
        self._connect: Callable[[], MetadataStore] = store if callable(store) else (lambda: store)
        self.store: MetadataStore | None = None if callable(store) else store
        self.timeout = timeout
        self.repair_every = repair_every
        self.zk_wait = zk_wait
        self.zk_grace = zk_grace
        self.clock = clock
        self.wall = wall
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="bkctl-top")
        self._scrapes: dict[str, tuple[float, Scrape]] = {}
        self._addresses: dict[str, str] = {}
        self._repair: tuple[float, AutorecoveryReport | None, str | None] | None = None
        self._zk_read: _Pending | None = None  # the registrations' read under way
        self._report_read: _Pending | None = None  # the autorecovery report's
        self._known: tuple[int, list[BookieRow], dict[str, str]] | None = None  # (wall ms, registrations, racks)
        self._zk_down: tuple[int, str] | None = None  # (wall ms since, why) while ZooKeeper does not answer
        self._zk_latency_ms: float | None = None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def snapshot(self) -> TopSnapshot:
        """The cluster now."""
        now_ms = int(self.wall() * 1000)
        fresh = self._read_zookeeper(now_ms)
        registered, racks = (self._known[1], self._known[2]) if self._known else ([], {})
        for row in registered if fresh else ():  # the registration may name a new HTTP port after a restart
            if row.state is Registration.DOWN:
                self._addresses.pop(row.bookie_id, None)
        readings = self._read_bookies(registered, fresh)
        for reading in readings:
            if reading.http is not None and "http" not in reading.unread:
                self._addresses[reading.bookie_id] = reading.http
            if _unreachable(reading) and fresh:
                self._addresses.pop(reading.bookie_id, None)  # ask the registration again next time
        report, error = (
            self._repair_report(now_ms)
            if self.store is not None
            else (None, self._zk_down[1] if self._zk_down else None)
        )
        # lost as the auditor counts it (named by ledgers); a cookie without a registration alone is "down"
        lost = {
            b.bookie_id
            for b in (report.lost_bookies if report is not None else [])
            if b.seen_by_auditor or not b.cookie
        }
        rows = [self._row(r, racks.get(r.bookie_id), r.bookie_id in lost) for r in readings]
        for bookie_id in sorted(lost - {r.bookie_id for r in rows}):
            rows.append(_lost_row(bookie_id, racks.get(bookie_id)))
        counts = {state: sum(1 for r in rows if r.state is state) for state in TopState}
        cluster = TopCluster(
            bookies=len(rows),
            lost=counts[TopState.LOST],
            down=counts[TopState.DOWN],
            unreachable=counts[TopState.UNREACHABLE],
            read_only=counts[TopState.READ_ONLY],
            writable=counts[TopState.WRITABLE],
            under_replicated=None if report is None else report.underreplicated,
            auditor=None if report is None else report.auditor,
            autorecovery_enabled=None if report is None else report.enabled,
        )
        down = self._zk_down
        zookeeper = TopZooKeeper(
            state=ZooKeeperState.UNREACHABLE if down else ZooKeeperState.OK,
            since=down[0] if down else None,
            error=down[1] if down else None,
            read_at=self._known[0] if self._known else None,
            latency_ms=None if down else self._zk_latency_ms,
        )
        return TopSnapshot(now_ms, cluster, rows, report, error, zookeeper)

    def _read_zookeeper(self, now_ms: int) -> bool:
        """Read the registrations and racks, waiting ``zk_wait`` at most; True if they are fresh.
        A read that does not answer in time is left running and waited for again next time."""
        from concurrent.futures import TimeoutError as FutureTimeout

        if self._zk_read is None:
            self._zk_read = _Pending(self._registrations, self.clock())
        pending = self._zk_read
        try:
            registered, racks = pending.future.result(timeout=self.zk_wait)
        except FutureTimeout:
            waited = self.clock() - pending.started
            if self._zk_down is None and waited >= self.zk_grace:
                self._zk_down = (now_ms - int(waited * 1000), f"no answer for {waited:.0f} s")
            elif self._zk_down is not None and self._zk_down[1].startswith("no answer"):
                self._zk_down = (self._zk_down[0], f"no answer for {waited:.0f} s")
            return False
        except Exception as e:
            self._zk_read = None
            if not _unreachable_error(e):
                raise  # not ZooKeeper's silence (no cluster at the root, a bad ACL): the command says it
            self._zk_down = (self._zk_down[0] if self._zk_down else now_ms, str(e) or type(e).__name__)
            return False
        self._zk_read = None
        self._zk_latency_ms = round((self.clock() - pending.started) * 1000, 1)
        self._zk_down = None
        self._known = (now_ms, registered, racks)
        return True

    def _registrations(self) -> tuple[list[BookieRow], dict[str, str]]:
        from bkctl.wire.metadata.racks import racks_by_bookie

        from .bookies import list_bookies

        if self.store is None:
            self.store = self._connect()
        registered = list_bookies(self.store, "all")
        try:
            racks = racks_by_bookie(self.store.racks.read()[0])
        except Exception:  # noqa: BLE001 - a rack map that does not parse is no reason to stop the view
            racks = {}
        return registered, racks

    def _read_bookies(self, registered: list[BookieRow], fresh: bool) -> list[BookieReading]:
        """Each bookie's HTTP admin; while ZooKeeper does not answer, only those whose address is
        known (asking ZooKeeper for the others would hold a thread of the pool)."""
        if fresh:
            return read_bookies(
                self.store, registered, (INFO, GC, GC_DETAILS, METRICS), self.timeout, self._addresses, self._pool
            )
        known = [r for r in registered if r.state is Registration.DOWN or r.bookie_id in self._addresses]
        readings = (
            {
                r.bookie_id: r
                for r in read_bookies(
                    self.store, known, (INFO, GC, GC_DETAILS, METRICS), self.timeout, self._addresses, self._pool
                )
            }
            if known
            else {}
        )
        return [
            readings.get(r.bookie_id)
            or BookieReading(
                r.bookie_id, r.state, unread={"http": "its HTTP address is in ZooKeeper, which is not answering"}
            )
            for r in registered
        ]

    def _repair_report(self, now_ms: int) -> tuple[AutorecoveryReport | None, str | None]:
        from concurrent.futures import TimeoutError as FutureTimeout

        from .autorecovery import autorecovery_report

        at = self.clock()
        if self._report_read is None and (self._repair is None or at - self._repair[0] >= self.repair_every):
            store = self.store
            assert store is not None, "snapshot() asks for the report once connected"
            self._report_read = _Pending(lambda: autorecovery_report(store, now_ms), at)
        reading = self._report_read
        if reading is not None:
            try:
                report = reading.future.result(timeout=self.zk_wait)
                self._repair = (reading.started, report, None)
                self._report_read = None
            except FutureTimeout:
                pass  # the last report stays, as old as the header says
            except Exception as e:  # noqa: BLE001 - shown in the view, which goes on
                self._repair = (reading.started, None, str(e) or type(e).__name__)
                self._report_read = None
        if self._repair is None:
            return None, "not read yet: ZooKeeper is not answering"
        return self._repair[1], self._repair[2]

    def _row(self, reading: BookieReading, rack: str | None, lost: bool) -> TopRow:
        state = TopState(reading.state.value)
        if state is not TopState.DOWN and _unreachable(reading):
            state = TopState.UNREACHABLE
        if lost and state is TopState.DOWN:
            state = TopState.LOST
        reasons = reading.read_only_reasons
        before = self._scrapes.get(reading.bookie_id)
        if reading.metrics is not None:
            scrape = Scrape(reading.metrics)
            seconds = reading.read_at - before[0] if before else 0.0
            measured = rates(before[1] if before else None, scrape, seconds)
            metrics: str | None = scrape.naming or "unknown names"
            self._scrapes[reading.bookie_id] = (reading.read_at, scrape)
        else:
            measured, metrics = Rates(), None
            self._scrapes.pop(reading.bookie_id, None)
        return TopRow(
            bookie_id=reading.bookie_id,
            state=state,
            registration=reading.state.value,
            rack=rack,
            http=reading.http,
            kind=reading.kind,
            unread=dict(reading.unread),
            read_only_reason="; ".join(reasons.values()) if reasons else None,
            metrics=metrics,
            disk=_disk(reading),
            gc=_gc(reading),
            rates=measured,
        )


def _unreachable_error(exc: BaseException) -> bool:
    """A failure that means ZooKeeper does not answer (rather than a cluster or a request that is wrong)."""
    from bkctl.wire.errors import Unreachable

    return isinstance(exc, (Unreachable, OSError, TimeoutError))  # the store turns kazoo's into Unreachable


def _unreachable(reading: BookieReading) -> bool:
    """Registered, but its HTTP admin did not answer at all."""
    return reading.kind is None and reading.state is not Registration.DOWN


def _lost_row(bookie_id: str, rack: str | None) -> TopRow:
    """A bookie the auditor counts lost that has no cookie any more (decommissioned, or a stray id)."""
    nothing = BookieReading(bookie_id, Registration.DOWN)
    return TopRow(
        bookie_id=bookie_id,
        state=TopState.LOST,
        registration="not registered",
        rack=rack,
        http=None,
        kind=None,
        unread={"http": "not registered"},
        read_only_reason=None,
        metrics=None,
        disk=_disk(nothing),
        gc=_gc(nothing),
        rates=Rates(),
    )


def _disk(reading: BookieReading) -> TopDisk:
    used, total = reading.used_bytes, reading.total_bytes
    logs = reading.entry_logs
    if logs is None:
        return TopDisk(used, total, _percent(used, total))
    return TopDisk(
        used,
        total,
        _percent(used, total),
        entry_logs=len(logs),
        entry_log_bytes=sum(int(x.get("sizeBytes", 0)) for x in logs),
        reclaimable_bytes=sum(max(0, int(x.get("sizeBytes", 0)) - int(x.get("liveBytes", 0))) for x in logs),
        lowest_live_ratio=min((float(x.get("liveRatio", 1.0)) for x in logs), default=None),
    )


def _percent(used: int | None, total: int | None) -> float | None:
    return round(used * 100.0 / total, 1) if used is not None and total else None


def _gc(reading: BookieReading) -> TopGc:
    gc, details = reading.gc or {}, reading.gc_state
    running = gc.get("gcRunning", details.get("gcRunning"))
    compacting = gc.get("compacting") or (
        "major" if details.get("majorCompacting") else "minor" if details.get("minorCompacting") else None
    )
    last = gc.get("lastCompaction") if isinstance(gc.get("lastCompaction"), dict) else None
    return TopGc(
        gc_running=running,
        compacting=compacting,
        gc_runs=gc.get("gcRuns"),
        forced_gc=str(gc.get("is_in_force_gc", "")).lower() == "true" if gc else None,
        last_compaction=last,
        next_gc_ms=gc.get("nextGcTime"),
        reclaimed_bytes=(gc.get("reclaimedSpaceViaDeletes") or 0) + (gc.get("reclaimedSpaceViaCompaction") or 0)
        if "reclaimedSpaceViaDeletes" in gc
        else None,
    )


# ---------------------------------------------------------------- what the view shows


def sort_rows(rows: list[TopRow], key: str, reverse: bool = False) -> list[TopRow]:
    """Rows by ``key`` (a :data:`SORTS` name); unknown values last, ties by bookie id."""
    column = SORTS[key]
    descending = column.largest_first != reverse
    read = operator.attrgetter(column.attribute)

    def value(row: TopRow) -> Any:
        v = read(row)
        return STATE_ORDER[v] if isinstance(v, TopState) else v

    known = [r for r in rows if value(r) is not None]
    unknown = [r for r in rows if value(r) is None]
    known.sort(key=lambda r: r.bookie_id)
    known.sort(key=value, reverse=descending)
    return known + sorted(unknown, key=lambda r: r.bookie_id)


def filter_rows(rows: list[TopRow], text: str) -> list[TopRow]:
    """The rows whose bookie id, state or rack contains ``text`` (any case)."""
    text = text.strip().lower()
    if not text:
        return rows
    return [r for r in rows if any(text in (v or "").lower() for v in (r.bookie_id, r.state.value, r.rack))]


def repairs_of(snapshot: TopSnapshot, bookie_id: str) -> list[RepairRow]:
    """The marked ledgers missing a replica on ``bookie_id``, as the status report says."""
    report = snapshot.autorecovery
    return [r for r in (report.ledgers if report is not None else []) if bookie_id in r.repair.missing_replicas]
