"""The ledger layer with fake bookie connections, the in-memory metadata store and task.Clock.

The fake bookies implement the ledger layer's BookieChannel (add/read/read_lac
with Deferreds the test fires by hand, or automatically from an in-memory entry
map); the store is tests/support/fake_store.py, checked against ZooKeeper.  As in
production, the client runs its metadata calls on the reactor's thread pool
(tests/support/threads.py): they wait until the test settles them, and their
results come back later, not inline.
"""

from __future__ import annotations

import random
from contextlib import contextmanager
from dataclasses import replace

import pytest
from twisted.internet import defer, task

from bkctl.wire.client.errors import (
    BookieTimeout,
    BookieUnavailable,
    EntryNotConfirmed,
    LedgerClosedError,
    LedgerFencedError,
    NoSuchEntry,
    NotEnoughBookies,
    TooManyRequests,
    Unauthorized,
)
from bkctl.wire.client.placement import RandomPlacement
from bkctl.wire.codecs.digest import DigestManager, DigestType
from bkctl.wire.errors import Conflict, DigestError, MetadataError
from bkctl.wire.metadata.ledger import LedgerState
from tests.support.deferreds import failureResultOf, successResultOf
from tests.support.fake_bookie import header
from tests.support.ledger_client import (
    REACTORS,
    B,
    create,
    filled_ledger,
    forget_reactors,  # noqa: F401 (an autouse fixture)
    make_client,
    settle,
    settled,
    track,
)

# ----------------------------------------------------------------- placement


def test_placement_picks_distinct_writable_bookies_and_excludes_read_only():
    p = RandomPlacement(random.Random(1))
    for _ in range(50):
        ens = p.new_ensemble(3, B[:5], readonly=[B[0]])
        assert len(set(ens)) == 3 and B[0] not in ens


def test_placement_error_gives_the_counts():
    p = RandomPlacement()
    with pytest.raises(NotEnoughBookies) as exc:
        p.new_ensemble(3, [B[0], B[1], B[2]], readonly=[B[2]])
    assert str(exc.value) == "need 3 writable bookies, found 2 (1 read-only)"
    assert (exc.value.needed, exc.value.available, exc.value.readonly) == (3, 2, 1)


def test_placement_replacement_avoids_ensemble_and_failed_bookies():
    p = RandomPlacement(random.Random(3))
    ens = [B[0], B[1], B[2]]
    for _ in range(30):
        new = p.replace_bookies(ens, {B[1]}, B[:5], exclude={B[3]})
        assert new == [B[0], B[4], B[2]]
    with pytest.raises(NotEnoughBookies) as exc:
        p.replace_bookies(ens, {B[1]}, B[:3])
    assert "to replace 10.0.0.2:3181" in str(exc.value)


# ----------------------------------------------------------------- create


def test_create_validates_quorums_with_ledger_metadata_rules():
    client, store, _ = make_client()
    failureResultOf(settled(client.create_ledger(2, 3, 2)), MetadataError)
    failureResultOf(settled(client.create_ledger(3, 2, 0)), MetadataError)
    assert list(store.ledgers.ids()) == []


def test_create_without_enough_bookies():
    client, _, _ = make_client(bookies=B[:3], readonly=[B[2]])
    failure = failureResultOf(settled(client.create_ledger(3, 2, 2)), NotEnoughBookies)
    assert str(failure.value) == "need 3 writable bookies, found 2 (1 read-only)"


def test_create_writes_metadata_first():
    client, store, pool = make_client()
    lh = create(client, 3, 2, 2, password=b"pw", custom_metadata={"app": b"x"})
    md, version = store.ledgers.read(lh.ledger_id)
    assert md.state is LedgerState.OPEN and version == 0
    assert (md.ensemble_size, md.write_quorum, md.ack_quorum) == (3, 2, 2)
    assert md.password == b"pw" and md.digest_type is DigestType.CRC32C
    assert md.custom_metadata == {"app": b"x"}
    assert pool.conns == {}  # nothing sent to bookies yet


