"""A burst's adds handed to each bookie as one run (``add_run``, the one way an add enters a
connection: as one run as far as the wire has room, a fast path) do what sending the copies one by
one does: the same frames in
the same order on each connection, the same requests on the wire with the
same deadlines, the same outcomes; no bookie gets more than ``max_inflight``
unanswered writes; and a bookie whose connection has room for part of its
run gets that part as a run and the rest one by one."""

import types

import pytest

from bkctl.wire import fastpath
from bkctl.wire.client.cork import Cork
from bkctl.wire.client.ledger_handle import LedgerHandle
from bkctl.wire.codecs.add_frames import AddEncoder
from bkctl.wire.codecs.digest import DigestType
from bkctl.wire.codecs.protocol import RC
from bkctl.wire.metadata.ledger import LedgerMetadata
from tests.support.connection import KEY, Harness, entry, v3_reply, v3_requests
from tests.support.deferreds import successResultOf

BOOKIES = ("b1:3181", "b2:3181", "b3:3181")


@pytest.fixture(autouse=True)
def fast_paths_on(monkeypatch):
    """These tests look at the fast path itself, so it is on even in the suite's BKCTL_FASTPATHS=0 run."""
    from bkctl.wire import fastpath

    monkeypatch.setattr(fastpath, "selected", lambda: fastpath.build(True))


def _encoded(entry_ids):
    encoder = AddEncoder("v3", codec=fastpath.selected().codec)
    return [encoder.encode(9, e, KEY, entry(9, e, b"p%d" % e)) for e in entry_ids]


def test_a_run_is_what_adding_one_by_one_sends_and_registers():
    one, run = Harness(add_timeout=3.0), Harness(add_timeout=3.0)
    (p1, t1), (p2, t2) = one.connected(), run.connected()  # the protocols the connections took
    got_one, got_run = [], []
    adds = _encoded((4, 5, 6))
    for add, slot in zip(adds, (0, 1, 0)):
        one.conn.add_run([add], [slot], lambda *a: got_one.append(a))
    run.conn.add_run(adds, [0, 1, 0], lambda *a: got_run.append(a))
    assert t1.value() == t2.value() and t2.value()
    for h in (one, run):
        tables = h.conn.requests
        assert [r.key for r in tables.sent] == [2, 3, 4] and sorted(tables.v3_pending) == [2, 3, 4]
        assert [(r.ids, r.ctx, r.slot) for r in tables.sent] == [
            ((9, 4), adds[0], 0),
            ((9, 5), adds[1], 1),
            ((9, 6), adds[2], 0),
        ]
    assert [d.getTime() for d in one.delayed()] == [d.getTime() for d in run.delayed()]
    r1, r2, _r3 = v3_requests(t2)
    assert [r.addRequest.entryId for r in (r1, r2)] == [4, 5]
    assert r1.addRequest.body == entry(9, 4, b"p4") and r1.addRequest.masterKey == KEY
    chunk = v3_reply(r2) + v3_reply(r1, RC.EFENCED)
    p1.dataReceived(chunk)
    p2.dataReceived(chunk)
    one.reactor.advance(3.0)
    run.reactor.advance(3.0)  # entry 6 times out alike

    def outcome(calls):
        return [(a[0].entry_id, a[1], a[2], None if a[3] is None else type(a[3])) for a in calls]

    assert outcome(got_run) == outcome(got_one)
    assert [a[0].entry_id for a in got_run] == [5, 4, 6] and got_run[0][3] is None and got_run[1][3] is not None
    assert run.conn.outstanding == 0


