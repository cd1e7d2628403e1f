"""The C twin of ledger metadata's protobuf decoding (wire/metadata/_ledgerpb.c) gives what
protobuf's message gives (ledger._proto_fields), or None where the general path must judge:
on Java's own bytes (tests/vectors/zk), on any metadata we write, on the fuzz corpus, and on
every cut and flipped byte of them.  With fast paths off there is no C twin, and the general
path alone decodes (the rest of the suite runs both ways)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bkctl.wire import fastpath
from bkctl.wire.metadata import ledger as L
from bkctl.wire.metadata.ledger import parse_ledger_metadata, read_format_version, serialize_ledger_metadata
from tests.support.golden import VECTORS
from tests.unit.test_metadata import ledger_metadata

FIELDS = fastpath.build(True).ledger_metadata_fields
pytestmark = pytest.mark.skipif(FIELDS is None, reason="the C twin _ledgerpb was not built (no C compiler)")

JAVA_WRITTEN = sorted((VECTORS / "zk" / "raw").glob("ledgers__*__L*.bin"))
CORPUS = sorted((VECTORS.parent / "fuzz_corpus" / "ledger_metadata").iterdir())


def _body(data: bytes) -> bytes | None:
    version, offset = read_format_version(data)
    if version != 3:
        return None
    size, pos = L._decode_varint32(data, offset)
    return data[pos:]


def _general(body: bytes) -> tuple | None:
    pb = L._PB()
    try:
        pb.ParseFromString(body)
    except Exception:  # noqa: BLE001 - malformed: the general path raises
        return None
    if not pb.IsInitialized():
        return None
    return tuple(L._proto_fields(pb))


def _agree(body: bytes) -> None:
    fast = FIELDS(body)
    if fast is not None:  # None: not covered, the general path decodes and judges
        assert fast == _general(body)


def test_java_written_metadata_decodes_the_same_in_c():
    assert JAVA_WRITTEN, "tests/vectors/zk/raw holds Java's ledger znodes"
    for path in JAVA_WRITTEN:
        body = _body(path.read_bytes())
        if body is not None:
            assert FIELDS(body) is not None and FIELDS(body) == _general(body), path.name


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(ledger_metadata(fmt=3))
def test_any_metadata_we_write_decodes_the_same_in_c(md):
    body = _body(serialize_ledger_metadata(md))
    assert FIELDS(body) == _general(body)
    assert parse_ledger_metadata(serialize_ledger_metadata(md)) == md


def test_every_cut_and_flipped_byte_either_decodes_the_same_or_is_left_to_the_general_path():
    samples = [p.read_bytes() for p in JAVA_WRITTEN[:4]] + [p.read_bytes() for p in CORPUS]
    for data in samples:
        try:
            body = _body(data)
        except Exception:  # noqa: BLE001 - a corpus input with a broken header
            continue
        if body is None:
            continue
        for cut in range(len(body)):
            _agree(body[:cut])
        for i in range(len(body)):
            for flip in (0x01, 0x80, 0xFF):
                _agree(body[:i] + bytes([body[i] ^ flip]) + body[i + 1 :])


@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_crash_the_c_twin(body):
    _agree(body)


def test_odd_values_are_left_to_the_general_path():
    md = L.LedgerMetadata.new(["127.0.0.1:3181"], password=b"pw")
    body = bytearray(_body(serialize_ledger_metadata(md)))
    state_at = body.index(bytes([5 << 3]))  # field 5 (state), a varint
    body[state_at + 1] = 7  # a state the schema lacks
    assert FIELDS(bytes(body)) is None
    assert FIELDS(b"\x08\x01") is None  # required fields missing
    with pytest.raises(Exception, match="lacks required"):
        parse_ledger_metadata(b"BookieMetadataFormatVersion\t3\n\x02\x08\x01")
