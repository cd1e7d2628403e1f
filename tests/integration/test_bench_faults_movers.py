"""The movers' fault campaign (``bench/faults.py --movers``) runs one short round end to end: a real
ZooKeeper, real bookieds behind its TCP proxies, ``bkctl drain`` run as a user runs it while the
bookie it drains is SIGKILLed, then every check; the report says what it ran and found nothing
(exit 0).  The figures of a longer campaign are the bench's (docs/architecture.md)."""

import json
import os
import signal
import subprocess
import sys

from tests.support.cli import REPO


def test_one_round_of_the_movers_campaign_runs_and_checks(tmp_path):
    argv = [sys.executable, str(REPO / "bench" / "faults.py"), "--movers", "--rounds", "1", "--seed", "73"]
    argv += ["--ops", "drain", "--faults", "kill-source", "--dir", str(tmp_path), "--json"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    try:
        out, err = proc.communicate(timeout=400)  # a hang guard, not a claim about speed
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGTERM)  # the campaign stops its processes by pid on SIGTERM
        out, err = proc.communicate(timeout=120)
        raise AssertionError(f"the campaign did not end: {err.decode()[-2000:]}") from None
    report = json.loads(out.decode().strip().splitlines()[-1])
    assert proc.returncode == 0, (report["findings"], report["notes"], err.decode()[-2000:])
    assert report["rounds"] == 1
    assert report["faults"] == {"kill-source": 1}
    assert report["kills"]["bookies"] == 1
    assert report["bkctl_runs"]["drain"] >= 1
    assert report["entries_checked"] > 0 and report["replicas_checked"] >= 2 * report["entries_checked"]
    assert report["findings"] == {k: [] for k in report["findings"]}
    assert list(tmp_path.iterdir()) == []  # its directory removed: nothing left running in it
