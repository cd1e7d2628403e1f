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

The rows are plain dicts (``--once --json`` prints them); sorting and
filtering them is here too, so the live view only draws.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from .bookie_reads import GC, GC_DETAILS, INFO, METRICS, BookieReading, read_bookies
from .prometheus import Scrape, rates

if TYPE_CHECKING:
    from bkctl.wire.metadata.store import MetadataStore

#: sort keys: name -> (row field, largest first)
SORTS = {
    "bookie": ("bookie_id", False),
    "state": ("state", False),
    "rack": ("rack", False),
    "adds": ("add_rate", True),
    "add-latency": ("add_p99_ms", True),
    "reads": ("read_rate", True),
    "disk": ("used_percent", True),
    "reclaimable": ("reclaimable_bytes", True),
}
STATE_ORDER = {"lost": 0, "down": 1, "unreachable": 2, "read-only": 3, "writable": 4}


class _Pending:
    """One read of ZooKeeper in a daemon thread of its own: a ZooKeeper that stopped answering
    holds that thread, never a refresh of the view nor the process's exit (a pool's threads are
    joined at exit)."""

    def __init__(self, fn: Callable[[], Any], started: float):
        from concurrent.futures import Future

        self.started = started
        self.future: Future = Future()

        def run():
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
        self._repair: tuple[float, dict | None, str | None] | None = None
        self._zk_read: _Pending | None = None  # the registrations' read under way
        self._report_read: _Pending | None = None  # the autorecovery report's
        self._known: tuple[int, list[dict], dict] | None = None  # (wall ms, registrations, racks) last read
        self._zk_down: tuple[int, str] | None = None  # (wall ms since, why) while ZooKeeper does not answer
        self._zk_latency_ms: float | None = None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def snapshot(self) -> dict:
        """The cluster now: ``time`` (epoch ms), ``bookies`` (rows), ``cluster`` (counts, auditor,
        under-replication), ``autorecovery`` (the status report, or ``autorecovery_error``),
        ``zookeeper`` (``state`` ok or unreachable, ``since``, ``error``, ``read_at``: when the
        registrations and the report shown were read)."""
        now_ms = int(self.wall() * 1000)
        fresh = self._read_zookeeper(now_ms)
        registered, racks = (self._known[1], self._known[2]) if self._known else ([], {})
        for row in registered if fresh else ():  # the registration may name a new HTTP port after a restart
            if row["state"] == "down":
                self._addresses.pop(row["bookie_id"], None)
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
            b["bookie_id"]
            for b in (report or {}).get("lost_bookies", [])
            if b.get("seen_by_auditor", True) or not b.get("cookie", True)
        }
        rows = [self._row(r, racks.get(r.bookie_id), r.bookie_id in lost) for r in readings]
        for bookie_id in sorted(lost - {r["bookie_id"] for r in rows}):
            rows.append(_lost_row(bookie_id, racks.get(bookie_id)))
        counts = {state: sum(1 for r in rows if r["state"] == state) for state in STATE_ORDER}
        cluster = {
            "bookies": len(rows),
            **counts,
            "under_replicated": None if report is None else report["underreplicated"],
            "auditor": None if report is None else report["auditor"],
            "autorecovery_enabled": None if report is None else report["enabled"],
        }
        zookeeper = {
            "state": "unreachable" if self._zk_down else "ok",
            "since": self._zk_down[0] if self._zk_down else None,
            "error": self._zk_down[1] if self._zk_down else None,
            "read_at": self._known[0] if self._known else None,
            "latency_ms": None if self._zk_down else self._zk_latency_ms,
        }
        return {
            "time": now_ms,
            "cluster": cluster,
            "bookies": rows,
            "autorecovery": report,
            "autorecovery_error": error,
            "zookeeper": zookeeper,
        }

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

    def _registrations(self) -> tuple[list[dict], dict]:
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

    def _read_bookies(self, registered: list[dict], fresh: bool) -> list[BookieReading]:
        """Each bookie's HTTP admin; while ZooKeeper does not answer, only those whose address is
        known (asking ZooKeeper for the others would hold a thread of the pool)."""
        if fresh:
            return read_bookies(
                self.store, registered, (INFO, GC, GC_DETAILS, METRICS), self.timeout, self._addresses, self._pool
            )
        known = [r for r in registered if r["state"] == "down" or r["bookie_id"] in self._addresses]
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
            readings.get(r["bookie_id"])
            or BookieReading(
                r["bookie_id"], r["state"], unread={"http": "its HTTP address is in ZooKeeper, which is not answering"}
            )
            for r in registered
        ]

    def _repair_report(self, now_ms: int) -> tuple[dict | None, str | None]:
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

    def _row(self, reading: BookieReading, rack: str | None, lost: bool) -> dict:
        state = reading.state
        if state != "down" and _unreachable(reading):
            state = "unreachable"
        if lost and state == "down":
            state = "lost"
        row: dict[str, Any] = {
            "bookie_id": reading.bookie_id,
            "state": state,
            "registration": reading.state,
            "rack": rack,
            "http": reading.http,
            "kind": reading.kind,
            "unread": dict(reading.unread),
        }
        row.update(_disk(reading))
        row.update(_gc(reading))
        reasons = reading.read_only_reasons
        row["read_only_reason"] = "; ".join(reasons.values()) if reasons else None
        before = self._scrapes.get(reading.bookie_id)
        if reading.metrics is not None:
            scrape = Scrape(reading.metrics)
            seconds = reading.read_at - before[0] if before else 0.0
            row.update(rates(before[1] if before else None, scrape, seconds))
            row["metrics"] = scrape.naming or "unknown names"
            self._scrapes[reading.bookie_id] = (reading.read_at, scrape)
        else:
            row.update(
                dict.fromkeys(
                    (
                        "add_rate",
                        "add_p50_ms",
                        "add_p99_ms",
                        "read_rate",
                        "read_p50_ms",
                        "read_p99_ms",
                        "journal_sync_p99_ms",
                    )
                )
            )
            row["metrics"] = None
            self._scrapes.pop(reading.bookie_id, None)
        return row


