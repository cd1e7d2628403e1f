"""The ledger client against REAL bookied processes and a REAL ZooKeeper.

Writers, readers and recoverers are separate BookKeeperClient instances (each
with its own ZooKeeper session and bookie connections), driven through the
blocking facade; scenarios that need several things in flight at once run
as one coroutine in the reactor thread (``BlockingBookKeeper.run``).
"""

from __future__ import annotations

import os
import signal

import pytest
from twisted.internet import defer

from bkctl.wire import fastpath
from bkctl.wire.client.blocking import BlockingBookKeeper, run_in_reactor
from bkctl.wire.client.errors import (
    ClientClosed,
    EntryNotConfirmed,
    LedgerClosedError,
    LedgerFencedError,
    LedgerLocked,
    Unauthorized,
)
from bkctl.wire.codecs import v2
from bkctl.wire.codecs.digest import DigestManager, DigestType
from bkctl.wire.codecs.protocol import RC
from bkctl.wire.errors import DigestError
from bkctl.wire.metadata import paths as P
from bkctl.wire.metadata.errors import NoSuchLedger
from bkctl.wire.metadata.ledger import LedgerState
from bkctl.wire.metadata.zk import ZKMetadataStore
from tests.support.bookieproc import WireClient
from tests.support.waiting import stop_process, wait_for

pytestmark = pytest.mark.integration

#: Long enough that a bookie slowed by a loaded machine is not taken for a dead one (that
#: meant an ensemble change with no bookie to change to); a killed bookie is noticed at once
#: (its connections reset), and the stalled-bookie test sets what it needs.
OPTIONS = dict(add_timeout=30.0, read_timeout=30.0, timeout=120)


def payload(i: int, tag: str = "entry") -> bytes:
    return f"{tag}-{i:05d}".encode() * 3


@pytest.fixture
def clients(metadata_uri):
    made: list[BlockingBookKeeper] = []

    def make(**options) -> BlockingBookKeeper:
        bk = BlockingBookKeeper(metadata_uri, **dict(OPTIONS, **options))
        made.append(bk)
        return bk

    yield make
    for bk in made:
        try:
            bk.close()
        except Exception:
            pass


def by_id(procs):
    return {p.bookie_id: p for p in procs}


@pytest.mark.parametrize("protocol", ["v3", "v2"])
def test_lifecycle_create_add_read_close_reopen_delete(bookie_cluster, clients, protocol):
    procs = by_id(bookie_cluster(3))
    bk = clients(protocol=protocol)
    lh = bk.create(3, 2, 2, password=b"secret", custom_metadata={"owner": b"tests"})
    assert lh.add(payload(0)) == 0
    assert lh.add_many(payload(i) for i in range(1, 195)) == 194
    for i in range(195, 200):  # one at a time: each carries the LAC of the one before
        assert lh.add(payload(i)) == i
    assert lh.last_add_confirmed == 199
    # the writer reads its own confirmed entries
    assert lh.read(195, 199) == [(i, payload(i)) for i in range(195, 200)]
    # a reader of the open ledger sees up to the LAC piggybacked on the last entry
    reader = clients(protocol=protocol).open(lh.ledger_id, b"secret")
    assert not reader.is_closed and reader.last_add_confirmed == 198
    with pytest.raises(EntryNotConfirmed):
        reader.read(0, 199)
    lh.close()
    md, version = bk.metadata(lh.ledger_id)
    assert md.state is LedgerState.CLOSED and md.last_entry_id == 199
    assert md.length == sum(len(payload(i)) for i in range(200)) and version == 1
    assert md.custom_metadata == {"owner": b"tests"}

    rh = clients(protocol=protocol).open(lh.ledger_id)  # stored password
    assert rh.is_closed and rh.last_entry_id == 199 and rh.length == md.length
    assert rh.read() == [(i, payload(i)) for i in range(200)]
    batches = list(rh.read_range(0, 199, batch=64))
    assert [len(b) for b in batches] == [64, 64, 64, 8]
    assert [e for b in batches for e in b] == [(i, payload(i)) for i in range(200)]
    assert rh.read_lac() == 199

    # every replica is where the striping says, byte for byte, and nowhere else
    dm = DigestManager(lh.ledger_id, DigestType.CRC32C, b"secret")
    wires = {b: WireClient(p.port) for b, p in procs.items()}
    try:
        for e in (0, 1, 2, 100, 199):
            holders = set(md.write_set(e))
            for b, w in wires.items():
                r = w.v2(v2.ReadRequest(2, 0, lh.ledger_id, e))
                if b in holders:
                    assert r.rc == RC.EOK and dm.verify(r.body, e).payload == payload(e)
                else:
                    assert r.rc in (RC.ENOENTRY, RC.ENOLEDGER)
    finally:
        for w in wires.values():
            w.close()

    bk.delete(lh.ledger_id)
    with pytest.raises(NoSuchLedger):
        bk.open(lh.ledger_id)
    with pytest.raises(NoSuchLedger):
        bk.delete(lh.ledger_id)


