"""A connection's requests between their issue and their completion: waiting, on the wire,
timed out, cancelled, failed together.

:class:`Outbox` holds the requests of one :class:`~.connection.BookieConnection`: at most
``max_outstanding`` on the wire (its :class:`~.requests.RequestTable`), the next
``max_queued`` waiting locally for the connection or for room (beyond that a request is
refused with :class:`~.errors.TooManyRequests`), each with its deadline
(:class:`~.deadlines.Deadlines`; the clock starts when it is issued, so time spent queued
or connecting counts).  It sends what waits as room frees up (:meth:`Outbox.pump`),
forgets a cancelled request, fails one not answered in time with
:class:`~.errors.BookieTimeout`, and fails them all when the connection goes away.  The
connection decides whether a request may be issued at all (closed, backing off) and hands
it the protocol its frames go to; its hot paths (a callback request that goes out at once,
runs of adds and reads) register and write through the same table, deadlines and writer.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from twisted.internet import defer

from .cork import FrameSink, Writer
from .deadlines import Deadlines
from .errors import BookieError, BookieTimeout, TooManyRequests
from .requests import DONE, QUEUED, SENT, Request, RequestTable

__all__ = ["Outbox"]


class Outbox:
    """The requests of the connection to ``bookie_id`` (see the module).  ``requests``: its
    table of requests on the wire; ``writer``: its writes; ``clock``: the reactor's time;
    ``link()``: the protocol that carries the requests now (None: not connected)."""

    __slots__ = ("bookie_id", "requests", "writer", "queue", "deadlines", "max_outstanding", "max_queued", "_link")

    def __init__(
        self,
        bookie_id: str,
        requests: RequestTable,
        writer: Writer,
        clock: Any,
        link: Callable[[], FrameSink | None],
        *,
        max_outstanding: int,
        max_queued: int,
    ) -> None:
        self.bookie_id = bookie_id
        self.requests = requests
        self.writer = writer
        self.max_outstanding = max_outstanding
        self.max_queued = max_queued
        self._link = link
        #: the requests waiting locally, oldest first
        self.queue: deque[Request] = deque()
        self.deadlines = Deadlines(clock, self.expired)

    def refuse(self, req: Request, error: BookieError) -> defer.Deferred[Any] | None:
        """A request that never goes anywhere: fail it at once."""
        req.state = DONE
        on_done = req.on_done
        if on_done is None:
            return defer.fail(error)
        req.call_back(on_done, self.bookie_id, error)
        return None

    def submit(
        self, req: Request, kind: Any, timeout: float, now: float, proto: FrameSink | None, with_deferred: bool
    ) -> defer.Deferred[Any] | None:
        """Send ``req`` on ``proto`` when it has room and nothing waits, else queue it (or refuse
        it: the queue is full); its deadline is ``timeout`` seconds from ``now``.  With
        ``with_deferred`` it completes through a Deferred (returned), else through its callback."""
        queue = self.queue
        direct = proto is not None and not queue and len(self.requests.sent) < self.max_outstanding
        if not direct and len(queue) >= self.max_queued:
            return self.refuse(
                req,
                TooManyRequests(
                    f"{req.what}: too many requests for bookie {self.bookie_id}"
                    f" ({len(self.requests.sent)} outstanding, {len(queue)} queued)",
                    bookie=self.bookie_id,
                ),
            )
        d = None
        if with_deferred:
            req.conn = self
            d = req.deferred = defer.Deferred(req)  # the request is the canceller
        self.deadlines.start(req, kind, timeout, now)  # time spent queued or connecting counts
        if direct and proto is not None:
            self.requests.register(req)
            data, req.frame = req.frame, b""  # on the wire: do not keep the bytes
            self.writer.write(proto, data)
        else:
            queue.append(req)
        return d

    def pump(self, proto: FrameSink | None) -> None:
        """Send queued requests on ``proto`` while there is room on the wire."""
        queue = self.queue
        if not queue or proto is None:
            return
        room = self.max_outstanding - len(self.requests.sent)
        batch = []
        while room > 0 and queue:
            batch.append(queue.popleft())
            room -= 1
        if batch:
            frames = []
            register = self.requests.register
            for req in batch:
                register(req)
                frames.append(req.frame)
                req.frame = b""  # on the wire: do not keep the bytes
            self.writer.write_frames(proto, frames)

    def _forget(self, req: Request) -> None:
        """Take a request out of the queue or the matching tables."""
        if req.state == QUEUED:
            try:
                self.queue.remove(req)
            except ValueError:
                pass
        elif req.state == SENT:
            self.requests.forget(req)
        req.state = DONE

    def cancel(self, req: Request) -> None:
        """Canceller of a request's Deferred (which then fails with CancelledError)."""
        if req.state == DONE:
            return
        self._forget(req)
        self.deadlines.retire(req)
        req.deferred = None
        self.pump(self._link())

    def expired(self, req: Request, timeout: float) -> None:
        """``req`` was not answered in time (:class:`~.deadlines.Deadlines`)."""
        where = "waiting to be sent" if req.state == QUEUED else "waiting for the answer"
        self._forget(req)
        self.pump(self._link())
        self.finish(
            req,
            BookieTimeout(
                f"{req.what}: no answer from bookie {self.bookie_id} within {timeout:g}s ({where})",
                bookie=self.bookie_id,
            ),
        )

    def finish(self, req: Request, result: Any) -> None:
        """Fire a request that is already out of every table."""
        req.state = DONE
        if req.timeouts is not None:
            self.deadlines.retire(req)
        req.complete(self.bookie_id, result)

    def fail_all(self, make_error: Callable[[Request], BookieError]) -> None:
        """Fail every queued and sent request (sent ones first, oldest first)."""
        reqs = self.requests.clear() + list(self.queue)
        self.writer.drop()
        self.queue.clear()
        self.deadlines.stop()
        for req in reqs:
            req.state = DONE
        for req in reqs:
            self.finish(req, make_error(req))
