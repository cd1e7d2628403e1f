"""BookieConnection / BookieClientProtocol with in-memory transports.

No sockets: MemoryReactorClock records connectTCP (and is the clock); each
test builds the protocol from the recorded factory and attaches a
StringTransport. Requests are compared byte for byte with the golden frames
captured from a Java 4.17 client, and the captured responses are fed back.
"""

from __future__ import annotations

import itertools
import struct

import pytest
from twisted.internet import defer
from twisted.internet.error import ConnectionDone, ConnectionRefusedError
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure

from bkctl.wire import fastpath
from bkctl.wire.client import errors as E
from bkctl.wire.client.connection import (
    DEFAULT_ADD_TIMEOUT,
    DEFAULT_BOOKIE_INFO_TIMEOUT,
    DEFAULT_READ_TIMEOUT,
    BookieConnection,
)
from bkctl.wire.client.dialer import DEFAULT_CONNECT_TIMEOUT, default_resolve
from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.add_frames import EncodedAdd
from bkctl.wire.codecs.framing import frame
from bkctl.wire.codecs.protocol import RC, Flag, OperationType, rc_from_v3
from bkctl.wire.errors import BKError, Conflict, NotFound, Unreachable
from tests.support.connection import (
    BOOKIE,
    EMPTY_KEY,
    KEY,
    Harness,
    entry,
    lose,
    sent_frames,
    v2_requests,
    v3_reply,
    v3_requests,
)
from tests.support.deferreds import assertNoResult, failureResultOf, successResultOf
from tests.support.golden import frames

# ------------------------------------------------------------ golden frames

V3_REQUESTS = [f for f in frames() if f["proto"] == "v3" and f["kind"] == "request"]
V2_REQUESTS = [f for f in frames() if f["proto"] == "v2" and f["kind"] == "request"]


def fid(f) -> str:
    return f"{f['flow']}#{f['index']}-{f['type']}"


def reply_conn(f) -> str:
    return f["conn"].replace("->", "<-")


def v3_response_for(f):
    for r in frames(f["flow"]):
        if r["kind"] == "response" and r["conn"] == reply_conn(f) and r["txnId"] == f["txnId"] and r["op"] == f["op"]:
            return r
    return None


def v2_response_for(f):
    """The first later response on the same connection with the request's key."""
    req = v2.decode_request(f["raw"][4:])
    for r in frames(f["flow"]):
        if r["index"] <= f["index"] or r["kind"] != "response" or r["conn"] != reply_conn(f):
            continue
        resp = v2.decode_response(r["raw"][4:])
        if isinstance(req, v2.BatchReadRequest):
            if isinstance(resp, v2.BatchReadResponse) and resp.request_id == req.request_id:
                return r
        elif type(resp).__name__[:3] == type(req).__name__[:3] and (resp.ledger_id, resp.entry_id) == (
            req.ledger_id,
            req.entry_id,
        ):
            return r
    return None


def issue_v3(conn: BookieConnection, req) -> defer.Deferred:
    """Make the call a Java client made to produce ``req``."""
    op = req.header.operation
    high = v3.is_high_priority(req)
    if op == OperationType.ADD_ENTRY:
        a = req.addRequest
        return conn.add(
            a.ledgerId,
            a.entryId,
            a.masterKey,
            a.body,
            recovery=v3.is_recovery_add(req),
            high_priority=high,
            deferred_sync=v3.is_deferred_sync(req),
        )
    if op == OperationType.READ_ENTRY:
        r = req.readRequest
        if r.HasField("previousLAC"):
            assert r.entryId == -1 and not high
            return conn.read_long_poll(r.ledgerId, r.previousLAC, r.timeOut, piggyback=v3.is_piggyback_read(req))
        fence = r.masterKey if v3.is_fence_read(req) else None
        return conn.read(r.ledgerId, r.entryId, fence_master_key=fence, high_priority=high)
    if op == OperationType.READ_LAC:
        return conn.read_lac(req.readLacRequest.ledgerId)
    if op == OperationType.WRITE_LAC:
        w = req.writeLacRequest
        return conn.write_lac(w.ledgerId, w.lac, w.masterKey, w.body)
    if op == OperationType.FORCE_LEDGER:
        return conn.force_ledger(req.forceLedgerRequest.ledgerId)
    raise AssertionError(f"no client call for operation {op}")


def expected_v3(req, resp):
    """(result, error class) the connection should produce for ``resp``."""
    status = rc_from_v3(resp.status)
    if status != RC.EOK:
        return None, E.ERROR_CLASSES[status]
    op = req.header.operation
    if op == OperationType.READ_ENTRY:
        r = resp.readResponse
        if req.readRequest.HasField("previousLAC"):
            if r.HasField("body"):
                return (r.maxLAC, r.entryId, r.body), None
            return (r.maxLAC, None, None), None
        return r.body, None
    if op == OperationType.READ_LAC:
        r = resp.readLacResponse
        return (
            r.lacBody if r.HasField("lacBody") else None,
            r.lastEntryBody if r.HasField("lastEntryBody") else None,
        ), None
    return None, None


