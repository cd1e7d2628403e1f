"""Operation statistics in the shape of Java's OpStatsLogger as its Prometheus provider
exports them (``stats/.../prometheus/DataSketchesOpStatsLogger.java`` of BookKeeper):
a count and a sum since start, and quantiles over a rolling window -- the window
that ended at the last rotation (``prometheusStatsLatencyRolloverSeconds``), NaN
before the first rotation and after a window with no event, as Java's empty
sketch answers.

A module of its own because both the hot path (:class:`~.metrics.RequestObserver`)
and the exposition (:mod:`.exposition`, :mod:`.java_names`) use it, and the
quantile arithmetic deserves tests apart from either.

The hot path pays one ``bisect`` into a table of bounds, three additions and a
comparison per observation (or per run of ``n`` observations answered together);
no lock: the reactor thread makes every observation but the journal's, whose
writer thread feeds its own :class:`OpStat` objects; the reactor thread rotates
and reads.  A reading may see one observation half-recorded, never a corrupted
figure.

The quantiles come from the window's counts in fine buckets (8 per octave: within
about 4.5% of the true value) and are never above the window's true maximum,
which quantile 1.0 is.  The fine bounds include every bound of bookied's own
fixed-bucket histograms (:data:`LATENCY_BUCKETS`, :data:`SIZE_BUCKETS`), so those
histograms' cumulative counts are exact sums of the fine ones.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from typing import NamedTuple

__all__ = [
    "JAVA_QUANTILES",
    "LATENCY_BUCKETS",
    "LATENCY_BOUNDS",
    "SIZE_BOUNDS",
    "SIZE_BUCKETS",
    "Bounds",
    "OpStat",
]

#: Seconds: bookied's own latency histograms' buckets. The low end matters: an fsync on a
#: disk with a write cache takes tens of microseconds.
LATENCY_BUCKETS = (
    0.000025,
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)

#: the quantiles Java's PrometheusTextFormat writes for every OpStatsLogger, in its order
JAVA_QUANTILES = (0.5, 0.75, 0.95, 0.99, 0.999, 0.9999, 1.0)


class Bounds(NamedTuple):
    """The fine buckets' upper bounds, ascending (a last bucket above them is implied),
    and where each coarse bound (of an exported fixed-bucket histogram) is among them."""

    fine: tuple[float, ...]
    coarse: tuple[float, ...]
    #: index in ``fine`` of each of ``coarse``
    coarse_at: tuple[int, ...]
    #: whether the observations are whole numbers (a bucket's estimate is then its upper bound)
    whole: bool

    @classmethod
    def of(cls, grid: list[float], coarse: tuple[float, ...], whole: bool) -> Bounds:
        fine = tuple(sorted(set(grid) | set(coarse)))
        return cls(fine, coarse, tuple(fine.index(b) for b in coarse), whole)


def _latency_grid() -> list[float]:
    """1 us to about 200 s, 8 bounds per octave."""
    return [1e-6 * 2 ** (k / 8) for k in range(8 * 28)]


def _size_grid() -> list[float]:
    """Every whole number to 64, then 8 bounds per octave to 2**24."""
    return [float(k) for k in range(1, 65)] + [float(math.ceil(2 ** (k / 8))) for k in range(49, 8 * 24)]


LATENCY_BOUNDS = Bounds.of(_latency_grid(), LATENCY_BUCKETS, whole=False)
SIZE_BOUNDS = Bounds.of(_size_grid(), tuple(float(b) for b in SIZE_BUCKETS), whole=True)


class OpStat:
    """One OpStatsLogger's events of one outcome (Java keeps a success and a failure
    side; bookied keeps an :class:`OpStat` for each)."""

    __slots__ = ("bounds", "fine", "window", "max", "closed", "closed_max", "folded", "count", "sum")

    def __init__(self, bounds: Bounds = LATENCY_BOUNDS):
        self.bounds = bounds
        self.fine = bounds.fine
        n = len(self.fine) + 1
        #: counts of the window being filled, by fine bucket
        self.window = [0] * n
        #: the largest value observed in the window being filled
        self.max = 0.0
        #: the last closed window's counts (None before the first rotation) and its maximum
        self.closed: list[int] | None = None
        self.closed_max = 0.0
        #: the counts of every window closed before ``closed``
        self.folded = [0] * n
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float, n: int = 1) -> None:
        """``n`` events of ``value`` (a run of requests answered together)."""
        self.window[bisect_left(self.fine, value)] += n
        self.count += n
        self.sum += value * n
        if value > self.max:
            self.max = value

    def rotate(self) -> None:
        """Close the window being filled: its quantiles are the ones read until the next
        rotation.  (An observation racing this from another thread lands in either window.)"""
        closed, closed_max = self.window, self.max
        self.window = [0] * len(closed)
        self.max = 0.0
        if self.closed is not None:
            folded = self.folded
            for i, c in enumerate(self.closed):
                if c:
                    folded[i] += c
        self.closed, self.closed_max = closed, closed_max

    def cumulative(self) -> list[int]:
        """Every event since start, by fine bucket."""
        parts = [self.folded, self.window] + ([self.closed] if self.closed is not None else [])
        return [sum(col) for col in zip(*parts)]

    def coarse_buckets(self) -> list[tuple[float, int]]:
        """The cumulative counts at each coarse bound (Prometheus' ``le`` buckets, without +Inf)."""
        counts = self.cumulative()
        out, seen, start = [], 0, 0
        for bound, at in zip(self.bounds.coarse, self.bounds.coarse_at):
            seen += sum(counts[start : at + 1])
            start = at + 1
            out.append((bound, seen))
        return out

    def quantile(self, q: float) -> float:
        """The ``q`` quantile (0..1) of the last closed window; NaN without one or when it
        held no event.  1.0 is the window's true maximum."""
        return self.quantiles((q,))[0]

    def quantiles(self, qs: Sequence[float]) -> list[float]:
        """:meth:`quantile` of each of ``qs`` (ascending), in one pass over the window."""
        counts = self.closed
        total = sum(counts) if counts is not None else 0
        if counts is None or not total:
            return [math.nan] * len(qs)
        top = self.closed_max
        ranks = [max(1, math.ceil(q * total)) for q in qs]
        out = [top] * len(qs)
        fine, whole = self.fine, self.bounds.whole
        k, seen = 0, 0
        while k < len(qs) and qs[k] >= 1.0:
            k += 1
        for i, c in enumerate(counts):
            if not c:
                continue
            seen += c
            while k < len(qs) and ranks[k] <= seen and qs[k] < 1.0:
                if i < len(fine):
                    hi = fine[i]
                    estimate = hi if whole else math.sqrt((fine[i - 1] if i else hi / 2) * hi)
                    out[k] = min(estimate, top)
                k += 1
            if k >= len(qs):
                break
        return out
