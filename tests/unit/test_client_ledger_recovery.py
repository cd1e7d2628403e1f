"""The ledger layer's ledger recovery, resuming for appends and releasing handles, with fake bookies
and the in-memory metadata store (tests/support/ledger_client.py)."""

from __future__ import annotations

from functools import partial

from bkctl.wire.client.errors import (
    EntryNotConfirmed,
    HandleReleased,
    LedgerClosedError,
    LedgerFencedError,
    LedgerLocked,
    LedgerRecoveryError,
)
from bkctl.wire.codecs.digest import DigestManager, DigestType
from bkctl.wire.metadata.errors import NoSuchLedger, ZKUnavailable
from bkctl.wire.metadata.ledger import LedgerState
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

# ----------------------------------------------------------------- recovery and append


def test_recovery_fences_and_closes_at_the_last_recoverable_entry():
    client, store, pool, lh = filled_ledger(n=5, close=False)
    ens = lh.metadata.last_ensemble
    # entry 5 written to one replica only (never acknowledged): E=3 Qw=2 Qa=2 -> one "missing" is enough
    body5 = DigestManager(lh.ledger_id, DigestType.CRC32C, b"").package(5, 3, 100, b"tail")
    pool.conns[lh.metadata.write_set(5)[0]].stored[(lh.ledger_id, 5)] = body5
    rh = successResultOf(settled(client.open_ledger(lh.ledger_id, recovery=True)))
    md, _ = store.ledgers.read(lh.ledger_id)
    assert md.is_closed and rh.last_entry_id == md.last_entry_id
    assert md.last_entry_id in (4, 5)
    assert all(lh.ledger_id in pool.conns[b].fenced for b in ens)
    # states written: IN_RECOVERY then CLOSED
    assert [md.state for _, md, _ in store.called("ledgers.update")[-2:]] == [
        LedgerState.IN_RECOVERY,
        LedgerState.CLOSED,
    ]
    if md.last_entry_id == 5:  # found on its replica: written back to the whole write set
        for b in md.write_set(5):
            assert pool.conns[b].stored[(lh.ledger_id, 5)] == body5
    # the old writer is fenced
    failureResultOf(settled(lh.add_entry(b"late")), LedgerFencedError)


def test_recovery_rewrites_the_unconfirmed_tail_with_recovery_adds():
    client, store, pool, lh = filled_ledger(n=4, e=3, qw=3, qa=2, close=False)
    # entry 4 on 2 of 3 replicas (acknowledged by Qa=2), the writer died before telling anyone
    body4 = DigestManager(lh.ledger_id, DigestType.CRC32C, b"").package(4, 3, 44, b"acked")
    ws = lh.metadata.write_set(4)
    for b in ws[:2]:
        pool.conns[b].stored[(lh.ledger_id, 4)] = body4
    rh = successResultOf(settled(client.open_ledger(lh.ledger_id, recovery=True)))
    assert rh.last_entry_id == 4 and rh.length == 44
    assert pool.conns[ws[2]].stored[(lh.ledger_id, 4)] == body4
    assert any(e == 4 and rec for e, _, rec in pool.conns[ws[2]].sent)
    assert successResultOf(settled(rh.read_entries(0, 4)))[-1] == (4, b"acked")


def test_recovery_needs_enough_answers():
    client, store, pool, lh = filled_ledger(n=3, close=False)
    for b in lh.metadata.last_ensemble[:2]:
        pool.conns[b].down = True
    f = failureResultOf(settled(client.open_ledger(lh.ledger_id, recovery=True)))
    assert f.check(LedgerRecoveryError)


def test_recovery_of_a_closed_ledger_opens_it_directly():
    client, store, pool, lh = filled_ledger(n=2)
    updates = len(store.called("ledgers.update"))
    rh = successResultOf(settled(client.open_ledger(lh.ledger_id, recovery=True)))
    assert rh.last_entry_id == 1 and len(store.called("ledgers.update")) == updates


