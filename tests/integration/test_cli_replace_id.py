"""bkctl bookie replace-id on real ZooKeeper metadata: dry run, CAS, idempotence, interruption."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from bkctl.ops.replace_id import replace_bookie_id
from bkctl.wire.metadata.ledger import LedgerMetadata
from tests.support.cli import REPO, bkctl

OLD, NEW = "10.0.0.1:3181", "bk1.example.com:3181"
OTHERS = ["10.0.0.2:3181", "10.0.0.3:3181", "10.0.0.4:3181"]


@pytest.fixture(autouse=True)
def new_id_has_a_cookie(zkstore):
    """NEW is known to the cluster, as after `cookie admin --hostname`."""
    zkstore.cookies.put(NEW, f'5\nbookieHost: "{NEW}"\njournalDir: "/j"\nledgerDirs: "1\\t/l"\n'.encode())


def _make(zkstore, n: int) -> dict[int, int]:
    """n ledgers, every other one naming OLD (some in two segments); returns id -> segments naming OLD."""
    naming = {}
    for i in range(n):
        first = [OLD, OTHERS[0], OTHERS[1]] if i % 2 == 0 else OTHERS
        md = LedgerMetadata.new(first, 2, 2)
        if i % 4 == 0:
            md = md.with_ensemble_change(10, [OLD, OTHERS[1], OTHERS[2]])
        elif i % 3 == 0:
            md = md.with_ensemble_change(5, [OTHERS[2], OTHERS[1], OTHERS[0]])
        if i % 5 == 0:
            md = md.closed(20, 100)
        ledger_id, _ = zkstore.ledgers.create(md)
        segs = sum(1 for _, ens in md.ensembles if OLD in ens)
        if segs:
            naming[ledger_id] = segs
    return naming


def _naming(zkstore, bookie):
    return {i for i in zkstore.ledgers.ids() if bookie in zkstore.ledgers.read(i)[0].bookies}


def test_replace_id_dry_run_then_real_then_again(metadata_uri, zkstore):
    naming = _make(zkstore, 12)
    before = {i: zkstore.ledgers.read(i) for i in zkstore.ledgers.ids()}

    dry = bkctl(metadata_uri, "--json", "bookie", "replace-id", OLD, NEW, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    doc = json.loads(dry.stdout)
    assert doc["totals"]["planned"] == len(naming) and doc["totals"]["segments"] == sum(naming.values())
    assert {i: zkstore.ledgers.read(i) for i in zkstore.ledgers.ids()} == before  # nothing changed

    refused = bkctl(metadata_uri, "bookie", "replace-id", OLD, NEW)  # no terminal, no --force
    assert refused.returncode == 2 and _naming(zkstore, OLD) == set(naming)

    real = bkctl(metadata_uri, "--json", "bookie", "replace-id", OLD, NEW, "--force", "--parallel", "4")
    assert real.returncode == 0, real.stderr
    doc = json.loads(real.stdout)
    assert doc["totals"]["updated"] == len(naming) and doc["totals"]["segments"] == sum(naming.values())
    assert _naming(zkstore, OLD) == set()
    assert _naming(zkstore, NEW) == set(naming)
    for i, (md, _) in before.items():
        after, _ = zkstore.ledgers.read(i)
        assert after.state == md.state and after.last_entry_id == md.last_entry_id
        assert [tuple(NEW if b == OLD else b for b in ens) for _, ens in md.ensembles] == [
            ens for _, ens in after.ensembles
        ]

    again = json.loads(bkctl(metadata_uri, "--json", "bookie", "replace-id", OLD, NEW, "--force").stdout)
    assert again["totals"]["matched"] == 0


def test_replace_id_conflicts_and_running_bookie(metadata_uri, zkstore):
    both, _ = zkstore.ledgers.create(LedgerMetadata.new([OLD, NEW, OTHERS[0]], 2, 2))
    fine, _ = zkstore.ledgers.create(LedgerMetadata.new([OLD, OTHERS[0], OTHERS[1]], 2, 2))
    zkstore.registration.register(OLD)
    running = bkctl(metadata_uri, "bookie", "replace-id", OLD, NEW, "--force")
    assert running.returncode == 4 and "registered" in running.stderr
    zkstore.registration.unregister(OLD)
    res = bkctl(metadata_uri, "--json", "bookie", "replace-id", OLD, NEW, "--force")
    assert res.returncode == 4
    rows = {r["ledger_id"]: r["status"] for r in json.loads(res.stdout)["ledgers"]}
    assert rows == {both: "conflict", fine: "updated"}
    assert OLD in zkstore.ledgers.read(both)[0].bookies
    assert bkctl(metadata_uri, "bookie", "replace-id", OLD, OLD, "--force").returncode == 2


def test_replace_id_retries_after_a_concurrent_change(metadata_uri, zkstore):
    ledger_id, _ = zkstore.ledgers.create(LedgerMetadata.new([OLD, OTHERS[0], OTHERS[1]], 2, 2))
    real_update = zkstore.ledgers.update
    raced = []

    def racing_update(lid, md, version):
        if not raced:  # a writer's ensemble change lands between our read and our write
            cur, v = zkstore.ledgers.read(lid)
            real_update(lid, cur.with_ensemble_change(7, [OLD, OTHERS[1], OTHERS[2]]), v)
            raced.append(True)
        return real_update(lid, md, version)

    zkstore.ledgers.update = racing_update
    doc = replace_bookie_id(zkstore, OLD, NEW)
    assert raced and doc.totals.updated == 1 and doc.totals.segments == 2
    md, _ = zkstore.ledgers.read(ledger_id)
    assert [first for first, _ in md.ensembles] == [0, 7] and OLD not in md.bookies


def test_replace_id_interrupted_then_finished(metadata_uri, zkstore):
    naming = _make(zkstore, 16)
    env = dict(os.environ, BKCTL_METADATA_URI=metadata_uri, NO_COLOR="1", PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "bkctl", "bookie", "replace-id", OLD, NEW, "--force", "--rate", "2"],
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(_naming(zkstore, OLD)) == len(naming):
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    left = _naming(zkstore, OLD)
    assert 0 < len(left) < len(naming)  # interrupted half-way: some done, some not
    for i in set(naming) - left:
        assert NEW in zkstore.ledgers.read(i)[0].bookies
    doc = json.loads(bkctl(metadata_uri, "--json", "bookie", "replace-id", OLD, NEW, "--force").stdout)
    assert doc["totals"]["updated"] == len(left)
    assert _naming(zkstore, OLD) == set() and _naming(zkstore, NEW) == set(naming)
