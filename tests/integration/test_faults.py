"""The standing fault harness, short: 5 rounds of writes under random faults, zero loss (issue 16, item 5).

The long run (100 rounds) is a benchmark: ``python bench/faults.py``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_five_rounds_of_faults_lose_no_acknowledged_entry(tmp_path):
    out = subprocess.run([sys.executable, str(REPO / "bench" / "faults.py"), "--rounds", "5", "--seed", "20261123",
                          "--json", "--dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=900, cwd=REPO)
    assert out.stdout.strip(), out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["losses"] == [], report["losses"][:20]
    assert out.returncode == 0, out.stderr[-3000:]
    assert report["rounds"] == 5 and sum(report["faults"].values()) >= 5
    assert report["entries_checked"] > 1000 and report["tail_entries_checked"] > 0
    if os.environ.get("CI") == "true":  # CI runs as root: the disk faults must be part of it
        assert report["disk_faults"], "the harness could not mount its small filesystems"