def test_vectors_cover_every_operation():
    ops = {f["op"] for f in V3_REQUESTS}
    assert {"ADD_ENTRY", "READ_ENTRY", "READ_LAC", "WRITE_LAC", "FORCE_LEDGER"} <= ops
    assert {"ADD", "READ", "BATCH_READ"} <= {f["op"] for f in V2_REQUESTS}


@pytest.mark.parametrize("f", V3_REQUESTS, ids=fid)
def test_v3_request_bytes_match_java_and_response_is_decoded(f):
    req = v3.parse_request(f["raw"][4:])
    h = Harness("v3", txn_ids=iter([f["txnId"]]))
    d = issue_v3(h.conn, req)
    assertNoResult(d)
    _proto, transport = h.accept()
    assert transport.value() == f["raw"]

    r = v3_response_for(f)
    if r is None:
        return
    resp = v3.parse_response(r["raw"][4:])
    _proto.dataReceived(r["raw"])
    result, error = expected_v3(req, resp)
    if error is None:
        assert successResultOf(d) == result
    else:
        exc = failureResultOf(d, error).value
        assert exc.rc == rc_from_v3(resp.status) and exc.bookie == BOOKIE
    assert h.conn.outstanding == 0


def test_v3_golden_add_ledger0_entry0_txn2():
    f = next(f for f in frames("v3-flow") if f["index"] == 0)
    assert (f["op"], f["ledgerId"], f["entryId"], f["txnId"]) == ("ADD_ENTRY", 0, 0, 2)
    body = v3.parse_request(f["raw"][4:]).addRequest.body
    h = Harness(txn_ids=itertools.count(2))
    d = h.conn.add(0, 0, KEY, body)
    proto, transport = h.accept()
    assert transport.value() == f["raw"]
    reply = next(r for r in frames("v3-flow") if r["index"] == 2)
    proto.dataReceived(reply["raw"])
    assert successResultOf(d) is None


@pytest.mark.parametrize("f", V2_REQUESTS, ids=fid)
def test_v2_request_bytes_match_java_and_response_is_decoded(f):
    req = v2.decode_request(f["raw"][4:])
    if isinstance(req, v2.BatchReadRequest):
        h = Harness("v2", txn_ids=iter([req.request_id]))
        d = h.conn.batch_read(
            req.ledger_id, req.start_entry_id, req.max_count, req.max_size, fence_master_key=req.master_key
        )
    elif isinstance(req, v2.AddRequest):
        h = Harness("v2")
        d = h.conn.add(
            req.ledger_id,
            req.entry_id,
            req.master_key,
            req.body,
            recovery=req.is_recovery,
            high_priority=req.is_high_priority,
        )
    else:
        h = Harness("v2")
        d = h.conn.read(
            req.ledger_id,
            req.entry_id,
            fence_master_key=req.master_key,
            high_priority=bool(req.flags & Flag.HIGH_PRIORITY),
        )
    proto, transport = h.accept()
    assert transport.value() == f["raw"]

    r = v2_response_for(f)
    if r is None:
        return
    resp = v2.decode_response(r["raw"][4:])
    proto.dataReceived(r["raw"])
    if resp.rc != RC.EOK:
        exc = failureResultOf(d, E.ERROR_CLASSES[RC(resp.rc)]).value
        assert exc.rc == resp.rc
    elif isinstance(resp, v2.BatchReadResponse):
        assert successResultOf(d) == list(resp.entries) and len(resp.entries) > 1
        assert h.conn.batch_read_supported is True
    elif isinstance(resp, v2.ReadResponse):
        assert successResultOf(d) == resp.body
    else:
        assert successResultOf(d) is None


def test_spec_worked_examples():
    # v3 GET_BOOKIE_INFO, txnId 1, requested 3 (BookkeeperProtocol.proto's GetBookieInfoRequest).
    h = Harness()
    d = h.conn.bookie_info()
    proto, transport = h.accept()
    assert transport.value() == bytes.fromhex("0000000d0a06080310081801ca06020803")
    req = v3_requests(transport)[0]
    proto.dataReceived(v3_reply(req, total=1000, free=300))
    assert successResultOf(d) == (1000, 300)

    # v2 READ ledger 1 entry 0 and a fencing LAC read.
    h = Harness("v2")
    d1 = h.conn.read(1, 0)
    d2 = h.conn.read(1, -1, fence_master_key=EMPTY_KEY, high_priority=True)
    _proto, transport = h.accept()
    assert transport.value() == bytes.fromhex(
        "00000014020200000000000000000001"
        "0000000000000000"
        "0000002802020005"
        "0000000000000001"
        "ffffffffffffffff"
        "850bf1071c5e3d8c24235676f8816ae0cbe2f14f"
    )
    assertNoResult(d1)
    assertNoResult(d2)

    # v3 ADD response of section 8 answers txnId 7.
    h = Harness(txn_ids=itertools.count(7))
    d = h.conn.add(1, 0, EMPTY_KEY, entry(1, 0))
    proto, _t = h.accept()
    proto.dataReceived(bytes.fromhex("000000130a060803100218071000aa0606080010011800"))
    assert successResultOf(d) is None


