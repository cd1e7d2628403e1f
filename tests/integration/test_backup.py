"""``bkctl backup`` and ``bkctl restore`` against REAL ZooKeeper and bookieds: a cluster
loaded with the Pulsar vector cases (tests/vectors/pulsar, as test_pulsar and
test_pulsar_schema store them: every message case, a topic over three ledgers with its
last one open and cursors in a znode and in a cursor ledger, a live cursor ledger left
open, every schema case with its locators, schema ledgers and partitioned topic), backed
up, destroyed, and restored into fresh clusters -- with the same ids and with --remap --
where ``pulsar topic show``, ``pulsar schema check`` and ``export --topic`` say what they
said of the original.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from bkctl.wire import fastpath
from bkctl.wire.proto import pulsar_ml_pb2 as ml
from tests.support import pulsar_entries as pe
from tests.support.durability import put_in_order

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("backup")]

NS = "public/default"


class Cluster:
    """A ZooKeeper root and three bookieds of its own."""

    def __init__(self, zookeeper, base: Path, name: str):
        from tests.support.bookieproc import BookieProcess

        self.root = f"/{name}{uuid.uuid4().hex[:8]}"
        self.uri = f"zk+hierarchical://{zookeeper.connect_string}{self.root}/ledgers"
        self.procs = [BookieProcess(base / f"{name}-bookie{i}", self.uri) for i in range(3)]
        self.bk = None

    def start(self) -> Cluster:
        from bkctl.wire.client.blocking import BlockingBookKeeper
        from bkctl.wire.metadata.zk import ZKMetadataStore
        from tests.support.bookieproc import start_bookies

        with ZKMetadataStore(self.uri, timeout=20, twins=fastpath.selected()) as store:
            store.cluster.init()
        start_bookies(self.procs, self.uri)
        self.bk = BlockingBookKeeper(self.uri, timeout=60)
        return self

    def stop(self) -> None:
        if self.bk is not None:
            try:
                self.bk.close()
            except Exception:
                pass
            self.bk = None
        for p in self.procs:
            p.kill()


def run(capsys, uri, *args):
    """``bkctl -m URI --json ARGS`` in this process: (exit code, JSON lines, stderr)."""
    from bkctl.cli import run as run_cli

    capsys.readouterr()
    code = run_cli(["-m", uri, "--json", *map(str, args)])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines() if line.strip()], err


def load(cluster: Cluster, zk) -> dict:
    """The vector cases as test_pulsar and test_pulsar_schema store them."""
    from tests.integration.test_pulsar import PulsarCluster, load_live_cursor_case, position
    from tests.integration.test_pulsar_schema import SchemaCluster, load_schema_case

    c = PulsarCluster(cluster.uri, f"{cluster.root}/managed-ledgers", cluster.bk)
    for case in pe.all_cases():
        short = f"vec-{case}"
        entries = pe.case_entries(case)
        lh = c.write_ledger(f"{NS}/persistent/{short}", entries)
        c.put_topic(short, [(lh.ledger_id, entries, True)], zk=zk)
    first, second, third = (pe.case_entries(k) for k in ("b_batch", "c_lz4_batch", "a_plain"))
    ml_three = f"{NS}/persistent/three"
    a = c.write_ledger(ml_three, first).ledger_id
    b = c.write_ledger(ml_three, second).ledger_id
    o = c.write_ledger(ml_three, third, close=False).ledger_id
    sub1 = ml.ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=a, markDeleteEntryId=0, lastActive=1795461495000)
    r = sub1.individualDeletedMessages.add()
    position(r.lowerEndpoint, a, 1)
    position(r.upperEndpoint, a, 2)
    r = sub1.individualDeletedMessages.add()
    position(r.lowerEndpoint, b, 0)
    position(r.upperEndpoint, o, 1)
    partly = sub1.batchedEntryDeletionIndexInfo.add()
    position(partly.position, a, 1)
    partly.deleteSet.append(0b11111)
    cursor_ledger = c.write_ledger(
        ml_three,
        [
            ml.PositionInfo(ledgerId=a, entryId=2).SerializeToString(),
            ml.PositionInfo(ledgerId=b, entryId=1).SerializeToString(),
        ],
        cursor="sub2",
    ).ledger_id
    sub2 = ml.ManagedCursorInfo(cursorsLedgerId=cursor_ledger, markDeleteLedgerId=a, markDeleteEntryId=0)
    c.put_topic(
        "three", [(a, first, True), (b, second, True), (o, third, False)], cursors={"sub1": sub1, "sub2": sub2}, zk=zk
    )
    live = load_live_cursor_case(c, zk)
    s = SchemaCluster(cluster.uri, cluster.root, cluster.bk)
    for case in pe.schema_cases():
        load_schema_case(s, zk, case)
    # not Pulsar's: another digest, a password, custom metadata
    other = cluster.bk.create(3, 2, 2, digest_type="CRC32", password=b"secret", custom_metadata={"app": b"orders"})
    other.add_many([b"x" * 100, b"y" * 2000, b""])
    other.close()
    # no entries: no objects in the archive, its record in the manifest's line (restored all the same)
    empty = cluster.bk.create(3, 2, 2, digest_type="CRC32", password=b"hush", custom_metadata={"app": b"none"})
    empty.close()
    return {
        "topics": sorted(c.topics) + [f"s-{k}" for k in pe.schema_cases()],
        "live": live,
        "other": other.ledger_id,
        "empty": empty.ledger_id,
    }


def topics_of(capsys, uri) -> list[str]:
    code, rows, err = run(capsys, uri, "pulsar", "topic", "list")
    assert code == 0, err
    return sorted(r["topic"] for r in rows)


def views(capsys, uri) -> dict:
    """What ``pulsar topic show`` says of every topic's cursors and backlogs, and what
    ``pulsar schema check`` finds."""
    out: dict = {}
    for topic in topics_of(capsys, uri):
        code, docs, err = run(capsys, uri, "pulsar", "topic", "show", topic)
        assert code == 0, (topic, err)
        for part in docs[0]["partitions"]:
            out[part["topic"]] = {
                "ledgers": [f"{x['ledger_id']}:" for x in part["ledgers"]],  # (an id as positions name it)
                "entries": [x["entries"] for x in part["ledgers"]],
                "size": part["size"],
                "cursors": [
                    {k: v for k, v in cur.items() if k not in ("cursor_ledger", "position_from", "position_source")}
                    for cur in part["cursors"]
                ],
            }
    code, docs, err = run(capsys, uri, "pulsar", "schema", "check")
    out["schema check"] = [{k: v for k, v in d.items() if k not in ("ledger_id", "age_seconds")} for d in docs]
    return out


def translate(view: dict, ids: dict[int, int]) -> str:
    """A view's text with every old ledger id (``42:`` as positions name them, ``ledger 42``) replaced by its new one."""
    import re

    text = json.dumps(view, sort_keys=True)
    return re.sub(r"(?<![T:\d])\d+(?=:)|(?<=ledger )\d+", lambda m: str(ids.get(int(m.group(0)), m.group(0))), text)


