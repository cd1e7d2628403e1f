"""A topic's rows are what a Pulsar consumer receives: every vector case, old
and new, against what the real client received (or, for the consumer-view
cases, what Pulsar's rules say a consumer receives: tests/vectors/pulsar/README),
and Pulsar's rules one by one on entries built as a broker writes them
(markers: ``Markers.java``; transactions: ``TopicTransactionBuffer``,
``AbstractBaseDispatcher``), with either batch splitter."""

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from bkctl.export.columns import arrow_schema
from bkctl.export.topic_source import read_topic_range, record_batch
from bkctl.export.topic_transactions import left_out_text, scan_transactions, with_transactions
from bkctl.wire import fastpath
from bkctl.wire.domain.topic_plan import TopicRange
from bkctl.wire.proto import pulsar_api_pb2 as pb
from bkctl.wire.pulsar.columns import MESSAGE_COLUMNS
from bkctl.wire.pulsar.messages import TopicDecoder
from bkctl.wire.pulsar.rows import PyMessageRows
from bkctl.wire.pulsar.transactions import TopicTransactions, TransactionScan, entry_marks
from tests.support import pulsar_entries as pe

SCHEMA = arrow_schema(MESSAGE_COLUMNS)  # the decoder's parts: schema_version as stored
TOPIC = "persistent://public/default/t"
BatchRows = fastpath.selected().batch_rows
SPLITTERS = [pytest.param(PyMessageRows, id="python")] + (
    [pytest.param(BatchRows, id="c")] if BatchRows is not PyMessageRows else []
)
T0 = 1_795_000_000_000


def consume(entries, splitter=PyMessageRows, pending=False, scan=True):
    """Rows (dicts, times in ms) of ``entries`` = [((ledger, entry), bytes)] read as one topic, and the decoder."""
    transactions = None
    if scan:
        s = TransactionScan()
        for position, data in entries:
            s.add(position, data)
        transactions = s.result()
    dec = TopicDecoder(TOPIC, -1, splitter=splitter, transactions=transactions, pending=pending)
    for (ledger_id, entry_id), data in entries:
        dec.add(ledger_id, entry_id, data)
    dec.finish()
    table = pa.Table.from_batches([record_batch(p, SCHEMA) for p in dec.take_parts()], schema=SCHEMA)
    for name in ("publish_time", "event_time", "deliver_at_time", "broker_timestamp"):
        table = table.set_column(
            table.schema.get_field_index(name), name, pc.divide(table.column(name).cast(pa.int64()), 1000)
        )
    return table.to_pylist(), dec


def in_ledger(entries, ledger_id=1000, first=0):
    return [((ledger_id, first + i), data) for i, data in enumerate(entries)]


# ---------------------------------------------------------------- every vector case


@pytest.mark.parametrize("splitter", SPLITTERS)
@pytest.mark.parametrize("case", pe.all_cases())
def test_every_vector_case_gives_what_a_consumer_receives(case, splitter):
    rows, dec = consume(in_ledger(pe.case_entries(case)), splitter)
    want = pe.received_messages(case)
    got = [
        {
            "entry_id": r["entry_id"],
            "batch_index": r["batch_index"],
            "payload": r["payload"],
            "key": r["key"],
            "ordering_key": r["ordering_key"],
            "properties": dict(r["properties"]),
            "event_time": r["event_time"],
            "sequence_id": r["sequence_id"],
            "publish_time": r["publish_time"],
            "producer_name": r["producer_name"],
            "replicated_from": r["replicated_from"],
            "deliver_at": r["deliver_at_time"],
            "txn_id": r["txn_id"],
        }
        for r in rows
    ]
    for g, w in zip(got, want):
        if w["publish_time"] is None:  # the sent-messages cases did not record it
            g["publish_time"] = None
    assert got == want
    assert not dec.problems and not any(r["pending"] for r in rows) and not any(r["error"] for r in rows)


