"""``bkctl export`` and the ``bookkeeper`` data source against a REAL cluster.

One ZooKeeper (the session's), four real bookieds and one local Spark
session serve the whole module.  The module fixture writes ledgers of several
sizes (empty, one entry, 3,000 entries, one with an ensemble change made by
SIGKILLing a bookie mid-write, one left open) and leaves the killed bookie
dead, so every export below also reads with a replica of some entries gone.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from bkctl.wire import fastpath
from tests.support.bookieproc import BookieProcess, start_bookies
from tests.support.cli import bkctl_in_process as bkctl
from tests.support.spark import MASTER

pyspark = pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.xdist_group("export"),
]  # module-scoped fixtures: one xdist worker runs the whole module

DATA_COLUMNS = [
    ("entry_id", "int64"),
    ("payload", "binary"),
    ("payload_size", "int32"),
    ("ledger_ctime", "timestamp[us, tz=UTC]"),
    ("ledger_state", "string"),
]


def payload(ledger: str, i: int) -> bytes:
    """Payloads of many sizes, some not UTF-8, one in 500 empty."""
    if i % 500 == 7:
        return b""
    body = f"{ledger}:{i:05d}|".encode() * (1 + i % 9)
    if i % 3 == 0:
        body += bytes([0xFF, 0xFE, i % 256])
    return body


class Cluster:
    def __init__(self, uri, procs, ledgers, payloads, victim, open_handle):
        self.uri = uri
        self.procs = procs
        self.ledgers = ledgers  # name -> ledger id
        self.payloads = payloads  # ledger id -> [payload, ...] (what must be exported)
        self.victim = victim  # the bookie killed to force the ensemble change
        self.open_handle = open_handle


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.metadata.zk import ZKMetadataStore

    root = f"/export{uuid.uuid4().hex[:10]}"
    uri = f"zk+hierarchical://{zookeeper.connect_string}{root}/ledgers"
    with ZKMetadataStore(uri, timeout=20, twins=fastpath.selected()) as store:
        store.cluster.init()
    base = tmp_path_factory.mktemp("export-bookies")
    procs = [BookieProcess(base / f"bookie{i}", uri) for i in range(4)]
    bk = None
    try:
        start_bookies(procs, uri)
        by_id = {p.bookie_id: p for p in procs}
        bk = BlockingBookKeeper(
            uri, add_timeout=30.0, read_timeout=30.0, timeout=120
        )  # a loaded machine is slow, not dead
        ledgers, payloads = {}, {}

        def closed(name, count, **kw):
            with bk.create(3, 2, 2, password=b"secret", **kw) as lh:
                if count:
                    lh.add_many(payload(name, i) for i in range(count))
            ledgers[name] = lh.ledger_id
            payloads[lh.ledger_id] = [payload(name, i) for i in range(count)]
            return lh

        closed("empty", 0)
        closed("one", 1, custom_metadata={"application": b"tests", "raw": b"\xff\x01"})
        big = closed("big", 3000, custom_metadata={"application": b"tests"})

        changed = bk.create(3, 2, 2, password=b"secret")
        common = [b for b in changed.metadata.last_ensemble if b in big.metadata.last_ensemble]
        victim = common[0]  # in both ensembles: the big ledger is exported with one replica gone
        changed.add_many(payload("changed", i) for i in range(200))

        def more():  # pulled in the reactor thread while earlier adds are in flight
            for i in range(200, 400):
                if i == 250:
                    by_id[victim].kill(signal.SIGKILL)
                yield payload("changed", i)

        changed.add_many(more())
        changed.close()
        ledgers["changed"] = changed.ledger_id
        payloads[changed.ledger_id] = [payload("changed", i) for i in range(400)]

        opened = bk.create(3, 2, 2, password=b"secret")
        for i in range(30):  # one at a time: each entry carries the LAC of the one before
            opened.add(payload("open", i))
        ledgers["open"] = opened.ledger_id
        payloads[opened.ledger_id] = [payload("open", i) for i in range(29)]  # a reader's LAC is 28

        yield Cluster(uri, procs, ledgers, payloads, victim, opened)
    finally:
        if bk is not None:
            try:
                bk.close()
            except Exception:
                pass
        for p in procs:
            p.kill()


@pytest.fixture(scope="module")
def spark(cluster, worker_spark):
    """The worker's Spark session (tests/support/spark.py), after the module's cluster."""
    return worker_spark.session()


def arrow_rows(out: Path) -> dict[int, list[tuple[int, bytes]]]:
    from bkctl.export.reading import arrow_dataset

    table = arrow_dataset(out).to_table(columns=["ledger_id", "entry_id", "payload"])
    rows: dict[int, list[tuple[int, bytes]]] = {}
    for lid, eid, body in zip(*(table.column(c).to_pylist() for c in ("ledger_id", "entry_id", "payload"))):
        rows.setdefault(lid, []).append((eid, body))
    return {lid: sorted(r) for lid, r in rows.items()}


def assert_rows(rows, cluster, names):
    wanted = {cluster.ledgers[n]: cluster.payloads[cluster.ledgers[n]] for n in names}
    wanted = {lid: p for lid, p in wanted.items() if p}
    assert sorted(rows) == sorted(wanted)
    for lid, payloads in wanted.items():
        assert rows[lid] == list(enumerate(payloads)), f"ledger {lid}"


def files_of(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------- tests


def test_the_export_driver_jvm_runs_with_c1_and_the_serial_collector(spark):
    jvm = spark.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert "-XX:TieredStopAtLevel=1" in arguments and "-XX:+UseSerialGC" in arguments
    assert any(a.startswith("-Dlog4j2.configurationFile=") for a in arguments)
    collectors = [c.getName() for c in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()]
    assert not any("G1" in name for name in collectors), collectors


def test_export_reads_back_with_pyarrow_and_spark(cluster, spark, capsys, tmp_path):
    import pyarrow.parquet as pq
    from pyspark.sql import types as T

    from bkctl.export.reading import read_export

    ids = cluster.ledgers
    out = tmp_path / "exp"
    names = ["empty", "one", "big", "changed"]
    spec = ",".join(str(ids[n]) for n in names)
    code, doc, err = bkctl(
        capsys,
        cluster.uri,
        "export",
        "--out",
        str(out),
        "--ledgers",
        spec,
        "--split-entries",
        "1000",
        "--batch-size",
        "250",
    )
    assert code == 0, err
    assert set(doc) >= {"out", "ledgers", "entries", "bytes", "files", "seconds", "master"}
    assert doc["out"] == str(out) and doc["ledgers"] == 4 and doc["master"].startswith("local")
    assert doc["entries"] == 1 + 3000 + 400
    assert doc["bytes"] == sum(len(p) for n in names for p in cluster.payloads[ids[n]])
    assert doc["files"] >= 3 and doc["skipped"] == []

    # the changed ledger really has two segments, and the dead bookie held part of the big one
    from bkctl.wire.metadata.zk import ZKMetadataStore

    with ZKMetadataStore(cluster.uri, twins=fastpath.selected()) as store:
        md_changed, _ = store.ledgers.read(ids["changed"])
        md_big, _ = store.ledgers.read(ids["big"])
    assert len(md_changed.ensembles) == 2 and cluster.victim not in md_changed.ensembles[1][1]
    assert cluster.victim in md_big.ensembles[0][1]
    assert [p.proc.poll() is not None for p in cluster.procs].count(True) == 1

    # layout, marker, manifest
    assert (out / "_SUCCESS").exists()
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(
        f"ledger_id={ids[n]}" for n in ("one", "big", "changed")
    )
    manifest = json.loads((out / "_manifest.json").read_text())
    led = manifest["ledgers"]
    assert led[str(ids["big"])]["entries"] == 3000 and led[str(ids["big"])]["ranges"] == [[0, 2999]]
    assert led[str(ids["changed"])]["segments"] == 2 and led[str(ids["changed"])]["last_entry"] == 399
    assert led[str(ids["empty"])]["entries"] == 0 and led[str(ids["empty"])]["files"] == []
    assert led[str(ids["one"])]["custom_metadata"] == {"application": "tests", "raw": "\\xff\x01"}
    assert manifest["totals"]["entries"] == 3401 and manifest["last_export"]["options"]["ledgers"] == spec
    assert manifest["partition_by"] == "ledger_id" and manifest["exports"][-1]["at"]

    # pyarrow: exact file schema, every payload byte for byte
    some_file = next(p for p in (out / f"ledger_id={ids['big']}").iterdir() if p.name.endswith(".parquet"))
    schema = pq.read_schema(some_file)
    assert [(f.name, str(f.type)) for f in schema][:5] == DATA_COLUMNS
    md_type = schema.field("ledger_metadata").type
    assert pa.types.is_map(md_type) and md_type.key_type == pa.string() and md_type.item_type == pa.string()
    assert schema.names == ["entry_id", "payload", "payload_size", "ledger_ctime", "ledger_state", "ledger_metadata"]
    assert_rows(arrow_rows(out), cluster, names)

    # Spark: plain read, and read_export with the exact types
    plain = spark.read.parquet(str(out))
    assert isinstance(plain.schema["ledger_id"].dataType, (T.IntegerType, T.LongType))
    df = read_export(spark, out)
    from bkctl.export.columns import LEDGER_COLUMNS, spark_schema

    SCHEMA = spark_schema(LEDGER_COLUMNS)
    assert [(f.name, f.dataType) for f in df.schema.fields] == [(f.name, f.dataType) for f in SCHEMA.fields]
    from pyspark.sql import functions as F

    counts = {
        r["ledger_id"]: (r["n"], r["hi"])
        for r in df.groupBy("ledger_id").agg(F.count("*").alias("n"), F.max("entry_id").alias("hi")).collect()
    }
    assert counts == {
        ids[n]: (len(cluster.payloads[ids[n]]), len(cluster.payloads[ids[n]]) - 1) for n in ("one", "big", "changed")
    }
    got = {
        (r["ledger_id"], r["entry_id"]): bytes(r["payload"])
        for r in df.select("ledger_id", "entry_id", "payload").collect()
    }
    assert got == {(ids[n], i): p for n in names for i, p in enumerate(cluster.payloads[ids[n]])}
    row = df.where(f"ledger_id = {ids['one']}").first()
    assert row["ledger_state"] == "CLOSED" and row["payload_size"] == len(cluster.payloads[ids["one"]][0])
    assert row["ledger_metadata"] == {"application": "tests", "raw": "\\xff\x01"}
    assert row["ledger_ctime"] is not None


def test_reexport_is_idempotent_append_adds_overwrite_replaces(cluster, tasks_here, capsys, tmp_path):
    ids = cluster.ledgers
    out = tmp_path / "exp"
    code, doc, err = bkctl(
        capsys, cluster.uri, "export", "-o", str(out), "-l", f"{ids['one']},{ids['big']}", "--split-entries", "700"
    )
    assert code == 0, err
    first_manifest = json.loads((out / "_manifest.json").read_text())

    # the same ledgers again (over protocol v2): same rows, no duplicates
    code, doc, err = bkctl(
        capsys, cluster.uri, "export", "-o", str(out), "-l", str(ids["big"]), "--protocol", "v2", "--batch-size", "64"
    )
    assert code == 0, err
    assert doc["entries"] == 3000 and doc["mode"] == "replace"
    assert_rows(arrow_rows(out), cluster, ["one", "big"])
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["ledgers"][str(ids["one"])] == first_manifest["ledgers"][str(ids["one"])]
    assert manifest["totals"]["entries"] == 3001 and len(manifest["exports"]) == 2
    assert not list(tmp_path.glob("exp.bkctl-staging-*"))

    # --append adds rows (here: a second copy of ledger one)
    code, doc, err = bkctl(capsys, cluster.uri, "export", "-o", str(out), "-l", str(ids["one"]), "--append")
    assert code == 0, err
    rows = arrow_rows(out)
    assert rows[ids["one"]] == [(0, cluster.payloads[ids["one"]][0])] * 2 and len(rows[ids["big"]]) == 3000
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["ledgers"][str(ids["one"])]["ranges"] == [[0, 0], [0, 0]]
    assert manifest["ledgers"][str(ids["one"])]["entries"] == 2

    # --overwrite keeps nothing else
    code, doc, err = bkctl(
        capsys, cluster.uri, "export", "-o", str(out), "-l", str(ids["changed"]), "--overwrite", "--compression", "none"
    )
    assert code == 0, err
    assert_rows(arrow_rows(out), cluster, ["changed"])
    assert list(json.loads((out / "_manifest.json").read_text())["ledgers"]) == [str(ids["changed"])]


def test_people_get_a_summary_counted_in_words(cluster, tasks_here, capsys, tmp_path):
    """Without --json: one line with singular and plural said right (no "(s)")."""
    from bkctl.cli import run

    ids = cluster.ledgers
    for spec, counted in (
        (str(ids["one"]), r"1 entry \(\d+ B\) of 1 ledger"),
        (f"{ids['one']},{ids['changed']}", r"401 entries \(\d+(\.\d)? KiB\) of 2 ledgers"),
    ):
        capsys.readouterr()
        code = run(["-m", cluster.uri, "export", "-o", str(tmp_path / spec), "-l", spec])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert re.fullmatch(rf"exported {counted} to .* in \d+\.\ds: \d+ files?, master local\[\d\]\n", out), out
        assert "(s)" not in out


def test_unknown_ledger_is_exit_3_and_touches_nothing(cluster, capsys, tmp_path):
    out = tmp_path / "exp"
    code, doc, err = bkctl(capsys, cluster.uri, "export", "-o", str(out), "-l", f"{cluster.ledgers['one']},987654")
    assert code == 3 and doc == {"out": str(out), "error": "no such ledger: 987654", "exported": False}  # --json
    assert "no such ledger: 987654" in err
    assert not out.exists() and list(tmp_path.iterdir()) == []
    code, _doc, err = bkctl(capsys, cluster.uri, "export", "-o", str(out), "-l", "900000-900010")
    assert code == 3 and "no ledger in that range" in err
    code, _doc, err = bkctl(capsys, cluster.uri, "export", "-o", str(out))
    assert code == 2 and "--ledgers" in err


def test_failed_export_leaves_previous_export_untouched(cluster, spark, capsys, tmp_path):
    ids = cluster.ledgers
    out = tmp_path / "exp"
    code, _doc, err = bkctl(capsys, cluster.uri, "export", "-o", str(out), "-l", str(ids["one"]))
    assert code == 0, err
    before = files_of(out)
    # a wrong password fails the reads inside the Spark tasks
    code, doc, err = bkctl(
        capsys, cluster.uri, "export", "-o", str(out), "-l", f"{ids['one']},{ids['big']}", "--password", "wrong"
    )
    assert code == 1 and doc["exported"] is False and "wrong password" in doc["error"]
    # one line naming the cause, not pages of JVM stack
    assert err.strip().splitlines() == [err.strip()], err
    assert "Unauthorized: wrong password for ledger" in err, err
    assert files_of(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp"]
    # a foreign directory is refused (exit 4) unless --overwrite
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    code, _doc, err = bkctl(capsys, cluster.uri, "export", "-o", str(foreign), "-l", str(ids["one"]))
    assert code == 4 and "--overwrite" in err
    assert files_of(foreign) == {"keep.txt": b"mine"}


def test_partition_by_date_decode_and_rows_per_file(cluster, spark, tasks_here, capsys, tmp_path):
    import datetime

    from bkctl.export.reading import arrow_dataset, read_export

    ids = cluster.ledgers
    out = tmp_path / "exp"
    code, doc, err = bkctl(
        capsys,
        cluster.uri,
        "export",
        "-o",
        str(out),
        "-l",
        f"{ids['one']},{ids['big']}",
        "--partition-by",
        "date",
        "--decode",
        "utf8",
        "--rows-per-file",
        "1000",
        "--compression",
        "snappy",
    )
    assert code == 0, err
    manifest = json.loads((out / "_manifest.json").read_text())
    big = manifest["ledgers"][str(ids["big"])]
    day = big["date"]
    assert datetime.date.fromisoformat(day) and big["ctime"].startswith(day)
    big_dir = out / f"date={day}" / f"ledger_id={ids['big']}"
    assert len([p for p in big_dir.iterdir() if p.name.endswith(".parquet")]) >= 3
    assert doc["files"] >= 4

    table = arrow_dataset(out).to_table()
    assert table.schema.field("payload_text").type == pa.string()
    assert table.schema.field("date").type == pa.date32()
    texts = dict(
        zip(
            zip(table.column("ledger_id").to_pylist(), table.column("entry_id").to_pylist()),
            table.column("payload_text").to_pylist(),
        )
    )
    for name in ("one", "big"):
        for i, body in enumerate(cluster.payloads[ids[name]]):
            assert texts[(ids[name], i)] == body.decode("utf-8", errors="replace")
    df = read_export(spark, out)
    assert df.columns[-2:] == ["payload_text", "date"] and df.count() == 3001
    assert str(df.select("date").distinct().first()["date"]) == day

    # replacing one ledger of a day keeps the other ledgers of that day
    code, doc, err = bkctl(
        capsys,
        cluster.uri,
        "export",
        "-o",
        str(out),
        "-l",
        str(ids["one"]),
        "--partition-by",
        "date",
        "--decode",
        "utf8",
    )
    assert code == 0, err
    assert arrow_dataset(out).count_rows() == 3001
    # another layout into the same folder is refused
    code, doc, err = bkctl(capsys, cluster.uri, "export", "-o", str(out), "-l", str(ids["one"]))
    assert code == 4 and "partitioned by date" in err


def test_data_source_on_its_own(cluster, spark):
    from bkctl.export.columns import LEDGER_COLUMNS, spark_schema
    from bkctl.export.datasource import register

    SCHEMA = spark_schema(LEDGER_COLUMNS)
    register(spark)
    ids = cluster.ledgers
    df = (
        spark.read.format("bookkeeper")
        .option("metadataServiceUri", cluster.uri)
        .option("ledgers", f"{ids['empty']},{ids['one']},{ids['big']}")
        .option("splitEntries", "700")
        .option("batchSize", "128")
        .load()
    )
    assert df.schema == SCHEMA
    assert df.rdd.getNumPartitions() == 1 + 5
    rows = df.select("ledger_id", "entry_id", "payload", "payload_size").collect()
    assert len(rows) == 3001
    assert {(r["ledger_id"], r["entry_id"]): bytes(r["payload"]) for r in rows} == {
        (ids[n], i): p for n in ("one", "big") for i, p in enumerate(cluster.payloads[ids[n]])
    }
    assert all(r["payload_size"] == len(r["payload"]) for r in rows)

    # open ledgers: skipped by default, read up to the LAC with includeOpen
    base = spark.read.format("bookkeeper").option("metadataServiceUri", cluster.uri).option("ledgers", str(ids["open"]))
    assert base.load().count() == 0
    opened = base.option("includeOpen", "true").load()
    got = sorted((r["entry_id"], bytes(r["payload"]), r["ledger_state"]) for r in opened.collect())
    assert got == [(i, p, "OPEN") for i, p in enumerate(cluster.payloads[ids["open"]])]

    with pytest.raises(Exception) as info:
        spark.read.format("bookkeeper").option("metadataServiceUri", cluster.uri).option(
            "ledgers", "987654"
        ).load().count()
    assert "no such ledger: 987654" in str(info.value)


def test_open_ledgers_skipped_unless_included(cluster, capsys, tmp_path, tasks_here):
    """Skipping needs no Spark; the --include-open run reads the open ledger up to its LAC, its
    tasks run here (tests/support/spark.py), the --master given asked of Spark.  That a real
    ``bkctl`` process's stdout is one JSON document and its stderr free of the JVM's start-up
    lines is test_a_failed_export_is_one_line_on_the_users_path_and_a_json_document's."""
    ids = cluster.ledgers
    out = tmp_path / "exp"
    code, doc, err = bkctl(capsys, cluster.uri, "export", "-o", str(out), "-l", str(ids["open"]))
    assert code == 0, err
    assert doc["entries"] == 0 and doc["files"] == 0 and doc["ledgers"] == 0
    assert [s["ledger_id"] for s in doc["skipped"]] == [ids["open"]] and "--include-open" in doc["skipped"][0]["reason"]
    assert (out / "_SUCCESS").exists() and not [p for p in out.iterdir() if p.is_dir()]
    # the manifest's document of a skipped ledger is --json's, with these keys alone
    skipped = json.loads((out / "_manifest.json").read_text())["exports"][-1]["skipped"]
    assert skipped == doc["skipped"] and list(skipped[0]) == ["ledger_id", "reason"]

    code, doc, err = bkctl(
        capsys, cluster.uri, "export", "-o", str(out), "-l", f"{ids['open']},{ids['one']}", "--master", "local[1]",
        "--include-open",
    )  # fmt: skip
    assert code == 0, err
    assert tasks_here.masters == ["local[1]"] and doc["master"] == MASTER
    assert doc["entries"] == 1 + 29 and doc["skipped"] == []
    assert_rows(arrow_rows(out), cluster, ["open", "one"])
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["ledgers"][str(ids["open"])]["state"] == "OPEN"
    assert manifest["ledgers"][str(ids["open"])]["ranges"] == [[0, 28]]