def test_read_closed_opens_and_reads_in_one_go_and_a_read_left_midway_is_stopped(bookie_cluster, clients):
    bookie_cluster(3)
    bk = clients()
    with bk.create(3, 2, 2, password=b"pw") as lh:
        lh.add_many(payload(i) for i in range(300))
    md, version = bk.metadata(lh.ledger_id)
    batches = list(bk.read_closed(lh.ledger_id, md, version, 0, 299, 128))
    assert [len(b) for b in batches] == [128, 128, 44]
    assert [e for b in batches for e in b] == [(i, payload(i)) for i in range(300)]
    assert list(bk.read_closed(lh.ledger_id, md, version, 290, 299, 4))[-1] == [(i, payload(i)) for i in (298, 299)]
    with pytest.raises(EntryNotConfirmed):  # past its last entry: the first batch asked for says so
        next(bk.read_closed(lh.ledger_id, md, version, 0, 300, 128))
    left = bk.read_closed(lh.ledger_id, md, version, 0, 299, 10)
    assert next(left) == [(i, payload(i)) for i in range(10)]
    left.close()  # the reads it had ahead forgotten: the client reads on as before
    assert bk.open(lh.ledger_id).read(0, 299) == [(i, payload(i)) for i in range(300)]


def _write_then_vanish(ledger_box: list, acked: list, total: int, die_after: int):
    """A writer that pipelines ``total`` adds and closes its client (connections,
    ZooKeeper session) as soon as entry ``die_after`` is acknowledged, without
    closing the ledger."""

    def scenario(client):
        async def go():
            lh = await client.create_ledger(3, 2, 2, password=b"pw")
            ledger_box.append(lh.ledger_id)
            adds, failed = [], []
            for i in range(total):
                d = lh.add_entry(payload(i))
                d.addCallbacks(acked.append, lambda f: None if f.check(ClientClosed) else failed.append(f.value))
                adds.append(d)
            adds[die_after].addCallback(lambda _: client.close())
            await defer.DeferredList(adds)
            assert not failed, failed[:3]  # only the vanishing may fail an add
            return lh.state

        return defer.ensureDeferred(go())

    return scenario


@pytest.mark.parametrize("protocol", ["v3", "v2"])
def test_recovery_after_a_writer_vanished_keeps_every_acknowledged_entry(bookie_cluster, clients, protocol):
    bookie_cluster(3)
    ledger_box, acked = [], []
    # No bookie fails here, and with E=3 on 3 bookies there is none to change to: on a
    # loaded machine a short add timeout could fail every add (the writer then
    # acknowledged nothing), so the writer waits as long as a blocking call may.
    writer = clients(protocol=protocol, add_timeout=60.0)
    writer.run(_write_then_vanish(ledger_box, acked, total=600, die_after=150))
    ledger_id = ledger_box[0]
    assert acked == list(range(len(acked))) and len(acked) >= 151
    md, _ = clients().metadata(ledger_id)
    assert md.is_open

    rh = clients(protocol=protocol).recover(ledger_id)
    assert rh.is_closed and rh.last_entry_id >= acked[-1]
    entries = rh.read()
    assert [e for e, _ in entries] == list(range(rh.last_entry_id + 1))
    assert all(p == payload(e) for e, p in entries)
    md, _ = clients().metadata(ledger_id)
    assert md.is_closed and md.last_entry_id == rh.last_entry_id
    assert md.length == sum(len(payload(i)) for i in range(rh.last_entry_id + 1))


