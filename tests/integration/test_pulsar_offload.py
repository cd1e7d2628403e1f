"""Pulsar's offloaded ledgers with no broker: ``bkctl export --topic`` across BookKeeper and the
object store, ``bkctl pulsar offload list|verify|orphans``, against a REAL S3 server (SeaweedFS,
tests/support/s3_server.py), real ZooKeeper and bookieds.  Every case of tests/vectors/offload is
laid out as its broker left it (tests/support/offload_cases.py): the objects Pulsar's offloader
made, uploaded under their keys with their metadata (the large case as a multipart upload, one
part per block) or the filesystem offloader's MapFiles in a folder, the ledgers still in
BookKeeper, and the managed ledger whose driver metadata names this test's bucket and endpoint."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.support import offload_cases as oc
from tests.support import pulsar_entries as pe
from tests.support.cli import env_for, run_bkctl

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("pulsar-offload")]


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
    with ZKMetadataStore(uri, timeout=20) as store:
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
    return sorted(rows, key=lambda r: (r["ledger_id"], r["entry_id"], r["batch_index"]))


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


@pytest.mark.parametrize("case", oc.cases())
def test_export_topic_gives_the_pulsar_cases_rows_across_bookkeeper_and_the_object_store(
    offload_cluster, case, tmp_path
):
    c = offload_cluster
    p = c.planted[case]
    out = tmp_path / "out"
    args = ["export", "--out", out, "--topic", p.topic, "--managed-ledgers", c.managed_ledgers, "--json"]
    if case.startswith("fs_"):
        args += ["--split-entries", "2"]
    done = c.bkctl(*args)
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
