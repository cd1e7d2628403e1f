"""Topic export planning (``plan_topic``) on the in-memory metadata store: the
ledgers a managed ledger lists, up to the last entry of a closed ledger, the LAC
of the open one or the terminated position; tasks of ``split_entries`` entries
linked across a ledger rollover for chunked messages; deleted, offloaded and
wholly acknowledged ledgers; every partition of a partitioned topic."""

from __future__ import annotations

import json

import pytest

from bkctl.wire.domain.ledger_plan import SpecError
from bkctl.wire.domain.topic_plan import TopicLedgersMissing, TopicSpec, plan_topic
from bkctl.wire.errors import NotFound
from bkctl.wire.metadata.ledger import LedgerMetadata
from bkctl.wire.proto import pulsar_ml_pb2 as ml
from bkctl.wire.pulsar.errors import NoSuchSubscription, NoSuchTopic
from tests.support.fake_store import FakeMetadataStore

NS = "public/default"
BOOKIES = ("10.0.0.1:3181", "10.0.0.2:3181")


def managed_ledger(*ledgers: int, terminated=None, offloaded=()) -> bytes:
    info = ml.ManagedLedgerInfo()
    for ledger_id in ledgers:
        li = info.ledgerInfo.add(ledgerId=ledger_id, entries=10, size=100, timestamp=1)
        if ledger_id in offloaded:
            li.offloadContext.complete = True
            li.offloadContext.bookkeeperDeleted = True
    if terminated is not None:
        info.terminatedPosition.ledgerId, info.terminatedPosition.entryId = terminated
    return info.SerializeToString()


def cursor(mark: tuple[int, int]) -> bytes:
    return ml.ManagedCursorInfo(
        cursorsLedgerId=-1, markDeleteLedgerId=mark[0], markDeleteEntryId=mark[1]
    ).SerializeToString()


def ledger(store, ledger_id: int, last: int | None) -> None:
    """A ledger of the topic: closed at entry ``last``, or open (None)."""
    md = LedgerMetadata.new(BOOKIES, password=b"", custom_metadata={"application": b"pulsar"})
    store.ledgers.create(md if last is None else md.closed(last, 100 * (last + 1)), ledger_id)


@pytest.fixture
def store() -> FakeMetadataStore:
    """``orders``: ledgers 10 (entries 0..9), 11 (0..2), 12 (open); cursor ``billing``
    at 10:9 (all of ledger 10 acknowledged). ``parts``: partitions 0 and 1."""
    store = FakeMetadataStore().start()
    put = store.pulsar.put_managed_ledger
    put(f"{NS}/persistent/orders", managed_ledger(10, 11, 12), {"billing": cursor((10, 9))})
    put(f"{NS}/persistent/parts-partition-0", managed_ledger(20))
    put(f"{NS}/persistent/parts-partition-1", managed_ledger(21))
    store.pulsar.put_partitioned_topic(f"{NS}/persistent/parts", b'{"partitions":2,"deleted":false}')
    for ledger_id, last in ((10, 9), (11, 2), (12, None), (20, 4), (21, 0)):
        ledger(store, ledger_id, last)
    return store


def lacs(beyond: int = 0):
    """The tail reader: ledger 12's LAC is 6, and ``beyond`` entries past it an
    ack quorum holds; it records what it was asked."""
    from bkctl.wire.client.unconfirmed_tail import Tail

    asked = []

    def tail_of(ledger_id: int) -> Tail:
        asked.append(ledger_id)
        lac = {12: 6}[ledger_id]
        return Tail(lac, lac + beyond, write_quorum=2, ack_quorum=2)

    tail_of.asked = asked
    return tail_of


def spans(plan):
    return [(t.ledger_id, t.first, t.last) for t in plan.tasks]


def test_closed_ledgers_to_their_last_entry_the_open_one_to_its_lac(store):
    lac_of = lacs()
    plan = plan_topic(store, TopicSpec(f"persistent://{NS}/orders"), 4, lac_of)
    assert [(p.ledger_id, p.first, p.last, p.state) for p in plan.plans] == [
        (10, 0, 9, "CLOSED"),
        (11, 0, 2, "CLOSED"),
        (12, 0, 6, "OPEN"),
    ]
    assert lac_of.asked == [12]  # the bookies are asked only about the open ledger
    assert spans(plan) == [(10, 0, 3), (10, 4, 7), (10, 8, 9), (11, 0, 2), (12, 0, 3), (12, 4, 6)]
    assert plan.skipped == []
    doc = plan.details["topics"][f"persistent://{NS}/orders"]
    assert doc["ledgers"] == [10, 11, 12] and doc["partition"] == -1 and doc["cursor"] is None
    assert doc["read_past_lac"] == []
    assert [t.unconfirmed for t in plan.tasks] == [False] * 4 + [True] * 2


