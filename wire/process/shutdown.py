"""Bounded shutdown for the daemons (bookied, ``bkctl autorecovery run``).

A SIGTERM must end a daemon within a known time even when ZooKeeper is
unreachable: kazoo's calls then block until the connection returns, and a
reactor whose thread pool holds such a call never finishes its shutdown
(Twisted joins the pool's threads).  Two tools:

* :func:`call_with_timeout` runs one blocking call (unregister, close the
  session) in a daemon thread of its own and gives up on it after a timeout:
  the caller goes on, the thread dies with the process.
* :class:`ExitDeadline` is the last resort: armed when the shutdown starts, it
  ends the process with ``os._exit`` if the orderly path has not finished by
  then (a pool thread stuck in ZooKeeper, say), after logging why.
* :func:`ignore_late_signals`, once the shutdown is done: a SIGTERM that
  arrives while the interpreter finishes must not turn exit 0 into "killed".
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

from twisted.internet import defer

from bkctl.wire.clock import ThreadedClock

T = TypeVar("T")

log = logging.getLogger("bkctl.shutdown")


def call_with_timeout(
    reactor: ThreadedClock, fn: Callable[..., T], *args: object, timeout: float, what: str
) -> defer.Deferred[T]:
    """Run ``fn(*args)`` in a daemon thread; the Deferred fires with its result,
    its exception, or :class:`defer.TimeoutError` after ``timeout`` seconds
    (the call is then abandoned, not interrupted)."""
    d: defer.Deferred[T] = defer.Deferred()

    def done(value: T) -> None:
        if not d.called:  # else timed out meanwhile
            d.callback(value)

    def failed(exc: BaseException) -> None:
        if not d.called:
            d.errback(exc)

    def run() -> None:
        try:
            result = fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            reactor.callFromThread(failed, e)
        else:
            reactor.callFromThread(done, result)

    def expire() -> None:
        if not d.called:
            d.errback(defer.TimeoutError(timeout, what))

    threading.Thread(target=run, name=f"shutdown: {what}", daemon=True).start()
    timer = reactor.callLater(timeout, expire)

    def stop_timer(result: T) -> T:
        if timer.active():
            timer.cancel()
        return result

    return d.addBoth(stop_timer)


class ExitDeadline:
    """End the process ``seconds`` after :meth:`arm` unless it is gone by then."""

    def __init__(self, what: str):
        self.what = what
        self.step: str | None = None  # what the shutdown is doing now, named if the deadline strikes
        self._timer: threading.Timer | None = None

    def doing(self, step: str) -> None:
        """Say what the shutdown does next ("closing the journals"): the deadline's log line names
        the step it was stuck in, instead of guessing."""
        self.step = step

    def arm(self, seconds: float, exit_code: Callable[[], int] = lambda: 0) -> None:
        """``exit_code``: called at the deadline for the status to exit with."""
        if self._timer is not None:
            return
        timer = threading.Timer(seconds, self._expire, args=(seconds, exit_code))
        timer.daemon = True
        timer.name = "shutdown deadline"
        timer.start()
        self._timer = timer

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _expire(self, seconds: float, exit_code: Callable[[], int]) -> None:
        code = exit_code()
        log.warning(
            "%s did not finish within %g s%s; exiting now",
            self.what,
            seconds,
            f" (still {self.step})" if self.step else "",
        )
        for handler in logging.getLogger().handlers:
            try:
                handler.flush()
            except Exception:  # noqa: BLE001 - exiting anyway
                pass
        sys.stderr.flush()
        os._exit(code)


def ignore_late_signals() -> None:
    """Ignore SIGTERM and SIGINT for the rest of the process: the daemon has
    stopped and exits next.  Python resets its own handlers to the default
    while the interpreter finalizes (module teardown can take a while on a
    loaded host), so an operator's second SIGTERM would otherwise kill the
    process and its status would read -15 instead of its exit code; an
    ignored signal stays ignored to the end."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
