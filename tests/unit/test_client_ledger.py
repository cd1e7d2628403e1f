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
from dataclasses import replace
from functools import partial

import pytest
from twisted.internet import defer, task
from twisted.python.failure import Failure

from bkctl.wire import fastpath
from bkctl.wire.client.bookkeeper import BookKeeperClient, lock_path
from bkctl.wire.client.errors import LedgerLocked
from bkctl.wire.client.errors import (
    BookieTimeout,
    BookieUnavailable,
    LedgerFencedError,
    NoSuchEntry,
    TooManyRequests,
    Unauthorized,
)
from bkctl.wire.client.errors import EntryNotConfirmed, HandleReleased, LedgerClosedError, LedgerRecoveryError
from bkctl.wire.client.ledger_handle import LedgerHandle
from bkctl.wire.client.errors import NotEnoughBookies
from bkctl.wire.client.placement import RandomPlacement
from bkctl.wire.codecs.digest import DigestManager, DigestType
from bkctl.wire.errors import Conflict, DigestError, MetadataError
from bkctl.wire.metadata.ledger import LedgerState
from bkctl.wire.metadata.errors import NoSuchLedger, ZKUnavailable
from tests.support import deferreds
from tests.support.threads import ThreadedClock
from tests.support.fake_store import FakeMetadataStore
from tests.support.fake_bookie import FakePool, header

B = [f"10.0.0.{i}:3181" for i in range(1, 7)]


_REACTORS: list[ThreadedClock] = []


@pytest.fixture(autouse=True)
def _forget_reactors():
    yield
    _REACTORS.clear()


def settle() -> None:
    """Run the metadata calls the clients handed to their thread pools, and deliver their results."""
    for reactor in _REACTORS:
        reactor.settle()


def result_of(d: defer.Deferred):
    settle()
    return deferreds.result_of(d)


def make_client(bookies=B[:4], readonly=(), clock=None, add_timeout=None, **options):
    store = FakeMetadataStore().start()
    for bookie in bookies:
        store.registration.register(bookie)
    for bookie in readonly:
        store.registration.register(bookie, readonly=True)
    pool = FakePool(clock, add_timeout)
    reactor = ThreadedClock()  # metadata calls go through its thread pool, as in production
    _REACTORS.append(reactor)
    client = BookKeeperClient(store, reactor, pool=pool,
                              placement=RandomPlacement(random.Random(7)), **options)
    return client, store, pool


def failure_of(d: defer.Deferred) -> Failure:
    settle()
    out = []
    d.addBoth(out.append)
    assert out and isinstance(out[0], Failure), f"expected a failure, got {out}"
    return out[0]


def create(client, e=3, qw=2, qa=2, **kw) -> LedgerHandle:
    return result_of(client.create_ledger(e, qw, qa, **kw))


def track(d, log, tag=None):
    d.addCallbacks(lambda r: log.append(("ok", r if tag is None else tag)),
                   lambda f: log.append(("err", f.value)))
    return d


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
    with pytest.raises(MetadataError):
        create(client, 2, 3, 2)
    with pytest.raises(MetadataError):
        create(client, 3, 2, 0)
    assert list(store.ledgers.ids()) == []