def test_a_large_ledger_is_read_by_tasks_of_about_the_split_bytes_each(store, monkeypatch):
    """Ledger 10 holds 1,000 bytes in 10 entries: with tasks of about 300 bytes it is cut in
    four ranges of at most 3 entries (the entry limit still holds); ledger 11 (300 bytes) is one
    task; the open ledger, whose size no one knows, is cut by entries alone; the ranges cover
    every entry once, in order, and still link the rollover."""
    from bkctl.wire.domain import ledger_plan

    monkeypatch.setattr(ledger_plan, "SPLIT_BYTES", 300)
    plan = plan_topic(store, TopicSpec(f"persistent://{NS}/orders"), 100, lacs())
    assert spans(plan) == [(10, 0, 2), (10, 3, 5), (10, 6, 8), (10, 9, 9), (11, 0, 2), (12, 0, 6)]
    assert [t.next_ledger for t in plan.tasks if t.ledger_id == 10] == [11] * 4
    assert spans(plan_topic(store, TopicSpec(f"persistent://{NS}/orders"), 2, lacs()))[:5] == [
        (10, 0, 1),
        (10, 2, 3),
        (10, 4, 5),
        (10, 6, 7),
        (10, 8, 9),
    ]


@pytest.mark.parametrize(
    "split, size, entries, per_task",
    [
        (100, None, 10, 100),
        (100, 0, 10, 100),
        (100, 1000, 10, 3),
        (100, 1000, 0, 100),
        (2, 1000, 10, 2),
        (100, 300, 10, 10),
        (100, 301, 10, 5),
        (100, 10**12, 3, 1),
    ],
)
def test_entries_per_task(split, size, entries, per_task):
    from bkctl.wire.domain.ledger_plan import task_entries

    assert task_entries(split, size, entries, target=300) == per_task


def test_the_open_ledger_is_planned_to_the_newest_entry_an_ack_quorum_holds_and_that_is_recorded(store):
    plan = plan_topic(store, TopicSpec(f"persistent://{NS}/orders"), 4, lacs(beyond=2))
    assert [(p.ledger_id, p.last) for p in plan.plans][-1] == (12, 8)
    assert spans(plan)[-3:] == [(12, 0, 3), (12, 4, 7), (12, 8, 8)]
    assert {t.ledger_last for t in plan.tasks if t.ledger_id == 12} == {8}
    by_span = {(t.ledger_id, t.first): t for t in plan.tasks}
    assert by_span[(11, 0)].next_unconfirmed and by_span[(11, 0)].next_last == 8
    doc = plan.details["topics"][f"persistent://{NS}/orders"]
    assert doc["read_past_lac"] == [{"ledger_id": 12, "lac": 6, "last": 8, "entries": 2}]


def test_tasks_read_on_into_the_next_ledger_for_a_chunked_message_a_rollover_cut(store):
    plan = plan_topic(store, TopicSpec(f"persistent://{NS}/orders"), 4, lacs())
    by_span = {(t.ledger_id, t.first): t for t in plan.tasks}
    # every task of ledger 10 may finish a message in ledger 11; 11's in 12; 12's in none
    assert {(t.next_ledger, t.next_last) for t in plan.tasks if t.ledger_id == 10} == {(11, 2)}
    assert (by_span[(11, 0)].next_ledger, by_span[(11, 0)].next_last) == (12, 6)
    assert {t.next_ledger for t in plan.tasks if t.ledger_id == 12} == {None}
    # only a ledger's first task follows the ledger before; every task reads on to its ledger's end
    assert [t.follows for t in plan.tasks] == [False, False, False, True, True, False]
    assert {(t.ledger_id, t.ledger_last) for t in plan.tasks} == {(10, 9), (11, 2), (12, 6)}


def test_a_terminated_topic_ends_at_its_terminated_position(store):
    store.pulsar.put_managed_ledger(f"{NS}/persistent/orders", managed_ledger(10, 11, 12, terminated=(11, 1)))
    plan = plan_topic(store, TopicSpec(f"persistent://{NS}/orders"), 100, lacs())
    assert [(p.ledger_id, p.last) for p in plan.plans] == [(10, 9), (11, 1), (12, 6)]


