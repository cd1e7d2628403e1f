"""``bkctl pulsar`` and ``bkctl export --topic`` against REAL ZooKeeper and bookieds.

The module fixture plays the part of a Pulsar broker's storage: it writes the
entries the real Pulsar client produced (tests/vectors/pulsar) into ledgers
with the project's client, as a broker does (digest CRC32C, empty password,
Pulsar's custom metadata), and puts the managed-ledger and cursor znodes in
place in Pulsar's formats.  Topics: one per vector case; ``three`` spanning 3
ledgers (the last one left open) with cursors; ``parts`` partitioned in 2;
``gone`` whose second ledger was deleted; ``broken`` with a corrupt entry;
``payments`` (transactions, markers and a replicated message over two
ledgers) and ``held`` (a transaction still open), built by Pulsar's rules;
plus an orphan ledger and a cursor ledger.
"""

from __future__ import annotations

import json
import uuid

import pytest

from bkctl.wire import fastpath
from bkctl.wire.proto import pulsar_api_pb2 as pb
from bkctl.wire.proto import pulsar_ml_pb2 as ml
from tests.support import broker_ledgers
from tests.support import pulsar_entries as pe

pytestmark = [
    pytest.mark.integration,
    pytest.mark.xdist_group("pulsar"),
]  # module-scoped cluster and Spark session: one xdist worker runs the whole module

NS = "public/default"


def custom(ml_name: str, cursor: str | None = None) -> dict[str, bytes]:
    return broker_ledgers.custom_metadata(ml_name, **({"pulsar/cursor": cursor.encode()} if cursor is not None else {}))


def closed_at(entries) -> int:
    """A moment after the newest publish time among ``entries``: when a broker would have closed their ledger."""
    from bkctl.wire.pulsar.entry import decode_entry

    times = []
    for data in entries:
        try:
            times.append(decode_entry(data, verify=False).metadata.publish_time)
        except Exception:  # a corrupt entry on purpose
            continue
    return max(times, default=1795461470000) + 1000


def position(msg, ledger_id, entry_id):
    msg.ledgerId, msg.entryId = ledger_id, entry_id


class PulsarCluster:
    def __init__(self, uri, base, bk):
        self.uri = uri
        self.base = base  # the managed-ledgers znode
        self.bk = bk
        self.topics = {}  # short name -> {"ledgers": [ids], "entries": {lid: [bytes]}}
        self.ledger_of_case = {}  # vector case -> ledger id

    def write_ledger(self, ml_name, entries, close=True, cursor=None):
        lh = self.bk.create(3, 2, 2, digest_type="CRC32C", password=b"", custom_metadata=custom(ml_name, cursor))
        for data in entries:
            lh.add(data)
        if close:
            lh.close()
        return lh

    def put_topic(self, short, ledgers, cursors=None, terminated=None, zk=None, offloaded=()):
        """``ledgers``: [(ledger id, entries, closed)]; writes the ManagedLedgerInfo znode."""
        name = f"{NS}/persistent/{short}"
        info = ml.ManagedLedgerInfo()
        for lid, entries, closed in ledgers:
            li = info.ledgerInfo.add(ledgerId=lid, timestamp=0)
            if closed:  # closed after its last add, as a broker closes it (what --from/--to skips ledgers by)
                li.entries, li.size, li.timestamp = len(entries), sum(map(len, entries)), closed_at(entries)
            if lid in offloaded:
                li.offloadContext.complete = li.offloadContext.bookkeeperDeleted = True
                li.offloadContext.uidMsb, li.offloadContext.uidLsb = 7, 8
        if terminated:
            position(info.terminatedPosition, *terminated)
        zk.create(f"{self.base}/{name}", info.SerializeToString(), makepath=True)
        for cursor, value in (cursors or {}).items():
            zk.create(f"{self.base}/{name}/{cursor}", value.SerializeToString())
        self.topics[short] = {
            "ledgers": [lid for lid, _, _ in ledgers],
            "entries": {lid: list(e) for lid, e, _ in ledgers},
        }


def load_live_cursor_case(c, zk):
    """k_cursor_unconfirmed's topic ledger (closed) and sub-live's cursor ledger,
    written entry by entry and left open, with the case's ledger ids made ours."""
    case, sub = "k_cursor_unconfirmed", "sub-live"
    doc = json.loads((pe.vectors_dir() / "expected" / f"{case}.json").read_text())
    short = "live-cursor"
    ml_name = f"{NS}/persistent/{short}"
    entries = pe.case_entries(case)
    data = c.write_ledger(ml_name, entries).ledger_id
    writer = c.bk.create(3, 2, 2, digest_type="CRC32C", password=b"", custom_metadata=custom(ml_name, sub))
    ids = {1000: data, 1001: writer.ledger_id}
    folder = pe.vectors_dir() / "cursors" / case / sub
    for f in sorted((folder / "ledger").glob("*.bin"), key=lambda p: int(p.stem)):
        pos = ml.PositionInfo.FromString(f.read_bytes())
        pos.ledgerId = ids[pos.ledgerId]
        for r in pos.individualDeletedMessages:
            r.lowerEndpoint.ledgerId, r.upperEndpoint.ledgerId = data, data
        writer.add(pos.SerializeToString())
    info = ml.ManagedCursorInfo.FromString((folder / "managed_cursor_info.bin").read_bytes())
    info.cursorsLedgerId, info.markDeleteLedgerId = writer.ledger_id, data
    gone = c.write_ledger(ml_name, [ml.PositionInfo(ledgerId=data, entryId=8).SerializeToString()], cursor="sub-gone")
    c.bk.delete(gone.ledger_id)
    stale = ml.ManagedCursorInfo(cursorsLedgerId=gone.ledger_id, markDeleteLedgerId=data, markDeleteEntryId=2)
    c.put_topic(short, [(data, entries, True)], cursors={sub: info, "sub-gone": stale}, zk=zk)
    return {
        "topic": f"persistent://{NS}/{short}",
        "short": short,
        "data": data,
        "writer": writer,
        "gone": gone.ledger_id,
        "doc": doc["subscriptions"][sub],
    }


