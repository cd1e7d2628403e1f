"""Background storage work that leaves the reactor its turn: a bookie's flush and GC run in
threads beside the reactor of the same process, and a long C call of theirs (freeing, sorting
or writing tens of thousands of rows) holds the GIL while live adds wait in the reactor.  What
keeps those calls short lives here: :func:`let_go` frees a list a slice at a time,
:func:`sorted_in_slices` sorts in slices, and :class:`FlushPace` spreads a checkpoint's flush
over about twice its time."""

from __future__ import annotations

import time
from collections.abc import Callable

#: rows a flush hands to the index, or frees, per C call (see :func:`let_go`)
FLUSH_SLICE = 2048
#: how many ids :func:`sorted_in_slices` sorts in one C call
SORT_SLICE = 4096


def let_go(items: list, pause: Callable[[], None] | None = None) -> None:
    """Empty ``items`` a slice at a time.  A flush runs beside the reactor in one
    process: freeing its tens of thousands of row tuples in one C call (as the
    list's end of life would) held the GIL for 3 ms, and the live adds that
    arrived meanwhile waited that long in the reactor; between slices the
    reactor can take the GIL."""
    while items:
        del items[-FLUSH_SLICE:]
        if pause is not None:
            pause()


class FlushPace:
    """Spreads a flush over about twice its time: called after each piece of the
    flush's work (a chunk of entry log, a ledger's entries sorted, a slice of
    index rows written or freed), it sleeps as long as the piece took, at most
    :attr:`MAX_NAP` -- no longer once ``hurry()`` is true (the write cache filled
    half of its bound meanwhile: adds may soon wait for room, so the rest of the
    flush runs at full speed).  A checkpoint flushes ten seconds of adds at once: at full
    speed its thread held a CPU and, in slices, the GIL for 25-45 ms, and the
    live adds that arrived meanwhile -- at this bookie, and at the others on the
    machine -- took several milliseconds where they take one (four in ten of
    them); paced, one in ten."""

    #: the longest sleep after one piece, seconds
    MAX_NAP = 0.002

    def __init__(
        self,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        hurry: Callable[[], bool] | None = None,
    ):
        self._sleep = sleep
        self._clock = clock
        self._hurry = hurry
        self._since = clock()
        #: seconds slept so far
        self.slept = 0.0

    def __call__(self) -> None:
        nap = min(self._clock() - self._since, self.MAX_NAP)
        if nap > 0 and not (self._hurry is not None and self._hurry()):
            self._sleep(nap)
            self.slept += nap
        self._since = self._clock()


def sorted_in_slices(ids: list[int]) -> list[int]:
    """``sorted(ids)``, in slices merged by :func:`heapq.merge` (Python, so the GIL goes
    to the reactor thread every switch interval): one sort of 10^5 ledger ids holds the
    GIL for 6-25 ms, an add's p99 while the GC pass of a bookie of 10^5 ledgers runs."""
    import heapq

    if len(ids) <= SORT_SLICE:
        return sorted(ids)
    return list(heapq.merge(*(sorted(ids[i : i + SORT_SLICE]) for i in range(0, len(ids), SORT_SLICE))))