def test_metadata_calls_run_on_the_thread_pool_and_answer_later():
    client, store, pool = make_client()
    store.calls.clear()
    d = client.create_ledger(3, 2, 2)
    assert not d.called and store.calls == []  # handed to the pool, nothing ran inline
    [reactor] = REACTORS
    reactor.thread_pool.run_next()  # the bookie lists, read "on another thread"...
    assert store.called("registration.watch_writable_bookies") and not store.called("ledgers.create")
    assert len(reactor.from_threads) == 1 and not d.called  # ...answer through callFromThread
    settle()
    assert store.ledgers.read(successResultOf(settled(d)).ledger_id)[1] == 0


# ----------------------------------------------------------------- striping, quorum, ordering


def test_write_set_striping():
    client, store, pool = make_client()
    lh = create(client, 3, 2, 2)
    ens = lh.metadata.last_ensemble
    for _ in range(6):
        lh.add_entry(b"x")
    for e in range(6):
        expected = {ens[e % 3], ens[(e + 1) % 3]}
        got = {b for b, c in pool.conns.items() if c.outstanding(e)}
        assert got == expected, f"entry {e}"
        assert lh.metadata.write_set(e) == [ens[e % 3], ens[(e + 1) % 3]]


def test_write_sets_across_the_end_of_the_stripe():
    """Adds go to metadata.write_set(e) where striping stops (past
    ``striped_until`` Java's int truncation decides): the handle's cached
    stripe of write sets ends there."""
    client, store, pool = make_client()
    lh = create(client, 3, 2, 2)
    ens = lh.metadata.last_ensemble
    first = lh.schedule.striped_until - 3
    lh._next_entry_id, lh._lac = first, first - 1  # as if that many entries had been added
    for _ in range(8):
        lh.add_entry(b"x")
    striped = [{ens[e % 3], ens[(e + 1) % 3]} for e in range(first, first + 8)]
    expected = [set(lh.metadata.write_set(e)) for e in range(first, first + 8)]
    assert expected != striped  # the range does cross the end of the stripe
    assert [{b for b, c in pool.conns.items() if c.outstanding(e)} for e in range(first, first + 8)] == expected


def test_completions_fire_strictly_in_entry_order():
    client, store, pool = make_client()
    lh = create(client, 3, 2, 2)
    done = []
    for e in range(4):
        track(lh.add_entry(b"e%d" % e), done)
    ws = {e: lh.metadata.write_set(e) for e in range(4)}
    for e in (3, 2, 1):  # later entries fully acknowledged first
        for b in ws[e]:
            pool.conns[b].ack(e)
    assert done == [] and lh.last_add_confirmed == -1
    pool.conns[ws[0][0]].ack(0)
    assert done == []  # one ack of two
    pool.conns[ws[0][1]].ack(0)
    assert done == [("ok", 0), ("ok", 1), ("ok", 2), ("ok", 3)]
    assert lh.last_add_confirmed == 3


@contextmanager
def burst(pool):
    """A burst of ``pool``'s cork (as a chunk of answers handed out makes one), ended even
    when an assertion inside fails."""
    assert pool.cork.hold()
    try:
        yield
    finally:
        pool.cork.release()


def test_adds_acknowledged_during_a_burst_complete_at_its_end_in_order():
    """A chunk of answers handed out (a burst) completes the adds it
    acknowledges once, at its end: in entry order, each seeing its own LAC."""
    client, store, pool = make_client()
    lh = create(client, 3, 2, 2)
    done = []
    for _ in range(4):
        lh.add_entry(b"x").addCallback(lambda r: done.append((r, lh.last_add_confirmed)))
    with burst(pool):
        for e in range(4):
            for b in lh.metadata.write_set(e):
                pool.conns[b].ack(e)
        assert done == [] and lh.last_add_confirmed == -1  # held to the burst's end
    assert done == [(0, 0), (1, 1), (2, 2), (3, 3)]


def tracked_adds(n: int, e: int = 3, qw: int = 2, qa: int = 2, **kw):
    """A new ledger with ``n`` adds outstanding: ``(store, pool, handle, outcomes)``,
    each add's outcome appended to ``outcomes`` as it comes (``track``)."""
    client, store, pool = make_client(**kw)
    lh = create(client, e, qw, qa)
    done = []
    for _ in range(n):
        track(lh.add_entry(b"x"), done)
    return store, pool, lh, done


