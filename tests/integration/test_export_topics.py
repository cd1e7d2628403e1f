"""``bkctl export`` of many topics in one run (``--topic`` more than once, ``--namespace``,
``--topics-from``) against REAL ZooKeeper, bookieds and Spark.

The module's cluster is ``tests/integration/test_pulsar_schema.py``'s (its fixtures, imported): the
``s_*`` schema vectors stored in ``public/default`` as a broker does (topics typed AVRO, JSON,
PROTOBUF_NATIVE, KEY_VALUE...), to which this module adds a namespace ``shop/orders``: ``a`` and ``b`` (real client entries),
``gone`` (its second ledger deleted: exit 3 alone) and ``short`` (its ledger's metadata claims
entries never written: planned, then its task fails reading them).
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from bkctl.wire import fastpath
from bkctl.wire.proto import pulsar_ml_pb2 as ml
from tests.integration.test_pulsar_schema import PUBLISHED, schema_cluster, spark  # noqa: F401 - fixtures
from tests.support import broker_ledgers
from tests.support import pulsar_entries as pe

# test_pulsar_schema's group: one worker runs both modules, on one Spark session (a JVM, some 20
# CPU-seconds to start) where a group of its own had another worker start another
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("pulsar-schema")]

NS = "shop/orders"


def _put_topic(c, zk, local: str, ledgers: list[tuple[int, list[bytes]]]) -> None:
    ml_name = f"{NS}/persistent/{local}"
    info = ml.ManagedLedgerInfo()
    for lid, entries in ledgers:
        info.ledgerInfo.add(ledgerId=lid, entries=len(entries), size=sum(map(len, entries)), timestamp=PUBLISHED)
    zk.create(f"{c.root}/managed-ledgers/{ml_name}", info.SerializeToString(), makepath=True)


def _ledger(c, local: str, entries: list[bytes]) -> int:
    return broker_ledgers.write_ledger(c.bk, f"{NS}/persistent/{local}", entries).ledger_id


@pytest.fixture(scope="module")
def topics_cluster(schema_cluster):  # noqa: F811 - the schema vectors' cluster, imported
    """The schema vectors' cluster (``public/default``) and the topics of ``shop/orders``."""
    from bkctl.wire.metadata.zk import ZKMetadataStore

    c = schema_cluster
    with ZKMetadataStore(c.uri, timeout=20, twins=fastpath.selected()) as store:
        zk = store.client
        c.entries = {"a": pe.case_entries("a_plain"), "b": pe.case_entries("b_batch")}
        for local, entries in c.entries.items():
            _put_topic(c, zk, local, [(_ledger(c, local, entries), entries)])
        kept, deleted = _ledger(c, "gone", c.entries["a"]), _ledger(c, "gone", c.entries["a"])
        c.bk.delete(deleted)
        _put_topic(c, zk, "gone", [(kept, c.entries["a"]), (deleted, c.entries["a"])])
        c.gone = deleted
        # a ledger whose metadata says it ends 5 entries later than what was written
        short = _ledger(c, "short", c.entries["a"])
        md, version = store.ledgers.read(short)
        store.ledgers.update(short, dataclasses.replace(md, last_entry_id=md.last_entry_id + 5), version)
        _put_topic(c, zk, "short", [(short, c.entries["a"])])
    return c


def bkctl(capsys, uri, *args, json_out=True):
    """``bkctl -m URI [--json] ARGS`` in this process: (exit code, stdout, stderr)."""
    from bkctl.cli import run

    capsys.readouterr()
    code = run(["-m", uri, *(["--json"] if json_out else []), *map(str, args)])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if json_out and out.strip() else out), err


def rows_of(folder):
    from bkctl.export.reading import arrow_dataset

    rows = arrow_dataset(folder).to_table().to_pylist()
    return sorted(rows, key=lambda r: (r["topic"], r["ledger_id"], r["entry_id"], r["batch_index"]))


def test_a_namespace_exports_every_topic_into_a_folder_spark_reads_and_a_failed_one_loses_no_other(
    topics_cluster, spark, capsys, tmp_path
):
    c = topics_cluster
    out = tmp_path / "all"
    code, doc, err = bkctl(capsys, c.uri, "export", "--out", out, "--namespace", NS, "--split-entries", "2")
    assert code == 3, err  # both failures are "not found": the gone ledger, the entries never written
    assert [e["topic"] for e in doc["exports"]] == [f"persistent://{NS}/a", f"persistent://{NS}/b"]
    failed = {f["topic"]: f for f in doc["failed"]}
    assert sorted(failed) == [f"persistent://{NS}/gone", f"persistent://{NS}/short"]
    assert (
        str(c.gone) in failed[f"persistent://{NS}/gone"]["error"]
        and failed[f"persistent://{NS}/gone"]["exit_code"] == 3
    )
    assert failed[f"persistent://{NS}/short"]["error"].startswith("a task failed: ")
    assert (doc["topics"], doc["exported"], doc["exit_code"]) == (4, 2, 3)
    for name in ("gone", "short"):  # nothing of a failed topic is left, neither folder nor staging
        assert failed[f"persistent://{NS}/{name}"]["out"] == str(out / "shop" / "orders" / name)
        assert not (out / "shop" / "orders" / name).exists()
    assert sorted(p.name for p in (out / "shop" / "orders").iterdir()) == ["a", "b"]
    assert f"persistent://{NS}/gone: " in err and "(exit 3)" in err
    # each topic's folder is an export of its own: its manifest, and the rows --topic alone gives
    for local in ("a", "b"):
        folder = out / "shop" / "orders" / local
        summary = next(e for e in doc["exports"] if e["topic"] == f"persistent://{NS}/{local}")
        assert summary["out"] == str(folder) and summary["messages"] == len(
            pe.received_messages("a_plain" if local == "a" else "b_batch")
        )
        manifest = json.loads((folder / "_manifest.json").read_text())
        assert manifest["last_export"]["options"]["topic"] == f"persistent://{NS}/{local}"
        assert (folder / "_SUCCESS").exists()
        code, alone, err = bkctl(
            capsys, c.uri, "export", "--out", tmp_path / local, "--topic", f"{NS}/{local}", "--split-entries", "2"
        )
        assert code == 0, err
        assert rows_of(folder) == rows_of(tmp_path / local)
        assert spark.read.parquet(str(folder)).count() == summary["messages"] == alone["messages"]


