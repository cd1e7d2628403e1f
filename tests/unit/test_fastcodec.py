"""The C twins of the client's per-entry codecs (``_fastcodec.c``, recorded with their Python
twins as one interface: :mod:`bkctl.wire.codecs.codec_twins`) against their Python references:
the same bytes for everything they cover, their Python twin's answer or error for everything
else (handed to it: no caller sees a C twin decline), the same payloads and the same errors from
the digest check, for random and damaged input; and they are the ones in use when built and fast
paths are on.  With the C module not built the comparisons fail (tests/support/c_twins.py)."""

import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from bkctl.wire import fastpath
from bkctl.wire.codecs import codec_twins, v3, v3_fast
from bkctl.wire.codecs.digest import DigestManager, DigestType
from bkctl.wire.errors import DigestError
from tests.support import c_twins
from tests.support.crc_kinds import crc_kind  # noqa: F401 (a fixture)

#: the C twins as the selector records them (handed their Python twins), and their module
TWINS = fastpath.build(True).codec
C = TWINS.c
PY = codec_twins.PYTHON
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
    return dm.package(*args)  # the digest's own (Python) packaging


def same(fn, *args):
    """What ``fn(*args)`` gives, or the type and text of the error it raises."""
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # noqa: BLE001 - compared with the Python twin's
        return ("error", type(exc).__name__, str(exc))


# -- digests ------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(ledger=i64, entry=i64, lac=i64, length=i64, payload=st.binary(max_size=5000))
def test_package_is_the_python_package(crc_kind, ledger, entry, lac, length, payload):
    dm = DigestManager(ledger, DigestType.CRC32C)
    body = TWINS.crc32c_package(ledger, entry, lac, length, payload)
    assert (
        body
        == python_package(dm, entry, lac, length, payload)
        == PY.crc32c_package(ledger, entry, lac, length, payload)
    )
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
def test_package_hands_what_it_does_not_cover_to_its_python_twin(args):
    assert same(TWINS.crc32c_package, *args) == same(PY.crc32c_package, *args)


def test_a_crc32c_writer_packages_with_the_twin_in_use():
    dm = DigestManager(5, DigestType.CRC32C)
    assert dm.packager(TWINS) is TWINS.crc32c_package
    assert fastpath.build(False).codec is PY and dm.packager(PY) is PY.crc32c_package
    assert fastpath.selected().codec.c is (C if fastpath.selected().enabled else None)
    assert dm.packager(TWINS)(5, 1, 0, 10, b"0123456789") == python_package(dm, 1, 0, 10, b"0123456789")
    for other in (DigestType.CRC32, DigestType.MAC, DigestType.DUMMY):
        other_dm = DigestManager(5, other, b"pw")
        assert other_dm.packager(TWINS) == other_dm.package_of


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
    for make in (TWINS.crc32c_checker, PY.crc32c_checker):
        checker = make(ledger, dm.payload)
        assert outcome(checker, body, asked) == outcome(dm.payload, body, asked)


def test_checker_hands_other_shapes_to_the_python_check():
    dm = DigestManager(3, DigestType.CRC32C)
    body = python_package(dm, 4, 3, 2, b"ok")
    for make in (TWINS.crc32c_checker, PY.crc32c_checker):
        checker = make(3, dm.payload)
        assert checker(bytearray(body), 4) == b"ok"  # not bytes: the Python check takes it
        assert checker(memoryview(body), 4) == b"ok"
        assert outcome(checker, body, 1 << 70) == outcome(dm.payload, body, 1 << 70)
        with pytest.raises(TypeError):
            checker(body)


@pytest.mark.parametrize("ledger", [1 << 63, -(1 << 63) - 1, 1 << 70])
def test_a_checker_of_a_ledger_id_no_header_holds_hands_every_entry_to_the_python_check(ledger):
    dm = DigestManager(ledger, DigestType.CRC32C)
    bodies = [python_package(DigestManager(7, DigestType.CRC32C), 4, 3, 2, b"ok"), b"short"]
    for make in (TWINS.crc32c_checker, PY.crc32c_checker):
        checker = make(ledger, dm.payload)
        for body in bodies:
            assert outcome(checker, body, 4) == outcome(dm.payload, body, 4)


