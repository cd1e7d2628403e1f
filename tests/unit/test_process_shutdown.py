"""The daemons' bounded shutdown tools (bkctl.wire.process.shutdown), each in a
child process of its own: they deal in signals and os._exit."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

# A daemon that has stopped: its Python SIGTERM handler is still installed and
# something slow is torn down while the interpreter finalizes.
_FINISHING_DAEMON = textwrap.dedent("""
    import os, signal, sys, time
    from bkctl.wire.process.shutdown import ignore_late_signals

    signal.signal(signal.SIGTERM, lambda *_: None)

    class SlowTeardown:
        # torn down with the module, after Python has reset its signal handlers
        def __del__(self, write=os.write, sleep=time.sleep):
            write(1, b"finalizing\\n")
            sleep(2)

    teardown = SlowTeardown()
    if sys.argv[1] == "ignore":
        ignore_late_signals()
    print("exiting", flush=True)
    sys.exit(0)
""")


def _sigterm_while_finalizing(mode: str) -> int:
    proc = subprocess.Popen([sys.executable, "-c", _FINISHING_DAEMON, mode], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"exiting\n"
        assert proc.stdout.readline() == b"finalizing\n"  # the interpreter is finishing, in SlowTeardown
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_sigterm_while_the_interpreter_finishes_does_not_kill_a_stopped_daemon():
    # the hazard: Python puts SIG_DFL back while it finalizes, and the signal kills
    assert _sigterm_while_finalizing("keep") == -signal.SIGTERM
    assert _sigterm_while_finalizing("ignore") == 0


_STUCK_SHUTDOWN = textwrap.dedent("""
    import sys, threading
    from bkctl.wire.process.shutdown import ExitDeadline

    deadline = ExitDeadline("test shutdown")
    if sys.argv[1:]:
        deadline.doing(sys.argv[1])
    deadline.arm(0.2, lambda: 7)
    threading.Event().wait(60)  # a shutdown that never finishes
""")


@pytest.mark.parametrize("step", [None, "closing the entry stores (flushing their write caches)"])
def test_the_exit_deadline_ends_a_stuck_shutdown_with_its_code_and_says_why(step):
    # the child would wait 60 s: a run past the timeout (TimeoutExpired) is the deadline not firing
    done = subprocess.run(
        [sys.executable, "-c", _STUCK_SHUTDOWN, *([step] if step else [])], capture_output=True, timeout=30
    )
    assert done.returncode == 7
    assert b"test shutdown did not finish within 0.2 s" in done.stderr
    # the step it was stuck in, not a guess at ZooKeeper (which may be fine)
    assert b"ZooKeeper" not in done.stderr, done.stderr
    if step:
        assert f"within 0.2 s (still {step}); exiting now".encode() in done.stderr


class _ThreadSafeClock:
    """A task.Clock whose callFromThread queues the call for the test to run in its own thread."""

    def __init__(self):
        from twisted.internet import task

        self.clock = task.Clock()
        self.from_threads = []

    def callLater(self, *args, **kwargs):
        return self.clock.callLater(*args, **kwargs)

    def callFromThread(self, fn, *args):
        self.from_threads.append((fn, args))

    def run_calls_from_threads(self, count: int) -> None:
        deadline = time.monotonic() + 10
        while len(self.from_threads) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        for fn, args in self.from_threads:
            fn(*args)


def test_call_with_timeout_gives_up_on_a_call_that_does_not_return():
    import threading

    from twisted.internet import defer

    from bkctl.wire.process.shutdown import call_with_timeout

    reactor = _ThreadSafeClock()
    release = threading.Event()
    d = call_with_timeout(reactor, release.wait, 60, timeout=2.0, what="a stuck call")
    reactor.clock.advance(1.9)
    assert not d.called
    reactor.clock.advance(0.1)
    failures = []
    d.addErrback(failures.append)
    assert failures and failures[0].check(defer.TimeoutError)
    release.set()  # the abandoned call ends; its late answer is dropped
    reactor.run_calls_from_threads(1)


def test_call_with_timeout_hands_over_a_result_and_an_exception():
    from bkctl.wire.process.shutdown import call_with_timeout

    reactor = _ThreadSafeClock()
    ok = call_with_timeout(reactor, lambda x: x * 2, 21, timeout=5, what="double")
    bad = call_with_timeout(reactor, lambda: 1 / 0, timeout=5, what="divide")
    reactor.run_calls_from_threads(2)
    results, errors = [], []
    ok.addCallback(results.append)
    bad.addErrback(errors.append)
    assert results == [42]
    assert errors[0].check(ZeroDivisionError)
    assert not reactor.clock.getDelayedCalls()  # the timeouts were cancelled