def test_typed_topics_of_a_namespace_each_read_by_spark_with_their_own_value_type(
    topics_cluster, spark, capsys, tmp_path
):
    c = topics_cluster
    out = tmp_path / "typed"
    code, doc, err = bkctl(capsys, c.uri, "export", "--out", out, "--namespace", "public/default")
    assert code == 0, err
    wanted = sorted({pe.schema_case(case)["expected"]["topic"].split("-partition-")[0] for case in c.data_ledgers})
    assert [e["topic"] for e in doc["exports"]] == wanted and doc["failed"] == []
    types = {}
    for summary in doc["exports"]:
        local = summary["topic"].rsplit("/", 1)[1]
        df = spark.read.parquet(str(out / "public" / "default" / local))
        assert df.count() == summary["messages"], local
        if "value" in df.columns:
            types[local] = df.schema["value"].dataType.simpleString()
    assert len(set(types.values())) > 3, types  # Spark took each folder's own value type
    # a map of a protobuf message as written: notes' keys in the message's order
    notes = (
        spark.read.parquet(str(out / "public" / "default" / "vec-s-protobuf-native"))
        .where("size(value.notes) > 1")
        .selectExpr("map_keys(value.notes) AS k")
        .collect()
    )
    assert [list(r.k) for r in notes] and all(list(r.k) == ["bell", "door"] for r in notes)


def test_topics_from_a_file_again_and_a_folder_holding_another_topic_fails_that_topic_alone(
    topics_cluster, tasks_here, capsys, tmp_path
):
    c = topics_cluster
    out = tmp_path / "out"
    listing = tmp_path / "topics.txt"
    listing.write_text(f"# the nightly job\n{NS}/a\n\n  persistent://{NS}/b  # batches\n{NS}/a\n")
    for _ in range(2):  # again: replaces what the first run wrote (idempotent)
        code, doc, err = bkctl(capsys, c.uri, "export", "--out", out, "--topics-from", listing)
        assert code == 0, err
        assert [e["topic"] for e in doc["exports"]] == [f"persistent://{NS}/a", f"persistent://{NS}/b"]
    manifest = json.loads((out / "shop" / "orders" / "a" / "_manifest.json").read_text())
    assert len(manifest["exports"]) == 2 and manifest["totals"]["entries"] == len(c.entries["a"])
    # b's folder now holds a's export: b is refused (exit 4, as alone), a exported all the same
    code, _, err = bkctl(
        capsys, c.uri, "export", "--out", tmp_path / "x" / "shop" / "orders" / "b", "--topic", f"{NS}/a"
    )
    assert code == 0, err
    code, doc, err = bkctl(
        capsys, c.uri, "export", "--out", tmp_path / "x", "--topic", f"{NS}/a", "--topic", f"{NS}/b", "--topic", "nope"
    )
    assert code == 1, err  # 4 (b's folder) and 3 (no topic nope): no one code, so 1
    assert [(f["topic"], f["exit_code"]) for f in doc["failed"]] == [
        (f"persistent://{NS}/b", 4),
        ("persistent://public/default/nope", 3),
    ]
    assert "holds the export of" in doc["failed"][0]["error"]
    assert [e["topic"] for e in doc["exports"]] == [f"persistent://{NS}/a"]


def test_many_topics_for_people_and_usage_errors(topics_cluster, tasks_here, capsys, tmp_path):
    c = topics_cluster
    code, out, err = bkctl(
        capsys,
        c.uri,
        "export",
        "--out",
        tmp_path / "h",
        "--topic",
        f"{NS}/a",
        "--topic",
        f"{NS}/gone",
        json_out=False,
    )
    assert code == 3
    assert f"of persistent://{NS}/a to {tmp_path / 'h' / 'shop' / 'orders' / 'a'} in " in out
    assert "exported 1 of 2 topics to " in out and "; 1 failed" in out
    assert f"bkctl: error: persistent://{NS}/gone: " in err and "1 of 2 topics not exported" in err
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    for args, why in (
        (["--namespace", "shop"], "not a namespace"),
        (["--namespace", "shop/none"], "has no topics"),
        (["--topics-from", tmp_path / "missing.txt"], "--topics-from"),
        (["--topics-from", empty], "names no topics"),
        (["--ledgers", "1", "--namespace", NS], "give exactly one of"),
    ):
        code, _, err = bkctl(capsys, c.uri, "export", "--out", tmp_path / "u", *args, json_out=False)
        assert code == (3 if why == "has no topics" else 2) and why in err, (args, err)
        assert not (tmp_path / "u").exists()
