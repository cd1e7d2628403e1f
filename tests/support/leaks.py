"""A test leaves nothing behind for the next one (a pytest plugin, loaded by ``tests/conftest.py``).

Tests of one xdist worker share its process: an error a test left unhandled, logged when its
garbage is collected, a thread it started or a process it spawned and never stopped shows up
in whichever test runs next -- a journal test that asserts a silent log failed on a
``CancelledError`` another test had left in a crochet ``EventualResult``.  So every test ends
with a check (:func:`no_leaks`, an autouse fixture, torn down after the test's own fixtures),
which fails the test that leaked, naming what it left:

* **unhandled failures**: Twisted logs a failure nobody handled ("Unhandled error in
  Deferred", crochet's "Unhandled error in EventualResult", "Unhandled Error" of a delayed
  call) when it is collected or raised in the reactor.  The check first lets the process's
  reactor thread (crochet's, if running) run what the test handed it, then collects garbage,
  so a failure lands in the test that made it, not in the next one.  What survives that
  collection is frozen out of the collector's sight, so the next test's collection walks only
  what that test made: milliseconds, where walking a worker's whole heap took 0.3 s a test and
  doubled the suite's time;
* **threads**: a non-daemon thread started during the test and still alive after it (given a
  few seconds to end), but the process's one reactor thread and its pool (crochet's, which
  live until the process exits by design);
* **processes**: a descendant of this process started during the test and still running after
  it (given a few seconds to exit): a bookied, a ``bkctl``, a sandbox's ZooKeeper -- but the
  processes that serve every later test of the worker, which the first test that needs them
  starts (:data:`SHARED`): the zygote, this worker's fork server for bookieds
  (``tests/support/zygote.py``), the worker's own ZooKeeper, and the Python workers Spark
  keeps for its session's next job.  (A ZooKeeper is told by its main class alone, so one a
  sandbox test leaves behind goes unseen here too.)

What a module- or session-scoped fixture starts is set up before the check's baseline and torn
down after it, so it is not counted.
"""

from __future__ import annotations

import gc
import os
import queue
import sys
import threading
import time
from collections.abc import Iterator

import pytest

__all__ = ["no_leaks", "descendants", "UNHANDLED_PREFIXES", "REACTOR_THREADS"]

#: how Twisted and crochet begin the message of a failure no one handled
UNHANDLED_PREFIXES = ("Unhandled error in", "Unhandled Error")
#: the names of the threads of the process's one reactor (crochet's: the reactor, its log writer and
#: its shutdown watchdog) and the reactor's thread pool
REACTOR_THREADS = ("Crochet", "PoolThread-twisted.internet.reactor-")
REACTOR_THREAD = "CrochetReactor"
#: seconds a thread or a process started by the test may take to end after its teardown
GRACE = 5.0