def test_bookie_info_partial_fields():
    h = Harness()
    proto, transport = h.connected()
    d = h.conn.bookie_info(requested=2)
    req = v3_requests(transport)[0]
    assert req.getBookieInfoRequest.requested == 2
    proto.dataReceived(v3_reply(req, free=42))
    assert successResultOf(d) == (None, 42)


def test_entry_availability():
    h = Harness()
    proto, transport = h.connected()
    d = h.conn.entry_availability(7)
    req = v3_requests(transport)[0]
    assert req.getListOfEntriesOfLedgerRequest.ledgerId == 7
    blob = b"\0" * 64
    proto.dataReceived(frame(v3.serialize(v3.get_list_of_entries_response(req, RC.EOK, blob))))
    assert successResultOf(d) == blob


def test_long_poll_with_piggyback_entry():
    h = Harness()
    proto, transport = h.connected()
    d = h.conn.read_long_poll(5, 3, 1000)
    req = v3_requests(transport)[0]
    assert v3.is_piggyback_read(req) and req.readRequest.previousLAC == 3
    assert req.readRequest.entryId == -1 and req.readRequest.timeOut == 1000
    proto.dataReceived(v3_reply(req, body=b"entry-4", max_lac=4, entry_id=4))
    assert successResultOf(d) == (4, 4, b"entry-4")
    # Without piggyback no flag is sent.
    h.conn.read_long_poll(5, 4, 10, piggyback=False)
    assert not v3_requests(transport)[1].readRequest.HasField("flag")


def test_read_lac_empty_fields_are_none():
    h = Harness()
    proto, transport = h.connected()
    d = h.conn.read_lac(3)
    req = v3_requests(transport)[0]
    proto.dataReceived(v3_reply(req, last_entry_body=b"e"))
    assert successResultOf(d) == (None, b"e")


# ------------------------------------------------------------- error mapping


@pytest.mark.parametrize("rc", [rc for rc in RC if rc != RC.EOK], ids=lambda rc: rc.name)
def test_v3_status_maps_to_error(rc):
    h = Harness()
    proto, transport = h.connected()
    d = h.conn.add(1, 2, KEY, entry(1, 2))
    req = v3_requests(transport)[0]
    proto.dataReceived(v3_reply(req, rc.v3))
    exc = failureResultOf(d, E.ERROR_CLASSES[rc]).value
    assert exc.rc is rc and exc.bookie == BOOKIE and "ADD ledger 1 entry 2" in str(exc)


@pytest.mark.parametrize("rc", [rc for rc in RC if rc != RC.EOK], ids=lambda rc: rc.name)
def test_v2_rc_maps_to_error(rc):
    h = Harness("v2")
    proto, _t = h.connected()
    d = h.conn.read(1, 2)
    proto.dataReceived(frame(v2.ReadResponse(2, int(rc), 1, 2).encode()))
    exc = failureResultOf(d, E.ERROR_CLASSES[rc]).value
    assert exc.rc is rc


def test_v3_error_without_inner_message():
    """A Response{header, status=EBADREQ} (unknown operation) has no inner message."""
    h = Harness()
    proto, transport = h.connected()
    d = h.conn.read(1, 2)
    req = v3_requests(transport)[0]
    proto.dataReceived(frame(v3.serialize(v3.error_response(req, RC.EBADREQ))))
    assert failureResultOf(d, E.BadRequest).value.rc is RC.EBADREQ


def test_v3_eok_without_inner_message_fails_only_that_request():
    h = Harness()
    proto, transport = h.connected()
    d1 = h.conn.read(1, 2)
    d2 = h.conn.read(1, 3)
    r1, r2 = v3_requests(transport)
    proto.dataReceived(frame(v3.serialize(v3.error_response(r1, RC.EOK))))
    failureResultOf(d1, E.MalformedResponse)
    assert h.conn.connected
    proto.dataReceived(v3_reply(r2, body=b"b"))
    assert successResultOf(d2) == b"b"


def test_a_callback_requests_error_answers_reach_on_done_as_exceptions():
    """The ledger layer's requests (no Deferred) get their answer's error as the exception itself,
    a malformed answer as MalformedResponse, and leave no deadline behind, as Deferred ones do."""
    h = Harness()
    proto, transport = h.connected()
    got: list = []
    h.conn.read_with_callback(1, 2, lambda *a: got.append(a), "read", 0)
    h.conn.add_run([EncodedAdd(1, 3, KEY, entry(1, 3), False, False, False)], [1], lambda *a: got.append(a))
    read_req, add_req = v3_requests(transport)
    proto.dataReceived(frame(v3.serialize(v3.error_response(read_req, RC.EOK))))  # EOK without readResponse
    proto.dataReceived(v3_reply(add_req, RC.EFENCED.v3))
    (read_ctx, read_slot, bookie, malformed), (add, add_slot, _b, fenced) = got
    assert (read_ctx, read_slot, bookie) == ("read", 0, BOOKIE) and type(malformed) is E.MalformedResponse
    assert "READ ledger 1 entry 2" in str(malformed) and malformed.bookie == BOOKIE
    assert (add.entry_id, add_slot) == (3, 1) and type(fenced) is E.ERROR_CLASSES[RC.EFENCED]
    assert fenced.rc is RC.EFENCED and "ADD ledger 1 entry 3" in str(fenced)
    assert h.conn.connected and h.conn.outstanding == 0 and h.delayed() == []


