"""send_now: a write to a TCP transport with nothing queued leaves at once, with
no writer registered with the reactor; anything else is the transport's own
write, in order."""

from __future__ import annotations

import socket

import pytest
from twisted.internet import protocol, tcp
from twisted.internet.testing import MemoryReactor, StringTransport

from bkctl.wire.send_now import send_now


@pytest.fixture
def pair():
    """A connected loopback TCP pair: our side as a Twisted transport on a
    MemoryReactor (which records the writers registered), the peer a plain socket."""
    listener = socket.create_server(("127.0.0.1", 0))
    ours = socket.create_connection(listener.getsockname())
    peer, _ = listener.accept()
    listener.close()
    reactor = MemoryReactor()
    transport = tcp.Connection(ours, protocol.Protocol(), reactor)
    transport.connected = 1
    peer.settimeout(5)
    yield transport, peer, reactor
    ours.close()
    peer.close()


def received(peer: socket.socket, n: int) -> bytes:
    got = b""
    while len(got) < n:
        chunk = peer.recv(n - len(got))
        assert chunk, "the connection closed early"
        got += chunk
    return got


@pytest.fixture
def fast():
    """send_now's fast path on (its default)."""


def test_nothing_queued_leaves_at_once(pair, fast):
    transport, peer, reactor = pair
    assert send_now(transport, b"frame-1") is True
    assert received(peer, 7) == b"frame-1"
    assert transport not in reactor.getWriters()  # no epoll round trip for it
    assert transport.dataBuffer == b"" and not transport._tempDataBuffer


def test_behind_queued_bytes_it_waits_its_turn(pair, fast):
    transport, peer, reactor = pair
    transport.write(b"first ")
    assert send_now(transport, b"second") is False
    assert transport in reactor.getWriters()
    peer.setblocking(False)
    with pytest.raises(BlockingIOError):
        peer.recv(100)  # nothing overtook the queued bytes
    peer.setblocking(True)
    transport.doWrite()
    assert received(peer, 12) == b"first second"


def test_what_the_kernel_does_not_take_is_queued_in_order(pair, fast):
    transport, peer, reactor = pair
    transport.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    data = bytes(range(256)) * 16384  # 4 MiB: more than the socket buffers hold
    assert send_now(transport, data) is False
    queued = len(transport.dataBuffer) - transport.offset + transport._tempDataLen
    assert 0 < queued < len(data)  # some went at once, the rest waits for the reactor
    assert transport in reactor.getWriters()
    got = bytearray()
    peer.setblocking(False)
    while len(got) < len(data):
        try:
            got += peer.recv(1 << 20)
        except BlockingIOError:
            assert transport.doWrite() is None
    assert bytes(got) == data
    assert transport not in reactor.getWriters()


def test_with_fast_paths_off_it_is_the_transports_write(pair):
    transport, peer, reactor = pair
    assert send_now(transport, b"later", False) is False
    assert transport in reactor.getWriters()
    transport.doWrite()
    assert received(peer, 5) == b"later"


def test_a_closing_transport_is_left_to_twisted(pair, fast):
    transport, peer, reactor = pair
    transport.disconnecting = True
    assert send_now(transport, b"x") is False
    assert transport._tempDataBuffer == [b"x"]


def test_a_send_error_is_left_for_the_transport_to_meet(pair, fast):
    transport, peer, reactor = pair
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    peer.close()  # a reset: the next sends fail
    for _ in range(50):
        if send_now(transport, b"y" * 1000) is False:
            break
    else:
        pytest.fail("sends to a reset peer kept succeeding")
    assert transport in reactor.getWriters()
    lost = transport.doWrite()
    assert isinstance(lost, Exception)  # Twisted's own send meets the error and closes


def test_other_transports_get_a_plain_write(fast):
    transport = StringTransport()
    assert send_now(transport, b"abc") is False
    assert transport.value() == b"abc"