def test_concurrent_recoveries_agree_and_the_old_writer_is_fenced(bookie_cluster, clients):
    bookie_cluster(3)
    writer, r1, r2 = clients(), clients(), clients()
    lh = writer.create(3, 2, 2, password=b"pw")
    lh.add_many(payload(i) for i in range(100))
    ledger_id = lh.ledger_id

    def race(client):
        async def go():
            acked, refused = [], []
            late = [lh.handle.add_entry(payload(100 + i)) for i in range(50)]
            for d in late:
                d.addCallbacks(acked.append, lambda f: refused.append(f.value))
            handles = await defer.gatherResults(
                [client.open_ledger(ledger_id, recovery=True), r2.client.open_ledger(ledger_id, recovery=True)],
                consumeErrors=True,
            )
            await defer.DeferredList(late)
            return handles, acked, refused

        return defer.ensureDeferred(go())

    (h1, h2), acked, refused = r1.run(race)
    assert h1.last_entry_id == h2.last_entry_id
    md, _ = r1.metadata(ledger_id)
    assert md.is_closed and md.last_entry_id == h1.last_entry_id
    assert md.last_entry_id >= max([99] + acked)
    assert all(isinstance(e, LedgerFencedError) for e in refused)
    with pytest.raises(LedgerFencedError):
        lh.add(b"after the recovery")
    lh.close()  # a fenced writer has nothing to close; the recovery did it
    entries = r1.open(ledger_id).read()
    assert [p for _, p in entries] == [payload(i) for i in range(md.last_entry_id + 1)]


def test_ensemble_change_when_a_bookie_is_killed_mid_write(bookie_cluster, clients):
    procs = by_id(bookie_cluster(4))
    bk = clients()
    lh = bk.create(3, 2, 2, password=b"pw")
    victim = lh.metadata.last_ensemble[1]

    assert lh.add_many(payload(i) for i in range(200)) == 199

    def payloads():  # pulled in the reactor thread while earlier adds are in flight
        for i in range(200, 600):
            if i == 300:
                procs[victim].kill(signal.SIGKILL)
            yield payload(i)

    assert lh.add_many(payloads()) == 599
    md = lh.metadata
    assert len(md.ensembles) == 2, md.ensembles
    first, new_ensemble = md.ensembles[1]
    assert 200 <= first <= 300 and victim not in new_ensemble
    assert lh.handle.ensemble_changes == 1
    lh.close()
    stored, _ = clients().metadata(lh.ledger_id)
    assert len(stored.ensembles) == 2 and stored.last_entry_id == 599
    # every acknowledged entry reads back (entries of the first segment fail over past the dead bookie)
    assert clients().open(lh.ledger_id).read() == [(i, payload(i)) for i in range(600)]


def test_wrong_password(bookie_cluster, clients):
    bookie_cluster(3)
    bk = clients()
    lh = bk.create(3, 2, 2, digest_type="mac", password=b"right")
    lh.add_many(payload(i) for i in range(5))
    lh.close()
    with pytest.raises(Unauthorized):
        bk.open(lh.ledger_id, b"wrong")
    unchecked = bk.open(lh.ledger_id, b"wrong", check_password=False)
    with pytest.raises(DigestError):
        unchecked.read(0, 4)

    # bookies refuse adds under another master key for a ledger they hold
    lh2 = bk.create(3, 2, 2, password=b"first")
    lh2.add_many(payload(i) for i in range(3))
    bk.delete(lh2.ledger_id)  # metadata gone, the bookies still have the data until GC
    again = bk.create(3, 2, 2, password=b"second", ledger_id=lh2.ledger_id)
    with pytest.raises(Unauthorized):
        again.add(b"x")


def test_read_failover_when_a_replica_is_down(bookie_cluster, clients):
    procs = by_id(bookie_cluster(3))
    bk = clients()
    lh = bk.create(3, 2, 2)
    lh.add_many(payload(i) for i in range(60))
    lh.close()
    down = lh.metadata.last_ensemble[0]
    procs[down].kill(signal.SIGKILL)
    rh = clients().open(lh.ledger_id)
    assert sum(1 for e in range(60) if rh.metadata.write_set(e)[0] == down) == 20
    assert rh.read() == [(i, payload(i)) for i in range(60)]


def test_v2_reads_of_an_unstriped_ledger_are_batch_reads_with_failover(bookie_cluster, clients):
    procs = by_id(bookie_cluster(3))
    writer = clients(protocol="v2", add_timeout=15.0)  # a loaded machine may connect late
    lh = writer.create(3, 3, 2)
    lh.add_many(payload(i) for i in range(1500))
    lh.close()
    down = lh.metadata.last_ensemble[1]
    procs[down].kill(signal.SIGKILL)
    reader = clients(protocol="v2")
    assert reader.open(lh.ledger_id).read() == [(i, payload(i)) for i in range(1500)]
    pool = reader.client.pool
    # the live bookies answered BATCH_READ_ENTRY (a connection notes it on its first answer);
    # batch reads are a fast path: off, no connection sent one
    asked = True if fastpath.selected().enabled else None
    assert [pool.get(b).batch_read_supported for b in lh.metadata.last_ensemble if b != down] == [asked, asked]