@pytest.mark.parametrize(
    "case, markers, aborted", [("t_txn_commit", {"TXN_COMMIT": 1}, 0), ("t_txn_abort", {"TXN_ABORT": 1}, 2)]
)
def test_the_transaction_cases_count_what_they_leave_out(case, markers, aborted):
    _rows, dec = consume(in_ledger(pe.case_entries(case)))
    assert dec.left_out == {"markers": markers, "aborted": aborted, "pending": 0, "pending_kept": 0}


# ---------------------------------------------------------------- the rules, on built entries


def message(seq, payload, **fields):
    return pe.encode_entry(pe.metadata("prod", seq, T0 + seq, **fields), payload)


def txn_message(seq, payload, txn, **fields):
    return message(seq, payload, txnid_most_bits=txn[0], txnid_least_bits=txn[1], **fields)


def batch(seq, payloads, **fields):
    return pe.encode_entry(
        pe.metadata("prod", seq, T0 + seq, num_messages_in_batch=len(payloads), **fields),
        pe.batch_payload([(pb.SingleMessageMetadata(sequence_id=seq + i), p) for i, p in enumerate(payloads)]),
    )


def marker(marker_type, txn=None, payload=b""):
    return pe.marker(marker_type, txn, payload, T0)


def payloads(rows):
    return [r["payload"] for r in rows]


@pytest.mark.parametrize("splitter", SPLITTERS)
def test_no_marker_entry_is_a_row_whatever_its_type(splitter):
    """Replicated-subscription snapshot request, response, snapshot and update
    (10-13, with their payloads), a TXN_COMMITTING (20) and a type this reader
    has no name for: none reaches a consumer, each is counted by its name."""
    entries = [
        message(0, b"a"),
        marker(10, payload=b"\n\x04snap\x12\x07us-east"),
        marker(11, payload=b"\x08\x01"),
        batch(1, [b"b", b"c"]),
        marker(12, payload=b"\n\x04snap"),
        marker(13, payload=b"\n\x03sub"),
        marker(20, txn=(1, 9)),
        marker(99, payload=b"?"),
        message(3, b"d"),
    ]
    for scan in (True, False):
        rows, dec = consume(in_ledger(entries), splitter, scan=scan)
        assert payloads(rows) == [b"a", b"b", b"c", b"d"]
        assert [r["entry_id"] for r in rows] == [0, 3, 3, 8]
        assert dec.left_out["markers"] == {
            "REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST": 1,
            "REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE": 1,
            "REPLICATED_SUBSCRIPTION_SNAPSHOT": 1,
            "REPLICATED_SUBSCRIPTION_UPDATE": 1,
            "TXN_COMMITTING": 1,
            "marker type 99": 1,
        }
        assert dec.messages == 4 and not dec.problems


@pytest.mark.parametrize("splitter", SPLITTERS)
def test_transactions_whose_markers_are_in_a_later_ledger(splitter):
    """T1 aborts and T2 commits, both markers in the topic's next ledger: T1's
    messages (one a batch) are never rows, T2's are, at their own positions."""
    t1, t2 = (1, 5), (3, 0)
    first = [
        message(0, b"p0"),
        txn_message(1, b"t1-a", t1),
        txn_message(2, b"t2-a", t2),
        batch(3, [b"t1-b", b"t1-c"], txnid_most_bits=1, txnid_least_bits=5),
        message(5, b"p1"),
    ]
    second = [
        batch(6, [b"t2-b", b"t2-c"], txnid_most_bits=3, txnid_least_bits=0),
        marker(22, t1),
        message(8, b"p2"),
        marker(21, t2),
    ]
    rows, dec = consume(in_ledger(first, 10) + in_ledger(second, 12), splitter)
    assert payloads(rows) == [b"p0", b"t2-a", b"p1", b"t2-b", b"t2-c", b"p2"]
    assert [r["txn_id"] for r in rows] == [None, "(3,0)", None, "(3,0)", "(3,0)", None]
    assert [(r["ledger_id"], r["entry_id"]) for r in rows] == [(10, 0), (10, 2), (10, 4), (12, 0), (12, 0), (12, 2)]
    assert dec.left_out == {"markers": {"TXN_ABORT": 1, "TXN_COMMIT": 1}, "aborted": 3, "pending": 0, "pending_kept": 0}
    assert not any(r["pending"] for r in rows)