def test_create_without_enough_bookies():
    client, _, _ = make_client(bookies=B[:3], readonly=[B[2]])
    with pytest.raises(NotEnoughBookies, match=r"need 3 writable bookies, found 2 \(1 read-only\)"):
        create(client, 3, 2, 2)


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
    [reactor] = _REACTORS
    reactor.thread_pool.run_next()  # the bookie lists, read "on another thread"...
    assert store.called("registration.writable_bookies") and not store.called("ledgers.create")
    assert len(reactor.from_threads) == 1 and not d.called  # ...answer through callFromThread
    settle()
    assert store.ledgers.read(result_of(d).ledger_id)[1] == 0


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
    for e in range(4):
        track(lh.add_entry(b"x"), done)
    assert lh.pending_adds == 2 and lh.waiting_adds == 2
    assert {e for e, _, _ in conns[0].sent} == {0, 1}
    # no unbounded queue: beyond max_waiting the add is refused
    with pytest.raises(TooManyRequests):
        result_of(lh.add_entry(b"too many"))
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
    assert result_of(d) == 9


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
    for e in (2, 3):
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
    with pytest.raises(NotEnoughBookies):
        result_of(lh.add_entry(b"y"))


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
    client, store, pool = make_client()
    lh = create(client, 3, 2, 2)
    done = []
    for _ in range(3):
        track(lh.add_entry(b"x"), done)
    b = lh.metadata.write_set(1)[0]
    pool.conns[b].fail(1, LedgerFencedError("EFENCED", bookie=b))
    assert [k for k, _ in done] == ["err"] * 3
    assert all(isinstance(v, LedgerFencedError) for _, v in done)
    assert "fenced" in str(done[0][1])
    with pytest.raises(LedgerFencedError):
        result_of(lh.add_entry(b"later"))
    result_of(lh.close())  # nothing to write: the recoverer closes the ledger
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
    with pytest.raises(LedgerClosedError):
        result_of(lh.add_entry(b"no"))
    for e in (0, 1):
        for b in lh.metadata.write_set(e):
            pool.conns[b].ack(e)
    result_of(closing)
    md, version = store.ledgers.read(lh.ledger_id)
    assert md.state is LedgerState.CLOSED and (md.last_entry_id, md.length) == (1, 5) and version == 1
    assert lh.is_closed and lh.last_entry_id == 1
    result_of(lh.close())  # again: same outcome


def test_close_of_an_empty_ledger():
    client, store, pool = make_client()
    lh = create(client)
    result_of(lh.close())
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
    result_of(lh.add_entry(b"abc"))
    store.ledgers.update(lh.ledger_id, lh.metadata, -1)  # another writer
    result_of(lh.close())
    assert store.ledgers.read(lh.ledger_id)[0].last_entry_id == 0
    # closed by someone else with the same result: fine
    lh = create(client)
    result_of(lh.add_entry(b"abc"))
    store.ledgers.update(lh.ledger_id, lh.metadata.closed(0, 3), -1)  # another writer
    result_of(lh.close())
    # closed by someone else at another entry: a clear error
    lh = create(client)
    result_of(lh.add_entry(b"abc"))
    result_of(lh.add_entry(b"d"))
    store.ledgers.update(lh.ledger_id, lh.metadata.closed(0, 3), -1)  # another writer
    f = failure_of(lh.close())
    assert f.check(LedgerClosedError)
    assert "closed by another client at entry 0" in str(f.value) and "up to 1" in str(f.value)
    # in recovery: fenced
    lh = create(client)
    store.ledgers.update(lh.ledger_id, lh.metadata.in_recovery(), -1)  # another writer
    assert failure_of(lh.close()).check(LedgerFencedError)


# ----------------------------------------------------------------- reads


def filled_ledger(n=6, e=3, qw=2, qa=2, close=True, **kw):
    client, store, pool = make_client(**kw)
    for b in B[:4]:
        pool.get(b).auto = True
    lh = create(client, e, qw, qa)
    for i in range(n):
        result_of(lh.add_entry(b"entry-%d" % i))
    if close:
        result_of(lh.close())
    return client, store, pool, lh


def test_read_fails_over_in_write_set_order():
    client, store, pool, lh = filled_ledger()
    rh = result_of(client.open_ledger(lh.ledger_id))
    ws = rh.metadata.write_set(4)
    del pool.conns[ws[0]].stored[(lh.ledger_id, 4)]  # first replica: ENOENTRY
    pool.conns[ws[0]].reads.clear()
    pool.conns[ws[1]].reads.clear()
    assert result_of(rh.read_entries(0, 5)) == [(i, b"entry-%d" % i) for i in range(6)]
    assert (lh.ledger_id, 4, False) in pool.conns[ws[0]].reads
    assert (lh.ledger_id, 4, False) in pool.conns[ws[1]].reads
    # a corrupt copy is skipped too
    body = bytearray(pool.conns[ws[1]].stored[(lh.ledger_id, 4)])
    body[-1] ^= 1
    good = pool.conns[ws[1]].stored[(lh.ledger_id, 4)]
    pool.conns[ws[0]].stored[(lh.ledger_id, 4)] = bytes(body)
    assert result_of(rh.read_entry(4)) == b"entry-4"
    # bad bytes (or a wrong password) everywhere: a digest error, not "missing"
    pool.conns[ws[1]].stored[(lh.ledger_id, 4)] = bytes(body)
    with pytest.raises(DigestError, match="every replica"):
        result_of(rh.read_entry(4))
    # one replica down, the other corrupt: the read fails with the availability error
    pool.conns[ws[1]].stored[(lh.ledger_id, 4)] = good
    pool.conns[ws[1]].down = True
    with pytest.raises(BookieUnavailable):
        result_of(rh.read_entry(4))