def test_a_stalled_bookie_with_qa_below_qw_slows_the_writer_down_but_is_not_replaced(bookie_cluster, clients):
    """Qa < Qw: entries complete without the stalled bookie; its backlog stays
    bounded (the writer waits) and it catches up: no ensemble change, which
    with three bookies would have nowhere to go."""
    import threading

    procs = by_id(bookie_cluster(3))
    bk = clients(add_timeout=15.0)  # far above the stall, however late a loaded machine wakes the test
    lh = bk.create(3, 3, 2)
    assert lh.add(payload(0)) == 0  # every bookie connected and answering
    bound = lh.handle.max_inflight  # writes a bookie may owe before the writer waits for it
    total = 5 * bound
    stalled = procs[lh.metadata.last_ensemble[2]]
    outcome = {}
    stop_process(stalled.proc.pid)  # every thread stopped: none answers an add of the run below
    try:
        writer = threading.Thread(target=lambda: outcome.update(last=lh.add_many(payload(i) for i in range(1, total))))
        writer.start()

        def held(handle) -> tuple[int, int] | None:
            """(entries sent, LAC) once every entry sent is confirmed and no more may go
            out: the writer waits for the stalled bookie (read in the reactor thread, at once)."""
            if handle.writable() or handle.pending_adds or handle.next_entry_id == 1:
                return None
            return handle.next_entry_id, handle.last_add_confirmed

        sent, confirmed = wait_for(
            lambda: run_in_reactor(held, lh.handle), what="the writer to wait for the stalled bookie"
        )
        # every entry goes to the stalled bookie (Qw = E): it owes at most `bound` of them (entry 0's
        # answer may be one of them), and the other two confirmed every entry sent
        assert bound <= sent <= 1 + bound and confirmed == sent - 1
        assert writer.is_alive() and "last" not in outcome
    finally:
        os.kill(stalled.proc.pid, signal.SIGCONT)
    writer.join(120)
    assert outcome.get("last") == total - 1
    assert lh.metadata.last_ensemble == bk.open(lh.ledger_id).metadata.last_ensemble
    assert len(lh.metadata.ensembles) == 1
    lh.close()
    # the stalled bookie has every entry too
    wire_client = WireClient(stalled.port)
    assert wire_client.v2(v2.ReadRequest(2, 0, lh.ledger_id, total - 1)).rc == RC.EOK
    wire_client.close()


def test_open_for_append_continues_a_ledger_of_a_dead_writer(bookie_cluster, clients, metadata_uri):
    bookie_cluster(3)
    writer = clients()
    lh = writer.create(3, 2, 2, password=b"pw")
    lh.add_many(payload(i) for i in range(20))
    writer.close()  # gone without closing the ledger

    bk = clients()
    ah = bk.open_for_append(lh.ledger_id, b"pw")
    assert ah.last_add_confirmed == 19 and ah.handle.next_entry_id == 20
    with pytest.raises(LedgerLocked):
        clients().open_for_append(lh.ledger_id, b"pw")
    assert ah.add_many(payload(i, "more") for i in range(10)) == 29
    ah.close()
    with ZKMetadataStore(metadata_uri, twins=fastpath.selected()) as zk:
        assert not zk.client.exists(P.append_lock_path(lh.ledger_id, zk.root))  # lock released
        md, _ = zk.ledgers.read(lh.ledger_id)
    assert md.is_closed and md.last_entry_id == 29
    expected = [payload(i) for i in range(20)] + [payload(i, "more") for i in range(10)]
    assert [p for _, p in clients().open(lh.ledger_id).read()] == expected
    with pytest.raises(LedgerClosedError):
        bk.open_for_append(lh.ledger_id)


def test_open_for_append_fenced_by_a_recovery_fails_cleanly(bookie_cluster, clients, metadata_uri):
    bookie_cluster(3)
    writer = clients()
    lh = writer.create(3, 3, 2, password=b"pw")
    lh.add_many(payload(i) for i in range(10))
    writer.close()

    ah = clients().open_for_append(lh.ledger_id)
    assert ah.add(payload(10)) == 10
    rh = clients().recover(lh.ledger_id)
    assert rh.last_entry_id >= 10
    with pytest.raises(LedgerFencedError):
        ah.add(payload(11))
    ah.close()  # nothing to write, lock released
    with ZKMetadataStore(metadata_uri, twins=fastpath.selected()) as zk:
        assert not zk.client.exists(P.append_lock_path(lh.ledger_id, zk.root))
    with pytest.raises(LedgerClosedError):
        clients().open_for_append(lh.ledger_id)
