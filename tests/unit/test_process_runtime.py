"""wire.process.runtime: the garbage collector settings of bookied and bkctl's client, and
Twisted loaded without TLS where a process uses none."""

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


TWISTED_PROBE = """
import json, sys
from bkctl.wire.process.runtime import twisted_without_tls
with twisted_without_tls(unless=sys.argv[1] == "tls"):
    from twisted.internet import reactor, tcp
has_tls = hasattr(tcp.Connection, "startTLS")
loaded = "OpenSSL.SSL" in sys.modules
import OpenSSL  # importable again after the block
print(json.dumps({"has_tls": has_tls, "loaded": loaded}))
"""


def test_twisted_loads_without_tls_inside_the_block_unless_told_and_openssl_imports_after():
    def probe(word: str) -> dict:
        done = subprocess.run([sys.executable, "-c", TWISTED_PROBE, word], capture_output=True, text=True, check=True)
        return json.loads(done.stdout)

    assert probe("plain") == {"has_tls": False, "loaded": False}
    assert probe("tls") == {"has_tls": True, "loaded": True}


def test_what_loads_in_the_block_loads_with_the_collector_off_and_is_frozen_after():
    import gc

    from bkctl.wire.process.runtime import frozen_when_loaded

    enabled, frozen = gc.isenabled(), gc.get_freeze_count()
    try:
        with frozen_when_loaded():
            assert not gc.isenabled()
            loaded = [[] for _ in range(100)]  # what an import would allocate
        assert gc.isenabled()  # collected again once loaded
        assert gc.get_freeze_count() >= frozen + len(loaded)
        gc.disable()
        with frozen_when_loaded():
            pass
        assert not gc.isenabled()  # left as found
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()


def test_the_collector_is_held_off_until_the_last_holder_leaves_and_left_off_if_it_was():
    import gc
    import threading

    from bkctl.wire.process.runtime import collector_held_off

    enabled = gc.isenabled()
    inside, leave = threading.Event(), threading.Event()

    def other_holder():
        with collector_held_off():
            inside.set()
            assert leave.wait(30)

    try:
        gc.enable()
        t = threading.Thread(target=other_holder)
        with collector_held_off():
            assert not gc.isenabled()
            t.start()
            assert inside.wait(30)
        assert not gc.isenabled()  # the other thread still holds it off
        leave.set()
        t.join()
        assert gc.isenabled()  # the last one out turned it back on
        with collector_held_off(), collector_held_off():
            assert not gc.isenabled()
        assert gc.isenabled()
        gc.disable()
        try:
            with collector_held_off():
                raise RuntimeError("a flush that fails")
        except RuntimeError:
            pass
        assert not gc.isenabled()  # left off as found
    finally:
        leave.set()
        if enabled:
            gc.enable()
