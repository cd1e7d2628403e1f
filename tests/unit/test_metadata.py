"""Ledger metadata serde (wire/metadata/ledger.py) against the Java golden vectors and the spec."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bkctl.wire.codecs.digest import DigestType
from bkctl.wire.errors import CodecError, MetadataError
from bkctl.wire.metadata.ledger import (
    CustomMetadata,
    LedgerMetadata,
    LedgerState,
    parse_ledger_metadata,
    read_format_version,
    serialize_ledger_metadata,
    write_set_indices,
)
from bkctl.wire.metadata.protobuf_text import message_to_text
from bkctl.wire.proto import formats_pb2
from tests.support.golden import VECTORS

RAW = VECTORS / "zk" / "raw"
B1, B2, B3 = "127.0.0.1:3181", "127.0.0.1:3182", "127.0.0.1:3183"


def raw_ledger(n: int) -> bytes:
    return (RAW / f"ledgers__00__0000__L{n:04d}.bin").read_bytes()


# (E, Qw, Qa, digest, password, state, last entry, length) from vectors/README.md;
# lengths are the sums of the payload sizes listed there.
GOLDEN = {
    0: (3, 2, 2, DigestType.CRC32C, b"password", LedgerState.CLOSED, 2, 21),
    1: (1, 1, 1, DigestType.CRC32C, b"password", LedgerState.OPEN, -1, 0),
    2: (1, 1, 1, DigestType.CRC32C, b"password", LedgerState.CLOSED, 0, 10),
    3: (3, 2, 2, DigestType.CRC32C, b"password", LedgerState.CLOSED, 2, 21),
    4: (1, 1, 1, DigestType.CRC32C, b"password", LedgerState.OPEN, -1, 0),
    5: (2, 2, 2, DigestType.CRC32C, b"password", LedgerState.CLOSED, 2, 21),
    6: (1, 1, 1, DigestType.CRC32, b"secret", LedgerState.CLOSED, 1, 22),
    7: (1, 1, 1, DigestType.CRC32, b"secret", LedgerState.CLOSED, 1, 22),
    8: (1, 1, 1, DigestType.CRC32C, b"secret", LedgerState.CLOSED, 1, 24),
    9: (1, 1, 1, DigestType.CRC32C, b"secret", LedgerState.CLOSED, 1, 24),
    10: (1, 1, 1, DigestType.MAC, b"secret", LedgerState.CLOSED, 1, 18),
    11: (1, 1, 1, DigestType.MAC, b"secret", LedgerState.CLOSED, 1, 18),
    12: (1, 1, 1, DigestType.DUMMY, b"secret", LedgerState.CLOSED, 1, 22),
    13: (1, 1, 1, DigestType.DUMMY, b"secret", LedgerState.CLOSED, 1, 22),
}

# LedgerMetadataSerDe's formats (BookKeeper's meta/LedgerMetadataSerDe.java), by example
SPEC_V1 = b"BookieMetadataFormatVersion\t1\n2\n3\n0\n0\t192.0.2.1:1234\t192.0.2.2:1234\t192.0.2.3:1234\n-102\tCLOSED"
SPEC_V2 = (
    b"BookieMetadataFormatVersion\t2\nquorumSize: 2\nensembleSize: 3\nlength: 0\nlastEntryId: -1\n"
    b'state: IN_RECOVERY\nsegment {\n  ensembleMember: "192.0.2.1:1234"\n'
    b'  ensembleMember: "192.0.2.2:1234"\n  ensembleMember: "192.0.2.3:1234"\n  firstEntryId: 0\n}\n'
    b'digestType: CRC32\npassword: "passwd"\nackQuorumSize: 2\n'
)
SPEC_V2_CTIME = SPEC_V2 + b"ctime: 1544002383075\n"
SPEC_V3 = bytes.fromhex(
    "426f6f6b69654d65746164617461466f726d617456657273696f6e0933"
    "0a"
    "60"
    "08021003180020ffffffffffffffffff01"
    "2801"
    "3232"
    "0a0e3139322e302e322e313a33313831"
    "0a0e3139322e302e322e323a33313831"
    "0a0e3139322e302e322e333a33313831"
    "1000"
    "3803"
    "4206666f6f626172"
    "4801"
    "50ffffffffffffffffff01"
    "6000"
)
SPEC_BOOKIES = ("192.0.2.1:1234", "192.0.2.2:1234", "192.0.2.3:1234")


# ---------------------------------------------------------------------------
# Golden vectors
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("n", sorted(GOLDEN))
def test_golden_ledger_values(n):
    md = parse_ledger_metadata(raw_ledger(n))
    e, qw, qa, digest, password, state, last, length = GOLDEN[n]
    assert (md.ensemble_size, md.write_quorum, md.ack_quorum) == (e, qw, qa)
    assert md.digest_type is digest
    assert md.password == password
    assert md.state is state
    assert (md.last_entry_id, md.length) == (last, length)
    assert md.format_version == 3
    assert md.ctime is None  # 4.17 does not store ctime by default
    assert len(md.ensembles) == 1 and md.ensembles[0][0] == 0
    assert len(md.ensembles[0][1]) == e
    assert md.custom_metadata == {}


@pytest.mark.parametrize("n", sorted(GOLDEN))
def test_golden_ledger_reserializes_byte_identical(n):
    data = raw_ledger(n)
    assert serialize_ledger_metadata(parse_ledger_metadata(data)) == data


def test_golden_jsonl_hex_matches_raw_for_ledgers():
    for line in (VECTORS / "zk" / "znodes.jsonl").read_text().splitlines():
        item = json.loads(line)
        if "/L00" in item["path"]:
            name = item["path"].lstrip("/").replace("/", "__") + ".bin"
            assert bytes.fromhex(item["hex"]) == (RAW / name).read_bytes()


def test_golden_l0000_details():
    md = parse_ledger_metadata(raw_ledger(0))
    assert md.ensembles == ((0, (B3, B2, B1)),)
    assert md.is_closed and not md.is_open
    assert md.ctoken == 0
    # E3/Qw2 striping: entry e goes to indexes e%3 and (e+1)%3
    assert md.write_set(0) == [B3, B2]
    assert md.write_set(1) == [B2, B1]
    assert md.write_set(2) == [B1, B3]
    assert set(md.bookies) == {B1, B2, B3}


def test_golden_open_ledgers_carry_ctoken():
    assert parse_ledger_metadata(raw_ledger(1)).ctoken == 2425778063248513967
    assert parse_ledger_metadata(raw_ledger(4)).ctoken == 3353622239634614540


def test_build_golden_open_ledger_from_scratch():
    md = LedgerMetadata.new([B2], 1, 1, digest_type=DigestType.CRC32C, password=b"password", ctoken=2425778063248513967)
    assert serialize_ledger_metadata(md) == raw_ledger(1)


def test_build_golden_closed_ledgers_by_transitions():
    # writer closes its own ledger: Java's builder drops the cToken on update
    md = LedgerMetadata.new([B2], 1, 1, password=b"password", ctoken=12345).closed(0, 10)
    assert md.ctoken == 0
    assert serialize_ledger_metadata(md) == raw_ledger(2)
    # recovery: IN_RECOVERY then CLOSED
    md = LedgerMetadata.new([B3, B2, B1], 2, 2, password=b"password", ctoken=99)
    recovering = md.in_recovery()
    assert recovering.state is LedgerState.IN_RECOVERY
    assert serialize_ledger_metadata(recovering.closed(2, 21)) == raw_ledger(0)
    md = LedgerMetadata.new([B3], 1, 1, digest_type=DigestType.MAC, password=b"secret")
    assert serialize_ledger_metadata(md.closed(1, 18)) == raw_ledger(11)


# ---------------------------------------------------------------------------
# The spec's examples (v1, v2, v3)
# ---------------------------------------------------------------------------
def test_spec_v1_example():
    md = parse_ledger_metadata(SPEC_V1)
    assert md.format_version == 1
    assert (md.ensemble_size, md.write_quorum, md.ack_quorum) == (3, 2, 2)
    assert md.state is LedgerState.IN_RECOVERY
    assert md.digest_type is None and md.password is None
    assert md.ensembles == ((0, SPEC_BOOKIES),)
    assert serialize_ledger_metadata(md) == SPEC_V1
    built = LedgerMetadata.new(SPEC_BOOKIES, 2, format_version=1).in_recovery()
    assert serialize_ledger_metadata(built) == SPEC_V1


def test_v1_closed_and_open_forms():
    md = LedgerMetadata.new(SPEC_BOOKIES, 2, format_version=1)
    open_bytes = serialize_ledger_metadata(md)
    assert open_bytes.endswith(b"192.0.2.3:1234\n")
    assert parse_ledger_metadata(open_bytes) == md
    closed = md.with_ensemble_change(5, ("192.0.2.4:1", "192.0.2.2:1234", "192.0.2.3:1234")).closed(7, 99)
    data = serialize_ledger_metadata(closed)
    assert data.endswith(b"\n5\t192.0.2.4:1\t192.0.2.2:1234\t192.0.2.3:1234\n7\tCLOSED")
    assert b"\n99\n" in data
    assert parse_ledger_metadata(data) == closed


def test_spec_v2_example():
    md = parse_ledger_metadata(SPEC_V2)
    assert md.format_version == 2
    assert md.state is LedgerState.IN_RECOVERY
    assert md.digest_type is DigestType.CRC32 and md.password == b"passwd"
    assert md.ctime is None
    assert serialize_ledger_metadata(md) == SPEC_V2
    built = LedgerMetadata.new(
        SPEC_BOOKIES, 2, 2, digest_type=DigestType.CRC32, password=b"passwd", format_version=2
    ).in_recovery()
    assert serialize_ledger_metadata(built) == SPEC_V2


def test_spec_v2_example_with_ctime():
    md = parse_ledger_metadata(SPEC_V2_CTIME)
    assert md.ctime == 1544002383075
    assert serialize_ledger_metadata(md) == SPEC_V2_CTIME


def test_v2_never_writes_ctoken_and_updates_keep_format():
    md = parse_ledger_metadata(SPEC_V2).closed(10, 100)
    assert md.format_version == 2
    data = serialize_ledger_metadata(md)
    assert data.startswith(b"BookieMetadataFormatVersion\t2\n")
    assert b"cToken" not in data
    assert b"state: CLOSED\n" in data and b"lastEntryId: 10\n" in data


def test_spec_v3_example():
    md = parse_ledger_metadata(SPEC_V3)
    assert md.state is LedgerState.OPEN
    assert (md.ensemble_size, md.write_quorum, md.ack_quorum) == (3, 2, 1)
    assert md.digest_type is DigestType.CRC32C and md.password == b"foobar"
    assert md.ctime == -1 and md.ctoken == 0
    assert serialize_ledger_metadata(md) == SPEC_V3
    assert SPEC_V3[30] == 96 == len(SPEC_V3) - 31  # the varint32 body length
    built = LedgerMetadata.new(
        ("192.0.2.1:3181", "192.0.2.2:3181", "192.0.2.3:3181"), 2, 1, password=b"foobar", ctime=-1
    )
    assert serialize_ledger_metadata(built) == SPEC_V3


def test_format_conversion_and_explicit_version():
    md = parse_ledger_metadata(SPEC_V3)
    as_v2 = serialize_ledger_metadata(md, 2)
    back = parse_ledger_metadata(as_v2)
    assert back.with_format_version(3) == md
    assert read_format_version(as_v2) == (2, len(b"BookieMetadataFormatVersion\t2\n"))


def test_custom_metadata_roundtrip_and_text_escapes():
    md = LedgerMetadata.new(
        [B1], custom_metadata={"app": b"pulsar", "k\u00e9y": b"\x00\x07\x08\x0b\x0c\xff'\""}, format_version=2
    )
    data = serialize_ledger_metadata(md)
    # protobuf-java escapes: named \a \b \v \f, octal for the rest, UTF-8 bytes of strings in octal
    assert b'customMetadata {\n  key: "app"\n  value: "pulsar"\n}\n' in data
    assert b'key: "k\\303\\251y"\n  value: "\\000\\a\\b\\v\\f\\377\\\'\\""\n' in data
    assert parse_ledger_metadata(data) == md
    v3 = serialize_ledger_metadata(md, 3)
    assert parse_ledger_metadata(v3).custom_metadata == md.custom_metadata


def test_message_to_text_matches_python_for_plain_messages():
    from google.protobuf import text_format

    pb = formats_pb2.LedgerMetadataFormat(quorumSize=2, ensembleSize=3, length=5, state=3, lastEntryId=4)
    seg = pb.segment.add()
    seg.ensembleMember.extend(["a:1", "b:2", "c:3"])
    seg.firstEntryId = 0
    assert message_to_text(pb) == text_format.MessageToString(pb)


# ---------------------------------------------------------------------------
# Object behaviour
# ---------------------------------------------------------------------------
def three_segment_ledger() -> LedgerMetadata:
    return (
        LedgerMetadata.new(["a:1", "b:1", "c:1"], 2, 2)
        .with_ensemble_change(10, ["a:1", "d:1", "c:1"])
        .with_ensemble_change(20, ["e:1", "d:1", "c:1"])
    )


def test_ensemble_at_picks_largest_first_entry_not_above():
    md = three_segment_ledger()
    assert md.ensemble_at(0) == ("a:1", "b:1", "c:1")
    assert md.ensemble_at(9) == ("a:1", "b:1", "c:1")
    assert md.ensemble_at(10) == ("a:1", "d:1", "c:1")
    assert md.ensemble_at(19) == ("a:1", "d:1", "c:1")
    assert md.ensemble_at(10**12) == ("e:1", "d:1", "c:1")
    assert md.bookies == ("a:1", "b:1", "c:1", "d:1", "e:1")
    assert md.write_set(20) == ["c:1", "e:1"]  # 20 % 3 = 2 -> indexes 2, 0
    assert md.write_set(21) == ["e:1", "d:1"]
    with pytest.raises(MetadataError):
        md.ensemble_at(-1)


def test_segment_ranges():
    md = three_segment_ledger()
    assert [(f, l) for f, l, _ in md.segment_ranges()] == [(0, 9), (10, 19), (20, None)]
    assert [(f, l) for f, l, _ in md.closed(25, 1).segment_ranges()][-1] == (20, 25)


def test_write_set_uses_java_32bit_truncation():
    # Below 2^31 it is the plain round robin.
    assert write_set_indices(7, 3, 3) == [1, 2, 0]
    # Java: (int)(entryId + i) % E. 2^32 truncates to 0 although 2^32 % 3 == 1.
    assert write_set_indices(2**32, 3, 2) == [0, 1]
    assert write_set_indices(2**32 + 5, 3, 2) == [2, 0]
    # Negative truncated values (Java would fail) are folded to a valid index.
    assert all(0 <= i < 3 for i in write_set_indices(2**31, 3, 3))


def test_ensemble_change_replaces_empty_last_segment():
    md = LedgerMetadata.new(["a:1", "b:1"], 2, 1).with_ensemble_change(5, ["a:1", "c:1"])
    again = md.with_ensemble_change(5, ["a:1", "d:1"])
    assert again.ensembles == ((0, ("a:1", "b:1")), (5, ("a:1", "d:1")))
    with pytest.raises(MetadataError, match="precedes"):
        md.with_ensemble_change(4, ["a:1", "e:1"])
    with pytest.raises(MetadataError, match="closed"):
        md.closed(7, 70).with_ensemble_change(8, ["a:1", "e:1"])


def test_transitions_are_checked_and_return_new_objects():
    md = LedgerMetadata.new(["a:1", "b:1", "c:1"], 2, 2, password=b"pw", ctoken=7)
    closed = md.closed(4, 40)
    assert md.is_open and closed.is_closed and md.ctoken == 7
    with pytest.raises(MetadataError, match="already closed"):
        closed.closed(5, 50)
    with pytest.raises(MetadataError, match="closed"):
        closed.in_recovery()
    assert md.in_recovery().in_recovery().is_in_recovery
    swapped = closed.replace_bookie(0, "b:1", "z:1")
    assert swapped.ensembles == ((0, ("a:1", "z:1", "c:1")),) and swapped.is_closed
    with pytest.raises(MetadataError, match="no ensemble starts at entry 3"):
        closed.replace_bookie(3, "b:1", "z:1")
    with pytest.raises(MetadataError, match="not in the ensemble"):
        closed.replace_bookie(0, "q:1", "z:1")
    with pytest.raises(MetadataError, match="already in the ensemble"):
        closed.replace_bookie(0, "b:1", "c:1")


def test_hashable_and_custom_metadata_is_immutable_mapping():
    md = LedgerMetadata.new(["a:1"], custom_metadata={"x": b"1", "y": b"2"})
    assert hash(md) == hash(LedgerMetadata.new(["a:1"], custom_metadata={"y": b"2", "x": b"1"}))
    assert md.custom_metadata == {"x": b"1", "y": b"2"}
    assert isinstance(md.custom_metadata, CustomMetadata)
    assert md.custom_metadata["x"] == b"1" and list(md.custom_metadata) == ["x", "y"]
    with pytest.raises(TypeError):
        md.custom_metadata["z"] = b"3"  # type: ignore[index]
    assert {md: 1}[md] == 1


def test_creation_time_falls_back_to_znode_ctime():
    md = parse_ledger_metadata(raw_ledger(1))
    assert md.creation_time(1700000000000) == 1700000000000
    assert parse_ledger_metadata(SPEC_V2_CTIME).creation_time(1) == 1544002383075


# ---------------------------------------------------------------------------
# Validation messages
# ---------------------------------------------------------------------------
def make(**kw):
    args = dict(
        ensemble_size=3,
        write_quorum=2,
        ack_quorum=2,
        state=LedgerState.OPEN,
        last_entry_id=-1,
        length=0,
        ensembles=((0, ("a:1", "b:1", "c:1")),),
    )
    args.update(kw)
    return LedgerMetadata(**args)


@pytest.mark.parametrize(
    "e,qw,qa",
    [(2, 3, 2), (3, 2, 3), (3, 3, 0), (0, 0, 0), (3, -1, -2)],
)
def test_quorum_validation_names_values(e, qw, qa):
    with pytest.raises(MetadataError) as info:
        make(ensemble_size=e, write_quorum=qw, ack_quorum=qa)
    msg = str(info.value)
    assert f"ensemble size {e}" in msg and f"write quorum {qw}" in msg and f"ack quorum {qa}" in msg


@pytest.mark.parametrize(
    "ensembles,pattern",
    [
        ((), "at least one ensemble"),
        (((0, ("a:1", "b:1")),), "has 2 bookies, expected ensemble size 3"),
        (((0, ("a:1", "b:1", "a:1")),), "lists bookie a:1 more than once"),
        (((3, ("a:1", "b:1", "c:1")),), "must start at entry 0, not 3"),
        (((0, ("a:1", "b:1", "c:1")), (0, ("a:1", "b:1", "d:1"))), "must ascend: 0 follows 0"),
        (((0, ("a:1", "b:1", "c:1")), (9, ("a:1", "b:1", "d:1")), (4, ("a:1", "b:1", "e:1"))), "4 follows 9"),
        (((0, ("a:1", "", "c:1")),), "invalid bookie id"),
        (((0, "abc"),), "not a string"),
    ],
)
def test_ensemble_validation(ensembles, pattern):
    with pytest.raises(MetadataError, match=pattern):
        make(ensembles=ensembles)


def test_state_and_id_validation():
    with pytest.raises(MetadataError, match="unknown ledger state"):
        make(state=9)
    with pytest.raises(MetadataError, match="only CLOSED sets them"):
        make(last_entry_id=5)
    with pytest.raises(MetadataError, match="last entry id -2"):
        make(state=LedgerState.CLOSED, last_entry_id=-2)
    with pytest.raises(MetadataError, match="unsupported metadata format version"):
        make(format_version=4)
    assert make(state=3, last_entry_id=-1).is_closed  # an empty closed ledger
    assert make(ensembles=[[0, ["a:1", "b:1", "c:1"]]]).ensembles == ((0, ("a:1", "b:1", "c:1")),)


def test_parse_turns_invalid_metadata_into_codec_error():
    pb = formats_pb2.LedgerMetadataFormat(quorumSize=3, ensembleSize=2, length=0, state=1)
    seg = pb.segment.add()
    seg.ensembleMember.extend(["a:1", "b:1"])
    seg.firstEntryId = 0
    data = b"BookieMetadataFormatVersion\t2\n" + message_to_text(pb).encode()
    with pytest.raises(CodecError, match="write quorum 3"):
        parse_ledger_metadata(data)


@pytest.mark.parametrize(
    "data,pattern",
    [
        (b"", "header corrupt"),
        (b"BookieMetadataFormatVersion\t", "no end of the version"),
        (b"BookieMetadataFormatVersion\t12345678901\n", "no end of the version"),
        (b"BookieMetadataFormatVersion\tx\n", "bad version number"),
        (b"BookieMetadataFormatVersion\t4\n", "not supported"),
        (b"BookieMetadataFormatVersion\t3\n", "length prefix"),
        (b"BookieMetadataFormatVersion\t3\n\x05\x08", "length prefix says 5"),
        (b"BookieMetadataFormatVersion\t3\n\x02\x08\x01", "required"),
        (b"BookieMetadataFormatVersion\t2\nquorumSize: x\n", "format 2"),
        (b"BookieMetadataFormatVersion\t2\nquorumSize: 1\n", "required"),
        (b"BookieMetadataFormatVersion\t1\n1\n", "truncated"),
        (b"BookieMetadataFormatVersion\t1\n1\n1\n0\n0\n", "malformed line"),
    ],
)
def test_malformed_values(data, pattern):
    with pytest.raises(CodecError, match=pattern):
        parse_ledger_metadata(data)


def test_non_closed_values_ignore_stored_last_entry_like_java():
    pb = formats_pb2.LedgerMetadataFormat(quorumSize=1, ensembleSize=1, length=55, lastEntryId=9, state=2)
    seg = pb.segment.add()
    seg.ensembleMember.append("a:1")
    seg.firstEntryId = 0
    body = pb.SerializeToString()
    md = parse_ledger_metadata(b"BookieMetadataFormatVersion\t3\n" + bytes([len(body)]) + body)
    assert (md.last_entry_id, md.length, md.state) == (-1, 0, LedgerState.IN_RECOVERY)
    assert md.password is None and md.digest_type is None  # only read with a password


# ---------------------------------------------------------------------------
# Property tests
# ---------------------------------------------------------------------------
bookie_ids = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
v1_bookie_ids = st.from_regex(r"[A-Za-z0-9.\-]{1,10}:[0-9]{1,5}", fullmatch=True)
int64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def ledger_metadata(draw, fmt=None, ids=bookie_ids):
    fmt = draw(st.sampled_from([2, 3])) if fmt is None else fmt
    e = draw(st.integers(1, 5))
    qw = draw(st.integers(1, e))
    qa = qw if fmt == 1 else draw(st.integers(1, qw))
    n_seg = draw(st.integers(1, 4))
    firsts = [0] + sorted(draw(st.sets(st.integers(1, 2**62), min_size=n_seg - 1, max_size=n_seg - 1)))
    segs = tuple((f, tuple(draw(st.lists(ids, min_size=e, max_size=e, unique=True)))) for f in firsts)
    state = draw(st.sampled_from(list(LedgerState)))
    last, length = (-1, 0)
    if state is LedgerState.CLOSED:
        last = draw(st.integers(-1, 2**63 - 1))
        length = draw(st.integers(0, 2**63 - 1))
    extra = {}
    if fmt != 1:
        extra = dict(
            digest_type=draw(st.sampled_from(list(DigestType))),
            password=draw(st.binary(max_size=20)),
            ctime=draw(st.none() | int64),
            custom_metadata=draw(st.dictionaries(st.text(max_size=8), st.binary(max_size=8), max_size=3)),
            ctoken=draw(int64) if fmt == 3 else 0,
        )
    return LedgerMetadata(e, qw, qa, state, last, length, segs, format_version=fmt, **extra)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(ledger_metadata())
def test_roundtrip_formats_2_and_3(md):
    data = serialize_ledger_metadata(md)
    back = parse_ledger_metadata(data)
    assert back == md
    assert serialize_ledger_metadata(back) == data


@settings(max_examples=150)
@given(ledger_metadata(fmt=1, ids=v1_bookie_ids))
def test_roundtrip_format_1(md):
    data = serialize_ledger_metadata(md)
    assert parse_ledger_metadata(data) == md


def _only_codec_error(data: bytes) -> None:
    try:
        parse_ledger_metadata(data)
    except CodecError:
        pass


@settings(max_examples=500)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_codec_error(data):
    _only_codec_error(data)


@settings(max_examples=500)
@given(st.sampled_from([1, 2, 3]), st.binary(max_size=150))
def test_random_bodies_raise_only_codec_error(version, body):
    _only_codec_error(b"BookieMetadataFormatVersion\t%d\n" % version + body)


@settings(max_examples=300)
@given(st.sampled_from([1, 2, 3]), st.text(max_size=150))
def test_random_text_bodies_raise_only_codec_error(version, body):
    _only_codec_error(b"BookieMetadataFormatVersion\t%d\n" % version + body.encode("utf-8", "surrogatepass"))


GOLDEN_SAMPLES = [raw_ledger(n) for n in (0, 1, 5)] + [SPEC_V1, SPEC_V2_CTIME, SPEC_V3]


@settings(max_examples=500)
@given(st.sampled_from(GOLDEN_SAMPLES), st.data())
def test_truncated_golden_raises_only_codec_error(sample, data):
    cut = data.draw(st.integers(0, len(sample) - 1))
    _only_codec_error(sample[:cut])


@settings(max_examples=1000)
@given(st.sampled_from(GOLDEN_SAMPLES), st.data())
def test_bit_flipped_golden_raises_only_codec_error(sample, data):
    buf = bytearray(sample)
    for _ in range(data.draw(st.integers(1, 3))):
        bit = data.draw(st.integers(0, len(buf) * 8 - 1))
        buf[bit // 8] ^= 1 << (bit % 8)
    _only_codec_error(bytes(buf))


def test_truncated_golden_v3_always_fails():
    data = raw_ledger(0)
    for cut in range(len(data)):
        with pytest.raises(CodecError):
            parse_ledger_metadata(data[:cut])


@pytest.mark.parametrize("format_version", [1, 2, 3])
def test_a_value_without_ctime_shows_the_znode_ctime_when_the_reader_gives_it(format_version):
    from bkctl.wire.metadata.store import with_znode_ctime

    md = LedgerMetadata.new(["127.0.0.1:3181", "127.0.0.1:3182"], format_version=format_version)
    data = serialize_ledger_metadata(md)
    assert parse_ledger_metadata(data).ctime is None
    read = parse_ledger_metadata(data, znode_ctime=1_700_000_000_123)
    assert read.ctime == 1_700_000_000_123
    assert read == with_znode_ctime(parse_ledger_metadata(data), 1_700_000_000_123)
    if format_version != 1:  # format 1 stores no ctime: the znode's it is
        stored = serialize_ledger_metadata(
            LedgerMetadata.new(["127.0.0.1:3181"], ctime=5, format_version=format_version)
        )
        assert parse_ledger_metadata(stored, znode_ctime=7).ctime == 5
