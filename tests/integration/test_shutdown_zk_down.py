"""SIGTERM ends the daemons while their ZooKeeper is down (issue 16, item 4).

Each test runs a ZooKeeper of its own so it can stop it: bookied (alone and with
its autorecovery daemon) and `bkctl autorecovery run` get a SIGTERM once
ZooKeeper is gone, and must exit 0 with no traceback.  Before the fix bookied
logged "shutting down" and then hung in kazoo's unregister for as long as
ZooKeeper stayed away.  The 30 s wait below is a hang detector, not a speed
claim: shutdownTimeoutMs is 2 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bkctl.wire import fastpath
from bkctl.wire.metadata.zk import ZKMetadataStore
from tests.support.bookieproc import BookieProcess
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def _noticed(log: Path) -> bool:
    """Whether the process logging to ``log`` has seen its ZooKeeper connection drop (kazoo's
    WARNING, which bookied keeps and ``bkctl -v`` shows): its session is reconnecting."""
    return "Connection dropped" in log.read_text()


def _registered(uri: str, bookie_id: str) -> bool:
    with ZKMetadataStore(uri, timeout=10, twins=fastpath.selected()) as zk:
        return bookie_id in zk.registration.writable_bookies()


@pytest.mark.parametrize("autorecovery", [False, True], ids=["bookie", "bookie+autorecovery"])
def test_sigterm_ends_bookied_while_zookeeper_is_down(tmp_path, own_zookeeper, autorecovery):
    zk, uri = own_zookeeper
    bookie = BookieProcess(
        tmp_path / "b0", uri, shutdownTimeoutMs=2000, autoRecoveryDaemonEnabled=str(autorecovery).lower()
    )
    try:
        bookie.start()
        # registered by its own account (the znode can exist before the bookie has its answer:
        # ZooKeeper stopped then is a failed start-up, exit 1, not the shutdown tested here)
        wait_for(
            lambda: (
                _registered(uri, bookie.bookie_id) and f"registered {bookie.bookie_id}" in bookie.log_path.read_text()
            )
        )
        zk.stop()
        wait_for(lambda: _noticed(bookie.log_path), what="the bookie's session to notice: kazoo reconnecting")
        # an impatient operator sends SIGTERM again and again until the bookie is gone: no second
        # shutdown, no traceback, and none of them kills it (not even one that arrives after the
        # reactor stopped, while the interpreter finishes: exit status 0, not -15)
        code = None
        give_up = time.monotonic() + 30
        while code is None and time.monotonic() < give_up:
            bookie.proc.send_signal(signal.SIGTERM)  # not once it has ended (its pid may be reaped)
            try:
                code = bookie.proc.wait(timeout=0.02)
            except subprocess.TimeoutExpired:
                pass
        if code is None:
            pytest.fail(f"bookied still running 30 s after SIGTERM with ZooKeeper down:\n{bookie.log_tail()}")
        log = bookie.log_path.read_text()
        assert code == 0, log
        assert "Traceback" not in log
        assert "could not unregister" in log or "did not finish within" in log
    finally:
        bookie.kill()


def test_sigterm_ends_autorecovery_run_while_zookeeper_is_down(tmp_path, own_zookeeper):
    zk, uri = own_zookeeper
    log_path = tmp_path / "autorecovery.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bkctl", "-m", uri, "-v", "autorecovery", "run", "--bookie-id", "auditor-test:3181"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for(lambda: "autorecovery started for" in log_path.read_text())
        zk.stop()
        wait_for(lambda: _noticed(log_path), what="the daemon's session to notice: kazoo reconnecting")
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"autorecovery run still running 30 s after SIGTERM with ZooKeeper down:\n"
                f"{log_path.read_text()[-3000:]}"
            )
        text = log_path.read_text()
        assert code == 0, text
        assert "Traceback" not in text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sandbox_down_stops_bookies_cleanly_when_zookeeper_died(tmp_path):
    """Its ZooKeeper SIGKILLed, `sandbox down` still gets a clean stop from every
    bookie (their logs end with "stopped"), not a SIGKILL after the grace."""
    from bkctl.sandbox import cluster
    from bkctl.sandbox import state as sandbox_state
    from bkctl.sandbox.zookeeper import pid_alive

    d = tmp_path / "sbx"
    try:
        doc = cluster.sandbox_up(d, bookies=2)
        bookies = sandbox_state.load_state(d)["bookies"]
        os.kill(int(doc["zookeeper"]["pid"]), signal.SIGKILL)
        # every bookie knows ZooKeeper is gone (else its unregister waits on a connection it
        # still believes in, and says something else)
        wait_for(lambda: all(_noticed(Path(b["log"])) for b in bookies), what="every bookie to notice")
        result = cluster.sandbox_down(d, grace=20)
        assert sorted(s["kind"] for s in result["stopped"]) == ["bookie", "bookie"]
        for b in bookies:
            assert not pid_alive(int(b["pid"]))
            lines = Path(b["log"]).read_text().splitlines()
            # nothing after "stopped": the session was closed, so kazoo's reconnect loop ended
            assert lines[-1].endswith("INFO bookied: stopped"), lines[-5:]
            assert any("could not unregister: not connected to ZooKeeper" in line for line in lines)
            assert not any("Traceback" in line for line in lines)
    finally:
        if sandbox_state.load_state(d):
            cluster.sandbox_down(d, grace=5)