def _open_topic():
    """T1 committed early; T2 opens at entry 2 and never ends; T3 begins after
    T2's first message and commits: Pulsar's maxReadPosition is entry 1."""
    t1, t2, t3 = (1, 0), (1, 1), (2, 0)
    return in_ledger(
        [
            txn_message(0, b"t1", t1),
            marker(21, t1),
            txn_message(2, b"t2", t2),
            message(3, b"p"),
            txn_message(4, b"t3", t3),
            marker(21, t3),
            batch(6, [b"q", b"r"]),
        ]
    )


@pytest.mark.parametrize("splitter", SPLITTERS)
def test_an_open_transaction_holds_back_everything_from_its_first_message(splitter):
    rows, dec = consume(_open_topic(), splitter)
    assert payloads(rows) == [b"t1"]
    assert dec.left_out == {"markers": {"TXN_COMMIT": 2}, "aborted": 0, "pending": 5, "pending_kept": 0}


@pytest.mark.parametrize("splitter", SPLITTERS)
def test_include_pending_exports_what_the_open_transaction_holds_back_marked(splitter):
    rows, dec = consume(_open_topic(), splitter, pending=True)
    assert payloads(rows) == [b"t1", b"t2", b"p", b"t3", b"q", b"r"]
    assert [r["pending"] for r in rows] == [False, True, True, True, True, True]
    assert [r["txn_id"] for r in rows] == ["(1,0)", "(1,1)", None, "(2,0)", None, None]
    assert dec.left_out == {"markers": {"TXN_COMMIT": 2}, "aborted": 0, "pending": 0, "pending_kept": 5}


@pytest.mark.parametrize("splitter", SPLITTERS)
def test_replicated_from_and_deliver_at_are_every_message_of_their_entry(splitter):
    """A consumer's getReplicatedFrom() and getDeliverAtTime() are the entry's,
    for each message of a batch too."""
    entries = [
        batch(0, [b"a", b"b"], replicated_from="us-east", deliver_at_time=T0 + 60_000),
        message(2, b"c", replicated_from="eu-west", properties={"__MSG_PROP_REPL_SOURCE_POSITION": "17:4"}),
        message(3, b"d", deliver_at_time=-5),
    ]
    rows, _dec = consume(in_ledger(entries), splitter)
    assert [r["replicated_from"] for r in rows] == ["us-east", "us-east", "eu-west", None]
    assert [r["deliver_at_time"] for r in rows] == [T0 + 60_000, T0 + 60_000, None, -5]
    assert rows[2]["properties"] == [("__MSG_PROP_REPL_SOURCE_POSITION", "17:4")]


def test_a_deliver_at_time_no_column_holds_is_a_corrupt_entry():
    rows, dec = consume(in_ledger([message(0, b"x", deliver_at_time=2**62)]))
    assert len(dec.problems) == 1 and "deliver_at_time" in dec.problems[0].reason
    assert rows[0]["error"] == dec.problems[0].reason


def test_a_chunked_message_of_an_aborted_transaction_counts_once():
    t = (4, 4)
    chunks = [
        pe.encode_entry(
            pe.metadata(
                "prod",
                0,
                T0,
                uuid="prod-0",
                chunk_id=i,
                num_chunks_from_msg=3,
                total_chunk_msg_size=6,
                txnid_most_bits=4,
                txnid_least_bits=4,
            ),
            part,
        )
        for i, part in enumerate([b"ab", b"cd", b"ef"])
    ]
    rows, dec = consume(in_ledger([*chunks, marker(22, t), message(1, b"after")]))
    assert payloads(rows) == [b"after"] and not dec.problems
    assert dec.left_out["aborted"] == 1


# ---------------------------------------------------------------- the scan and what a task carries


def test_entry_marks_reads_the_metadata_behind_broker_entry_metadata():
    assert entry_marks(pe.with_broker_metadata(marker(22, (7, 8)), 5, 9)) == (22, (7, 8))
    assert entry_marks(txn_message(0, b"x", (0, 3))) == (None, (0, 3))
    assert entry_marks(message(0, b"\xa0\x01\xb0\x01")) == (None, None)  # the tags' bytes in a payload
    assert entry_marks(message(0, b"x", partition_key="\xa0\x01")) == (None, None)  # ... in a field: parsed
    assert entry_marks(b"\x0e\x01") == (None, None)


