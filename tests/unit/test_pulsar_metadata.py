"""Pulsar's managed-ledger znode values and topic names (tests/vectors/pulsar/zk)."""

import json
import struct

import pytest
from google.protobuf import text_format

from bkctl.wire.proto import pulsar_ml_pb2 as ml
from bkctl.wire.pulsar.errors import PulsarFormatError
from bkctl.wire.pulsar.managed_ledger import (
    CursorState,
    TopicName,
    decode_local_name,
    encode_local_name,
    parse_cursor_info,
    parse_managed_ledger_info,
)
from tests.support import pulsar_entries as pe

ZK = pe.vectors_dir() / "zk"


def ledgers(info):
    return [
        (
            li.ledgerId,
            li.entries if li.HasField("entries") else None,
            li.size if li.HasField("size") else None,
            li.timestamp,
        )
        for li in info.ledgerInfo
    ]


def test_managed_ledger_info_binary_and_compressed_agree_with_their_json():
    doc = json.loads((ZK / "managed_ledger_info.json").read_text())
    plain = parse_managed_ledger_info((ZK / "managed_ledger_info.bin").read_bytes())
    assert ledgers(plain) == [
        (int(li["ledgerId"]), int(li["entries"]), int(li["size"]), int(li["timestamp"]))
        for li in doc["value"]["ledgerInfo"]
    ]
    assert not plain.HasField("terminatedPosition")
    packed = (ZK / "managed_ledger_info.zstd_compressed.bin").read_bytes()
    assert struct.unpack(">H", packed[:2])[0] == 0x4778
    assert parse_managed_ledger_info(packed) == plain


def test_open_last_ledger_and_terminated_variants():
    open_last = parse_managed_ledger_info((ZK / "managed_ledger_info.last_ledger_open.bin").read_bytes())
    assert ledgers(open_last)[-1] == (1002, None, None, 0)
    term = parse_managed_ledger_info((ZK / "managed_ledger_info.terminated.bin").read_bytes())
    assert (term.terminatedPosition.ledgerId, term.terminatedPosition.entryId) == (1002, 1)


def test_text_format_of_old_brokers_is_accepted():
    plain = parse_managed_ledger_info((ZK / "managed_ledger_info.bin").read_bytes())
    text = text_format.MessageToString(plain).encode()
    assert b"ledgerInfo {" in text
    assert parse_managed_ledger_info(text) == plain
    cursor = parse_cursor_info((ZK / "managed_cursor_info.sub1.bin").read_bytes())
    assert parse_cursor_info(text_format.MessageToString(cursor).encode()) == cursor


def test_garbage_is_a_format_error():
    with pytest.raises(PulsarFormatError, match="ManagedLedgerInfo is neither"):
        parse_managed_ledger_info(b"\xff\xfe not a protobuf {")


def test_cursor_acknowledgements_match_the_vector_explanation():
    cursor = parse_cursor_info((ZK / "managed_cursor_info.sub1.bin").read_bytes())
    assert cursor.cursorsLedgerId == -1 and cursor.lastActive == 1795461495000
    assert [(p.name, p.value) for p in cursor.cursorProperties] == [("origin", "pulsar-vectors")]
    state = CursorState.of(cursor)
    # README: unacked 1000:2, 1001:0, 1001:3, and 1002:1 onward
    positions = [(1000, e) for e in range(3)] + [(1001, e) for e in range(5)] + [(1002, e) for e in range(3)]
    unacked = [p for p in positions if not state.acked(p)]
    assert unacked == [(1000, 2), (1001, 0), (1001, 3), (1002, 1), (1002, 2)]


