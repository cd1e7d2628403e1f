"""The figures bookied keeps for its ``/metrics``: counters, gauges read at scrape
time, and operation statistics (:class:`~bkctl.wire.process.opstats.OpStat`: a count, a sum, a rolling
window's quantiles and the cumulative buckets of bookied's own histograms).

Kept without locks: the reactor thread updates them all, except the journal's fsync
and group figures, which the thread that committed a group feeds (commits run one at
a time); a scrape may see one observation half-recorded, never a corrupted figure.
What they are exported as -- bookied's own names and Java's -- is :mod:`.exposition`'s
and :mod:`.java_names`' (through ``prometheus_client``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from twisted.python.failure import Failure

from bkctl.wire.codecs.protocol import RC, rc_name
from bkctl.wire.process.opstats import LATENCY_BUCKETS, SIZE_BOUNDS, SIZE_BUCKETS, OpStat

__all__ = [
    "LATENCY_BUCKETS",
    "SIZE_BUCKETS",
    "Counter",
    "Gauge",
    "Metrics",
    "OpStat",
    "Refreshed",
    "RequestObserver",
    "register_autorecovery",
]

log = logging.getLogger("bookied.metrics")

_EOK = RC.EOK


class Counter:
    def __init__(self) -> None:
        self.value: int | float = 0

    def inc(self, n: int = 1) -> None:
        self.value += n


class Gauge(Counter):
    def dec(self, n: int = 1) -> None:
        self.value -= n

    def set(self, v: float) -> None:
        self.value = v


class Metrics:
    """Every figure bookied keeps; ``gauges`` and ``exported`` are callables read at scrape time."""

    def __init__(self):
        self.connections = Gauge()
        self.protocol_errors = Counter()
        #: (op, status name) -> requests answered
        self.requests: dict[tuple[str, str], Counter] = {}
        #: (op, success) -> the latency (seconds) of the requests of ``op`` answered EOK or not
        self.opstats: dict[tuple[str, bool], OpStat] = {}
        #: the journal's fsyncs (seconds): Java's JOURNAL_SYNC
        self.fsync_latency = OpStat()
        #: records covered by one journal fsync: Java's JOURNAL_FORCE_WRITE_BATCH_ENTRIES
        self.entries_per_fsync = OpStat(SIZE_BOUNDS)
        #: the recovery adds among the ``add`` requests (a ledger recovery's re-adds,
        #: re-replication's copies), which the journal may hold for company: what
        #: ``add`` observed minus these is the live writers' adds' latency
        self.recovery_add_latency = OpStat()
        self.gauges: dict[str, tuple[str, Callable[[], object]]] = {}
        #: name -> (help, type, read): counters and summaries read at scrape time
        self.exported: dict[str, tuple[str, str, Callable[[], Any]]] = {}

    def opstat(self, op: str, success: bool) -> OpStat:
        """The :class:`OpStat` of ``op``'s requests answered EOK (``success``) or not."""
        found = self.opstats.get((op, success))
        if found is None:
            found = self.opstats[(op, success)] = OpStat()
        return found

    def request_counter(self, op: str, rc: int) -> Counter:
        key = (op, rc_name(rc))
        counter = self.requests.get(key)
        if counter is None:
            counter = self.requests[key] = Counter()
        return counter

    def observe(self, op: str, started: float, rc: int, n: int = 1) -> None:
        """``n`` requests of ``op`` that started at ``started`` ended now with ``rc``."""
        self.request_counter(op, rc).value += n
        self.opstat(op, rc == _EOK).observe(time.perf_counter() - started, n)

    def latency_count(self, op: str) -> int:
        """Requests of ``op`` answered, EOK or not, whose latency was observed."""
        return sum(s.count for (o, _ok), s in self.opstats.items() if o == op)

    def every_opstat(self) -> list[OpStat]:
        """Every :class:`OpStat` kept (what a rotation closes the window of)."""
        return [*self.opstats.values(), self.fsync_latency, self.entries_per_fsync, self.recovery_add_latency]

    def rotate(self) -> None:
        """Close every OpStat's window (``prometheusStatsLatencyRolloverSeconds``)."""
        for stat in self.every_opstat():
            stat.rotate()

    def gauge(self, name: str, help_text: str, read: Callable[[], object]) -> None:
        """``read()`` at each scrape; a None value leaves the sample out (not known yet)."""
        self.gauges[name] = (help_text, read)

    def counter(self, name: str, help_text: str, read: Callable[[], int | float]) -> None:
        """A counter kept elsewhere: ``read()`` at each scrape."""
        self.exported[name] = (help_text, "counter", read)

    def summary(self, name: str, help_text: str, read: Callable[[], tuple[float, int]]) -> None:
        """A summary without quantiles: ``read()`` returns ``(sum, count)``."""
        self.exported[name] = (help_text, "summary", read)