@pytest.fixture(scope="module")
def world(zookeeper, tmp_path_factory):
    """The source cluster loaded and backed up, then destroyed; what it showed."""
    from bkctl.wire.metadata.zk import ZKMetadataStore

    base = tmp_path_factory.mktemp("backup")
    source = Cluster(zookeeper, base, "src").start()
    try:
        with ZKMetadataStore(source.uri, timeout=20, twins=fastpath.selected()) as store:
            loaded = load(source, store.client)
        yield {"base": base, "source": source, "loaded": loaded, "zookeeper": zookeeper}
    finally:
        source.stop()


EXPORTED = (
    "vec-t_txn_abort",
    "vec-t_txn_commit",
    "vec-m_deliver_at",
    "three",
    "vec-s-partitioned",
    "vec-s-avro-evolved",
)


def exported(capsys, uri, out: Path) -> dict:
    """``export --topic`` rows of some topics (every kind: transactions, delayed delivery, three
    ledgers with the last one open, a partitioned topic, the typed ``value`` of evolved
    schemas), without their ledger ids."""
    from bkctl.export.reading import arrow_dataset

    got = {}
    for short in EXPORTED:
        topic = f"persistent://{NS}/{short}"
        code, docs, err = run(capsys, uri, "export", "--out", out / short, "--topic", topic)
        assert code == 0, (short, err)
        rows = arrow_dataset(out / short).to_table().to_pylist()
        for r in rows:  # (their ids are compared through the remap table by the views)
            r.pop("ledger_id", None)
            r.pop("message_id", None)
        got[short] = sorted(map(repr, rows))
    return got


def ledger_bytes(bk, ledger_id: int) -> list[bytes]:
    h = bk.open(ledger_id)
    return [p for _e, p in h.read()] if h.last_add_confirmed >= 0 or h.is_closed else []


def s3_puts(monkeypatch, prefix: str) -> list[str]:
    """The archive names (keys less ``prefix``) of the objects PUT to S3 from now on, each once
    its PUT (or its upload) is answered, in that order."""
    from bkctl.wire.objects import S3Objects

    stored: list[str] = []
    put, put_file = S3Objects.put, S3Objects.put_file

    def logged_put(self, key: str, data: bytes) -> None:
        put(self, key, data)
        stored.append(key.removeprefix(prefix))

    def logged_put_file(self, key: str, path: str) -> None:
        put_file(self, key, path)
        stored.append(key.removeprefix(prefix))

    monkeypatch.setattr(S3Objects, "put", logged_put)
    monkeypatch.setattr(S3Objects, "put_file", logged_put_file)
    return stored