def test_a_deleted_ledger_stops_the_plan_unless_skipped_and_an_offloaded_one_is_skipped(store):
    store.pulsar.put_managed_ledger(f"{NS}/persistent/orders", managed_ledger(10, 11, 12, 13, 14, offloaded=(14,)))
    with pytest.raises(TopicLedgersMissing, match="13 .of persistent://public/default/orders.") as info:
        plan_topic(store, TopicSpec(f"persistent://{NS}/orders"), 100, lacs())
    assert isinstance(info.value, NotFound)  # exit 3 at the CLI
    plan = plan_topic(store, TopicSpec(f"persistent://{NS}/orders", skip_missing=True), 100, lacs())
    assert [p.ledger_id for p in plan.plans] == [10, 11, 12]
    assert [(s.ledger_id, s.reason) for s in plan.skipped] == [
        (13, "listed by the managed ledger but deleted"),
        (14, "offloaded to tiered storage and deleted from BookKeeper"),
    ]


def test_unacked_only_leaves_out_what_the_cursor_acknowledged_and_hands_the_cursor_to_the_tasks(store):
    spec = TopicSpec(f"persistent://{NS}/orders", subscription="billing", unacked_only=True)
    plan = plan_topic(store, spec, 100, lacs())
    assert [p.ledger_id for p in plan.plans] == [11, 12]
    assert [s.to_json() for s in plan.skipped] == [
        {"ledger_id": 10, "topic": f"persistent://{NS}/orders", "reason": "wholly acknowledged by billing"}
    ]
    assert json.loads(plan.tasks[0].cursor)["mark_delete"] == [10, 9]
    assert plan.tasks[0].follows is False  # the ledger before was not planned: nothing to take over from it
    cursor_doc = plan.details["topics"][f"persistent://{NS}/orders"]["cursor"]
    assert cursor_doc["from"] == "znode"
    # the subscription alone only records where the cursor is
    plan = plan_topic(store, TopicSpec(f"persistent://{NS}/orders", subscription="billing"), 100, lacs())
    assert [p.ledger_id for p in plan.plans] == [10, 11, 12] and plan.tasks[0].cursor is None
    with pytest.raises(NoSuchSubscription, match="it has: billing"):
        plan_topic(store, TopicSpec(f"persistent://{NS}/orders", subscription="nobody"), 100, lacs())


def test_a_partitioned_topic_plans_every_partition(store):
    plan = plan_topic(store, TopicSpec(f"persistent://{NS}/parts"), 100, lacs())
    assert [(t.topic, t.partition, t.ledger_id, t.last) for t in plan.tasks] == [
        (f"persistent://{NS}/parts-partition-0", 0, 20, 4),
        (f"persistent://{NS}/parts-partition-1", 1, 21, 0),
    ]
    assert sorted(plan.details["topics"]) == [
        f"persistent://{NS}/parts-partition-0",
        f"persistent://{NS}/parts-partition-1",
    ]


def test_names_that_are_no_topic_or_no_such_topic(store):
    with pytest.raises(SpecError):
        plan_topic(store, TopicSpec("persistent://only/two"), 100, lacs())
    with pytest.raises(NoSuchTopic):
        plan_topic(store, TopicSpec(f"persistent://{NS}/nothing"), 100, lacs())


# ---------------------------------------------------------------- --from/--to pushdown


def month_of_ledgers(store, ledgers=30, per_ledger=3600, step_ms=1000, t0=1_790_000_000_000):
    """``month``: ``ledgers`` closed ledgers 100.. of ``per_ledger`` entries, one
    published every ``step_ms`` (an hour a ledger by default), each closed a
    moment after its last entry; the publish time of any entry."""
    info = ml.ManagedLedgerInfo()
    for i in range(ledgers):
        close = t0 + ((i + 1) * per_ledger - 1) * step_ms + 5
        info.ledgerInfo.add(ledgerId=100 + i, entries=per_ledger, size=per_ledger * 100, timestamp=close)
        ledger(store, 100 + i, per_ledger - 1)
    store.pulsar.put_managed_ledger(f"{NS}/persistent/month", info.SerializeToString())
    reads = []

    def time_of(source, entry_id):
        reads.append((source.ledger_id, entry_id))
        return t0 + ((source.ledger_id - 100) * per_ledger + entry_id) * step_ms

    time_of.reads = reads
    return time_of, t0


