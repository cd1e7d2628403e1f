"""Ctrl-C while a command waits on the reactor thread stops what it waits for.

In the shell the reactor thread outlives the command: a call left running there
after Ctrl-C (a bench's adds, a tail's long poll) goes on using the bookies
while the next commands run.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

import pytest
from twisted.internet import defer

from tests.support.waiting import wait_for


def _main_thread_waits() -> bool:
    """Whether the main thread is blocked in a threading wait (crochet's)."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    return frame is not None and frame.f_code.co_name == "wait" and frame.f_code.co_filename == threading.__file__


def _ctrl_c_once(started: threading.Event) -> threading.Thread:
    """Send this process SIGINT (as a terminal's Ctrl-C) once ``started`` is set
    and the main thread waits for the result."""

    def send():
        started.wait(10)
        wait_for(_main_thread_waits, timeout=10, what="the main thread waiting")
        os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="needs the main thread")
def test_ctrl_c_cancels_the_call_in_the_reactor():
    from bkctl.wire.client.blocking import run_in_reactor

    started, cancelled = threading.Event(), threading.Event()

    def forever():
        started.set()
        return defer.Deferred(canceller=lambda _d: cancelled.set())

    _ctrl_c_once(started)
    with pytest.raises(KeyboardInterrupt):
        run_in_reactor(forever, timeout=None)
    wait_for(cancelled.is_set, timeout=10)


def test_a_call_given_up_on_leaves_no_unhandled_cancellation():
    """The CancelledError of a call whose caller gave up (and was told: OperationTimedOut) is no
    one's to handle: crochet logged it as CRITICAL "Unhandled error in EventualResult" once the
    result was collected -- in the shell after each timeout, in the suite in the next test's log."""
    import gc

    from twisted.logger import globalLogPublisher

    from bkctl.wire.client.blocking import OperationTimedOut, run_in_reactor

    logged: list[dict] = []
    globalLogPublisher.addObserver(logged.append)
    try:
        with pytest.raises(OperationTimedOut):
            run_in_reactor(defer.Deferred, timeout=0.01)
        with pytest.raises(ValueError):  # a call that fails, waited for: its failure is the caller's
            run_in_reactor(defer.fail, ValueError("taken"))
        for _ in range(2):  # the reactor ran the cancel, then let go of what it held
            run_in_reactor(lambda: None)
        gc.collect()
    finally:
        globalLogPublisher.removeObserver(logged.append)
    unhandled = [e for e in logged if e.get("failure") is not None or e.get("log_failure") is not None]
    assert unhandled == []


class _Handle:
    """A ledger handle whose adds complete when the test says so."""

    def __init__(self):
        self.pending: list[defer.Deferred] = []
        self.added = 0

    def add_entry(self, payload):
        self.added += 1
        d = defer.Deferred()
        self.pending.append(d)
        return d

    def ack_all(self):
        pending, self.pending = self.pending, []
        for i, d in enumerate(pending):
            d.callback(i)


def test_a_cancelled_bench_adds_no_more_entries():
    from bkctl.ops.bench import drive_adds

    handle = _Handle()
    done = drive_adds(None, handle, count=1000, payload=b"x", inflight=4, on_add=None)
    assert handle.added == 4
    handle.ack_all()  # each ack sends the next add
    assert handle.added == 8
    done.addErrback(lambda f: f.trap(defer.CancelledError))
    done.cancel()
    handle.ack_all()  # the adds in flight finish...
    assert handle.added == 8  # ...and none follows
    assert done.called


def test_a_bench_still_runs_to_its_count():
    from bkctl.ops.bench import drive_adds

    handle = _Handle()
    done = drive_adds(None, handle, count=10, payload=b"x", inflight=4, on_add=None)
    results = []
    done.addCallback(results.append)
    while handle.pending:
        handle.ack_all()
    assert handle.added == 10 and len(results[0]) == 10


def test_a_failed_add_fails_the_bench_and_no_more_adds_follow():
    """An add's failure ends the run with that failure; the adds in flight finish, none follows."""
    from bkctl.ops.bench import drive_adds

    handle = _Handle()
    done = drive_adds(None, handle, count=100, payload=b"x", inflight=4, on_add=None)
    errors: list = []
    done.addErrback(errors.append)
    first, *rest = handle.pending
    handle.pending = rest
    first.errback(ValueError("bookie refused"))
    assert len(errors) == 1 and errors[0].check(ValueError)
    handle.ack_all()
    assert handle.added == 4 and not handle.pending


def test_a_bench_reports_its_progress_in_steps_of_a_200th_and_at_the_end():
    """on_add(n) is called every 1/200th of the adds (not once per add), and the steps sum to the count."""
    from bkctl.ops.bench import drive_adds

    handle = _Handle()
    steps: list[int] = []
    done = drive_adds(None, handle, count=1010, payload=b"x", inflight=7, on_add=steps.append)
    while handle.pending:
        handle.ack_all()
    assert done.called and handle.added == 1010
    assert steps == [5] * 202 and sum(steps) == 1010
    steps.clear()
    drive_adds(None, handle, count=3, payload=b"x", inflight=2, on_add=steps.append)
    while handle.pending:
        handle.ack_all()
    assert steps == [1, 1, 1]


def test_the_daemons_logging_is_put_back_after_it():
    import logging

    from bkctl.ops.autorecovery_daemon import daemon_logging

    root = logging.getLogger()
    before = list(root.handlers), root.level, logging.getLogger("kazoo").level
    with daemon_logging():
        assert root.getEffectiveLevel() <= logging.INFO
    assert (list(root.handlers), root.level, logging.getLogger("kazoo").level) == before


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="needs the main thread")
def test_a_ctrl_c_that_python_swallowed_still_stops_the_wait():
    """SIGINT's KeyboardInterrupt raised inside a weakref callback is printed as "Exception
    ignored" and lost; the wait must still end with KeyboardInterrupt and cancel the call."""
    import weakref

    from bkctl.wire.client.blocking import run_in_reactor

    started, cancelled = threading.Event(), threading.Event()

    class Thing:
        pass

    def lose_a_ctrl_c():
        # in the main thread, as the signal handler runs there: the interrupt is raised in a
        # weakref callback, where Python reports it and goes on
        thing = Thing()
        weakref.finalize(thing, lambda: signal.raise_signal(signal.SIGINT))
        del thing

    calls: list[defer.Deferred] = []

    def slow():  # ends by itself after 10 s: a lost Ctrl-C lets the wait run to its end
        from twisted.internet import reactor

        started.set()
        d = defer.Deferred(canceller=lambda _d: cancelled.set())
        calls.append(reactor.callLater(10, d.callback, "ran to its end"))
        return d

    def send():
        started.wait(10)
        wait_for(_main_thread_waits, timeout=10, what="the main thread waiting")
        # the handler runs in the main thread: have it lose the interrupt in a finalizer
        signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)

    previous = signal.signal(signal.SIGUSR1, lambda *_: lose_a_ctrl_c())
    try:
        threading.Thread(target=send, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            run_in_reactor(slow, timeout=None)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    wait_for(cancelled.is_set, timeout=10)
    from twisted.internet import reactor

    reactor.callFromThread(lambda: [c.cancel() for c in calls if c.active()])