def test_payload_checker_is_the_twin_in_use_for_crc32c_with_fast_paths_on():
    dm = DigestManager(3, DigestType.CRC32C)
    assert isinstance(dm.payload_checker(TWINS, True), C.Crc32cChecker)
    assert not isinstance(DigestManager(3, DigestType.CRC32).payload_checker(TWINS, True), C.Crc32cChecker)
    assert dm.payload_checker(TWINS, False) == dm.payload
    assert dm.payload_checker(PY, False) == dm.payload


# -- v3 requests and answers --------------------------------------------------------


@settings(max_examples=500)
@given(txn=st.one_of(u64, ids), ledger=ids, entry=ids)
def test_read_frame_is_the_encoders(txn, ledger, entry):
    assert same(TWINS.read_frame, txn, ledger, entry) == same(ENC.read_frame, txn, ledger, entry)
    assert same(PY.read_frame, txn, ledger, entry) == same(ENC.read_frame, txn, ledger, entry)


def test_read_frame_hands_other_types_to_its_python_twin():
    for args in ((True, 1, 1), (1, 1.0, 1), (-1, 1, 1)):
        assert same(TWINS.read_frame, *args) == same(PY.read_frame, *args)


@settings(max_examples=300)
@given(ledger=ids, entry=ids, key=st.binary(max_size=130), body=st.binary(max_size=3000), recovery=st.booleans())
def test_add_part_is_the_encoders(ledger, entry, key, body, recovery):
    want = same(ENC.add_part, ledger, entry, key, body, recovery)
    assert same(TWINS.add_part, ledger, entry, key, body, recovery) == want
    assert same(PY.add_part, ledger, entry, key, body, recovery) == want


def test_add_part_hands_other_types_to_its_python_twin():
    for args in (
        (1, 2, bytearray(20), b"b", False),
        (1, 2, bytes(20), memoryview(b"b"), False),
        (1, False, bytes(20), b"b", False),
    ):
        assert same(TWINS.add_part, *args) == same(PY.add_part, *args)


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
    got = TWINS.add_frame(txn, part)
    assert got == PY.add_frame(txn, part)
    if not 0 <= txn < 1 << 64:
        assert got is None  # both twins: the request is built the general way
        return
    payload = v3.serialize(v3.add_request(txn, ledger, entry, key, body))
    assert got == (struct.pack(">i", len(payload)) + payload, v3_fast.add_header_fields(txn)[1])


def test_add_frame_hands_a_part_that_is_not_bytes_to_its_python_twin():
    part = bytearray(ENC.add_part(1, 2, bytes(20), b"b")[0])
    assert same(TWINS.add_frame, 5, part) == same(PY.add_frame, 5, part)
    assert same(TWINS.add_frame, 5, part)[0] == "ok"


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
    assert TWINS.plain_read_body(payload, pos) == v3_fast.plain_read_body(payload, pos)


def test_plain_read_body_takes_a_bookies_answer_apart():
    payload = v3_fast.read_answer(b"\x0a\x06\x08\x03\x10\x01\x18\x07", 9, 4, b"entry", 3)
    assert C.plain_read_body(payload, 8) == b"entry" == v3_fast.plain_read_body(payload, 8)
    assert C.plain_read_body(payload + b"\x00", 8) is None
    assert C.plain_read_body(bytearray(payload), 8) is None  # not bytes: parsed instead


def test_the_connection_and_requests_use_the_c_twins_when_fast_paths_are_on():
    from bkctl.wire.client.connection import BookieConnection

    conn = BookieConnection("127.0.0.1:3181", reactor=object(), clock=object(), twins=fastpath.build(True))
    assert conn.twins.codec.c is C
    assert conn.entries._read_frame == C.read_frame and conn.requests._take == C.take_answers
    off = BookieConnection("127.0.0.1:3181", reactor=object(), clock=object(), twins=fastpath.build(False))
    assert off.twins.codec is PY and off.entries._read_frame is PY.read_frame
