"""The C twins of the client's per-entry codecs (``_fastcodec.c``) against
their Python references: the same bytes for everything they cover, None
(the caller's Python path) for everything else, the same payloads and the
same errors from the digest check, for random and damaged input; and they
are the ones in use when built and fast paths are on.  With the C module not
built the comparisons fail (tests/support/c_twins.py)."""

import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from bkctl.wire import fastpath
from bkctl.wire.codecs import v3, v3_fast
from bkctl.wire.codecs.digest import DigestManager, DigestType
from bkctl.wire.errors import DigestError
from tests.support import c_twins
from tests.support.crc_kinds import crc_kind  # noqa: F401 (a fixture)

C = fastpath.build(True).codec
needs_c = c_twins.needs_c(C, "bkctl.wire.codecs._fastcodec")
pytestmark = needs_c

u64 = st.integers(0, (1 << 64) - 1)
i64 = st.integers(-(1 << 63), (1 << 63) - 1)
# around the edges of every varint length, and beyond what a field holds
ids = st.one_of(
    i64,
    st.integers(-(1 << 70), 1 << 70),
    st.sampled_from([0, 1, 127, 128, 16383, 16384, (1 << 63) - 1, 1 << 63, -1, (1 << 64) - 1, 1 << 64]),
)
ENC = v3_fast.RequestEncoder()


def python_package(dm: DigestManager, *args) -> bytes:
    saved, dm.c_package = dm.c_package, None
    try:
        return dm.package(*args)
    finally:
        dm.c_package = saved


# -- digests ------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(ledger=i64, entry=i64, lac=i64, length=i64, payload=st.binary(max_size=5000))
def test_package_is_the_python_package(crc_kind, ledger, entry, lac, length, payload):
    dm = DigestManager(ledger, DigestType.CRC32C)
    body = C.crc32c_package(ledger, entry, lac, length, payload)
    assert body == python_package(dm, entry, lac, length, payload)
    assert struct.unpack_from(">I", body, 32)[0] == crc32c(body[36:], crc32c(body[:32]))


@pytest.mark.parametrize(
    "args",
    [
        (1 << 63, 0, 0, 0, b"x"),
        (0, -(1 << 63) - 1, 0, 0, b"x"),
        (0, 0, True, 0, b"x"),
        (0, 0, 0, 0, bytearray(b"x")),
        (0, 0, 0, 0.0, b"x"),
    ],
)
def test_package_leaves_what_it_does_not_cover_to_python(args):
    assert C.crc32c_package(*args) is None


def test_package_of_a_crc32c_ledger_is_the_c_twin_when_fast_paths_are_on():
    dm = DigestManager(5, DigestType.CRC32C)
    assert (dm.c_package is not None) == fastpath.selected().enabled
    assert DigestManager(5, DigestType.CRC32C, twins=fastpath.build(False)).c_package is None
    assert dm.package(1, 0, 10, b"0123456789") == python_package(dm, 1, 0, 10, b"0123456789")
    for other in (DigestType.CRC32, DigestType.MAC, DigestType.DUMMY):
        assert DigestManager(5, other, b"pw").c_package is None


def outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except DigestError as exc:
        return ("error", str(exc))


def damaged(entry: bytes, data) -> bytes:
    how = data.draw(st.sampled_from(["none", "flip", "cut", "grow", "ids", "short"]))
    if how == "flip" and entry:
        i = data.draw(st.integers(0, len(entry) - 1))
        return entry[:i] + bytes((entry[i] ^ data.draw(st.integers(1, 255)),)) + entry[i + 1 :]
    if how == "cut" and entry:
        return entry[: data.draw(st.integers(0, len(entry) - 1))]
    if how == "grow":
        return entry + data.draw(st.binary(min_size=1, max_size=8))
    if how == "ids":
        return struct.pack(">qq", data.draw(i64), data.draw(i64)) + entry[16:]
    if how == "short":
        return data.draw(st.binary(max_size=40))
    return entry


@settings(max_examples=300, deadline=None)
@given(data=st.data(), ledger=i64, entry=i64, payload=st.binary(max_size=3000))
def test_checker_gives_the_payload_or_the_error_of_the_python_check(crc_kind, data, ledger, entry, payload):
    dm = DigestManager(ledger, DigestType.CRC32C)
    body = damaged(python_package(dm, entry, max(entry - 1, -(1 << 63)), len(payload), payload), data)
    asked = data.draw(st.one_of(st.just(entry), i64))
    checker = C.Crc32cChecker(ledger, dm.payload)
    assert outcome(checker, body, asked) == outcome(dm.payload, body, asked)


def test_checker_hands_other_shapes_to_the_python_check():
    dm = DigestManager(3, DigestType.CRC32C)
    body = python_package(dm, 4, 3, 2, b"ok")
    checker = C.Crc32cChecker(3, dm.payload)
    assert checker(bytearray(body), 4) == b"ok"  # not bytes: the Python check takes it
    assert checker(memoryview(body), 4) == b"ok"
    assert outcome(checker, body, 1 << 70) == outcome(dm.payload, body, 1 << 70)
    with pytest.raises(TypeError):
        checker(body)


def test_payload_checker_is_the_c_twin_for_crc32c_when_fast_paths_are_on(monkeypatch):
    monkeypatch.setattr(fastpath, "selected", lambda: fastpath.build(True))
    assert isinstance(DigestManager(3, DigestType.CRC32C).payload_checker(), C.Crc32cChecker) == (
        fastpath.build(True).codec is not None
    )
    assert not isinstance(DigestManager(3, DigestType.CRC32).payload_checker(), C.Crc32cChecker)
    monkeypatch.setattr(fastpath, "selected", lambda: fastpath.build(False))
    dm = DigestManager(3, DigestType.CRC32C)
    assert dm.payload_checker() == dm.payload


