"""Autorecovery you can see (issue 23 items 5 and 6), with real ZooKeeper, real bookieds and a real
`bkctl autorecovery run` daemon: its log says its vote, its role and each repair; `autorecovery
status` names the lost bookie, since when, what the auditor waits for (the delay, held back while
disabled) and each ledger's state; `query-status` names the worker by its daemon id and why its
ledger is stuck -- from ZooKeeper, not from the daemon's log."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.cli import bkctl, ok
from tests.support.ledgers import make_ledger
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(300)


def status(uri) -> dict:
    return json.loads(ok(bkctl(uri, "--json", "autorecovery", "status")))


def query(uri) -> list[dict]:
    return [json.loads(line) for line in ok(bkctl(uri, "--json", "autorecovery", "query-status")).splitlines()]


def test_lost_bookie_delay_held_back_and_a_stuck_ledger_are_visible(
    bookie_cluster, metadata_uri, zkstore, writer, ar_daemon
):
    procs = bookie_cluster(3, zkTimeout=4000)
    uri = metadata_uri
    lid = make_ledger(writer, 3, 2, entries=20)  # every bookie in its ensemble: no replacement once one is lost
    _proc, log_path = ar_daemon(
        "ar-visible",
        "lostBookieRecoveryDelay=600",
        "auditorPeriodicBookieCheckInterval=0",
        "auditorPeriodicCheckInterval=0",
        "lockReleaseOfFailedLedgerGracePeriod=300000",
    )
    wait_for(what="the auditor", predicate=lambda: zkstore.auditor.current() == "ar-visible:3181", timeout=60)
    wait_for(what="its log", predicate=lambda: "is the auditor" in log_path.read_text(), timeout=30)
    log = log_path.read_text()
    assert "ar-visible:3181 voted as V_" in log and "INFO" in log

    victim = procs[0]
    victim.stop()  # graceful: its registration goes at once
    wait_for(
        what="the auditor to see the lost bookie",
        predicate=lambda: any(b["seen_by_auditor"] for b in status(uri)["lost_bookies"]),
        timeout=60,
    )
    doc = status(uri)
    [lost] = doc["lost_bookies"]
    assert lost["bookie_id"] == victim.bookie_id and lost["lost_since"] and 0 < lost["due_in"] <= 600
    assert "lostBookieRecoveryDelay" in doc["auditor_waits_for"] and doc["underreplicated"] == 0
    human = ok(bkctl(uri, "autorecovery", "status"))
    assert victim.bookie_id in human and "due in" in human

    # disabled: the audit is held back, and says so
    ok(bkctl(uri, "autorecovery", "disable"))
    ok(bkctl(uri, "autorecovery", "lost-bookie-delay", "0"))
    wait_for(
        what="the held-back audit",
        predicate=lambda: (
            "held back" in status(uri)["auditor_waits_for"] and "1 ledgers" in status(uri)["auditor_waits_for"]
        ),
        timeout=60,
    )
    assert zkstore.underreplication.count() == 0

    # enabled: marked, taken by the worker, stuck (no writable bookie outside the ensemble) -- and why
    ok(bkctl(uri, "autorecovery", "enable"))
    wait_for(what="the stuck ledger", predicate=lambda: [r for r in query(uri) if r["last_failure"]], timeout=120)
    [row] = query(uri)
    assert row["ledger_id"] == lid and row["worker"] == "ar-visible:3181" and row["lock"] == "ar-visible:3181"
    assert row["state"] == "held-failed" and "writable bookie outside the ensemble" in row["last_failure"]["reason"]
    assert row["until"] - row["last_failure"]["at"] == 300_000
    human = ok(bkctl(uri, "autorecovery", "query-status"))
    assert "ar-visible:3181" in human and "writable bookie outside the ensemble" in human
    doc = status(uri)
    [ledger] = doc["ledgers"]
    assert ledger["ledger_id"] == lid and ledger["missing_replicas"] == [victim.bookie_id]
    assert ledger["state"] == "held-failed" and ledger["worker"] == "ar-visible:3181"
    assert [w["worker"] for w in doc["workers"]] == ["ar-visible:3181"]
    assert "re-replication failed" in log_path.read_text()


def test_autorecovery_run_names_why_it_cannot_start_and_honours_timeout(tmp_path):
    env = dict(os.environ, NO_COLOR="1")
    env.pop("BKCTL_METADATA_URI", None)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "bkctl",
            "-m",
            "zk+hierarchical://127.0.0.1:1/ledgers",
            "--timeout",
            "1",
            "autorecovery",
            "run",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert r.returncode == 5
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("bkctl: error: the autorecovery daemon could not start: ")
    assert "cannot connect to ZooKeeper at 127.0.0.1:1 within 1s" in last
    assert "see the log above" not in r.stderr