class UnhandledFailures:
    """Twisted's log events of failures no one handled, as they are published."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, event: dict) -> None:
        failure = event.get("log_failure") or event.get("failure")  # the latter: twisted.python.log.err's
        if failure is None:
            return
        what = _unhandled(event)
        if what is None:
            return
        with self._lock:
            self.seen.append(f"{what} {failure.type.__name__}: {failure.getErrorMessage()}")

    def take(self) -> list[str]:
        with self._lock:
            seen, self.seen = self.seen, []
        return seen


def _unhandled(event: dict) -> str | None:
    """What a failure event says if it is one no one handled: Twisted's own (a Deferred collected
    with its failure, an exception out of a timed call or a call from a thread), or one logged as
    unhandled (crochet's); None for a failure the code under test logged itself."""
    from twisted.logger import formatEvent

    namespace = event.get("log_namespace", "")
    text = str(event.get("why") or formatEvent(event) or "").strip()  # why: twisted.python.log.err's reason
    if namespace == "twisted.internet.defer":
        return "Unhandled error in Deferred"  # the failure follows the message in an event of its own
    if text.startswith(UNHANDLED_PREFIXES):
        return text.splitlines()[0]
    if namespace.startswith("twisted."):
        return f"Twisted: {text.splitlines()[0] if text else 'Unhandled Error'}"
    return None


_failures = UnhandledFailures()


def pytest_configure(config) -> None:
    from twisted.logger import globalLogPublisher

    globalLogPublisher.addObserver(_failures)


def pytest_collection_finish(session) -> None:
    """What exists once the tests are collected (modules, their objects, the session's items)
    lives to the end: out of the collector's sight from the start."""
    global _frozen_at_last_thaw
    _collect_and_freeze()
    _frozen_at_last_thaw = gc.get_freeze_count()


#: objects frozen since the last full collection past which a module's end thaws them all and
#: collects once (see below)
THAW_AFTER = 200_000
_frozen_at_last_thaw = 0


def _collect_and_freeze() -> None:
    """Collect the garbage made since the last freeze (what the test that just ended made: a
    failure no one handled is logged now, in its name), then freeze what survives.

    A cycle among frozen objects that turns to garbage later (a module fixture's, torn down after
    its last test) is not collected while frozen: :func:`thaw_at_module_end` bounds that."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="module", autouse=True)
def thaw_at_module_end() -> Iterator[None]:
    """Once a module's fixtures are torn down, if much was frozen since, thaw it all and collect
    once, freeing what frozen tests left as cyclic garbage (one walk of the heap once in a while,
    not every test).  What that collection logs, the next test's check takes as logged between
    tests."""
    global _frozen_at_last_thaw
    yield
    if gc.get_freeze_count() - _frozen_at_last_thaw > THAW_AFTER:
        gc.unfreeze()
        _collect_and_freeze()
        _frozen_at_last_thaw = gc.get_freeze_count()


def _settle_reactor() -> None:
    """Let the reactor thread, if one runs, finish what was handed to it so far (a cancelled
    call's errback, say) and let go of it: a turn of the reactor runs the calls queued, then drops
    them, so the second of two calls queued one after the other runs once the first turn's are
    gone (a crochet ``EventualResult`` a cancel held is collected, and logs, by then)."""
    reactor = sys.modules.get("twisted.internet.reactor")  # never imported here: that would install one
    if reactor is None or not reactor.running or threading.current_thread().name == REACTOR_THREAD:
        return
    for _ in range(2):
        done: queue.SimpleQueue[None] = queue.SimpleQueue()
        reactor.callFromThread(done.put, None)
        try:
            done.get(timeout=GRACE)
        except queue.Empty:
            return


def _lingering(thread: threading.Thread) -> bool:
    return thread.is_alive() and not thread.daemon and not thread.name.startswith(REACTOR_THREADS)


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found.update(int(p) for p in f.read().split())
        except OSError:
            pass
    return found


def _running(pid: int) -> str | None:
    """The command line of ``pid`` if it runs (not a zombie), else None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        if state in ("Z", "X"):
            return None
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except (OSError, IndexError):
        return None


#: Command-line marks of the processes a worker keeps for all its tests (see the module doc).
SHARED = ("-m tests.support.zygote", "-m pyspark.daemon", "org.apache.zookeeper.server.ZooKeeperServerMain")


def _shared(command: str) -> bool:
    return any(mark in command for mark in SHARED)


def descendants() -> dict[int, str]:
    """This process's running descendants (pid → command line), the zygote's included but not
    the zygote itself."""
    from tests.support.zygote import zygote_pid

    zygote = zygote_pid()
    found: dict[int, str] = {}
    todo = list(_children(os.getpid()))
    while todo:
        pid = todo.pop()
        command = _running(pid)
        if command is None:
            continue
        if pid != zygote and not _shared(command):
            found[pid] = command
        todo.extend(_children(pid))
    return found


def _wait_for(done, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.fixture(autouse=True)
def no_leaks(request) -> Iterator[None]:
    """Fail the test that leaves an unhandled failure, a thread or a process behind (a process:
    outside ``tests/integration``, whose daemons' own children -- a bookied's GC listing child,
    Spark's workers -- outlive a test by design for a while after it)."""
    threads_before = set(threading.enumerate())
    count_processes = "integration" not in request.node.path.parts
    processes_before = set(descendants()) if count_processes else set()
    _failures.take()  # logged between tests (a module's fixtures): no test's to answer for
    yield
    _settle_reactor()
    _collect_and_freeze()
    leaks = [f"an unhandled failure: {text}" for text in _failures.take()]
    new_threads = [t for t in threading.enumerate() if t not in threads_before]
    _wait_for(lambda: not any(_lingering(t) for t in new_threads), GRACE)
    leaks += [f"a thread: {t!r}" for t in new_threads if _lingering(t)]
    if count_processes:
        _wait_for(lambda: not (set(descendants()) - processes_before), GRACE)
        leaks += [
            f"a process: {pid} {command}" for pid, command in descendants().items() if pid not in processes_before
        ]
    if leaks:
        pytest.fail("the test left behind\n  " + "\n  ".join(leaks), pytrace=False)
