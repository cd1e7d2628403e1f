"""``bkctl backup`` and ``bkctl restore`` under faults, at small scale, against REAL ZooKeeper and
bookieds: ``kill -9`` in the middle of either and the same command run again; a target whose
Pulsar metadata conflicts; a second backup that copies only what is new; a topic written to
while it is backed up."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time

import pytest

from bkctl.wire import fastpath
from bkctl.wire.proto import pulsar_ml_pb2 as ml
from tests.integration.test_backup import NS, Cluster, run
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("backup-faults")]

ENTRY = 4096


def custom(ml_name: str) -> dict[str, bytes]:
    return {"application": b"pulsar", "component": b"managed-ledger", "pulsar/managed-ledger": ml_name.encode()}


def put_topic(zk, root: str, short: str, ledgers: list[tuple[int, int, int]], cursors=None) -> None:
    """``ledgers``: (id, entries, size); the last one open when its entries are -1."""
    info = ml.ManagedLedgerInfo()
    for lid, entries, size in ledgers:
        li = info.ledgerInfo.add(ledgerId=lid, timestamp=0)
        if entries >= 0:
            li.entries, li.size, li.timestamp = entries, size, 1_795_000_000_000
    path = f"{root}/managed-ledgers/{NS}/persistent/{short}"
    if zk.exists(path):
        zk.set(path, info.SerializeToString())
    else:
        zk.create(path, info.SerializeToString(), makepath=True)
    for name, value in (cursors or {}).items():
        zk.create(f"{path}/{name}", value.SerializeToString())


def write(bk, short: str, n: int, tag: bytes = b"") -> tuple[int, int, int]:
    ml_name = f"{NS}/persistent/{short}"
    lh = bk.create(3, 2, 2, password=b"", custom_metadata=custom(ml_name))
    payloads = [tag + i.to_bytes(4, "big") + b"x" * (ENTRY - 4 - len(tag)) for i in range(n)]
    lh.add_many(payloads)
    lh.close()
    return lh.ledger_id, n, n * ENTRY


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    from bkctl.wire.metadata.zk import ZKMetadataStore

    base = tmp_path_factory.mktemp("faults")
    c = Cluster(zookeeper, base, "faults").start()
    try:
        with ZKMetadataStore(c.uri, timeout=20, twins=fastpath.selected()) as store:
            c.topics = {}
            for t in range(6):
                short = f"t{t}"
                ledgers = [write(c.bk, short, 300) for _ in range(2)]
                cursor = ml.ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=ledgers[0][0], markDeleteEntryId=9)
                put_topic(store.client, c.root, short, ledgers, {"sub": cursor})
                c.topics[short] = ledgers
        c.base, c.zookeeper = base, zookeeper
        yield c
    finally:
        c.stop()


def spawn(uri: str, *args: str, env: dict | None = None) -> subprocess.Popen:
    from tests.support.cli import BKCTL, REPO, env_for

    return subprocess.Popen(
        [*BKCTL, "--json", *args],
        env=env_for(uri, **(env or {})),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def kill_when(proc: subprocess.Popen, ready, timeout: float = 120) -> None:
    """``kill -9`` the process once ``ready()`` says so (it must not have finished by then)."""
    deadline = time.monotonic() + timeout
    try:
        while not ready():
            assert proc.poll() is None, ("finished before it could be stopped", proc.communicate())
            assert time.monotonic() < deadline, "never got there"
            time.sleep(0.02)
    finally:
        proc.kill()
        proc.communicate()


def files(folder, suffix: str) -> list[str]:
    """The files below ``folder`` named ``*suffix`` (``.part-``: the temporary ones, whatever their end)."""
    return sorted(
        os.path.relpath(os.path.join(d, f), folder)
        for d, _dirs, fs in os.walk(folder)
        for f in fs
        if (".part-" in f) == (suffix == ".part-") and (suffix == ".part-" or f.endswith(suffix))
    )


def test_a_backup_killed_midway_completes_when_run_again_and_verifies(cluster, capsys, tmp_path):
    archive = tmp_path / "archive"
    proc = spawn(cluster.uri, "backup", "--to", str(archive), "--parallel", "1")
    kill_when(proc, lambda: len(files(archive, ".json")) >= 3)  # the marker and two ledgers' records
    assert not files(archive / "backups", ".json")  # no manifest: the backup is not one yet (its folder made)
    copied_before = len(files(archive / "ledgers", ".json"))
    code, docs, err = run(capsys, cluster.uri, "backup", "--to", archive)
    assert code == 0, err
    doc = docs[0]
    ledgers = sum(len(v) for v in cluster.topics.values())
    assert doc["ledgers"] == ledgers and doc["copied_ledgers"] == ledgers - copied_before
    # nothing twice, nothing half: one data object and one record per ledger, no temporary file left
    assert len(files(archive / "ledgers", ".data")) == len(files(archive / "ledgers", ".json")) == ledgers
    assert not files(archive, ".part-")
    code, docs, err = run(capsys, cluster.uri, "backup", "verify", archive)
    assert code == 0 and docs[0]["ok"] and docs[0]["ledger_copies"] == ledgers, docs

    # a damaged object is found
    victim = str(archive / "ledgers" / files(archive / "ledgers", ".data")[0])
    with open(victim, "r+b") as f:
        f.seek(-10, os.SEEK_END)
        byte = f.read(1)
        f.seek(-10, os.SEEK_END)
        f.write(bytes([byte[0] ^ 0xFF]))
    code, docs, err = run(capsys, cluster.uri, "backup", "verify", archive)
    assert code == 1 and not docs[0]["ok"] and "CRC32C" in docs[0]["problems"][0], docs


def test_a_second_backup_copies_only_the_new_ledgers_and_records_what_was_deleted(cluster, capsys, tmp_path):
    from bkctl.wire.metadata.zk import ZKMetadataStore

    archive = tmp_path / "archive"
    code, docs, err = run(capsys, cluster.uri, "backup", "--to", archive, "--namespace", NS)
    assert code == 0, err
    first = docs[0]
    added = {}
    with ZKMetadataStore(cluster.uri, timeout=20, twins=fastpath.selected()) as store:
        for short, ledgers in cluster.topics.items():
            new = write(cluster.bk, short, 7 + len(added))
            ledgers.append(new)
            put_topic(store.client, cluster.root, short, ledgers)
            added[new[0]] = new[2]
    code, docs, err = run(capsys, cluster.uri, "backup", "--to", archive, "--namespace", NS)
    assert code == 0, err
    second = docs[0]
    assert second["ledgers"] == first["ledgers"] + len(cluster.topics)
    assert second["copied_ledgers"] == len(added) and second["copied_bytes"] == sum(added.values())
    assert second["deleted"] == {"ledgers": [], "topics": []}
    # one topic deleted, as Pulsar deletes one: its ledgers, then its znodes
    with ZKMetadataStore(cluster.uri, timeout=20, twins=fastpath.selected()) as store:
        short, ledgers = "t5", cluster.topics.pop("t5")
        for lid, _n, _size in ledgers:
            cluster.bk.delete(lid)
        store.client.delete(f"{cluster.root}/managed-ledgers/{NS}/persistent/{short}", recursive=True)
    code, docs, err = run(capsys, cluster.uri, "backup", "--to", archive, "--namespace", NS)
    assert code == 0, err
    assert docs[0]["copied_ledgers"] == 0
    assert docs[0]["deleted"] == {"ledgers": sorted(lid for lid, _n, _s in ledgers), "topics": [f"{NS}/persistent/t5"]}
    code, rows, err = run(capsys, cluster.uri, "backup", "list", archive)
    assert code == 0 and [r["copied_ledgers"] for r in rows] == [first["ledgers"], len(added), 0]


def test_a_restore_killed_midway_completes_when_run_again_with_nothing_twice(cluster, capsys, tmp_path):
    from bkctl.backup.catalog import load_manifest
    from bkctl.backup.storage import LocalStorage
    from bkctl.wire.backup.archive import LedgerRecord
    from bkctl.wire.backup.data_read import read_data
    from bkctl.wire.metadata.zk import ZKMetadataStore

    archive = tmp_path / "archive"
    code, docs, err = run(capsys, cluster.uri, "backup", "--to", archive)
    assert code == 0, err
    storage = LocalStorage(str(archive))
    manifest = load_manifest(storage)
    target = Cluster(cluster.zookeeper, cluster.base, "target").start()
    try:
        with ZKMetadataStore(target.uri, timeout=20, twins=fastpath.selected()) as store:
            proc = spawn(target.uri, "restore", "--from", str(archive), "--remap", "--force", "--parallel", "1")
            kill_when(proc, lambda: len(list(store.ledgers.ids())) >= 3)
            assert not store.pulsar.managed_ledger_names(f"{target.root}/managed-ledgers")  # written last
            code, docs, err = run(capsys, target.uri, "restore", "--from", archive, "--remap", "--force")
            assert code == 0, err
            ids = {int(k): v for k, v in docs[0]["ledger_ids"].items()}
            # every ledger once, under the id the journal gave it before the kill
            assert sorted(store.ledgers.ids()) == sorted(ids[x.ledger_id] for x in manifest.ledgers)
        for x in manifest.ledgers:
            record = LedgerRecord.decode(storage.get(x.record))
            with storage.open_read(record.data_object) as f:
                want = [p for _e, p in read_data(f, x.ledger_id, record.index_sha256)]
            h = target.bk.open(ids[x.ledger_id])
            assert h.is_closed and [p for _e, p in h.read()] == want
        code, rows, err = run(capsys, target.uri, "pulsar", "topic", "show", f"persistent://{NS}/t0")
        part = rows[0]["partitions"][0]
        assert [x["ledger_id"] for x in part["ledgers"]] == [ids[lid] for lid, _n, _s in cluster.topics["t0"]]
        assert part["cursors"][0]["mark_delete"] == f"{ids[cluster.topics['t0'][0][0]]}:9"
    finally:
        target.stop()


def test_a_target_with_conflicting_metadata_is_refused_in_one_line_before_anything_is_written(
    cluster, capsys, tmp_path
):
    from bkctl.wire.metadata.zk import ZKMetadataStore
    from tests.support.cli import bkctl

    archive = tmp_path / "archive"
    done = bkctl(cluster.uri, "backup", "--to", str(archive), "--topic", f"persistent://{NS}/t1")
    assert done.returncode == 0 and done.stderr == "", done.stderr  # on a pipe: no progress, no noise
    target = Cluster(cluster.zookeeper, cluster.base, "conflict").start()
    try:
        with ZKMetadataStore(target.uri, timeout=20, twins=fastpath.selected()) as store:
            put_topic(store.client, target.root, "t1", [(12345, 1, 10)])  # another t1
            before = sorted(store.ledgers.ids())
            for extra in ([], ["--remap"]):
                code, docs, err = run(capsys, target.uri, "restore", "--from", archive, "--force", *extra)
                assert code == 4 and len(err.strip().splitlines()) == 1, err
                assert f"{NS}/persistent/t1 exists in the target cluster" in err
            assert sorted(store.ledgers.ids()) == before
        # on a pipe without --force: refused, nothing written (exit 2)
        store2 = ZKMetadataStore(target.uri, timeout=20, twins=fastpath.selected()).start()
        try:
            store2.client.delete(f"{target.root}/managed-ledgers/{NS}/persistent/t1", recursive=True)
        finally:
            store2.close()
        code, docs, err = run(capsys, target.uri, "restore", "--from", archive)
        assert code == 2 and "without --force" in err, err
    finally:
        target.stop()


def test_a_topic_written_during_its_backup_is_backed_up_as_a_consistent_prefix(cluster, capsys, tmp_path):
    from bkctl.backup.catalog import load_manifest
    from bkctl.backup.storage import LocalStorage
    from bkctl.wire.backup.archive import LedgerRecord
    from bkctl.wire.backup.data_read import read_data
    from bkctl.wire.metadata.zk import ZKMetadataStore

    short = "busy"
    ml_name = f"{NS}/persistent/{short}"
    closed = write(cluster.bk, short, 50)
    writer = cluster.bk.create(3, 2, 2, password=b"", custom_metadata=custom(ml_name))
    written: list[bytes] = []
    for i in range(20):
        written.append(b"busy" + i.to_bytes(4, "big") * 64)
        writer.add(written[-1])
    cursor = ml.ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=writer.ledger_id, markDeleteEntryId=15)
    with ZKMetadataStore(cluster.uri, timeout=20, twins=fastpath.selected()) as store:
        put_topic(store.client, cluster.root, short, [closed, (writer.ledger_id, -1, 0)], {"sub": cursor})
    stop = threading.Event()

    def keep_writing():
        i = len(written)
        while not stop.is_set():
            written.append(b"busy" + i.to_bytes(4, "big") * 64)
            writer.add(written[-1])
            i += 1

    thread = threading.Thread(target=keep_writing)
    thread.start()
    try:
        wait_for(lambda: len(written) > 25, what="the writer to add while the topic is backed up")
        archive = tmp_path / "archive"
        code, docs, err = run(capsys, cluster.uri, "backup", "--to", archive, "--topic", f"persistent://{NS}/{short}")
        assert code == 0, err
        after = len(written)  # the backup read no more than this; the writer goes on past it
        wait_for(lambda: len(written) > after + 1, what="the writer to go on after the backup")
    finally:
        stop.set()
        thread.join()
        writer.close()
    storage = LocalStorage(str(archive))
    manifest = load_manifest(storage)
    copy = next(x for x in manifest.ledgers if x.ledger_id == writer.ledger_id)
    record = LedgerRecord.decode(storage.get(copy.record))
    assert record.state == "OPEN"
    with storage.open_read(record.data_object) as f:
        got = [p for _e, p in read_data(f, writer.ledger_id, record.index_sha256)]
    assert 20 <= len(got) < len(written) and got == written[: len(got)]  # a prefix, the writer went on
    # and the topic restores at that prefix, its cursor where it was
    target = Cluster(cluster.zookeeper, cluster.base, "busy").start()
    try:
        code, docs, err = run(capsys, target.uri, "restore", "--from", archive, "--force")
        assert code == 0, err
        code, rows, err = run(capsys, target.uri, "pulsar", "topic", "show", f"persistent://{NS}/{short}")
        part = rows[0]["partitions"][0]
        assert [x["entries"] for x in part["ledgers"]] == [50, len(got)]
        assert [x["state"] for x in part["ledgers"]] == ["CLOSED", "CLOSED"]
        assert part["cursors"][0]["mark_delete"] == f"{writer.ledger_id}:15"
        assert part["cursors"][0]["backlog_entries"] == len(got) - 16
    finally:
        target.stop()


def test_on_a_terminal_a_restore_asks_first_and_shows_its_progress(cluster, capsys, tmp_path):
    import sys

    import pexpect

    from tests.support.terminal import Terminal, bkctl_env, ended

    archive = tmp_path / "archive"
    code, docs, err = run(capsys, cluster.uri, "backup", "--to", archive, "--topic", f"persistent://{NS}/t2")
    assert code == 0, err
    target = Cluster(cluster.zookeeper, cluster.base, "tty").start()
    try:
        argv = [sys.executable, "-m", "bkctl", "-m", target.uri, "restore", "--from", str(archive)]
        term = Terminal(argv, bkctl_env(tmp_path, NO_COLOR="1"))
        term.expect(r"Restore backup \S+ \(\d+ ledgers, 1 topics\) into .*\? \[y/N\]")
        term.line("n")
        term.expect("declined: did not restore")
        term.child.expect(pexpect.EOF)
        term = Terminal(argv, bkctl_env(tmp_path, NO_COLOR="1"))
        term.expect(r"\[y/N\]")
        term.line("y")
        term.expect(r"restoring\s.*\d+/\d+")  # the bar (bytes done of all, elapsed, time left), gone once done
        term.expect(r"restored backup \S+: \d+ ledgers")
        term.child.expect(pexpect.EOF)
        assert ended(term.child).exitstatus == 0
    finally:
        target.stop()


def test_bad_archives_and_names_get_one_line_and_their_exit_code(cluster, capsys, tmp_path):
    from tests.support.cli import bkctl, one_line_error

    archive = tmp_path / "archive"
    other = tmp_path / "photos"
    other.mkdir()
    (other / "cat.jpg").write_bytes(b"meow")
    assert "holds other files" in one_line_error(bkctl(cluster.uri, "backup", "--to", str(other)), 2)
    assert (other / "cat.jpg").read_bytes() == b"meow" and sorted(os.listdir(other)) == ["cat.jpg"]
    assert "no backup archive there" in one_line_error(bkctl(cluster.uri, "backup", "list", str(archive)), 3)
    assert "no backup archive there" in one_line_error(bkctl(cluster.uri, "restore", "--from", str(archive)), 3)
    code, docs, err = run(capsys, cluster.uri, "backup", "--to", archive, "--topic", f"persistent://{NS}/t3")
    assert code == 0, err
    assert "no backup nope" in one_line_error(bkctl(cluster.uri, "backup", "show", str(archive), "--backup", "nope"), 3)
    assert "no such topic" in one_line_error(bkctl(cluster.uri, "backup", "--to", str(archive), "--topic", "nosuch"), 3)
    assert "--to" in one_line_error(bkctl(cluster.uri, "backup"), 2)
    assert "takes ARCHIVE" in one_line_error(bkctl(cluster.uri, "backup", "list", str(archive), "--to", "x"), 2)
    assert "s3://" in one_line_error(bkctl(cluster.uri, "backup", "--to", "ftp://host/x"), 2)
    (archive / "archive.json").write_text("{}")
    assert "not a bkctl-archive/1 archive" in one_line_error(bkctl(cluster.uri, "backup", "verify", str(archive)), 2)


def test_a_backup_into_s3_killed_midway_completes_when_run_again_and_verifies(cluster, s3_server, s3_bucket):
    """The S3 twin: an object appears when its upload completes, so a kill leaves none half written."""
    from bkctl.wire.metadata.zk import ZKMetadataStore
    from tests.support.cli import bkctl

    env = s3_server.env()
    archive = f"s3://{s3_bucket.name}/bk"

    def keys(suffix: str) -> list[str]:
        got = s3_bucket.client.list_objects_v2(Bucket=s3_bucket.name, Prefix="bk/").get("Contents", [])
        return sorted(o["Key"] for o in got if o["Key"].endswith(suffix))

    proc = spawn(cluster.uri, "backup", "--to", archive, "--parallel", "1", env=env)
    kill_when(proc, lambda: len(keys(".json")) >= 3)
    assert not keys("backups/") and not [k for k in keys(".json") if k.startswith("bk/backups/")]
    done = bkctl(cluster.uri, "--json", "backup", "--to", archive, env=env)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    with ZKMetadataStore(cluster.uri, timeout=20, twins=fastpath.selected()) as store:
        ledgers = len(list(store.ledgers.ids()))  # the whole cluster's (earlier tests added some)
    assert doc["ledgers"] == ledgers and 0 < doc["copied_ledgers"] < ledgers
    assert len(keys(".data")) == len([k for k in keys(".json") if k.startswith("bk/ledgers/")]) == ledgers
    done = bkctl(cluster.uri, "--json", "backup", "verify", archive, env=env)
    assert done.returncode == 0 and json.loads(done.stdout)["ok"], done.stdout