def test_payload_text_is_sparks_make_valid_utf8(spark):
    """--decode utf8 is computed in the tasks, not by Spark: it must give what
    Spark's make_valid_utf8 gives, tricky byte sequences included."""
    import random

    from pyspark.sql import functions as F

    from bkctl.export.writing import payload_text

    rng = random.Random(14)
    pieces = [0x41, 0x80, 0xBF, 0xC0, 0xC2, 0xE0, 0xE2, 0xED, 0xF0, 0xF4, 0xF5, 0xFF, 0x82, 0x9F, 0xA0]
    cases = [
        b"",
        b"plain",
        "h\u00e9llo \u20ac \U0001f600".encode(),
        b"\xed\xa0\x80",
        b"\xf4\x90\x80\x80",
        b"\xe2\x82",
        b"a\xf0\x9f\x98b",
        b"\xc0\xaf",
    ]
    cases += [bytes(rng.choice(pieces) for _ in range(rng.randint(1, 8))) for _ in range(1500)]
    df = spark.createDataFrame(list(enumerate(cases)), "i int, b binary")
    sparks = {r["i"]: r["t"] for r in df.select("i", F.make_valid_utf8(F.col("b").cast("string")).alias("t")).collect()}
    ours = payload_text(pa.array(cases, pa.binary())).to_pylist()
    assert [sparks[i] for i in range(len(cases))] == ours
    assert ours[2] == "h\u00e9llo \u20ac \U0001f600" and ours[3] == "\ufffd" * 3


