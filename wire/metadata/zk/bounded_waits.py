"""kazoo's threading handler, with every wait for an answer bounded.

kazoo queues a request made while it reconnects until a connection is made again, and its
synchronous calls wait for the answer with no timeout: with a server that is stopped (a paused
JVM, a partition), a call made after the drop -- or retried after it by ``client.retry`` --
waits forever, and so does the command or the daemon thread that made it.  A Java ZooKeeper
client fails such a call with CONNECTIONLOSS at each failed reconnect.  Here a wait that was
given no timeout ends after the handler's *bound* with kazoo's own ``KazooTimeoutError``,
which the store turns into :class:`~bkctl.wire.metadata.errors.ZKUnavailable`: the call's
outcome unknown, as after a connection loss.

The store's sessions bound a wait by twice the session timeout: by then the connection came
back (and the call was answered) or the session the call was made in has expired.
"""

from __future__ import annotations

from typing import Any

from kazoo.handlers.threading import AsyncResult, SequentialThreadingHandler

__all__ = ["BoundedWaitHandler"]


class BoundedWaitHandler(SequentialThreadingHandler):  # type: ignore[misc]
    """kazoo's :class:`SequentialThreadingHandler` whose results wait at most *bound* seconds
    when their caller names no timeout."""

    def __init__(self, bound: float):
        super().__init__()
        self.bound = float(bound)

    def async_result(self) -> AsyncResult:
        return _BoundedResult(self, self.bound)


class _BoundedResult(AsyncResult):  # type: ignore[misc]
    def __init__(self, handler: BoundedWaitHandler, bound: float):
        super().__init__(handler)
        self.bound = bound

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        return super().get(block, self.bound if timeout is None else timeout)
