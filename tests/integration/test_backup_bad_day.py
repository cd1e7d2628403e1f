"""``bkctl backup`` and ``bkctl restore`` on the day they are needed, against REAL ZooKeeper and
bookieds: a ledger with entries no bookie holds (planted, as fsck's tests plant them) does not
stop a backup of the rest; a restore reads a read-only archive and writes nothing there."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest

from bkctl.exitcodes import PARTIAL
from tests.support.cli import bkctl, json_lines
from tests.support.ledgers import make_ledger
from tests.support.planted import closed_metadata, put

pytestmark = [pytest.mark.integration]

N = 12  # entries of the planted ledger; 6..11 are on no bookie


def plant_unreadable(zkstore, ports: dict[str, int], ledger_id: int = 1004) -> int:
    """A closed ledger whose metadata says 12 entries while its bookies hold 0..5 only."""
    a, b = sorted(ports)[:2]
    zkstore.ledgers.create(closed_metadata(ledger_id, [(0, [a, b])], N - 1, 2), ledger_id=ledger_id)
    for bookie in (a, b):
        put(ports[bookie], ledger_id, range(6))
    return ledger_id


def files_of(folder) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), folder) for d, _dirs, fs in os.walk(folder) for f in fs)


def test_a_backup_copies_every_readable_ledger_records_the_unreadable_one_and_says_so(
    bookie_cluster, metadata_uri, zkstore, writer, tmp_path
):
    procs = bookie_cluster(3)
    ports = {p.bookie_id: p.port for p in procs}
    good = [make_ledger(writer, 3, 2, entries=50, tag=f"g{i}") for i in range(3)]
    bad = plant_unreadable(zkstore, ports)
    archive = tmp_path / "archive"

    r = bkctl(metadata_uri, "--json", "backup", "--to", archive)
    assert r.returncode == PARTIAL, r.stderr
    assert f"ledger {bad}" in r.stderr and "partial" in r.stderr
    doc = json_lines(r.stdout)[0]
    assert [u["ledger_id"] for u in doc["unreadable"]] == [bad]
    assert doc["ledgers"] == len(good) and doc["unreadable_ledgers"] == 1

    listed = bkctl(metadata_uri, "--json", "backup", "list", archive)
    assert listed.returncode == 0, listed.stderr
    rows = json_lines(listed.stdout)
    assert len(rows) == 1 and rows[0]["id"] == doc["backup"] and rows[0]["unreadable_ledgers"] == 1
    human = bkctl(metadata_uri, "backup", "list", archive)
    assert "PARTIAL" in human.stdout and "1 ledger unreadable" in human.stdout
    shown = json_lines(bkctl(metadata_uri, "--json", "backup", "show", archive).stdout)[0]
    assert [u["ledger_id"] for u in shown["unreadable"]] == [bad]
    assert bkctl(metadata_uri, "backup", "verify", archive).returncode == 0  # what it holds is whole
    assert not any(f.startswith(f"ledgers/{bad}/") for f in files_of(archive))  # no half copy


@contextlib.contextmanager
def read_only(folder: Path):
    """``folder`` seen through a read-only bind mount (as root, whom permissions do not stop), or
    with its write bits taken away; that nothing can be written there is checked first."""
    if os.geteuid() == 0:
        view = folder.parent / f"{folder.name}-ro"
        view.mkdir()
        subprocess.run(["mount", "--bind", str(folder), str(view)], check=True)
        try:
            subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True)
            with pytest.raises(OSError):
                (view / "probe").write_bytes(b"")
            yield view
        finally:
            subprocess.run(["umount", str(view)], check=True)
            view.rmdir()
        return
    for d, _dirs, fs in os.walk(folder):
        for name in [*fs, "."]:
            os.chmod(os.path.join(d, name), 0o555 if name == "." else 0o444)
    try:
        with pytest.raises(OSError):
            (folder / "probe").write_bytes(b"")
        yield folder
    finally:
        for d, _dirs, _fs in os.walk(folder):
            os.chmod(d, 0o755)


def snapshot(folder: Path) -> dict[str, tuple[int, float]]:
    return {f: (os.stat(folder / f).st_size, os.stat(folder / f).st_mtime) for f in files_of(folder)}


def entries_of(bk, ledger_id: int) -> list[bytes]:
    lh = bk.open(ledger_id)
    last = lh.metadata.last_entry_id
    return [e for batch in lh.read_range(0, last, batch=256) for _i, e in batch] if last >= 0 else []


def states(zkstore) -> dict[int, str]:
    return {lid: zkstore.ledgers.read(lid)[0].state.name for lid in zkstore.ledgers.ids()}


def backed_up(bookie_cluster, metadata_uri, writer, tmp_path, n: int) -> tuple[list[int], Path]:
    """``n`` closed ledgers on three bookies, backed up into an archive: their ids, the archive."""
    bookie_cluster(3)
    ledgers = [make_ledger(writer, 3, 2, entries=40, tag=f"r{i}") for i in range(n)]
    archive = tmp_path / "archive"
    assert bkctl(metadata_uri, "backup", "--to", archive).returncode == 0
    return ledgers, archive


def test_a_restore_reads_a_read_only_archive_and_keeps_its_journal_in_the_cluster(
    bookie_cluster, metadata_uri, zkstore, writer, tmp_path
):
    ledgers, archive = backed_up(bookie_cluster, metadata_uri, writer, tmp_path, 3)
    before = snapshot(archive)
    with read_only(archive) as ro:
        r = bkctl(metadata_uri, "--json", "restore", "--from", ro, "--remap", "--force")
        assert r.returncode == 0, r.stderr
    doc = json_lines(r.stdout)[0]
    assert snapshot(archive) == before  # nothing written there
    assert "bkctl-restores" in doc["journal"] and zkstore.restores.kept()
    for old in ledgers:
        assert entries_of(writer, doc["ledger_ids"][str(old)]) == entries_of(writer, old)

    journal = tmp_path / "journal.json"  # or in a file of the operator's
    with read_only(archive) as ro:
        r = bkctl(metadata_uri, "--json", "restore", "--from", ro, "--remap", "--journal", journal, "--force")
    assert r.returncode == 0, r.stderr
    assert json_lines(r.stdout)[0]["journal"] == str(journal) and journal.exists()


#: how a ledger's data object is damaged (``damage``), and what the restore then says of it
DAMAGES = {
    "flipped": "CRC32C does not match",  # a bit of the last entry's payload
    "truncated": "ends early",  # cut in the middle of an entry's payload
    "length": "ends early",  # an entry's length field saying 2 GiB
}


def damage(archive: Path, ledger_id: int, how: str) -> None:
    (data,) = [archive / f for f in files_of(archive) if f.startswith(f"ledgers/{ledger_id}/") and f.endswith(".data")]
    raw = bytearray(data.read_bytes())
    if how == "flipped":
        raw[-3] ^= 0x40  # its CRC32C no longer matches
    elif how == "truncated":
        del raw[len(raw) // 2 :]
    else:  # the third entry's length field (after the 16-byte header and two entries)
        at = 16
        for _ in range(2):
            at += 16 + int.from_bytes(raw[at + 8 : at + 12], "big")
        raw[at + 8 : at + 12] = (0x7FFFFFFF).to_bytes(4, "big")
    data.write_bytes(bytes(raw))


def test_a_damaged_ledger_stops_a_restore_cleanly_and_skip_damaged_restores_the_rest(
    bookie_cluster, metadata_uri, zkstore, writer, tmp_path
):
    ledgers, archive = backed_up(bookie_cluster, metadata_uri, writer, tmp_path, 5)
    bad = dict(zip(ledgers[1:4], DAMAGES))  # a payload's bit flipped, an object cut short, a wrong length
    for lid, how in bad.items():
        damage(archive, lid, how)
    before = set(zkstore.ledgers.ids())

    r = bkctl(metadata_uri, "restore", "--from", archive, "--remap", "--force", "--parallel", "1")
    assert r.returncode == 1, r.stderr
    line = r.stderr.strip()
    first = min(bad)
    assert len(line.splitlines()) == 1 and f"ledger {first}" in line and "the cluster holds" in line
    assert DAMAGES[bad[first]] in line and "--skip-damaged" in line and "Traceback" not in r.stderr
    assert set(states(zkstore).values()) == {"CLOSED"}  # no open, no half-written ledger left
    assert len(set(zkstore.ledgers.ids()) - before) <= ledgers.index(first)  # none past the damaged one

    r = bkctl(metadata_uri, "--json", "restore", "--from", archive, "--remap", "--force", "--skip-damaged")
    assert r.returncode == PARTIAL, r.stderr
    said = [ln for ln in r.stderr.splitlines() if ln.strip()]
    for lid, how in bad.items():
        (why,) = [ln for ln in said if f"ledger {lid} not restored" in ln]
        assert DAMAGES[how] in why, (how, why)
    assert "Traceback" not in r.stderr
    doc = json_lines(r.stdout)[0]
    assert [d["ledger_id"] for d in doc["damaged"]] == sorted(bad)
    for old in ledgers:
        new = doc["ledger_ids"][str(old)]
        if old in bad:
            assert not zkstore.ledgers.exists(new)
        else:
            assert entries_of(writer, new) == entries_of(writer, old)
    assert set(states(zkstore).values()) == {"CLOSED"}


def test_restore_topic_restores_that_topic_alone_into_a_live_cluster(
    bookie_cluster, metadata_uri, zk_namespace, zkstore, writer, tmp_path
):
    from bkctl.wire.proto import pulsar_ml_pb2 as ml
    from tests.integration.test_backup_faults import put_topic, write

    bookie_cluster(3)
    zk = zkstore.client
    topics = {}
    for short in ("t0", "t1"):
        topics[short] = [write(writer, short, 40, tag=short.encode()) for _ in range(2)]
        cursor = ml.ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=topics[short][0][0], markDeleteEntryId=5)
        put_topic(zk, zk_namespace, short, topics[short], {"sub": cursor})
    path = f"{zk_namespace}/managed-ledgers/public/default/persistent/t0"
    znodes = {p: zk.get(p)[0] for p in (path, f"{path}/sub")}
    rows = {lid: entries_of(writer, lid) for lid, _n, _s in topics["t0"]}
    archive = tmp_path / "archive"
    assert bkctl(metadata_uri, "backup", "--to", archive).returncode == 0

    zk.delete(path, recursive=True)  # t0 lost; t1 lives on and is written meanwhile
    for lid in rows:
        writer.delete(lid)
    t1_after = write(writer, "t1", 5, tag=b"new")
    missing = bkctl(metadata_uri, "restore", "--from", archive, "--topic", "nosuch", "--force")
    assert missing.returncode == 3 and "holds no topic nosuch" in missing.stderr

    r = bkctl(
        metadata_uri, "--json", "restore", "--from", archive, "--topic", "persistent://public/default/t0", "--force"
    )
    assert r.returncode == 0, r.stderr
    doc = json_lines(r.stdout)[0]
    assert doc["topics"] == 1 and sorted(map(int, doc["ledger_ids"])) == sorted(rows)
    assert {p: zk.get(p)[0] for p in znodes} == znodes
    assert {lid: entries_of(writer, lid) for lid in rows} == rows
    assert zkstore.ledgers.exists(t1_after[0])  # the rest of the cluster untouched


def test_s3_errors_are_one_line_with_the_object_stores_exit_codes(metadata_uri, s3_server, s3_bucket):
    """As ``pulsar offload`` gives them (exit 6 refused, 5 unreachable, 3 missing), through the one
    object store (bkctl.wire.objects), never boto's raw text."""
    from tests.support.ports import free_port

    archive = f"s3://{s3_bucket.name}/bk"
    denied = s3_server.env(s3_server.denied)
    nobody = s3_server.env(endpoint_url=f"http://127.0.0.1:{free_port()}")
    for env, code, words in ((denied, 6, "access denied"), (nobody, 5, "cannot reach the object store")):
        for args in (
            ("backup", "--to", archive),
            ("backup", "list", archive),
            ("restore", "--from", archive, "--force"),
        ):
            r = bkctl(metadata_uri, *args, env=env)
            assert r.returncode == code, (args, r.stderr)
            assert r.stderr.count("\n") == 1 and words in r.stderr and "Traceback" not in r.stderr, r.stderr
            assert "botocore" not in r.stderr and denied["AWS_SECRET_ACCESS_KEY"] not in r.stderr
    r = bkctl(metadata_uri, "backup", "list", archive, env=s3_server.env())
    assert r.returncode == 3 and "no backup archive there" in r.stderr
