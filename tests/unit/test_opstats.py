"""The OpStats behind the Java-named summaries: a rolling window's quantiles (NaN
without a closed window or after an empty one, 1.0 the window's true maximum), a count
and a sum since start, and bookied's own fixed buckets summed exactly from the fine ones."""

from __future__ import annotations

import math
import random

import pytest

from bkctl.wire.process.exposition import merged
from bkctl.wire.process.opstats import LATENCY_BUCKETS, SIZE_BOUNDS, OpStat


def test_no_closed_window_no_quantile_but_count_and_sum():
    stat = OpStat()
    stat.observe(0.002)
    stat.observe(0.004, 3)
    assert math.isnan(stat.quantile(0.5)) and math.isnan(stat.quantile(1.0))
    assert stat.count == 4 and stat.sum == pytest.approx(0.014)


def test_quantiles_of_the_last_window_within_the_bucket_precision():
    rng = random.Random(7)
    values = [rng.lognormvariate(math.log(0.003), 0.8) for _ in range(20_000)]
    stat = OpStat()
    for v in values:
        stat.observe(v)
    stat.rotate()
    ordered = sorted(values)
    for q in (0.5, 0.75, 0.95, 0.99, 0.999):
        exact = ordered[math.ceil(q * len(ordered)) - 1]
        assert stat.quantile(q) == pytest.approx(exact, rel=0.05), q
    assert stat.quantile(1.0) == max(values)  # the true maximum, not a bucket bound
    assert stat.quantile(0.9999) <= max(values)


def test_the_window_rolls_over_and_an_empty_window_answers_nan():
    stat = OpStat()
    stat.observe(0.010)
    stat.rotate()
    stat.observe(0.500)  # the window being filled is not read
    assert stat.quantile(1.0) == 0.010
    stat.rotate()
    assert stat.quantile(1.0) == 0.500 and stat.quantile(0.5) <= 0.500
    stat.rotate()  # a window without events
    assert math.isnan(stat.quantile(0.99))
    assert stat.count == 2 and stat.sum == pytest.approx(0.51)


def test_coarse_buckets_are_exact_across_windows():
    stat = OpStat()
    values = [0.00002, 0.000025, 0.0000251, 0.001, 0.0049, 0.3, 7.0]
    for k, v in enumerate(values):
        stat.observe(v)
        if k % 2:
            stat.rotate()
    got = dict(stat.coarse_buckets())
    assert list(got) == list(LATENCY_BUCKETS)
    for bound in LATENCY_BUCKETS:
        assert got[bound] == sum(1 for v in values if v <= bound), bound
    assert sum(stat.cumulative()) == len(values) == stat.count


def test_whole_values_report_whole_quantiles():
    stat = OpStat(SIZE_BOUNDS)
    for n in [1] * 50 + [3] * 40 + [200] * 10:
        stat.observe(n)
    stat.rotate()
    assert stat.quantile(0.5) == 1 and stat.quantile(0.75) == 3 and stat.quantile(1.0) == 200
    assert 200 <= stat.quantile(0.95) <= 200  # clamped to the window's maximum


def test_merged_adds_windows_counts_and_maxima():
    a, b = OpStat(), OpStat()
    a.observe(0.001, 9)
    b.observe(0.1)
    a.rotate()
    b.rotate()
    both = merged([a, b])
    assert both.count == 10 and both.sum == pytest.approx(0.109)
    assert both.quantile(1.0) == 0.1 and both.quantile(0.5) == pytest.approx(0.001, rel=0.05)
    assert merged([a]) is a
