"""A ``twisted.internet.task.Clock`` that also takes calls from other threads'
callbacks (``callFromThread``), as code driven by the metadata store's watches needs."""

from __future__ import annotations

from twisted.internet import task

__all__ = ["ReactorClock"]


class ReactorClock(task.Clock):
    """``callFromThread`` queues the call, as the reactor does; :meth:`run` runs what is due."""

    def callFromThread(self, fn, *args, **kwargs):  # noqa: N802 - Twisted's name
        self.callLater(0, fn, *args, **kwargs)

    def run(self) -> None:
        """Run every call due now, and those they queue for now."""
        while any(call.getTime() <= self.seconds() for call in self.getDelayedCalls()):
            self.advance(0)