def test_a_failed_export_is_one_line_on_the_users_path_and_a_json_document(cluster, capsys, tmp_path):
    """Issue 54, item 9: a full disk during an export printed some 226 lines of Spark and Python
    tracebacks before the one line that says it; --out /proc/x named a lock file the user never
    asked for; --json printed nothing on stdout.  A real bkctl process with its own Spark, the
    output on a 1 MiB filesystem."""
    from tests.support.smallfs import small_filesystem

    ids = cluster.ledgers
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))

    def export(out, *extra):
        args = [
            "-m",
            cluster.uri,
            "--json",
            "export",
            "-o",
            str(out),
            "-l",
            str(ids["big"]),
            "--master",
            "local[1]",
            *extra,
        ]
        return subprocess.run(
            [sys.executable, "-m", "bkctl", *args],
            capture_output=True,
            text=True,
            timeout=240,
            env=env,
            stdin=subprocess.DEVNULL,
        )

    with small_filesystem(tmp_path / "small", 1) as small:
        st = os.statvfs(small)
        (small / "filler").write_bytes(b"x" * (st.f_bavail * st.f_frsize))  # full
        done = export(small / "exp")
    assert done.returncode == 1, (done.stdout, done.stderr)
    # issue 69: every export printed the JVM's "WARNING: Using incubator modules: jdk.incubator.vector"
    assert "incubator" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bkctl: error: ") and "No space left on device" in lines[0], (
        done.stderr[-3000:]
    )
    doc = json.loads(done.stdout)  # a document on failure too
    assert doc["error"] == lines[0][len("bkctl: error: ") :] and doc["out"] == str(small / "exp")

    proc = export("/proc/bkctl-export-here")
    assert proc.returncode != 0
    assert "/proc/bkctl-export-here" in proc.stderr and "bkctl-lock" not in proc.stderr, proc.stderr
    assert json.loads(proc.stdout)["error"] and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