def test_error_classes_and_categories():
    assert issubclass(E.NoSuchLedgerOnBookie, NotFound) and issubclass(E.NoSuchEntry, NotFound)
    assert issubclass(E.LedgerFencedError, Conflict)
    assert issubclass(E.BookieUnavailable, Unreachable) and issubclass(E.BookieTimeout, Unreachable)
    assert issubclass(E.BatchReadUnsupported, E.BookieUnavailable)
    assert issubclass(E.MalformedResponse, E.BookieUnavailable)
    for cls in E.ERROR_CLASSES.values():
        assert issubclass(cls, E.BookieError) and issubclass(cls, BKError)
    exc = E.error_for(RC.EUA, "b:1", "ADD ledger 1 entry 0")
    assert isinstance(exc, E.Unauthorized) and exc.rc is RC.EUA and exc.bookie == "b:1"
    assert "EUA" in str(exc) and "b:1" in str(exc)
    assert isinstance(E.error_for(104, "b:1", "x"), E.LedgerFencedError)
    unknown = E.error_for(99, "b:1", "x")
    assert type(unknown) is E.BookieError and unknown.rc == 99
    with pytest.raises(ValueError):
        E.error_for(RC.EOK, "b:1", "x")
    assert E.TooManyRequests("x").rc is RC.ETOOMANYREQUESTS
    assert E.BookieTimeout("x").rc is None


# ---------------------------------------------------------------- matching


def test_v2_duplicate_keys_are_answered_fifo():
    h = Harness("v2")
    proto, transport = h.connected()
    d1 = h.conn.read(3, -1)
    d2 = h.conn.read(3, -1)
    d3 = h.conn.read(3, 0)
    assert [(r.ledger_id, r.entry_id) for r in v2_requests(transport)] == [(3, -1), (3, -1), (3, 0)]
    proto.dataReceived(frame(v2.ReadResponse(2, 0, 3, 0, b"zero").encode()))
    proto.dataReceived(frame(v2.ReadResponse(2, 0, 3, -1, b"first").encode()))
    assert successResultOf(d3) == b"zero"
    assert successResultOf(d1) == b"first"
    assertNoResult(d2)
    proto.dataReceived(frame(v2.ReadResponse(2, 0, 3, -1, b"second").encode()))
    assert successResultOf(d2) == b"second"


def test_v2_add_and_read_with_same_ids_do_not_mix():
    h = Harness("v2")
    proto, _t = h.connected()
    dr = h.conn.read(3, 1)
    da = h.conn.add(3, 1, KEY, entry(3, 1))
    proto.dataReceived(frame(v2.AddResponse(2, RC.EFENCED, 3, 1).encode()))
    failureResultOf(da, E.LedgerFencedError)
    assertNoResult(dr)
    proto.dataReceived(frame(v2.ReadResponse(2, 0, 3, 1, b"e").encode()))
    assert successResultOf(dr) == b"e"


def test_v2_batch_reads_match_by_request_id():
    h = Harness("v2")
    proto, transport = h.connected()
    d1 = h.conn.batch_read(5, 0, 2, 1024)
    d2 = h.conn.batch_read(5, 0, 2, 1024)
    b1, b2 = v2_requests(transport)
    assert b1.request_id != b2.request_id
    proto.dataReceived(frame(v2.BatchReadResponse(2, 0, 5, 0, b2.request_id, (b"c", b"d")).encode()))
    assert successResultOf(d2) == [b"c", b"d"]
    assertNoResult(d1)
    proto.dataReceived(frame(v2.BatchReadResponse(2, RC.ENOENTRY, 5, 0, b1.request_id).encode()))
    failureResultOf(d1, E.NoSuchEntry)


def test_v3_matches_txn_and_operation():
    h = Harness()
    proto, transport = h.connected()
    d1 = h.conn.read(1, 1)
    d2 = h.conn.add(1, 2, KEY, entry(1, 2))
    r1, r2 = v3_requests(transport)
    assert r1.header.txnId != r2.header.txnId
    # Right txnId, wrong operation: not an answer to the read.
    wrong = v3.parse_request(v3.serialize(r1))
    wrong.header.operation = OperationType.ADD_ENTRY
    proto.dataReceived(frame(v3.serialize(v3.add_response(wrong, RC.EOK))))
    assertNoResult(d1)
    proto.dataReceived(v3_reply(r2) + v3_reply(r1, body=b"one"))
    assert successResultOf(d2) is None
    assert successResultOf(d1) == b"one"


def test_responses_split_across_chunks_and_many_per_chunk():
    h = Harness()
    proto, transport = h.connected()
    ds = [h.conn.read(1, i) for i in range(5)]
    reqs = v3_requests(transport)
    stream = b"".join(v3_reply(r, body=b"body-%d" % r.readRequest.entryId) for r in reversed(reqs))
    for i in range(0, 7):
        proto.dataReceived(stream[i : i + 1])  # the first frame one byte at a time...
    proto.dataReceived(stream[7:40])
    proto.dataReceived(stream[40:])  # ...and the rest in one chunk
    assert [successResultOf(d) for d in ds] == [b"body-%d" % i for i in range(5)]