def test_read_of_an_entry_missing_everywhere_is_no_such_entry():
    client, store, pool, lh = filled_ledger()
    rh = result_of(client.open_ledger(lh.ledger_id))
    for b in rh.metadata.write_set(2):
        del pool.conns[b].stored[(lh.ledger_id, 2)]
    with pytest.raises(NoSuchEntry, match="missing on every bookie"):
        result_of(rh.read_entry(2))


def test_reads_stop_at_the_lac_unless_asked():
    client, store, pool, lh = filled_ledger(close=False)
    rh = result_of(client.open_ledger(lh.ledger_id))
    # the last entry's piggybacked LAC is 4: entry 5 is not confirmed yet for a reader
    assert rh.last_add_confirmed == 4
    with pytest.raises(EntryNotConfirmed):
        result_of(rh.read_entries(0, 5))
    assert result_of(rh.read_entries(5, 5, allow_unconfirmed=True)) == [(5, b"entry-5")]
    closed = result_of(client.open_ledger(lh.ledger_id, recovery=True))
    assert closed.last_entry_id == 5


def test_read_range_streams_batches():
    client, store, pool, lh = filled_ledger(n=10)
    rh = result_of(client.open_ledger(lh.ledger_id))

    async def collect():
        batches = []
        async for batch in rh.read_range(0, 9, batch=4):
            batches.append([e for e, _ in batch])
        return batches

    assert result_of(defer.ensureDeferred(collect())) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_wrong_password_is_refused_at_open():
    client, store, pool, lh = filled_ledger()
    with pytest.raises(Unauthorized):
        result_of(client.open_ledger(lh.ledger_id, password=b"nope"))
    rh = result_of(client.open_ledger(lh.ledger_id, password=b"", digest_type="crc32c"))
    assert rh.last_entry_id == 5


# ----------------------------------------------------------------- recovery and append


def test_recovery_fences_and_closes_at_the_last_recoverable_entry():
    client, store, pool, lh = filled_ledger(n=5, close=False)
    ens = lh.metadata.last_ensemble
    # entry 5 written to one replica only (never acknowledged): E=3 Qw=2 Qa=2 -> one "missing" is enough
    body5 = DigestManager(lh.ledger_id, DigestType.CRC32C, b"").package(5, 3, 100, b"tail")
    pool.conns[lh.metadata.write_set(5)[0]].stored[(lh.ledger_id, 5)] = body5
    rh = result_of(client.open_ledger(lh.ledger_id, recovery=True))
    md, _ = store.ledgers.read(lh.ledger_id)
    assert md.is_closed and rh.last_entry_id == md.last_entry_id
    assert md.last_entry_id in (4, 5)
    assert all(lh.ledger_id in pool.conns[b].fenced for b in ens)
    # states written: IN_RECOVERY then CLOSED
    assert [md.state for _, md, _ in store.called("ledgers.update")[-2:]] == [LedgerState.IN_RECOVERY, LedgerState.CLOSED]
    if md.last_entry_id == 5:  # found on its replica: written back to the whole write set
        for b in md.write_set(5):
            assert pool.conns[b].stored[(lh.ledger_id, 5)] == body5
    # the old writer is fenced
    with pytest.raises(LedgerFencedError):
        result_of(lh.add_entry(b"late"))


