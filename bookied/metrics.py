"""Prometheus text-format metrics for the bookie's /metrics endpoint.

Small on purpose: counters, gauges and fixed-bucket histograms, updated
from the reactor thread -- except the journal fsync histogram, which the
thread that committed a group feeds (commits run one at a time); a scrape
may see one observation half-recorded, never a corrupted histogram.
"""
from __future__ import annotations

import bisect
import time

from bkctl.wire.protocol import RC

#: Seconds. The low end matters: an fsync on a disk with a write cache takes tens of microseconds.
LATENCY_BUCKETS = (0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                   0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)


class Counter:
    def __init__(self):
        self.value = 0

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

    def observe(self, v: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, v)] += 1
        self.sum += v
        self.count += 1

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
        self.gauges: dict[str, tuple[str, object]] = {}

    def observe(self, op: str, started: float, rc: int) -> None:
        key = (op, RC(rc).name if rc in RC._value2member_map_ else str(rc))
        counter = self.requests.get(key)
        if counter is None:
            counter = self.requests[key] = Counter()
        counter.value += 1
        hist = self.latency.get(op)
        if hist is None:
            hist = self.latency[op] = Histogram()
        hist.observe(time.perf_counter() - started)

    def gauge(self, name: str, help_text: str, read) -> None:
        self.gauges[name] = (help_text, read)

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
        histogram("bookie_journal_fsync_latency_seconds", "Journal fsync latency.", {"": self.fsync_latency}, None)
        histogram("bookie_journal_entries_per_fsync", "Records covered by one journal fsync.",
                  {"": self.entries_per_fsync}, None)
        out.append("# HELP bookie_connections Open client connections.")
        out.append("# TYPE bookie_connections gauge")
        out.append(f"bookie_connections {self.connections.value}")
        out.append("# HELP bookie_protocol_errors_total Connections closed for undecodable input.")
        out.append("# TYPE bookie_protocol_errors_total counter")
        out.append(f"bookie_protocol_errors_total {self.protocol_errors.value}")
        for name, (help_text, read) in sorted(self.gauges.items()):
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} gauge")
            out.append(f"{name} {read()}")
        return "\n".join(out) + "\n"