def test_a_one_hour_window_plans_the_ledgers_of_that_hour_and_one_bisection_per_edge(store):
    time_of, t0 = month_of_ledgers(store)
    hour = 3_600_000
    start = t0 + 10 * hour + 1_800_000  # half way through ledger 110 .. half way through ledger 111
    spec = TopicSpec(f"persistent://{NS}/month", from_ms=start, to_ms=start + hour)
    plan = plan_topic(store, spec, 100_000, lacs(), time_of=time_of)
    # the window with the slack (60 s) either side: entries 1740.. of 110, ..1859 of 111
    assert spans(plan) == [(110, 1740, 3599), (111, 0, 1859)]
    doc = plan.details["pushdown"]
    assert doc["ledgers_skipped"] == 28 and doc["entries_skipped"] == 30 * 3600 - (3600 - 1740) - 1860
    assert {lid for lid, _ in time_of.reads} == {110, 111}
    assert doc["bisection_reads"] == len(time_of.reads) <= 2 * 12  # one bisection (log2 3600) per edge


def test_every_read_of_an_offloaded_ledger_carries_the_plans_choice_of_its_copy(store):
    """Ledgers 110 and 111 offloaded (tiered storage read first): the window's bisections, the
    tasks and a task's read on into the next ledger all name the offloaded copy, chosen by the
    plan -- no reader has to be told beforehand which ledgers are offloaded."""
    time_of, t0 = month_of_ledgers(store, ledgers=3, per_ledger=3600)
    info = ml.ManagedLedgerInfo()
    for i in range(3):  # as month_of_ledgers wrote them, 101 and 102 offloaded too
        close = t0 + ((i + 1) * 3600 - 1) * 1000 + 5
        li = info.ledgerInfo.add(ledgerId=100 + i, entries=3600, size=360_000, timestamp=close)
        if i:
            ctx = li.offloadContext
            ctx.uidMsb, ctx.uidLsb, ctx.complete = li.ledgerId, 7, True
            ctx.driverMetadata.name = "aws-s3"
            ctx.driverMetadata.properties.add(key="bucket", value="offloads")
    store.pulsar.put_managed_ledger(f"{NS}/persistent/month", info.SerializeToString())
    sources = []

    def reads_of(source, entry_id):
        sources.append(source)
        return time_of(source, entry_id)

    hour = 3_600_000
    spec = TopicSpec(f"persistent://{NS}/month", from_ms=t0 + 1_800_000, to_ms=t0 + hour + 1_800_000)
    plan = plan_topic(store, spec, 100_000, lacs(), time_of=reads_of, offloaded=lambda location: 3599)
    assert spans(plan) == [(100, 1740, 3599), (101, 0, 1859)]
    by_ledger = {s.ledger_id: s for s in sources}
    assert by_ledger[100].offload is None and not by_ledger[100].unconfirmed
    assert by_ledger[101].offload is not None and by_ledger[101].offload.ledger_id == 101
    first, second = plan.tasks
    assert first.source.offload is None and second.source.offload == by_ledger[101].offload
    assert first.next_source is not None and first.next_source == second.source  # a chunk read on: the copy too
    assert second.next_source is None


def test_an_entry_source_refuses_a_copy_of_another_ledger_or_an_unconfirmed_offload():
    from bkctl.wire.domain.entry_source import EntrySource
    from bkctl.wire.pulsar.offload_store import OffloadLocation

    location = OffloadLocation(9, "m", "u", "aws-s3", (("bucket", "b"),), True, True)
    assert EntrySource(9, location).offloaded and not EntrySource(9).offloaded
    with pytest.raises(ValueError, match="ledger 8 given the offloaded copy of ledger 9"):
        EntrySource(8, location)
    with pytest.raises(ValueError, match="no unconfirmed entries"):
        EntrySource(9, location, unconfirmed=True)


