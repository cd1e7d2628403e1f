"""The ledger layer's reads beyond the basics: v2 batch reads, a slow bookie with Qa < Qw, long-poll
LAC reads and explicit LAC, with fake bookies and the in-memory metadata store (tests/support/ledger_client.py)."""

from __future__ import annotations

import pytest

from bkctl.wire import fastpath
from bkctl.wire.client.errors import (
    BookieUnavailable,
    NoSuchEntry,
)
from bkctl.wire.errors import DigestError
from tests.support.deferreds import failureResultOf, successResultOf
from tests.support.ledger_client import (
    B,
    create,
    filled_ledger,
    forget_reactors,  # noqa: F401 (an autouse fixture)
    make_client,
    settled,
    track,
)

# ----------------------------------------------------------------- batch reads (v2, E == Qw)


def written(client, pool, n, e=3, qw=3, qa=2):
    """A ledger with ``n`` entries stored on every bookie of its write sets."""
    h = create(client, e, qw, qa)
    for b in h.metadata.last_ensemble:
        pool.get(b).auto = True
    successResultOf(settled(h.add_entries([b"payload-%d" % i for i in range(n)])))
    return h


def single_reads(pool):
    return sum(len(c.reads) for c in pool.conns.values())


@pytest.fixture(params=[True, False], ids=["batch-reads", "fastpaths-off"])
def batch_reads(request, monkeypatch):
    """v2 batch reads are a fast path: each test runs with it on and off."""
    monkeypatch.setattr(fastpath, "selected", lambda: fastpath.build(request.param))
    return request.param


def test_v2_reads_of_an_unstriped_ledger_use_batch_reads(batch_reads):
    client, _store, pool = make_client(protocol="v2")
    h = written(client, pool, 1500)  # more chunks than are kept in flight
    got = successResultOf(settled(h.read_entries(0, 1499)))
    assert got == [(i, b"payload-%d" % i) for i in range(1500)]
    batches = [r for c in pool.conns.values() for r in c.batch_reads]
    if not batch_reads:
        assert batches == [] and single_reads(pool) == 1500
        return
    assert single_reads(pool) == 0
    assert sorted(first for _l, first, _n in batches) == [0, 256, 512, 768, 1024, 1280]
    assert all(n <= 256 for _l, _f, n in batches)
    # requests rotate over the ensemble like the write sets do
    assert len({c.bookie_id for c in pool.conns.values() if c.batch_reads}) > 1


def test_short_answers_continue_and_corrupt_or_unable_replicas_hand_over(batch_reads):
    client, _store, pool = make_client(protocol="v2")
    h = written(client, pool, 100)
    first, second, third = h.metadata.write_set(0)
    pool.get(first).batch_limit = 7  # a byte budget that fits 7 entries
    body = pool.get(first).stored[(h.ledger_id, 3)]
    pool.get(first).stored[(h.ledger_id, 3)] = body[:-1] + bytes([body[-1] ^ 1])
    pool.get(second).no_batch = True  # an older bookie
    got = successResultOf(settled(h.read_entries(0, 99)))
    assert got == [(i, b"payload-%d" % i) for i in range(100)]
    if not batch_reads:  # entry by entry; entry 3 from the next replica
        assert single_reads(pool) == 101
        return
    assert (h.ledger_id, 3, 97) in pool.get(second).batch_reads  # tried after the corrupt entry ...
    assert any(first_id == 3 for _l, first_id, _n in pool.get(third).batch_reads)  # ... and handed over
    assert single_reads(pool) == 0


def test_when_no_replica_can_batch_read_entries_are_read_one_by_one(batch_reads):
    client, _store, pool = make_client(protocol="v2")
    h = written(client, pool, 20)
    for b in h.metadata.last_ensemble:
        pool.get(b).no_batch = True
    assert successResultOf(settled(h.read_entries(0, 19))) == [(i, b"payload-%d" % i) for i in range(20)]
    assert single_reads(pool) == 20


