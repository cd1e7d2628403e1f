"""Pulsar's topics read through the metadata store on the in-memory fake (what
``bkctl pulsar topic list/show``, ``ledger-owner``, ``orphans`` and topic export
planning read): the managed ledgers and cursors a topic lists, v1 names,
partitions counted by their managed ledgers or by partitioned-topic metadata,
and values that do not decode named by their znode."""

from __future__ import annotations

import pytest

from bkctl.ops import pulsar as ops
from bkctl.ops.results import to_json
from bkctl.wire.domain.orphans import OrphanSweep
from bkctl.wire.domain.topic_state import resolve_topics
from bkctl.wire.metadata.ledger import LedgerMetadata
from bkctl.wire.proto import pulsar_ml_pb2 as ml
from bkctl.wire.pulsar.errors import NoSuchTopic, PulsarFormatError
from bkctl.wire.pulsar.managed_ledger import TopicName
from bkctl.wire.pulsar.topics import TopicMetadataReader
from tests.support.fake_store import FakeMetadataStore

NS = "public/default"
BOOKIES = ("10.0.0.1:3181", "10.0.0.2:3181")


def info(*ledgers: int, terminated: tuple[int, int] | None = None) -> bytes:
    value = ml.ManagedLedgerInfo()
    for ledger_id in ledgers:
        value.ledgerInfo.add(ledgerId=ledger_id, entries=10, size=100, timestamp=1)
    if terminated is not None:
        value.terminatedPosition.ledgerId, value.terminatedPosition.entryId = terminated
    return value.SerializeToString()


def cursor(ledger_id: int = -1, mark: tuple[int, int] = (1, 4)) -> bytes:
    return ml.ManagedCursorInfo(
        cursorsLedgerId=ledger_id, markDeleteLedgerId=mark[0], markDeleteEntryId=mark[1]
    ).SerializeToString()


def pulsar_ledger(store: FakeMetadataStore, ledger_id: int, ml_name: str, cursor_name: str | None = None) -> None:
    custom = {"application": b"pulsar", "component": b"managed-ledger", "pulsar/managed-ledger": ml_name.encode()}
    if cursor_name is not None:
        custom["pulsar/cursor"] = cursor_name.encode()
    store.ledgers.create(LedgerMetadata.new(BOOKIES, password=b"", custom_metadata=custom).closed(9, 100), ledger_id)


@pytest.fixture
def store() -> FakeMetadataStore:
    """``orders`` (ledgers 1, 2; cursors ``sub/1`` and ``audit``, the latter with cursor ledger 9),
    a partitioned ``parts`` (partitions 0 and 2 loaded; metadata says 3), a v1 ``old`` topic."""
    store = FakeMetadataStore().start()
    put = store.pulsar.put_managed_ledger
    put(f"{NS}/persistent/orders", info(1, 2), {"sub%2F1": cursor(), "audit": cursor(9)})
    put(f"{NS}/persistent/parts-partition-0", info(3))
    put(f"{NS}/persistent/parts-partition-2", info(4), {"s": cursor(mark=(4, 0))})
    put("public/other/persistent/elsewhere", info(5, terminated=(5, 9)))
    put("legacy/east/ns/persistent/old", info(6))
    store.pulsar.put_partitioned_topic(f"{NS}/persistent/parts", b'{"partitions":3,"deleted":false}')
    for ledger_id, name, cursor_name in (
        (1, "orders", None),
        (2, "orders", None),
        (9, "orders", "audit"),
        (3, "parts-partition-0", None),
        (4, "parts-partition-2", None),
    ):
        pulsar_ledger(store, ledger_id, f"{NS}/persistent/{name}", cursor_name)
    pulsar_ledger(store, 6, "legacy/east/ns/persistent/old")
    pulsar_ledger(store, 77, f"{NS}/persistent/orders")  # listed nowhere: an orphan
    store.calls.clear()
    return store


def test_topics_are_every_managed_ledger_with_v1_names_and_filters(store):
    topics = TopicMetadataReader.of(store)
    assert topics.base == "/managed-ledgers"
    assert [str(t) for t in topics.topics()] == [
        "persistent://legacy/east/ns/old",
        f"persistent://{NS}/orders",
        f"persistent://{NS}/parts-partition-0",
        f"persistent://{NS}/parts-partition-2",
        "persistent://public/other/elsewhere",
    ]
    assert [t.local for t in topics.topics("public", "default")] == ["orders", "parts-partition-0", "parts-partition-2"]
    assert [str(t) for t in topics.topics("legacy", "east/ns")] == ["persistent://legacy/east/ns/old"]
    assert TopicMetadataReader.of(store, "/elsewhere/managed-ledgers").topics() == []