@pytest.fixture(scope="module")
def pulsar_cluster(zookeeper, tmp_path_factory):
    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.metadata.zk import ZKMetadataStore
    from tests.support.bookieproc import BookieProcess, start_bookies

    root = f"/pulsar{uuid.uuid4().hex[:10]}"
    uri = f"zk+hierarchical://{zookeeper.connect_string}{root}/ledgers"
    base = tmp_path_factory.mktemp("pulsar-bookies")
    procs = [BookieProcess(base / f"bookie{i}", uri) for i in range(3)]
    bk = None
    with ZKMetadataStore(uri, timeout=20, twins=fastpath.selected()) as store:
        store.cluster.init()
        zk = store.client
        try:
            start_bookies(procs, uri)
            bk = BlockingBookKeeper(uri, timeout=60)
            c = PulsarCluster(uri, f"{root}/managed-ledgers", bk)
            for case in pe.all_cases():
                short = f"vec-{case}"
                entries = pe.case_entries(case)
                lh = c.write_ledger(f"{NS}/persistent/{short}", entries)
                c.ledger_of_case[case] = lh.ledger_id
                c.put_topic(short, [(lh.ledger_id, entries, True)], zk=zk)

            # three ledgers, the last one open (as the broker leaves the ledger it writes)
            first, second, third = (pe.case_entries(k) for k in ("b_batch", "c_lz4_batch", "a_plain"))
            ml_three = f"{NS}/persistent/three"
            a = c.write_ledger(ml_three, first).ledger_id
            b = c.write_ledger(ml_three, second).ledger_id
            opened = c.write_ledger(ml_three, third, close=False)
            o = opened.ledger_id
            c.open_handle = opened
            sub1 = ml.ManagedCursorInfo(
                cursorsLedgerId=-1, markDeleteLedgerId=a, markDeleteEntryId=0, lastActive=1795461495000
            )
            r = sub1.individualDeletedMessages.add()  # (a:1, a:2] acks a:2
            position(r.lowerEndpoint, a, 1)
            position(r.upperEndpoint, a, 2)
            r = sub1.individualDeletedMessages.add()  # (b:0, o:1] acks b:1, o:0, o:1
            position(r.lowerEndpoint, b, 0)
            position(r.upperEndpoint, o, 1)
            partly = sub1.batchedEntryDeletionIndexInfo.add()  # a:1: only messages 0..4 still unacked
            position(partly.position, a, 1)
            partly.deleteSet.append(0b11111)
            # sub2 keeps its position in a cursor ledger (newer than the znode's)
            newer = ml.PositionInfo(ledgerId=b, entryId=1)
            cursor_ledger = c.write_ledger(
                ml_three,
                [ml.PositionInfo(ledgerId=a, entryId=2).SerializeToString(), newer.SerializeToString()],
                cursor="sub2",
            ).ledger_id
            sub2 = ml.ManagedCursorInfo(cursorsLedgerId=cursor_ledger, markDeleteLedgerId=a, markDeleteEntryId=0)
            c.put_topic(
                "three",
                [(a, first, True), (b, second, True), (o, third, False)],
                cursors={"sub1": sub1, "sub2": sub2},
                zk=zk,
            )
            c.three = {"a": a, "b": b, "o": o, "cursor_ledger": cursor_ledger}

            # the shared case k_cursor_unconfirmed as a live broker leaves it: subscription sub-live keeps its
            # position in a cursor ledger that is open (its newest PositionInfo past the LAC readers see);
            # sub-gone's cursor ledger was deleted (its znode's older position is all there is)
            c.live = load_live_cursor_case(c, zk)

            # a partitioned topic: parts-partition-0 and -1
            for n, case in enumerate(("c_zlib_batch", "c_snappy_batch")):
                short = f"parts-partition-{n}"
                entries = pe.case_entries(case)
                lid = c.write_ledger(f"{NS}/persistent/{short}", entries).ledger_id
                c.put_topic(short, [(lid, entries, True)], zk=zk)

            # a chunked message that a ledger rollover cut in two (the broker rolls between any two
            # entries): d_chunking's entries 0-2 (a message, chunks 0 and 1 of the next) in one ledger,
            # 3-6 (its last chunk, a message, a second chunked message) in the next
            chunked = pe.case_entries("d_chunking")
            ml_span = f"{NS}/persistent/spanning"
            x = c.write_ledger(ml_span, chunked[:3]).ledger_id
            y = c.write_ledger(ml_span, chunked[3:]).ledger_id
            c.put_topic("spanning", [(x, chunked[:3], True), (y, chunked[3:], True)], zk=zk)
            c.spanning = (x, y)

            # a managed ledger with a v1 name (tenant/cluster/namespace/persistent/topic), as brokers
            # before Pulsar 2 named them: topic list/show, ledger-owner, orphans and export find it
            v1_name = "legacy/cluster-a/ns/persistent/old"
            lid = c.write_ledger(v1_name, pe.case_entries("a_plain")[:1]).ledger_id
            info = ml.ManagedLedgerInfo()
            info.ledgerInfo.add(ledgerId=lid, entries=1, size=len(pe.case_entries("a_plain")[0]), timestamp=1)
            zk.create(f"{c.base}/{v1_name}", info.SerializeToString(), makepath=True)
            c.v1 = {"name": v1_name, "ledger": lid}

            # partitioned-topic metadata as Pulsar's admin writes it (JSON in the configuration store, here
            # the same ZooKeeper): "wide" has 3 partitions, only partition 1 loaded by a broker yet; "idle"
            # has 2, none loaded; "badmeta"'s value is not JSON
            admin = f"{root}/admin/partitioned-topics/{NS}/persistent"
            zk.create(f"{admin}/wide", b'{"partitions":3,"deleted":false}', makepath=True)
            zk.create(f"{admin}/idle", b'{"partitions":2}')
            zk.create(f"{admin}/badmeta", b"partitions=2")
            lid = c.write_ledger(f"{NS}/persistent/wide-partition-1", pe.case_entries("a_plain")).ledger_id
            c.put_topic("wide-partition-1", [(lid, pe.case_entries("a_plain"), True)], zk=zk)

            # a topic whose second ledger was deleted (as after a bad manual cleanup)
            ml_gone = f"{NS}/persistent/gone"
            kept = c.write_ledger(ml_gone, pe.case_entries("a_plain")).ledger_id
            deleted = c.write_ledger(ml_gone, pe.case_entries("f_nullkey_empty"))
            bk.delete(deleted.ledger_id)
            c.put_topic(
                "gone",
                [
                    (kept, pe.case_entries("a_plain"), True),
                    (deleted.ledger_id, pe.case_entries("f_nullkey_empty"), True),
                ],
                zk=zk,
            )
            c.gone = {"kept": kept, "deleted": deleted.ledger_id}

            # a topic whose first ledger was offloaded to tiered storage and deleted from BookKeeper
            ml_off = f"{NS}/persistent/offloaded"
            gone_too = c.write_ledger(ml_off, pe.case_entries("f_nullkey_empty")).ledger_id
            bk.delete(gone_too)
            here = c.write_ledger(ml_off, pe.case_entries("a_plain")).ledger_id
            c.put_topic(
                "offloaded",
                [(gone_too, pe.case_entries("f_nullkey_empty"), True), (here, pe.case_entries("a_plain"), True)],
                zk=zk,
                offloaded=[gone_too],
            )
            c.offloaded = {"deleted": gone_too, "here": here}

            # a corrupt entry between two good ones
            good = pe.case_entries("b_batch")
            bad = bytearray(good[1])
            bad[-5] ^= 0x55
            broken = [good[0], bytes(bad), good[2]]
            lid = c.write_ledger(f"{NS}/persistent/broken", broken).ledger_id
            c.put_topic("broken", [(lid, broken, True)], zk=zk)
            c.broken = lid

            # what a consumer does not receive, over two ledgers (the payments topic): a transaction
            # that aborts, one that commits, a replicated message, replicated-subscription markers; the
            # markers of both transactions are in the second ledger
            c.payments = payments_topic(c, zk)
            # a transaction still open at the end: it holds back every message from its first one on
            c.held = held_topic(c, zk)

            # an orphan: Pulsar's metadata naming "three", listed nowhere
            c.orphan = c.write_ledger(ml_three, pe.case_entries("a_plain")[:1]).ledger_id
            c.not_pulsar = bk.create(3, 2, 2, password=b"x").ledger_id
            # Pulsar's other ledgers, with the custom metadata its broker gives them (LedgerMetadataUtils)
            c.schema = bk.create(
                3,
                2,
                2,
                password=b"",
                custom_metadata={
                    "application": b"pulsar",
                    "component": b"schema",
                    "pulsar/schemaId": f"{NS}/three".encode(),
                },
            ).ledger_id
            compacted_to = ml.PositionInfo(ledgerId=b, entryId=0).SerializeToString()  # an id's bytes
            c.compacted = bk.create(
                3,
                2,
                2,
                password=b"",
                custom_metadata={
                    "application": b"pulsar",
                    "component": b"compacted-ledger",
                    "pulsar/compactedTopic": f"persistent://{NS}/three".encode(),
                    "pulsar/compactedTo": compacted_to,
                },
            ).ledger_id
            c.delayed = bk.create(
                3, 2, 2, password=b"", custom_metadata={"application": b"pulsar", "component": b"delayed-index-bucket"}
            ).ledger_id
            yield c
        finally:
            if bk is not None:
                try:
                    bk.close()
                except Exception:
                    pass
            for p in procs:
                p.kill()


def _txn(seq, payload, txn, **fields):
    return pe.encode_entry(
        pe.metadata("payments-producer", seq, T_BUILT + seq, txnid_most_bits=txn[0], txnid_least_bits=txn[1], **fields),
        payload,
    )


