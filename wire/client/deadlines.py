"""Request deadlines of one connection: one queue and one timer per kind of request.

Every request of a kind (writes, reads, bookie info, one kind per long-poll
wait) gets the same timeout, so issuing order is deadline order: a deque
holds them, and one timer on the injected clock is due when the oldest live
one expires -- not one timer per request.  Answered requests leave the front
of the deque as soon as they are done (answers mostly come in order); one
answered out of order stays until the requests before it are done or the
timer passes it.  The timer is cancelled when nothing is left.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from .requests import DONE, Request

__all__ = ["Deadlines", "WRITE", "READ", "INFO", "POLL"]

#: Kinds of request: writes (ADD, WRITE_LAC, FORCE_LEDGER), reads, GET_BOOKIE_INFO,
#: long polls (``(POLL, timeout)``: one kind per wait).
WRITE, READ, INFO, POLL = "write", "read", "info", "poll"


class _Timeouts:
    """The deadline queue of one kind of request, and its timer."""

    __slots__ = ("timeout", "queue", "timer", "key")

    def __init__(self, key: Any, timeout: float):
        self.key = key
        self.timeout = timeout
        self.queue: deque[Request] = deque()
        self.timer = None


class Deadlines:
    """The deadline queues of one connection.  ``expired(req, timeout)`` is
    called for each request (not done yet) whose deadline passed.  A kind
    that is a tuple (long polls: one per wait) is dropped once idle."""

    __slots__ = ("_clock", "_expired", "_kinds")

    def __init__(self, clock: Any, expired: Callable[[Request, float], None]):
        self._clock = clock
        self._expired = expired
        self._kinds: dict[Any, _Timeouts] = {}

    def start(self, req: Request, kind: Any, timeout: float, now: float) -> None:
        """Put ``req`` in the deadline queue of its ``kind`` (``timeout`` from
        ``now``), starting that queue's timer if it has none."""
        timeouts = self._kinds.get(kind)
        if timeouts is None:
            timeouts = self._kinds[kind] = _Timeouts(kind, timeout)
        req.deadline = now + timeout
        req.timeouts = timeouts
        timeouts.queue.append(req)
        if timeouts.timer is None:
            timeouts.timer = self._clock.callLater(timeout, self._sweep, timeouts)

    def start_all(self, reqs: list[Request], kind: Any, timeout: float, now: float) -> None:
        """:meth:`start` for several requests issued together (one deadline)."""
        timeouts = self._kinds.get(kind)
        if timeouts is None:
            timeouts = self._kinds[kind] = _Timeouts(kind, timeout)
        deadline = now + timeout
        for req in reqs:
            req.deadline = deadline
            req.timeouts = timeouts
        timeouts.queue.extend(reqs)
        if timeouts.timer is None:
            timeouts.timer = self._clock.callLater(timeout, self._sweep, timeouts)

    def retire(self, req: Request) -> None:
        """A request is done: drop done requests from the front of its
        deadline queue, and the queue's timer once nothing is left in it."""
        timeouts = req.timeouts
        if timeouts is None:
            return
        req.timeouts = None
        # Deadlines.prune's work for one queue, inline: this runs once per answer
        queue = timeouts.queue
        while queue and queue[0].state == DONE:
            queue.popleft()
        if not queue:
            timer = timeouts.timer
            if timer is not None:
                timeouts.timer = None
                timer.cancel()
            self._drop_idle(timeouts)

    def prune(self) -> None:
        """:meth:`retire` for requests marked done without it (a writer's ADD copies
        answered in C, ``_addpath.take_adds``, once per chunk of answers): each
        queue's done requests dropped from its front, its timer once it is empty."""
        for timeouts in list(self._kinds.values()):
            self._prune(timeouts)

    def _prune(self, timeouts: _Timeouts) -> None:
        queue = timeouts.queue
        while queue and queue[0].state == DONE:
            queue.popleft()
        if not queue:
            timer = timeouts.timer
            if timer is not None:
                timeouts.timer = None
                timer.cancel()
            self._drop_idle(timeouts)

    def stop(self) -> None:
        """Cancel every timer and forget every deadline."""
        kinds = list(self._kinds.values())
        self._kinds.clear()
        for t in kinds:
            t.queue.clear()
            timer, t.timer = t.timer, None
            if timer is not None:
                timer.cancel()

    def _drop_idle(self, timeouts: _Timeouts) -> None:
        if type(timeouts.key) is tuple and self._kinds.get(timeouts.key) is timeouts:
            del self._kinds[timeouts.key]

    def _sweep(self, timeouts: _Timeouts) -> None:
        """The timer of a deadline queue: expire every request past its deadline."""
        timeouts.timer = None
        queue = timeouts.queue
        now = self._clock.seconds()
        expired = []
        while queue:
            req = queue[0]
            if req.state != DONE:
                if req.deadline > now:
                    break
                expired.append(req)
            queue.popleft()
        if queue:
            timeouts.timer = self._clock.callLater(max(0.0, queue[0].deadline - now), self._sweep, timeouts)
        else:
            self._drop_idle(timeouts)
        for req in expired:
            req.timeouts = None
            if req.state == DONE:  # completed meanwhile (a callback closed the connection...)
                continue
            self._expired(req, timeouts.timeout)
