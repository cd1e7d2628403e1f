import pytest
from hypothesis import given
from hypothesis import strategies as st

from bkctl.wire.codecs import v2
from bkctl.wire.codecs.digest import DigestManager, DigestType, master_key
from bkctl.wire.codecs.framing import frame
from bkctl.wire.codecs.protocol import RC, Flag, OpCode
from bkctl.wire.errors import CodecError
from tests.support.golden import frames

V2_OPS = {
    "ADD": OpCode.ADD_ENTRY,
    "READ": OpCode.READ_ENTRY,
    "BATCH_READ": OpCode.BATCH_READ_ENTRY,
    "AUTH": OpCode.AUTH,
}


def v2_frames():
    return [f for f in frames() if f["proto"] == "v2"]


def test_vectors_cover_every_v2_kind():
    kinds = {(f["op"], f["kind"]) for f in v2_frames()}
    assert {
        ("ADD", "request"),
        ("ADD", "response"),
        ("READ", "request"),
        ("READ", "response"),
        ("BATCH_READ", "request"),
        ("BATCH_READ", "response"),
    } <= kinds


@pytest.mark.parametrize("f", v2_frames(), ids=lambda f: f["type"])
def test_java_frames_decode_to_their_stated_fields_and_reencode(f):
    raw = f["raw"]
    assert int.from_bytes(raw[:4], "big") == len(raw) - 4
    payload = raw[4:]
    decode = v2.decode_request if f["kind"] == "request" else v2.decode_response
    msg = decode(payload)
    assert msg.version == f["version"] == 2
    op = v2.unpack_header(int.from_bytes(payload[:4], "big", signed=True))[1]
    assert op == V2_OPS[f["op"]]
    if f["kind"] == "request":
        assert msg.flags == f["flags"]
    else:
        assert msg.rc == f["rc"]
    if "ledgerId" in f:
        assert msg.ledger_id == f["ledgerId"]
    if "entryId" in f:
        got = msg.start_entry_id if isinstance(msg, (v2.BatchReadRequest, v2.BatchReadResponse)) else msg.entry_id
        assert got == f["entryId"]
    assert frame(msg.encode()) == raw


def test_fencing_reads_carry_the_master_key():
    fencing = [
        v2.decode_request(f["raw"][4:])
        for f in v2_frames()
        if f["kind"] == "request" and f["op"] == "READ" and f["flags"] & Flag.DO_FENCING
    ]
    assert fencing
    for req in fencing:
        assert req.is_fencing and req.master_key == master_key(b"password")


def test_spec_worked_example_add():
    body = DigestManager(1, DigestType.CRC32C).package(0, -1, 5, b"hello")
    req = v2.AddRequest(2, 0, master_key(b""), body, 1, 0)
    assert frame(req.encode()).hex() == (
        "00000041"
        "02010000"
        "850bf1071c5e3d8c24235676f8816ae0cbe2f14f"
        "0000000000000001"
        "0000000000000000"
        "ffffffffffffffff"
        "0000000000000005"
        "e3a5f74d"
        "68656c6c6f"
    )
    assert v2.decode_request(req.encode()) == req
    assert frame(v2.add_response_for(req, RC.EOK)).hex() == "00000018020100000000000000000000000000010000000000000000"


def test_spec_worked_example_reads_and_auth():
    read = v2.ReadRequest(2, 0, 1, 0)
    assert frame(read.encode()).hex() == "000000140202000000000000000000010000000000000000"
    fence = v2.ReadRequest(2, 5, 1, -1, master_key(b""))
    assert frame(fence.encode()).hex() == (
        "00000028020200050000000000000001ffffffffffffffff850bf1071c5e3d8c24235676f8816ae0cbe2f14f"
    )
    auth = v2.AuthResponse(2, bytes.fromhex("0a124175746844697361626c6564506c7567696e1200"))
    assert frame(auth.encode()).hex() == "0000001a020300000a124175746844697361626c6564506c7567696e1200"


def test_version_zero_header_is_the_bare_opcode():
    assert v2.pack_header(0, OpCode.READ_ENTRY, 0) == 2
    assert v2.unpack_header(2) == (0, 2, 0)
    req = v2.decode_request(v2.ReadRequest(0, 0, 5, 6).encode())
    assert (req.version, req.ledger_id, req.entry_id) == (0, 5, 6)


