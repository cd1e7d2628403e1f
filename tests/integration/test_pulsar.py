"""``bkctl pulsar`` and ``bkctl export --topic`` against REAL ZooKeeper and bookieds.

The module fixture plays the part of a Pulsar broker's storage: it writes the
entries the real Pulsar client produced (tests/vectors/pulsar) into ledgers
with the project's client, as a broker does (digest CRC32C, empty password,
Pulsar's custom metadata), and puts the managed-ledger and cursor znodes in
place in Pulsar's formats.  Topics: one per vector case; ``three`` spanning 3
ledgers (the last one left open) with cursors; ``parts`` partitioned in 2;
``gone`` whose second ledger was deleted; ``broken`` with a corrupt entry;
plus an orphan ledger and a cursor ledger.
"""
from __future__ import annotations

import json
import uuid

import pytest

from bkctl.wire.proto import pulsar_ml_pb2 as ml
from tests import pulsar_entries as pe

pytestmark = pytest.mark.integration

NS = "public/default"


def custom(ml_name: str, cursor: str | None = None) -> dict[str, bytes]:
    doc = {"application": b"pulsar", "component": b"managed-ledger", "pulsar/managed-ledger": ml_name.encode()}
    if cursor is not None:
        doc["pulsar/cursor"] = cursor.encode()
    return doc


def position(msg, ledger_id, entry_id):
    msg.ledgerId, msg.entryId = ledger_id, entry_id


class PulsarCluster:
    def __init__(self, uri, base, bk):
        self.uri = uri
        self.base = base          # the managed-ledgers znode
        self.bk = bk
        self.topics = {}          # short name -> {"ledgers": [ids], "entries": {lid: [bytes]}}
        self.ledger_of_case = {}  # vector case -> ledger id

    def write_ledger(self, ml_name, entries, close=True, cursor=None):
        lh = self.bk.create(3, 2, 2, digest_type="CRC32C", password=b"", custom_metadata=custom(ml_name, cursor))
        for data in entries:
            lh.add(data)
        if close:
            lh.close()
        return lh

    def put_topic(self, short, ledgers, cursors=None, terminated=None, zk=None):
        """``ledgers``: [(ledger id, entries, closed)]; writes the ManagedLedgerInfo znode."""
        name = f"{NS}/persistent/{short}"
        info = ml.ManagedLedgerInfo()
        for lid, entries, closed in ledgers:
            li = info.ledgerInfo.add(ledgerId=lid, timestamp=0)
            if closed:
                li.entries, li.size, li.timestamp = len(entries), sum(map(len, entries)), 1795461470000 + lid
        if terminated:
            position(info.terminatedPosition, *terminated)
        zk.create(f"{self.base}/{name}", info.SerializeToString(), makepath=True)
        for cursor, value in (cursors or {}).items():
            zk.create(f"{self.base}/{name}/{cursor}", value.SerializeToString())
        self.topics[short] = {"ledgers": [lid for lid, _, _ in ledgers],
                              "entries": {lid: list(e) for lid, e, _ in ledgers}}