def test_v2_responses_one_byte_at_a_time():
    h = Harness("v2")
    proto, _t = h.connected()
    ds = [h.conn.read(2, i) for i in range(3)]
    stream = b"".join(frame(v2.ReadResponse(2, 0, 2, i, b"e%d" % i).encode()) for i in range(3))
    for i in range(len(stream)):
        proto.dataReceived(stream[i : i + 1])
    assert [successResultOf(d) for d in ds] == [b"e0", b"e1", b"e2"]


def test_unsolicited_responses_are_ignored():
    h = Harness("v2")
    proto, _t = h.connected()
    proto.dataReceived(frame(v2.ReadResponse(2, 0, 8, 8, b"?").encode()))
    proto.dataReceived(frame(v2.AuthResponse(2, b"\x0a\x00\x12\x00").encode()))
    assert h.conn.connected


def test_requests_queued_while_connecting_go_out_together():
    h = Harness()
    d1 = h.conn.add(1, 0, KEY, entry(1, 0))
    d2 = h.conn.read(1, 0)
    assert h.attempts == 1 and h.conn.state == "connecting" and h.conn.queued == 2
    h.conn.read(1, 1)
    assert h.attempts == 1  # one connection per bookie
    proto, transport = h.accept()
    reqs = v3_requests(transport)
    assert [r.header.operation for r in reqs] == [2, 1, 1]
    assert [r.header.txnId for r in reqs] == [1, 2, 3]
    assert h.conn.outstanding == 3 and h.conn.queued == 0
    assertNoResult(d1)
    assertNoResult(d2)


def test_connect_uses_resolver_and_java_connect_timeout():
    h = Harness()
    h.conn.read(1, 1)
    host, port, _f, timeout, _b = h.reactor.tcpClients[0]
    assert (host, port, timeout) == ("bk1.example", 3181, DEFAULT_CONNECT_TIMEOUT) == ("bk1.example", 3181, 10.0)

    r = MemoryReactorClock()
    conn = BookieConnection("bookie-7", r, lambda bid: ("10.1.2.3", 4181), twins=fastpath.selected())
    conn.read(1, 1)
    assert r.tcpClients[0][:2] == ("10.1.2.3", 4181)
    assert default_resolve("[::1]:3181") == ("::1", 3181)


def test_connect_dials_before_any_request_once():
    r = MemoryReactorClock()
    conn = BookieConnection("bookie-7", r, lambda bid: ("10.1.2.3", 4181), twins=fastpath.selected())
    conn.connect()
    assert r.tcpClients[0][:2] == ("10.1.2.3", 4181) and conn.state == "connecting"
    conn.connect()
    d = conn.read(1, 1)  # the request waits for the attempt under way: no second one
    assert len(r.tcpClients) == 1
    conn.close()
    failureResultOf(d, E.BookieUnavailable)
    conn.connect()
    assert len(r.tcpClients) == 1 and conn.state == "closed"


def test_resolver_may_return_a_deferred():
    r = MemoryReactorClock()
    pending = defer.Deferred()
    conn = BookieConnection("bookie-7", r, lambda bid: pending, twins=fastpath.selected())
    d = conn.read(1, 1)
    assert r.tcpClients == [] and conn.state == "connecting"
    pending.callback(("h", 1))
    assert r.tcpClients[0][:2] == ("h", 1)
    assertNoResult(d)
    conn.close()
    failureResultOf(d, E.BookieUnavailable)  # the read outstanding when its connection closed


def test_resolver_failure_fails_requests():
    r = MemoryReactorClock()
    conn = BookieConnection("not-an-address", r, twins=fastpath.selected())
    exc = failureResultOf(conn.read(1, 1), E.BookieUnavailable).value
    assert "not-an-address" in str(exc)
    assert r.tcpClients == [] and r.getDelayedCalls() == []
    assert conn.state == "backoff"


# ---------------------------------------------------------------- timeouts


def test_java_default_timeouts():
    conn = BookieConnection(BOOKIE, MemoryReactorClock(), twins=fastpath.selected())
    assert (conn.add_timeout, conn.read_timeout) == (DEFAULT_ADD_TIMEOUT, DEFAULT_READ_TIMEOUT) == (5.0, 5.0)
    assert conn.bookie_info_timeout == DEFAULT_BOOKIE_INFO_TIMEOUT == 5.0