def _plain(seq, payload, **fields):
    return pe.encode_entry(pe.metadata("payments-producer", seq, T_BUILT + seq, **fields), payload)


T_BUILT = 1_795_600_000_000
ABORTED, COMMITTED, OPEN = (1, 0), (2, 0), (3, 7)


def payments_topic(c, zk):
    """Ledger 1: an order, the aborted transaction's message, the committed
    one's batch, a snapshot request marker; ledger 2: a replicated message (as
    the geo-replicator forwards it), the abort and commit markers, a snapshot
    marker, an order.  A consumer receives 5 messages."""
    first = [
        _plain(0, b"order 0"),
        _txn(1, b"aborted order 1", ABORTED),
        pe.encode_entry(
            pe.metadata(
                "payments-producer",
                2,
                T_BUILT + 2,
                num_messages_in_batch=2,
                txnid_most_bits=COMMITTED[0],
                txnid_least_bits=COMMITTED[1],
            ),
            pe.batch_payload(
                [
                    (pb.SingleMessageMetadata(sequence_id=2), b"committed 2"),
                    (pb.SingleMessageMetadata(sequence_id=3), b"committed 3"),
                ]
            ),
        ),
        pe.marker(10, payload=b"\n\x04snap\x12\x07us-west"),
    ]
    second = [
        _plain(4, b"from us-east", replicated_from="us-east", properties={"__MSG_PROP_REPL_SOURCE_POSITION": "9:4"}),
        pe.marker(22, ABORTED),
        pe.marker(21, COMMITTED),
        pe.marker(12, payload=b"\n\x04snap"),
        _plain(5, b"order 5", deliver_at_time=T_BUILT + 60_000),
    ]
    name = f"{NS}/persistent/payments"
    a = c.write_ledger(name, first).ledger_id
    b = c.write_ledger(name, second).ledger_id
    c.put_topic("payments", [(a, first, True), (b, second, True)], zk=zk)
    return {"ledgers": (a, b)}


def held_topic(c, zk):
    """An order, the open transaction's message at entry 1, an order, a committed transaction after it."""
    entries = [
        _plain(0, b"before"),
        _txn(1, b"open 1", OPEN),
        _plain(2, b"after 2"),
        _txn(3, b"late", COMMITTED),
        pe.marker(21, COMMITTED),
        _plain(4, b"after 4"),
    ]
    lid = c.write_ledger(f"{NS}/persistent/held", entries).ledger_id
    c.put_topic("held", [(lid, entries, True)], zk=zk)
    return {"ledger": lid}


def bkctl(capsys, uri, *args):
    """``bkctl -m URI --json ARGS`` in this process: (exit code, stdout lines as JSON, stderr)."""
    from bkctl.cli import run

    capsys.readouterr()
    code = run(["-m", uri, "--json", *map(str, args)])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines() if line.strip()], err


# ---------------------------------------------------------------- bkctl pulsar


def test_topic_list_reports_every_topic_with_what_its_managed_ledger_records(pulsar_cluster, capsys):
    c = pulsar_cluster
    code, rows, err = bkctl(capsys, c.uri, "pulsar", "topic", "list", "--namespace", NS)
    assert code == 0, err
    by_topic = {r["topic"]: r for r in rows}
    expected = {f"persistent://{NS}/{short}" for short in c.topics}
    assert set(by_topic) == expected
    three = by_topic[f"persistent://{NS}/three"]
    first, second = (pe.case_entries(k) for k in ("b_batch", "c_lz4_batch"))
    assert three == {
        "topic": f"persistent://{NS}/three",
        "managed_ledger": f"{NS}/persistent/three",
        "partition": -1,
        "ledgers": 3,
        "entries": len(first) + len(second),
        "size": sum(map(len, first + second)),
        "uncounted_ledgers": [c.three["o"]],
        "cursors": ["sub1", "sub2"],
        "terminated": False,
    }
    assert by_topic[f"persistent://{NS}/parts-partition-1"]["partition"] == 1
    code, rows, _ = bkctl(capsys, c.uri, "pulsar", "topic", "list", "--tenant", "nobody")
    assert code == 0 and rows == []


def test_a_v1_topic_is_listed_shown_and_exported_under_its_v1_name(pulsar_cluster, tasks_here, capsys, tmp_path):
    """persistent://tenant/cluster/namespace/topic, its managed ledger at
    tenant/cluster/namespace/persistent/topic (brokers before Pulsar 2)."""
    c = pulsar_cluster
    name = "persistent://legacy/cluster-a/ns/old"
    code, rows, err = bkctl(capsys, c.uri, "pulsar", "topic", "list")
    assert code == 0, err
    assert name in {r["topic"] for r in rows}
    code, rows, err = bkctl(capsys, c.uri, "pulsar", "topic", "list", "--namespace", "legacy/cluster-a/ns")
    assert code == 0, err
    assert [(r["topic"], r["managed_ledger"], r["ledgers"], r["entries"]) for r in rows] == [(name, c.v1["name"], 1, 1)]
    code, [doc], err = bkctl(capsys, c.uri, "pulsar", "topic", "show", name)
    assert code == 0, err
    [part] = doc["partitions"]
    assert [ls["ledger_id"] for ls in part["ledgers"]] == [c.v1["ledger"]]
    code, doc, err = export(capsys, c, tmp_path / "v1", "--topic", name)
    assert code == 0, err
    [row] = export_rows(tmp_path / "v1")
    assert (row["topic"], row["ledger_id"], row["payload"]) == (
        name,
        c.v1["ledger"],
        pe.expected_messages("a_plain")[0]["payload"],
    )


def test_topic_show_gives_ledgers_bookies_and_cursor_backlogs(pulsar_cluster, capsys):
    from bkctl.wire.metadata.zk import ZKMetadataStore
    from bkctl.wire.pulsar.entry import decode_entry

    c = pulsar_cluster
    t = c.three
    code, docs, err = bkctl(capsys, c.uri, "pulsar", "topic", "show", f"persistent://{NS}/three")
    assert code == 0, err
    [doc] = docs
    assert doc["partitioned"] is False
    [part] = doc["partitions"]
    entries = c.topics["three"]["entries"]
    with ZKMetadataStore(c.uri, twins=fastpath.selected()) as store:
        for ls in part["ledgers"]:
            md, _ = store.ledgers.read(ls["ledger_id"])
            assert ls["bookies"] == [str(b) for b in md.ensembles[0][1]]
    # the open ledger: a reader sees LAC 3; entry 4, past it, is on both bookies of its write set
    assert [(ls["ledger_id"], ls["state"], ls["entries"], ls["lac"], ls["beyond_lac"]) for ls in part["ledgers"]] == [
        (t["a"], "CLOSED", 3, None, 0),
        (t["b"], "CLOSED", 2, None, 0),
        (t["o"], "OPEN", 5, 3, 1),
    ]
    assert [ls["size"] for ls in part["ledgers"]] == [sum(map(len, entries[lid])) for lid in (t["a"], t["b"], t["o"])]
    assert part["ledgers"][2]["closed"] is None
    assert (part["entries"], part["size"], part["beyond_lac"]) == (10, sum(map(len, sum(entries.values(), []))), 1)
    cursors = {cur["name"]: cur for cur in part["cursors"]}
    # sub1: unacked a:1 (messages 0..4 of its batch), b:0, o:2, o:3, o:4 -- read, so bytes and messages are exact
    b0 = decode_entry(entries[t["b"]][0]).metadata.num_messages_in_batch
    assert (cursors["sub1"]["backlog_entries"], cursors["sub1"]["backlog_messages"]) == (5, 5 + b0 + 3)
    assert (
        cursors["sub1"]["backlog_bytes"]
        == len(entries[t["a"]][1]) + len(entries[t["b"]][0]) + sum(map(len, entries[t["o"]][2:]))
        and cursors["sub1"]["backlog_bytes_exact"]
    )
    assert (cursors["sub1"]["mark_delete"], cursors["sub1"]["position_from"]) == (f"{t['a']}:0", "znode")
    assert (cursors["sub1"]["position_source"], cursors["sub1"]["fallback"]) == ("znode", None)
    assert cursors["sub1"]["individually_deleted"] == [f"({t['a']}:1..{t['a']}:2]", f"({t['b']}:0..{t['o']}:1]"]
    # sub2: the cursor ledger's last entry (b:1) is newer than its znode (a:0)
    assert cursors["sub2"]["mark_delete"] == f"{t['b']}:1"
    assert cursors["sub2"]["position_from"] == f"cursor ledger {t['cursor_ledger']} entry 1"
    assert cursors["sub2"]["position_source"] == "cursor-ledger"
    assert (cursors["sub2"]["backlog_entries"], cursors["sub2"]["backlog_messages"]) == (5, 5)
    assert doc["warnings"] == []


