"""`bkctl cluster backup|restore` against a real ZooKeeper and real bookieds:
backup, nuke, restore, and the ledgers are readable again by the same bookies."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import bkctl, ok
from tests.support.ledgers import make_ledger, make_ledgers
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def test_backup_nuke_restore_and_the_ledgers_read_again(bookie_cluster, metadata_uri, zkstore, writer, tmp_path):
    procs = bookie_cluster(3)
    closed = make_ledger(writer, 3, 2, entries=20)
    second = make_ledger(writer, 2, 2, entries=5)
    zkstore.underreplication.set_lost_bookie_recovery_delay(42)
    zkstore.underreplication.disable()
    instance = zkstore.cluster.instance_id()
    before = {lid: zkstore.ledgers.read_bytes(lid)[0] for lid in (closed, second)}
    backup = tmp_path / "cluster.backup"

    doc = json.loads(ok(bkctl(metadata_uri, "--json", "cluster", "backup", str(backup))))
    assert doc["ledgers"] == 2 and doc["cookies"] == 3 and doc["instance_id"] == instance
    refused = bkctl(metadata_uri, "cluster", "backup", str(backup))
    assert refused.returncode == 4 and "--force" in refused.stderr
    ok(bkctl(metadata_uri, "cluster", "backup", str(backup), "--force"))

    for p in procs:
        p.stop()
    wait_for(lambda: not zkstore.registration.writable_bookies(), what="the bookies unregistered")
    ok(bkctl(metadata_uri, "cluster", "nuke", "--force"))

    doc = json.loads(ok(bkctl(metadata_uri, "--json", "cluster", "restore", str(backup))))
    assert doc["cluster_created"] and doc["ledgers"] == 2 and doc["cookies"] == 3
    assert doc["instance_id"] == instance and doc["next_ledger_id_above"] > max(closed, second)
    assert {lid: zkstore.ledgers.read_bytes(lid)[0] for lid in (closed, second)} == before  # byte for byte
    assert zkstore.cluster.instance_id() == instance
    assert not zkstore.underreplication.is_enabled()
    assert zkstore.underreplication.lost_bookie_recovery_delay() == 42

    for p in procs:  # their cookies and INSTANCEID are back: they start on their old disks
        p.start()
    read = ok(bkctl(metadata_uri, "ledger", "read", str(closed)))
    assert len(read.splitlines()) == 20
    new = int(ok(bkctl(metadata_uri, "-q", "ledger", "create")).strip())  # not a restored id
    assert new not in (closed, second)

    # onto existing ledgers: refused without a terminal unless --force
    refused = bkctl(metadata_uri, "cluster", "restore", str(backup))
    assert refused.returncode == 2 and "without --force" in refused.stderr
    doc = json.loads(ok(bkctl(metadata_uri, "--json", "cluster", "restore", str(backup), "--force")))
    assert doc["replaced_ledgers"] == sorted([closed, second]) and not doc["instance_id_replaced"]


def test_restore_refuses_what_is_not_a_backup(metadata_uri, zkstore, tmp_path):
    junk = tmp_path / "junk"
    junk.write_text('{"format": "something else"}')
    r = bkctl(metadata_uri, "cluster", "restore", str(junk))
    assert r.returncode == 2 and "not a bkctl cluster backup" in r.stderr
    make_ledgers(zkstore, [3])
    backup = tmp_path / "b"
    ok(bkctl(metadata_uri, "cluster", "backup", str(backup)))
    text = backup.read_text().replace(json.loads(backup.read_text())["ledgers"]["3"], "AAAA")
    backup.write_text(text)
    r = bkctl(metadata_uri, "cluster", "restore", str(backup), "--force")
    assert r.returncode == 2 and "damaged backup" in r.stderr
