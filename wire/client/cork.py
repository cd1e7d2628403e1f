"""Held writes: the frames a client's connections write during a burst go out
once per connection at its end.

A burst is a protocol handing out one chunk of answers (the requests their
callbacks issue: a reader keeping its window full, a writer its pipeline),
a writer's run of adds, a reader filling its window or a rate limiter's
tick.  While one is under way, each connection's :class:`Writer` keeps the
frames written to it and enters itself in its :class:`Cork`; at the end
each writer writes its frames in one go (:meth:`Writer.write_held`).  Work
that is better done once per burst than once per answer (a writer
completing its acknowledged adds) can ask to be called at the end too,
before the held frames go out (:meth:`Cork.finish_at_release`).

There is one :class:`Cork` per client: its
:class:`~bkctl.wire.client.pool.BookiePool` makes it and gives it to every
connection it makes (a connection made alone has its own), so the clients
of two reactors, or of two tests, hold nothing for each other; what one
connection holds is its writer's alone.
"""

from __future__ import annotations

import logging
from typing import Protocol

__all__ = ["Cork", "FinishesBursts", "FrameSink", "Writer"]

log = logging.getLogger(__name__)


class FinishesBursts(Protocol):
    """Something with work left for the end of a burst (:meth:`Cork.finish_at_release`)."""

    def burst_ended(self) -> None:
        """Do the work put off until the burst's end (the frames it writes are held with the rest)."""


class FrameSink(Protocol):
    """Where a :class:`Writer` puts whole frames: the connection's protocol
    (:class:`~bkctl.wire.client.client_protocol.BookieClientProtocol`)."""

    def send(self, frames: list[bytes]) -> None:
        """Write frames now, through the transport's buffer."""

    def send_one(self, data: bytes) -> None:
        """Write one frame now, through the transport's buffer."""

    def send_burst(self, frames: list[bytes]) -> None:
        """Write a burst's frames, nothing more coming this turn: to the kernel at once if it can be."""


class Cork:
    """The bursts of one client's connections.  ``holders``: during a burst,
    the writers holding frames; None otherwise (read on every write, hence
    a plain attribute)."""

    __slots__ = ("holders", "_finishers")

    def __init__(self) -> None:
        self.holders: list[Writer] | None = None
        self._finishers: list[FinishesBursts] = []

    def hold(self) -> bool:
        """Hold the frames the writers of this cork write from now on until
        :meth:`release` (a writer's burst of adds: one write per bookie).
        False when they are held already (by a chunk of answers being handed
        out, or an outer burst): then the caller must not release them."""
        if self.holders is not None:
            return False
        self.holders = []
        return True

    def finish_at_release(self, finisher: FinishesBursts) -> bool:
        """Have ``finisher.burst_ended()`` called when the burst under way ends,
        before its frames go out (once per call: the caller keeps track): True;
        False when no burst is under way (the caller does the work now)."""
        if self.holders is None:
            return False
        self._finishers.append(finisher)
        return True

    def release(self) -> None:
        """Call the burst's finishers (:meth:`finish_at_release`; what they write
        is held too), then write what was held since :meth:`hold`, once per writer."""
        while self._finishers:
            finishers, self._finishers = self._finishers, []
            for finisher in finishers:
                try:
                    finisher.burst_ended()
                except Exception:  # noqa: BLE001 - one finisher's bug must not keep the frames back
                    log.exception("the end of a burst failed in %r", finisher)
        holders, self.holders = self.holders, None
        for writer in holders or ():
            writer.write_held()


class Writer:
    """One connection's writes: to its protocol at once, or, during a burst of
    its :class:`Cork`, held and written together at the burst's end.

    Held frames go to the protocol they were written for: if the connection
    is lost or closed meanwhile, its requests fail and :meth:`drop` forgets
    their frames (a new connection never sends the frames of the old)."""

    __slots__ = ("cork", "_held", "_sink")

    def __init__(self, cork: Cork) -> None:
        self.cork = cork
        self._held: list[bytes] = []
        self._sink: FrameSink | None = None

    def write(self, sink: FrameSink, data: bytes) -> None:
        """Write one request's frame to ``sink``, or hold it during a burst."""
        holders = self.cork.holders
        if holders is None:
            sink.send_one(data)
        else:
            self._holding(holders, sink).append(data)

    def write_frames(self, sink: FrameSink, frames: list[bytes]) -> None:
        """:meth:`write` of several frames, after what is held already, in order."""
        holders = self.cork.holders
        if holders is None:
            sink.send(frames)
        else:
            self._holding(holders, sink).extend(frames)

    def _holding(self, holders: list[Writer], sink: FrameSink) -> list[bytes]:
        """The frames held for the burst under way, this writer entered in it (once)."""
        held = self._held
        if not held:
            holders.append(self)
            self._sink = sink
        return held

    def write_held(self) -> None:
        """Write the frames held during the burst (its end: :meth:`Cork.release`)."""
        held, self._held = self._held, []
        sink, self._sink = self._sink, None
        if held and sink is not None:
            sink.send_burst(held)

    def drop(self) -> None:
        """The connection went away: its requests failed, their held frames are not sent."""
        self._held = []
        self._sink = None