@pytest.fixture(scope="module")
def pulsar_cluster(zookeeper, tmp_path_factory):
    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.metadata.zkstore import ZKMetadataStore
    from tests.bookieproc import BookieProcess
    from tests.integration.conftest import start_bookies

    root = f"/pulsar{uuid.uuid4().hex[:10]}"
    uri = f"zk+hierarchical://{zookeeper.connect_string}{root}/ledgers"
    base = tmp_path_factory.mktemp("pulsar-bookies")
    procs = [BookieProcess(base / f"bookie{i}", uri) for i in range(3)]
    bk = None
    with ZKMetadataStore(uri, timeout=20) as store:
        store.init_cluster()
        zk = store.client
        try:
            start_bookies(procs, uri)
            bk = BlockingBookKeeper(uri, timeout=60)
            c = PulsarCluster(uri, f"{root}/managed-ledgers", bk)
            for case in pe.cases():
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
            sub1 = ml.ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=a, markDeleteEntryId=0,
                                        lastActive=1795461495000)
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
            cursor_ledger = c.write_ledger(ml_three, [ml.PositionInfo(ledgerId=a, entryId=2).SerializeToString(),
                                                      newer.SerializeToString()], cursor="sub2").ledger_id
            sub2 = ml.ManagedCursorInfo(cursorsLedgerId=cursor_ledger, markDeleteLedgerId=a, markDeleteEntryId=0)
            c.put_topic("three", [(a, first, True), (b, second, True), (o, third, False)],
                        cursors={"sub1": sub1, "sub2": sub2}, zk=zk)
            c.three = {"a": a, "b": b, "o": o, "cursor_ledger": cursor_ledger}

            # a partitioned topic: parts-partition-0 and -1
            for n, case in enumerate(("c_zlib_batch", "c_snappy_batch")):
                short = f"parts-partition-{n}"
                entries = pe.case_entries(case)
                lid = c.write_ledger(f"{NS}/persistent/{short}", entries).ledger_id
                c.put_topic(short, [(lid, entries, True)], zk=zk)

            # a topic whose second ledger was deleted (as after a bad manual cleanup)
            ml_gone = f"{NS}/persistent/gone"
            kept = c.write_ledger(ml_gone, pe.case_entries("a_plain")).ledger_id
            deleted = c.write_ledger(ml_gone, pe.case_entries("f_nullkey_empty"))
            bk.delete(deleted.ledger_id)
            c.put_topic("gone", [(kept, pe.case_entries("a_plain"), True),
                                 (deleted.ledger_id, pe.case_entries("f_nullkey_empty"), True)], zk=zk)
            c.gone = {"kept": kept, "deleted": deleted.ledger_id}

            # a corrupt entry between two good ones
            good = pe.case_entries("b_batch")
            bad = bytearray(good[1])
            bad[-5] ^= 0x55
            broken = [good[0], bytes(bad), good[2]]
            lid = c.write_ledger(f"{NS}/persistent/broken", broken).ledger_id
            c.put_topic("broken", [(lid, broken, True)], zk=zk)
            c.broken = lid

            # an orphan: Pulsar's metadata naming "three", listed nowhere
            c.orphan = c.write_ledger(ml_three, pe.case_entries("a_plain")[:1]).ledger_id
            c.not_pulsar = bk.create(3, 2, 2, password=b"x").ledger_id
            yield c
        finally:
            if bk is not None:
                try:
                    bk.close()
                except Exception:
                    pass
            for p in procs:
                p.kill()


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
    assert three == {"topic": f"persistent://{NS}/three", "managed_ledger": f"{NS}/persistent/three",
                     "partition": -1, "ledgers": 3, "entries": len(first) + len(second),
                     "size": sum(map(len, first + second)), "cursors": ["sub1", "sub2"], "terminated": False}
    assert by_topic[f"persistent://{NS}/parts-partition-1"]["partition"] == 1
    code, rows, _ = bkctl(capsys, c.uri, "pulsar", "topic", "list", "--tenant", "nobody")
    assert code == 0 and rows == []


