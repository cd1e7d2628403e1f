"""BookiePool: one lazily created, reused connection per bookie id."""

from __future__ import annotations

import pytest
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure

from bkctl.wire import fastpath
from bkctl.wire.client import errors as E
from bkctl.wire.client.connection import BookieConnection
from bkctl.wire.client.pool import BookiePool
from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.framing import frame
from bkctl.wire.codecs.protocol import RC
from tests.support.deferreds import assertNoResult, failureResultOf, successResultOf


def accept(reactor: MemoryReactorClock, index: int):
    factory = reactor.tcpClients[index][2]
    proto = factory.buildProtocol(None)
    transport = StringTransport()
    proto.makeConnection(transport)
    return proto, transport


def test_connections_are_lazy_and_reused():
    reactor = MemoryReactorClock()
    pool = BookiePool(reactor, twins=fastpath.selected())
    a = pool.get("10.0.0.1:3181")
    assert isinstance(a, BookieConnection) and a.bookie_id == "10.0.0.1:3181"
    assert reactor.tcpClients == []  # nothing connects before a request
    assert pool.get("10.0.0.1:3181") is a
    b = pool["10.0.0.2:3181"]
    assert b is not a
    assert len(pool) == 2 and "10.0.0.1:3181" in pool and sorted(pool) == ["10.0.0.1:3181", "10.0.0.2:3181"]
    a.read(1, 0)
    a.read(1, 1)
    assert [c[:2] for c in reactor.tcpClients] == [("10.0.0.1", 3181)]


def test_default_resolve_and_custom_resolve():
    reactor = MemoryReactorClock()
    pool = BookiePool(reactor, twins=fastpath.selected())
    pool.get("[::1]:3182").read(1, 0)
    assert reactor.tcpClients[0][:2] == ("::1", 3182)
    # A bookie id that is not host:port cannot be resolved by default.
    exc = failureResultOf(pool.get("bookie-a").read(1, 0), E.BookieUnavailable).value
    assert exc.bookie == "bookie-a"

    asked = []

    def resolve(bookie_id):
        asked.append(bookie_id)
        return ("192.168.1.9", 4000)

    reactor = MemoryReactorClock()
    pool = BookiePool(reactor, resolve, twins=fastpath.selected())
    pool.get("bookie-a").add(1, 0, b"k" * 20, b"e" * 32)
    assert asked == ["bookie-a"] and reactor.tcpClients[0][:2] == ("192.168.1.9", 4000)


def test_settings_apply_to_every_connection():
    reactor = MemoryReactorClock()
    pool = BookiePool(
        reactor,
        protocol="v2",
        add_timeout=1.5,
        read_timeout=2.5,
        max_outstanding=7,
        max_queued=3,
        connect_timeout=4,
        twins=fastpath.selected(),
    )
    conn = pool.get("h:1")
    assert (conn.protocol, conn.add_timeout, conn.read_timeout) == ("v2", 1.5, 2.5)
    assert (conn.max_outstanding, conn.max_queued, conn.connect_timeout) == (7, 3, 4.0)
    conn.read(1, 0)
    assert reactor.tcpClients[0][3] == 4.0
    # Java defaults otherwise.
    conn = BookiePool(MemoryReactorClock(), twins=fastpath.selected()).get("h:1")
    assert (conn.protocol, conn.add_timeout, conn.read_timeout) == ("v3", 5.0, 5.0)


def test_bad_settings_fail_at_construction():
    with pytest.raises(ValueError):
        BookiePool(MemoryReactorClock(), protocol="v1", twins=fastpath.selected())
    with pytest.raises(ValueError):
        BookiePool(MemoryReactorClock(), read_timeout=0, twins=fastpath.selected())
    with pytest.raises(TypeError):
        BookiePool(MemoryReactorClock(), no_such_option=1, twins=fastpath.selected())


def test_each_connection_counts_its_own_txn_ids():
    reactor = MemoryReactorClock()
    pool = BookiePool(reactor, twins=fastpath.selected())
    pool.get("a:1").read(1, 0)
    pool.get("b:1").read(1, 0)
    ids = []
    for i in range(2):
        _p, t = accept(reactor, i)
        ids.append(v3.parse_request(t.value()[4:]).header.txnId)
    assert ids == [1, 1]


def test_close_waits_for_every_connection():
    reactor = MemoryReactorClock()
    pool = BookiePool(reactor, read_timeout=3, twins=fastpath.selected())
    d1 = pool.get("a:1").read(1, 0)
    d2 = pool.get("b:1").read(1, 0)
    pool.get("c:1")  # never used, never connected
    p1, t1 = accept(reactor, 0)
    p2, t2 = accept(reactor, 1)
    assert len(reactor.getDelayedCalls()) == 2
    closed = pool.close()
    for d in (d1, d2):
        failureResultOf(d, E.BookieUnavailable)
    # only each closing connection's abort after its close grace (a peer that never closes)
    assert [c.func.__name__ for c in reactor.getDelayedCalls()] == ["_abort", "_abort"]
    assert t1.disconnecting and t2.disconnecting
    assertNoResult(closed)
    p1.connectionLost(Failure(ConnectionDone()))
    assertNoResult(closed)
    p2.connectionLost(Failure(ConnectionDone()))
    assert successResultOf(closed) is None
    assert reactor.getDelayedCalls() == []
    assert pool.closed and len(pool) == 0
    with pytest.raises(RuntimeError):
        pool.get("a:1")


def test_close_empty_pool():
    pool = BookiePool(MemoryReactorClock(), twins=fastpath.selected())
    assert successResultOf(pool.close()) is None


def test_remove_closes_one_connection():
    reactor = MemoryReactorClock()
    pool = BookiePool(reactor, protocol="v2", twins=fastpath.selected())
    conn = pool.get("a:1")
    d = conn.read(1, 0)
    proto, _t = accept(reactor, 0)
    proto.dataReceived(frame(v2.ReadResponse(2, RC.EOK, 1, 0, b"e").encode()))
    assert successResultOf(d) == b"e"
    removed = pool.remove("a:1")
    assert "a:1" not in pool and conn.state == "closed"
    proto.connectionLost(Failure(ConnectionDone()))
    assert successResultOf(removed) is None
    assert pool.get("a:1") is not conn
    assert successResultOf(pool.remove("zzz:1")) is None
