"""``bkctl autorecovery run --metrics-port``: the daemon's auditor and worker figures under
Java's names (``replication/ReplicationStats.java``, ``replication/AuditorStats.java``,
``client/LedgerFragmentReplicator.java`` under BookKeeper's
``bookkeeper-server/src/main/java/org/apache/bookkeeper/``), on a port of its own, as
Java's AutoRecoveryMain serves them: ``auditor_NUM_UNDER_REPLICATED_LEDGERS`` (a summary of
the ledgers each audit marked), ``replication_worker_NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED``,
``replication_worker_NUM_ENTRIES_WRITTEN`` (counters) and ``replication_worker_NUM_BYTES_WRITTEN``
(a summary whose count is the entries and whose sum is the bytes: bookied keeps no per-entry
sizes, so its quantiles are NaN), with ``process_*`` and ``python_gc_*``.

A module apart from :mod:`.autorecovery_daemon` (which runs the daemon) because it is the
daemon's exposition: its collector, its one-path web resource and the rotation of its
window.  Everything here runs on the reactor thread, where the daemon updates its figures.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import Metric
from twisted.internet import task
from twisted.web import resource, server

from bkctl.wire.autorecovery.config import AutoRecoveryStats
from bkctl.wire.process.exposition import PlainCounter, daemon_registry, java_summary, render
from bkctl.wire.process.opstats import SIZE_BOUNDS, OpStat

log = logging.getLogger("bkctl.autorecovery")

__all__ = ["AutoRecoveryCollector", "MetricsListener"]

#: seconds of the quantiles' window, as Java's default prometheusStatsLatencyRolloverSeconds
ROLLOVER = 60.0


class AutoRecoveryCollector:
    """The daemon's figures, read from its :class:`AutoRecoveryStats` at each scrape."""

    def __init__(self, stats: AutoRecoveryStats):
        self.stats = stats
        #: the ledgers each audit marked under-replicated
        self.marked = OpStat(SIZE_BOUNDS)
        stats.on_audit = self.marked.observe

    def collect(self) -> Iterator[Metric]:
        s = self.stats
        yield java_summary(
            "auditor_NUM_UNDER_REPLICATED_LEDGERS",
            "the number of under replicated ledgers found by each audit",
            self.marked,
            None,
            scale=1.0,
        )
        yield PlainCounter(
            "replication_worker_NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED",
            "the number of ledgers re-replicated",
            s.ledgers_rereplicated,
        )
        yield PlainCounter(
            "replication_worker_NUM_ENTRIES_WRITTEN", "the number of entries written", s.entries_rereplicated
        )
        written = Metric("replication_worker_NUM_BYTES_WRITTEN", "the number of bytes written", "summary")
        for flag, count, total in (("false", 0, 0), ("true", s.entries_rereplicated, s.bytes_rereplicated)):
            for q in ("0.5", "0.75", "0.95", "0.99", "0.999", "0.9999", "1.0"):
                written.add_sample(written.name, {"success": flag, "quantile": q}, float("nan"))
            written.add_sample(written.name + "_count", {"success": flag}, count)
            written.add_sample(written.name + "_sum", {"success": flag}, total)
        yield written


class _MetricsPage(resource.Resource):
    isLeaf = True

    def __init__(self, registry: Any):
        super().__init__()
        self.registry = registry

    def render_GET(self, request: server.Request) -> bytes:  # noqa: N802 - Twisted's name
        if request.path.rstrip(b"/") != b"/metrics":
            request.setResponseCode(404)
            request.setHeader(b"Content-Type", b"text/plain; charset=utf-8")
            return b"not found: only /metrics is served here\n"
        accept = request.getHeader(b"accept")
        page = render(self.registry, accept.decode("latin-1") if accept else None)
        request.setHeader(b"Content-Type", page.content_type.encode("ascii"))
        return page.body


class MetricsListener:
    """``/metrics`` of one daemon on ``host:port`` (port 0: a free one), from ``start()``
    to ``stop()``, both called in the reactor thread."""

    def __init__(self, reactor: Any, stats: AutoRecoveryStats, port: int, host: str = "0.0.0.0"):
        self.reactor = reactor
        self.collector = AutoRecoveryCollector(stats)
        self.registry = daemon_registry(self.collector)
        self.port, self.host = port, host
        self.listening: Any = None
        self.rollover = task.LoopingCall(self.collector.marked.rotate)
        self.rollover.clock = reactor

    def start(self) -> int:
        """Listen; returns the port listened on."""
        site = server.Site(_MetricsPage(self.registry))
        site.noisy = False
        self.listening = self.reactor.listenTCP(self.port, site, interface=self.host)
        self.rollover.start(ROLLOVER, now=False)
        bound = self.listening.getHost().port
        log.info("autorecovery metrics on http://%s:%d/metrics", self.host, bound)
        return bound

    def stop(self) -> Any:
        if self.rollover.running:
            self.rollover.stop()
        if self.listening is not None:
            listening, self.listening = self.listening, None
            return listening.stopListening()
        return None
