"""BookieConnection with in-memory transports: reads completed without Deferreds (the callback read
path) and START_TLS.  The harness and frames are tests/support/connection.py's."""

from __future__ import annotations

import struct

import pytest
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure

from bkctl.wire.client import errors as E
from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.framing import FrameDecoder, frame
from bkctl.wire.codecs.protocol import RC, OperationType
from tests.support.connection import (
    BOOKIE,
    Harness,
    entry,
    lose,
    sent_frames,
    v2_requests,
    v3_reply,
    v3_requests,
)
from tests.support.deferreds import assertNoResult, failureResultOf, successResultOf

# ------------------------------------------------------- reads without Deferreds


class Outcomes:
    """An ``on_done`` that records ``(ctx, slot, bookie_id, result)``."""

    def __init__(self):
        self.seen = []

    def __call__(self, ctx, slot, bookie_id, result):
        self.seen.append((ctx, slot, bookie_id, result))


@pytest.mark.parametrize("protocol", ["v3", "v2"])
def test_read_with_callback_reports_bodies_and_errors(protocol):
    h = Harness(protocol)
    proto, transport = h.connected()
    done = Outcomes()
    h.conn.read_with_callback(1, 2, done, "a", 0)
    h.conn.read_with_callback(1, 3, done, "b", 1)
    h.conn.read_with_callback(1, 4, done, "c", 2)
    if protocol == "v3":
        r2, r3, r4 = v3_requests(transport)
        assert [r.readRequest.entryId for r in (r2, r3, r4)] == [2, 3, 4]
        assert not any(v3.is_fence_read(r) or r.readRequest.HasField("previousLAC") for r in (r2, r3, r4))
        proto.dataReceived(v3_reply(r3, RC.ENOENTRY) + v3_reply(r2, body=b"two", max_lac=9) + v3_reply(r4, body=b""))
    else:
        reqs = v2_requests(transport)
        assert [(r.ledger_id, r.entry_id, r.flags, r.master_key) for r in reqs] == [
            (1, 2, 0, None),
            (1, 3, 0, None),
            (1, 4, 0, None),
        ]
        proto.dataReceived(
            frame(v2.ReadResponse(2, RC.ENOENTRY, 1, 3).encode())
            + frame(v2.ReadResponse(2, RC.EOK, 1, 2, b"two").encode())
            + frame(v2.ReadResponse(2, RC.EOK, 1, 4, b"").encode())
        )
    (c1, s1, b1, err), (c2, s2, b2, body), (c3, s3, b3, empty) = done.seen
    assert (c1, s1, b1) == ("b", 1, BOOKIE) and isinstance(err, E.NoSuchEntry)
    assert "READ ledger 1 entry 3" in str(err) and err.bookie == BOOKIE
    assert (c2, s2, b2, body) == ("a", 0, BOOKIE, b"two")
    assert (c3, s3, b3, empty) == ("c", 2, BOOKIE, b"")
    assert h.conn.outstanding == 0 and h.delayed() == []


@pytest.mark.parametrize("protocol", ["v3", "v2"])
def test_read_with_callback_timeout_loss_and_refusal(protocol):
    h = Harness(protocol, read_timeout=2.0)
    proto, transport = h.connected()
    done = Outcomes()
    h.conn.read_with_callback(1, 2, done, 0, 0)
    h.reactor.advance(2.0)
    ((_, _, _, err),) = done.seen
    assert isinstance(err, E.BookieTimeout) and "READ ledger 1 entry 2" in str(err)
    h.conn.read_with_callback(1, 3, done, 1, 0)
    lose(proto)
    assert isinstance(done.seen[1][3], E.BookieUnavailable)
    h.conn.read_with_callback(1, 4, done, 2, 0)  # inside the backoff: refused at once
    assert len(done.seen) == 3 and isinstance(done.seen[2][3], E.BookieUnavailable)
    h.conn.close()
    h.conn.read_with_callback(1, 5, done, 3, 0)
    assert len(done.seen) == 4 and isinstance(done.seen[3][3], E.BookieUnavailable)


def test_a_late_answer_to_a_timed_out_read_goes_to_nobody():
    h = Harness(read_timeout=1.0)
    proto, transport = h.connected()
    done = Outcomes()
    h.conn.read_with_callback(1, 2, done, 0, 0)
    (req,) = v3_requests(transport)
    h.reactor.advance(1.0)
    assert len(done.seen) == 1
    proto.dataReceived(v3_reply(req, body=b"late"))
    assert len(done.seen) == 1 and h.conn.connected


def test_v3_read_answers_with_other_ids_are_not_taken_for_the_request():
    """An answer with the request's txnId but another entry's ids is parsed
    and matched as before (by txnId and operation): the caller gets its body."""
    h = Harness()
    proto, transport = h.connected()
    d = h.conn.read(1, 2)
    (req,) = v3_requests(transport)
    other = v3.read_request(req.header.txnId, 1, 7)
    proto.dataReceived(frame(v3.serialize(v3.read_response(other, RC.EOK, b"seven"))))
    assert successResultOf(d) == b"seven"


