"""Pulsar's offloaded ledgers with no broker: ``bkctl export --topic`` across BookKeeper and the
object store, ``bkctl pulsar offload list|verify|orphans``, against a REAL S3 server (SeaweedFS,
tests/support/s3_server.py), real ZooKeeper and bookieds.  Every case of tests/vectors/offload is
laid out as its broker left it (tests/support/offload_cases.py): the objects Pulsar's offloader
made, uploaded under their keys with their metadata (the large case as a multipart upload, one
part per block) or the filesystem offloader's MapFiles in a folder, the ledgers still in
BookKeeper, and the managed ledger whose driver metadata names this test's bucket and endpoint.

The exports that read run in this process (:func:`export`), on the worker's Spark session: each
as a process of its own started a Spark JVM of its own, some 25 CPU-seconds a run.  Those
that fail before reading, and the commands that start no Spark, run as operators run them."""

from __future__ import annotations

import json
import uuid

import pytest

from bkctl.wire import fastpath
from tests.support import broker_ledgers
from tests.support import offload_cases as oc
from tests.support import pulsar_entries as pe
from tests.support.cli import Ran, env_for, run_bkctl, run_in_process
from tests.support.spark import tasks_in_this_process, workers_environment

# test_backup's group: the other module that reads an S3 server and Spark, so that one worker runs
# both on its one Spark session (a JVM, some 20 CPU-seconds to start) and its one S3 server, where
# a group of its own had another worker start both again
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("backup")]