def test_recovery_rewrites_the_unconfirmed_tail_with_recovery_adds():
    client, store, pool, lh = filled_ledger(n=4, e=3, qw=3, qa=2, close=False)
    # entry 4 on 2 of 3 replicas (acknowledged by Qa=2), the writer died before telling anyone
    body4 = DigestManager(lh.ledger_id, DigestType.CRC32C, b"").package(4, 3, 44, b"acked")
    ws = lh.metadata.write_set(4)
    for b in ws[:2]:
        pool.conns[b].stored[(lh.ledger_id, 4)] = body4
    rh = result_of(client.open_ledger(lh.ledger_id, recovery=True))
    assert rh.last_entry_id == 4 and rh.length == 44
    assert pool.conns[ws[2]].stored[(lh.ledger_id, 4)] == body4
    assert any(e == 4 and rec for e, _, rec in pool.conns[ws[2]].sent)
    assert result_of(rh.read_entries(0, 4))[-1] == (4, b"acked")


def test_recovery_needs_enough_answers():
    client, store, pool, lh = filled_ledger(n=3, close=False)
    for b in lh.metadata.last_ensemble[:2]:
        pool.conns[b].down = True
    f = failure_of(client.open_ledger(lh.ledger_id, recovery=True))
    assert f.check(LedgerRecoveryError)


def test_recovery_of_a_closed_ledger_opens_it_directly():
    client, store, pool, lh = filled_ledger(n=2)
    updates = len(store.called("ledgers.update"))
    rh = result_of(client.open_ledger(lh.ledger_id, recovery=True))
    assert rh.last_entry_id == 1 and len(store.called("ledgers.update")) == updates


def test_open_for_append_continues_after_the_tail(monkeypatch):
    client, store, pool, lh = filled_ledger(n=3, close=False)
    import bkctl.wire.client.bookkeeper as bkmod
    class FakeLock:
        held = set()

        def __init__(self, store, ledger_id):
            self.ledger_id = ledger_id
            self.path = lock_path(store.root, ledger_id)

        def acquire(self, timeout):
            if self.ledger_id in FakeLock.held:
                raise LedgerLocked("held")
            FakeLock.held.add(self.ledger_id)

        def release(self):
            FakeLock.held.discard(self.ledger_id)

    monkeypatch.setattr(bkmod, "AppendLock", FakeLock)
    ah = result_of(client.open_for_append(lh.ledger_id))
    assert ah.next_entry_id == 3 and ah.last_add_confirmed == 2
    with pytest.raises(LedgerLocked):
        result_of(client.open_for_append(lh.ledger_id))
    assert result_of(ah.add_entry(b"more")) == 3
    result_of(ah.close())
    assert FakeLock.held == set()
    md, _ = store.ledgers.read(lh.ledger_id)
    assert md.is_closed and md.last_entry_id == 3
    assert md.length == sum(len(b"entry-%d" % i) for i in range(3)) + 4
    with pytest.raises(LedgerClosedError):
        result_of(client.open_for_append(lh.ledger_id))
    assert FakeLock.held == set()


def test_delete_ledger():
    client, store, pool = make_client()
    lh = create(client)
    result_of(client.delete_ledger(lh.ledger_id))
    assert not store.ledgers.exists(lh.ledger_id)
    with pytest.raises(NoSuchLedger):
        result_of(client.delete_ledger(lh.ledger_id))


def test_client_close_fails_outstanding_adds_as_client_closed():
    client, store, pool = make_client()
    lh = create(client)
    done = []
    track(lh.add_entry(b"x"), done)
    result_of(client.close())
    b = lh.metadata.write_set(0)[0]
    pool.conns[b].fail(0, BookieUnavailable("closed", bookie=b))
    from bkctl.wire.client.errors import ClientClosed
    assert isinstance(done[0][1], ClientClosed)


def test_add_entries_stops_at_the_first_failure():
    client, store, pool = make_client(max_inflight=4)
    lh = create(client, 3, 2, 2)
    pulled = []

    def payloads():
        for i in range(100):
            pulled.append(i)
            yield b"p"

    d = lh.add_entries(payloads())
    b = lh.metadata.write_set(0)[0]
    pool.conns[b].fail(0, LedgerFencedError("EFENCED", bookie=b))
    assert failure_of(d).check(LedgerFencedError)
    assert len(pulled) == 4


