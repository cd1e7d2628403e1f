"""A bookie connection (``bkctl.wire.client.connection``) on Twisted's fakes: a
MemoryReactorClock whose TCP connects the test accepts with a StringTransport,
what the client wrote split into requests, and v3 answers built for them."""

from __future__ import annotations

import hashlib
import struct

from twisted.internet.error import ConnectionLost, ConnectionRefusedError
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure

from bkctl.wire import fastpath
from bkctl.wire.client.client_protocol import BookieClientProtocol
from bkctl.wire.client.connection import BookieConnection
from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.framing import frame
from bkctl.wire.codecs.protocol import RC, OperationType

BOOKIE = "bk1.example:3181"
KEY = hashlib.sha1(b"ledgerpassword").digest()  # master key for password b"password"
EMPTY_KEY = hashlib.sha1(b"ledger").digest()


def entry(ledger_id: int, entry_id: int, payload: bytes = b"x") -> bytes:
    """A packaged-entry lookalike: what matters here is that it starts with the ids."""
    return struct.pack(">qqqq", ledger_id, entry_id, entry_id - 1, len(payload)) + payload


class Harness:
    """A connection on a MemoryReactorClock, with helpers to accept its TCP connects."""

    def __init__(self, protocol: str = "v3", bookie: str = BOOKIE, **kw):
        self.reactor = MemoryReactorClock()
        kw.setdefault("twins", fastpath.selected())
        self.conn = BookieConnection(bookie, self.reactor, protocol=protocol, **kw)
        self.accepted = 0

    @property
    def attempts(self) -> int:
        return len(self.reactor.tcpClients)

    def accept(self) -> tuple[BookieClientProtocol, StringTransport]:
        """Complete the newest recorded connectTCP with a StringTransport."""
        assert self.attempts > self.accepted, "no connection attempt to accept"
        _host, _port, factory, _timeout, _bind = self.reactor.tcpClients[-1]
        self.accepted = self.attempts
        proto = factory.buildProtocol(None)
        assert proto is not None
        transport = StringTransport()
        proto.makeConnection(transport)
        return proto, transport

    def refuse(self) -> None:
        """Fail the newest connection attempt."""
        _host, _port, factory, _timeout, _bind = self.reactor.tcpClients[-1]
        self.accepted = self.attempts
        factory.clientConnectionFailed(self.reactor.connectors[-1], Failure(ConnectionRefusedError()))

    def connected(self) -> tuple[BookieClientProtocol, StringTransport]:
        """Get the connection up: a request starts it, the reply is never sent."""
        d = self.conn.bookie_info() if self.conn.use_v3 else self.conn.read(99, 99)
        proto, transport = self.accept()
        # Answer that first request so the tests start from a clean slate.
        payload = transport.value()[4:]
        if self.conn.use_v3:
            req = v3.parse_request(payload)
            proto.dataReceived(frame(v3.serialize(v3.get_bookie_info_response(req, RC.EOK, 1, 1))))
        else:
            proto.dataReceived(frame(v2.ReadResponse(2, RC.ENOENTRY, 99, 99).encode()))
        d.addErrback(lambda f: None)
        transport.clear()
        return proto, transport

    def delayed(self) -> list:
        return self.reactor.getDelayedCalls()

    def delayed_but_close_grace(self) -> list:
        """The delayed calls but the abort of a closing connection after its grace (client_protocol.let_go)."""
        return [c for c in self.delayed() if getattr(c.func, "__name__", "") != "_abort"]


def lose(proto: BookieClientProtocol, why=ConnectionLost) -> None:
    proto.connectionLost(Failure(why()))


def sent_frames(transport: StringTransport) -> list[bytes]:
    """Split what the client wrote into whole frames (prefix included)."""
    data = transport.value()
    out = []
    while data:
        (n,) = struct.unpack(">i", data[:4])
        out.append(data[: 4 + n])
        data = data[4 + n :]
    return out


def v3_requests(transport: StringTransport):
    return [v3.parse_request(f[4:]) for f in sent_frames(transport)]


def v2_requests(transport: StringTransport):
    return [v2.decode_request(f[4:]) for f in sent_frames(transport)]


def v3_reply(req, status=RC.EOK, **kw) -> bytes:
    op = req.header.operation
    if op == OperationType.ADD_ENTRY:
        msg = v3.add_response(req, status)
    elif op == OperationType.READ_ENTRY:
        msg = v3.read_response(req, status, **kw)
    elif op == OperationType.READ_LAC:
        msg = v3.read_lac_response(req, status, **kw)
    elif op == OperationType.GET_BOOKIE_INFO:
        msg = v3.get_bookie_info_response(req, status, **kw)
    else:
        msg = v3.status_response(req, status)
    return frame(v3.serialize(msg))