def test_a_newer_position_from_the_cursor_ledger_wins_and_batch_bits_count():
    info = ml.ManagedCursorInfo(cursorsLedgerId=77, markDeleteLedgerId=1, markDeleteEntryId=0)
    pos = ml.PositionInfo(ledgerId=1, entryId=5)
    batched = pos.batchedEntryDeletionIndexInfo.add()
    batched.position.ledgerId, batched.position.entryId = 1, 6
    batched.deleteSet.append(0b1010)  # bits set: messages 1 and 3 not yet acknowledged
    state = CursorState.of(info, pos)
    assert state.acked((1, 5)) and not state.acked((1, 6))
    assert [i for i in range(5) if not state.message_acked((1, 6), i)] == [1, 3]
    assert not state.message_acked((1, 7), 0)


@pytest.mark.parametrize(
    "local, encoded",
    [
        ("my-topic", "my-topic"),
        ("a b", "a+b"),
        ("x/y:z%", "x%2Fy%3Az%25"),
        ("t~é", "t%7E%C3%A9"),
        ("a.b-c*d_e", "a.b-c*d_e"),
    ],
)
def test_local_names_are_encoded_as_javas_urlencoder(local, encoded):
    assert encode_local_name(local) == encoded
    assert decode_local_name(encoded) == local


def test_topic_names():
    t = TopicName.parse("persistent://public/default/orders-partition-3")
    assert t.managed_ledger == "public/default/persistent/orders-partition-3"
    assert t.partition == 3
    assert str(t.partitioned_topic) == "persistent://public/default/orders"
    assert TopicName.parse("public/default/persistent/a+b") == TopicName("public", "default", "a b")
    assert TopicName.parse("public/default/x") == TopicName("public", "default", "x")
    # v1 names, as Pulsar's TopicName splits them: four parts after the domain, the last taking the rest
    v1 = TopicName.parse("persistent://prop/us-west/ns/a/b")
    assert (v1.tenant, v1.namespace, v1.local, v1.is_v1) == ("prop", "us-west/ns", "a/b", True)
    assert v1.managed_ledger == "prop/us-west/ns/persistent/a%2Fb" and str(v1) == "persistent://prop/us-west/ns/a/b"
    assert TopicName.parse(v1.managed_ledger) == v1 == TopicName.from_managed_ledger(v1.managed_ledger)
    assert TopicName.parse("persistent://prop/us-west/ns/t-partition-2").partitioned_topic == TopicName(
        "prop", "us-west/ns", "t"
    )
    assert not TopicName.parse("persistent://public/default/x").is_v1
    for bad in ("public/default/a/b", "persistent://public//x", "persistent://public/default", "a/b/c/d/e/f"):
        with pytest.raises(ValueError):
            TopicName.parse(bad)
    assert TopicName.parse("persistent://public/default/x").partition == -1
    with pytest.raises(ValueError, match="only persistent"):
        TopicName.parse("non-persistent://public/default/x")
    with pytest.raises(ValueError, match="not a topic name"):
        TopicName.parse("ns/justtwo")


def test_short_topic_names_are_resolved_as_pulsar_admin_does():
    assert TopicName.parse("my-topic") == TopicName("public", "default", "my-topic")
    assert str(TopicName.parse(" orders-partition-1 ")) == "persistent://public/default/orders-partition-1"
    assert TopicName.parse("acme/prod/payments") == TopicName("acme", "prod", "payments")
    for bad in ("", "/", "a/", "/a", "a//b"):
        with pytest.raises(ValueError, match="tenant/namespace/topic or topic"):
            TopicName.parse(bad)


def test_unacked_entries_count_by_intervals_as_a_walk_would():
    cursor = parse_cursor_info((ZK / "managed_cursor_info.sub1.bin").read_bytes())
    state = CursorState.of(cursor)
    for ledger_id, entries in ((999, 4), (1000, 3), (1001, 5), (1002, 2), (1003, 7)):
        walk = sum(1 for e in range(entries) if not state.acked((ledger_id, e)))
        assert state.unacked_entries(ledger_id, entries) == walk, ledger_id
    assert state.unacked_entries(1001, 5) == 2 and state.first_unacked(1000) == 2