def test_closing_wakes_a_producer_waiting_for_room():
    client, store, pool = make_client(max_inflight=2)
    lh = create(client, 3, 3, 3)
    d = lh.add_entries(iter([b"a", b"b", b"c", b"d"]))
    closing = lh.close()
    assert failure_of(d).check(LedgerClosedError)
    for e in (0, 1):
        for b in lh.metadata.write_set(e):
            pool.conns[b].ack(e)
    result_of(closing)
    assert store.ledgers.read(lh.ledger_id)[0].last_entry_id == 1


def test_oversized_entries_are_refused_before_sending():
    client, store, pool = make_client(max_frame_size=4096)
    lh = create(client)
    assert lh.max_entry_size == 4096 - 1024 - 32 - 4
    with pytest.raises(ValueError, match="larger than"):
        result_of(lh.add_entry(b"x" * 4000))
    assert pool.conns == {} and lh.next_entry_id == 0


def test_writer_lac_and_length():
    client, store, pool = make_client()
    for b in B[:4]:
        pool.get(b).auto = True
    lh = create(client)
    assert result_of(lh.read_lac()) == -1 and lh.length == 0
    assert result_of(lh.add_entries([b"ab", b"cde"])) == 1
    assert result_of(lh.read_lac()) == 1 and lh.length == 5
    assert result_of(lh.read_entries(0, 1)) == [(0, b"ab"), (1, b"cde")]
    with pytest.raises(EntryNotConfirmed):
        result_of(lh.read_entries(0, 2))


def test_bookie_ids_resolve_through_service_info_with_host_port_fallback():
    from bkctl.wire.metadata.serviceinfo import BookieServiceInfo

    client, store, pool = make_client()
    store.registration.register("bookie-a", BookieServiceInfo.for_bookie("192.0.2.7", 4181))
    store.registration.register("10.0.0.9:3181", BookieServiceInfo.legacy())
    assert result_of(client._resolve("bookie-a")) == ("192.0.2.7", 4181)
    assert result_of(client._resolve("10.0.0.9:3181")) == ("10.0.0.9", 3181)  # legacy: the id itself
    assert result_of(client._resolve("10.0.0.8:3181")) == ("10.0.0.8", 3181)  # not registered

    store.fail_with(ZKUnavailable("ZooKeeper at the fake unavailable: connection lost"))
    assert result_of(client._resolve("bookie-a")) == ("192.0.2.7", 4181)  # last known address


def test_long_reads_answered_synchronously_do_not_recurse():
    client, store, pool, lh = filled_ledger(n=3000, close=True)
    rh = result_of(client.open_ledger(lh.ledger_id))
    entries = result_of(rh.read_entries(0, 2999))
    assert len(entries) == 3000 and entries[-1] == (2999, b"entry-2999")


def test_the_read_window_is_refilled_half_a_window_at_a_time(monkeypatch):
    client, store, pool, lh = filled_ledger(n=40, close=True, read_window=8)
    rh = result_of(client.open_ledger(lh.ledger_id))
    held = []  # reads the bookies have not answered yet, in the order sent

    def hold(conn, ledger_id, entry_id, on_done, ctx, slot):
        held.append((entry_id, lambda: on_done(ctx, slot, conn.bookie_id, conn.stored[(ledger_id, entry_id)])))

    for conn in pool.conns.values():
        monkeypatch.setattr(conn, "read_with_callback", partial(hold, conn))
    d = rh.read_entries(0, 39)
    running = [len(held)]
    while held:
        _, answer = held.pop(0)
        answer()
        running.append(len(held))
    # 8 go out; answers bring it down to 4 (half the window), then 4 more go out together
    assert running[:10] == [8, 7, 6, 5, 8, 7, 6, 5, 8, 7]
    assert max(running) == 8
    assert result_of(d) == [(i, b"entry-%d" % i) for i in range(40)]


# ----------------------------------------------------------------- releasing