def test_a_run_puts_on_the_wire_what_it_has_room_for_and_queues_the_rest():
    h = Harness(max_outstanding=4)
    got: list = []
    h.conn.add_run(_encoded((0,)), [0], lambda *a: got.append(a))  # not connected: it waits (and dials)
    assert h.conn.queued == 1
    proto, transport = h.accept()
    assert h.conn.outstanding == 1 and h.conn.queued == 0
    h.conn.add_run(_encoded((1, 2, 3, 4, 5)), [0] * 5, lambda *a: got.append(a))
    assert h.conn.outstanding == 4 and h.conn.queued == 2
    reqs = v3_requests(transport)
    assert [r.addRequest.entryId for r in reqs] == [0, 1, 2, 3]
    proto.dataReceived(b"".join(v3_reply(r) for r in reqs[:2]))  # room for the two that waited
    assert [a[0].entry_id for a in got] == [0, 1] and h.conn.queued == 0
    assert [r.addRequest.entryId for r in v3_requests(transport)] == [0, 1, 2, 3, 4, 5]
    h.conn.close()
    h.conn.add_run(_encoded((6,)), [0], lambda *a: got.append(a))  # closed: refused at once
    assert got[-1][0].entry_id == 6 and got[-1][3] is not None


def _writer(runs: bool, quorum=(3, 2, 2), max_inflight: int = 1000, max_outstanding: dict | None = None):
    """A LedgerHandle over three harnessed connections; without ``runs`` no
    bookie takes a run (the copies go one by one)."""
    e, qw, qa = quorum
    bookies = BOOKIES[:e]
    cork = Cork()  # the client's: its connections' bursts, as a BookiePool's
    harnesses = {b: Harness(bookie=b, cork=cork, max_outstanding=(max_outstanding or {}).get(b, 1000)) for b in bookies}
    links = {b: h.connected() for b, h in harnesses.items()}
    conns = {b: h.conn for b, h in harnesses.items()}
    for conn in conns.values():
        conn.runs = []
        if runs:
            conn.add_run = lambda adds, slots, on_done, _c=conn, _run=conn.add_run: (
                _c.runs.append([a.entry_id for a in adds]),
                _run(adds, slots, on_done),
            )
        else:  # each copy its own call
            conn.add_run = lambda adds, slots, on_done, _run=conn.add_run: [
                _run([a], [s], on_done) for a, s in zip(adds, slots)
            ]
    md = LedgerMetadata.new(list(bookies), qw, qa, password=b"", digest_type=DigestType.CRC32C)
    client = types.SimpleNamespace(
        pool=types.SimpleNamespace(get=conns.__getitem__, cork=cork),
        twins=fastpath.selected(),
        protocol="v3",
        max_inflight=max_inflight,
        explicit_lac_interval=0.0,
        closed=False,
        reactor=harnesses[bookies[0]].reactor,
        max_frame_size=5 * 1024 * 1024,
    )
    return LedgerHandle(client, 9, md, 0, b"", DigestType.CRC32C, max_inflight=max_inflight), links, conns


def _serve(links, backlog, slow=()) -> dict[str, tuple[bytes, list[int]]]:
    """Answer the adds written so far (a ``slow`` bookie only its oldest
    one): per bookie, the bytes it was sent and the entry ids asked for."""
    asked = {}
    for bookie, (proto, transport) in links.items():
        writes = transport.value()
        transport.clear()
        reqs = v3_requests(types.SimpleNamespace(value=lambda w=writes: w))
        asked[bookie] = (writes, [r.addRequest.entryId for r in reqs])
        waiting = backlog.setdefault(bookie, [])
        waiting.extend(reqs)
        answered = waiting[:1] if bookie in slow else waiting[:]
        del waiting[: len(answered)]
        proto.dataReceived(b"".join(v3_reply(r) for r in answered))
    return asked


def _run_adds(n: int, runs: bool, slow=(), **kw):
    handle, links, conns = _writer(runs, **kw)
    d = handle.add_entries(b"entry %d" % i for i in range(n))
    rounds = []
    backlog: dict = {}
    most = {b: 0 for b in links}
    while not d.called and len(rounds) < 1000:
        for b, conn in conns.items():
            most[b] = max(most[b], conn.outstanding)
        rounds.append(_serve(links, backlog, slow))
    return handle, d, rounds, most, conns