def test_an_add_acknowledged_before_a_fencing_answer_of_the_same_burst_succeeds():
    _store, pool, lh, done = tracked_adds(3, qw=3)
    ens = lh.metadata.last_ensemble
    with burst(pool):
        for e in (0, 1):
            pool.conns[ens[0]].ack(e)
            pool.conns[ens[1]].ack(e)
        pool.conns[ens[0]].fail(2, LedgerFencedError("fenced", bookie=ens[0]))
        assert [d[0] for d in done] == ["ok", "ok", "err"]  # before the burst ends
    assert done[:2] == [("ok", 0), ("ok", 1)] and isinstance(done[2][1], LedgerFencedError)
    assert len(done) == 3 and lh.last_add_confirmed == 1


def test_an_add_acknowledged_before_a_bookie_failure_of_the_same_burst_completes_before_the_ensemble_change():
    _store, pool, lh, done = tracked_adds(2, bookies=B[:4])
    ws0, ws1 = lh.metadata.write_set(0), lh.metadata.write_set(1)
    with burst(pool):
        for b in ws0:
            pool.conns[b].ack(0)
        pool.conns[ws1[0]].fail(1, BookieUnavailable("down", bookie=ws1[0]))
    assert done == [("ok", 0)] and lh.ensemble_changes == 0  # the change still waits for its metadata write
    settle()
    for b in lh.metadata.write_set(1):
        if pool.conns[b].outstanding(1):
            pool.conns[b].ack(1)
    assert done == [("ok", 0), ("ok", 1)] and lh.ensemble_changes == 1


def test_ack_quorum_math():
    client, store, pool = make_client()
    lh = create(client, 3, 3, 2)
    done = []
    track(lh.add_entry(b"a"), done)
    ws = lh.metadata.write_set(0)
    assert len(ws) == 3
    pool.conns[ws[2]].ack(0)
    assert done == []
    pool.conns[ws[0]].ack(0)
    assert done == [("ok", 0)]
    pool.conns[ws[1]].ack(0)  # the third copy changes nothing
    assert done == [("ok", 0)]

    lh1 = create(client, 3, 3, 1)
    done1 = []
    track(lh1.add_entry(b"a"), done1)
    pool.conns[lh1.metadata.write_set(0)[1]].ack(0)
    assert done1 == [("ok", 0)]


def test_each_entry_carries_the_lac_known_when_it_was_sent():
    client, store, pool = make_client()
    lh = create(client, 3, 3, 3)
    lh.add_entry(b"a")
    lh.add_entry(b"bb")
    conn = pool.conns[lh.metadata.last_ensemble[0]]
    for b in lh.metadata.write_set(0):
        pool.conns[b].ack(0)
    lh.add_entry(b"ccc")
    bodies = {e: body for e, body, _ in conn.sent}
    assert header(bodies[0])[1:] == (0, -1, 1)
    assert header(bodies[1])[1:] == (1, -1, 3)
    assert header(bodies[2])[1:] == (2, 0, 6)
    DigestManager(lh.ledger_id, DigestType.CRC32C, b"").verify(bodies[2], 2)


def test_pipelining_is_bounded():
    client, store, pool = make_client(max_inflight=2, max_waiting=2)
    lh = create(client, 3, 3, 3)
    conns = [pool.get(b) for b in lh.metadata.last_ensemble]
    done = []
    for _ in range(4):
        track(lh.add_entry(b"x"), done)
    assert lh.pending_adds == 2 and lh.waiting_adds == 2
    assert {e for e, _, _ in conns[0].sent} == {0, 1}
    # no unbounded queue: beyond max_waiting the add is refused
    failureResultOf(settled(lh.add_entry(b"too many")), TooManyRequests)
    assert not lh.writable()
    room = lh.wait_writable()
    assert not room.called
    for c in conns:
        c.ack(0)
    assert done == [("ok", 0)]
    assert {e for e, _, _ in conns[0].sent} == {0, 1, 2}  # a waiting add took the free slot
    for e in (1, 2, 3):
        for c in conns:
            c.ack(e)
    assert done == [("ok", 0), ("ok", 1), ("ok", 2), ("ok", 3)]
    assert room.called


