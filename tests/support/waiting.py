"""Waiting for something a real process or server does, without asserting how long it takes."""

from __future__ import annotations

import os
import signal
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


def stop_process(pid: int, timeout: float = 60.0) -> None:
    """SIGSTOP ``pid`` and return only once every thread of it is stopped.

    ``kill`` returns as soon as the signal is queued: the process stops when the thread
    given it is next scheduled, and its other threads run on until then: a ZooKeeper
    answered 250 reads of a walk in the 20 ms after ``kill`` returned, and once (CI) the
    whole walk a test meant to stop.  A test that claims "stopped before X" does X after
    this returns.  ``timeout`` only guards against a hang.
    """
    os.kill(pid, signal.SIGSTOP)
    wait_for(lambda: _every_thread_stopped(pid), timeout, what=f"every thread of process {pid} stopped", interval=0.001)


def _every_thread_stopped(pid: int) -> bool:
    states = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        threads = []
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
        states.append(stat[stat.rfind(")") + 2])  # the state letter follows "pid (comm) "
    if all(state in "ZX" for state in states):
        raise AssertionError(f"process {pid} ended: it cannot be stopped")
    return all(state in "TtZX" for state in states)
