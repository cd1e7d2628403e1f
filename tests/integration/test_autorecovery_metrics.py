"""``bkctl autorecovery run --metrics-port``: the daemon's figures under Java's names on a port
of its own, while it runs; a port already taken stops it from starting (exit 5)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.cli import env_for
from tests.support.ports import free_port
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def daemon(uri: str, port: int) -> subprocess.Popen:
    args = [sys.executable, "-m", "bkctl", "autorecovery", "run", "--bookie-id", "metrics-test:3181"]
    args += ["--metrics-port", str(port), "--metrics-host", "127.0.0.1"]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env_for(uri))


def scrape(port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_the_daemon_serves_java_names_while_it_runs(metadata_uri):
    port = free_port()
    proc = daemon(metadata_uri, port)
    try:
        families = wait_for(lambda: scrape(port), what="the daemon's /metrics")
        marked = families["auditor_NUM_UNDER_REPLICATED_LEDGERS"]
        assert marked.type == "summary"
        counts = {s.labels["success"]: s.value for s in marked.samples if s.name.endswith("_count")}
        assert counts["false"] == 0 and counts["true"] >= 0
        for name in (
            "replication_worker_NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED",
            "replication_worker_NUM_ENTRIES_WRITTEN",
        ):
            assert families[name].type == "counter" and families[name].samples[0].value == 0, name
        assert "process_cpu_seconds" in families
        with pytest.raises(urllib.error.HTTPError) as other:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/bookie/state", timeout=5)
        assert other.value.code == 404
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, proc.stderr.read().decode() if proc.stderr else ""
    assert scrape(port) is None  # gone with the daemon


def test_a_taken_metrics_port_stops_the_start(metadata_uri):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        proc = daemon(metadata_uri, taken.getsockname()[1])
        assert proc.wait(60) == 5
        assert b"could not start" in proc.stderr.read()
