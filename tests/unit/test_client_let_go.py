"""A closing bookie connection lets go whatever the peer does: close_notify (loseConnection) first,
then, on the injected clock, abortConnection after the grace when the peer neither answered nor closed."""

from __future__ import annotations

from twisted.internet.error import ConnectionDone
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure

from bkctl.wire import fastpath
from bkctl.wire.client.client_protocol import CLOSE_GRACE, BookieClientProtocol
from tests.support.deferreds import assertNoResult, successResultOf


class RecordingTransport(StringTransport):
    """A transport that remembers how it was asked to go (a TLS transport sends close_notify on
    loseConnection and only goes once the peer answers; abortConnection drops it at once)."""

    def __init__(self):
        super().__init__()
        self.calls: list[str] = []

    def loseConnection(self):
        self.calls.append("lose")
        super().loseConnection()

    def abortConnection(self):
        self.calls.append("abort")
        self.disconnected = True


def connected() -> tuple[BookieClientProtocol, RecordingTransport]:
    proto = BookieClientProtocol(None, twins=fastpath.build(False))
    transport = RecordingTransport()
    proto.makeConnection(transport)
    return proto, transport


def test_a_peer_that_never_answers_close_notify_is_aborted_after_the_grace():
    clock = Clock()
    proto, transport = connected()
    done = proto.let_go(clock)
    assert transport.calls == ["lose"]
    clock.advance(CLOSE_GRACE * 0.9)
    assert transport.calls == ["lose"]
    assertNoResult(done)
    clock.advance(CLOSE_GRACE * 0.2)
    assert transport.calls == ["lose", "abort"]
    proto.connectionLost(Failure(ConnectionDone()))  # what the aborted transport reports
    assert successResultOf(done) is None
    assert clock.getDelayedCalls() == []


def test_a_peer_that_answers_is_never_aborted():
    clock = Clock()
    proto, transport = connected()
    done = proto.let_go(clock, grace=5)
    proto.connectionLost(Failure(ConnectionDone()))  # the peer's close_notify came back
    assert successResultOf(done) is None
    assert clock.getDelayedCalls() == []  # the abort timer is cancelled
    clock.advance(10)
    assert transport.calls == ["lose"]


def test_letting_go_of_a_lost_connection_does_nothing():
    clock = Clock()
    proto, transport = connected()
    proto.connectionLost(Failure(ConnectionDone()))
    assert successResultOf(proto.let_go(clock)) is None
    assert transport.calls == [] and clock.getDelayedCalls() == []
