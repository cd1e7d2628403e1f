"""Held writes: the frames connections write during a burst go out once per
connection at its end.

A burst is a protocol handing out one chunk of answers (the requests their
callbacks issue: a reader keeping its window full, a writer its pipeline)
or a writer's run of adds.  While one is under way, a connection appends
its frames to its own list and enters itself in :data:`CORK`; at the end
each one writes its list in one go (:meth:`HoldsWrites.write_held`).  Work
that is better done once per burst than once per answer (a writer
completing its acknowledged adds) can ask to be called at the end too,
before the held frames go out (:func:`finish_at_release`).  One cork per
process: the reactor's thread.
"""
from __future__ import annotations

import logging
from typing import Protocol

__all__ = ["CORK", "FinishesBursts", "HoldsWrites", "finish_at_release", "hold_writes", "release_writes"]

log = logging.getLogger(__name__)


class HoldsWrites(Protocol):
    """A connection that held frames during a burst."""

    def write_held(self) -> None:
        """Write the frames held since the burst began (dropped if the connection went away)."""


class FinishesBursts(Protocol):
    """Something with work left for the end of a burst (:func:`finish_at_release`)."""

    def burst_ended(self) -> None:
        """Do the work put off until the burst's end (the frames it writes are held with the rest)."""


class _Cork:
    """``holders``: during a burst, the connections holding frames; None
    otherwise.  ``finishers``: what is called at its end."""

    __slots__ = ("holders", "finishers")

    def __init__(self) -> None:
        self.holders: list[HoldsWrites] | None = None
        self.finishers: list[FinishesBursts] = []


CORK = _Cork()


def hold_writes() -> bool:
    """Hold the frames connections write from now on until
    :func:`release_writes` (a writer's burst of adds: one write per bookie).
    False when they are held already (by a chunk of answers being handed
    out, or an outer burst): then the caller must not release them."""
    if CORK.holders is not None:
        return False
    CORK.holders = []
    return True


def finish_at_release(finisher: FinishesBursts) -> bool:
    """Have ``finisher.burst_ended()`` called when the burst under way ends,
    before its frames go out (once per call: the caller keeps track): True;
    False when no burst is under way (the caller does the work now)."""
    if CORK.holders is None:
        return False
    CORK.finishers.append(finisher)
    return True


def release_writes() -> None:
    """Call the burst's finishers (:func:`finish_at_release`; what they write
    is held too), then write what :func:`hold_writes` held, once per connection."""
    while CORK.finishers:
        finishers, CORK.finishers = CORK.finishers, []
        for finisher in finishers:
            try:
                finisher.burst_ended()
            except Exception:  # noqa: BLE001 - one finisher's bug must not keep the frames back
                log.exception("the end of a burst failed in %r", finisher)
    holders, CORK.holders = CORK.holders, None
    for conn in holders or ():
        conn.write_held()