def test_a_task_carries_only_the_aborted_transactions_its_range_may_hold():
    scan = TransactionScan()
    for position, data in in_ledger(
        [
            txn_message(0, b"a", (1, 1)),
            marker(22, (1, 1)),
            txn_message(2, b"b", (1, 2)),
            marker(22, (1, 2)),
            txn_message(4, b"c", (1, 3)),
        ],
        5,
    ):
        scan.add(position, data)
    txns = scan.result()
    assert txns.aborted == {(1, 1), (1, 2)} and txns.open == {(1, 3): (5, 4)} and txns.cutoff == (5, 4)
    assert txns.for_range(5, 2, 3).aborted == {(1, 2)}
    assert txns.for_range(5, 0, 1).aborted == {(1, 1)}
    assert txns.for_range(6, 0, 9).aborted == set() and txns.for_range(6, 0, 9).cutoff == (5, 4)
    assert txns.to_json() == {
        "committed": 0,
        "aborted": 2,
        "open": {"(1,3)": "5:4"},
        "cutoff": "5:4",
        "markers": {"TXN_ABORT": 2},
    }


class FakeReader:
    """Entries by ledger, read as LedgerReader.entries reads them."""

    def __init__(self, ledgers):
        self.ledgers = ledgers
        self.reads = []
        self.twins = fastpath.selected()

    def entries(self, source, first, last):
        assert source.offload is None  # these ledgers have only their bookies' copy
        self.reads.append((source.ledger_id, first, last))
        yield list(enumerate(self.ledgers[source.ledger_id]))[first : last + 1]


@pytest.mark.parametrize("include_pending", [False, True])
def test_tasks_learn_the_outcomes_of_transactions_decided_in_other_tasks(include_pending):
    """The export's path: one scan on the driver, then each task (here one per
    ledger, the abort marker in the second) reads its range alone."""
    t1, t2 = (1, 1), (1, 2)
    ledgers = {
        3: [message(0, b"p0"), txn_message(1, b"t1", t1), txn_message(2, b"t2", t2)],
        4: [marker(22, t1), message(3, b"p1"), marker(21, t2), txn_message(4, b"open", (9, 9)), message(5, b"p2")],
    }
    tasks = [TopicRange(TOPIC, -1, lid, 0, len(e) - 1, len(e) - 1) for lid, e in ledgers.items()]
    reader = FakeReader(ledgers)
    txns = scan_transactions(reader, tasks)
    tasks = with_transactions(tasks, txns, include_pending)
    assert reader.reads == [(3, 0, 2), (4, 0, 4)]
    rows, counts = [], []
    for task in tasks:
        c = {}
        for b in read_topic_range(reader, task, c):
            rows += b.to_pylist()
        counts.append(c["left_out"])
    assert [r["payload"] for r in rows] == [b"p0", b"t2", b"p1"] + ([b"open", b"p2"] if include_pending else [])
    assert [r["pending"] for r in rows] == [False, False, False] + ([True, True] if include_pending else [])
    from bkctl.export.source import TaskReport
    from bkctl.export.summary import LeftOut
    from bkctl.export.topic_source import TopicSource

    summed = TopicSource.left_out([TaskReport(i, [], {"left_out": c}) for i, c in enumerate(counts)])
    assert summed == LeftOut(
        markers={"TXN_ABORT": 1, "TXN_COMMIT": 1},
        aborted=1,
        pending=0 if include_pending else 2,
        pending_kept=2 if include_pending else 0,
    )
    line = left_out_text(summed, {TOPIC: txns[TOPIC].to_json()})
    assert line.startswith(
        "what a consumer would not receive: 2 marker entries (1 TXN_ABORT, 1 TXN_COMMIT); "
        "1 message of aborted transactions; 2 messages "
    )
    assert f"{TOPIC} from 4:3, transaction (9,9) open" in line
    assert ("exported with pending = true" in line) == include_pending