def test_topic_show_of_a_partitioned_topic_shows_each_partition(pulsar_cluster, capsys):
    c = pulsar_cluster
    code, [doc], err = bkctl(capsys, c.uri, "pulsar", "topic", "show", f"persistent://{NS}/parts")
    assert code == 0, err
    assert doc["partitioned"] is True
    assert [p["topic"] for p in doc["partitions"]] == [f"persistent://{NS}/parts-partition-{n}" for n in (0, 1)]
    assert [p["entries"] for p in doc["partitions"]] == [2, 2]


def test_topic_show_counts_partitions_by_the_partitioned_topic_metadata(pulsar_cluster, capsys):
    from bkctl.cli import run

    c = pulsar_cluster
    code, [doc], err = bkctl(capsys, c.uri, "pulsar", "topic", "show", f"persistent://{NS}/wide")
    assert code == 0, err
    assert (doc["partitioned"], doc["declared_partitions"]) == (True, 3)
    assert [(p["partition"], p["managed_ledger"], p["entries"]) for p in doc["partitions"]] == [
        (0, None, 0),
        (1, f"{NS}/persistent/wide-partition-1", len(pe.case_entries("a_plain"))),
        (2, None, 0),
    ]
    # no partition loaded yet: a topic all the same, with no data
    code, [doc], err = bkctl(capsys, c.uri, "pulsar", "topic", "show", f"persistent://{NS}/idle")
    assert code == 0, err
    assert [p["managed_ledger"] for p in doc["partitions"]] == [None, None]
    assert run(["-m", c.uri, "pulsar", "topic", "show", f"persistent://{NS}/idle"]) == 0
    out = capsys.readouterr().out
    assert f"persistent://{NS}/idle: partitioned, 2 partitions" in out
    assert out.count("none (no broker has loaded it: no data)") == 2
    # without metadata (parts) partitions are found by name
    code, [doc], err = bkctl(capsys, c.uri, "pulsar", "topic", "show", f"persistent://{NS}/parts")
    assert code == 0 and doc["declared_partitions"] is None, err
    # metadata that does not decode: one line naming the znode, exit 1 (not a usage error)
    code, rows, err = bkctl(capsys, c.uri, "pulsar", "topic", "show", f"persistent://{NS}/badmeta")
    assert code == 1 and rows == []
    assert (
        err.startswith("bkctl: error: ")
        and f"admin/partitioned-topics/{NS}/persistent/badmeta: not partitioned-topic metadata" in err
        and len(err.strip().splitlines()) == 1
    )


def test_a_missing_topic_is_exit_3_with_a_suggestion(pulsar_cluster, capsys):
    code, rows, err = bkctl(capsys, pulsar_cluster.uri, "pulsar", "topic", "show", f"persistent://{NS}/thre")
    assert code == 3 and rows == []
    assert err.strip() == (
        f"bkctl: error: no such topic: persistent://{NS}/thre (did you mean persistent://{NS}/three?)"
    )
    code, _, err = bkctl(capsys, pulsar_cluster.uri, "pulsar", "topic", "show", "non-persistent://a/b/c")
    assert code == 2 and "only persistent topics" in err


def test_ledger_owner_names_topic_cursor_orphan_or_not_pulsar(pulsar_cluster, capsys):
    c = pulsar_cluster
    t = c.three
    cases = {
        t["b"]: ("topic", f"persistent://{NS}/three", None),
        t["cursor_ledger"]: ("cursor", f"persistent://{NS}/three", "sub2"),
        c.orphan: ("orphan", None, None),
        c.not_pulsar: ("not-pulsar", None, None),
        c.schema: ("schema", f"persistent://{NS}/three", None),  # named by its schema id, never an orphan
        c.compacted: ("compacted-ledger", f"persistent://{NS}/three", None),
        c.delayed: ("delayed-index-bucket", None, None),  # any other component: named, never judged
        c.v1["ledger"]: ("topic", "persistent://legacy/cluster-a/ns/old", None),
    }  # a v1 name
    for ledger_id, (owner, topic, cursor) in cases.items():
        code, [doc], err = bkctl(capsys, c.uri, "pulsar", "ledger-owner", ledger_id)
        assert code == 0, err
        assert (doc["owner"], doc["topic"], doc["cursor"]) == (owner, topic, cursor), ledger_id
        assert doc["listed"] == (owner in ("topic", "cursor")), ledger_id
    code, _, err = bkctl(capsys, c.uri, "pulsar", "ledger-owner", 987654321)
    assert code == 3 and "no such ledger: 987654321" in err


def test_human_output_of_ledger_owner(pulsar_cluster, capsys):
    from bkctl.cli import run

    capsys.readouterr()
    assert run(["-m", pulsar_cluster.uri, "pulsar", "ledger-owner", str(pulsar_cluster.orphan)]) == 0
    out = capsys.readouterr().out
    first, caution = out.strip().splitlines()  # made a moment ago: its broker may be about to list it
    assert first == (
        f"ledger {pulsar_cluster.orphan}: orphan (no managed ledger lists it; it names {NS}/persistent/three)"
    )
    assert caution.startswith("caution: created ") and "before its managed ledger lists it" in caution
    assert run(["-m", pulsar_cluster.uri, "pulsar", "ledger-owner", str(pulsar_cluster.schema)]) == 0
    line, caution = capsys.readouterr().out.strip().splitlines()
    assert line == (
        f"ledger {pulsar_cluster.schema}: schema registry ledger of persistent://{NS}/three: "
        "no schema locator names it (an orphan schema ledger; see `pulsar schema check`)"
    )
    assert caution.startswith("caution: created ") and "before its locator names it" in caution  # just written
    assert run(["-m", pulsar_cluster.uri, "pulsar", "ledger-owner", str(pulsar_cluster.delayed)]) == 0
    out = capsys.readouterr().out
    assert out.strip() == (
        f"ledger {pulsar_cluster.delayed}: delayed-index-bucket ledger (by its custom metadata; not checked)"
    )
    assert run(["-m", pulsar_cluster.uri, "pulsar", "ledger-owner", str(pulsar_cluster.v1["ledger"])]) == 0
    out = capsys.readouterr().out
    assert out.strip() == f"ledger {pulsar_cluster.v1['ledger']}: topic persistent://legacy/cluster-a/ns/old"


def test_orphans_lists_exactly_the_ledger_nothing_lists_once_it_is_old_enough(pulsar_cluster, capsys):
    from bkctl.cli import run

    c = pulsar_cluster
    code, rows, err = bkctl(capsys, c.uri, "pulsar", "orphans", "--older-than", "0")
    assert code == 0, err
    # the cursor ledger, the schema, compacted and delayed-index ledgers, the not-Pulsar one, the one a
    # managed ledger with a v1 name lists: not orphans
    assert [r["ledger_id"] for r in rows] == [c.orphan]
    [row] = rows
    assert (row["managed_ledger"], row["cursor"], row["state"], row["entries"]) == (
        f"{NS}/persistent/three",
        None,
        "CLOSED",
        1,
    )
    assert row["size"] == len(pe.case_entries("a_plain")[0]) and len(row["bookies"]) == 3
    # the default leaves ledgers younger than an hour alone (a broker lists a ledger after creating it)
    code, rows, err = bkctl(capsys, c.uri, "pulsar", "orphans")
    assert (code, rows) == (0, []), err
    assert run(["-m", c.uri, "pulsar", "orphans"]) == 0
    summary = " ".join(capsys.readouterr().out.split())  # rich wraps it at the console's width
    assert summary.startswith("0 orphans (0 B in closed ones) among ")
    assert summary.endswith("not judged: 1 younger than 1h, 3 of Pulsar's other components")
    code, _, err = bkctl(capsys, c.uri, "pulsar", "orphans", "--older-than", "soon")
    assert code == 2 and "--older-than: not a duration: 'soon'" in err