def test_a_batch_read_of_a_missing_entry_fails_as_a_single_read_would(batch_reads):
    client, _store, pool = make_client(protocol="v2")
    h = written(client, pool, 10)
    for b in h.metadata.last_ensemble:
        del pool.get(b).stored[(h.ledger_id, 5)]
    err = failureResultOf(settled(h.read_entries(0, 9))).value
    assert isinstance(err, NoSuchEntry) and "entry 5 " in str(err)


def test_a_bad_digest_inside_a_short_batch_answer_is_named_for_its_entry(batch_reads):
    """Entry 5 corrupt on every replica, answers short of their ask: the entries before it
    are taken from the batches, and the read fails with the digest error of entry 5 -- not of
    the batch, nor of the entry a batch began with."""
    client, _store, pool = make_client(protocol="v2")
    h = written(client, pool, 10)
    for b in h.metadata.last_ensemble:
        pool.get(b).batch_limit = 3  # each answer short of its ask
        body = pool.get(b).stored[(h.ledger_id, 5)]
        pool.get(b).stored[(h.ledger_id, 5)] = body[:-1] + bytes([body[-1] ^ 1])
    err = failureResultOf(settled(h.read_entries(0, 9))).value
    assert isinstance(err, DigestError) and f"entry 5 of ledger {h.ledger_id} " in str(err)
    assert "digest verification on every replica" in str(err)
    if batch_reads:  # entries 0..4 came in batches, short ones
        assert any(first == 3 for c in pool.conns.values() for _l, first, _n in c.batch_reads)


@pytest.mark.parametrize("protocol", ["v2", "v3"])
def test_reads_follow_ensemble_changes(protocol, batch_reads):
    client, store, pool = make_client(bookies=B[:5], protocol=protocol)
    h = written(client, pool, 10, e=2, qw=2, qa=2)
    old = h.metadata.last_ensemble
    new = [b for b in B[:5] if b not in old][:2]
    md = h.metadata.with_ensemble_change(6, new)
    for (lid, e), body in list(pool.get(old[0]).stored.items()):
        if e >= 6:
            for b in old:
                pool.get(b).stored.pop((lid, e), None)
            for b in new:
                pool.get(b).stored[(lid, e)] = body
    h.metadata = md
    assert successResultOf(settled(h.read_entries(0, 9))) == [(i, b"payload-%d" % i) for i in range(10)]
    if protocol == "v2" and batch_reads:  # batch reads, one per segment
        assert {f for b in old for _l, f, _n in pool.get(b).batch_reads} == {0}
        assert {f for b in new for _l, f, _n in pool.get(b).batch_reads} == {6}
        assert single_reads(pool) == 0
    else:  # each entry from the first bookie of its write set, in its own segment
        assert sorted(e for b in old for _l, e, _f in pool.get(b).reads) == list(range(6))
        assert sorted(e for b in new for _l, e, _f in pool.get(b).reads) == list(range(6, 10))


@pytest.mark.parametrize("protocol,e,qw", [("v2", 3, 2), ("v3", 3, 3)])
def test_striped_ledgers_and_v3_read_entry_by_entry(protocol, e, qw):
    client, _store, pool = make_client(protocol=protocol)
    h = written(client, pool, 30, e=e, qw=qw, qa=2)
    assert successResultOf(settled(h.read_entries(0, 29))) == [(i, b"payload-%d" % i) for i in range(30)]
    assert all(not c.batch_reads for c in pool.conns.values())
    assert single_reads(pool) == 30


# ----------------------------------------------------------------- a slow bookie with Qa < Qw


