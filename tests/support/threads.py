"""A reactor clock whose thread pool the test drives.

Production runs blocking calls (the metadata store's) with
``deferToThreadPool(reactor, reactor.getThreadPool(), f)``: ``f`` runs on another
thread and its result comes back later, through ``reactor.callFromThread``.
:class:`ThreadedClock` keeps both halves: a job waits in :attr:`ThreadedClock.thread_pool`
until the test runs it, and its result waits until the test delivers it -- so code
that would only work if the call answered at once fails here as it would in production.
"""

from __future__ import annotations

from collections import deque

from twisted.internet import task
from twisted.python.failure import Failure

__all__ = ["ManualThreadPool", "ThreadedClock"]


class ManualThreadPool:
    """``callInThreadWithCallback`` as twisted's ThreadPool has it, run when the test says."""

    def __init__(self):
        self.waiting: deque = deque()

    def callInThreadWithCallback(self, onResult, func, *args, **kw):  # noqa: N802 - Twisted's name
        self.waiting.append((onResult, func, args, kw))

    def run_next(self) -> None:
        """Run the oldest waiting job "on its thread" and hand its outcome to ``onResult``."""
        on_result, func, args, kw = self.waiting.popleft()
        try:
            result = func(*args, **kw)
        except BaseException:
            on_result(False, Failure())
        else:
            on_result(True, result)


class ThreadedClock(task.Clock):
    """A :class:`twisted.internet.task.Clock` with a thread pool and ``callFromThread``."""

    def __init__(self):
        super().__init__()
        self.thread_pool = ManualThreadPool()
        self.from_threads: deque = deque()

    def getThreadPool(self) -> ManualThreadPool:  # noqa: N802 - the reactor's name
        return self.thread_pool

    def callFromThread(self, f, *args, **kw) -> None:  # noqa: N802 - the reactor's name
        self.from_threads.append((f, args, kw))

    def settle(self) -> int:
        """Run waiting jobs and deliver their results, oldest first, until nothing
        waits (jobs that a delivered result starts included); how many jobs ran."""
        ran = 0
        while self.thread_pool.waiting or self.from_threads:
            if self.from_threads:
                f, args, kw = self.from_threads.popleft()
                f(*args, **kw)
            else:
                self.thread_pool.run_next()
                ran += 1
        return ran