def test_open_for_append_continues_after_the_tail():
    client, store, pool, lh = filled_ledger(n=3, close=False)
    ah = successResultOf(settled(client.open_for_append(lh.ledger_id)))
    assert ah.next_entry_id == 3 and ah.last_add_confirmed == 2
    locked = failureResultOf(settled(client.open_for_append(lh.ledger_id)), LedgerLocked)
    assert "already open for append by bkctl@" in str(locked.value)  # the store's lock names its holder
    assert successResultOf(settled(ah.add_entry(b"more"))) == 3
    successResultOf(settled(ah.close()))
    after = store.ledgers.append_lock(lh.ledger_id, "next")
    assert after.acquire()  # closing released the lock
    after.release()
    md, _ = store.ledgers.read(lh.ledger_id)
    assert md.is_closed and md.last_entry_id == 3
    assert md.length == sum(len(b"entry-%d" % i) for i in range(3)) + 4
    failureResultOf(settled(client.open_for_append(lh.ledger_id)), LedgerClosedError)
    assert store.append_locks.paths() == []  # a refused append lets the lock go


def test_delete_ledger():
    client, store, pool = make_client()
    lh = create(client)
    successResultOf(settled(client.delete_ledger(lh.ledger_id)))
    assert not store.ledgers.exists(lh.ledger_id)
    failureResultOf(settled(client.delete_ledger(lh.ledger_id)), NoSuchLedger)


def test_client_close_fails_outstanding_adds_as_client_closed():
    client, store, pool = make_client()
    lh = create(client)
    done = []
    track(lh.add_entry(b"x"), done)
    successResultOf(settled(client.close()))  # the pool's connections fail the adds they hold
    assert all(not c.outstanding(0) for c in pool.conns.values())
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
    assert failureResultOf(settled(d)).check(LedgerFencedError)
    assert len(pulled) == 4


def test_closing_wakes_a_producer_waiting_for_room():
    client, store, pool = make_client(max_inflight=2)
    lh = create(client, 3, 3, 3)
    d = lh.add_entries(iter([b"a", b"b", b"c", b"d"]))
    closing = lh.close()
    assert failureResultOf(settled(d)).check(LedgerClosedError)
    for e in (0, 1):
        for b in lh.metadata.write_set(e):
            pool.conns[b].ack(e)
    successResultOf(settled(closing))
    assert store.ledgers.read(lh.ledger_id)[0].last_entry_id == 1


def test_oversized_entries_are_refused_before_sending():
    client, store, pool = make_client(max_frame_size=4096)
    lh = create(client)
    assert lh.max_entry_size == 4096 - 1024 - 32 - 4
    assert "larger than" in str(failureResultOf(settled(lh.add_entry(b"x" * 4000)), ValueError).value)
    assert pool.conns == {} and lh.next_entry_id == 0


def test_writer_lac_and_length():
    client, store, pool = make_client()
    for b in B[:4]:
        pool.get(b).auto = True
    lh = create(client)
    assert successResultOf(settled(lh.read_lac())) == -1 and lh.length == 0
    assert successResultOf(settled(lh.add_entries([b"ab", b"cde"]))) == 1
    assert successResultOf(settled(lh.read_lac())) == 1 and lh.length == 5
    assert successResultOf(settled(lh.read_entries(0, 1))) == [(0, b"ab"), (1, b"cde")]
    failureResultOf(settled(lh.read_entries(0, 2)), EntryNotConfirmed)


def test_bookie_ids_resolve_through_service_info_with_host_port_fallback():
    from bkctl.wire.metadata.serviceinfo import BookieServiceInfo

    client, store, pool = make_client()
    store.registration.register("bookie-a", BookieServiceInfo.for_bookie("192.0.2.7", 4181))
    store.registration.register("10.0.0.9:3181", BookieServiceInfo.legacy())
    assert successResultOf(settled(client.resolve("bookie-a"))) == ("192.0.2.7", 4181)
    assert successResultOf(settled(client.resolve("10.0.0.9:3181"))) == ("10.0.0.9", 3181)  # legacy: the id itself
    assert successResultOf(settled(client.resolve("10.0.0.8:3181"))) == ("10.0.0.8", 3181)  # not registered

    store.fail_with(ZKUnavailable("ZooKeeper at the fake unavailable: connection lost"))
    assert successResultOf(settled(client.resolve("bookie-a"))) == ("192.0.2.7", 4181)  # last known address