def test_release_publishes_the_lac_and_stops_the_handle_without_closing_the_ledger():
    client, store, pool = make_client()
    released = []
    h = result_of(client.create_ledger(3, 2, 2))
    h._on_close = lambda: released.append(True)
    ensemble = h.metadata.last_ensemble
    for b in ensemble:
        pool.get(b).auto = True
    for i in range(3):
        h.add_entry(b"x%d" % i)
    away = ensemble[1]
    pool.get(away).down = True  # one bookie of the ensemble is away: best effort
    result_of(h.release())
    took = {b: pool.get(b).lacs for b in ensemble}
    assert [b for b in ensemble if took[b]] == [b for b in ensemble if b != away]
    for b in ensemble:
        for ledger_id, lac, key, body in took[b]:
            assert (ledger_id, lac, key) == (h.ledger_id, 2, h.master_key)
            assert h.digest.verify_lac(body) == 2
    assert released == [True]
    assert isinstance(failure_of(h.add_entry(b"late")).value, HandleReleased)
    assert not store.ledgers.read(h.ledger_id)[0].is_closed
    result_of(h.release())  # again: nothing more happens
    assert released == [True]


def test_publish_lac_sends_nothing_before_the_first_add_or_over_v2():
    client, _store, pool = make_client()
    h = create(client)
    assert result_of(h.publish_lac()) == 0
    client_v2, _store, pool_v2 = make_client(protocol="v2")
    h2 = create(client_v2)
    for b in h2.metadata.last_ensemble:
        pool_v2.get(b).auto = True
    result_of(h2.add_entry(b"a"))
    assert result_of(h2.publish_lac()) == 0
    assert all(not c.lacs for c in pool_v2.conns.values())


# ----------------------------------------------------------------- batch reads (v2, E == Qw)


def written(client, pool, n, e=3, qw=3, qa=2):
    """A ledger with ``n`` entries stored on every bookie of its write sets."""
    h = create(client, e, qw, qa)
    for b in h.metadata.last_ensemble:
        pool.get(b).auto = True
    result_of(h.add_entries([b"payload-%d" % i for i in range(n)]))
    return h


def single_reads(pool):
    return sum(len(c.reads) for c in pool.conns.values())


@pytest.fixture(params=[True, False], ids=["batch-reads", "fastpaths-off"])
def batch_reads(request, monkeypatch):
    """v2 batch reads are a fast path: each test runs with it on and off."""
    monkeypatch.setattr(fastpath, "ENABLED", request.param)
    return request.param


def test_v2_reads_of_an_unstriped_ledger_use_batch_reads(batch_reads):
    client, _store, pool = make_client(protocol="v2")
    h = written(client, pool, 1500)  # more chunks than are kept in flight
    got = result_of(h.read_entries(0, 1499))
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
    got = result_of(h.read_entries(0, 99))
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
    assert result_of(h.read_entries(0, 19)) == [(i, b"payload-%d" % i) for i in range(20)]
    assert single_reads(pool) == 20


def test_a_batch_read_of_a_missing_entry_fails_as_a_single_read_would(batch_reads):
    client, _store, pool = make_client(protocol="v2")
    h = written(client, pool, 10)
    for b in h.metadata.last_ensemble:
        del pool.get(b).stored[(h.ledger_id, 5)]
    err = failure_of(h.read_entries(0, 9)).value
    assert isinstance(err, NoSuchEntry) and "entry 5 " in str(err)


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
    h._metadata = md
    assert result_of(h.read_entries(0, 9)) == [(i, b"payload-%d" % i) for i in range(10)]
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
    assert result_of(h.read_entries(0, 29)) == [(i, b"payload-%d" % i) for i in range(30)]
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
    rh = result_of(client.open_ledger(lh.ledger_id))
    assert rh.last_add_confirmed == 4
    assert result_of(rh.wait_for_entry(3, 1000)) == (4, None)  # readable already: no poll
    assert all(not c.polls for c in pool.conns.values())
    d = rh.wait_for_entry(5, 1000)
    assert not d.called
    polls = [p for b in rh.metadata.last_ensemble for p in pool.conns[b].polls]
    assert len(polls) == 3 and {(lid, prev) for lid, prev, _ in polls} == {(lh.ledger_id, 4)}
    result_of(lh.add_entry(b"entry-6"))  # carries LAC 5 to the bookies of its write set
    assert result_of(d) == (5, (5, b"entry-5"))
    assert rh.last_add_confirmed == 5
    assert all(p[2].called for p in polls)  # the others were cancelled


