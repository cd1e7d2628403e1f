"""Waiting for something a real process or server does, without asserting how long it takes."""

from __future__ import annotations

import time


def wait_for(predicate=None, timeout: float = 60.0, what="condition", interval: float = 0.05):
    """Poll ``predicate`` until it returns something true and return that.

    ``timeout`` is a generous bound so that a hang fails the test instead of
    stalling the suite -- never a claim about speed.  AssertionError naming
    ``what`` when it runs out (a callable ``what`` is called then, so that the
    message can say what was last seen).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what() if callable(what) else what}")
        time.sleep(interval)