def test_orphans_checks_a_candidate_again_before_reporting_it(pulsar_cluster, capsys):
    """A ledger a broker lists after the sweep read the managed ledgers is not
    reported: each candidate's managed ledger is read again before it is reported (in
    batches; here one candidate a batch, so that the listing can come between two)."""
    from bkctl.wire.domain.orphans import OrphanSweep
    from bkctl.wire.metadata.zk import ZKMetadataStore

    c = pulsar_cluster
    late = c.write_ledger(f"{NS}/persistent/late", pe.case_entries("a_plain")[:1]).ledger_id
    with ZKMetadataStore(c.uri, timeout=20, twins=fastpath.selected()) as store:
        znode = f"{c.base}/{NS}/persistent/late"
        try:
            sweep = iter(OrphanSweep(store, c.base, older_than=0, recheck_batch=1))
            assert next(sweep).ledger_id == c.orphan  # the managed ledgers were read before this
            info = ml.ManagedLedgerInfo()
            info.ledgerInfo.add(ledgerId=late, timestamp=0)
            store.client.create(znode, info.SerializeToString(), makepath=True)
            assert [r.ledger_id for r in sweep] == []
        finally:
            store.client.delete(znode)
            c.bk.delete(late)


# ---------------------------------------------------------------- bkctl export --topic


@pytest.fixture(scope="module")
def spark(pulsar_cluster, worker_spark):
    """The worker's Spark session (tests/support/spark.py), after the module's cluster."""
    pytest.importorskip("pyspark")
    return worker_spark.session()


def export_rows(out):
    """The exported rows as dicts, in storage order (ledger, entry, batch index)."""
    from bkctl.export.reading import arrow_dataset

    table = arrow_dataset(out).to_table()
    rows = table.to_pylist()
    return sorted(rows, key=lambda r: (r["topic"], r["ledger_id"], r["entry_id"], r["batch_index"]))


def export(capsys, c, out, *args):
    code, docs, err = bkctl(capsys, c.uri, "export", "--out", out, "--split-entries", "2", *args)
    return code, (docs[0] if docs else None), err


def _ms(t):
    return None if t is None else round(t.timestamp() * 1000)


def assert_messages(rows, case, ledger_id, partition=-1):
    from bkctl.wire.pulsar.schema import version_of

    want = pe.expected_messages(case)
    assert len(rows) == len(want), case
    for row, m in zip(rows, want):
        got = (
            row["payload"] or b"",
            row["key"],
            row["ordering_key"],
            dict(row["properties"] or []),
            _ms(row["event_time"]),
            row["sequence_id"],
            row["producer_name"],
            row["schema_version"],
            row["ledger_id"],
            row["entry_id"],
            row["batch_index"],
            row["partition"],
            row["error"],
            _ms(row["deliver_at_time"]),
            row["replicated_from"],
            row["txn_id"],
            row["pending"],
            row["key_base64_encoded"],
        )
        assert got == (
            m["payload"],
            m["partition_key"],
            m["ordering_key"],
            m["properties"],
            m["event_timestamp"],
            m["expected_sequence_id"],
            m["producer_name"],
            version_of(m["schema_version"]),  # a number: WHERE schema_version = 1 works
            ledger_id,
            m["id"]["entry_id"],
            m["id"]["batch_index"],
            partition,
            None,
            m["deliver_at"],
            None,
            None,
            False,
            False,
        ), case


def assert_received(rows, case, ledger_id):
    """The rows are what a consumer of the case's topic receives (its consumer view)."""
    got = [
        {
            "entry_id": r["entry_id"],
            "batch_index": r["batch_index"],
            "payload": r["payload"] or b"",
            "key": r["key"],
            "ordering_key": r["ordering_key"],
            "properties": dict(r["properties"] or []),
            "event_time": _ms(r["event_time"]),
            "sequence_id": r["sequence_id"],
            "publish_time": _ms(r["publish_time"]),
            "producer_name": r["producer_name"],
            "replicated_from": r["replicated_from"],
            "deliver_at": _ms(r["deliver_at_time"]),
            "txn_id": r["txn_id"],
        }
        for r in rows
    ]
    assert got == pe.received_messages(case), case
    assert {r["ledger_id"] for r in rows} == {ledger_id} and not any(r["pending"] or r["error"] for r in rows)


def test_export_topic_gives_what_a_consumer_receives_for_every_vector_case(pulsar_cluster, spark, capsys, tmp_path):
    """The sent-messages cases: what the client sent; the consumer-view ones
    (transactions with their markers, delayed delivery): what a consumer receives."""
    c = pulsar_cluster
    consumer_view = set(pe.consumer_view_cases())
    for case in pe.all_cases():
        out = tmp_path / case
        code, doc, err = export(capsys, c, out, "--topic", f"persistent://{NS}/vec-{case}")
        assert code == 0, (case, err)
        want = pe.received_messages(case)
        assert doc["messages"] == len(want) and doc["problems"] == [], case
        assert doc["entries"] == len(pe.case_entries(case))
        # only an aborted transaction's range is read again (a committed one's rows were right)
        assert ("write_again" in doc["timings"]) == (case == "t_txn_abort"), case
        if case == "t_txn_abort":  # and says why, to people (--json is silent)
            from bkctl.cli import run

            capsys.readouterr()
            assert (
                run(
                    [
                        "-m",
                        c.uri,
                        "export",
                        "--out",
                        str(tmp_path / "said"),
                        "--split-entries",
                        "2",
                        "--topic",
                        f"persistent://{NS}/vec-{case}",
                    ]
                )
                == 0
            )
            said = capsys.readouterr().err
            assert "tasks again: they hold messages of a transaction that was aborted" in said, said
        rows = export_rows(out)
        assert {r["topic"] for r in rows} == {f"persistent://{NS}/vec-{case}"}
        if case in consumer_view:
            assert_received(rows, case, c.ledger_of_case[case])
        else:
            assert_messages(rows, case, c.ledger_of_case[case])
        for row in rows:  # the folder's day is the publish time's (UTC)
            assert row["date"] == row["publish_time"].date()


def test_a_topic_over_three_ledgers_ends_at_the_open_ledgers_lac(pulsar_cluster, tasks_here, capsys, tmp_path):
    c = pulsar_cluster
    t = c.three
    code, doc, err = export(capsys, c, tmp_path / "three", "--topic", f"persistent://{NS}/three")
    assert code == 0, err
    rows = export_rows(tmp_path / "three")
    by_ledger = {lid: [r for r in rows if r["ledger_id"] == lid] for lid in (t["a"], t["b"], t["o"])}
    assert_messages(by_ledger[t["a"]], "b_batch", t["a"])
    assert_messages(by_ledger[t["b"]], "c_lz4_batch", t["b"])
    plain = [m["payload"] for m in pe.expected_messages("a_plain")]
    # entry 4 is past the LAC a reader sees, but on an ack quorum of its bookies: the writer may have had it acked
    assert [r["payload"] for r in by_ledger[t["o"]]] == plain
    assert doc["ledgers"] == 3 and doc["entries"] == 3 + 2 + 5 and doc["read_past_lac"] == 1
    assert doc["messages"] == 25 + 15 + 5
    manifest = json.loads((tmp_path / "three" / "_manifest.json").read_text())
    assert manifest["topics"][f"persistent://{NS}/three"]["read_past_lac"] == [
        {"ledger_id": t["o"], "lac": 3, "last": 4, "entries": 1}
    ]


