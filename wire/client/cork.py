"""Held writes: the frames connections write during a burst go out once per
connection at its end.

A burst is a protocol handing out one chunk of answers (the requests their
callbacks issue: a reader keeping its window full, a writer its pipeline)
or a writer's run of adds.  While one is under way, a connection appends
its frames to its own list and enters itself in :data:`CORK`; at the end
each one writes its list in one go (:meth:`HoldsWrites.write_held`).  One
cork per process: the reactor's thread.
"""
from __future__ import annotations

from typing import Protocol

__all__ = ["CORK", "HoldsWrites", "hold_writes", "release_writes"]


class HoldsWrites(Protocol):
    """A connection that held frames during a burst."""

    def write_held(self) -> None:
        """Write the frames held since the burst began (dropped if the connection went away)."""


class _Cork:
    """``holders``: during a burst, the connections holding frames; None otherwise."""

    __slots__ = ("holders",)

    def __init__(self):
        self.holders: list[HoldsWrites] | None = None


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


def release_writes() -> None:
    """Write what :func:`hold_writes` held, once per connection."""
    holders, CORK.holders = CORK.holders, None
    for conn in holders or ():
        conn.write_held()