def test_a_waiting_add_fires_its_own_deferred_once_started():
    """An add that waited for room is completed through the Deferred add_entry
    returned (not a second one chained to it): its id, in order; one its caller
    cancelled meanwhile is still written in its place, and its late completion
    is dropped without an error."""
    client, store, pool = make_client(max_inflight=1, max_waiting=3)
    lh = create(client, 1, 1, 1)
    conn = pool.get(lh.metadata.last_ensemble[0])
    done = []
    adds = [lh.add_entry(b"e%d" % e) for e in range(3)]
    for d in adds:
        track(d, done)
    assert lh.pending_adds == 1 and lh.waiting_adds == 2
    adds[1].cancel()
    assert done == [("err", done[0][1])] and isinstance(done[0][1], defer.CancelledError)
    for e in range(3):
        conn.ack(e)
    assert [e for e, _, _ in conn.sent] == [0, 1, 2]
    assert done[1:] == [("ok", 0), ("ok", 2)]
    assert lh.last_add_confirmed == 2 and lh.pending_adds == 0


def test_add_entries_pulls_payloads_only_when_there_is_room():
    client, store, pool = make_client(max_inflight=3)
    lh = create(client, 3, 3, 3)
    conns = [pool.get(b) for b in lh.metadata.last_ensemble]
    pulled = []

    def payloads():
        for i in range(10):
            pulled.append(i)
            yield b"p%d" % i

    d = lh.add_entries(payloads())
    assert len(pulled) == 3 and lh.waiting_adds == 0
    for e in range(10):
        for c in conns:
            c.ack(e)
        assert len(pulled) <= e + 1 + 3
    assert successResultOf(settled(d)) == 9


# ----------------------------------------------------------------- ensemble change


def test_failed_bookie_triggers_ensemble_change_and_resend():
    client, store, pool = make_client(bookies=B[:4])
    lh = create(client, 3, 2, 2)
    ens = list(lh.metadata.last_ensemble)
    spare = next(b for b in B[:4] if b not in ens)
    done = []
    for e in range(2):
        track(lh.add_entry(b"x"), done)
        for b in lh.metadata.write_set(e):
            pool.conns[b].ack(e)
    assert done == [("ok", 0), ("ok", 1)]
    for _ in (2, 3):
        track(lh.add_entry(b"x"), done)
    # entry 2 goes to ens[2], ens[0]; ens[0] acknowledged 2, then ens[2] fails it
    pool.conns[ens[0]].ack(2)
    pool.conns[ens[2]].fail(2, BookieUnavailable("down", bookie=ens[2]))
    settle()  # the metadata calls run on the thread pool
    md, version = store.ledgers.read(lh.ledger_id)
    assert md.ensembles == ((0, tuple(ens)), (2, (ens[0], ens[1], spare)))
    # the store fills in its znode's ctime on reads; the writer's metadata has none
    assert lh.metadata == replace(md, ctime=None) and lh.ensemble_changes == 1
    # striping in the new segment uses the new ensemble
    assert lh.metadata.write_set(2) == [spare, ens[0]]
    assert lh.metadata.write_set(3) == [ens[0], ens[1]]
    # entry 2 was re-sent to the replacement; entry 3's write set did not change
    assert pool.conns[spare].outstanding(2) == 1
    assert pool.conns[spare].outstanding(3) == 0
    assert done == [("ok", 0), ("ok", 1)]
    pool.conns[spare].ack(2)
    assert done[-1] == ("ok", 2)
    for b in lh.metadata.write_set(3):
        pool.conns[b].ack(3)
    assert done[-1] == ("ok", 3)
    # later entries follow the new ensemble
    track(lh.add_entry(b"x"), done)
    assert {b for b, c in pool.conns.items() if c.outstanding(4)} == {ens[1], spare}


def test_ack_from_the_replaced_bookie_is_discarded():
    client, store, pool = make_client(bookies=B[:4])
    lh = create(client, 3, 3, 2)
    ens = list(lh.metadata.last_ensemble)
    done = []
    track(lh.add_entry(b"x"), done)
    pool.conns[ens[0]].ack(0)  # one of two needed
    pool.conns[ens[1]].fail(0, BookieTimeout("slow", bookie=ens[1]))
    settle()  # the metadata calls run on the thread pool
    new = lh.metadata.last_ensemble
    assert ens[1] not in new and lh.metadata.ensembles[-1][0] == 0  # segment 0 replaced in place
    assert done == []
    pool.conns[ens[2]].ack(0)
    assert done == [("ok", 0)]