def test_bookies_looked_up_in_one_go_are_connected_to_at_those_addresses_once():
    """Issue 74: a command about to read looks its bookies up in one read and connects at once;
    each connection's first attempt takes that address, a later one looks its bookie up again."""
    from bkctl.wire.metadata.serviceinfo import BookieServiceInfo

    client, store, pool = make_client()
    store.registration.register("bookie-a", BookieServiceInfo.for_bookie("192.0.2.7", 4181))
    store.calls.clear()
    assert client.look_up(["bookie-a", "10.0.0.8:3181", "bookie-a"]).addresses == {
        "bookie-a": ("192.0.2.7", 4181),
        "10.0.0.8:3181": ("10.0.0.8", 3181),
    }
    assert len(store.called("registration.service_infos")) == 1
    store.calls.clear()
    successResultOf(settled(client.connect_to(["bookie-a", "10.0.0.8:3181", "bookie-a"])))
    assert len(store.called("registration.service_infos")) == 1  # one read for them all
    assert pool.conns["bookie-a"].connects == 1 and pool.conns["10.0.0.8:3181"].connects == 1
    pool.conns["10.0.0.8:3181"].connected = True
    store.calls.clear()
    successResultOf(settled(client.connect_to(["10.0.0.8:3181"])))  # connected already: nothing to do
    assert store.calls == [] and pool.conns["10.0.0.8:3181"].connects == 1
    store.registration.register("bookie-a", BookieServiceInfo.for_bookie("192.0.2.7", 5181))  # moved
    store.calls.clear()
    assert successResultOf(settled(client.resolve("bookie-a"))) == ("192.0.2.7", 4181)  # the first attempt's
    assert store.calls == []
    assert successResultOf(settled(client.resolve("bookie-a"))) == ("192.0.2.7", 5181)  # looked up again


def test_long_reads_answered_synchronously_do_not_recurse():
    client, store, pool, lh = filled_ledger(n=3000, close=True)
    rh = successResultOf(settled(client.open_ledger(lh.ledger_id)))
    entries = successResultOf(settled(rh.read_entries(0, 2999)))
    assert len(entries) == 3000 and entries[-1] == (2999, b"entry-2999")


def test_the_read_window_is_refilled_half_a_window_at_a_time(monkeypatch):
    client, store, pool, lh = filled_ledger(n=40, close=True, read_window=8)
    rh = successResultOf(settled(client.open_ledger(lh.ledger_id)))
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
    assert successResultOf(settled(d)) == [(i, b"entry-%d" % i) for i in range(40)]


# ----------------------------------------------------------------- releasing


def test_release_publishes_the_lac_and_stops_the_handle_without_closing_the_ledger():
    client, store, pool = make_client()
    for b in B[:4]:
        pool.get(b).auto = True
    gone = successResultOf(settled(client.create_ledger(3, 2, 2)))  # its writer went away
    h = successResultOf(settled(client.open_for_append(gone.ledger_id)))  # the release hook: its append lock

    def released() -> int:
        return len(store.called("ledgers.append_lock.release"))

    ensemble = h.metadata.last_ensemble
    for i in range(3):
        h.add_entry(b"x%d" % i)
    away = ensemble[1]
    pool.get(away).down = True  # one bookie of the ensemble is away: best effort
    assert released() == 0 and store.append_locks.paths() != []
    successResultOf(settled(h.release()))
    took = {b: pool.get(b).lacs for b in ensemble}
    assert [b for b in ensemble if took[b]] == [b for b in ensemble if b != away]
    for b in ensemble:
        for ledger_id, lac, key, body in took[b]:
            assert (ledger_id, lac, key) == (h.ledger_id, 2, h.master_key)
            assert h.digest.verify_lac(body) == 2
    assert released() == 1 and store.append_locks.paths() == []  # the hook ran: the lock let go
    assert isinstance(failureResultOf(settled(h.add_entry(b"late"))).value, HandleReleased)
    assert not store.ledgers.read(h.ledger_id)[0].is_closed
    successResultOf(settled(h.release()))  # again: nothing more happens
    assert released() == 1


def test_publish_lac_sends_nothing_before_the_first_add_or_over_v2():
    client, _store, pool = make_client()
    h = create(client)
    assert successResultOf(settled(h.publish_lac())) == 0
    client_v2, _store, pool_v2 = make_client(protocol="v2")
    h2 = create(client_v2)
    for b in h2.metadata.last_ensemble:
        pool_v2.get(b).auto = True
    successResultOf(settled(h2.add_entry(b"a")))
    assert successResultOf(settled(h2.publish_lac())) == 0
    assert all(not c.lacs for c in pool_v2.conns.values())