def test_the_pushdown_skips_nothing_it_cannot_tell_and_a_window_outside_plans_nothing(store):
    time_of, t0 = month_of_ledgers(store, ledgers=3, per_ledger=10, step_ms=60_000)  # a minute an entry

    def unknown(source, entry_id):
        return None  # an entry whose time does not decode: the ledger is kept whole

    spec = TopicSpec(f"persistent://{NS}/month", from_ms=t0 + 12 * 60_000)
    plan = plan_topic(store, spec, 100, lacs(), time_of=unknown)
    assert spans(plan) == [(101, 0, 9), (102, 0, 9)]  # ledger 100 closed before the window (less the slack)
    spec = TopicSpec(f"persistent://{NS}/month", from_ms=t0 + 10 * 86_400_000)
    plan = plan_topic(store, spec, 100, lacs(), time_of=time_of)
    assert spans(plan) == [] and plan.details["pushdown"]["ledgers_skipped"] == 3
    plan = plan_topic(store, TopicSpec(f"persistent://{NS}/month"), 100, lacs(), time_of=time_of)
    assert "pushdown" not in plan.details and len(spans(plan)) == 3 and time_of.reads == []


def test_the_pushdown_counts_the_open_ledgers_entries_it_skips(store):
    """The open ledger has no entry count in the managed ledger: skipped by the window, its
    entries (to the newest an ack quorum holds) are counted as skipped all the same."""
    from bkctl.wire.client.unconfirmed_tail import Tail

    time_of, t0 = month_of_ledgers(store, ledgers=3, per_ledger=10, step_ms=60_000)
    info = ml.ManagedLedgerInfo()
    for i in range(3):  # as month_of_ledgers wrote them, then the open one: no entries, size or timestamp yet
        info.ledgerInfo.add(ledgerId=100 + i, entries=10, size=1000, timestamp=t0 + ((i + 1) * 10 - 1) * 60_000 + 5)
    info.ledgerInfo.add(ledgerId=103)
    store.pulsar.put_managed_ledger(f"{NS}/persistent/month", info.SerializeToString())
    ledger(store, 103, None)
    spec = TopicSpec(f"persistent://{NS}/month", to_ms=t0 + 5 * 60_000)  # the first ledger's first minutes
    plan = plan_topic(store, spec, 100, lambda lid: Tail(6, 7, write_quorum=2, ack_quorum=2), time_of=time_of)
    doc = plan.details["pushdown"]
    assert spans(plan) == [(100, 0, 5)]  # the slack (a minute) past the window
    assert doc["ledgers_skipped"] == 3 and doc["entries_skipped"] == 4 + 10 + 10 + 8  # 103: entries 0..7


def test_a_long_managed_ledger_is_planned_from_batched_reads_not_one_read_per_ledger(store, monkeypatch):
    """A topic of thousands of ledgers (apache/pulsar#11490: 30,000) costs a round trip per
    batch of ledgers, not per ledger; one deleted inside a batch is still reported."""
    from bkctl.wire.domain.topic_state import READ_BATCH

    ids = list(range(1000, 1000 + 2 * READ_BATCH + 5))
    for ledger_id in ids:
        if ledger_id != 1500:
            ledger(store, ledger_id, 0)
    store.pulsar.put_managed_ledger(f"{NS}/persistent/long", managed_ledger(*ids))
    batches, singles = [], []
    read_many = store.ledgers.read_many
    monkeypatch.setattr(store.ledgers, "read_many", lambda got, **kw: batches.append(len(got)) or read_many(got, **kw))
    monkeypatch.setattr(store.ledgers, "read", lambda ledger_id: singles.append(ledger_id))
    plan = plan_topic(store, TopicSpec(f"persistent://{NS}/long", skip_missing=True), 100, lacs())
    assert batches == [READ_BATCH, READ_BATCH, 5] and singles == []
    assert [p.ledger_id for p in plan.plans] == [i for i in ids if i != 1500]
    assert [s.ledger_id for s in plan.skipped] == [1500]


def test_topic_show_reads_a_long_managed_ledgers_metadata_in_batches_too(store, monkeypatch):
    from bkctl.wire.domain.topic_state import READ_BATCH, ledger_states
    from bkctl.wire.domain.topic_state import topic_reader as reader

    ids = list(range(1000, 1000 + READ_BATCH + 3))
    for ledger_id in ids[1:]:
        ledger(store, ledger_id, 0)
    store.pulsar.put_managed_ledger(f"{NS}/persistent/long", managed_ledger(*ids))
    batches = []
    read_many = store.ledgers.read_many
    monkeypatch.setattr(store.ledgers, "read_many", lambda got, **kw: batches.append(len(got)) or read_many(got, **kw))
    states = ledger_states(store, reader(store).read(f"persistent://{NS}/long"))
    assert batches == [READ_BATCH, 3]
    assert [s.ledger_id for s in states] == ids and states[0].metadata is None
    assert all(s.metadata.last_entry_id == 0 for s in states[1:])