def test_timeout_on_the_clock_changes_the_ensemble():
    clock = task.Clock()
    client, store, pool = make_client(bookies=B[:4], clock=clock, add_timeout=2.0)
    lh = create(client, 3, 2, 2)
    ens = list(lh.metadata.last_ensemble)
    done = []
    track(lh.add_entry(b"x"), done)
    ws = lh.metadata.write_set(0)
    pool.conns[ws[0]].ack(0)
    clock.advance(1.9)
    assert lh.ensemble_changes == 0
    clock.advance(0.2)  # ws[1] never answered
    settle()  # the metadata calls run on the thread pool
    assert lh.ensemble_changes == 1 and ws[1] not in lh.metadata.last_ensemble
    replacement = next(b for b in lh.metadata.last_ensemble if b not in ens)
    pool.conns[replacement].ack(0)
    assert done == [("ok", 0)]


def test_adds_made_during_an_ensemble_change_wait_for_it():
    client, store, pool = make_client(bookies=B[:4])
    lh = create(client, 3, 2, 2)
    gate = defer.Deferred()
    plain = client.run_blocking

    def run_blocking(fn, *args, **kw):  # hold the metadata write until the test opens the gate
        if fn == store.ledgers.update:
            return gate.addCallback(lambda _: fn(*args, **kw))
        return plain(fn, *args, **kw)

    client.run_blocking = run_blocking
    done = []
    track(lh.add_entry(b"x"), done)
    bad = lh.metadata.write_set(0)[0]
    good = lh.metadata.write_set(0)[1]
    pool.conns[good].ack(0)
    pool.conns[bad].fail(0, BookieUnavailable("down", bookie=bad))
    track(lh.add_entry(b"y"), done)  # during the change: held back
    assert all(c.outstanding(1) == 0 for c in pool.conns.values())
    gate.callback(None)
    settle()  # the metadata calls run on the thread pool
    md = lh.metadata
    assert bad not in md.last_ensemble and md.ensembles[-1][0] == 0
    for e in (0, 1):
        for b in md.write_set(e):
            if pool.conns[b].outstanding(e):
                pool.conns[b].ack(e)
    assert done == [("ok", 0), ("ok", 1)]


def test_no_replacement_fails_the_adds():
    client, store, pool = make_client(bookies=B[:3])
    lh = create(client, 3, 2, 2)
    done = []
    track(lh.add_entry(b"x"), done)
    bad = lh.metadata.write_set(0)[0]
    pool.conns[bad].fail(0, BookieUnavailable("down", bookie=bad))
    settle()  # the metadata calls run on the thread pool
    assert done and done[0][0] == "err" and isinstance(done[0][1], NotEnoughBookies)
    assert lh.state == "failed"
    failureResultOf(settled(lh.add_entry(b"y")), NotEnoughBookies)


def test_ensemble_change_on_a_ledger_being_recovered_fails_as_fenced():
    client, store, pool = make_client(bookies=B[:4])
    lh = create(client, 3, 2, 2)
    store.ledgers.update(lh.ledger_id, lh.metadata.in_recovery(), -1)  # another writer
    done = []
    track(lh.add_entry(b"x"), done)
    track(lh.add_entry(b"y"), done)
    bad = lh.metadata.write_set(0)[0]
    pool.conns[bad].fail(0, BookieUnavailable("down", bookie=bad))
    settle()  # the metadata calls run on the thread pool
    assert [k for k, _ in done] == ["err", "err"]
    assert all(isinstance(v, LedgerFencedError) and isinstance(v, Conflict) for _, v in done)


def test_ensemble_change_merges_with_unrelated_metadata_changes():
    client, store, pool = make_client(bookies=B[:5])
    lh = create(client, 3, 2, 2)
    # someone (autorecovery-like) rewrites the metadata without touching the last segment
    store.ledgers.update(lh.ledger_id, lh.metadata, -1)  # another writer
    done = []
    track(lh.add_entry(b"x"), done)
    bad = lh.metadata.write_set(0)[0]
    pool.conns[bad].fail(0, BookieUnavailable("down", bookie=bad))
    settle()  # the metadata calls run on the thread pool
    md, version = store.ledgers.read(lh.ledger_id)
    assert version == 2 and bad not in md.last_ensemble and lh.metadata_version == 2