def test_nothing_left_out_says_nothing():
    from bkctl.export.summary import LeftOut

    assert left_out_text(LeftOut(), {}) is None
    assert TopicTransactions().cutoff is None


@pytest.mark.parametrize("case, entry_id, marker_type", [("t_txn_abort", 4, 22), ("t_txn_commit", 6, 21)])
def test_the_tests_markers_are_the_vectors_byte_for_byte(case, entry_id, marker_type):
    """pe.marker builds a transaction marker as the vectors' stand-in broker did (Markers.java)."""
    import json

    doc = json.loads((pe.vectors_dir() / "expected" / f"{case}.json").read_text())
    entry = doc["entries"][entry_id]
    txn = (entry["txnid_most_bits"], entry["txnid_least_bits"])
    assert pe.marker(marker_type, txn, publish_time=entry["publish_time"]) == pe.case_entries(case)[entry_id]


@pytest.mark.parametrize("splitter", SPLITTERS)
def test_a_base64_key_is_said_as_a_consumer_sees_it(splitter):
    """Message.hasBase64EncodedKey(): a key given as bytes is stored in base64
    with partition_key_b64_encoded set (a batch's messages each their own)."""
    messages = [
        (pb.SingleMessageMetadata(partition_key="AAE=", partition_key_b64_encoded=True), b"a"),
        (pb.SingleMessageMetadata(partition_key="plain"), b"b"),
    ]
    entries = [
        pe.encode_entry(pe.metadata("prod", 0, T0, num_messages_in_batch=2), pe.batch_payload(messages)),
        message(2, b"c", partition_key="/w==", partition_key_b64_encoded=True),
        message(3, b"d"),
    ]
    rows, _dec = consume(in_ledger(entries), splitter)
    assert [(r["key"], r["key_base64_encoded"]) for r in rows] == [
        ("AAE=", True),
        ("plain", False),
        ("/w==", True),
        (None, False),
    ]


@pytest.mark.parametrize("pending", [False, True])
def test_a_chunked_message_the_cutoff_cuts_is_held_back_whole_not_a_problem(pending):
    """Its first chunk before the open transaction's first message, its last
    after: a consumer does not get it yet, so it is held back (or kept, marked
    by its last chunk, Pulsar's id for it), never an incomplete message."""
    chunks = [
        pe.encode_entry(
            pe.metadata("prod", 0, T0, uuid="prod-0", chunk_id=i, num_chunks_from_msg=2, total_chunk_msg_size=4), part
        )
        for i, part in enumerate([b"ab", b"cd"])
    ]
    entries = in_ledger(
        [message(5, b"first"), chunks[0], txn_message(6, b"open", (8, 8)), chunks[1], message(7, b"later")]
    )
    rows, dec = consume(entries, pending=pending)
    assert not dec.problems
    if pending:
        assert [(r["payload"], r["pending"]) for r in rows] == [
            (b"first", False),
            (b"open", True),
            (b"abcd", True),
            (b"later", True),
        ]
        assert dec.left_out["pending_kept"] == 3
    else:
        assert payloads(rows) == [b"first"] and dec.left_out["pending"] == 3