def test_adds_wait_while_a_bookie_is_max_inflight_writes_behind():
    client, store, pool = make_client(max_inflight=10)
    h = create(client, 3, 3, 2)
    fast, slow = h.metadata.last_ensemble[:2], pool.get(h.metadata.last_ensemble[2])
    for b in fast:
        pool.get(b).auto = True
    done = []
    for i in range(20):
        track(h.add_entry(b"e%d" % i), done)
    # Qa = 2 completes entries without the slow bookie, until it is 10 writes behind
    assert done == [("ok", i) for i in range(10)]
    assert sum(slow.outstanding(e) for e in range(20)) == 10
    assert not h.writable() and h.ensemble_changes == 0
    slow.ack(0)  # one answer is room for one more add (refill 10 // 8 = 1)
    assert done == [("ok", i) for i in range(11)]
    while any(slow.outstanding(e) for e in range(20)):
        slow.ack(next(e for e in range(20) if slow.outstanding(e)))
    assert done == [("ok", i) for i in range(20)]
    assert h.writable() and h.ensemble_changes == 0 and store.called("ledgers.update") == []


# ------------------------------------------------------------ long-poll LAC reads


def test_long_poll_gets_the_next_entry_with_the_lac_and_cancels_the_other_polls():
    client, store, pool, lh = filled_ledger(close=False)
    rh = successResultOf(settled(client.open_ledger(lh.ledger_id)))
    assert rh.last_add_confirmed == 4
    assert successResultOf(settled(rh.wait_for_entry(3, 1000))) == (4, None)  # readable already: no poll
    assert all(not c.polls for c in pool.conns.values())
    d = rh.wait_for_entry(5, 1000)
    assert not d.called
    polls = [p for b in rh.metadata.last_ensemble for p in pool.conns[b].polls]
    assert len(polls) == 3 and {(lid, prev) for lid, prev, _ in polls} == {(lh.ledger_id, 4)}
    successResultOf(settled(lh.add_entry(b"entry-6")))  # carries LAC 5 to the bookies of its write set
    assert successResultOf(settled(d)) == (5, (5, b"entry-5"))
    assert rh.last_add_confirmed == 5
    assert all(p[2].called for p in polls)  # the others were cancelled


def test_long_poll_answer_without_the_entry_moves_the_lac_only():
    client, store, pool, lh = filled_ledger(e=2, qw=1, qa=1, close=False)
    rh = successResultOf(settled(client.open_ledger(lh.ledger_id)))
    d = rh.wait_for_entry(5, 1000)
    successResultOf(settled(lh.add_entry(b"entry-6")))  # on the bookie that does not hold entry 5
    assert successResultOf(settled(d)) == (5, None)
    assert successResultOf(settled(rh.read_entries(5, 5))) == [(5, b"entry-5")]


def test_long_poll_that_waits_in_vain_and_one_with_a_bad_copy():
    client, store, pool, lh = filled_ledger(close=False)
    rh = successResultOf(settled(client.open_ledger(lh.ledger_id)))
    d = rh.wait_for_entry(5, 1000)
    for b in rh.metadata.last_ensemble:
        pool.conns[b].answer_polls(expire=True)
    assert successResultOf(settled(d)) == (4, None)
    # the copy of entry 5 that comes along is corrupt: the LAC still counts, the entry is read as usual
    for b in rh.metadata.write_set(5):
        body = bytearray(pool.conns[b].stored[(lh.ledger_id, 5)])
        body[-1] ^= 1
        pool.conns[b].stored[(lh.ledger_id, 5)] = bytes(body)
    d = rh.wait_for_entry(5, 1000)
    successResultOf(settled(lh.add_entry(b"entry-6")))
    assert successResultOf(settled(d)) == (5, None)


def test_long_poll_of_a_ledger_the_bookies_never_heard_of_is_an_empty_answer():
    """Nothing written yet: the bookies answer ENOLEDGER at once, which is no
    news (a tail goes on waiting), not a failure."""
    client, store, pool, lh = filled_ledger(n=0, close=False)
    rh = successResultOf(settled(client.open_ledger(lh.ledger_id)))
    ensemble = rh.metadata.last_ensemble
    assert successResultOf(settled(rh.wait_for_entry(0, 1000))) == (-1, None)
    pool.conns[ensemble[0]].down = True  # a dead bookie among them changes nothing
    assert successResultOf(settled(rh.wait_for_entry(0, 1000))) == (-1, None)
    for b in ensemble:
        pool.conns[b].down = True
    assert failureResultOf(settled(rh.wait_for_entry(0, 1000))).check(BookieUnavailable)


