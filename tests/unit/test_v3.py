"""v3 protobuf codec: golden vectors from Java 4.17.2, builders, robustness."""

import hashlib
import struct

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bkctl.wire.codecs import v3, v3_fast
from bkctl.wire.codecs.protocol import (
    AUTH_DISABLED_PLUGIN,
    BOOKIE_INFO_FREE_DISK_SPACE,
    BOOKIE_INFO_TOTAL_DISK_CAPACITY,
    HIGH_PRIORITY_VALUE,
    RC,
    OperationType,
    ProtocolVersion,
)
from bkctl.wire.errors import CodecError
from bkctl.wire.proto import bookkeeper_pb2 as pb
from tests.support.golden import examples, frames

V3_FRAMES = [f for f in frames() if f["proto"] == "v3"]
V3_EXAMPLES = [e for e in examples() if e["proto"] == "v3"]
REQUESTS = [f for f in V3_FRAMES if f["kind"] == "request"]
RESPONSES = [f for f in V3_FRAMES if f["kind"] == "response"]

# Ledger passwords used by the capture (vectors README): master key = SHA-1("ledger" + password).
KNOWN_MASTER_KEYS = {hashlib.sha1(b"ledger" + pw).digest() for pw in (b"password", b"secret")}

INT64 = st.integers(-(2**63), 2**63 - 1)
UINT64 = st.integers(0, 2**64 - 1)
ENTRY_ID = st.integers(-1, 2**63 - 1)
LEDGER_ID = st.integers(0, 2**63 - 1)
KEY = st.binary(min_size=20, max_size=20)


def fid(f):
    return f"{f['flow']}#{f['index']}-{f['type']}"


def payload_of(f):
    raw = f["raw"]
    (length,) = struct.unpack(">i", raw[:4])
    assert length == len(raw) - 4
    return raw[4:]


def inner_request(req):
    return getattr(req, v3.REQUEST_FIELD[req.header.operation])


def inner_response(resp):
    return getattr(resp, v3.RESPONSE_FIELD[resp.header.operation])


# --------------------------------------------------------------- coverage


def test_vectors_present():
    assert len(REQUESTS) >= 40 and len(RESPONSES) >= 40
    assert len(V3_EXAMPLES) >= 20


def test_vectors_cover_every_v3_kind():
    kinds = {(f["op"], f["kind"]) for f in V3_FRAMES}
    for op in ("ADD_ENTRY", "READ_ENTRY", "READ_LAC", "WRITE_LAC", "FORCE_LEDGER"):
        assert (op, "request") in kinds and (op, "response") in kinds


# ---------------------------------------------------------- golden frames


@pytest.mark.parametrize("f", V3_FRAMES, ids=fid)
def test_golden_frame_decodes_and_reencodes(f):
    payload = payload_of(f)
    parse = v3.parse_request if f["kind"] == "request" else v3.parse_response
    msg = parse(payload)
    header = msg.header
    assert header.version == ProtocolVersion.VERSION_THREE
    assert header.operation == OperationType[f["op"]]
    assert header.txnId == f["txnId"]
    assert header.priority == f.get("priority", 0)
    assert header.HasField("priority") == ("priority" in f)
    assert [fd.number for fd, _ in msg.ListFields()] == f["pbFields"]
    if f["kind"] == "request":
        inner = inner_request(msg)
        if "ledgerId" in f:
            assert inner.ledgerId == f["ledgerId"]
        if "entryId" in f:
            assert inner.entryId == f["entryId"]
        for key in ("previousLAC", "timeOut", "writeFlags"):
            if key in f:
                assert getattr(inner, key) == f[key]
        if inner.DESCRIPTOR.fields_by_name.get("masterKey") and inner.HasField("masterKey"):
            assert inner.masterKey in KNOWN_MASTER_KEYS
    else:
        assert msg.status == f["status"]
        assert inner_response(msg).status == msg.status  # top level mirrors the inner status
    assert v3.serialize(msg) == payload


