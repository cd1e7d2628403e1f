"""A real bookied's ``/metrics`` under Java's names, read with prometheus_client's parser:
known adds, reads and failures, a read-only switch and a compaction, each exported figure
checked against what was done; and the series the Pulsar Helm chart's dashboards and the
common alert rules query (tests/support/dashboard_series.txt) answered."""

from __future__ import annotations

import json
import math
import re
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bkctl.wire.client.blocking import BlockingBookKeeper
from bkctl.wire.codecs import v2
from bkctl.wire.codecs.digest import DigestManager, DigestType, master_key
from bkctl.wire.codecs.protocol import RC
from bkctl.wire.metadata.ledger import LedgerMetadata
from tests.support.bookieproc import BookieProcess, WireClient
from tests.support.ports import free_port
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

KEY = master_key(b"pw")
BOOKIE_GC = "/api/v1/bookie/gc"
SERIES = Path(__file__).resolve().parents[1] / "support" / "dashboard_series.txt"
#: what may stay unanswered: DbLedgerStorage's read-ahead cache, Java's thread pools' queues
MAY_REMAIN = re.compile(r"bookie_read(_cache|ahead)_|bookkeeper_server_thread_executor_queue")


def package(ledger, entry, size=100):
    return DigestManager(ledger, DigestType.CRC32C, b"pw").package(entry, -1, 0, bytes([entry % 256]) * size)


class Page:
    """One scrape, parsed by prometheus_client: samples by name."""

    def __init__(self, b: BookieProcess, path: str = "/metrics", port: int | None = None):
        url = f"http://127.0.0.1:{port or b.http_port}{path}"
        with urllib.request.urlopen(url, timeout=10) as resp:
            self.text = resp.read().decode()
        self.families = {f.name: f for f in text_string_to_metric_families(self.text)}
        self.samples = [s for f in self.families.values() for s in f.samples]

    def value(self, name: str, **labels: str) -> float:
        found = [
            s.value for s in self.samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        ]
        assert len(found) == 1, (name, labels, found)
        return found[0]

    def answers(self, selector: str) -> bool:
        m = re.fullmatch(r"([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?", selector)
        assert m, selector
        name, matchers = m[1], re.findall(r'(\w+)(=~|=)"([^"]*)"', m[2] or "")
        # a counter's samples are named with _total by the parser's own convention
        names = {name, name + "_total"} if name in self.families and self.families[name].type == "counter" else {name}
        for s in self.samples:
            if s.name in names and all(
                re.fullmatch(v, s.labels.get(k, "")) if op == "=~" else s.labels.get(k) == v for k, op, v in matchers
            ):
                return True
        return False


def admin(b: BookieProcess, method: str, path: str, body=None):
    req = urllib.request.Request(
        f"http://127.0.0.1:{b.http_port}{path}", method=method, data=None if body is None else json.dumps(body).encode()
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read() or b"null")


def scrape_until(b: BookieProcess, ok, what: str) -> Page:
    """The first scrape for which ``ok(page)`` holds."""

    def attempt():
        page = Page(b)
        return page if ok(page) else None

    return wait_for(attempt, what=what)


def quantiles(page: Page, name: str) -> list[float]:
    return [page.value(name, success="true", quantile=q) for q in ("0.5", "0.99", "0.999", "1.0")]