class Refreshed:
    """A value that is costly to get (a ZooKeeper walk): ``compute()`` runs off
    the reactor thread through ``run_blocking(compute)`` (a Deferred), at most
    once every ``max_age`` seconds and only when asked for.  Calling the object
    (on the reactor thread, e.g. from a scrape) returns the last value at once
    -- None before the first one and after a failure -- and starts a refresh
    when the value is older than ``max_age``."""

    def __init__(self, compute, run_blocking, clock, max_age: float = 5.0):
        self.compute = compute
        self.run_blocking = run_blocking
        self.clock = clock
        self.max_age = max_age
        self.value = None
        self.refreshed_at: float | None = None
        self.pending = None

    def __call__(self):
        now = self.clock.seconds()
        if self.pending is None and (self.refreshed_at is None or now - self.refreshed_at >= self.max_age):
            self.refresh()
        return self.value

    def refresh(self):
        """Start a refresh now unless one is running; returns its Deferred."""
        if self.pending is not None:
            return self.pending
        self.refreshed_at = self.clock.seconds()
        d = self.pending = self.run_blocking(self.compute)

        def done(result):
            self.pending = None
            if isinstance(result, Failure):
                self.value = None
                log.warning(
                    "metrics: cannot refresh %s: %s",
                    getattr(self.compute, "__name__", "a value"),
                    result.getErrorMessage(),
                )
            else:
                self.value = result
            return None

        d.addBoth(done)
        return d


def register_autorecovery(metrics: Metrics, daemon, under_replicated) -> None:
    """The autorecovery daemon's figures.  ``daemon()`` returns what has its
    ``stats``, ``is_auditor``, ``pid`` and ``restarts`` (the bookie's
    :class:`~bookied.autorecovery.AutoRecoveryProcess`, or None until it runs:
    everything reads 0); ``under_replicated`` is a callable returning
    the number of marked ledgers or None (a :class:`Refreshed`).  Names follow
    Java's ReplicationStats, lower-cased, where Java has one."""

    def stat(name):
        def read():
            d = daemon()
            return getattr(d.stats, name) if d is not None else 0

        return read

    metrics.gauge(
        "autorecovery_num_under_replicated_ledgers",
        "Ledgers marked under-replicated in ZooKeeper (refreshed at most every few seconds).",
        under_replicated,
    )
    metrics.gauge(
        "autorecovery_is_auditor",
        "1 while this bookie's autorecovery daemon is the elected auditor.",
        lambda: int(bool(daemon() is not None and daemon().is_auditor)),
    )
    metrics.gauge(
        "autorecovery_daemon_running",
        "1 while this bookie's autorecovery daemon process runs (0 before it starts and between its "
        "end and its restart).",
        lambda: int(daemon() is not None and daemon().pid is not None),
    )
    metrics.counter(
        "autorecovery_daemon_restarts_total",
        "Times this bookie started its autorecovery daemon process again after it ended on its own.",
        lambda: daemon().restarts if daemon() is not None else 0,
    )
    for name, field, help_text in (
        ("autorecovery_elections_won_total", "elections_won", "Auditor elections this daemon won."),
        ("autorecovery_audits_total", "audits", "Audits of lost bookies run by this daemon's auditor."),
        (
            "autorecovery_ledgers_marked_total",
            "ledgers_marked",
            "Ledgers this daemon's auditor marked under-replicated.",
        ),
        (
            "autorecovery_num_full_or_partial_ledgers_replicated_total",
            "ledgers_rereplicated",
            "Ledgers this daemon's worker re-replicated.",
        ),
        (
            "autorecovery_num_entries_written_total",
            "entries_rereplicated",
            "Entries this daemon's worker copied to new bookies.",
        ),
        (
            "autorecovery_num_bytes_written_total",
            "bytes_rereplicated",
            "Bytes of entries this daemon's worker copied to new bookies.",
        ),
        (
            "autorecovery_rereplicate_failures_total",
            "failures",
            "Re-replications of a ledger by this daemon's worker that failed.",
        ),
    ):
        metrics.counter(name, help_text, stat(field))

    def recovery():
        d = daemon()
        return (d.stats.recovery_seconds_sum, d.stats.recovery_seconds_count) if d is not None else (0.0, 0)

    metrics.summary(
        "autorecovery_ledger_recovery_seconds",
        "From a ledger's under-replication mark (the ctime the auditor wrote into it) to this "
        "daemon's worker deleting the mark once the ledger was re-replicated (two hosts' clocks).",
        recovery,
    )


class RequestObserver:
    """One connection's :meth:`Metrics.observe`, without its per-call name lookups
    once an (op, rc) pair has been seen: the counter and the :class:`OpStat`
    observe() updated are then updated directly.  The bookie's request handlers
    (the protocol, its adds, its plain reads) report through it."""

    __slots__ = ("metrics", "_seen")

    def __init__(self, metrics) -> None:
        self.metrics = metrics
        #: (op, rc) -> (request counter, OpStat) of ``metrics``, once seen
        self._seen: dict = {}

    def observe(self, op: str, started: float, rc: int, n: int = 1) -> None:
        """``n`` requests of ``op`` that started at ``started`` ended now with ``rc``."""
        seen = self._seen.get((op, rc))
        if seen is not None:
            seen[0].value += n
            seen[1].observe(time.perf_counter() - started, n)
            return
        metrics = self.metrics
        metrics.observe(op, started, rc, n)
        if isinstance(metrics, Metrics):
            self._seen[(op, rc)] = (metrics.request_counter(op, rc), metrics.opstat(op, rc == _EOK))

    def observe_recovery_add(self, started: float, n: int = 1) -> None:
        """A recovery add's latency, also in its own OpStat (it is an ``add`` too):
        see :attr:`Metrics.recovery_add_latency`."""
        stat = getattr(self.metrics, "recovery_add_latency", None)
        if stat is not None:
            stat.observe(time.perf_counter() - started, n)