def test_add_and_read_timeouts_are_separate():
    h = Harness(add_timeout=1.0, read_timeout=3.0)
    proto, transport = h.connected()
    da = h.conn.add(1, 0, KEY, entry(1, 0))
    dr = h.conn.read(1, 0)
    dw = h.conn.write_lac(1, 0, KEY, b"lac")
    df = h.conn.force_ledger(1)
    rl = h.conn.read_lac(1)
    reqs = v3_requests(transport)
    h.reactor.advance(0.999)
    for d in (da, dr, dw, df, rl):
        assertNoResult(d)
    h.reactor.advance(0.001)
    for d in (da, dw, df):
        exc = failureResultOf(d, E.BookieTimeout).value
        assert exc.bookie == BOOKIE and "1s" in str(exc)
    assertNoResult(dr)
    h.reactor.advance(2.0)
    failureResultOf(dr, E.BookieTimeout)
    failureResultOf(rl, E.BookieTimeout)
    assert h.delayed() == [] and h.conn.outstanding == 0
    # Late answers are dropped, the connection stays usable.
    proto.dataReceived(b"".join(v3_reply(r, body=b"late") if r.header.operation == 1 else v3_reply(r) for r in reqs))
    assert h.conn.connected
    d = h.conn.read(1, 0)
    proto.dataReceived(v3_reply(v3_requests(transport)[-1], body=b"fresh"))
    assert successResultOf(d) == b"fresh"


def test_long_poll_timeout_includes_the_poll_wait():
    h = Harness(read_timeout=2.0)
    h.connected()
    d = h.conn.read_long_poll(1, 0, 5000)
    h.reactor.advance(6.9)
    assertNoResult(d)
    h.reactor.advance(0.1)
    failureResultOf(d, E.BookieTimeout)


def test_v2_timeout_then_late_answer_goes_to_nobody():
    h = Harness("v2", read_timeout=1.0)
    proto, _t = h.connected()
    d1 = h.conn.read(3, 0)
    h.reactor.advance(1.0)
    failureResultOf(d1, E.BookieTimeout)
    proto.dataReceived(frame(v2.ReadResponse(2, 0, 3, 0, b"late").encode()))  # dropped
    d2 = h.conn.read(3, 0)
    proto.dataReceived(frame(v2.ReadResponse(2, 0, 3, 0, b"fresh").encode()))
    assert successResultOf(d2) == b"fresh"


def test_timeout_while_connecting():
    h = Harness(read_timeout=2.0)
    d = h.conn.read(1, 0)
    h.reactor.advance(2.0)
    assert "waiting to be sent" in str(failureResultOf(d, E.BookieTimeout).value)
    assert h.conn.queued == 0
    _proto, transport = h.accept()
    assert transport.value() == b""  # the timed-out request is not sent


def test_cancel_frees_slot_and_timer():
    h = Harness(max_outstanding=1)
    proto, transport = h.connected()
    d1 = h.conn.read(1, 1)
    d2 = h.conn.read(1, 2)
    assert h.conn.queued == 1
    d1.cancel()
    failureResultOf(d1, defer.CancelledError)
    r1, r2 = v3_requests(transport)  # d2 went out in d1's slot
    assert r2.readRequest.entryId == 2
    proto.dataReceived(v3_reply(r1, body=b"late"))  # ignored
    proto.dataReceived(v3_reply(r2, body=b"two"))
    assert successResultOf(d2) == b"two"
    assert h.delayed() == []


# ---------------------------------------------------- loss, backoff, reconnect


def test_connection_loss_fails_all_outstanding_and_reconnects_after_backoff():
    h = Harness(backoff_initial=0.1, backoff_max=0.3)
    proto, transport = h.connected()
    ds = [h.conn.read(1, i) for i in range(3)] + [h.conn.add(1, 9, KEY, entry(1, 9))]
    lose(proto)
    for d in ds:
        exc = failureResultOf(d, E.BookieUnavailable).value
        assert "connection lost" in str(exc)
    assert h.delayed() == []
    # Inside the backoff: fail fast, no new connection attempt.
    assert h.conn.state == "backoff"
    exc = failureResultOf(h.conn.read(1, 0), E.BookieUnavailable).value
    assert "next connection attempt" in str(exc)
    assert h.attempts == 1
    h.reactor.advance(0.1)
    d = h.conn.read(1, 0)
    assert h.attempts == 2
    # That attempt fails: the delay doubles to 0.2, then is capped at 0.3.
    h.refuse()
    failureResultOf(d, E.BookieUnavailable)
    h.reactor.advance(0.19)
    failureResultOf(h.conn.read(1, 0), E.BookieUnavailable)
    h.reactor.advance(0.01)
    h.conn.read(1, 0).addErrback(lambda f: None)
    h.refuse()
    h.reactor.advance(0.29)
    failureResultOf(h.conn.read(1, 0), E.BookieUnavailable)
    h.reactor.advance(0.01)
    d = h.conn.read(1, 0)
    assert h.attempts == 4
    proto, transport = h.accept()
    proto.dataReceived(v3_reply(v3_requests(transport)[0], body=b"ok"))
    assert successResultOf(d) == b"ok"
    # A successful answer resets the backoff to its first step.
    lose(proto)
    h.reactor.advance(0.1)
    assert h.conn.state == "idle"
    h.conn.read(1, 0)
    assert h.attempts == 5


def test_connect_failure_fails_queued_requests():
    h = Harness()
    d1 = h.conn.read(1, 1)
    d2 = h.conn.add(1, 1, KEY, entry(1, 1))
    h.refuse()
    for d in (d1, d2):
        assert "connecting to bookie" in str(failureResultOf(d, E.BookieUnavailable).value)
    assert h.delayed() == []


