"""A daemon's ``/metrics`` through ``prometheus_client`` (bookied's, ``bkctl autorecovery
run``'s): the registry of one daemon (its collectors, the process and the interpreter),
Java's shapes, and the page a scrape gets.

Custom collectors read the daemon's own lock-free figures (:mod:`.opstats`) at
collection time; nothing on a hot path knows about ``prometheus_client``.

Collection (:func:`snapshot`) runs on the reactor thread, not in a thread as
``prometheus_client.twisted.MetricsResource`` collects: every figure is mutated by the
reactor thread without a lock, so reading them there gives one consistent instant -- a
window never rotates halfway through a scrape, a count is never newer than its sum --
and keeps the hot path free of locks.  Encoding the collection (:func:`encode`, about
half a scrape's CPU) reads only the snapshot, so bookied runs it in its thread pool.

The text format 0.0.4 is the default (what Java's bookie always writes); an ``Accept``
header asking for ``application/openmetrics-text`` gets OpenMetrics.  Counters named
without ``_total`` (Java's ``bookie_WRITE_BYTES``, bookied's ``bookie_gc_*`` byte counts)
keep their names: ``prometheus_client`` would append ``_total`` to a counter, so they are
collected as :class:`PlainCounter` and typed ``counter`` in the text format, as Java types
them, and ``unknown`` in OpenMetrics (which allows no counter without ``_total``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, NamedTuple

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest

from .opstats import JAVA_QUANTILES, OpStat

__all__ = [
    "OPENMETRICS_CONTENT_TYPE",
    "TEXT_CONTENT_TYPE",
    "MetricsPage",
    "Collected",
    "PlainCounter",
    "daemon_registry",
    "java_summary",
    "merged",
    "encode",
    "render",
    "snapshot",
]

TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"


class MetricsPage(NamedTuple):
    body: bytes
    content_type: str


class PlainCounter(Metric):
    """A counter whose samples carry its name as it is (no ``_total``): Java's shape."""

    def __init__(self, name: str, documentation: str, value: float | None = None):
        super().__init__(name, documentation, "unknown")
        if value is not None:
            self.add_sample(name, {}, value)


class Collected:
    """What one collection gathered (:func:`snapshot`), handed to an encoder as a registry."""

    def __init__(self, metrics: list[Metric]):
        self.metrics = metrics

    def collect(self) -> Iterable[Metric]:
        return self.metrics


def wants_openmetrics(accept: str | None) -> bool:
    return any(part.split(";")[0].strip() == "application/openmetrics-text" for part in (accept or "").split(","))


def snapshot(registry: CollectorRegistry) -> Collected:
    """One collection: every collector read now (on the thread that owns the figures)."""
    return Collected(list(registry.collect()))


def encode(collected: Collected, accept: str | None = None) -> MetricsPage:
    """The page of a collection: OpenMetrics if ``accept`` asks for it, else text 0.0.4.
    Reads nothing but ``collected``: it may run on any thread."""
    if wants_openmetrics(accept):
        from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

        # prometheus_client's OpenMetrics encoder has no annotations
        body: bytes = generate_openmetrics(collected)  # type: ignore[no-untyped-call]
        return MetricsPage(body, OPENMETRICS_CONTENT_TYPE)
    text = generate_latest(collected)
    for metric in collected.metrics:
        if isinstance(metric, PlainCounter):  # its exact TYPE line: names are unique in a page
            text = text.replace(
                b"# TYPE %s untyped\n" % metric.name.encode(), b"# TYPE %s counter\n" % metric.name.encode(), 1
            )
    return MetricsPage(text, TEXT_CONTENT_TYPE)


def render(registry: CollectorRegistry, accept: str | None = None) -> MetricsPage:
    """:func:`snapshot` and :func:`encode` in one call."""
    return encode(snapshot(registry), accept)


def daemon_registry(*collectors: Any) -> CollectorRegistry:
    """A registry of its own (never prometheus_client's global one) with ``collectors``,
    the process's ``process_*`` figures and the interpreter's ``python_gc_*`` and
    ``python_info``, as every Prometheus client library names them."""
    registry = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        registry.register(collector)
    ProcessCollector(registry=registry)
    GCCollector(registry=registry)
    PlatformCollector(registry=registry)
    return registry


# -- OpStats as Java's summaries -----------------------------------------------------------


def merged(stats: list[OpStat]) -> OpStat:
    """One :class:`OpStat` holding what ``stats`` hold (several bookied operations that are
    one Java operation); a copy, read at collection time."""
    if len(stats) == 1:
        return stats[0]
    first = stats[0]
    out = OpStat(first.bounds)
    out.count = sum(s.count for s in stats)
    out.sum = sum(s.sum for s in stats)
    out.folded = [sum(col) for col in zip(*(s.folded for s in stats))]
    out.window = [sum(col) for col in zip(*(s.window for s in stats))]
    closed = [s.closed for s in stats if s.closed is not None]
    if closed:
        out.closed = [sum(col) for col in zip(*closed)]
        out.closed_max = max(s.closed_max for s in stats)
    return out


def java_summary(
    name: str,
    documentation: str,
    success: OpStat | None,
    failure: OpStat | None,
    scale: float = 1000.0,
    labels: dict[str, str] | None = None,
) -> Metric:
    """An OpStatsLogger as Java's PrometheusTextFormat writes it: per ``success`` true and
    false, the quantiles of :data:`JAVA_QUANTILES` over the last window, ``_count`` and
    ``_sum``; ``scale`` turns bookied's seconds into Java's milliseconds (1 for values)."""
    metric = Metric(name, documentation, "summary")
    extra = dict(labels or {})
    for flag, stat in (("false", failure), ("true", success)):
        values = stat.quantiles(JAVA_QUANTILES) if stat is not None else [math.nan] * len(JAVA_QUANTILES)
        for q, value in zip(JAVA_QUANTILES, values):
            metric.add_sample(name, {"success": flag, "quantile": repr(q), **extra}, value * scale)
        metric.add_sample(name + "_count", {"success": flag, **extra}, stat.count if stat is not None else 0)
        metric.add_sample(name + "_sum", {"success": flag, **extra}, stat.sum * scale if stat is not None else 0.0)
    return metric
