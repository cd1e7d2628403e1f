"""``bkctl pulsar schema``, the typed topic export and the publish-time pushdown against REAL
ZooKeeper and bookieds.

The module fixture stores the ``s_*`` schema vectors (tests/vectors/pulsar) as a
broker does: each topic's entries in a data ledger (each partition's in its
own) under its managed-ledger znode, each schema version's ``SchemaEntry`` in
a ledger of its own (component=schema, password ""), the locator znode under
``/schemas`` naming those ledgers (the vectors' ids 2000, 2001, ... rewritten
to ours, in the locator and in each ``SchemaEntry.index``), the partitioned
topic's metadata; ``s_schema_ledger_missing``'s version-1 ledger is created
and deleted (its id named, the ledger gone) and its orphan stored unnamed.
"""

from __future__ import annotations

import base64
import json
import uuid

import pytest

from bkctl.wire import fastpath
from bkctl.wire.proto import pulsar_ml_pb2 as ml
from bkctl.wire.proto import pulsar_schema_pb2 as spb
from tests.support import broker_ledgers
from tests.support import pulsar_entries as pe

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("pulsar-schema")]

NS = "public/default"
PUBLISHED = 1_795_740_000_000


class SchemaCluster:
    def __init__(self, uri, root, bk):
        self.uri = uri
        self.root = root  # the znode beside /ledgers: managed-ledgers, schemas, admin
        self.bk = bk
        self.schema_ledgers = {}  # case -> {vectors' id: ours}
        self.data_ledgers = {}  # case -> [ours, one per managed ledger]
        self.orphans = {}  # case -> [ours]


def _rewrite(entry, ids):
    entry.position.ledgerId = ids.get(entry.position.ledgerId, entry.position.ledgerId)


def load_schema_case(c: SchemaCluster, zk, case: str) -> None:
    got = pe.schema_case(case)
    doc, manifest = got["expected"], got["manifest"]
    c.data_ledgers[case] = []
    for ml_name, entries in got["entries"].items():
        written = broker_ledgers.write_ledger(c.bk, ml_name, entries)
        info = broker_ledgers.managed_ledger_info([written], timestamp=PUBLISHED)
        zk.create(f"{c.root}/managed-ledgers/{ml_name}", info.SerializeToString(), makepath=True)
        c.data_ledgers[case].append(written.ledger_id)
    if got["locator"] is None:
        return
    sid = doc["schema_id"]
    custom = {"application": b"pulsar", "component": b"schema", "pulsar/schemaId": sid.encode()}
    ids: dict[int, int] = {}
    for ledger in manifest["ledgers"] + manifest.get("orphan_ledgers", []):
        lid = ledger["ledger_id_in_vectors"]
        lh = c.bk.create(2, 2, 2, digest_type="CRC32C", password=b"", custom_metadata=custom)
        ids[lid] = lh.ledger_id
        if ledger.get("missing"):
            lh.close()
            c.bk.delete(lh.ledger_id)
            continue
        entry = spb.SchemaEntry.FromString(got["ledgers"][lid])
        for e in entry.index:
            _rewrite(e, ids)
        lh.add(entry.SerializeToString())
        lh.close()
        if "would_have_been_version" in ledger:
            c.orphans.setdefault(case, []).append(lh.ledger_id)
    locator = spb.SchemaLocator.FromString(got["locator"])
    _rewrite(locator.info, ids)
    for e in locator.index:
        _rewrite(e, ids)
    zk.create(f"{c.root}/schemas/{sid}", locator.SerializeToString(), makepath=True)
    c.schema_ledgers[case] = ids
    meta = manifest.get("partitioned_topic_metadata")
    if meta:
        zk.create(f"{c.root}{meta['znode']}", meta["value"].encode(), makepath=True)


@pytest.fixture(scope="module")
def schema_cluster(zookeeper, tmp_path_factory):
    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.metadata.zk import ZKMetadataStore
    from tests.support.bookieproc import BookieProcess, start_bookies

    root = f"/pulsar{uuid.uuid4().hex[:10]}"
    uri = f"zk+hierarchical://{zookeeper.connect_string}{root}/ledgers"
    base = tmp_path_factory.mktemp("schema-bookies")
    procs = [BookieProcess(base / f"bookie{i}", uri) for i in range(3)]
    bk = None
    with ZKMetadataStore(uri, timeout=20, twins=fastpath.selected()) as store:
        store.cluster.init()
        try:
            start_bookies(procs, uri)
            bk = BlockingBookKeeper(uri, timeout=60)
            c = SchemaCluster(uri, root, bk)
            for case in pe.schema_cases():
                load_schema_case(c, store.client, case)
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