def test_errback_may_issue_requests_during_failure():
    h = Harness()
    proto, _t = h.connected()
    retried = []
    d = h.conn.read(1, 1)
    d.addErrback(lambda f: retried.append(h.conn.read(1, 1)))
    lose(proto)
    assert len(retried) == 1
    failureResultOf(retried[0], E.BookieUnavailable)  # in backoff: fails at once
    assert h.conn.outstanding == 0 and h.conn.queued == 0


def test_batch_read_dropped_connection_means_unsupported():
    h = Harness("v2")
    proto, transport = h.connected()
    db = h.conn.batch_read(5, 0, 10, 1 << 20)
    dr = h.conn.read(5, 0)
    lose(proto, ConnectionDone)
    failureResultOf(db, E.BatchReadUnsupported)
    assert not isinstance(failureResultOf(dr, E.BookieUnavailable).value, E.BatchReadUnsupported)
    assert h.conn.batch_read_supported is False
    # The bookie is up: no backoff, the fallback single read reconnects at once.
    d = h.conn.read(5, 0)
    assert h.attempts == 2
    proto, transport = h.accept()
    proto.dataReceived(frame(v2.ReadResponse(2, 0, 5, 0, b"e0").encode()))
    assert successResultOf(d) == b"e0"
    # Later batch reads fail fast without touching the wire.
    transport.clear()
    failureResultOf(h.conn.batch_read(5, 0, 10, 1 << 20), E.BatchReadUnsupported)
    assert transport.value() == b""


def test_batch_read_loss_after_support_is_known_is_plain_unavailable():
    h = Harness("v2")
    proto, transport = h.connected()
    d = h.conn.batch_read(5, 0, 1, 100)
    req = v2_requests(transport)[0]
    proto.dataReceived(frame(v2.BatchReadResponse(2, 0, 5, 0, req.request_id, (b"a",)).encode()))
    assert successResultOf(d) == [b"a"]
    d = h.conn.batch_read(5, 1, 1, 100)
    lose(proto)
    exc = failureResultOf(d, E.BookieUnavailable).value
    assert not isinstance(exc, E.BatchReadUnsupported)


# ------------------------------------------------------------ back-pressure


def test_back_pressure_bounds_outstanding_and_queue():
    h = Harness(max_outstanding=2, max_queued=2)
    proto, transport = h.connected()
    ds = [h.conn.read(1, i) for i in range(4)]
    assert len(sent_frames(transport)) == 2
    assert (h.conn.outstanding, h.conn.queued) == (2, 2)
    exc = failureResultOf(h.conn.read(1, 4), E.TooManyRequests).value
    assert exc.rc is RC.ETOOMANYREQUESTS and exc.bookie == BOOKIE
    r0, r1 = v3_requests(transport)
    proto.dataReceived(v3_reply(r0, body=b"0"))
    assert successResultOf(ds[0]) == b"0"
    assert len(sent_frames(transport)) == 3 and h.conn.queued == 1
    # Two answers in one chunk let both queued requests out (one write each turn).
    r2 = v3_requests(transport)[2]
    proto.dataReceived(v3_reply(r1, body=b"1") + v3_reply(r2, body=b"2"))
    assert len(sent_frames(transport)) == 4 and h.conn.queued == 0
    assert [successResultOf(d) for d in ds[1:3]] == [b"1", b"2"]


def test_queue_is_bounded_while_connecting():
    h = Harness(max_queued=2)
    h.conn.read(1, 0)
    h.conn.read(1, 1)
    failureResultOf(h.conn.read(1, 2), E.TooManyRequests)
    assert h.conn.queued == 2


def test_queued_requests_flush_in_one_write_up_to_the_limit():
    h = Harness(max_outstanding=3, max_queued=10)
    for i in range(5):
        h.conn.read(1, i)
    _proto, transport = h.accept()
    assert [r.readRequest.entryId for r in v3_requests(transport)] == [0, 1, 2]
    assert h.conn.queued == 2


# ------------------------------------------------------------------ malformed


@pytest.mark.parametrize(
    "garbage",
    [
        frame(b"\xff\xff\xff"),  # not a protobuf Response
        b"\x7f\xff\xff\xff",  # frame above the 5 MiB limit
        b"\xff\xff\xff\xfe",  # negative length
    ],
    ids=["undecodable", "too-large", "negative-length"],
)
def test_malformed_response_closes_and_fails_outstanding(garbage):
    h = Harness()
    proto, transport = h.connected()
    d1 = h.conn.read(1, 0)
    d2 = h.conn.read(1, 1)
    r1, _r2 = v3_requests(transport)
    proto.dataReceived(v3_reply(r1, body=b"ok"))
    assert successResultOf(d1) == b"ok"
    proto.dataReceived(garbage)
    exc = failureResultOf(d2, E.MalformedResponse).value
    assert exc.cause is not None and "malformed" in str(exc)
    assert transport.disconnecting
    assert not h.conn.connected and h.delayed() == []
    lose(proto)  # the transport reports the loss later: nothing more happens
    assert h.conn.state == "backoff"


def test_v2_unknown_opcode_is_malformed():
    h = Harness("v2")
    proto, transport = h.connected()
    d = h.conn.read(1, 0)
    proto.dataReceived(frame(struct.pack(">i", (2 << 24) | (5 << 16)) + b"\0" * 20))
    failureResultOf(d, E.MalformedResponse)
    assert transport.disconnecting