# -- v3 requests and answers --------------------------------------------------------


@settings(max_examples=500)
@given(txn=st.one_of(u64, ids), ledger=ids, entry=ids)
def test_read_frame_is_the_encoders_where_it_writes_one(txn, ledger, entry):
    got = C.read_frame(txn, ledger, entry)
    covered = 0 <= txn < 1 << 64 and 0 <= ledger < 1 << 63 and 0 <= entry < 1 << 63
    if not covered:
        assert got is None
        return
    assert got == ENC.read_frame(txn, ledger, entry)


def test_read_frame_leaves_other_types_to_python():
    assert C.read_frame(True, 1, 1) is None
    assert C.read_frame(1, 1.0, 1) is None


@settings(max_examples=300)
@given(ledger=ids, entry=ids, key=st.binary(max_size=130), body=st.binary(max_size=3000), recovery=st.booleans())
def test_add_part_is_the_encoders_where_it_writes_one(ledger, entry, key, body, recovery):
    got = C.add_part(ledger, entry, key, body, recovery)
    if not (0 <= ledger < 1 << 63 and 0 <= entry < 1 << 63 and len(key) < 0x80):
        assert got is None
        return
    assert got == ENC.add_part(ledger, entry, key, body, recovery)


def test_add_part_leaves_other_types_to_python():
    assert C.add_part(1, 2, bytearray(20), b"b", False) is None
    assert C.add_part(1, 2, bytes(20), memoryview(b"b"), False) is None
    assert C.add_part(1, False, bytes(20), b"b", False) is None


@settings(max_examples=300)
@given(
    txn=st.one_of(u64, ids),
    ledger=st.integers(0, (1 << 63) - 1),
    entry=st.integers(0, (1 << 63) - 1),
    body=st.binary(max_size=300),
)
def test_add_frame_is_the_framed_add_request_and_its_answers_header(txn, ledger, entry, body):
    key = bytes(range(20))
    part, _reply = ENC.add_part(ledger, entry, key, body)
    got = C.add_frame(txn, part)
    if not 0 <= txn < 1 << 64:
        assert got is None
        return
    payload = v3.serialize(v3.add_request(txn, ledger, entry, key, body))
    assert got == (struct.pack(">i", len(payload)) + payload, v3_fast.add_header_fields(txn)[1])


def read_answers(data) -> bytes:
    """A READ answer as a bookie writes one (or as the general parser would take it), maybe damaged."""
    txn, ledger, entry = data.draw(u64), data.draw(i64), data.draw(i64)
    body = data.draw(st.binary(max_size=400))
    head = v3_fast.add_header_fields(txn)[0].replace(b"\x10\x02", b"\x10\x01", 1)  # a READ's header field
    shape = data.draw(st.sampled_from(["bookie", "no-lac", "timestamp", "general"]))
    if shape == "general":
        req = v3.read_request(txn, ledger, entry)
        kw = {}
        if data.draw(st.booleans()):
            kw["max_lac"] = data.draw(i64)
        payload = v3.serialize(v3.read_response(req, 0, body, **kw))
    else:
        payload = v3_fast.read_answer(head, ledger, entry, body, data.draw(i64))
        if shape == "no-lac":
            payload = payload[: payload.rindex(b"\x28")]  # lengths now wrong: refused by both (or parsed)
        elif shape == "timestamp":
            payload += b"\x30" + bytes([0x81, 0x01])
    how = data.draw(st.sampled_from(["none", "flip", "cut", "grow", "random"]))
    if how == "flip" and payload:
        i = data.draw(st.integers(0, len(payload) - 1))
        payload = payload[:i] + bytes((payload[i] ^ data.draw(st.integers(1, 255)),)) + payload[i + 1 :]
    elif how == "cut" and payload:
        payload = payload[: data.draw(st.integers(0, len(payload) - 1))]
    elif how == "grow":
        payload += data.draw(st.binary(min_size=1, max_size=12))
    elif how == "random":
        payload = payload[: data.draw(st.integers(0, 12))] + data.draw(st.binary(max_size=40))
    return payload


@settings(max_examples=800, deadline=None)
@given(data=st.data())
def test_plain_read_body_is_the_python_one(data):
    payload = read_answers(data)
    pos = data.draw(st.one_of(st.just(2 + payload[1] if len(payload) > 1 else 0), st.integers(0, len(payload) + 2)))
    assert C.plain_read_body(payload, pos) == v3_fast.plain_read_body(payload, pos)


def test_plain_read_body_takes_a_bookies_answer_apart():
    payload = v3_fast.read_answer(b"\x0a\x06\x08\x03\x10\x01\x18\x07", 9, 4, b"entry", 3)
    assert C.plain_read_body(payload, 8) == b"entry" == v3_fast.plain_read_body(payload, 8)
    assert C.plain_read_body(payload + b"\x00", 8) is None
    assert C.plain_read_body(bytearray(payload), 8) is None  # not bytes: parsed instead


def test_the_connection_and_requests_use_the_c_twins_when_fast_paths_are_on():
    from bkctl.wire.client.connection import BookieConnection

    conn = BookieConnection("127.0.0.1:3181", reactor=object(), clock=object(), twins=fastpath.build(True))
    assert conn.twins.codec is C
    assert (conn.entries._c_read_frame is not None) == (C is not None)
    off = BookieConnection("127.0.0.1:3181", reactor=object(), clock=object(), twins=fastpath.build(False))
    assert off.twins.codec is None and off.entries._c_read_frame is None