def test_fenced_add_fails_every_outstanding_add_in_order():
    store, pool, lh, done = tracked_adds(3)
    b = lh.metadata.write_set(1)[0]
    pool.conns[b].fail(1, LedgerFencedError("EFENCED", bookie=b))
    assert [k for k, _ in done] == ["err"] * 3
    assert all(isinstance(v, LedgerFencedError) for _, v in done)
    assert "fenced" in str(done[0][1])
    failureResultOf(settled(lh.add_entry(b"later")), LedgerFencedError)
    successResultOf(settled(lh.close()))  # nothing to write: the recoverer closes the ledger
    assert store.ledgers.read(lh.ledger_id)[0].is_open


def test_unauthorized_add_fails_without_ensemble_change():
    client, store, pool = make_client()
    lh = create(client, 3, 2, 2)
    done = []
    track(lh.add_entry(b"x"), done)
    b = lh.metadata.write_set(0)[0]
    pool.conns[b].fail(0, Unauthorized("EUA", bookie=b))
    assert isinstance(done[0][1], Unauthorized) and lh.ensemble_changes == 0


# ----------------------------------------------------------------- close


def test_close_waits_for_pending_adds_then_writes_closed():
    client, store, pool = make_client()
    lh = create(client, 3, 2, 2)
    for p in (b"ab", b"cde"):
        lh.add_entry(p)
    closing = lh.close()
    assert not closing.called
    failureResultOf(settled(lh.add_entry(b"no")), LedgerClosedError)
    for e in (0, 1):
        for b in lh.metadata.write_set(e):
            pool.conns[b].ack(e)
    successResultOf(settled(closing))
    md, version = store.ledgers.read(lh.ledger_id)
    assert md.state is LedgerState.CLOSED and (md.last_entry_id, md.length) == (1, 5) and version == 1
    assert lh.is_closed and lh.last_entry_id == 1
    successResultOf(settled(lh.close()))  # again: same outcome


def test_close_of_an_empty_ledger():
    client, store, pool = make_client()
    lh = create(client)
    successResultOf(settled(lh.close()))
    md, _ = store.ledgers.read(lh.ledger_id)
    assert md.is_closed and (md.last_entry_id, md.length) == (-1, 0)


def test_close_conflicts():
    client, store, pool = make_client()
    pool_auto = lambda: [setattr(c, "auto", True) for c in pool.conns.values()]  # noqa: E731
    for b in B[:4]:
        pool.get(b).auto = True
    pool_auto()
    # metadata changed otherwise: retried on top of it
    lh = create(client)
    successResultOf(settled(lh.add_entry(b"abc")))
    store.ledgers.update(lh.ledger_id, lh.metadata, -1)  # another writer
    successResultOf(settled(lh.close()))
    assert store.ledgers.read(lh.ledger_id)[0].last_entry_id == 0
    # closed by someone else with the same result: fine
    lh = create(client)
    successResultOf(settled(lh.add_entry(b"abc")))
    store.ledgers.update(lh.ledger_id, lh.metadata.closed(0, 3), -1)  # another writer
    successResultOf(settled(lh.close()))
    # closed by someone else at another entry: a clear error
    lh = create(client)
    successResultOf(settled(lh.add_entry(b"abc")))
    successResultOf(settled(lh.add_entry(b"d")))
    store.ledgers.update(lh.ledger_id, lh.metadata.closed(0, 3), -1)  # another writer
    f = failureResultOf(settled(lh.close()))
    assert f.check(LedgerClosedError)
    assert "closed by another client at entry 0" in str(f.value) and "up to 1" in str(f.value)
    # in recovery: fenced
    lh = create(client)
    store.ledgers.update(lh.ledger_id, lh.metadata.in_recovery(), -1)  # another writer
    assert failureResultOf(settled(lh.close())).check(LedgerFencedError)


# ----------------------------------------------------------------- reads


