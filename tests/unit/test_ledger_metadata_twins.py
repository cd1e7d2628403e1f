"""The C twin of decoding ledger metadata (wire/metadata/_ledgerpb.c: a format-3 value's
header, length prefix and protobuf, decoded and checked) gives exactly the LedgerMetadata
the general path gives (protobuf's message and LedgerMetadata's own checks), or hands the
value to the general path, which decodes and judges: on Java's own bytes (tests/vectors/zk),
on any metadata we write, on the fuzz corpus, on every cut and flipped byte of them, and on
values that break one of LedgerMetadata's invariants.  With fast paths off there is no C
twin, and the general path alone decodes (the rest of the suite runs both ways)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bkctl.wire import fastpath
from bkctl.wire.codecs import varint
from bkctl.wire.errors import CodecError
from bkctl.wire.metadata import ledger as L
from bkctl.wire.metadata.ledger import parse_ledger_metadata, serialize_ledger_metadata
from bkctl.wire.proto import formats_pb2
from tests.support import c_twins
from tests.support.golden import VECTORS
from tests.unit.test_metadata import ledger_metadata

TWINS = fastpath.build(True).ledger_metadata
pytestmark = c_twins.needs_c(TWINS.c, "bkctl.wire.metadata._ledgerpb")
#: what the C twin hands the general path (``fallback``) instead of building the values it checked
LEFT = object()


def METADATA(data: bytes) -> tuple | None:  # noqa: N802 (the C twin's own values)
    """The values the C twin decoded and checked of ``data`` (CheckedMetadata's layout), or None
    where it hands ``data`` to the general path."""
    assert TWINS.c is not None
    got = TWINS.c.metadata(lambda value, znode_ctime: LEFT, lambda values, znode_ctime: values, data, None)
    return None if got is LEFT else got


JAVA_WRITTEN = sorted((VECTORS / "zk" / "raw").glob("ledgers__*__L*.bin"))
CORPUS = sorted((VECTORS.parent / "fuzz_corpus" / "ledger_metadata").iterdir())
HEADER = b"BookieMetadataFormatVersion\t3\n"


def _general(data: bytes, znode_ctime: int | None = None) -> L.LedgerMetadata | None:
    """The general path alone (the Python twin), or None where it refuses the value."""
    try:
        return parse_ledger_metadata(data, znode_ctime)
    except CodecError:
        return None


def _twin(data: bytes, znode_ctime: int | None = None) -> L.LedgerMetadata | None:
    """The C twin whole (what it hands the general path included), or None where it refuses the value."""
    try:
        return TWINS.parse(data, znode_ctime)
    except CodecError:
        return None


def _built(data: bytes, znode_ctime: int | None) -> L.LedgerMetadata:
    """What the C twin builds of ``data``, which it covers (the general path is not asked)."""
    assert METADATA(data) is not None, "the C twin leaves it to the general path"
    return TWINS.parse(data, znode_ctime)


def _agree(data: bytes) -> None:
    checked = METADATA(data)
    if checked is not None:  # None: not covered, the general path decodes and judges
        md = _built(data, None)
        assert md == _general(data)
        assert md.__dict__ == _general(data).__dict__  # the same types too (enums, tuples, bytes)
    whole = _twin(data)
    assert whole == _general(data) and (whole is None or whole.__dict__ == _general(data).__dict__)


def _value(pb: formats_pb2.LedgerMetadataFormat) -> bytes:
    body = pb.SerializeToString()
    return HEADER + varint.encode(len(body)) + body


def _java_message() -> formats_pb2.LedgerMetadataFormat:
    data = serialize_ledger_metadata(L.LedgerMetadata.new(["b1:1", "b2:2", "b3:3"], 2, 2, password=b"pw"))
    _size, pos = varint.decode_at(data, len(HEADER))
    pb = formats_pb2.LedgerMetadataFormat()
    pb.ParseFromString(data[pos:])
    return pb


def test_java_written_metadata_decodes_the_same_in_c():
    assert JAVA_WRITTEN, "tests/vectors/zk/raw holds Java's ledger znodes"
    covered = 0
    for path in JAVA_WRITTEN:
        data = path.read_bytes()
        checked = METADATA(data)
        if data.startswith(HEADER):
            assert checked is not None, path.name
            covered += 1
        if checked is not None:
            assert _built(data, 5) == _general(data, 5), path.name
    assert covered


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(ledger_metadata(fmt=3), st.one_of(st.none(), st.integers(0, 2**62)))
def test_any_metadata_we_write_decodes_the_same_in_c(md, znode_ctime):
    data = serialize_ledger_metadata(md)
    checked = METADATA(data)
    assert checked is not None
    assert _built(data, znode_ctime) == _general(data, znode_ctime)
    assert parse_ledger_metadata(data) == md == TWINS.parse(data, None)


def test_every_cut_and_flipped_byte_either_decodes_the_same_or_is_left_to_the_general_path():
    samples = [p.read_bytes() for p in JAVA_WRITTEN[:4]] + [p.read_bytes() for p in CORPUS]
    for data in samples:
        for cut in range(len(data)):
            _agree(data[:cut])
        for i in range(len(HEADER) - 2, len(data)):
            for flip in (0x01, 0x80, 0xFF):
                _agree(data[:i] + bytes([data[i] ^ flip]) + data[i + 1 :])


@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_crash_the_c_twin(body):
    _agree(HEADER + varint.encode(len(body)) + body)
    _agree(body)


def _broken(change) -> bytes:
    pb = _java_message()
    change(pb)
    return _value(pb)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda pb: setattr(pb, "ackQuorumSize", 3), id="ack quorum above the write quorum"),
        pytest.param(lambda pb: setattr(pb, "quorumSize", 4), id="write quorum above the ensemble"),
        pytest.param(lambda pb: setattr(pb, "ackQuorumSize", 0), id="ack quorum 0"),
        pytest.param(lambda pb: pb.segment[0].ensembleMember.append("b4:4"), id="an ensemble too large"),
        pytest.param(lambda pb: pb.segment[0].ensembleMember.__setitem__(2, "b1:1"), id="a bookie twice"),
        pytest.param(lambda pb: pb.segment[0].ensembleMember.__setitem__(1, ""), id="an empty bookie id"),
        pytest.param(lambda pb: setattr(pb.segment[0], "firstEntryId", 3), id="the first segment after entry 0"),
        pytest.param(lambda pb: pb.ClearField("segment"), id="no segment"),
        pytest.param(
            lambda pb: pb.segment.add(firstEntryId=0, ensembleMember=["b1:1", "b2:2", "b4:4"]),
            id="segments not ascending",
        ),
        pytest.param(
            lambda pb: (setattr(pb, "state", formats_pb2.LedgerMetadataFormat.CLOSED), setattr(pb, "length", -5)),
            id="a negative length",
        ),
        pytest.param(
            lambda pb: (setattr(pb, "state", formats_pb2.LedgerMetadataFormat.CLOSED), setattr(pb, "lastEntryId", -2)),
            id="a last entry below -1",
        ),
    ],
)
def test_a_broken_invariant_is_left_to_the_general_path_which_refuses_it(change):
    data = _broken(change)
    assert METADATA(data) is None
    for parse in (parse_ledger_metadata, TWINS.parse):
        with pytest.raises(CodecError, match="invalid ledger metadata"):
            parse(data, None)


def test_an_open_ledgers_stored_last_entry_and_length_are_ignored_as_java_does():
    data = _broken(lambda pb: (setattr(pb, "lastEntryId", 9), setattr(pb, "length", 90)))
    md = _built(data, None)
    assert (md.last_entry_id, md.length) == (-1, 0)
    assert md == _general(data)


def test_odd_values_are_left_to_the_general_path():
    md = L.LedgerMetadata.new(["127.0.0.1:3181"], password=b"pw")
    data = bytearray(serialize_ledger_metadata(md))
    state_at = data.index(bytes([5 << 3]), len(HEADER) + 1)  # field 5 (state), a varint
    data[state_at + 1] = 7  # a state the schema lacks
    assert METADATA(bytes(data)) is None
    assert METADATA(HEADER + b"\x02\x08\x01") is None  # required fields missing
    assert METADATA(b"BookieMetadataFormatVersion\t03\n" + bytes(data[len(HEADER) :])) is None
    assert METADATA(HEADER + b"\x05\x08\x01") is None  # a length prefix that is not what follows
    for parse in (parse_ledger_metadata, TWINS.parse):
        with pytest.raises(CodecError, match="lacks required"):
            parse(HEADER + b"\x02\x08\x01", None)
    with pytest.raises(CodecError, match="must be bytes, not str"):
        TWINS.parse("not bytes", None)  # type: ignore[arg-type]
    assert TWINS.parse(bytearray(serialize_ledger_metadata(md)), 5) == parse_ledger_metadata(
        serialize_ledger_metadata(md), 5
    )


def test_the_store_decoder_is_the_c_twin_when_built_and_fast_paths_are_on():
    assert fastpath.build(False).ledger_metadata is L.PYTHON
    assert L.PYTHON.parse is parse_ledger_metadata
    on = fastpath.build(True).ledger_metadata
    assert on.c is TWINS.c and on.parse.func is TWINS.c.metadata
