"""The one quorum schedule (Java's RoundRobinDistributionSchedule) of readers, writers and placement."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bkctl.wire.client.quorum import INT32_MAX, QuorumSchedule
from bkctl.wire.metadata.ledger import write_set_indices


def test_coverage_rule():
    # E=3 Qw=2 Qa=2: each write quorum needs 1 answer
    assert not QuorumSchedule(3, 2, 2).covered({0})
    assert QuorumSchedule(3, 2, 2).covered({0, 1})
    # E=3 Qw=3 Qa=2: two answers anywhere
    assert not QuorumSchedule(3, 3, 2).covered({0})
    assert QuorumSchedule(3, 3, 2).covered({0, 2})
    # E=5 Qw=3 Qa=3: one answer per write quorum of 3
    assert QuorumSchedule(5, 3, 3).covered({0, 3})
    assert not QuorumSchedule(5, 3, 3).covered({0})
    assert QuorumSchedule(5, 3, 2).answers_to_rule_out == 2


def test_write_sets_are_round_robin():
    s = QuorumSchedule(3, 2, 2)
    assert [s.write_set(e) for e in range(4)] == [[0, 1], [1, 2], [2, 0], [0, 1]]
    assert s.stripe() == ((0, 1), (1, 2), (2, 0))
    assert s.stripe_bookies("abc") == [("a", "b"), ("b", "c"), ("c", "a")]
    assert s.write_set_bookies(5, "abc") == ["c", "a"]


@given(st.integers(1, 9).flatmap(lambda e: st.tuples(st.just(e), st.integers(1, e))), st.integers(0, INT32_MAX + 20))
def test_the_stripe_is_the_metadata_rule_below_java_int_truncation(sizes, entry_id):
    e, qw = sizes
    s = QuorumSchedule(e, qw)
    assert s.write_set(entry_id) == write_set_indices(entry_id, e, qw)
    if entry_id <= s.striped_until:
        assert list(s.stripe()[entry_id % e]) == s.write_set(entry_id)


def test_quorums_and_the_quorums_of_one_position():
    s = QuorumSchedule(4, 2)
    assert s.quorums() == [[0, 1], [1, 2], [2, 3], [3, 0]]
    assert s.quorums_with(0) == [[3, 0], [0, 1]]
    assert QuorumSchedule(3, 3).quorums() == [[0, 1, 2]] == QuorumSchedule(3, 3).quorums_with(1)


@pytest.mark.parametrize("sizes", [(2, 3, 1), (3, 2, 3), (3, 0, 0)])
def test_quorums_out_of_order_are_refused(sizes):
    with pytest.raises(ValueError, match="E >= Qw >= Qa >= 1"):
        QuorumSchedule(*sizes)


@given(
    st.integers(1, 9).flatmap(lambda e: st.tuples(st.just(e), st.integers(1, e))),
    st.one_of(st.integers(0, 200), st.integers(INT32_MAX - 40, INT32_MAX + 40)),
    st.integers(-1, 60),
)
def test_entries_held_by_each_position_are_those_of_the_write_sets(sizes, first, span):
    """Whole stripes by arithmetic, and above Java's int truncation entry by entry: the
    same counts as asking every entry's write set."""
    schedule = QuorumSchedule(*sizes)
    last = first + span
    expected = [0] * sizes[0]
    for entry_id in range(first, last + 1):
        for index in write_set_indices(entry_id, *sizes):
            expected[index] += 1
    assert schedule.held_by_position(first, last) == tuple(expected)