def test_round_trip_through_s3_into_fresh_clusters_with_the_same_ids_and_with_remap(
    world, tasks_here, capsys, tmp_path, s3_server, s3_bucket, monkeypatch
):
    """Backed up into a real S3 server (credentials from the environment, as boto3's chain
    finds them; the endpoint given by --s3-endpoint), the source destroyed, restored.

    The exports that compare the clusters' rows run their tasks here (``tasks_here``,
    tests/support/spark.py: the same ``bkctl export``, without a JVM): what they check is what
    the restored ledgers hold; that a topic export runs on Spark is test_pulsar's."""
    from bkctl.backup.catalog import load_manifest
    from bkctl.backup.storage import S3Storage
    from bkctl.wire.backup.archive import LedgerRecord
    from bkctl.wire.backup.data_read import read_data

    for key, value in s3_server.env().items():
        if key != "AWS_ENDPOINT_URL_S3":
            monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    endpoint = ["--s3-endpoint", s3_server.endpoint_url]
    src, base = world["source"], world["base"]
    archive = f"s3://{s3_bucket.name}/nightly"
    before = views(capsys, src.uri)
    rows_before = exported(capsys, src.uri, tmp_path / "src")
    stored = s3_puts(monkeypatch, "nightly/")
    code, docs, err = run(capsys, src.uri, "backup", "--to", archive, *endpoint)
    assert code == 0, err
    # each object PUT (answered: stored, the server's promise) after those it names, the head last
    storage = S3Storage(archive, s3_server.endpoint_url)
    assert put_in_order(stored, storage.get) > 0 and stored[-1] == f"backups/{docs[0]['backup']}.json"
    doc = docs[0]
    assert doc["copied_ledgers"] == doc["ledgers"] > 0 and doc["topics"] == len(topics_of(capsys, src.uri))
    code, docs, err = run(capsys, src.uri, "backup", "verify", archive, *endpoint)
    assert code == 0 and docs[0]["ok"], (err, docs)
    src.stop()  # destroyed: its bookies are gone with every entry

    assert any(
        k.startswith("nightly/ledgers/")
        for k in (o["Key"] for o in s3_bucket.client.list_objects_v2(Bucket=s3_bucket.name)["Contents"])
    )
    manifest = load_manifest(storage)
    copies = {}
    for x in manifest.ledgers:
        if x.inline is not None:  # no entries, no objects
            assert not storage.exists(x.record) and x.entries == 0
            copies[x.ledger_id] = (x.inline, [])
            continue
        record = LedgerRecord.decode(storage.get(x.record))
        with storage.open_read(record.data_object) as f:
            copies[x.ledger_id] = (record, [p for _e, p in read_data(f, x.ledger_id, record.index_sha256)])
    assert copies[world["loaded"]["empty"]][0].password == b"hush"

    same = Cluster(world["zookeeper"], base, "same").start()
    try:
        code, docs, err = run(capsys, same.uri, "restore", "--from", archive, "--force", *endpoint)
        assert code == 0, err
        assert views(capsys, same.uri) == before
        assert exported(capsys, same.uri, tmp_path / "same") == rows_before
        for lid, (record, entries) in copies.items():
            md, _v = same.bk.metadata(lid)
            assert md.is_closed and md.last_entry_id == len(entries) - 1, lid
            assert (md.digest_type.name, md.password, dict(md.custom_metadata)) == (
                record.digest_type,
                record.password,
                record.custom_metadata,
            )
            assert ledger_bytes(same.bk, lid) == entries, lid
        # the same restore again: its journal says every ledger is done, its metadata is its own
        code, docs, err = run(
            capsys, same.uri, "restore", "--from", archive, "--force", "--backup", manifest.id, *endpoint
        )
        assert code == 0 and docs[0]["ledgers_written"] == 0 and docs[0]["znodes_written"] == 0, err
    finally:
        same.stop()

    moved = Cluster(world["zookeeper"], base, "moved").start()
    try:
        # ids taken by other ledgers in the target: the same ids are refused, --remap is not
        for _ in range(3):
            moved.bk.create(3, 2, 2).close()
        code, docs, err = run(capsys, moved.uri, "restore", "--from", archive, "--force", *endpoint)
        assert code == 4 and "exists in the target cluster" in err and len(err.strip().splitlines()) == 1, err
        table = tmp_path / "ids.json"
        code, docs, err = run(
            capsys, moved.uri, "restore", "--from", archive, "--remap", "--remap-table", table, "--force", *endpoint
        )
        assert code == 0, err
        ids = {int(k): v for k, v in json.loads(table.read_text()).items()}
        assert len(set(ids.values())) == len(ids) and any(ids[k] != k for k in ids)
        assert views(capsys, moved.uri) == json.loads(translate(before, ids))
        assert exported(capsys, moved.uri, tmp_path / "moved") == rows_before
        for lid, (record, entries) in copies.items():
            if (
                b"pulsar/cursor" not in (k.encode() for k in record.custom_metadata)
                and record.custom_metadata.get("component") != b"schema"
            ):
                assert ledger_bytes(moved.bk, ids[lid]) == entries, lid
    finally:
        moved.stop()