def _unreachable_error(exc: BaseException) -> bool:
    """A failure that means ZooKeeper does not answer (rather than a cluster or a request that is wrong)."""
    from bkctl.wire.errors import Unreachable

    return isinstance(exc, (Unreachable, OSError, TimeoutError))  # the store turns kazoo's into Unreachable


def _unreachable(reading: BookieReading) -> bool:
    """Registered, but its HTTP admin did not answer at all."""
    return reading.kind is None and reading.state != "down"


def _lost_row(bookie_id: str, rack: str | None) -> dict:
    """A bookie the auditor counts lost that has no cookie any more (decommissioned, or a stray id)."""
    row = {
        "bookie_id": bookie_id,
        "state": "lost",
        "registration": "not registered",
        "rack": rack,
        "http": None,
        "kind": None,
        "unread": {"http": "not registered"},
        "metrics": None,
        "read_only_reason": None,
    }
    row.update(_disk(BookieReading(bookie_id, "down")))
    row.update(_gc(BookieReading(bookie_id, "down")))
    row.update(
        dict.fromkeys(
            ("add_rate", "add_p50_ms", "add_p99_ms", "read_rate", "read_p50_ms", "read_p99_ms", "journal_sync_p99_ms")
        )
    )
    return row


def _disk(reading: BookieReading) -> dict:
    used, total = reading.used_bytes, reading.total_bytes
    logs = reading.entry_logs
    return {
        "used_bytes": used,
        "total_bytes": total,
        "used_percent": round(used * 100.0 / total, 1) if used is not None and total else None,
        "entry_logs": None if logs is None else len(logs),
        "entry_log_bytes": None if logs is None else sum(int(x.get("sizeBytes", 0)) for x in logs),
        "reclaimable_bytes": None
        if logs is None
        else sum(max(0, int(x.get("sizeBytes", 0)) - int(x.get("liveBytes", 0))) for x in logs),
        "lowest_live_ratio": min((float(x.get("liveRatio", 1.0)) for x in logs), default=None)
        if logs is not None
        else None,
    }


def _gc(reading: BookieReading) -> dict:
    gc, details = reading.gc or {}, reading.gc_state
    running = gc.get("gcRunning", details.get("gcRunning"))
    compacting = gc.get("compacting") or (
        "major" if details.get("majorCompacting") else "minor" if details.get("minorCompacting") else None
    )
    last = gc.get("lastCompaction") if isinstance(gc.get("lastCompaction"), dict) else None
    return {
        "gc_running": running,
        "compacting": compacting,
        "gc_runs": gc.get("gcRuns"),
        "forced_gc": str(gc.get("is_in_force_gc", "")).lower() == "true" if gc else None,
        "last_compaction": last,
        "next_gc_ms": gc.get("nextGcTime"),
        "reclaimed_bytes": (gc.get("reclaimedSpaceViaDeletes") or 0) + (gc.get("reclaimedSpaceViaCompaction") or 0)
        if "reclaimedSpaceViaDeletes" in gc
        else None,
    }


# ---------------------------------------------------------------- what the view shows


def sort_rows(rows: list[dict], key: str, reverse: bool = False) -> list[dict]:
    """Rows by ``key`` (a :data:`SORTS` name); unknown values last, ties by bookie id."""
    field, largest_first = SORTS[key]
    descending = largest_first != reverse

    def value(row):
        v = row.get(field)
        if field == "state":
            v = STATE_ORDER.get(v, 9)
        return v

    known = [r for r in rows if value(r) is not None]
    unknown = [r for r in rows if value(r) is None]
    known.sort(key=lambda r: r["bookie_id"])
    known.sort(key=value, reverse=descending)
    return known + sorted(unknown, key=lambda r: r["bookie_id"])


def filter_rows(rows: list[dict], text: str) -> list[dict]:
    """The rows whose bookie id, state or rack contains ``text`` (any case)."""
    text = text.strip().lower()
    if not text:
        return rows
    return [r for r in rows if any(text in str(r.get(k) or "").lower() for k in ("bookie_id", "state", "rack"))]


def repairs_of(snapshot: dict, bookie_id: str) -> list[dict]:
    """The marked ledgers missing a replica on ``bookie_id``, as the status report says."""
    report = snapshot.get("autorecovery") or {}
    return [r for r in report.get("ledgers", []) if bookie_id in r.get("missing_replicas", [])]