def test_bad_version_decodes_so_the_bookie_can_answer_ebadversion():
    payload = bytearray(v2.ReadRequest(2, 0, 9, 1).encode())
    payload[0] = 0xF0  # negative version byte
    req = v2.decode_request(bytes(payload))
    assert req.version == -16 and not v2.is_supported_version(req.version)
    assert v2.decode_response(v2.ReadResponse(req.version, RC.EBADVERSION, 9, 1).encode()).version == -16
    payload[0] = 3
    assert not v2.is_supported_version(v2.decode_request(bytes(payload)).version)


def test_fencing_read_without_key_has_none():
    payload = v2.ReadRequest(2, Flag.DO_FENCING, 1, 0).encode()
    assert len(payload) == 20
    assert v2.decode_request(payload).master_key is None


@pytest.mark.parametrize("op", [4, 5, 6, 8, 99])
def test_opcodes_without_v2_layout_raise_unknown_opcode(op):
    with pytest.raises(v2.UnknownOpcode) as info:
        v2.decode_request(bytes([2, op, 0, 0]) + b"\x00" * 40)
    assert info.value.opcode == op


def test_batch_response_round_trip_and_truncation():
    resp = v2.BatchReadResponse(2, 0, 5, 0, 77, (b"a" * 10, b"", b"b" * 3))
    assert v2.decode_response(resp.encode()) == resp
    with pytest.raises(CodecError):
        v2.decode_response(resp.encode()[:-1])


def test_short_payloads_are_codec_errors():
    for payload in (
        b"",
        b"\x02\x01",
        b"\x02\x01\x00\x00" + b"k" * 20,
        b"\x02\x02\x00\x00" + b"\x00" * 8,
        b"\x02\x07\x00\x00" + b"\x00" * 20,
    ):
        with pytest.raises(CodecError):
            v2.decode_request(payload)


requests = st.one_of(
    st.builds(
        v2.AddRequest,
        st.integers(1, 2),
        st.integers(0, 7),
        st.binary(min_size=20, max_size=20),
        st.binary(min_size=16, max_size=100),
        st.just(0),
        st.just(0),
    ).map(
        lambda r: r._replace(
            ledger_id=int.from_bytes(r.body[:8], "big", signed=True),
            entry_id=int.from_bytes(r.body[8:16], "big", signed=True),
        )
    ),
    st.builds(
        v2.ReadRequest,
        st.just(2),
        st.sampled_from([0, 4]),
        st.integers(-(2**63), 2**63 - 1),
        st.integers(-1, 2**63 - 1),
        st.none(),
    ),
    st.builds(
        v2.ReadRequest,
        st.just(2),
        st.sampled_from([1, 5]),
        st.integers(0, 2**63 - 1),
        st.integers(-1, 2**63 - 1),
        st.binary(min_size=20, max_size=20),
    ),
    st.builds(
        v2.BatchReadRequest,
        st.just(2),
        st.just(0),
        st.integers(0, 2**63 - 1),
        st.integers(0, 2**63 - 1),
        st.integers(0, 2**63 - 1),
        st.integers(-(2**31), 2**31 - 1),
        st.integers(0, 2**63 - 1),
        st.none(),
    ),
)


@given(requests)
def test_request_round_trip(req):
    assert v2.decode_request(req.encode()) == req


@given(st.binary(max_size=120))
def test_random_bytes_raise_only_codec_errors(blob):
    for decode in (v2.decode_request, v2.decode_response):
        try:
            decode(blob)
        except CodecError:
            pass


@given(st.sampled_from(v2_frames()), st.data())
def test_truncated_and_bit_flipped_java_frames_raise_only_codec_errors(f, data):
    payload = bytearray(f["raw"][4:])
    cut = data.draw(st.integers(0, len(payload)))
    bit = data.draw(st.integers(0, len(payload) * 8 - 1))
    payload[bit // 8] ^= 1 << (bit % 8)
    decode = v2.decode_request if f["kind"] == "request" else v2.decode_response
    for candidate in (bytes(payload), bytes(payload[:cut])):
        try:
            decode(candidate)
        except CodecError:
            pass