def test_unacked_only_exports_exactly_what_the_cursor_has_not_acknowledged(
    pulsar_cluster, tasks_here, capsys, tmp_path
):
    from bkctl.wire.pulsar.entry import decode_entry

    c = pulsar_cluster
    t = c.three
    code, doc, err = export(
        capsys,
        c,
        tmp_path / "unacked",
        "--topic",
        f"persistent://{NS}/three",
        "--subscription",
        "sub1",
        "--unacked-only",
    )
    assert code == 0, err
    got = [(r["ledger_id"], r["entry_id"], r["batch_index"]) for r in export_rows(tmp_path / "unacked")]
    b0 = decode_entry(pe.case_entries("c_lz4_batch")[0]).metadata.num_messages_in_batch
    assert got == (
        [(t["a"], 1, i) for i in range(5)]
        + [(t["b"], 0, i) for i in range(b0)]
        + [(t["o"], 2, -1), (t["o"], 3, -1), (t["o"], 4, -1)]
    )
    # sub2's newer position lives in its cursor ledger: everything after b:1
    code, doc, err = export(
        capsys,
        c,
        tmp_path / "unacked2",
        "--topic",
        f"persistent://{NS}/three",
        "--subscription",
        "sub2",
        "--unacked-only",
    )
    assert code == 0, err
    assert [(r["ledger_id"], r["entry_id"]) for r in export_rows(tmp_path / "unacked2")] == [
        (t["o"], e) for e in range(5)
    ]
    assert {s["reason"] for s in doc["skipped"]} == {"wholly acknowledged by sub2"}
    code, _, err = export(
        capsys, c, tmp_path / "x", "--topic", f"persistent://{NS}/three", "--subscription", "nope", "--unacked-only"
    )
    assert code == 3 and "has no subscription 'nope' (it has: sub1, sub2)" in err


def test_a_partitioned_topic_exports_every_partition(pulsar_cluster, spark, capsys, tmp_path):
    c = pulsar_cluster
    code, doc, err = export(capsys, c, tmp_path / "parts", "--topic", f"persistent://{NS}/parts")
    assert code == 0, err
    rows = export_rows(tmp_path / "parts")
    for n, case in enumerate(("c_zlib_batch", "c_snappy_batch")):
        mine = [r for r in rows if r["topic"] == f"persistent://{NS}/parts-partition-{n}"]
        assert_messages(mine, case, mine[0]["ledger_id"], partition=n)
        assert all(r["message_id"] == f"{r['ledger_id']}:{r['entry_id']}:{n}:{r['batch_index']}" for r in mine)
    # issue 69: each partition's folder (topic=...-partition-N) says which topic its rows belong to
    assert {r["base_topic"] for r in rows} == {f"persistent://{NS}/parts"} and len(rows) > 0
    from bkctl.export.reading import read_export

    taken = read_export(spark, str(tmp_path / "parts")).where(f"base_topic = 'persistent://{NS}/parts'")
    assert taken.count() == len(rows)
    # an export made before the column existed is not appended to silently (Spark would read one schema)
    doc = json.loads((tmp_path / "parts" / "_manifest.json").read_text())
    doc["columns"].remove("base_topic")
    (tmp_path / "parts" / "_manifest.json").write_text(json.dumps(doc))
    code, _, err = export(capsys, c, tmp_path / "parts", "--topic", f"persistent://{NS}/parts")
    assert code == 4 and "exported with other columns" in err and "now also: base_topic;" in err, err
    # partitions counted by the metadata: those with a managed ledger hold the data
    code, doc, err = export(capsys, c, tmp_path / "wide", "--topic", f"persistent://{NS}/wide")
    assert code == 0, err
    rows = export_rows(tmp_path / "wide")
    assert {r["partition"] for r in rows} == {1}
    assert_messages(rows, "a_plain", rows[0]["ledger_id"], partition=1)
    code, doc, err = export(capsys, c, tmp_path / "idle", "--topic", f"persistent://{NS}/idle")
    assert (code, doc["messages"], doc["problems"]) == (0, 0, []), err  # no partition loaded: nothing to export


def test_a_deleted_ledger_stops_the_export_unless_skip_missing(pulsar_cluster, tasks_here, capsys, tmp_path):
    c = pulsar_cluster
    code, doc, err = export(capsys, c, tmp_path / "gone", "--topic", f"persistent://{NS}/gone")
    assert code == 3 and doc["exported"] is False  # --json: a document on failure too, with the one line
    assert f"bkctl: error: {doc['error']}" == err.strip()
    assert err.strip() == (
        f"bkctl: error: ledgers listed by persistent://{NS}/gone but deleted: "
        f"{c.gone['deleted']} (of persistent://{NS}/gone) (--skip-missing exports the rest)"
    )
    assert not (tmp_path / "gone").exists()
    code, doc, err = export(capsys, c, tmp_path / "gone", "--topic", f"persistent://{NS}/gone", "--skip-missing")
    assert code == 0, err
    assert_messages(export_rows(tmp_path / "gone"), "a_plain", c.gone["kept"])
    assert doc["skipped"] == [
        {
            "ledger_id": c.gone["deleted"],
            "topic": f"persistent://{NS}/gone",
            "reason": "listed by the managed ledger but deleted",
        }
    ]


def test_a_ledger_offloaded_and_deleted_from_bookkeeper_is_skipped_and_said(
    pulsar_cluster, tasks_here, capsys, tmp_path
):
    c = pulsar_cluster
    code, doc, err = export(capsys, c, tmp_path / "off", "--topic", f"persistent://{NS}/offloaded")
    assert code == 0, err
    assert doc["skipped"] == [
        {
            "ledger_id": c.offloaded["deleted"],
            "topic": f"persistent://{NS}/offloaded",
            "reason": "offloaded to tiered storage and deleted from BookKeeper",
        }
    ]
    assert_messages(export_rows(tmp_path / "off"), "a_plain", c.offloaded["here"])
    code, [doc], err = bkctl(capsys, c.uri, "pulsar", "topic", "show", f"persistent://{NS}/offloaded")
    assert [(ls["state"], ls["offloaded"]) for ls in doc["partitions"][0]["ledgers"]] == [
        ("MISSING", True),
        ("CLOSED", False),
    ]


def test_a_corrupt_entry_is_an_error_row_or_skipped_never_silent(pulsar_cluster, tasks_here, capsys, tmp_path):
    c = pulsar_cluster
    code, doc, err = export(capsys, c, tmp_path / "broken", "--topic", f"persistent://{NS}/broken")
    assert code == 0, err
    [problem] = doc["problems"]
    assert (problem["ledger_id"], problem["entry_id"]) == (c.broken, 1)
    assert problem["reason"].startswith("checksum mismatch")
    assert err.strip() == (f"bkctl: warning: persistent://{NS}/broken ledger {c.broken} entry 1: {problem['reason']}")
    rows = export_rows(tmp_path / "broken")
    errors = [r for r in rows if r["error"]]
    assert [(r["entry_id"], r["error"]) for r in errors] == [(1, problem["reason"])]
    assert errors[0]["payload"] == c.topics["broken"]["entries"][c.broken][1]
    assert len(rows) == 10 + 1 + 5
    code, doc, err = export(
        capsys, c, tmp_path / "broken", "--topic", f"persistent://{NS}/broken", "--on-corrupt", "skip"
    )
    assert code == 0 and len(doc["problems"]) == 1 and "checksum mismatch" in err
    assert [r["entry_id"] for r in export_rows(tmp_path / "broken")] == [0] * 10 + [2] * 5


