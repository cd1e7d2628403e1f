"""Prometheus text-format metrics for the bookie's /metrics endpoint.

Small on purpose: counters, gauges and fixed-bucket histograms, updated
from the reactor thread -- except the journal fsync histogram, which the
thread that committed a group feeds (commits run one at a time); a scrape
may see one observation half-recorded, never a corrupted histogram.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Callable
from typing import Any

from twisted.python.failure import Failure

from bkctl.wire.codecs.protocol import rc_name

log = logging.getLogger("bookied.metrics")

#: Seconds. The low end matters: an fsync on a disk with a write cache takes tens of microseconds.
LATENCY_BUCKETS = (
    0.000025,
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)


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


class Histogram:
    def __init__(self, buckets=LATENCY_BUCKETS):
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, v: float, n: int = 1) -> None:
        """``n`` observations of the value ``v`` (a batch of requests answered together)."""
        self.counts[bisect.bisect_left(self.buckets, v)] += n
        self.sum += v * n
        self.count += n

    def quantile(self, q: float) -> float:
        """Upper bucket bound below which a fraction q of observations fall."""
        if not self.count:
            return 0.0
        target = q * self.count
        seen = 0
        for bound, n in zip(self.buckets + (float("inf"),), self.counts):
            seen += n
            if seen >= target:
                return bound
        return float("inf")


class Metrics:
    """Every metric bookied exports; ``gauges`` are callables read at scrape time."""

    def __init__(self):
        self.connections = Gauge()
        self.protocol_errors = Counter()
        self.requests: dict[tuple[str, str], Counter] = {}
        self.latency: dict[str, Histogram] = {}
        self.fsync_latency = Histogram()
        self.entries_per_fsync = Histogram(SIZE_BUCKETS)
        #: the recovery adds among the ``add`` requests (a ledger recovery's re-adds,
        #: re-replication's copies), which the journal may hold for company: what
        #: ``add`` observed minus these is the live writers' adds' latency
        self.recovery_add_latency = Histogram()
        self.gauges: dict[str, tuple[str, Callable[[], object]]] = {}
        #: name -> (help, type, read): counters and summaries read at scrape time
        self.exported: dict[str, tuple[str, str, Callable[[], Any]]] = {}

    def observe(self, op: str, started: float, rc: int, n: int = 1) -> None:
        """``n`` requests of ``op`` that started at ``started`` ended now with ``rc``."""
        key = (op, rc_name(rc))
        counter = self.requests.get(key)
        if counter is None:
            counter = self.requests[key] = Counter()
        counter.value += n
        hist = self.latency.get(op)
        if hist is None:
            hist = self.latency[op] = Histogram()
        hist.observe(time.perf_counter() - started, n)

    def gauge(self, name: str, help_text: str, read: Callable[[], object]) -> None:
        """``read()`` at each scrape; a None value leaves the sample out (not known yet)."""
        self.gauges[name] = (help_text, read)

    def counter(self, name: str, help_text: str, read: Callable[[], int | float]) -> None:
        """A counter kept elsewhere: ``read()`` at each scrape."""
        self.exported[name] = (help_text, "counter", read)

    def summary(self, name: str, help_text: str, read: Callable[[], tuple[float, int]]) -> None:
        """A summary without quantiles: ``read()`` returns ``(sum, count)``."""
        self.exported[name] = (help_text, "summary", read)

    def render(self) -> str:
        out: list[str] = []

        def histogram(name: str, help_text: str, hists: dict[str, Histogram], label: str | None):
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} histogram")
            for key, h in sorted(hists.items()):
                lab = f'{label}="{key}",' if label else ""
                seen = 0
                for bound, n in zip(h.buckets, h.counts):
                    seen += n
                    out.append(f'{name}_bucket{{{lab}le="{bound}"}} {seen}')
                out.append(f'{name}_bucket{{{lab}le="+Inf"}} {h.count}')
                plain = "{" + lab.rstrip(",") + "}" if lab else ""
                out.append(f"{name}_sum{plain} {h.sum:.6f}")
                out.append(f"{name}_count{plain} {h.count}")

        out.append("# HELP bookie_requests_total Requests answered, by operation and status.")
        out.append("# TYPE bookie_requests_total counter")
        for (op, status), c in sorted(self.requests.items()):
            out.append(f'bookie_requests_total{{op="{op}",status="{status}"}} {c.value}')
        histogram("bookie_request_latency_seconds", "Time from request decode to response.", self.latency, "op")
        histogram(
            "bookie_recovery_add_latency_seconds",
            "Time from request decode to response of the recovery adds (also counted as op=add).",
            {"": self.recovery_add_latency},
            None,
        )
        histogram("bookie_journal_fsync_latency_seconds", "Journal fsync latency.", {"": self.fsync_latency}, None)
        histogram(
            "bookie_journal_entries_per_fsync",
            "Records covered by one journal fsync.",
            {"": self.entries_per_fsync},
            None,
        )
        out.append("# HELP bookie_connections Open client connections.")
        out.append("# TYPE bookie_connections gauge")
        out.append(f"bookie_connections {self.connections.value}")
        out.append("# HELP bookie_protocol_errors_total Connections closed for undecodable input.")
        out.append("# TYPE bookie_protocol_errors_total counter")
        out.append(f"bookie_protocol_errors_total {self.protocol_errors.value}")
        for name, (help_text, read) in sorted(self.gauges.items()):
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} gauge")
            value = read()
            if value is not None:
                out.append(f"{name} {value}")
        for name, (help_text, kind, read) in sorted(self.exported.items()):
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} {kind}")
            if kind == "summary":
                total, count = read()
                out.append(f"{name}_sum {total:.6f}")
                out.append(f"{name}_count {count}")
            else:
                out.append(f"{name} {read()}")
        return "\n".join(out) + "\n"


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
    once an (op, rc) pair has been seen: the counter and the histogram observe()
    updated are then updated directly.  The bookie's request handlers (the
    protocol, its adds, its plain reads) report through it."""

    __slots__ = ("metrics", "_seen")

    def __init__(self, metrics) -> None:
        self.metrics = metrics
        #: (op, rc) -> (request counter, latency histogram) of ``metrics``, once seen
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
        counter = getattr(metrics, "requests", {}).get((op, rc_name(rc)))
        hist = getattr(metrics, "latency", {}).get(op)
        if counter is not None and hist is not None:
            self._seen[(op, rc)] = (counter, hist)

    def observe_recovery_add(self, started: float, n: int = 1) -> None:
        """A recovery add's latency, also in its own histogram (it is an ``add`` too):
        see :attr:`Metrics.recovery_add_latency`."""
        hist = getattr(self.metrics, "recovery_add_latency", None)
        if hist is not None:
            hist.observe(time.perf_counter() - started, n)
