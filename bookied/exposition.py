"""bookied's own metric names, as it exported them before it spoke Java's (those are
:mod:`.java_names`'): a ``prometheus_client`` collector over :class:`~.metrics.Metrics`.
The page itself is :mod:`bkctl.wire.process.exposition`'s."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from bkctl.wire.process.exposition import PlainCounter, merged, render
from bkctl.wire.process.opstats import OpStat

if TYPE_CHECKING:
    from .metrics import Metrics

__all__ = ["OwnCollector", "own_text"]


# -- bookied's own names ---------------------------------------------------------------------


def _histogram(name: str, documentation: str, stats: dict[str, OpStat], label: str | None) -> Metric:
    family = HistogramMetricFamily(name, documentation, labels=[label] if label else None)
    for key, stat in sorted(stats.items()):
        buckets = [(repr(bound), count) for bound, count in stat.coarse_buckets()]
        buckets.append(("+Inf", stat.count))
        family.add_metric([key] if label else [], buckets, stat.sum)
    return family


class OwnCollector:
    """bookied's own names (``bookie_requests_total``, ``bookie_request_latency_seconds``,
    the journal's histograms, every gauge and counter the service and the garbage
    collector registered): what bookied exported before it spoke Java's names."""

    def __init__(self, metrics: Metrics):
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        requests = CounterMetricFamily(
            "bookie_requests_total", "Requests answered, by operation and status.", labels=["op", "status"]
        )
        for (op, status), c in sorted(m.requests.items()):
            requests.add_metric([op, status], c.value)
        yield requests
        by_op: dict[str, list[OpStat]] = {}
        for (op, _ok), stat in sorted(m.opstats.items()):
            by_op.setdefault(op, []).append(stat)
        yield _histogram(
            "bookie_request_latency_seconds",
            "Time from request decode to response.",
            {op: merged(stats) for op, stats in by_op.items()},
            "op",
        )
        yield _histogram(
            "bookie_recovery_add_latency_seconds",
            "Time from request decode to response of the recovery adds (also counted as op=add).",
            {"": m.recovery_add_latency},
            None,
        )
        yield _histogram("bookie_journal_fsync_latency_seconds", "Journal fsync latency.", {"": m.fsync_latency}, None)
        yield _histogram(
            "bookie_journal_entries_per_fsync", "Records covered by one journal fsync.", {"": m.entries_per_fsync}, None
        )
        yield GaugeMetricFamily("bookie_connections", "Open client connections.", value=m.connections.value)
        yield CounterMetricFamily(
            "bookie_protocol_errors_total", "Connections closed for undecodable input.", value=m.protocol_errors.value
        )
        for name, (help_text, read) in sorted(m.gauges.items()):
            value = read()
            gauge = GaugeMetricFamily(name, help_text)
            if value is not None:
                gauge.add_metric([], float(value))  # type: ignore[arg-type]
            yield gauge
        for name, (help_text, kind, read) in sorted(m.exported.items()):
            if kind == "summary":
                total, count = read()
                summary = Metric(name, help_text, "summary")
                summary.add_sample(name + "_count", {}, count)
                summary.add_sample(name + "_sum", {}, total)
                yield summary
            elif name.endswith("_total"):
                yield CounterMetricFamily(name, help_text, value=read())
            else:
                yield PlainCounter(name, help_text, read())


def own_text(metrics: Metrics) -> str:
    """bookied's own names alone, in the text format (tests, salvage's bookie)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(OwnCollector(metrics))  # type: ignore[arg-type]
    return render(registry).body.decode("utf-8")
