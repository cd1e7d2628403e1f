"""Autorecovery znode values (wire/metadata/underreplication.py) (BookKeeper's meta/ZkLedgerUnderreplicationManager.java)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bkctl.wire.errors import CodecError
from bkctl.wire.metadata.underreplication import (
    UnderreplicatedLedger,
    parse_auditor_vote,
    parse_last_run_time,
    parse_lock_data,
    parse_lost_bookie_recovery_delay,
    parse_underreplicated_ledger,
    parse_underreplication_layout,
    serialize_auditor_vote,
    serialize_last_run_time,
    serialize_lock_data,
    serialize_lost_bookie_recovery_delay,
    serialize_underreplicated_ledger,
    serialize_underreplication_layout,
)


def test_layout():
    assert serialize_underreplication_layout() == b'type: "BASIC"\nversion: 1\n'
    assert parse_underreplication_layout(b'type: "BASIC"\nversion: 1\n') == ("BASIC", 1)
    with pytest.raises(CodecError, match="unsupported under-replication layout"):
        parse_underreplication_layout(b'type: "FANCY"\nversion: 1\n')
    with pytest.raises(CodecError, match="unsupported under-replication layout"):
        parse_underreplication_layout(b'type: "BASIC"\nversion: 2\n')
    with pytest.raises(CodecError, match="required"):
        parse_underreplication_layout(b'type: "BASIC"\n')
    with pytest.raises(CodecError):
        parse_underreplication_layout(b"")


def test_marker_spec_example():
    spec = b'replica: "10.0.0.3:3181"\nctime: 1700000000000\n'
    marker = parse_underreplicated_ledger(spec)
    assert marker == UnderreplicatedLedger(("10.0.0.3:3181",), 1700000000000)
    assert serialize_underreplicated_ledger(marker) == spec
    assert marker.serialize() == spec


def test_marker_without_ctime_and_merge():
    marker = UnderreplicatedLedger(["a:1", "b:1"])
    data = marker.serialize()
    assert data == b'replica: "a:1"\nreplica: "b:1"\n'
    assert parse_underreplicated_ledger(data) == marker
    merged = UnderreplicatedLedger(("a:1",), 5).merged(["b:1", "a:1", "c:1"])
    assert merged == UnderreplicatedLedger(("a:1", "b:1", "c:1"), 5)
    assert parse_underreplicated_ledger(b"") == UnderreplicatedLedger(())
    assert UnderreplicatedLedger("x:1").replicas == ("x:1",)


def test_lock_and_vote():
    assert serialize_lock_data("host-1.example") == b'bookieId: "host-1.example"\n'
    assert parse_lock_data(b'bookieId: "host-1.example"\n') == "host-1.example"
    assert parse_lock_data(b"") is None
    assert serialize_auditor_vote("10.0.0.1:3181") == b'bookieId: "10.0.0.1:3181"\n'
    assert parse_auditor_vote(b'bookieId: "10.0.0.1:3181"\n') == "10.0.0.1:3181"


def test_last_run_time_binary():
    assert serialize_last_run_time(1700000000000) == bytes.fromhex("0880d095ffbc31")
    assert parse_last_run_time(bytes.fromhex("0880d095ffbc31")) == 1700000000000
    assert parse_last_run_time(b"") is None
    assert parse_last_run_time(serialize_last_run_time(-1)) == -1
    with pytest.raises(CodecError):
        parse_last_run_time(b"\x08")


def test_lost_bookie_recovery_delay():
    assert serialize_lost_bookie_recovery_delay(0) == b"0"
    assert parse_lost_bookie_recovery_delay(b"30") == 30
    assert parse_lost_bookie_recovery_delay(b"-1") == -1
    for bad in (b"", b"x", b"--5", b"\xff"):
        with pytest.raises(CodecError):
            parse_lost_bookie_recovery_delay(bad)


@pytest.mark.parametrize(
    "parse",
    [parse_underreplicated_ledger, parse_lock_data, parse_auditor_vote],
)
@pytest.mark.parametrize("data", [b"replica: 5\n", b'bookieId: "x"\nbookieId: "y"\n', b"\xff", b"nonsense {"])
def test_malformed_text(parse, data):
    with pytest.raises(CodecError):
        parse(data)


@settings(max_examples=200)
@given(st.lists(st.text(max_size=12), max_size=4), st.none() | st.integers(-(2**63), 2**63 - 1))
def test_marker_roundtrip(replicas, ctime):
    marker = UnderreplicatedLedger(tuple(replicas), ctime)
    assert parse_underreplicated_ledger(marker.serialize()) == marker


@settings(max_examples=200)
@given(st.text(max_size=20))
def test_vote_and_lock_roundtrip(value):
    assert parse_auditor_vote(serialize_auditor_vote(value)) == value
    assert parse_lock_data(serialize_lock_data(value)) == value


@settings(max_examples=300)
@given(st.binary(max_size=80))
def test_random_bytes_raise_only_codec_error(data):
    for parse in (
        parse_underreplicated_ledger,
        parse_lock_data,
        parse_auditor_vote,
        parse_underreplication_layout,
        parse_last_run_time,
        parse_lost_bookie_recovery_delay,
    ):
        try:
            parse(data)
        except CodecError:
            pass


@settings(max_examples=300)
@given(
    st.lists(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=12), max_size=4),
    st.none() | st.integers(-(2**63), 2**63 - 1),
)
def test_a_plain_marker_reads_as_protobufs_parser_reads_it(replicas, ctime):
    """Markers as Java prints them are read without protobuf's text parser: the same answer."""
    from bkctl.wire.metadata.protobuf_text import parse_text_message
    from bkctl.wire.proto import formats_pb2

    data = UnderreplicatedLedger(tuple(replicas), ctime).serialize()
    pb = parse_text_message(data, formats_pb2.UnderreplicatedLedgerFormat, "marker")
    assert parse_underreplicated_ledger(data) == UnderreplicatedLedger(
        tuple(pb.replica), pb.ctime if pb.HasField("ctime") else None
    )