@pytest.mark.parametrize("include_pending", [False, True])
@pytest.mark.parametrize("kind", ["transactions", "none"])
def test_tasks_that_find_the_transactions_themselves_then_rerun_only_those_they_change(include_pending, kind):
    """bkctl export's way: no scan first; each task reports what its range
    shows, and the tasks whose rows the merged outcomes change -- and only
    those -- run again: the rows are the scan-first ones."""
    from dataclasses import replace

    from bkctl.export.source import TaskReport
    from bkctl.export.topic_transactions import tasks_to_redo

    t1, t2 = (1, 1), (1, 2)
    if kind == "transactions":  # t1 aborts in ledger 4; (9,9) stays open from 5:1 on
        ledgers = {
            3: [message(0, b"p0"), txn_message(1, b"t1", t1), message(2, b"p1"), txn_message(3, b"t2", t2)],
            4: [marker(22, t1), message(4, b"p2"), marker(21, t2), message(5, b"p3")],
            5: [message(6, b"p4"), txn_message(7, b"open", (9, 9)), message(8, b"p5"), message(9, b"p6")],
        }
    else:
        ledgers = {lid: [message(lid * 10 + i, b"m%d" % (lid * 10 + i)) for i in range(4)] for lid in (3, 4, 5)}
    tasks = [TopicRange(TOPIC, -1, lid, first, first + 1, 3) for lid in ledgers for first in (0, 2)]
    reader = FakeReader(ledgers)

    def run(task):
        counts = {}
        rows = [r for b in read_topic_range(reader, task, counts) for r in b.to_pylist()]
        return rows, counts

    scan_first = with_transactions(tasks, scan_transactions(reader, tasks), include_pending)
    want = [r for t in scan_first for r in run(t)[0]]
    first = [run(replace(t, scan=True)) for t in tasks]
    reports = [TaskReport(i, [], c) for i, (_, c) in enumerate(first)]
    again, tasks, _txns = tasks_to_redo(
        tasks, {r.task: r.counts["transactions"] for r in reports}, reports, include_pending
    )
    got = [r for i, t in enumerate(tasks) for r in (run(t)[0] if i in again else first[i][0])]
    assert got == want
    assert again == ([0, 4, 5] if kind == "transactions" else [])  # t1's range, and from the open one on


def test_what_is_left_out_is_counted_only_inside_the_publish_time_window():
    t = (6, 6)
    entries = in_ledger(
        [
            txn_message(0, b"early aborted", t),
            marker(22, t),
            message(2, b"kept"),
            txn_message(3, b"late aborted", (6, 7)),
            marker(22, (6, 7)),
        ]
    )
    s = TransactionScan()
    for position, data in entries:
        s.add(position, data)
    dec = TopicDecoder(TOPIC, transactions=s.result(), from_ms=T0 + 2, splitter=fastpath.selected().batch_rows)
    for (ledger_id, entry_id), data in entries:
        dec.add(ledger_id, entry_id, data)
    assert dec.take()["payload"] == [b"kept"]
    assert dec.left_out["aborted"] == 1  # the late one; the early one is outside --from, as its row would be


# ---------------------------------------------------------------- the topic columns


@pytest.mark.parametrize("splitter", SPLITTERS)
def test_a_partitions_rows_name_the_topic_it_belongs_to(splitter):
    """Issue 69: a partition's rows (its folder topic=...-partition-N) carried no column naming the
    partitioned topic; ``base_topic`` does, and is the topic itself when it is not a partition."""
    from bkctl.wire.pulsar.columns import topic_values

    entries = in_ledger(pe.case_entries("c_zlib_batch"))
    for topic, partition, base in (
        ("persistent://t/ns/orders-partition-3", 3, "persistent://t/ns/orders"),
        ("persistent://t/cluster/ns/a-partition-1-partition-0", 0, "persistent://t/cluster/ns/a-partition-1"),
        ("persistent://t/ns/orders-partition-3", -1, "persistent://t/ns/orders-partition-3"),  # not one: itself
        ("persistent://t/ns/plain", -1, "persistent://t/ns/plain"),
    ):
        assert topic_values(topic, partition) == {"topic": topic, "partition": partition, "base_topic": base}
        dec = TopicDecoder(topic, partition, splitter=splitter)
        for (ledger_id, entry_id), data in entries:
            dec.add(ledger_id, entry_id, data)
        dec.finish()
        rows = pa.Table.from_batches([record_batch(p, SCHEMA) for p in dec.take_parts()], schema=SCHEMA).to_pylist()
        assert rows and {(r["topic"], r["partition"], r["base_topic"]) for r in rows} == {(topic, partition, base)}
    dec = TopicDecoder("persistent://t/ns/orders-partition-3", 3, splitter=PyMessageRows)
    for (ledger_id, entry_id), data in entries:
        dec.add(ledger_id, entry_id, data)
    dec.finish()
    taken = dec.take()
    assert set(taken["base_topic"]) == {"persistent://t/ns/orders"} and len(taken["base_topic"]) == len(taken["topic"])