def test_publish_time_window_and_the_manifest(pulsar_cluster, tasks_here, capsys, tmp_path):
    from bkctl.export.reading import manifest

    c = pulsar_cluster
    rows = None
    code, doc, err = export(capsys, c, tmp_path / "all", "--topic", f"persistent://{NS}/vec-b_batch")
    assert code == 0, err
    rows = export_rows(tmp_path / "all")
    times = sorted({int(r["publish_time"].timestamp() * 1000) for r in rows})
    assert len(times) >= 2
    code, doc, err = export(
        capsys,
        c,
        tmp_path / "window",
        "--topic",
        f"persistent://{NS}/vec-b_batch",
        "--from",
        str(times[1]),
        "--to",
        str(times[-1] + 1),
    )
    assert code == 0, err
    kept = export_rows(tmp_path / "window")
    assert kept == [r for r in rows if int(r["publish_time"].timestamp() * 1000) >= times[1]]
    doc = manifest(tmp_path / "window")
    assert doc["partition_by"] == "topic" and doc["columns"][:4] == ["topic", "partition", "base_topic", "ledger_id"]
    assert {r["base_topic"] for r in kept} == {f"persistent://{NS}/vec-b_batch"}  # not a partition: the topic
    assert doc["last_export"]["options"]["topic"] == f"persistent://{NS}/vec-b_batch"
    assert list(doc["topics"]) == [f"persistent://{NS}/vec-b_batch"]


@pytest.mark.parametrize("split", ["2", "100"])
def test_a_chunked_message_a_ledger_rollover_cut_in_two_is_put_back_together(
    pulsar_cluster, tasks_here, capsys, tmp_path, split
):
    """As Pulsar's consumer does, across ledgers: the message is the next
    ledger's row (Pulsar's id for it is its last chunk's position), nothing is
    reported incomplete, nothing is exported twice."""
    c = pulsar_cluster
    x, y = c.spanning
    out = tmp_path / f"spanning-{split}"
    code, docs, err = bkctl(
        capsys, c.uri, "export", "--out", out, "--split-entries", split, "--topic", f"persistent://{NS}/spanning"
    )
    assert code == 0, err
    assert docs[0]["problems"] == []
    rows = export_rows(out)
    want = pe.expected_messages("d_chunking")
    assert [r["payload"] or b"" for r in rows] == [m["payload"] for m in want]
    positions = [(r["ledger_id"], r["entry_id"], r["message_id"]) for r in rows]
    assert positions == [
        (x, 0, f"{x}:0:-1"),
        (y, 0, f"{x}:1:-1;{y}:0:-1"),
        (y, 1, f"{y}:1:-1"),
        (y, 3, f"{y}:2:-1;{y}:3:-1"),
    ]


def test_reexport_is_idempotent_and_spark_reads_the_export(pulsar_cluster, spark, capsys, tmp_path):
    from bkctl.export.reading import read_export

    c = pulsar_cluster
    out = tmp_path / "again"
    for _ in range(2):
        code, doc, err = export(capsys, c, out, "--topic", f"persistent://{NS}/vec-d_chunking")
        assert code == 0, err
    rows = export_rows(out)
    assert_messages(rows, "d_chunking", c.ledger_of_case["d_chunking"])
    df = read_export(spark, out)
    assert df.count() == len(rows)
    got = sorted((r["entry_id"], r["message_id"], bytes(r["payload"])) for r in df.collect())
    assert got == sorted((r["entry_id"], r["message_id"], r["payload"]) for r in rows)
    assert any(";" in mid for _, mid, _ in got)  # the chunked messages' "first;last" ids


def test_the_data_source_reads_a_topic_with_the_topic_option(pulsar_cluster, spark, tmp_path):
    from bkctl.export.datasource import register

    c = pulsar_cluster
    register(spark)
    df = (
        spark.read.format("bookkeeper")
        .option("metadataServiceUri", c.uri)
        .option("topic", f"persistent://{NS}/three")
        .option("subscription", "sub1")
        .option("unackedOnly", "true")
        .option("splitEntries", "1")
        .load()
    )
    assert df.columns[:5] == ["topic", "partition", "base_topic", "ledger_id", "entry_id"]
    t = c.three
    got = sorted((r["ledger_id"], r["entry_id"], r["batch_index"]) for r in df.collect())
    assert got[:5] == [(t["a"], 1, i) for i in range(5)]
    assert got[-3:] == [(t["o"], 2, -1), (t["o"], 3, -1), (t["o"], 4, -1)]
    plain = (
        spark.read.format("bookkeeper")
        .option("metadataServiceUri", c.uri)
        .option("topic", f"persistent://{NS}/vec-g_samekey_batch")
        .load()
    )
    rows = sorted(plain.collect(), key=lambda r: r["batch_index"])
    assert [bytes(r["payload"]) for r in rows] == [m["payload"] for m in pe.expected_messages("g_samekey_batch")]


def test_markers_and_transactions_over_two_ledgers_are_exported_as_a_consumer_receives_them(
    pulsar_cluster, tasks_here, capsys, tmp_path
):
    """The transactions' markers are in the next ledger, so in other tasks
    (--split-entries 2) than their messages: the plan's scan tells them."""
    c = pulsar_cluster
    a, b = c.payments["ledgers"]
    code, doc, err = export(capsys, c, tmp_path / "p", "--topic", f"persistent://{NS}/payments")
    assert code == 0, err
    rows = export_rows(tmp_path / "p")
    assert [(r["ledger_id"], r["entry_id"], r["batch_index"], r["payload"]) for r in rows] == [
        (a, 0, -1, b"order 0"),
        (a, 2, 0, b"committed 2"),
        (a, 2, 1, b"committed 3"),
        (b, 0, -1, b"from us-east"),
        (b, 4, -1, b"order 5"),
    ]
    assert [r["txn_id"] for r in rows] == [None, "(2,0)", "(2,0)", None, None]
    assert [r["replicated_from"] for r in rows] == [None, None, None, "us-east", None]
    assert [_ms(r["deliver_at_time"]) for r in rows] == [None, None, None, None, T_BUILT + 60_000]
    assert doc["messages"] == 5 and doc["entries"] == 9 and doc["problems"] == []
    assert "write_again" in doc["timings"]
    assert doc["left_out"] == {
        "markers": {
            "REPLICATED_SUBSCRIPTION_SNAPSHOT": 1,
            "REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST": 1,
            "TXN_ABORT": 1,
            "TXN_COMMIT": 1,
        },
        "aborted": 1,
        "pending": 0,
        "pending_kept": 0,
    }
    topic = f"persistent://{NS}/payments"
    assert doc["transactions"][topic] == {
        "committed": 1,
        "aborted": 1,
        "open": {},
        "cutoff": None,
        "markers": {
            "REPLICATED_SUBSCRIPTION_SNAPSHOT": 1,
            "REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST": 1,
            "TXN_ABORT": 1,
            "TXN_COMMIT": 1,
        },
    }
    manifest = json.loads((tmp_path / "p" / "_manifest.json").read_text())
    assert manifest["last_export"]["left_out"] == doc["left_out"]
    assert manifest["columns"][-5:] == ["replicated_from", "deliver_at_time", "txn_id", "pending", "error"]


def test_an_open_transaction_stops_the_export_at_its_first_message_unless_include_pending(
    pulsar_cluster, tasks_here, capsys, tmp_path
):
    from bkctl.cli import run

    c = pulsar_cluster
    lid = c.held["ledger"]
    topic = f"persistent://{NS}/held"
    capsys.readouterr()
    code = run(["-m", c.uri, "export", "--out", str(tmp_path / "h"), "--split-entries", "2", "--topic", topic])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert [r["payload"] for r in export_rows(tmp_path / "h")] == [b"before"]
    assert out.startswith("exported 1 message (")
    assert (
        f"  what a consumer would not receive: 1 marker entry (1 TXN_COMMIT); 4 messages held back ({topic} "
        f"from {lid}:1, transaction (3,7) open; --include-pending exports them marked)"
    ) in out
    code, doc, err = export(capsys, c, tmp_path / "p", "--topic", topic, "--include-pending")
    assert code == 0, err
    rows = export_rows(tmp_path / "p")
    assert [(r["payload"], r["pending"], r["txn_id"]) for r in rows] == [
        (b"before", False, None),
        (b"open 1", True, "(3,7)"),
        (b"after 2", True, None),
        (b"late", True, "(2,0)"),
        (b"after 4", True, None),
    ]
    assert doc["left_out"]["pending_kept"] == 4 and doc["left_out"]["pending"] == 0
    assert doc["transactions"][topic]["cutoff"] == f"{lid}:1"


