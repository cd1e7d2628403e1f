"""wire.process.runtime: the garbage collector settings of bookied and bkctl's client."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import gc, json
from bkctl.wire.process.runtime import GC_THRESHOLD, settle_garbage_collector
before = gc.get_freeze_count()
settle_garbage_collector()
print(json.dumps({"threshold": gc.get_threshold(), "want": GC_THRESHOLD,
                  "frozen_before": before, "frozen": gc.get_freeze_count()}))
"""


def test_settling_freezes_what_was_loaded_and_raises_the_young_threshold():
    # in a process of its own: a frozen collector would outlive this test
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    doc = json.loads(out)
    assert doc["threshold"] == list(doc["want"]) and doc["want"][0] > 700  # CPython's default is 700
    assert doc["frozen_before"] == 0 and doc["frozen"] > 1000  # everything imported so far