def test_a_topic_lists_its_ledgers_and_its_cursors_by_decoded_name(store):
    orders = TopicMetadataReader.of(store).read(f"persistent://{NS}/orders")
    assert orders.name == f"{NS}/persistent/orders" and orders.path == f"/managed-ledgers/{NS}/persistent/orders"
    assert orders.topic == TopicName("public", "default", "orders") and orders.version == 0
    assert orders.ledger_ids == [1, 2] and sorted(orders.cursors) == ["audit", "sub/1"]
    assert orders.listed - {-1} == {1, 2, 9} and orders.terminated is None  # a cursor's ledger is listed too
    assert orders.cursors["sub/1"].markDeleteEntryId == 4
    assert TopicMetadataReader.of(store).read(f"{NS}/orders", cursors=False).cursors == {}
    assert TopicMetadataReader.of(store).read("persistent://public/other/elsewhere").terminated == (5, 9)
    # one read of the managed ledger and its cursors: nothing per cursor
    assert [name for name, _ in store.calls] == ["pulsar.managed_ledger"] * 3


def test_a_missing_topic_suggests_close_names(store):
    topics = TopicMetadataReader.of(store)
    with pytest.raises(NoSuchTopic) as info_:
        topics.read(f"persistent://{NS}/order")
    assert info_.value.suggestions == [f"persistent://{NS}/orders"]
    with pytest.raises(NoSuchTopic) as info_:
        topics.read("persistent://public/nowhere/orders")  # no such namespace: close full names
    assert info_.value.suggestions[0] == f"persistent://{NS}/orders"


def test_read_named_takes_v1_names_and_refuses_what_is_no_managed_ledger_name(store):
    topics = TopicMetadataReader.of(store)
    old = topics.read_named("legacy/east/ns/persistent/old")
    assert old.topic == TopicName("legacy", "east/ns", "old") and old.ledger_ids == [6]
    for name in ("legacy/east/ns/persistent/gone", "public/default/orders", "public/../persistent/x", ""):
        assert topics.read_named(name) is None, name


def test_partitions_by_managed_ledgers_and_by_partitioned_topic_metadata(store):
    topics = TopicMetadataReader.of(store)
    parts = TopicName.parse(f"persistent://{NS}/parts")
    assert [t.partition for t in topics.partitions(parts)] == [0, 2]
    assert topics.declared_partitions(parts) == 3
    assert topics.declared_partitions(TopicName.parse(f"persistent://{NS}/orders")) is None
    assert [ml_.ledger_ids for ml_ in resolve_topics(topics, f"persistent://{NS}/parts")] == [[3], [4]]
    shown = to_json(ops.show_topic(store, f"persistent://{NS}/parts"))
    assert (shown["partitioned"], shown["declared_partitions"]) == (True, 3)
    assert [(p["partition"], p["managed_ledger"]) for p in shown["partitions"]] == [
        (0, f"{NS}/persistent/parts-partition-0"),
        (1, None),
        (2, f"{NS}/persistent/parts-partition-2"),
    ]


def test_values_that_do_not_decode_are_named_by_their_znode(store):
    store.pulsar.put_managed_ledger(f"{NS}/persistent/broken", b"\xff\xfe not a protobuf {")
    store.pulsar.put_managed_ledger(f"{NS}/persistent/badcursor", info(8), {"c": b"\xff\xfe nope {"})
    store.pulsar.put_partitioned_topic(f"{NS}/persistent/badmeta", b"partitions=2")
    store.pulsar.put_partitioned_topic(f"{NS}/persistent/negative", b'{"partitions": -1}')
    topics = TopicMetadataReader.of(store)
    with pytest.raises(PulsarFormatError, match=f"^/managed-ledgers/{NS}/persistent/broken: ManagedLedgerInfo"):
        topics.read(f"{NS}/broken")
    with pytest.raises(PulsarFormatError, match=f"^/managed-ledgers/{NS}/persistent/badcursor/c: "):
        topics.read(f"{NS}/badcursor")
    with pytest.raises(
        PulsarFormatError, match=f"^/admin/partitioned-topics/{NS}/persistent/badmeta: not partitioned-topic metadata"
    ):
        topics.declared_partitions(TopicName.parse(f"{NS}/badmeta"))
    with pytest.raises(PulsarFormatError, match="partitions is -1, not a count"):
        topics.declared_partitions(TopicName.parse(f"{NS}/negative"))


def test_list_topics_owner_and_orphans_from_what_the_topics_list(store):
    rows = {row["topic"]: row for row in to_json(ops.list_topics(store, "public", "default"))}
    assert rows[f"persistent://{NS}/orders"] == {
        "topic": f"persistent://{NS}/orders",
        "managed_ledger": f"{NS}/persistent/orders",
        "partition": -1,
        "ledgers": 2,
        "entries": 20,
        "size": 200,
        "uncounted_ledgers": [],
        "cursors": ["audit", "sub/1"],
        "terminated": False,
    }
    assert to_json(ops.ledger_owner(store, 2))["owner"] == "topic"
    owner = to_json(ops.ledger_owner(store, 9))
    assert (owner["owner"], owner["cursor"], owner["topic"]) == ("cursor", "audit", f"persistent://{NS}/orders")
    assert to_json(ops.ledger_owner(store, 6))["topic"] == "persistent://legacy/east/ns/old"
    assert to_json(ops.ledger_owner(store, 77))["owner"] == "orphan"
    sweep = OrphanSweep(store, older_than=0, now_ms=store.now_ms() + 1)
    assert [orphan.ledger_id for orphan in sweep] == [77]
    assert (sweep.checked, sweep.pulsar, sweep.orphans) == (7, 7, 1)