@pytest.mark.parametrize("e", V3_EXAMPLES, ids=lambda e: e["name"])
def test_example_files(e):
    assert any(f["raw"] == e["raw"] for f in V3_FRAMES)  # examples are captured frames
    payload = payload_of(e)
    parse = v3.parse_request if e["kind"] == "request" else v3.parse_response
    msg = parse(payload)
    assert msg.header.operation == OperationType[e["op"]]
    assert msg.header.txnId == e["txnId"]
    assert v3.serialize(msg) == payload
    name = e["name"]
    if e["kind"] == "request":
        assert v3.is_fence_read(msg) == ("flag-FENCE_LEDGER" in name)
        assert v3.is_piggyback_read(msg) == ("flag-ENTRY_PIGGYBACK" in name)
        assert v3.is_long_poll_read(msg) == ("longpoll" in name)
        assert v3.is_recovery_add(msg) == ("flag-RECOVERY_ADD" in name)
        assert v3.is_high_priority(msg) == ("prio-100" in name)
        assert v3.is_deferred_sync(msg) == ("writeFlags-1" in name)
        if "entry-LAC" in name:
            assert msg.readRequest.entryId == -1


# ------------------------------------------- builders reproduce Java's bytes


def rebuild_request(req):
    """Build the same request through the client-side builders."""
    h = req.header
    op, txn, high = h.operation, h.txnId, h.priority > 0
    if op == OperationType.ADD_ENTRY:
        a = req.addRequest
        return v3.add_request(
            txn,
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
        return v3.read_request(
            txn,
            r.ledgerId,
            r.entryId,
            fence_master_key=r.masterKey if v3.is_fence_read(req) else None,
            high_priority=high,
            previous_lac=r.previousLAC if r.HasField("previousLAC") else None,
            timeout_ms=r.timeOut if r.HasField("timeOut") else None,
            piggyback=v3.is_piggyback_read(req),
        )
    if op == OperationType.READ_LAC:
        return v3.read_lac_request(txn, req.readLacRequest.ledgerId)
    if op == OperationType.WRITE_LAC:
        w = req.writeLacRequest
        return v3.write_lac_request(txn, w.ledgerId, w.lac, w.masterKey, w.body)
    if op == OperationType.FORCE_LEDGER:
        return v3.force_ledger_request(txn, req.forceLedgerRequest.ledgerId)
    raise AssertionError(f"no builder mapping for {op}")


@pytest.mark.parametrize("f", REQUESTS, ids=fid)
def test_request_builders_match_java(f):
    payload = payload_of(f)
    assert v3.serialize(rebuild_request(v3.parse_request(payload))) == payload


def rebuild_response(req, resp):
    """Build the bookie's reply from the request plus the decoded result values."""
    op = req.header.operation
    status = resp.status
    if op == OperationType.ADD_ENTRY:
        return v3.add_response(req, status)
    if op == OperationType.READ_ENTRY:
        r = resp.readResponse
        return v3.read_response(
            req,
            status,
            body=r.body if r.HasField("body") else None,
            max_lac=r.maxLAC if r.HasField("maxLAC") else None,
            entry_id=r.entryId if r.entryId != req.readRequest.entryId else None,
            lac_update_ts=r.lacUpdateTimestamp if r.HasField("lacUpdateTimestamp") else None,
        )
    if op == OperationType.READ_LAC:
        r = resp.readLacResponse
        return v3.read_lac_response(
            req,
            status,
            lac_body=r.lacBody if r.HasField("lacBody") else None,
            last_entry_body=r.lastEntryBody if r.HasField("lastEntryBody") else None,
        )
    if op == OperationType.WRITE_LAC:
        return v3.write_lac_response(req, status)
    if op == OperationType.FORCE_LEDGER:
        return v3.force_ledger_response(req, status)
    raise AssertionError(f"no builder mapping for {op}")


def request_for(resp_frame):
    client = resp_frame["conn"].split("<-")
    for f in REQUESTS:
        if f["conn"].split("->") == client and f["txnId"] == resp_frame["txnId"] and f["op"] == resp_frame["op"]:
            return f
    raise AssertionError(f"no request for {fid(resp_frame)}")


@pytest.mark.parametrize("f", RESPONSES, ids=fid)
def test_response_builders_match_java(f):
    req = v3.parse_request(payload_of(request_for(f)))
    payload = payload_of(f)
    built = rebuild_response(req, v3.parse_response(payload))
    assert v3.serialize(built) == payload


def test_statuses_seen_in_vectors():
    seen = {f["status"] for f in RESPONSES}
    assert seen == {RC.EOK.v3, RC.ENOLEDGER.v3, RC.ENOENTRY.v3, RC.EFENCED.v3}


# ----------------------------------------------- spec worked examples (§8)


MK_EMPTY = bytes.fromhex("850bf1071c5e3d8c24235676f8816ae0cbe2f14f")
SPEC_ENTRY = bytes.fromhex("00000000000000010000000000000000ffffffffffffffff0000000000000005e3a5f74d") + b"hello"


def test_spec_add_example():
    req = v3.add_request(7, 1, 0, MK_EMPTY, SPEC_ENTRY)
    expected = bytes.fromhex("0a060803100218 07 aa0645 0801 1000 1a14".replace(" ", "")) + MK_EMPTY
    expected += bytes.fromhex("2229") + SPEC_ENTRY
    assert v3.serialize(req) == expected
    assert v3.serialize(v3.add_response(req, RC.EOK)) == bytes.fromhex(
        "0a0608031002180710 00aa0606080010011800".replace(" ", "")
    )


def test_spec_get_bookie_info_example():
    req = v3.get_bookie_info_request(1, BOOKIE_INFO_TOTAL_DISK_CAPACITY | BOOKIE_INFO_FREE_DISK_SPACE)
    assert v3.serialize(req) == bytes.fromhex("0a06080310081801ca06020803")
    resp = v3.parse_response(v3.serialize(v3.get_bookie_info_response(req, RC.EOK, total=10, free=4)))
    assert resp.status == 0 and resp.getBookieInfoResponse.totalDiskCapacity == 10
    assert resp.getBookieInfoResponse.freeDiskSpace == 4
    only_free = v3.get_bookie_info_response(req, RC.EOK, free=4).getBookieInfoResponse
    assert not only_free.HasField("totalDiskCapacity")


# ------------------------------------------------ other response builders


def test_required_zero_fields_are_on_the_wire():
    # EOK (0), ledger 0, entry 0 must all be written explicitly (proto2 required).
    req = v3.add_request(0, 0, 0, MK_EMPTY, b"")
    assert v3.serialize(v3.add_response(req, 0)) == bytes.fromhex("0a060803100218001000aa0606080010001800")


def test_auth_response():
    req = v3.auth_request(5, "SASL", b"hi")
    data = v3.serialize(v3.auth_response(req))
    plugin = AUTH_DISABLED_PLUGIN.encode()
    assert data == bytes.fromhex("0a060803100518051000b206160a12") + plugin + bytes.fromhex("1200")
    resp = v3.parse_response(data)
    assert resp.authResponse.authPluginName == AUTH_DISABLED_PLUGIN and resp.authResponse.payload == b""


def test_start_tls():
    req = v3.start_tls_request(9)
    assert v3.serialize(req) == bytes.fromhex("0a06080310091809d20600")
    assert v3.parse_request(v3.serialize(req)).HasField("startTLSRequest")
    ok = v3.serialize(v3.start_tls_response(req))
    assert ok == bytes.fromhex("0a060803100918091000d20600")
    refused = v3.serialize(v3.start_tls_response(req, RC.EBADREQ))
    assert refused == bytes.fromhex("0a06080310091809109403")


def test_error_response_has_no_inner_message():
    req = v3.read_request(3, 1, 2, high_priority=True)
    resp = v3.error_response(req, RC.EBADREQ)
    assert v3.serialize(resp) == bytes.fromhex("0a06080310011803109403")
    assert [fd.number for fd, _ in resp.ListFields()] == [1, 2]
    # Java echoes the whole request header in this reply; available on request.
    echoed = v3.error_response(req, RC.EUA, echo_header=True)
    assert echoed.header == req.header and echoed.header.priority == HIGH_PRIORITY_VALUE


def test_unknown_operation_error_response():
    req = pb.Request(header={"version": 3, "operation": OperationType.RANGE_READ_ENTRY, "txnId": 4})
    req = v3.parse_request(v3.serialize(req))
    resp = v3.status_response(req, RC.EBADREQ)
    assert resp.status == RC.EBADREQ.v3
    assert [fd.number for fd, _ in resp.ListFields()] == [1, 2]
    assert resp.header.operation == OperationType.RANGE_READ_ENTRY and resp.header.txnId == 4


BAD_VERSION_CASES = [
    (v3.add_request(1, 5, 6, MK_EMPTY, b"x"), "addResponse", {"ledgerId": 5, "entryId": 6}),
    (v3.read_request(1, 5, -1), "readResponse", {"ledgerId": 5, "entryId": -1}),
    (v3.read_lac_request(1, 5), "readLacResponse", {"ledgerId": 5}),
    (v3.write_lac_request(1, 5, 3, MK_EMPTY, b"l"), "writeLacResponse", {"ledgerId": 5}),
    (v3.force_ledger_request(1, 5), "forceLedgerResponse", {"ledgerId": 5}),
    (v3.get_bookie_info_request(1, 3), "getBookieInfoResponse", {}),
    (v3.get_list_of_entries_request(1, 5), "getListOfEntriesOfLedgerResponse", {"ledgerId": 5}),
]


@pytest.mark.parametrize("req,field,ids", BAD_VERSION_CASES, ids=[c[1] for c in BAD_VERSION_CASES])
def test_bad_version_response(req, field, ids):
    old = pb.Request()
    old.CopyFrom(req)
    old.header.version = ProtocolVersion.VERSION_TWO
    resp = v3.parse_response(v3.serialize(v3.bad_version_response(old)))
    assert resp.header.version == ProtocolVersion.VERSION_THREE
    assert resp.header.operation == req.header.operation and resp.header.txnId == 1
    assert resp.status == RC.EBADVERSION.v3
    assert [fd.number for fd, _ in resp.ListFields()] == [1, 2, resp.DESCRIPTOR.fields_by_name[field].number]
    inner = getattr(resp, field)
    assert inner.status == RC.EBADVERSION.v3
    assert [fd.name for fd, _ in inner.ListFields()] == ["status", *ids]
    for name, value in ids.items():
        assert getattr(inner, name) == value


def test_bad_version_without_inner_message():
    for req in (v3.auth_request(1, "x"), v3.start_tls_request(1)):
        resp = v3.bad_version_response(req)
        assert resp.status == RC.EBADVERSION.v3
        assert [fd.number for fd, _ in resp.ListFields()] == [1, 2]


def test_status_argument_forms():
    req = v3.add_request(1, 2, 3, MK_EMPTY, b"")
    for status in (RC.EFENCED, RC.EFENCED.v3, int(RC.EFENCED)):
        assert v3.add_response(req, status).status == 504
    assert v3.v3_status(RC.EOK) == 0 and v3.v3_status(403) == 403 and v3.v3_status(2) == 403
    for bad in (3, 999, -1, None, "EOK"):
        with pytest.raises(ValueError):
            v3.add_response(req, bad)


def test_absent_flag_is_not_fencing_or_recovery():
    # proto2 closed enums read as their first value when absent: the predicates must not
    read = v3.read_request(1, 2, 3)
    assert read.readRequest.flag == pb.ReadRequest.FENCE_LEDGER  # the trap itself
    assert not v3.is_fence_read(read) and not v3.is_piggyback_read(read)
    add = v3.add_request(1, 2, 3, MK_EMPTY, b"")
    assert add.addRequest.flag == pb.AddRequest.RECOVERY_ADD  # the trap itself
    assert not v3.is_recovery_add(add) and not v3.is_deferred_sync(add) and not v3.is_high_priority(add)
    assert v3.is_recovery_add(v3.add_request(1, 2, 3, MK_EMPTY, b"", recovery=True))
    assert v3.is_fence_read(v3.read_request(1, 2, 3, fence_master_key=MK_EMPTY))
    assert not v3.is_long_poll_read(v3.read_request(1, 2, -1, fence_master_key=MK_EMPTY))


def test_read_request_flags():
    with pytest.raises(ValueError):
        v3.read_request(1, 2, -1, fence_master_key=MK_EMPTY, piggyback=True, previous_lac=1)
    plain = v3.read_request(1, 2, 3).readRequest
    assert not plain.HasField("flag") and not plain.HasField("masterKey")
    lp = v3.read_request(1, 2, -1, previous_lac=7, timeout_ms=0).readRequest
    assert lp.previousLAC == 7 and lp.HasField("timeOut") and not lp.HasField("flag")


def test_builders_accept_buffer_types():
    body = bytearray(b"entry")
    req = v3.add_request(1, 2, 3, memoryview(MK_EMPTY), body)
    assert req.addRequest.body == b"entry" and req.addRequest.masterKey == MK_EMPTY
    resp = v3.read_response(v3.read_request(1, 2, 3), RC.EOK, body=memoryview(b"abc"), max_lac=2)
    assert resp.readResponse.body == b"abc"


def test_parse_accepts_memoryview_slice():
    f = REQUESTS[0]
    assert v3.parse_request(memoryview(f["raw"])[4:]) == v3.parse_request(f["raw"][4:])
    g = RESPONSES[0]
    assert v3.parse_response(bytearray(g["raw"][4:])) == v3.parse_response(g["raw"][4:])


def test_serialize_incomplete_message_raises_codec_error():
    with pytest.raises(CodecError):
        v3.serialize(pb.Request())
    with pytest.raises(CodecError):
        v3.serialize(pb.Response(header={"version": 3, "operation": 1, "txnId": 1}))


# ----------------------------------------------------- missing required


def test_missing_required_fields_rejected():
    ok = v3.add_request(1, 2, 3, MK_EMPTY, b"body")
    for drop in ("ledgerId", "entryId", "masterKey", "body"):
        msg = pb.Request()
        msg.CopyFrom(ok)
        msg.addRequest.ClearField(drop)
        with pytest.raises(CodecError, match=drop):
            v3.parse_request(msg.SerializePartialToString())
    for drop in ("version", "operation", "txnId"):
        msg = pb.Request()
        msg.CopyFrom(ok)
        msg.header.ClearField(drop)
        with pytest.raises(CodecError):
            v3.parse_request(msg.SerializePartialToString())
    resp = v3.add_response(ok, RC.EOK)
    resp.ClearField("status")
    with pytest.raises(CodecError, match="status"):
        v3.parse_response(resp.SerializePartialToString())


def test_unknown_enum_value_is_a_missing_field():
    # proto2 enums are closed: Java (and upb) park an unknown operation in the
    # unknown fields, so the required header.operation counts as missing.
    data = bytes.fromhex("0a06080310631801")  # operation = 99
    with pytest.raises(CodecError):
        v3.parse_request(data)


def test_v2_payloads_never_parse_as_v3():
    for f in frames():
        if f["proto"] == "v2" and f["kind"] == "request":
            with pytest.raises(CodecError):
                v3.parse_request(f["raw"][4:])


# --------------------------------------------------- round-trip properties


@st.composite
def built_requests(draw):
    txn = draw(UINT64)
    kind = draw(
        st.sampled_from(
            ["add", "read", "fence", "longpoll", "read_lac", "write_lac", "force", "info", "list", "auth", "tls"]
        )
    )
    ledger = draw(LEDGER_ID)
    if kind == "add":
        return v3.add_request(
            txn,
            ledger,
            draw(ENTRY_ID),
            draw(KEY),
            draw(st.binary(max_size=300)),
            recovery=draw(st.booleans()),
            high_priority=draw(st.booleans()),
            deferred_sync=draw(st.booleans()),
        )
    if kind == "read":
        return v3.read_request(txn, ledger, draw(ENTRY_ID), high_priority=draw(st.booleans()))
    if kind == "fence":
        return v3.read_request(
            txn, ledger, draw(ENTRY_ID), fence_master_key=draw(KEY), high_priority=draw(st.booleans())
        )
    if kind == "longpoll":
        return v3.read_request(
            txn,
            ledger,
            -1,
            previous_lac=draw(ENTRY_ID),
            timeout_ms=draw(st.integers(0, 2**40)),
            piggyback=draw(st.booleans()),
        )
    if kind == "read_lac":
        return v3.read_lac_request(txn, ledger)
    if kind == "write_lac":
        return v3.write_lac_request(txn, ledger, draw(ENTRY_ID), draw(KEY), draw(st.binary(max_size=64)))
    if kind == "force":
        return v3.force_ledger_request(txn, ledger)
    if kind == "info":
        return v3.get_bookie_info_request(txn, draw(st.integers(0, 3)))
    if kind == "list":
        return v3.get_list_of_entries_request(txn, ledger)
    if kind == "auth":
        return v3.auth_request(txn, draw(st.text(max_size=20)), draw(st.binary(max_size=40)))
    return v3.start_tls_request(txn)


STATUSES = st.sampled_from(list(RC))


@given(built_requests())
@example(v3.add_request(2**64 - 1, 2**63 - 1, -1, b"\xff" * 20, b""))
def test_request_round_trip(req):
    data = v3.serialize(req)
    assert data[:1] == b"\x0a"  # the v3 detection of BookieProtoEncoding.RequestDecoder holds for our output
    back = v3.parse_request(data)
    assert back == req
    assert v3.serialize(back) == data
    assert back.header.version == 3 and back.header.txnId == req.header.txnId


@given(built_requests(), STATUSES, st.data())
def test_response_round_trip(req, status, data):
    op = req.header.operation
    if op == OperationType.ADD_ENTRY:
        resp = v3.add_response(req, status)
    elif op == OperationType.READ_ENTRY:
        resp = v3.read_response(
            req,
            status,
            body=data.draw(st.none() | st.binary(max_size=100)),
            max_lac=data.draw(st.none() | ENTRY_ID),
            entry_id=data.draw(st.none() | ENTRY_ID),
            lac_update_ts=data.draw(st.none() | INT64),
        )
    elif op == OperationType.READ_LAC:
        resp = v3.read_lac_response(
            req, status, data.draw(st.none() | st.binary(max_size=50)), data.draw(st.none() | st.binary(max_size=50))
        )
    elif op == OperationType.WRITE_LAC:
        resp = v3.write_lac_response(req, status)
    elif op == OperationType.FORCE_LEDGER:
        resp = v3.force_ledger_response(req, status)
    elif op == OperationType.GET_BOOKIE_INFO:
        resp = v3.get_bookie_info_response(req, status, data.draw(st.none() | INT64), data.draw(st.none() | INT64))
    elif op == OperationType.GET_LIST_OF_ENTRIES_OF_LEDGER:
        resp = v3.get_list_of_entries_response(req, status, data.draw(st.none() | st.binary(max_size=88)))
    elif op == OperationType.AUTH:
        resp = v3.auth_response(req)
        status = RC.EOK
    else:
        status = data.draw(st.sampled_from([RC.EOK, RC.EBADREQ]))
        resp = v3.start_tls_response(req, status)
    wire_bytes = v3.serialize(resp)
    back = v3.parse_response(wire_bytes)
    assert back == resp
    assert back.header.version == 3
    assert back.header.operation == op and back.header.txnId == req.header.txnId
    assert not back.header.HasField("priority")
    assert back.status == RC(status).v3
    inner = getattr(back, v3.RESPONSE_FIELD[op])
    fields = inner.DESCRIPTOR.fields_by_name
    if "status" in fields and back.HasField(v3.RESPONSE_FIELD[op]):
        assert inner.status == back.status  # top-level status mirrors the inner one
    if "ledgerId" in fields:
        assert inner.ledgerId == inner_request(req).ledgerId
    if op == OperationType.ADD_ENTRY:
        assert inner.entryId == req.addRequest.entryId


# ------------------------------------------------------- robustness (fuzz)


def parse_either(data):
    """Both parsers may only succeed or raise CodecError."""
    for parse in (v3.parse_request, v3.parse_response):
        try:
            msg = parse(data)
        except CodecError:
            continue
        assert msg.IsInitialized()
        v3.serialize(msg)  # whatever parsed can be written back


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_random_bytes_only_raise_codec_error(data):
    parse_either(data)


@pytest.mark.parametrize("f", V3_EXAMPLES, ids=lambda e: e["name"])
def test_truncations_only_raise_codec_error(f):
    payload = f["raw"][4:]
    parse = v3.parse_request if f["kind"] == "request" else v3.parse_response
    header_end = 2 + payload[1]
    for cut in range(len(payload)):
        if cut < header_end:  # the required header itself is cut short
            with pytest.raises(CodecError):
                parse(payload[:cut])
        parse_either(payload[:cut])
        parse_either(memoryview(payload)[:cut])


@settings(max_examples=500)
@given(st.sampled_from(V3_FRAMES), st.data())
def test_bit_flips_only_raise_codec_error(f, data):
    payload = bytearray(f["raw"][4:])
    for _ in range(data.draw(st.integers(1, 3))):
        bit = data.draw(st.integers(0, len(payload) * 8 - 1))
        payload[bit // 8] ^= 1 << (bit % 8)
    parse_either(bytes(payload))
    parse_either(memoryview(payload))


@pytest.mark.parametrize("junk", [None, "text", 123, object(), [1, 2]])
def test_non_bytes_input_raises_codec_error(junk):
    with pytest.raises(CodecError):
        v3.parse_request(junk)
    with pytest.raises(CodecError):
        v3.parse_response(junk)


def test_deep_nesting_raises_codec_error():
    # 5000 nested start-group tags for field 100: beyond the decoder's depth limit
    data = b"\xa3\x06" * 5000
    with pytest.raises(CodecError):
        v3.parse_request(data)
    with pytest.raises(CodecError):
        v3.parse_response(data)


# ------------------------------------------- plain READ answers taken apart by hand


def _header_len(payload: bytes) -> int:
    return 2 + payload[1]


def _general_body(payload: bytes):
    """What a client takes from an EOK read answer through the general parser."""
    msg = v3.parse_response(payload)
    inner = msg.readResponse
    return inner.body if inner.HasField("body") else b""


def _plain_read_answers():
    """Java's EOK answers to plain (non-fencing, non-long-poll) reads, with their requests."""
    out = []
    for f in RESPONSES:
        resp = v3.parse_response(payload_of(f))
        if resp.header.operation != OperationType.READ_ENTRY or resp.status != 0:
            continue
        req = next(r for r in REQUESTS if r["flow"] == f["flow"] and r["txnId"] == f["txnId"] and r["op"] == f["op"])
        request = v3.parse_request(payload_of(req))
        if v3.is_fence_read(request) or request.readRequest.HasField("previousLAC") or v3.is_high_priority(request):
            continue
        out.append((payload_of(req), payload_of(f), request))
    return out


def test_java_answers_to_plain_reads_are_taken_apart_by_hand():
    """Java's EOK answer starts with its request's header field, byte for
    byte, and the hand parser reads the same body as the general one."""
    answers = _plain_read_answers()
    assert answers
    for req_payload, payload, _request in answers:
        n = _header_len(req_payload)
        assert payload[:n] == req_payload[:n]
        assert v3_fast.plain_read_body(payload, n) == _general_body(payload)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    UINT64,
    LEDGER_ID,
    ENTRY_ID,
    st.one_of(st.none(), st.binary(max_size=300)),
    st.one_of(st.none(), INT64),
    st.one_of(st.none(), INT64),
)
def test_plain_read_body_reads_what_the_parser_reads(txn, ledger_id, entry_id, body, max_lac, ts):
    req = v3.read_request(txn, ledger_id, entry_id)
    payload = v3.serialize(v3.read_response(req, RC.EOK, body, max_lac=max_lac, lac_update_ts=ts))
    n = _header_len(payload)
    assert payload[:n] == v3.serialize(req)[:n]
    # without a body: left to the parser
    assert v3_fast.plain_read_body(payload, n) == (None if body is None else _general_body(payload))


@pytest.mark.parametrize("rc", [RC.ENOENTRY, RC.ENOLEDGER, RC.EUA, RC.EIO, RC.ETOOMANYREQUESTS])
def test_plain_read_body_leaves_errors_to_the_parser(rc):
    req = v3.read_request(7, 3, 4)
    payload = v3.serialize(v3.read_response(req, rc))
    assert v3_fast.plain_read_body(payload, _header_len(payload)) is None
    # status EOK at the top, an error inside
    msg = v3.read_response(req, RC.EOK, b"x")
    msg.readResponse.status = rc.v3
    payload = v3.serialize(msg)
    assert v3_fast.plain_read_body(payload, _header_len(payload)) is None


def test_plain_read_body_leaves_other_shapes_to_the_parser():
    req = v3.read_request(7, 3, 4)
    good = v3.serialize(v3.read_response(req, RC.EOK, b"body", max_lac=3))
    n = _header_len(good)
    assert v3_fast.plain_read_body(good, n) == b"body"
    # every truncation: None, never an exception
    for cut in range(n, len(good)):
        assert v3_fast.plain_read_body(good[:cut], n) is None
    # a field after the readResponse, a repeated field, an unknown field inside it
    assert v3_fast.plain_read_body(good + b"\x10\x00", n) is None
    assert v3_fast.plain_read_body(good + b"\x28\x01", n) is None
    msg = v3.read_response(req, RC.EOK, b"body")
    inner = msg.readResponse.SerializeToString() + b"\x38\x01"  # field 7: unknown
    assert v3_fast.plain_read_body(good[:-2] + b"\x30\x05", n) == b"body"  # lacUpdateTimestamp alone
    assert v3_fast.plain_read_body(good + b"\x30\x05", n) is None  # the outer length no longer matches
    odd = good[:n] + b"\x10\x00\xa2\x06" + bytes((len(inner),)) + inner
    assert _general_body(odd) == b"body"  # the parser accepts it; the hand parser leaves it
    assert v3_fast.plain_read_body(odd, n) is None
    # a body that claims more bytes than there are
    assert v3_fast.plain_read_body(good[:-2] + b"\x28", n) is None


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=60), st.integers(0, 1 << 20), st.data())
def test_plain_read_body_of_mutated_answers_agrees_with_the_parser_or_declines(body, txn, data):
    req = v3.read_request(txn, 5, 6)
    p = bytearray(v3.serialize(v3.read_response(req, RC.EOK, body, max_lac=5)))
    n = _header_len(p)
    i = data.draw(st.integers(n, len(p) - 1))
    p[i] = data.draw(st.integers(0, 255))
    p = bytes(p)
    got = v3_fast.plain_read_body(p, n)
    if got is not None:
        assert got == _general_body(p)  # it parses (or this raises) and reads the same