class Cluster:
    def __init__(self, uri, managed_ledgers, bucket, s3, fs_root, planted):
        self.uri = uri
        self.managed_ledgers = managed_ledgers
        self.bucket = bucket
        self.s3 = s3
        self.fs_root = fs_root
        self.planted = planted

    def env(self, **extra):
        return env_for(self.uri, **self.s3.env(), **extra)

    def bkctl(self, *args, env=None, timeout=300):
        return run_bkctl(env or self.env(), *args, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def spark(offload_cluster, worker_spark):
    """The worker's Spark session (tests/support/spark.py), after the module's cluster."""
    return worker_spark.session()


def export(spark, capsys, uri: str, s3, *args) -> Ran:
    """``bkctl export ARGS`` on cluster ``uri`` in this process, as :meth:`Cluster.bkctl` runs it in
    another: the S3 server's credentials (``s3``: an S3Endpoint) in this process's environment and
    in that of the Spark workers reading the offloaded ledgers."""
    with workers_environment(spark, s3.env()):
        return run_in_process(capsys, {"NO_COLOR": "1", "BKCTL_METADATA_URI": uri, **s3.env()}, "export", *args)


@pytest.fixture(scope="module")
def offload_cluster(zookeeper, s3_server, tmp_path_factory):
    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.metadata.zk import ZKMetadataStore
    from tests.support.bookieproc import BookieProcess, start_bookies

    root = f"/offload{uuid.uuid4().hex[:10]}"
    uri = f"zk+hierarchical://{zookeeper.connect_string}{root}/ledgers"
    base = tmp_path_factory.mktemp("offload-bookies")
    fs_root = tmp_path_factory.mktemp("offload-fs")
    procs = [BookieProcess(base / f"bookie{i}", uri) for i in range(2)]
    bucket = s3_server.new_bucket("offload")
    bk = None
    with ZKMetadataStore(uri, timeout=20, twins=fastpath.selected()) as store:
        store.cluster.init()
        try:
            start_bookies(procs, uri)
            bk = BlockingBookKeeper(uri, timeout=60)
            planted = {
                case: oc.plant(
                    case, store, bk, f"{root}/managed-ledgers", s3=s3_server, bucket=bucket.name, fs_root=fs_root
                )
                for case in oc.cases()
            }
            yield Cluster(uri, f"{root}/managed-ledgers", bucket, s3_server, fs_root, planted)
        finally:
            if bk is not None:
                bk.close()
            for p in procs:
                p.stop()
            bucket.drop()


def export_rows(out):
    from bkctl.export.reading import arrow_dataset

    rows = arrow_dataset(out).to_table().to_pylist()
    return sorted(rows, key=lambda r: (r["ledger_id"], r["entry_id"], r.get("batch_index") or 0))


def expected_rows(case):
    """What a consumer receives from the case's topic: the Pulsar case's messages, at the positions
    the offload case gives them (a repeated case: each copy at its own entries)."""
    doc = oc.expected(case)
    pulsar_case = doc["pulsar_case"]
    positions = []  # (ledger, entry, pulsar case entry), storage order
    for part in doc["topic_entries_in_order"]:
        files = part["pulsar_case_entry_files"]
        for r in range(part["repeat"]):
            for j, k in enumerate(files):
                positions.append((part["ledger_id"], part["first_entry_id"] + r * len(files) + j, k))
    by_entry = {}
    for m in pe.received_messages(pulsar_case):
        by_entry.setdefault(m["entry_id"], []).append(m)
    out = []
    for ledger, entry, k in positions:
        for m in by_entry.get(k, []):
            out.append((ledger, entry, m["batch_index"], m["payload"], m["key"], m["properties"], m["sequence_id"]))
    return out


def got_rows(rows):
    return [
        (
            r["ledger_id"],
            r["entry_id"],
            r["batch_index"],
            r["payload"] or b"",
            r["key"],
            dict(r["properties"] or []),
            r["sequence_id"],
        )
        for r in rows
    ]


#: the case whose topic export runs on Spark (its Python workers reading the object store with the
#: credentials of their environment); the other cases' tasks run in the test's process
#: (tests/support/spark.py: the same export, the same tasks, no JVM)
ON_SPARK = "s3_b_batch_5mib"


@pytest.mark.parametrize("case", oc.cases())
def test_export_topic_gives_the_pulsar_cases_rows_across_bookkeeper_and_the_object_store(
    offload_cluster, worker_spark, monkeypatch, capsys, case, tmp_path
):
    c = offload_cluster
    p = c.planted[case]
    out = tmp_path / "out"
    args = ["--out", out, "--topic", p.topic, "--managed-ledgers", c.managed_ledgers, "--json"]
    if case.startswith("fs_"):
        args += ["--split-entries", "2"]
    if case == ON_SPARK:
        done = export(worker_spark.session(), capsys, c.uri, c.s3, *args)
    else:
        with tasks_in_this_process(monkeypatch):
            done = run_in_process(capsys, {"NO_COLOR": "1", "BKCTL_METADATA_URI": c.uri, **c.s3.env()}, "export", *args)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["problems"] == [] and doc["skipped"] == [], doc
    rows = export_rows(out)
    want = expected_rows(case)
    # chunked messages: the row goes with the ledger and entry of the message's last chunk
    assert len(rows) == len(want) and doc["messages"] == len(want)
    if case == "s3_d_chunking_small_blocks":
        assert sorted(r[3] for r in got_rows(rows)) == sorted(w[3] for w in want)
    else:
        assert got_rows(rows) == want
    # every offloaded ledger was read from its offloaded copy, once
    offloaded = {ledger["ledger_id"] for ledger in oc.expected(case)["ledgers"] if ledger["storage"] != "bookkeeper"}
    manifest = json.loads((out / "_manifest.json").read_text())
    (topic_doc,) = manifest["topics"].values()
    assert {o["ledger_id"] for o in topic_doc["offloaded"]} == offloaded


def offloaded_ledger_ids(cases):
    return {
        ledger["ledger_id"]
        for case in cases
        for ledger in oc.expected(case)["ledgers"]
        if ledger["storage"] != "bookkeeper"
    }


def test_verify_passes_every_case_as_the_offloader_wrote_it(offload_cluster):
    c = offload_cluster
    done = c.bkctl("pulsar", "--managed-ledgers", c.managed_ledgers, "offload", "verify", "--entries", "--json")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert {r["ledger_id"] for r in rows} == offloaded_ledger_ids(oc.cases())
    assert all(r["ok"] and r["problems"] == [] for r in rows), rows
    # the ledgers whose BookKeeper copy is kept were checked against their znode
    kept = {ledger["ledger_id"] for case in oc.cases() for ledger in oc.expected(case)["ledgers"]
            if ledger["storage"] != "bookkeeper" and not ledger["bookkeeper_deleted"]}  # fmt: skip
    assert {r["ledger_id"] for r in rows if r["in_bookkeeper"]} == kept


def test_list_shows_each_offloaded_ledger_where_and_how_big(offload_cluster):
    c = offload_cluster
    topic = c.planted["s3_a_plain"].topic
    done = c.bkctl("pulsar", "--managed-ledgers", c.managed_ledgers, "offload", "list", topic, "--json")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    by_id = {r["ledger_id"]: r for r in rows}
    assert set(by_id) == {4001, 4002}
    assert by_id[4001]["bucket"] == c.bucket.name and by_id[4001]["endpoint"] == c.s3.endpoint_url
    assert by_id[4001]["objects"] == [
        "7fecb68e-619e-45f9-80bf-a5a9b8fcedf1-ledger-4001",
        "7fecb68e-619e-45f9-80bf-a5a9b8fcedf1-ledger-4001-index",
    ]
    assert (by_id[4001]["entries"], by_id[4001]["size"], by_id[4001]["bookkeeper_deleted"]) == (2, 343, True)
    assert by_id[4002]["bookkeeper_deleted"] is False
    human = c.bkctl("pulsar", "--managed-ledgers", c.managed_ledgers, "offload", "list")
    assert human.returncode == 0 and "offloaded ledgers" in human.stdout
    for secret in (c.s3.credentials.access_key, c.s3.credentials.secret_key):
        assert secret not in human.stdout + done.stdout


@pytest.fixture(scope="module")
def defects(offload_cluster, zookeeper, s3_server, tmp_path_factory):
    """A copy of three cases in a cluster of their own, each with a defect planted: 4001's data
    object missing, 4002's znode disagreeing with its offloaded metadata, 5001's data object
    truncated, 6001's index saying one entry more than the ledger holds."""
    import struct
    from dataclasses import replace

    from bkctl.wire.metadata.zk import ZKMetadataStore
    from bkctl.wire.proto import formats_pb2

    root = f"/offload-defects{uuid.uuid4().hex[:10]}"
    uri = f"zk+hierarchical://{zookeeper.connect_string}{root}/ledgers"
    bucket = s3_server.new_bucket("defects")
    client = bucket.client
    with ZKMetadataStore(uri, timeout=20, twins=fastpath.selected()) as store:
        store.cluster.init()
        for case in ("s3_a_plain", "s3_d_chunking_small_blocks", "s3_b_batch_5mib"):
            oc.plant(case, store, None, f"{root}/managed-ledgers", s3=s3_server, bucket=bucket.name)
        client.delete_object(Bucket=bucket.name, Key="7fecb68e-619e-45f9-80bf-a5a9b8fcedf1-ledger-4001")
        md, version = store.ledgers.read(4002)
        store.ledgers.update(4002, replace(md, custom_metadata={**md.custom_metadata, "extra": b"x"}), version)
        d_key = "aa536999-10b4-4e88-aec3-2136f199fcc6-ledger-5001"
        client.put_object(Bucket=bucket.name, Key=d_key, Body=oc.objects("s3_d_chunking_small_blocks")[d_key][:-100],
                          Metadata=oc.blob_metadata("s3_d_chunking_small_blocks")[d_key]["user_metadata_as_set"])  # fmt: skip
        b_case = "s3_b_batch_5mib"
        (b_ledger,) = [x for x in oc.expected(b_case)["ledgers"] if x["storage"] != "bookkeeper"]
        raw = oc.objects(b_case)[b_ledger["index_key"]]
        magic, _, data_length, header_length, count, md_length = struct.unpack_from(">iiqqii", raw)
        pb = formats_pb2.LedgerMetadataFormat.FromString(raw[32 : 32 + md_length])
        pb.lastEntryId += 1
        new_md = pb.SerializeToString()
        blocks = raw[32 + md_length :]
        index = struct.pack(">iiqqii", magic, 32 + len(new_md) + len(blocks), data_length, header_length, count,
                            len(new_md)) + new_md + blocks  # fmt: skip
        client.put_object(Bucket=bucket.name, Key=b_ledger["index_key"], Body=index,
                          Metadata=oc.blob_metadata(b_case)[b_ledger["index_key"]]["user_metadata_as_set"])  # fmt: skip
    try:
        yield {"uri": uri, "managed_ledgers": f"{root}/managed-ledgers", "bucket": bucket}
    finally:
        bucket.drop()


def test_verify_names_each_planted_defect_and_fails(defects, s3_server):
    env = env_for(defects["uri"], **s3_server.env())
    done = run_bkctl(env, "pulsar", "--managed-ledgers", defects["managed_ledgers"], "offload", "verify", "--json",
                     text=True)  # fmt: skip
    assert done.returncode == 1, done.stderr
    rows = {r["ledger_id"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert {lid for lid, r in rows.items() if not r["ok"]} == {4001, 4002, 5001, 6001}
    assert "missing" in rows[4001]["problems"][0]
    assert any("custom metadata" in p and "ZooKeeper" in p for p in rows[4002]["problems"])
    assert any("truncated" in p for p in rows[5001]["problems"])
    assert any("6151 entries" in p and "6150" in p for p in rows[6001]["problems"])
    errors = [line for line in done.stderr.splitlines() if line.startswith("bkctl: error: ledger ")]
    assert sorted(int(line.split()[3]) for line in errors) == [4001, 4002, 5001, 6001]


def test_orphans_finds_the_planted_orphans_and_an_abandoned_upload_and_nothing_else(offload_cluster):
    c = offload_cluster
    client = c.s3.client()
    stray = "0b7c3a10-1111-4222-8333-944455556666-ledger-9999"
    foreign = ["not-pulsar.txt", "bkbackup/archive.json", "bkbackup/ledgers/9999/none-0-3.data"]
    for key in (stray, f"{stray}-index", *foreign):
        client.put_object(Bucket=c.bucket.name, Key=key, Body=b"x" * 100)
    upload = client.create_multipart_upload(
        Bucket=c.bucket.name, Key="0b7c3a10-2222-4222-8333-944455556666-ledger-9998"
    )
    client.upload_part(
        Bucket=c.bucket.name, Key=upload["Key"], UploadId=upload["UploadId"], PartNumber=1, Body=b"y" * 1000
    )
    mapfile = c.fs_root / "public/default/persistent/gone/9997-0b7c3a10-3333-4222-8333-944455556666"
    mapfile.mkdir(parents=True)
    (mapfile / "data").write_bytes(b"z" * 10)
    (mapfile / "index").write_bytes(b"z" * 5)
    try:
        done = c.bkctl("pulsar", "--managed-ledgers", c.managed_ledgers, "offload", "orphans", "--older-than", "0s",
                       "--json")  # fmt: skip
        assert done.returncode == 0, done.stderr
        rows = [json.loads(line) for line in done.stdout.splitlines()]
        assert sorted((r["kind"], r["key"], r["size"]) for r in rows) == sorted(
            [
                ("object", stray, 100),
                ("object", f"{stray}-index", 100),
                ("upload", upload["Key"], 1000),
                ("mapfile", "public/default/persistent/gone/9997-0b7c3a10-3333-4222-8333-944455556666", 15),
            ]
        )
        # what is not Pulsar's (a backup archive in the same bucket) is counted apart
        human = c.bkctl("pulsar", "--managed-ledgers", c.managed_ledgers, "offload", "orphans", "--older-than", "0s")
        assert human.returncode == 0 and "3 not Pulsar's (300 B" in human.stdout, human.stdout
        assert "bkbackup" not in human.stdout
        # young ones are left alone
        young = c.bkctl("pulsar", "--managed-ledgers", c.managed_ledgers, "offload", "orphans", "--json")
        assert young.returncode == 0 and young.stdout == ""
    finally:
        client.abort_multipart_upload(Bucket=c.bucket.name, Key=upload["Key"], UploadId=upload["UploadId"])
        client.delete_objects(
            Bucket=c.bucket.name, Delete={"Objects": [{"Key": k} for k in (stray, f"{stray}-index", *foreign)]}
        )
        import shutil

        shutil.rmtree(mapfile.parent)


def test_orphans_judges_an_object_by_the_offloader_s_metadata_and_never_a_backup_s(offload_cluster):
    """An object Pulsar's offloader wrote (its user metadata says so) under a key of another form
    is judged, and listed; a bkctl backup archive's objects in the same bucket are not Pulsar's."""
    c = offload_cluster
    client = c.s3.client()
    blobs = oc.blob_metadata("s3_a_plain")
    offloader = next(iter(blobs.values()))["user_metadata_as_set"]
    moved = "moved-by-hand/7fecb68e-ledger-9996"
    backup = ["bkbackup/archive.json", "bkbackup/ledgers/9996/none-0-3.data"]
    client.put_object(Bucket=c.bucket.name, Key=moved, Body=b"m" * 40, Metadata=offloader)
    for key in backup:
        client.put_object(Bucket=c.bucket.name, Key=key, Body=b"b" * 10, Metadata={"role": "data"})
    try:
        done = c.bkctl("pulsar", "--managed-ledgers", c.managed_ledgers, "offload", "orphans", "--older-than", "0s",
                       "--json")  # fmt: skip
        assert done.returncode == 0, done.stderr
        rows = [json.loads(line) for line in done.stdout.splitlines()]
        assert [(r["kind"], r["key"], r["size"], r["ledger_id"], r["pulsar_key"]) for r in rows] == [
            ("object", moved, 40, None, False)
        ]
        human = c.bkctl("pulsar", "--managed-ledgers", c.managed_ledgers, "offload", "orphans", "--older-than", "0s")
        assert human.returncode == 0 and "2 not Pulsar's (20 B" in human.stdout, human.stdout
        assert "bkbackup" not in human.stdout and moved in human.stdout
    finally:
        client.delete_objects(Bucket=c.bucket.name, Delete={"Objects": [{"Key": k} for k in (moved, *backup)]})


def test_a_refusing_bucket_a_missing_object_and_a_slow_server_are_one_line_each(offload_cluster, defects, tmp_path):
    c = offload_cluster
    topic = c.planted["s3_a_plain"].topic
    base = ["export", "--out", tmp_path / "x", "--topic", topic]
    denied = c.bkctl(*base, "--managed-ledgers", c.managed_ledgers, env=env_for(c.uri, **c.s3.env(c.s3.denied)))
    assert denied.returncode == 6, denied.stderr
    assert denied.stderr.count("\n") == 1 and "access denied" in denied.stderr
    verify_denied = c.bkctl("pulsar", "--managed-ledgers", c.managed_ledgers, "offload", "verify",
                            env=env_for(c.uri, **c.s3.env(c.s3.denied)))  # fmt: skip
    assert verify_denied.returncode == 6 and verify_denied.stderr.count("\n") == 1, verify_denied.stderr

    missing = run_bkctl(env_for(defects["uri"], **c.s3.env()), *base, "--managed-ledgers", defects["managed_ledgers"],
                        text=True, timeout=300)  # fmt: skip
    assert missing.returncode == 3, missing.stderr
    assert missing.stderr.count("\n") == 1 and "7fecb68e-619e-45f9-80bf-a5a9b8fcedf1-ledger-4001" in missing.stderr

    with c.s3.slow_proxy(5) as slow:
        late = c.bkctl(*base, "--managed-ledgers", c.managed_ledgers, "--s3-endpoint", slow, "--offload-timeout", "1")
    assert late.returncode == 5, late.stderr
    assert late.stderr.count("\n") == 1 and "did not answer in time" in late.stderr


def test_disk_counts_the_ledgers_held_twice_past_the_deletion_lag(offload_cluster):
    c = offload_cluster
    kept = sorted(
        ledger["ledger_id"]
        for case in oc.cases()
        for ledger in oc.expected(case)["ledgers"]
        if ledger["storage"] != "bookkeeper" and not ledger["bookkeeper_deleted"]
    )
    done = c.bkctl("disk", "--managed-ledgers", c.managed_ledgers, "--offload-lag", "0s", "--json")
    assert done.returncode == 0, done.stderr
    twice = json.loads(done.stdout)["offloaded_twice"]
    assert twice["ledger_ids"] == kept and twice["ledgers"] == len(kept)
    sizes = {ledger["ledger_id"]: ledger["size"] for case in oc.cases() for ledger in oc.expected(case)["ledgers"]}
    assert twice["length_bytes"] == sum(sizes[lid] for lid in kept)
    assert twice["stored_bytes"] > 2 * twice["length_bytes"]  # two copies each, with their headers
    assert "held twice" in json.loads(done.stdout)["summary"]
    later = c.bkctl("disk", "--managed-ledgers", c.managed_ledgers, "--offload-lag", "100000d", "--json")
    assert later.returncode == 0 and json.loads(later.stdout)["offloaded_twice"]["ledgers"] == 0


def test_export_ledgers_reads_a_named_ledger_from_its_offloaded_copy_once_bookkeeper_lost_it(
    offload_cluster, spark, capsys, tmp_path
):
    """The ledger export under the default managed-ledger root: a cluster of the case's own."""
    c = offload_cluster
    from bkctl.wire.metadata.zk import ZKMetadataStore

    root = f"/offload-ledgers{uuid.uuid4().hex[:10]}"
    uri = f"zk+hierarchical://{c.uri.split('//', 1)[1].split('/', 1)[0]}{root}/ledgers"
    with ZKMetadataStore(uri, timeout=20, twins=fastpath.selected()) as store:
        store.cluster.init()
        oc.plant("s3_a_plain", store, None, f"{root}/managed-ledgers", s3=c.s3, bucket=c.bucket.name,
                 upload_objects=False)  # fmt: skip
    done = export(spark, capsys, uri, c.s3, "--out", tmp_path / "out", "--ledgers", "4001", "--json")
    assert done.returncode == 0, done.stderr
    rows = export_rows(tmp_path / "out")
    want = oc.ledger_entries("s3_a_plain")
    assert [(r["ledger_id"], r["entry_id"], r["payload"]) for r in rows] == [
        (4001, e, data) for e, data in enumerate(want[4001])
    ]
    gone = run_bkctl(env_for(uri, **c.s3.env()), "export", "--out", tmp_path / "no", "--ledgers", "4003", text=True)
    assert gone.returncode == 3, gone.stderr


def test_the_data_source_reads_offloaded_ledgers_in_spark_s_own_workers(offload_cluster, spark, monkeypatch):
    """spark.read.format("bookkeeper") on a topic whose ledgers are mostly in S3: the executors
    (Spark's Python workers) GET the blocks with their own credentials, the AWS_* variables of
    their environment -- given them as a session started in that environment gives them
    (:func:`~tests.support.spark.workers_environment`), the planning driver's in its own."""
    from bkctl.export.datasource import BookKeeperDataSource

    c = offload_cluster
    for key, value in c.s3.env().items():
        monkeypatch.setenv(key, value)
    case = "s3_d_chunking_small_blocks"
    with workers_environment(spark, c.s3.env()):
        # registered here, not by register() (once a session): the source carries the variables
        # its planner and readers run with as they are when it is registered, and another module
        # on this worker's shared session may have registered it first, without these
        spark.dataSource.register(BookKeeperDataSource)
        df = (
            spark.read.format("bookkeeper")
            .option("metadataServiceUri", c.uri)
            .option("managedLedgers", c.managed_ledgers)
            .option("topic", c.planted[case].topic)
            .option("splitEntries", "1")
            .load()
        )
        rows = [r.asDict() for r in df.collect()]
    assert sorted(bytes(r["payload"] or b"") for r in rows) == sorted(w[3] for w in expected_rows(case))


def test_a_ledger_both_offloaded_and_in_bookkeeper_is_read_from_where_the_priority_says(
    offload_cluster, spark, capsys, tmp_path
):
    """s3_a_plain again, its 4002 and 4003 written to new ledgers of the cluster (4002 still offloaded,
    its BookKeeper copy kept) and 4002's objects never uploaded: the default, tiered-storage-first,
    reads the bucket and finds nothing there (exit 3, naming the object); bookkeeper-first reads
    the bookies, and each ledger once."""
    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.pulsar.managed_ledger import parse_managed_ledger_info

    c = offload_cluster
    case = "s3_a_plain"
    doc = oc.expected(case)
    entries = oc.ledger_entries(case)
    bucket = c.s3.new_bucket("both")
    base = c.managed_ledgers + "-both"
    try:
        keys = [
            "7fecb68e-619e-45f9-80bf-a5a9b8fcedf1-ledger-4001",
            "7fecb68e-619e-45f9-80bf-a5a9b8fcedf1-ledger-4001-index",
        ]
        oc.upload(case, c.s3.client(), bucket.name, keys)
        info = parse_managed_ledger_info(oc.managed_ledger(case))
        oc.driver_metadata_for(info, c.s3.endpoint_url, bucket.name, None)
        new_ids = {}
        with BlockingBookKeeper(c.uri, timeout=60) as bk:
            for old in (4002, 4003):
                written = broker_ledgers.write_ledger(bk, doc["managed_ledger_name"], entries[old], ensemble=2)
                new_ids[old] = written.ledger_id
            for li in info.ledgerInfo:
                li.ledgerId = new_ids.get(li.ledgerId, li.ledgerId)
            from bkctl.wire.metadata.zk import ZKMetadataStore

            with ZKMetadataStore(c.uri, timeout=20, twins=fastpath.selected()) as store:
                store.client.create(f"{base}/{doc['managed_ledger_name']}", info.SerializeToString(), makepath=True)
        args = ["export", "--topic", doc["topic"], "--managed-ledgers", base, "--json"]
        tiered = export(spark, capsys, c.uri, c.s3, *args[1:], "--out", tmp_path / "t")
        assert tiered.returncode == 3, tiered.stderr
        assert f"5378eda4-bcb0-45f9-9a29-8da09eb28c93-ledger-{new_ids[4002]}" in tiered.stderr
        first = export(
            spark, capsys, c.uri, c.s3, *args[1:], "--out", tmp_path / "b", "--offload-read", "bookkeeper-first"
        )
        assert first.returncode == 0, first.stderr
        want = [(new_ids.get(w[0], w[0]),) + w[1:] for w in expected_rows(case)]
        assert got_rows(export_rows(tmp_path / "b")) == sorted(want, key=lambda w: w[:3])
        (topic_doc,) = json.loads((tmp_path / "b" / "_manifest.json").read_text())["topics"].values()
        assert [o["ledger_id"] for o in topic_doc["offloaded"]] == [4001]
    finally:
        bucket.drop()