def topic(case: str) -> str:
    return pe.schema_case(case)["expected"]["topic"]


# ---------------------------------------------------------------- bkctl pulsar schema


def test_schema_list_gives_every_topics_versions_from_their_ledgers(schema_cluster, capsys):
    c = schema_cluster
    code, rows, err = bkctl(capsys, c.uri, "pulsar", "schema", "list")
    assert code == 0, err
    by_topic = {r["topic"]: r for r in rows}
    assert sorted(by_topic) == sorted(topic(case) for case in c.schema_ledgers)
    for case, ids in c.schema_ledgers.items():
        row = by_topic[topic(case)]
        want = [v for v in pe.schema_case(case)["expected"]["schema_versions"]]
        assert [(v["version"], v["ledger_id"]) for v in row["versions"]] == [
            (v["version"], ids[v["ledger_id_in_vectors"]]) for v in want
        ], case
        for got, v in zip(row["versions"], want):
            if v.get("missing_ledger"):
                assert got["type"] is None and "gone" in got["problem"], case
            else:
                assert (got["type"], got["problem"]) == (v["schema_info"]["type"], None), case


def test_schema_list_for_people_names_a_version_that_cannot_be_read(schema_cluster, capsys):
    from bkctl.cli import run

    c = schema_cluster
    capsys.readouterr()
    assert run(["-m", c.uri, "pulsar", "schema", "list"]) == 0
    lines = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]
    missing = c.schema_ledgers["s_schema_ledger_missing"][2001]
    assert any(line.startswith(f"{topic('s_avro_evolved')} 1 AVRO ") for line in lines)
    assert any(
        f"{topic('s_schema_ledger_missing')} 1 ? {missing} schema ledger {missing}: gone" in line for line in lines
    ), lines


def test_schema_show_gives_a_versions_definition_and_a_partition_its_topics(schema_cluster, capsys):
    from bkctl.cli import run

    c = schema_cluster
    code, [doc], err = bkctl(capsys, c.uri, "pulsar", "schema", "show", topic("s_avro_evolved"), "--version", 0)
    assert code == 0, err
    assert [f["name"] for f in doc["definition"]["fields"]] == ["id", "owner", "balance", "legacy_code"]
    assert (doc["type"], doc["versions"], doc["hash_ok"]) == ("AVRO", [0, 1], True)
    code, [doc], err = bkctl(capsys, c.uri, "pulsar", "schema", "show", f"{topic('s_partitioned')}-partition-1")
    assert code == 0 and doc["schema_id"] == f"{NS}/vec-s-partitioned", err
    # its newest version lost: the newest that reads, the loss said first; that version by number fails
    code, [doc], err = bkctl(capsys, c.uri, "pulsar", "schema", "show", topic("s_schema_ledger_missing"))
    assert code == 0 and doc["version"] == 0 and doc["problem"].startswith("the newest version, 1, does not read")
    code, _, err = bkctl(capsys, c.uri, "pulsar", "schema", "show", topic("s_schema_ledger_missing"), "--version", 1)
    assert code == 1 and "gone" in err
    code, _, err = bkctl(capsys, c.uri, "pulsar", "schema", "show", topic("s_avro_evolved")[:-2])
    assert code == 3 and f"did you mean {topic('s_avro_evolved')}" in err, err
    code, _, err = bkctl(capsys, c.uri, "pulsar", "schema", "show", topic("s_primitive_bytes"))
    assert code == 3 and "has no schema" in err
    capsys.readouterr()
    assert run(["-m", c.uri, "pulsar", "schema", "show", topic("s_protobuf_native")]) == 0
    out = capsys.readouterr().out
    assert "root message: vec.shop.Order" in out and "  map<string, string> notes = 5;" in out