def test_the_data_source_leaves_out_what_a_consumer_does_not_receive(pulsar_cluster, spark):
    from bkctl.export.datasource import register

    c = pulsar_cluster
    register(spark)

    def read(topic, **options):
        reader = (
            spark.read.format("bookkeeper")
            .option("metadataServiceUri", c.uri)
            .option("topic", topic)
            .option("splitEntries", "2")
        )
        for key, value in options.items():
            reader = reader.option(key, value)
        return sorted(
            (r["ledger_id"], r["entry_id"], r["batch_index"], bytes(r["payload"]), r["pending"])
            for r in reader.load().collect()
        )

    a, b = c.payments["ledgers"]
    assert [p for *_, p, _ in read(f"persistent://{NS}/payments")] == [
        b"order 0",
        b"committed 2",
        b"committed 3",
        b"from us-east",
        b"order 5",
    ]
    assert [(p, pending) for *_, p, pending in read(f"persistent://{NS}/held")] == [(b"before", False)]
    assert [(p, pending) for *_, p, pending in read(f"persistent://{NS}/held", includePending="true")] == [
        (b"before", False),
        (b"open 1", True),
        (b"after 2", True),
        (b"late", True),
        (b"after 4", True),
    ]


def test_human_output_of_a_topic_export_and_of_topic_show(pulsar_cluster, tasks_here, capsys, tmp_path):
    from bkctl.cli import run

    c = pulsar_cluster
    capsys.readouterr()
    code = run(["-m", c.uri, "export", "--out", str(tmp_path / "h"), "--topic", f"persistent://{NS}/vec-b_batch"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert (
        out.startswith("exported 25 messages (")
        and f"from 3 entries of 1 ledger of persistent://{NS}/vec-b_batch to {tmp_path / 'h'}" in out
    )
    assert run(["-m", c.uri, "pulsar", "topic", "show", f"persistent://{NS}/three"]) == 0
    out = capsys.readouterr().out
    assert "sub1" in out and "sub2" in out and str(c.three["o"]) in out and "OPEN" in out
    t = c.three
    sub1 = next(line for line in out.splitlines() if line.lstrip().startswith("sub1 "))
    # where the position came from, the individually deleted ranges, the backlog counted
    assert f"({t['a']}:1..{t['a']}:2] ({t['b']}:0..{t['o']}:1]" in sub1 and " znode " in sub1
    sub2 = next(line for line in out.splitlines() if line.lstrip().startswith("sub2 "))
    assert "ledger entry 1" in sub2


# ---------------------------------------------------------------- live cursors (k_cursor_unconfirmed)


def test_a_live_subscriptions_position_is_its_open_cursor_ledgers_newest_entry_and_nothing_is_fenced(
    pulsar_cluster, tasks_here, capsys, tmp_path
):
    import base64

    from bkctl.cli import run
    from bkctl.wire.metadata.zk import ZKMetadataStore

    c = pulsar_cluster
    live = c.live
    writer = live["writer"]
    code, [doc], err = bkctl(capsys, c.uri, "pulsar", "topic", "show", live["short"])  # a short name
    assert code == 0, err
    assert doc["topic"] == live["topic"]
    cursors = {cur["name"]: cur for cur in doc["partitions"][0]["cursors"]}
    want = live["doc"]
    got = cursors["sub-live"]
    assert got["mark_delete"] == f"{live['data']}:{want['newest_position']['mark_delete'][1]}"  # 6: not 4, not 1
    assert (got["position_source"], got["fallback"]) == ("beyond-lac", None)
    assert got["position_from"] == f"cursor ledger {writer.ledger_id} entry 3 (beyond the LAC 2)"
    assert (got["backlog_entries"], got["backlog_messages"]) == (want["backlog_entries"], want["backlog_messages"])
    gone = cursors["sub-gone"]
    assert (gone["mark_delete"], gone["position_source"]) == (f"{live['data']}:2", "znode")
    assert gone["fallback"] == f"cursor ledger {live['gone']} is gone"
    assert doc["warnings"] == [
        f"{live['topic']} cursor sub-gone: position from its znode ({gone['fallback']}), "
        "which is older than the position its broker holds"
    ]
    assert err.strip() == f"bkctl: warning: {doc['warnings'][0]}"
    code, _, err = bkctl(capsys, c.uri, "pulsar", "topic", "show", live["topic"], "--strict")
    assert code == 1 and "sub-gone: position from its znode" in err and "(--strict)" in err

    # the table says where each position came from
    assert run(["-m", c.uri, "pulsar", "topic", "show", f"{NS}/{live['short']}"]) == 0
    out, err = capsys.readouterr()
    assert "beyond LAC" in out and "znode (fallback)" in out and "sub-gone" in err

    # export: what sub-live has not acknowledged, by its newest position
    code, summary, err = export(
        capsys, c, tmp_path / "live", "--topic", live["short"], "--subscription", "sub-live", "--unacked-only"
    )
    assert code == 0 and err == "", err
    rows = export_rows(tmp_path / "live")
    assert [(r["entry_id"], r["payload"]) for r in rows] == [
        (m["entry_id"], base64.b64decode(m["payload_b64"])) for m in want["unacked_messages"]
    ]
    assert summary["warnings"] == [] and summary["topics"] == [live["topic"]]
    # a subscription whose position is only its znode's: a warning, and with --strict exit 1
    code, summary, err = export(
        capsys, c, tmp_path / "stale", "--topic", live["short"], "--subscription", "sub-gone", "--unacked-only"
    )
    assert code == 0 and "bkctl: warning: " in err and "sub-gone: position from its znode" in err
    assert [r["entry_id"] for r in export_rows(tmp_path / "stale")] == list(range(3, 10))
    code, summary, err = export(
        capsys, c, tmp_path / "strict", "--topic", live["short"], "--subscription", "sub-gone", "--strict"
    )
    assert code == 1 and summary["exported"] is False and "(--strict)" in err and not (tmp_path / "strict").exists()
    assert f"bkctl: error: {summary['error']}" == err.strip().splitlines()[-1]

    # nothing was fenced or closed: the broker's cursor ledger takes its next mark-delete
    with ZKMetadataStore(c.uri, twins=fastpath.selected()) as store:
        md, _ = store.ledgers.read(writer.ledger_id)
        assert not md.is_closed
    assert writer.add(ml.PositionInfo(ledgerId=live["data"], entryId=9).SerializeToString()) == 4
    with ZKMetadataStore(c.uri, twins=fastpath.selected()) as store:
        md, _ = store.ledgers.read(writer.ledger_id)
        assert not md.is_closed


def test_topic_list_says_what_it_does_not_count_and_hints_where_managed_ledgers_are(pulsar_cluster, capsys):
    from bkctl.cli import run

    c = pulsar_cluster
    capsys.readouterr()
    assert run(["-m", c.uri, "pulsar", "topic", "list", "--namespace", NS]) == 0
    out, err = capsys.readouterr()
    three = next(line for line in out.splitlines() if f"persistent://{NS}/three " in line)
    assert " 5+ " in three and "+: and the entries of a ledger not closed yet" in out and err == ""
    assert run(["-m", c.uri, "pulsar", "--managed-ledgers", "/nowhere", "topic", "list"]) == 0
    out, err = capsys.readouterr()
    assert "no managed ledgers under /nowhere" in err and "--managed-ledgers PATH" in err