@pytest.mark.parametrize("quorum", [(3, 2, 2), (3, 3, 2), (2, 2, 1)])
def test_a_burst_sends_the_same_frames_in_runs_as_one_by_one(quorum):
    outcomes = []
    for runs in (True, False):
        handle, d, rounds, _most, conns = _run_adds(300, runs, quorum=quorum, max_inflight=64)
        outcomes.append((successResultOf(d), rounds, handle.last_add_confirmed))
        if runs:
            used = [r for c in conns.values() for r in c.runs]
            assert used and max(map(len, used)) > 1  # the copies went out in runs
            assert sorted(e for r in used for e in r) == sorted(
                e for e in range(300) for _ in range(quorum[1])
            )  # every copy, once
    assert outcomes[0] == outcomes[1]
    last, rounds, lac = outcomes[0]
    assert last == 299 and lac == 299
    first = rounds[0]["b1:3181"][1]
    assert first == sorted(first) and len(first) > 1


def test_a_slow_bookie_gets_no_more_than_max_inflight_unanswered_writes():
    """E3/Qw3/Qa2 with b3 answering one add a round: the adds complete
    without it, but never with it more than max_inflight writes behind; in
    runs as one by one."""
    outcomes = []
    for runs in (True, False):
        handle, d, rounds, most, conns = _run_adds(60, runs, slow=("b3:3181",), quorum=(3, 3, 2), max_inflight=10)
        assert successResultOf(d) == 59
        assert most["b3:3181"] == 10
        outcomes.append(rounds)
        if runs:
            assert max(map(len, conns["b1:3181"].runs)) == 10
    assert outcomes[0] == outcomes[1]
    assert len(outcomes[0]) > 50  # b3 set the pace


def test_a_bookie_without_room_for_its_run_gets_the_rest_one_by_one():
    """b2's connection has room for 4 requests on the wire: its run puts at most
    4 there, the rest of its copies queue and go out as answers free room, and
    the outcome is that of sending every copy one by one."""
    outcomes = []
    for runs in (True, False):
        handle, d, rounds, most, conns = _run_adds(40, runs, max_outstanding={"b2:3181": 4}, max_inflight=16)
        outcomes.append((successResultOf(d), rounds))
        assert most["b2:3181"] <= 4  # what its connection has no room for waits in its queue
        if runs:
            assert max(map(len, conns["b1:3181"].runs)) > 4
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == 39


def _per_entry_adds(n: int, runs: bool, inflight: int, **kw):
    """``n`` adds through the per-entry API as ``bkctl bench`` makes them: ``inflight``
    outstanding, each acknowledgement's callback adding the next entry."""
    handle, links, conns = _writer(runs, **kw)
    done: list[int] = []
    issued = [0]

    def fill():
        while issued[0] < n and issued[0] - len(done) < inflight:
            issued[0] += 1
            handle.add_entry(b"entry %d" % (issued[0] - 1)).addCallback(acked)

    def acked(entry_id):
        done.append(entry_id)
        fill()

    fill()
    first = {b: transport.value() for b, (_proto, transport) in links.items()}
    rounds, backlog = [], {}
    while len(done) < n and len(rounds) < 1000:
        rounds.append(_serve(links, backlog))
    return done, first, rounds, conns


@pytest.mark.parametrize("quorum", [(3, 2, 2), (1, 1, 1)])
def test_per_entry_adds_of_a_burst_go_out_in_runs_as_one_by_one(quorum):
    """The adds an answer chunk's callbacks make (add_entry, one Deferred each) are held
    for the burst's end and go to each bookie as one run: the same frames, rounds and
    outcomes as the copies one by one; adds outside a burst go out at once."""
    outcomes = []
    for runs in (True, False):
        done, first, rounds, conns = _per_entry_adds(200, runs, 32, quorum=quorum, max_inflight=64)
        assert all(first.values())  # the first window went out at once, before any answer
        outcomes.append((done, first, rounds))
        if runs:
            used = [r for c in conns.values() for r in c.runs]
            assert used and max(map(len, used)) > 1
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == list(range(200))