def test_long_poll_answer_without_the_entry_moves_the_lac_only():
    client, store, pool, lh = filled_ledger(e=2, qw=1, qa=1, close=False)
    rh = result_of(client.open_ledger(lh.ledger_id))
    d = rh.wait_for_entry(5, 1000)
    result_of(lh.add_entry(b"entry-6"))  # on the bookie that does not hold entry 5
    assert result_of(d) == (5, None)
    assert result_of(rh.read_entries(5, 5)) == [(5, b"entry-5")]


def test_long_poll_that_waits_in_vain_and_one_with_a_bad_copy():
    client, store, pool, lh = filled_ledger(close=False)
    rh = result_of(client.open_ledger(lh.ledger_id))
    d = rh.wait_for_entry(5, 1000)
    for b in rh.metadata.last_ensemble:
        pool.conns[b].answer_polls(expire=True)
    assert result_of(d) == (4, None)
    # the copy of entry 5 that comes along is corrupt: the LAC still counts, the entry is read as usual
    for b in rh.metadata.write_set(5):
        body = bytearray(pool.conns[b].stored[(lh.ledger_id, 5)])
        body[-1] ^= 1
        pool.conns[b].stored[(lh.ledger_id, 5)] = bytes(body)
    d = rh.wait_for_entry(5, 1000)
    result_of(lh.add_entry(b"entry-6"))
    assert result_of(d) == (5, None)


def test_long_poll_of_a_ledger_the_bookies_never_heard_of_is_an_empty_answer():
    """Nothing written yet: the bookies answer ENOLEDGER at once, which is no
    news (a tail goes on waiting), not a failure."""
    client, store, pool, lh = filled_ledger(n=0, close=False)
    rh = result_of(client.open_ledger(lh.ledger_id))
    ensemble = rh.metadata.last_ensemble
    assert result_of(rh.wait_for_entry(0, 1000)) == (-1, None)
    pool.conns[ensemble[0]].down = True  # a dead bookie among them changes nothing
    assert result_of(rh.wait_for_entry(0, 1000)) == (-1, None)
    for b in ensemble:
        pool.conns[b].down = True
    assert failure_of(rh.wait_for_entry(0, 1000)).check(BookieUnavailable)


def test_long_poll_fails_only_when_every_bookie_fails():
    client, store, pool, lh = filled_ledger(close=False)
    rh = result_of(client.open_ledger(lh.ledger_id))
    ensemble = rh.metadata.last_ensemble
    pool.conns[ensemble[0]].down = True
    d = rh.wait_for_entry(5, 1000)
    for b in ensemble[1:]:
        pool.conns[b].answer_polls(expire=True)
    assert result_of(d) == (4, None)
    for b in ensemble:
        pool.conns[b].down = True
    assert failure_of(rh.wait_for_entry(5, 1000)).check(BookieUnavailable)


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
    assert result_of(h.add_entry(b"a")) == 0
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
        result_of(h.add_entry(b"e%d" % i))
        result_of(h.add_entry(b"e%d" % (i + 1)))
        client.reactor.advance(0.001)
    assert all(not sent for sent in _lacs_sent(pool, h).values())
    client.reactor.advance(0.001)  # the stream stopped: the last LAC goes out once
    assert _lacs_sent(pool, h) == {b: [9] for b in h.metadata.last_ensemble}
    client.reactor.advance(0.01)
    assert _lacs_sent(pool, h) == {b: [9] for b in h.metadata.last_ensemble}


def test_explicit_lac_is_off_by_default_and_stops_at_close():
    client, pool, h = _auto_ledger()
    result_of(h.add_entry(b"a"))
    assert client.reactor.getDelayedCalls() == []
    client, pool, h = _auto_ledger(explicit_lac_interval=0.5)
    result_of(h.add_entry(b"a"))
    assert len(client.reactor.getDelayedCalls()) == 1
    result_of(h.close())
    assert client.reactor.getDelayedCalls() == []
    client.reactor.advance(1)
    assert all(not sent for sent in _lacs_sent(pool, h).values())
    with pytest.raises(ValueError):
        make_client(explicit_lac_interval=-1)