def test_read_fails_over_in_write_set_order():
    client, store, pool, lh = filled_ledger()
    rh = successResultOf(settled(client.open_ledger(lh.ledger_id)))
    ws = rh.metadata.write_set(4)
    del pool.conns[ws[0]].stored[(lh.ledger_id, 4)]  # first replica: ENOENTRY
    pool.conns[ws[0]].reads.clear()
    pool.conns[ws[1]].reads.clear()
    assert successResultOf(settled(rh.read_entries(0, 5))) == [(i, b"entry-%d" % i) for i in range(6)]
    assert (lh.ledger_id, 4, False) in pool.conns[ws[0]].reads
    assert (lh.ledger_id, 4, False) in pool.conns[ws[1]].reads
    # a corrupt copy is skipped too
    body = bytearray(pool.conns[ws[1]].stored[(lh.ledger_id, 4)])
    body[-1] ^= 1
    good = pool.conns[ws[1]].stored[(lh.ledger_id, 4)]
    pool.conns[ws[0]].stored[(lh.ledger_id, 4)] = bytes(body)
    assert successResultOf(settled(rh.read_entry(4))) == b"entry-4"
    # bad bytes (or a wrong password) everywhere: a digest error, not "missing"
    pool.conns[ws[1]].stored[(lh.ledger_id, 4)] = bytes(body)
    assert "every replica" in str(failureResultOf(settled(rh.read_entry(4)), DigestError).value)
    # one replica down, the other corrupt: the read fails with the availability error
    pool.conns[ws[1]].stored[(lh.ledger_id, 4)] = good
    pool.conns[ws[1]].down = True
    failureResultOf(settled(rh.read_entry(4)), BookieUnavailable)


def test_a_closed_ledger_opens_on_metadata_already_read_an_open_one_is_refused():
    client, store, pool, lh = filled_ledger()
    md, version = store.ledgers.read(lh.ledger_id)
    rh = client.open_closed(lh.ledger_id, md, version)  # no read of the znode: at once, no Deferred
    assert (rh.metadata, rh.last_add_confirmed) == (md, md.last_entry_id)
    assert successResultOf(settled(rh.read_entries(0, 5))) == [(i, b"entry-%d" % i) for i in range(6)]
    _client, store, _pool, open_lh = filled_ledger(close=False)
    md, version = store.ledgers.read(open_lh.ledger_id)
    with pytest.raises(ValueError, match="not closed"):
        _client.open_closed(open_lh.ledger_id, md, version)


def test_read_of_an_entry_missing_everywhere_is_no_such_entry():
    client, store, pool, lh = filled_ledger()
    rh = successResultOf(settled(client.open_ledger(lh.ledger_id)))
    for b in rh.metadata.write_set(2):
        del pool.conns[b].stored[(lh.ledger_id, 2)]
    assert "missing on every bookie" in str(failureResultOf(settled(rh.read_entry(2)), NoSuchEntry).value)


def test_reads_stop_at_the_lac_unless_asked():
    client, store, pool, lh = filled_ledger(close=False)
    rh = successResultOf(settled(client.open_ledger(lh.ledger_id)))
    # the last entry's piggybacked LAC is 4: entry 5 is not confirmed yet for a reader
    assert rh.last_add_confirmed == 4
    failureResultOf(settled(rh.read_entries(0, 5)), EntryNotConfirmed)
    assert successResultOf(settled(rh.read_entries(5, 5, allow_unconfirmed=True))) == [(5, b"entry-5")]
    closed = successResultOf(settled(client.open_ledger(lh.ledger_id, recovery=True)))
    assert closed.last_entry_id == 5


def test_read_range_streams_batches():
    client, store, pool, lh = filled_ledger(n=10)
    rh = successResultOf(settled(client.open_ledger(lh.ledger_id)))

    async def collect():
        batches = []
        async for batch in rh.read_range(0, 9, batch=4):
            batches.append([e for e, _ in batch])
        return batches

    assert successResultOf(settled(defer.ensureDeferred(collect()))) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_wrong_password_is_refused_at_open():
    client, store, pool, lh = filled_ledger()
    failureResultOf(settled(client.open_ledger(lh.ledger_id, password=b"nope")), Unauthorized)
    rh = successResultOf(settled(client.open_ledger(lh.ledger_id, password=b"", digest_type="crc32c")))
    assert rh.last_entry_id == 5
