"""The throttle of every copy that moves a replica (:func:`~bkctl.wire.client.rereplication.replicate_fragment`'s
``throttle``): ``bkctl recover``, ``decommission``, ``rebalance`` and ``drain`` (``--max-rate``) and the
autorecovery workers (``replicationRateByBytes``) pace their adds with it.  It lives beside the copy it
paces, in the client, rather than in the autorecovery room that first needed it."""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable

from bkctl.wire.client.cork import Cork
from bkctl.wire.clock import Clock

__all__ = ["RateLimiter"]

log = logging.getLogger(__name__)


class RateLimiter:
    """Spaces out writes to ``rate`` bytes per second (<= 0: no limit):
    ``limiter(nbytes, fn, *args)`` calls ``fn(*args)`` at once when the bytes
    may go now (and returns True), else holds the call until they may
    (False).  ``batched``: no write goes at once, every one waits for the
    next tick of the grid (rate or not), so that a worker's writes leave
    together, at most once a tick: see :class:`ReplicationWorker`.

    The writes that must wait are let go on a grid of :attr:`TICK` seconds,
    all those due in one tick by one timer: at 400 KB/s of 100-byte entries,
    a timer per entry woke the reactor 4,000 times a second and doubled the
    CPU each copied entry cost.  A held write is a plain call kept in its
    tick's list, not a Deferred: a worker holds every entry it copies, and
    inside a bookie that Deferred's creation and firing were some 5% of the
    reactor's time during a repair.  What a tick lets go is a burst
    of ``cork`` (the client's: :mod:`bkctl.wire.client.cork`; None: no
    burst): the frames it sends leave once per connection.  A write is never
    let go before its time, so the rate holds; it goes at most a tick late.
    Each limiter's grid is
    shifted by its own ``phase`` (random unless given): on a grid of the clock
    alone, every daemon of a cluster -- their clocks kept together by NTP --
    would send its tick's writes to the bookies at the same instants."""

    #: seconds between the times waiting writes are let go
    TICK = 0.01

    def __init__(
        self, rate: float, reactor: Clock, phase: float | None = None, batched: bool = False, cork: Cork | None = None
    ):
        self.rate = float(rate)
        self.cork = cork
        self.batched = batched
        self.reactor = reactor
        self.phase = random.uniform(0.0, self.TICK) if phase is None else float(phase) % self.TICK
        self._free_at = 0.0
        #: tick number -> the calls (fn, args) let go at its end, in the order they were held
        self._waiting: dict[int, list[tuple[Callable[..., object], tuple[object, ...]]]] = {}

    def __call__(self, nbytes: int, fn: Callable[..., object], *args: object) -> bool:
        now = self.reactor.seconds()
        if self.rate > 0:
            start = max(now, self._free_at)
            self._free_at = start + nbytes / self.rate
            if start <= now and not self.batched:
                fn(*args)
                return True
        elif self.batched:
            start = now
        else:
            fn(*args)
            return True
        tick = math.ceil((start - self.phase) / self.TICK)
        waiting = self._waiting.get(tick)
        if waiting is None:
            waiting = self._waiting[tick] = []
            self.reactor.callLater(max(0.0, tick * self.TICK + self.phase - now), self._release, tick)
        waiting.append((fn, args))
        return False

    def _release(self, tick: int) -> None:
        # a burst: what the writes send leaves once per connection, at its end
        cork = self.cork
        holding = cork is not None and cork.hold()
        try:
            for fn, args in self._waiting.pop(tick, ()):
                try:
                    fn(*args)
                except Exception:  # noqa: BLE001 - one held write's failure must not keep the others back
                    log.exception("a write held by the rate limiter failed when let go")
        finally:
            if holding and cork is not None:
                cork.release()
