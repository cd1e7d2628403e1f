"""A window's reads sent as one run per bookie (``takes_reads``/``read_run``,
a fast path) do what reading them one by one does: the same frames in the
same order on each connection, the same requests on the wire with the same
deadlines, the same results; and a window falls back to one by one whenever
a bookie cannot take its run at once."""

import types

import pytest

from bkctl.wire import fastpath
from bkctl.wire.client.connection import BookieConnection
from bkctl.wire.client.cork import Cork
from bkctl.wire.client.read_handle import ReadHandle
from bkctl.wire.codecs import v3
from bkctl.wire.codecs.digest import DigestManager, DigestType
from bkctl.wire.codecs.protocol import RC
from bkctl.wire.metadata.ledger import LedgerMetadata, LedgerState
from tests.support.connection import Harness, v3_reply, v3_requests
from tests.support.deferreds import successResultOf

BOOKIES = ("b1:3181", "b2:3181", "b3:3181")
DM = DigestManager(7, DigestType.CRC32C, b"")


@pytest.fixture(autouse=True)
def fast_paths_on(monkeypatch):
    """These tests look at the fast path itself, so it is on even in the suite's BKCTL_FASTPATHS=0 run."""
    from bkctl.wire import fastpath

    monkeypatch.setattr(fastpath, "selected", lambda: fastpath.build(True))


def test_a_run_is_what_reading_one_by_one_sends_and_registers():
    one, run = Harness(read_timeout=3.0), Harness(read_timeout=3.0)
    (p1, t1), (p2, t2) = one.connected(), run.connected()  # the protocols the connections took
    got_one, got_run = [], []
    for e in (4, 7, 10):
        one.conn.read_with_callback(9, e, lambda *a: got_one.append(a), e, 0)
    assert run.conn.takes_reads(3)
    run.conn.read_run(9, range(4, 11, 3), lambda *a: got_run.append(a))
    assert t1.value() == t2.value()
    for h in (one, run):
        tables = h.conn.requests
        assert [r.key for r in tables.sent] == [2, 3, 4] and sorted(tables.v3_pending) == [2, 3, 4]
        assert [(r.ids, r.ctx, r.slot) for r in tables.sent] == [((9, 4), 4, 0), ((9, 7), 7, 0), ((9, 10), 10, 0)]
    assert [d.getTime() for d in one.delayed()] == [d.getTime() for d in run.delayed()]
    r1, r2, r3 = v3_requests(t2)
    chunk = v3_reply(r2, body=b"seven") + v3_reply(r1, RC.ENOENTRY)
    p1.dataReceived(chunk)
    p2.dataReceived(chunk)
    one.reactor.advance(3.0)
    run.reactor.advance(3.0)  # entry 10 times out alike
    assert [(a[0], a[3] if type(a[3]) is bytes else type(a[3])) for a in got_run] == [
        (a[0], a[3] if type(a[3]) is bytes else type(a[3])) for a in got_one
    ]
    assert len(got_run) == 3 and run.conn.outstanding == 0


def test_a_connection_takes_no_run_it_cannot_send_at_once():
    h = Harness(max_outstanding=4)
    assert not h.conn.takes_reads(1)  # not connected
    h.connected()
    assert h.conn.takes_reads(4) and not h.conn.takes_reads(5)
    off = Harness(twins=fastpath.build(False))
    off.connected()
    assert not off.conn.takes_reads(1)
    v2 = Harness(protocol="v2")
    v2.connected()
    assert not v2.conn.takes_reads(1)
    h.conn.close()
    assert not h.conn.takes_reads(1)


def _reader(n: int, runs: bool, max_outstanding: int = 1000, down: str | None = None):
    """A ReadHandle over three harnessed connections (E3/Qw2), ``down``'s never connected."""
    cork = Cork()  # the client's: its connections' bursts, as a BookiePool's
    harnesses = {b: Harness(bookie=b, cork=cork, max_outstanding=max_outstanding) for b in BOOKIES}
    links = {b: h.connected() for b, h in harnesses.items() if b != down}
    conns = {b: h.conn for b, h in harnesses.items()}
    for conn in conns.values():
        if runs:
            conn.runs = []
            conn.read_run = lambda ledger_id, ids, on_done, _c=conn, _run=conn.read_run: (
                _c.runs.append(list(ids)),
                _run(ledger_id, ids, on_done),
            )
        else:
            conn.takes_reads = lambda count: False
    md = LedgerMetadata(3, 2, 2, LedgerState.CLOSED, n - 1, 10 * n, ((0, BOOKIES),))
    client = types.SimpleNamespace(
        pool=types.SimpleNamespace(get=conns.__getitem__, cork=cork),
        protocol="v3",
        read_window=16,
        twins=fastpath.selected(),
    )
    return ReadHandle(client, 7, md, 0, b"", DigestType.CRC32C), links


def _serve(links, missing=()) -> dict[str, list[tuple[bytes, ...]]]:
    """Answer every request written so far; what each bookie was asked, per write."""
    asked = {}
    for bookie, (proto, transport) in links.items():
        writes = transport.value()
        transport.clear()
        reqs = v3_requests(types.SimpleNamespace(value=lambda w=writes: w))
        asked[bookie] = [r.readRequest.entryId for r in reqs]
        proto.dataReceived(
            b"".join(
                v3_reply(r, RC.ENOENTRY)
                if (bookie, r.readRequest.entryId) in missing
                else v3_reply(r, body=DM.package(r.readRequest.entryId, -1, 0, b"e%d" % r.readRequest.entryId))
                for r in reqs
            )
        )
    return asked


@pytest.mark.parametrize("missing", [(), (("b2:3181", 4), ("b1:3181", 9))])
def test_a_range_reads_the_same_with_runs_and_one_by_one(missing):
    outcomes = []
    for runs in (True, False):
        handle, links = _reader(40, runs)
        d = handle.read_entries(0, 39)
        rounds = []
        while not d.called:
            rounds.append(_serve(links, missing))
        outcomes.append((successResultOf(d), rounds))
    assert outcomes[0] == outcomes[1]
    entries, rounds = outcomes[0]
    assert entries == [(e, b"e%d" % e) for e in range(40)]
    assert rounds[0]["b1:3181"] == [0, 3, 6, 9, 12, 15]  # each bookie's first entries, in order
    handle, links = _reader(40, True)
    handle.read_entries(0, 39)
    assert handle.client.pool.get("b1:3181").runs == [[0, 3, 6, 9, 12, 15]]  # in one run


def test_a_window_with_a_bookie_that_cannot_take_its_run_reads_one_by_one():
    handle, links = _reader(12, runs=True, down="b3:3181")
    d = handle.read_entries(0, 11)
    asked = _serve(links)
    # b3 is connecting: nothing went anywhere as a run, entries 2, 5... wait for it in its queue
    assert asked["b1:3181"] == [0, 3, 6, 9] and asked["b2:3181"] == [1, 4, 7, 10]
    assert not d.called
    conn = handle.client.pool.get("b3:3181")
    assert conn.queued == 4 and isinstance(conn, BookieConnection)


def test_read_answer_bodies_verify():
    """The guard on the helpers: what _serve answers is what the handle accepts."""
    assert DM.payload(DM.package(3, -1, 0, b"e3"), 3) == b"e3"
    assert v3.parse_response(v3_reply(v3.read_request(1, 7, 3), body=b"x")[4:]).readResponse.body == b"x"
