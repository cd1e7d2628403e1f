"""The page a scrape gets, read back with prometheus_client's own parsers: Java's
shapes (counters without ``_total`` typed ``counter``, OpStats as millisecond summaries
with Java's quantile labels), bookied's own histograms, OpenMetrics on request."""

from __future__ import annotations

import math

from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families

from bkctl.bookied.exposition import OwnCollector, own_text
from bkctl.bookied.metrics import Metrics
from bkctl.wire.codecs.protocol import RC
from bkctl.wire.process.exposition import (
    OPENMETRICS_CONTENT_TYPE,
    TEXT_CONTENT_TYPE,
    PlainCounter,
    daemon_registry,
    java_summary,
    render,
)
from bkctl.wire.process.opstats import OpStat


class JavaLike:
    def __init__(self, stat: OpStat):
        self.stat = stat

    def collect(self):
        yield PlainCounter("bookie_WRITE_BYTES", "total bytes written to a bookie", 1234)
        yield java_summary("bookkeeper_server_ADD_ENTRY", "adds", self.stat, None)


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_java_shapes_in_the_text_format():
    stat = OpStat()
    stat.observe(0.002, 3)
    stat.observe(0.010)
    stat.rotate()
    page = render(daemon_registry(JavaLike(stat)))
    assert page.content_type == TEXT_CONTENT_TYPE
    text = page.body.decode()
    # Java's counter: its own name, typed counter, no _total sample
    assert "# TYPE bookie_WRITE_BYTES counter\nbookie_WRITE_BYTES 1234.0\n" in text
    assert "bookie_WRITE_BYTES_total" not in text
    parsed = families(text)
    assert parsed["bookie_WRITE_BYTES"].type == "counter"
    summary = parsed["bookkeeper_server_ADD_ENTRY"]
    assert summary.type == "summary"
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in summary.samples}
    ok = [s for s in summary.samples if s.labels.get("success") == "true" and "quantile" in s.labels]
    assert [s.labels["quantile"] for s in ok] == ["0.5", "0.75", "0.95", "0.99", "0.999", "0.9999", "1.0"]
    assert samples[("bookkeeper_server_ADD_ENTRY", (("quantile", "1.0"), ("success", "true")))] == 10.0  # ms
    assert samples[("bookkeeper_server_ADD_ENTRY_count", (("success", "true"),))] == 4
    assert samples[("bookkeeper_server_ADD_ENTRY_sum", (("success", "true"),))] == 16.0
    assert samples[("bookkeeper_server_ADD_ENTRY_count", (("success", "false"),))] == 0
    assert math.isnan(samples[("bookkeeper_server_ADD_ENTRY", (("quantile", "0.5"), ("success", "false")))])
    # the process and the interpreter, as every Prometheus client names them
    assert "process_cpu_seconds" in parsed and "python_gc_objects_collected" in parsed


def test_openmetrics_on_request():
    stat = OpStat()
    stat.observe(0.001)
    registry = daemon_registry(JavaLike(stat))
    page = render(registry, "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
    assert page.content_type == OPENMETRICS_CONTENT_TYPE
    text = page.body.decode()
    assert text.endswith("# EOF\n")
    parsed = {f.name: f for f in parse_openmetrics(text)}
    # OpenMetrics allows no counter without _total: the same series, typed unknown
    assert parsed["bookie_WRITE_BYTES"].type == "unknown"
    assert parsed["bookie_WRITE_BYTES"].samples[0].name == "bookie_WRITE_BYTES"
    assert render(registry, "text/plain").content_type == TEXT_CONTENT_TYPE


def test_own_names_keep_their_shapes():
    metrics = Metrics()
    metrics.observe("add", 0.0, RC.EOK, 5)  # started long ago: beyond every bound
    metrics.observe("add", 1e18, RC.EFENCED)  # in the future: the lowest bucket
    metrics.counter("bookie_gc_reclaimed_space_via_deletes", "bytes", lambda: 4096)
    metrics.counter("bookie_disk_checks_total", "checks", lambda: 3)
    parsed = families(own_text(metrics))
    requests = {tuple(sorted(s.labels.items())): s.value for s in parsed["bookie_requests"].samples}
    assert requests == {(("op", "add"), ("status", "EOK")): 5, (("op", "add"), ("status", "EFENCED")): 1}
    hist = {s.labels.get("le"): s.value for s in parsed["bookie_request_latency_seconds"].samples if "le" in s.labels}
    assert hist["2.5e-05"] == 1 and hist["2.5"] == 1 and hist["+Inf"] == 6
    assert parsed["bookie_gc_reclaimed_space_via_deletes"].type == "counter"
    assert "bookie_gc_reclaimed_space_via_deletes 4096.0\n" in own_text(metrics)
    assert "bookie_disk_checks_total 3.0\n" in own_text(metrics)
    assert isinstance(OwnCollector(metrics).metrics, Metrics)


def test_the_autorecovery_daemon_reports_each_audits_marks():
    from bkctl.ops.autorecovery_metrics import AutoRecoveryCollector
    from bkctl.wire.autorecovery.config import AutoRecoveryStats

    stats = AutoRecoveryStats()
    collector = AutoRecoveryCollector(stats)
    for marked in (0, 3, 12):
        stats.audited(marked)
    stats.entries_rereplicated, stats.bytes_rereplicated, stats.ledgers_rereplicated = 40, 4096, 2
    collector.marked.rotate()
    parsed = families(render(daemon_registry(collector)).body.decode())
    marked = {
        (s.name, s.labels.get("quantile")): s.value
        for s in parsed["auditor_NUM_UNDER_REPLICATED_LEDGERS"].samples
        if s.labels["success"] == "true"
    }
    assert marked[("auditor_NUM_UNDER_REPLICATED_LEDGERS_count", None)] == 3 and stats.audits == 3
    assert marked[("auditor_NUM_UNDER_REPLICATED_LEDGERS_sum", None)] == 15
    assert marked[("auditor_NUM_UNDER_REPLICATED_LEDGERS", "1.0")] == 12
    assert parsed["replication_worker_NUM_ENTRIES_WRITTEN"].samples[0].value == 40
    written = {
        s.name: s.value for s in parsed["replication_worker_NUM_BYTES_WRITTEN"].samples if s.labels["success"] == "true"
    }
    assert (
        written["replication_worker_NUM_BYTES_WRITTEN_count"] == 40
        and written["replication_worker_NUM_BYTES_WRITTEN_sum"] == 4096
    )