def test_long_poll_fails_only_when_every_bookie_fails():
    client, store, pool, lh = filled_ledger(close=False)
    rh = successResultOf(settled(client.open_ledger(lh.ledger_id)))
    ensemble = rh.metadata.last_ensemble
    pool.conns[ensemble[0]].down = True
    d = rh.wait_for_entry(5, 1000)
    for b in ensemble[1:]:
        pool.conns[b].answer_polls(expire=True)
    assert successResultOf(settled(d)) == (4, None)
    for b in ensemble:
        pool.conns[b].down = True
    assert failureResultOf(settled(rh.wait_for_entry(5, 1000))).check(BookieUnavailable)


# ----------------------------------------------------------------- explicit LAC (explicitLacInterval)


def _auto_ledger(**options):
    client, store, pool = make_client(**options)
    h = create(client)
    for b in h.metadata.last_ensemble:
        pool.get(b).auto = True
    return client, pool, h


def _lacs_sent(pool, h):
    return {b: [lac for _lid, lac, _key, _body in pool.get(b).lacs] for b in h.metadata.last_ensemble}


def test_explicit_lac_reaches_every_bookie_one_interval_after_the_last_add():
    client, pool, h = _auto_ledger(explicit_lac_interval=0.002)
    assert successResultOf(settled(h.add_entry(b"a"))) == 0
    assert _lacs_sent(pool, h) == {b: [] for b in h.metadata.last_ensemble}
    client.reactor.advance(0.002)
    assert _lacs_sent(pool, h) == {b: [0] for b in h.metadata.last_ensemble}
    for b in h.metadata.last_ensemble:
        assert h.digest.verify_lac(pool.get(b).lacs[0][3]) == 0
    assert client.reactor.getDelayedCalls() == []  # nothing left to tell: no more ticks
    client.reactor.advance(1)
    assert _lacs_sent(pool, h) == {b: [0] for b in h.metadata.last_ensemble}


def test_explicit_lac_is_not_sent_while_adds_carry_newer_lacs():
    client, pool, h = _auto_ledger(explicit_lac_interval=0.001)
    for i in range(0, 10, 2):  # a busy stream: each tick finds that adds carried a newer LAC
        successResultOf(settled(h.add_entry(b"e%d" % i)))
        successResultOf(settled(h.add_entry(b"e%d" % (i + 1))))
        client.reactor.advance(0.001)
    assert all(not sent for sent in _lacs_sent(pool, h).values())
    client.reactor.advance(0.001)  # the stream stopped: the last LAC goes out once
    assert _lacs_sent(pool, h) == {b: [9] for b in h.metadata.last_ensemble}
    client.reactor.advance(0.01)
    assert _lacs_sent(pool, h) == {b: [9] for b in h.metadata.last_ensemble}


def test_explicit_lac_is_off_by_default_and_stops_at_close():
    client, pool, h = _auto_ledger()
    successResultOf(settled(h.add_entry(b"a")))
    assert client.reactor.getDelayedCalls() == []
    client, pool, h = _auto_ledger(explicit_lac_interval=0.5)
    successResultOf(settled(h.add_entry(b"a")))
    assert len(client.reactor.getDelayedCalls()) == 1
    successResultOf(settled(h.close()))
    assert client.reactor.getDelayedCalls() == []
    client.reactor.advance(1)
    assert all(not sent for sent in _lacs_sent(pool, h).values())
    with pytest.raises(ValueError):
        make_client(explicit_lac_interval=-1)