def test_topic_show_gives_ledgers_bookies_and_cursor_backlogs(pulsar_cluster, capsys):
    from bkctl.wire.metadata.zkstore import ZKMetadataStore

    c = pulsar_cluster
    t = c.three
    code, docs, err = bkctl(capsys, c.uri, "pulsar", "topic", "show", f"persistent://{NS}/three")
    assert code == 0, err
    [doc] = docs
    assert doc["partitioned"] is False
    [part] = doc["partitions"]
    entries = c.topics["three"]["entries"]
    with ZKMetadataStore(c.uri) as store:
        for ls in part["ledgers"]:
            md, _ = store.read_ledger(ls["ledger_id"])
            assert ls["bookies"] == [str(b) for b in md.ensembles[0][1]]
    assert [(ls["ledger_id"], ls["state"], ls["entries"]) for ls in part["ledgers"]] == [
        (t["a"], "CLOSED", 3), (t["b"], "CLOSED", 2), (t["o"], "OPEN", 4)]  # open: a reader sees LAC 3
    assert part["ledgers"][0]["size"] == sum(map(len, entries[t["a"]]))
    assert part["ledgers"][2]["size"] is None and part["ledgers"][2]["closed"] is None
    cursors = {cur["name"]: cur for cur in part["cursors"]}
    # sub1: unacked a:1 (partly), b:0, o:2, o:3 (o:4 is past the LAC a reader sees)
    assert cursors["sub1"]["backlog_entries"] == 4
    assert cursors["sub1"]["mark_delete"] == f"{t['a']}:0"
    assert cursors["sub1"]["position_from"] == "znode"
    mean_a = sum(map(len, entries[t["a"]])) / 3
    mean_b = sum(map(len, entries[t["b"]])) / 2
    mean_all = (sum(map(len, entries[t["a"]])) + sum(map(len, entries[t["b"]]))) / 5
    assert cursors["sub1"]["backlog_bytes"] == round(mean_a + mean_b + 2 * mean_all)
    # sub2: the cursor ledger's last entry (b:1) is newer than its znode (a:0)
    assert cursors["sub2"]["mark_delete"] == f"{t['b']}:1"
    assert cursors["sub2"]["position_from"] == f"cursor ledger {t['cursor_ledger']} entry 1"
    assert cursors["sub2"]["backlog_entries"] == 4


def test_topic_show_of_a_partitioned_topic_shows_each_partition(pulsar_cluster, capsys):
    c = pulsar_cluster
    code, [doc], err = bkctl(capsys, c.uri, "pulsar", "topic", "show", f"persistent://{NS}/parts")
    assert code == 0, err
    assert doc["partitioned"] is True
    assert [p["topic"] for p in doc["partitions"]] == [f"persistent://{NS}/parts-partition-{n}" for n in (0, 1)]
    assert [p["entries"] for p in doc["partitions"]] == [2, 2]


def test_a_missing_topic_is_exit_3_with_a_suggestion(pulsar_cluster, capsys):
    code, rows, err = bkctl(capsys, pulsar_cluster.uri, "pulsar", "topic", "show", f"persistent://{NS}/thre")
    assert code == 3 and rows == []
    assert err.strip() == (f"bkctl: error: no such topic: persistent://{NS}/thre "
                           f"(did you mean persistent://{NS}/three?)")
    code, _, err = bkctl(capsys, pulsar_cluster.uri, "pulsar", "topic", "show", "non-persistent://a/b/c")
    assert code == 2 and "only persistent topics" in err


def test_ledger_owner_names_topic_cursor_orphan_or_not_pulsar(pulsar_cluster, capsys):
    c = pulsar_cluster
    t = c.three
    cases = {t["b"]: ("topic", f"persistent://{NS}/three", None),
             t["cursor_ledger"]: ("cursor", f"persistent://{NS}/three", "sub2"),
             c.orphan: ("orphan", None, None),
             c.not_pulsar: ("not-pulsar", None, None)}
    for ledger_id, (owner, topic, cursor) in cases.items():
        code, [doc], err = bkctl(capsys, c.uri, "pulsar", "ledger-owner", ledger_id)
        assert code == 0, err
        assert (doc["owner"], doc["topic"], doc["cursor"]) == (owner, topic, cursor), ledger_id
    code, _, err = bkctl(capsys, c.uri, "pulsar", "ledger-owner", 987654321)
    assert code == 3 and "no such ledger: 987654321" in err


def test_human_output_of_ledger_owner(pulsar_cluster, capsys):
    from bkctl.cli import run

    capsys.readouterr()
    assert run(["-m", pulsar_cluster.uri, "pulsar", "ledger-owner", str(pulsar_cluster.orphan)]) == 0
    out = capsys.readouterr().out
    assert out.strip() == (f"ledger {pulsar_cluster.orphan}: orphan (no managed ledger lists it; it names "
                           f"{NS}/persistent/three)")
