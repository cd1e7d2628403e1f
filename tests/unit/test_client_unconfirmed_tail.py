"""Reading an open ledger's tail past its LAC without fencing it
(wire/client/unconfirmed_tail.py), with fake bookies that answer as bookied does."""

from __future__ import annotations

import pytest

from bkctl.wire.codecs.digest import DigestManager, DigestType
from tests.support.deferreds import successResultOf
from tests.support.ledger_client import (
    filled_ledger,
    forget_reactors,  # noqa: F401 (an autouse fixture)
    settled,
)


def put(pool, lh, entry_id, lac, length, payload, replicas):
    """Store an entry as the writer sent it, on the first ``replicas`` bookies of its write set."""
    body = DigestManager(lh.ledger_id, DigestType.CRC32C, b"").package(entry_id, lac, length, payload)
    for b in lh.metadata.write_set(entry_id)[:replicas]:
        pool.conns[b].stored[(lh.ledger_id, entry_id)] = body


def tail_of(client, lh):
    rh = successResultOf(settled(client.open_ledger(lh.ledger_id)))
    return rh, successResultOf(settled(rh.read_tail()))


@pytest.mark.parametrize("protocol", ["v3", "v2"])
def test_the_writers_last_entry_past_the_lac_is_found_and_nothing_is_fenced(protocol):
    client, store, pool, lh = filled_ledger(n=5, close=False, protocol=protocol)
    rh, tail = tail_of(client, lh)
    assert rh.last_add_confirmed == 3  # a reader's LAC: the last entry carries the one before it
    assert (tail.lac, tail.last, tail.newest, tail.beyond_lac) == (3, 4, b"entry-4", 1)
    assert tail.length == sum(len(b"entry-%d" % i) for i in range(5))
    assert tail.holders == {4: 2} and tail.stopped is None
    assert not any(conn.fenced for conn in pool.conns.values())
    md, _ = store.ledgers.read(lh.ledger_id)
    assert not md.is_closed
    assert successResultOf(settled(lh.add_entry(b"entry-5"))) == 5  # the writer goes on


def test_an_entry_fewer_than_an_ack_quorum_hold_is_not_taken_nor_anything_after_it():
    client, store, pool, lh = filled_ledger(n=3, close=False)  # E=3 Qw=2 Qa=2
    put(pool, lh, 3, 1, 100, b"one copy", replicas=1)  # sent, never acknowledged
    put(pool, lh, 4, 1, 110, b"two copies", replicas=2)
    _, tail = tail_of(client, lh)
    assert (tail.lac, tail.last, tail.newest) == (1, 2, b"entry-2")
    assert tail.holders == {2: 2, 3: 1}
    assert tail.stopped.startswith("entry 3 is held by 1 of its 2 bookies, fewer than the ack quorum 2")


def test_an_ack_quorum_smaller_than_the_write_quorum_is_enough_and_pipelined_entries_all_count():
    client, store, pool, lh = filled_ledger(n=2, e=3, qw=3, qa=2, close=False)
    put(pool, lh, 2, 0, 30, b"on two", replicas=2)
    put(pool, lh, 3, 0, 40, b"on three", replicas=3)
    _, tail = tail_of(client, lh)
    assert (tail.lac, tail.last, tail.length, tail.newest) == (0, 3, 40, b"on three")
    assert tail.holders == {1: 3, 2: 2, 3: 3}


def test_a_bookie_that_does_not_answer_does_not_count_as_holding_the_entry():
    client, store, pool, lh = filled_ledger(n=4, close=False)
    rh = successResultOf(settled(client.open_ledger(lh.ledger_id)))
    pool.conns[lh.metadata.write_set(3)[1]].down = True
    tail = successResultOf(settled(rh.read_tail()))
    assert (tail.lac, tail.last, tail.holders) == (2, 2, {3: 1})  # erring on the side of the LAC
    assert "held by 1 of its 2 bookies" in tail.stopped


def test_a_closed_ledger_tail_is_its_last_entry():
    client, store, pool, lh = filled_ledger(n=3)
    _, tail = tail_of(client, lh)
    assert (tail.lac, tail.last, tail.newest, tail.length) == (2, 2, None, lh.metadata.length)


def test_an_empty_open_ledger_has_no_tail():
    client, store, pool, lh = filled_ledger(n=0, close=False)
    _, tail = tail_of(client, lh)
    assert (tail.lac, tail.last, tail.newest, tail.length) == (-1, -1, None, 0)


def test_a_pipelining_writers_whole_tail_past_a_stale_lac_is_judged_window_by_window():
    """Entries sent before any was acknowledged all carry LAC -1: every one of
    them is past the LAC readers see, and more than a window of them."""
    from bkctl.wire.client.unconfirmed_tail import WINDOW

    client, store, pool, lh = filled_ledger(n=0, close=False)
    n = 2 * WINDOW + 5
    for e in range(n):
        put(pool, lh, e, -1, 10 * (e + 1), b"p%d" % e, replicas=2)
    put(pool, lh, n, -1, 10 * (n + 1), b"one copy", replicas=1)
    _, tail = tail_of(client, lh)
    assert (tail.lac, tail.last, tail.beyond_lac, tail.length) == (-1, n - 1, n, 10 * n)
    assert tail.newest == b"p%d" % (n - 1) and tail.holders[n] == 1
