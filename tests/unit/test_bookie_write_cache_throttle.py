"""A full write cache holds adds back, as Java's bookie does (dbStorage_maxThrottleTimeMs),
with Twisted's fakes and a real entry store (tests/support/bookie_server.py)."""

import pytest

from bkctl.wire.codecs.protocol import RC
from tests.support.bookie_server import add, bookie_env, entry


@pytest.fixture
def small_cache(tmp_path):
    """A bookie whose write cache holds two entries, as a full cache waiting on its checkpoint."""
    with bookie_env(tmp_path / "ledgers", {"write_cache_max_bytes": 2 * len(entry(0))}, max_throttle_time=10.0) as env:
        yield env


def _fill(env, c, n=2):
    for i in range(n):
        add(c, i)
    env.journal.sync()
    assert [r.rc for r in c.v2()] == [RC.EOK] * n


def test_an_add_waits_for_room_in_a_full_write_cache_and_keeps_its_order(small_cache):
    """As Java's bookie (dbStorage_maxThrottleTimeMs): a full write cache holds an add back
    until a checkpoint has flushed, instead of refusing it, which a client takes for a failed bookie."""
    env = small_cache
    c = env.connect()
    _fill(env, c)
    add(c, 2)
    add(c, 3)
    assert c.replies() == [] and env.bookie.throttled_adds == 2
    assert env.store.get_entry(1, 2) is None  # not taken yet, so not journaled either
    env.store.flush()
    env.bookie.write_cache_drained()
    assert env.bookie.throttled_adds == 0
    assert [type(r).__name__ for r in env.journal.records[-2:]] == ["EntryRecord", "EntryRecord"]
    assert [r.entry_id for r in env.journal.records[-2:]] == [2, 3]
    env.journal.sync()
    assert [(r.rc, r.entry_id) for r in c.v2()] == [(RC.EOK, 2), (RC.EOK, 3)]


def test_an_add_that_waits_longer_than_max_throttle_time_is_etoomanyrequests(small_cache):
    env = small_cache
    c = env.connect()
    _fill(env, c)
    add(c, 2)
    env.clock.advance(9.9)
    assert c.replies() == []
    add(c, 3)  # waits behind entry 2, with a deadline of its own
    env.clock.advance(0.2)
    [r] = c.v2()
    assert (r.rc, r.entry_id) == (RC.ETOOMANYREQUESTS, 2)
    env.store.flush()
    env.bookie.write_cache_drained()
    env.journal.sync()
    [r] = c.v2()
    assert (r.rc, r.entry_id) == (RC.EOK, 3)
    assert env.clock.getDelayedCalls() == []


def test_adds_still_waiting_when_the_bookie_turns_read_only_are_ereadonly(small_cache):
    env = small_cache
    c = env.connect()
    _fill(env, c)
    add(c, 2)
    env.bookie.mark_readonly("disk", "disk usage 81% over diskUsageThreshold 80%")
    env.bookie.write_cache_drained()  # the checkpoint that could not flush ended
    [r] = c.v2()
    assert (r.rc, r.entry_id) == (RC.EREADONLY, 2)
    assert env.clock.getDelayedCalls() == []


def test_max_throttle_time_zero_refuses_at_once(small_cache):
    env = small_cache
    env.bookie.max_throttle_time = 0
    c = env.connect()
    _fill(env, c)
    add(c, 2)
    [r] = c.v2()
    assert r.rc == RC.ETOOMANYREQUESTS