def test_frame_limit_is_configurable():
    h = Harness(max_frame_size=64)
    proto, transport = h.connected()
    d = h.conn.read(1, 0)
    proto.dataReceived(v3_reply(v3_requests(transport)[0], body=b"x" * 100))
    failureResultOf(d, E.MalformedResponse)


# --------------------------------------------------------------------- modes


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.read_lac(1),
        lambda c: c.write_lac(1, 0, KEY, b"x"),
        lambda c: c.force_ledger(1),
        lambda c: c.bookie_info(),
        lambda c: c.entry_availability(1),
        lambda c: c.read_long_poll(1, 0, 10),
        lambda c: c.add(1, 0, KEY, entry(1, 0), deferred_sync=True),
    ],
    ids=["read_lac", "write_lac", "force", "bookie_info", "entries", "long_poll", "deferred_sync"],
)
def test_v3_only_operations_refused_in_v2(call):
    h = Harness("v2")
    exc = failureResultOf(call(h.conn), E.NotSupported).value
    assert "v2" in str(exc)
    assert h.attempts == 0 and h.delayed() == []


def test_batch_read_refused_in_v3():
    h = Harness()
    failureResultOf(h.conn.batch_read(1, 0, 10, 100), E.NotSupported)
    assert h.attempts == 0


def test_argument_errors_raise():
    h = Harness("v2")
    with pytest.raises(ValueError):
        h.conn.add(1, 0, b"short", entry(1, 0))
    with pytest.raises(ValueError):
        h.conn.add(1, 0, KEY, entry(1, 1))  # v2: the body's ids are what the bookie echoes
    with pytest.raises(ValueError):
        h.conn.read(1, 0, fence_master_key=b"k")
    with pytest.raises(ValueError):
        BookieConnection(BOOKIE, MemoryReactorClock(), protocol="v4", twins=fastpath.selected())
    assert h.attempts == 0


def test_v2_flags():
    h = Harness("v2")
    h.conn.add(1, 0, KEY, entry(1, 0), recovery=True)
    h.conn.add(1, 1, KEY, entry(1, 1), recovery=True, high_priority=True)
    h.conn.read(1, 0, high_priority=True)
    h.conn.batch_read(1, 0, 2, 100, fence_master_key=KEY)
    _p, transport = h.accept()
    reqs = v2_requests(transport)
    assert [r.flags for r in reqs] == [0x2, 0x6, 0x4, 0x1]
    assert reqs[3].master_key == KEY


# -------------------------------------------------------------------- close


def test_close_fails_pending_and_leaves_no_delayed_calls():
    h = Harness(max_outstanding=1)
    proto, transport = h.connected()
    d1 = h.conn.read(1, 0)
    d2 = h.conn.add(1, 0, KEY, entry(1, 0))  # queued
    assert len(h.delayed()) == 2
    closed = h.conn.close()
    for d in (d1, d2):
        assert "closed" in str(failureResultOf(d, E.BookieUnavailable).value)
    assert h.delayed_but_close_grace() == []
    assert transport.disconnecting
    assertNoResult(closed)
    proto.dataReceived(v3_reply(v3_requests(transport)[0], body=b"late"))  # ignored
    lose(proto, ConnectionDone)
    assert successResultOf(closed) is None
    assert successResultOf(h.conn.close()) is None
    failureResultOf(h.conn.read(1, 0), E.BookieUnavailable)
    assert h.conn.state == "closed" and h.attempts == 1 and h.delayed() == []


def test_close_while_connecting():
    h = Harness()
    d = h.conn.read(1, 0)
    closed = h.conn.close()
    failureResultOf(d, E.BookieUnavailable)
    assert successResultOf(closed) is None
    assert h.reactor.connectors[0].stoppedConnecting
    assert h.delayed() == []
    # The abandoned attempt completing later builds no protocol.
    factory = h.reactor.tcpClients[0][2]
    assert factory.buildProtocol(None) is None
    factory.clientConnectionFailed(None, Failure(ConnectionRefusedError()))


def test_close_from_a_callback_while_reading_responses():
    h = Harness()
    proto, transport = h.connected()
    d1 = h.conn.read(1, 0)
    d2 = h.conn.read(1, 1)
    r1, r2 = v3_requests(transport)
    d1.addCallback(lambda _: h.conn.close())
    proto.dataReceived(v3_reply(r1, body=b"a") + v3_reply(r2, body=b"b"))
    failureResultOf(d2, E.BookieUnavailable)  # the close came first
    assert h.delayed_but_close_grace() == []
    lose(proto)
    assert h.delayed() == []


def test_close_idle_connection():
    h = Harness()
    assert successResultOf(h.conn.close()) is None
    assert h.attempts == 0 and h.delayed() == []


def test_close_after_timeouts_and_backoff_leaves_nothing():
    h = Harness(read_timeout=1)
    proto, _t = h.connected()
    h.conn.read(1, 0).addErrback(lambda f: None)
    lose(proto)
    h.conn.close()
    assert h.delayed() == []
