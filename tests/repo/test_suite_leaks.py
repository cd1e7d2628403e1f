"""A test leaves nothing behind for the next (tests/support/leaks.py): one that leaves an unhandled
failure, a thread or a process fails itself, naming what it left, and the test after it passes."""

from __future__ import annotations

import re

import pytest

from tests.support.inner_suite import run_inner_suite

LEAKY = """
import gc
import subprocess
import sys
import threading

import crochet
from twisted.internet import defer

crochet.setup()


def test_a_deferred_failure_no_one_handled():
    d = defer.Deferred()
    d.errback(ValueError("dropped deferred"))


def test_a_cancelled_eventual_result_dropped():
    eventual = crochet.run_in_reactor(lambda: defer.Deferred())()
    eventual.cancel()  # its CancelledError, never taken, logged when it is collected


stop = threading.Event()


def test_a_thread_left_running():
    threading.Thread(target=stop.wait, name="left-running").start()


started = []


def test_a_process_left_running():
    started.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]))


def test_a_handled_failure_and_a_finished_thread_and_process():
    d = defer.Deferred()
    d.addErrback(lambda f: None)
    d.errback(ValueError("handled"))
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    stop.set()  # the thread left running ends now, the process too


    for p in started:
        p.kill()
        p.wait()


def test_the_next_test_sees_nothing_of_them():
    gc.collect()
"""


def test_a_test_that_leaves_a_failure_a_thread_or_a_process_fails(tmp_path):
    done = run_inner_suite(tmp_path, {"tests/unit/test_leaky.py": LEAKY}, "-p", "no:randomly")
    out = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, out
    for name, what in (
        ("test_a_deferred_failure_no_one_handled", "an unhandled failure: Unhandled error in Deferred"),
        ("test_a_cancelled_eventual_result_dropped", "an unhandled failure: Unhandled error in EventualResult"),
        ("test_a_thread_left_running", "a thread: <Thread(left-running"),
        ("test_a_process_left_running", "a process: "),
    ):
        assert f"ERROR at teardown of {name}" in out, out
        section = out.split(f"ERROR at teardown of {name}", 1)[1].split("\n____", 1)[0]
        assert what in section, section
    assert "ValueError: dropped deferred" in out and "CancelledError" in out
    assert "PASSED tests/unit/test_leaky.py::test_a_handled_failure_and_a_finished_thread_and_process" in out
    assert "PASSED tests/unit/test_leaky.py::test_the_next_test_sees_nothing_of_them" in out
    assert re.search(r"= 6 passed, (\d+ warnings, )?4 errors in ", out), out