def test_requests_issued_while_answers_are_handed_out_go_out_in_one_write_in_order():
    h = Harness()
    proto, transport = h.connected()
    writes = []
    transport.write = writes.append
    transport.writeSequence = lambda seq: writes.append(b"".join(seq))
    done = Outcomes()

    def more(ctx, slot, bookie_id, result):
        done(ctx, slot, bookie_id, result)
        h.conn.read_with_callback(2, ctx, done, ctx + 100, 0)  # two per answer
        h.conn.read_with_callback(3, ctx, done, ctx + 200, 0)

    h.conn.read_with_callback(1, 1, more, 1, 0)
    h.conn.read_with_callback(1, 2, more, 2, 0)
    assert len(writes) == 2  # issued outside an answer: written at once
    reqs = [v3.parse_request(w[4:]) for w in writes]
    writes.clear()
    proto.dataReceived(v3_reply(reqs[0], body=b"a") + v3_reply(reqs[1], body=b"b"))
    assert len(writes) == 1
    frames = FrameDecoder().feed(writes[0])
    assert [(r.readRequest.ledgerId, r.readRequest.entryId) for r in map(v3.parse_request, frames)] == [
        (2, 1),
        (3, 1),
        (2, 2),
        (3, 2),
    ]
    assert h.conn.outstanding == 4


def test_frames_held_for_a_connection_closed_meanwhile_are_dropped():
    h = Harness()
    proto, transport = h.connected()
    done = Outcomes()

    def issue_then_close(ctx, slot, bookie_id, result):
        h.conn.read_with_callback(2, 2, done, "issued", 0)
        h.conn.close()

    h.conn.read_with_callback(1, 1, issue_then_close, 1, 0)
    h.conn.read_with_callback(1, 2, done, 2, 0)
    r1, r2 = v3_requests(transport)
    transport.clear()
    proto.dataReceived(v3_reply(r1, body=b"a") + v3_reply(r2, body=b"b"))
    assert transport.value() == b""
    assert [(ctx, type(r)) for ctx, _, _, r in done.seen] == [(2, E.BookieUnavailable), ("issued", E.BookieUnavailable)]


# ------------------------------------------------------------------ START_TLS


class _FakeTLS:
    def client_context(self):
        return "client-context"


class _TLSTransport(StringTransport):
    def startTLS(self, context):
        self.tls_context = context
        self.sent_in_clear = self.value()


def _tls_connected(h: Harness):
    """Accept the connection with a transport that can start TLS; the START_TLS request it got."""
    _host, _port, factory, _timeout, _bind = h.reactor.tcpClients[-1]
    proto = factory.buildProtocol(None)
    transport = _TLSTransport()
    proto.makeConnection(transport)
    [start] = sent_frames(transport)
    return proto, transport, v3.parse_request(start[4:])


def test_start_tls_comes_first_then_the_handshake_then_the_queued_requests():
    h = Harness(tls=_FakeTLS())
    d = h.conn.read_lac(7)
    proto, transport, req = _tls_connected(h)
    assert req.header.operation == OperationType.START_TLS and req.HasField("startTLSRequest")
    transport.clear()
    proto.dataReceived(frame(v3.serialize(v3.start_tls_response(req, RC.EOK))))
    assert transport.tls_context == "client-context" and transport.sent_in_clear == b""
    assert transport.value() == b""  # nothing goes out before the handshake is done
    assertNoResult(d)
    proto.handshakeCompleted()
    [lac] = sent_frames(transport)
    assert v3.parse_request(lac[4:]).header.operation == OperationType.READ_LAC


def test_a_bookie_without_tls_fails_the_requests_with_why():
    h = Harness(tls=_FakeTLS())
    d = h.conn.read_lac(7)
    proto, transport = h.accept()
    req = v3.parse_request(sent_frames(transport)[0][4:])
    proto.dataReceived(frame(v3.serialize(v3.start_tls_response(req, RC.EBADREQ))))
    err = failureResultOf(d, E.BookieUnavailable).value
    assert "does not do TLS" in str(err) and "EBADREQ" in str(err)
    assert transport.disconnecting


def test_a_failed_handshake_is_named():
    h = Harness(tls=_FakeTLS())
    d = h.conn.read_lac(7)
    proto, transport, req = _tls_connected(h)
    proto.dataReceived(frame(v3.serialize(v3.start_tls_response(req, RC.EOK))))
    proto.connectionLost(Failure(Exception("[('SSL routines', '', 'certificate verify failed')]")))
    assert "certificate verify failed" in str(failureResultOf(d, E.BookieUnavailable).value)


def test_a_v2_client_starts_tls_with_a_v3_exchange_then_speaks_v2():
    h = Harness(protocol="v2", tls=_FakeTLS())
    d = h.conn.read(7, 0)
    proto, transport, req = _tls_connected(h)  # the START_TLS request is v3 even here
    assert req.header.operation == OperationType.START_TLS
    transport.clear()
    proto.dataReceived(frame(v3.serialize(v3.start_tls_response(req, RC.EOK))))
    assert transport.tls_context == "client-context"
    proto.handshakeCompleted()
    [read] = sent_frames(transport)
    got = v2.decode_request(read[4:])
    assert (got.ledger_id, got.entry_id) == (7, 0)
    proto.dataReceived(frame(v2.ReadResponse(2, RC.EOK, 7, 0, entry(7, 0)).encode()))
    assert bytes(successResultOf(d)).startswith(struct.pack(">qq", 7, 0))