def test_java_names_count_what_the_bookie_did(bookies, zkstore):
    b = (
        bookies(
            prometheusStatsLatencyRolloverSeconds=3,
            gcWaitTime=1000,
            flushInterval=200,
            logSizeLimit=64 * 1024,
            minorCompactionInterval=0,
            majorCompactionInterval=0,
            forceAllowCompaction="true",
        )
        .serve_http()
        .start()
    )
    ledger = 9
    zkstore.ledgers.create(LedgerMetadata.new([b.bookie_id], 1, 1, password=b"pw"), ledger_id=ledger)
    c = WireClient(b.port)
    bodies = [package(ledger, e, size=100 + e) for e in range(20)]
    slowest = 0.0
    for e, body in enumerate(bodies):
        started = time.perf_counter()
        assert c.v2(v2.AddRequest(2, 0, KEY, body, ledger, e)).rc == RC.EOK
        slowest = max(slowest, time.perf_counter() - started)
    # failures: a wrong master key, a read of a ledger the bookie does not have
    assert c.v2(v2.AddRequest(2, 0, master_key(b"other"), package(ledger, 20), ledger, 20)).rc == RC.EUA
    for e in range(5):
        assert c.v2(v2.ReadRequest(2, 0, ledger, e)).rc == RC.EOK
    assert c.v2(v2.ReadRequest(2, 0, 4242, 0)).rc == RC.ENOLEDGER

    page = scrape_until(
        b,
        lambda p: not math.isnan(p.value("bookkeeper_server_ADD_ENTRY", success="true", quantile="1.0")),
        "a closed window holding the adds",
    )
    for name in ("bookkeeper_server_ADD_ENTRY", "bookkeeper_server_ADD_ENTRY_REQUEST", "bookie_BOOKIE_ADD_ENTRY"):
        assert page.families[name].type == "summary"
        assert page.value(name + "_count", success="true") == 20, name
        assert page.value(name + "_count", success="false") == 1, name
    p50, p99, p999, top = quantiles(page, "bookkeeper_server_ADD_ENTRY")
    total_ms = page.value("bookkeeper_server_ADD_ENTRY_sum", success="true")
    assert 0 < p50 <= p99 <= p999 <= top <= total_ms  # milliseconds, the maximum among them
    assert top <= slowest * 1000  # the bookie's own time is inside the client's round trip
    assert page.value("bookie_journal_JOURNAL_ADD_ENTRY_count", success="true") == 20
    for name in ("bookkeeper_server_READ_ENTRY", "bookkeeper_server_READ_ENTRY_REQUEST", "bookie_read_entry"):
        assert page.value(name + "_count", success="true") == 5, name
        assert page.value(name + "_count", success="false") == 1, name
    # one add at a time: an fsync each, each timed, in milliseconds beside bookied's seconds
    syncs = page.value("bookie_journal_JOURNAL_SYNC_count", success="true")
    assert syncs == page.value("bookie_journal_fsync_latency_seconds_count") >= 20
    assert page.value("bookie_journal_JOURNAL_SYNC_sum", success="true") == pytest.approx(
        page.value("bookie_journal_fsync_latency_seconds_sum") * 1000
    )
    assert page.families["bookie_WRITE_BYTES"].type == "counter"
    assert "# TYPE bookie_WRITE_BYTES counter\nbookie_WRITE_BYTES " in page.text  # Java's name, no _total
    assert page.value("bookie_WRITE_BYTES_total") == sum(map(len, bodies))
    assert page.value("bookie_READ_BYTES_total") == sum(map(len, bodies[:5]))
    assert page.value("bookie_journal_JOURNAL_WRITE_BYTES_total") > sum(map(len, bodies))
    assert page.value("bookie_journal_JOURNAL_QUEUE_SIZE_total") == 0  # idle: nothing queued
    assert page.value("bookie_journal_JOURNAL_FORCE_WRITE_QUEUE_SIZE_total") == 0
    assert page.value("bookkeeper_server_ADD_ENTRY_IN_PROGRESS") == 0
    assert page.value("bookie_SERVER_STATUS") == 1
    ledger_dir = b.settings.get("ledgerDirectories", str(b.ledger_dir))
    current = str(Path(ledger_dir) / "current")
    assert page.value("bookie_ledgers_count", ledgerDir=current, indexDir=current) == 1
    flushed = scrape_until(
        b, lambda p: p.value("bookie_entries_count", ledgerDir=current) == 20, "the adds flushed to the entry log"
    )
    assert flushed.value("bookie_write_cache_size", ledgerDir=current) == 0
    assert flushed.value("bookie_ledger_writable_dirs") == 1 and flushed.value("bookie_ledger_num_dirs") == 1
    usage = flushed.value("bookie_ledger_dir_" + ledger_dir.rstrip("/").replace("/", "_").replace("-", "_") + "_usage")
    assert 0 < usage < 100  # percent
    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "python_gc_objects_collected_total"):
        assert any(s.name == name for s in flushed.samples), name

    # read-only: the alert's 0, an add refused (a failure), writable again
    admin(b, "PUT", "/api/v1/bookie/state/readonly", {"readOnly": True})
    assert Page(b).value("bookie_SERVER_STATUS") == 0
    assert c.v2(v2.AddRequest(2, 0, KEY, package(ledger, 20), ledger, 20)).rc == RC.EREADONLY
    assert Page(b).value("bookkeeper_server_ADD_ENTRY_count", success="false") == 2
    admin(b, "PUT", "/api/v1/bookie/state/readonly", {"readOnly": False})
    assert Page(b).value("bookie_SERVER_STATUS") == 1
    c.close()

    # a compaction: ledgers interleaved in the entry logs, most deleted, a forced major pass
    bk = BlockingBookKeeper(b.uri, add_timeout=10.0, read_timeout=10.0, timeout=60)
    try:
        handles = [bk.create(1, 1, 1, password=b"pw") for _ in range(8)]
        for e in range(40):
            for lh in handles:
                lh.add(bytes([e]) * 500)
        for lh in handles:
            lh.close()
        doomed = [lh.ledger_id for lh in handles[1:]]
        for ledger_id in doomed:
            bk.delete(ledger_id)
    finally:
        bk.close()
    wait_for(lambda: admin(b, "GET", BOOKIE_GC)["ledgersRemoved"] >= len(doomed), what="GC of the deleted")
    admin(b, "PUT", BOOKIE_GC, {"forceMajor": True})
    wait_for(
        lambda: (lambda st: st["majorCompactionCounter"] >= 1 and not st["gcRunning"])(admin(b, "GET", BOOKIE_GC)),
        what="a major compaction",
    )
    page = Page(b)
    status = admin(b, "GET", BOOKIE_GC)
    assert page.value("bookie_MAJOR_COMPACTION_TOTAL_total") == status["majorCompactionCounter"] >= 1
    assert page.value("bookie_MINOR_COMPACTION_TOTAL_total") == status["minorCompactionCounter"]
    assert page.value("bookie_DELETED_LEDGER_TOTAL_total") == status["ledgersRemoved"] == len(doomed)
    assert page.value("bookie_RECLAIMED_COMPACTION_SPACE_BYTES_total") == status["reclaimedSpaceViaCompaction"] > 0
    assert page.value("bookie_RECLAIMED_DELETION_SPACE_BYTES_total") == status["reclaimedSpaceViaDeletes"]
    logs = admin(b, "GET", "/api/v1/bookie/gc_details")[0]["entryLogs"]
    assert page.value("bookie_ACTIVE_ENTRY_LOG_TOTAL") == len(logs)
    assert page.value("bookie_ACTIVE_ENTRY_LOG_SPACE_BYTES") == sum(log["liveBytes"] for log in logs)
    assert page.value("bookie_ACTIVE_LEDGER_TOTAL") == 2  # ledger 9 and the one kept

    # the dashboards' and the alerts' series
    lines = [line.split(" ", 1) for line in SERIES.read_text().splitlines() if line and not line.startswith("#")]
    missing: dict[str, list[str]] = {}
    for where, selector in lines:
        if not page.answers(selector):
            missing.setdefault(where, []).append(selector)
    board = [s for w, s in lines if w == "bookkeeper.json"]
    assert len(board) - len(missing.get("bookkeeper.json", [])) >= 31, missing
    assert all(MAY_REMAIN.match(s) for s in missing.get("bookkeeper.json", [])), missing
    assert "bookkeeper-compaction.json" not in missing and "alerts" not in missing, missing


def test_prometheus_stats_http_port_serves_metrics_without_the_admin(bookies):
    port = free_port()
    b = bookies(prometheusStatsHttpPort=port, prometheusStatsHttpAddress="127.0.0.1").start()
    page = Page(b, port=port)
    assert page.value("bookie_SERVER_STATUS") == 1
    # what Prometheus asks for first: OpenMetrics, which the OpenMetrics parser reads whole
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics

    accept = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4"
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Accept": accept})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
        om = {f.name: f for f in parse_openmetrics(resp.read().decode())}
    assert om["bookie_SERVER_STATUS"].samples[0].value == 1
    assert om["bookkeeper_server_ADD_ENTRY"].type == "summary" and om["bookie_WRITE_BYTES"].type == "unknown"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/bookie/state", timeout=10)
    assert refused.value.code == 404
