"""The parts of Twisted's reactor the library calls, as Protocols.

Twisted declares its reactor's interfaces with zope.interface, which a type
checker without its plugin cannot read; these say what a component needs of
the reactor it is given (the global reactor, a ``task.Clock`` or a
``MemoryReactorClock`` in tests) so that the checker holds every call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred
    from twisted.python.threadpool import ThreadPool

__all__ = ["Clock", "DelayedCall", "Reactor", "RunBlocking", "ThreadedClock"]

T = TypeVar("T")


class DelayedCall(Protocol):
    """What ``callLater`` returns (``IDelayedCall``)."""

    def active(self) -> bool:
        """Whether it has neither run nor been cancelled."""

    def cancel(self) -> None:
        """Do not run it (it must be active)."""


class Clock(Protocol):
    """A reactor's time (``IReactorTime``)."""

    def seconds(self) -> float:
        """The reactor's time now, in seconds."""

    def callLater(
        self,
        delay: float,
        callable: Callable[..., object],
        *args: object,  # noqa: N802 - Twisted's name
        **kw: object,
    ) -> DelayedCall:
        """Call ``callable(*args, **kw)`` in ``delay`` seconds."""


class ThreadedClock(Clock, Protocol):
    """A reactor's time, and its way in from other threads (``IReactorFromThreads``)."""

    def callFromThread(
        self,
        callable: Callable[..., object],
        *args: object,  # noqa: N802 - Twisted's name
        **kw: object,
    ) -> None:
        """Call ``callable(*args, **kw)`` in the reactor's thread, soon (from any thread)."""


class Reactor(ThreadedClock, Protocol):
    """A reactor as a daemon uses it: its time, its way in from threads and its thread pool
    (``IReactorThreads``); a client it makes uses it to connect as well."""

    def getThreadPool(self) -> ThreadPool:  # noqa: N802 - Twisted's name
        """The pool ``deferToThread`` runs blocking calls in."""


class RunBlocking(Protocol):
    """Runs a blocking call (a metadata store's) off the reactor thread: the
    client's ``run_blocking``, or a test's stand-in."""

    def __call__(self, fn: Callable[..., T], /, *args: object, **kwargs: object) -> Deferred[T]:
        """A Deferred of ``fn(*args, **kwargs)``, called in a thread of the reactor's pool."""