def test_schema_check_names_the_missing_ledger_and_the_orphan_and_exits_1(schema_cluster, capsys):
    from bkctl.cli import run

    c = schema_cluster
    code, rows, err = bkctl(capsys, c.uri, "pulsar", "schema", "check", "--older-than", "0")
    assert code == 1, err
    missing = c.schema_ledgers["s_schema_ledger_missing"][2001]
    assert [(r["kind"], r["topic"], r["version"], r["ledger_id"]) for r in rows] == [
        ("missing-ledger", topic("s_schema_ledger_missing"), 1, missing),
        ("orphan", topic("s_schema_ledger_missing"), None, c.orphans["s_schema_ledger_missing"][0]),
    ]
    # the default age caution: the orphan was written a moment ago, so not judged yet
    assert run(["-m", c.uri, "pulsar", "schema", "check"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert out.startswith(
        "missing-ledger (1): the topic cannot load: a broker treats a missing schema ledger as non-recoverable "
    )
    assert f" {topic('s_schema_ledger_missing')} version 1, ledger {missing}: " in out
    orphan = c.orphans["s_schema_ledger_missing"][0]
    assert out.endswith(
        f"1 finding among 9 schemas and 11 schema ledgers; not judged: 1 younger than 1h (ledger {orphan})"
    )


def test_ledger_owner_names_a_schema_ledger_by_its_topic_and_version(schema_cluster, capsys):
    from bkctl.cli import run

    c = schema_cluster
    ledger = c.schema_ledgers["s_avro_evolved"][2001]
    code, [doc], err = bkctl(capsys, c.uri, "pulsar", "ledger-owner", ledger)
    assert code == 0, err
    assert (doc["owner"], doc["topic"], doc["listed"], doc["schema_version"]) == (
        "schema",
        topic("s_avro_evolved"),
        True,
        1,
    )
    orphan = c.orphans["s_schema_ledger_missing"][0]
    assert run(["-m", c.uri, "pulsar", "ledger-owner", str(orphan)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == (
        f"ledger {orphan}: schema registry ledger of {topic('s_schema_ledger_missing')}: no schema locator "
        "names it (an orphan schema ledger; see `pulsar schema check`)"
    )
    assert lines[1].startswith("caution: created ") and lines[1].endswith("so it may be named soon")  # just written


def test_topic_show_says_the_schema_state(schema_cluster, capsys):
    from bkctl.cli import run

    c = schema_cluster
    code, [doc], err = bkctl(capsys, c.uri, "pulsar", "topic", "show", topic("s_avro_evolved"))
    assert code == 0 and doc["schema"] == {"newest": 1, "versions": [0, 1], "type": "AVRO", "problem": None}, err
    code, [doc], err = bkctl(capsys, c.uri, "pulsar", "topic", "show", topic("s_schema_ledger_missing"))
    assert code == 0 and doc["schema"]["newest"] == 1 and "gone" in doc["schema"]["problem"], err
    assert doc["schema"]["problem"].endswith("the topic cannot load (`bkctl pulsar schema check`)")
    code, [doc], err = bkctl(capsys, c.uri, "pulsar", "topic", "show", topic("s_primitive_bytes"))
    assert code == 0 and doc["schema"] is None, err
    capsys.readouterr()
    assert run(["-m", c.uri, "pulsar", "topic", "show", topic("s_avro_evolved")]) == 0
    assert "schema: version 1 (AVRO)" in capsys.readouterr().out


def test_the_delete_guard_follows_the_schema_registry(schema_cluster, capsys):
    """A live version's schema ledger is refused, naming the version and topic; the
    orphan `schema check` says to delete goes without --even-if-owned once old enough."""
    c = schema_cluster
    live = c.schema_ledgers["s_avro_evolved"][2001]
    orphan = c.orphans["s_schema_ledger_missing"][0]
    code, [doc], err = bkctl(capsys, c.uri, "ledger", "delete", live, orphan, "--dry-run", "--older-than", "0")
    assert code == 4, err
    assert doc["would_delete"] == [orphan]
    assert [r["reason"] for r in doc["refused"]] == [
        f"version 1 of the schema of topic {topic('s_avro_evolved')}: the topic cannot load without it"
    ]
    code, [doc], err = bkctl(capsys, c.uri, "ledger", "delete", orphan, "--dry-run")  # written a moment ago
    assert code == 4 and "an orphan schema ledger, but created" in doc["refused"][0]["reason"], err


# ---------------------------------------------------------------- bkctl export --topic: typed values


@pytest.fixture(scope="module")
def spark(schema_cluster, worker_spark):
    """The worker's Spark session (tests/support/spark.py), after the module's cluster."""
    pytest.importorskip("pyspark")
    return worker_spark.session()


def export(capsys, c, out, *args):
    code, docs, err = bkctl(capsys, c.uri, "export", "--out", out, "--split-entries", "2", *args)
    return code, (docs[0] if docs else None), err


def exported(out):
    """The exported rows in storage order (partition, ledger, entry, batch index) and the value's Arrow type."""
    from bkctl.export.reading import arrow_dataset

    table = arrow_dataset(out).to_table()
    value_type = table.schema.field("value").type if "value" in table.schema.names else None
    rows = sorted(table.to_pylist(), key=lambda r: (r["partition"], r["ledger_id"], r["entry_id"], r["batch_index"]))
    return rows, value_type


def expected_rows(case):
    """The case's messages in the order the export's rows come (partition, then storage order)."""
    got = pe.schema_case(case)
    doc, ids = got["expected"], got["ids"]
    order = ids["storage_order_of_send_indexes"]
    if doc.get("partitions"):
        order = sorted(order, key=lambda i: ids["messages"][i]["partition"])
    return [doc["messages"][i] for i in order]


TYPED = [
    "s_avro",
    "s_avro_evolved",
    "s_json",
    "s_keyvalue_inline",
    "s_partitioned",
    "s_primitive_int32",
    "s_primitive_string",
    "s_protobuf_native",
]


def test_a_typed_export_gives_each_message_as_the_newest_schema_reads_it(schema_cluster, tasks_here, capsys, tmp_path):
    c = schema_cluster
    for case in TYPED:
        out = tmp_path / case
        code, doc, err = export(capsys, c, out, "--topic", topic(case))
        assert code == 0, (case, err)
        want = expected_rows(case)
        assert (
            doc["schema"]["typed"]
            and doc["schema"]["reader_version"] == pe.schema_case(case)["expected"]["newest_version"]
        ), case
        assert doc["schema"]["decode_errors"] == 0, case
        rows, value_type = exported(out)
        assert [pe.typed_json(r["value"], value_type) for r in rows] == [m["reader_view"] for m in want], case
        # the message's own columns stay beside its value
        assert [r["payload"] or b"" for r in rows] == [base64.b64decode(m["payload_b64"]) for m in want]
        assert all(r["error"] is None for r in rows), case


def test_per_version_and_raw_exports(schema_cluster, tasks_here, capsys, tmp_path):
    c = schema_cluster
    want = expected_rows("s_avro_evolved")
    code, doc, err = export(capsys, c, tmp_path / "v0", "--topic", topic("s_avro_evolved"), "--schema-version", 0)
    assert code == 0, err
    rows, value_type = exported(tmp_path / "v0")
    assert [f.name for f in value_type] == ["id", "owner", "balance", "legacy_code"]
    # version 0's own messages as sent; version 1's read as version 0 (legacy_code: its default, null)
    assert [pe.typed_json(r["value"], value_type) for r in rows] == [
        m["value"]
        if m["schema_version"] == 0
        else {**{k: v for k, v in m["value"].items() if k != "tier"}, "legacy_code": None}
        for m in want
    ]
    code, doc, err = export(capsys, c, tmp_path / "raw", "--topic", topic("s_avro_evolved"), "--raw")
    assert code == 0 and doc["schema"]["why_not"] == "--raw", err
    rows, value_type = exported(tmp_path / "raw")
    assert value_type is None and len(rows) == len(want)
    code, _, err = export(capsys, c, tmp_path / "v7", "--topic", topic("s_avro_evolved"), "--schema-version", 7)
    assert code == 3 and "no schema version 7" in err
    # BYTES registers nothing: today's rows
    code, doc, err = export(capsys, c, tmp_path / "bytes", "--topic", topic("s_primitive_bytes"))
    assert code == 0 and doc["schema"]["why_not"] == "the topic has no schema", err
    assert exported(tmp_path / "bytes")[1] is None


def test_messages_whose_schema_ledger_is_gone_are_error_rows(schema_cluster, tasks_here, capsys, tmp_path):
    c = schema_cluster
    case = "s_schema_ledger_missing"
    code, doc, err = export(capsys, c, tmp_path / "m", "--topic", topic(case))
    assert code == 0, err
    want = expected_rows(case)
    rows, value_type = exported(tmp_path / "m")
    assert doc["schema"]["reader_version"] == 0 and doc["schema"]["decode_errors"] == 2
    assert [r["error"] is None for r in rows] == [m["decodable"] for m in want]
    for r, m in zip(rows, want):
        if m["decodable"]:
            assert pe.typed_json(r["value"], value_type) == m["value"]
        else:
            assert r["value"] is None and r["payload"]  # the message is still there
            assert r["error"].startswith(
                f"{topic(case)} message {r['message_id']}: does not decode by its schema: "
                "schema version 1 cannot be read: schema ledger "
            )
    assert err.count("does not decode by its schema") == 2


def test_one_folder_holds_one_topic_with_one_value_type(schema_cluster, spark, capsys, tmp_path):
    """Another topic, or the same topic with another `value`, into a folder
    already holding an export: refused (exit 4) saying which folder to use,
    the folder untouched; Spark reads what is there as written."""
    from bkctl.export.reading import manifest, read_export

    c = schema_cluster
    out = tmp_path / "one"
    code, _, err = export(capsys, c, out, "--topic", topic("s_avro"))
    assert code == 0, err
    before = manifest(out)
    code, _, err = export(capsys, c, out, "--topic", topic("s_json"))
    assert code == 4 and len(err.strip().splitlines()) == 1, err
    assert f"holds the export of {topic('s_avro')}: one folder per topic" in err
    assert f"--out {tmp_path / topic('s_json').rsplit('/', 1)[1]}" in err
    code, _, err = export(capsys, c, out, "--topic", topic("s_avro"), "--raw")
    assert code == 4 and "other columns (value: struct<" in err and "now: none" in err, err
    assert manifest(out) == before
    assert read_export(spark, str(out)).count() == len(expected_rows("s_avro"))
    code, _, err = export(capsys, c, out, "--topic", topic("s_json"), "--overwrite")
    assert code == 0, err


def test_spark_sql_selects_a_typed_field(schema_cluster, spark, capsys, tmp_path):
    from bkctl.export.reading import read_export

    c = schema_cluster
    code, _, err = export(capsys, c, tmp_path / "kv", "--topic", topic("s_keyvalue_inline"))
    assert code == 0, err
    code, _, err = export(capsys, c, tmp_path / "ev", "--topic", topic("s_avro_evolved"))
    assert code == 0, err
    read_export(spark, str(tmp_path / "ev")).createOrReplaceTempView("ev")
    by_version = spark.sql("SELECT schema_version, count(*) AS n FROM ev GROUP BY schema_version").collect()
    want = expected_rows("s_avro_evolved")
    assert {r.schema_version: r.n for r in by_version} == {
        v: sum(1 for m in want if m["schema_version"] == v) for v in {m["schema_version"] for m in want}
    }
    assert spark.sql("SELECT count(*) FROM ev WHERE schema_version = 1").collect()[0][0] == sum(
        1 for m in want if m["schema_version"] == 1
    )
    read_export(spark, str(tmp_path / "kv")).createOrReplaceTempView("kv")
    got = spark.sql(
        "SELECT value.key.site AS site, value.value.count AS n FROM kv ORDER BY entry_id, batch_index"
    ).collect()
    assert [(r.site, r.n) for r in got] == [
        (m["value"]["key"] and m["value"]["key"]["site"], m["value"]["value"] and m["value"]["value"]["count"])
        for m in expected_rows("s_keyvalue_inline")
    ]


def test_the_data_source_types_a_topics_values_too(schema_cluster, spark):
    from bkctl.export.datasource import register

    c = schema_cluster
    register(spark)

    def read(case, **options):
        reader = spark.read.format("bookkeeper").option("metadataServiceUri", c.uri).option("topic", topic(case))
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader.load()

    df = read("s_avro_evolved")
    assert (
        df.columns[-1] == "value"
        and df.schema["value"].dataType.simpleString() == "struct<id:bigint,owner:string,balance:double,tier:string>"
    )
    rows = sorted(df.select("entry_id", "batch_index", "value.*").collect(), key=lambda r: (r[0], r[1]))
    assert [r.asDict() for r in rows] == [
        {"entry_id": e, "batch_index": b, **m["reader_view"]}
        for (e, b), m in zip(sorted((r[0], r[1]) for r in rows), expected_rows("s_avro_evolved"))
    ]
    v0 = read("s_avro_evolved", schemaVersion="0")
    assert [f.name for f in v0.schema["value"].dataType.fields] == ["id", "owner", "balance", "legacy_code"]
    assert "value" not in read("s_avro_evolved", raw="true").columns


# ---------------------------------------------------------------- --from/--to: publish-time pushdown


def test_a_one_hour_window_reads_the_ledgers_of_that_hour_and_a_bisection_per_edge(
    schema_cluster, spark, capsys, tmp_path
):
    """Six ledgers of an hour each (an entry a minute, as the broker's clock
    closed them): --from/--to one hour across the second and third reads
    only those two ledgers, from one bisection per edge, and says so."""
    from bkctl.export.reading import manifest

    c = schema_cluster
    t0, minute = 1_790_000_000_000, 60_000
    name = f"{NS}/persistent/month"
    info = ml.ManagedLedgerInfo()
    for i in range(6):
        entries = [
            pe.encode_entry(pe.metadata("clock", n, t0 + n * minute), f"m{n}".encode())
            for n in range(i * 60, i * 60 + 60)
        ]
        written = broker_ledgers.write_ledger(c.bk, name, entries)
        info.ledgerInfo.add(
            ledgerId=written.ledger_id, entries=60, size=written.size, timestamp=t0 + (i * 60 + 59) * minute + 5
        )
    from bkctl.wire.metadata.zk import ZKMetadataStore

    with ZKMetadataStore(c.uri, timeout=20, twins=fastpath.selected()) as store:
        store.client.create(f"{c.root}/managed-ledgers/{name}", info.SerializeToString(), makepath=True)
    start = t0 + 90 * minute  # half way through the second ledger .. half way through the third
    code, doc, err = export(
        capsys,
        c,
        tmp_path / "hour",
        "--topic",
        "persistent://public/default/month",
        "--from",
        str(start),
        "--to",
        str(start + 60 * minute),
    )
    assert code == 0, err
    rows, _ = exported(tmp_path / "hour")
    assert [r["payload"] for r in rows] == [f"m{n}".encode() for n in range(90, 150)]
    # the slack (a minute) either side: entries 29..59 of the second ledger, 0..30 of the third
    push = manifest(tmp_path / "hour")["pushdown"]
    assert (push["ledgers_read"], push["ledgers_skipped"], push["entries_read"], push["entries_skipped"]) == (
        2,
        4,
        62,
        360 - 62,
    )
    assert push["bisection_reads"] <= 2 * 6  # log2(60) entries read per edge
    assert doc["pushdown"] == push and doc["entries"] == 62

    # the data source with option pushdown, the window a filter in Spark SQL: the same rows, from
    # those two ledgers only (one Spark partition per ledger planned: 6 without pushdown, 2 with it);
    # a DataFrame each (PySpark plans a DataFrame's later queries that push nothing as its first)
    from bkctl.export.datasource import register

    register(spark)

    def read(where, pushdown="true"):
        q = (
            spark.read.format("bookkeeper")
            .option("metadataServiceUri", c.uri)
            .option("topic", "persistent://public/default/month")
            .option("pushdown", pushdown)
            .load()
            .where(where)
        )
        sc = spark.sparkContext
        group = f"pushdown-{uuid.uuid4().hex}"
        sc.setJobGroup(group, where)
        try:
            rows = q.select("payload").collect()
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
        tracker = sc.statusTracker()
        stages = [s for j in tracker.getJobIdsForGroup(group) for s in tracker.getJobInfo(j).stageIds]
        planned = sum(tracker.getStageInfo(s).numTasks for s in stages)  # the scan's tasks: one per partition
        return sorted(r.payload for r in rows), planned

    window = f"publish_time >= timestamp_millis({start}) AND publish_time < timestamp_millis({start + 60 * minute})"
    hour = sorted(f"m{n}".encode() for n in range(90, 150))
    assert read(window) == (hour, 2)
    assert read(window, pushdown="false") == (hour, 6)
    # ledger ids too (either source); an OR, or a filter on another column, narrows nothing
    last = info.ledgerInfo[5].ledgerId
    assert read(f"ledger_id = {last}") == (sorted(f"m{n}".encode() for n in range(300, 360)), 1)
    assert read(f"ledger_id >= {last} OR payload_size < 0")[1] == 6
    assert read("producer_name = 'clock'")[1] == 6
