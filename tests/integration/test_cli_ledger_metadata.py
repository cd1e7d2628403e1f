"""bkctl ledger metadata dump/restore and the ledger list filters, on real ZooKeeper and real bookieds."""

import json
import time
from pathlib import Path

from bkctl.wire.metadata.ledger import LedgerMetadata
from tests.support.cli import bkctl

RAW = Path(__file__).resolve().parents[1] / "vectors" / "zk" / "raw"


def test_dump_delete_restore_gives_back_a_readable_ledger(tmp_path, metadata_uri, zkstore, bookie_cluster):
    bookie_cluster(3)
    created = bkctl(metadata_uri, "--json", "ledger", "create", "--meta", "app=orders")
    assert created.returncode == 0, created.stderr
    ledger_id = json.loads(created.stdout)["ledger_id"]
    assert bkctl(metadata_uri, "ledger", "add", str(ledger_id), "one", "two", "three").returncode == 0
    assert bkctl(metadata_uri, "ledger", "close", str(ledger_id)).returncode == 0
    stored, _ = zkstore.ledgers.read_bytes(ledger_id)

    path = tmp_path / f"ledger-{ledger_id}.meta"
    dumped = bkctl(metadata_uri, "--json", "ledger", "metadata", "dump", str(ledger_id), str(path))
    assert dumped.returncode == 0, dumped.stderr
    assert path.read_bytes() == stored and json.loads(dumped.stdout)["state"] == "CLOSED"
    assert bkctl(metadata_uri, "ledger", "metadata", "dump", "999999", str(tmp_path / "x")).returncode == 3

    assert bkctl(metadata_uri, "ledger", "delete", str(ledger_id), "--force").returncode == 0
    assert bkctl(metadata_uri, "ledger", "read", str(ledger_id)).returncode == 3
    restored = bkctl(metadata_uri, "--json", "ledger", "metadata", "restore", str(path))  # id from the name
    assert restored.returncode == 0, restored.stderr
    assert json.loads(restored.stdout)["replaced"] is False
    assert zkstore.ledgers.read_bytes(ledger_id)[0] == stored
    read = bkctl(metadata_uri, "ledger", "read", str(ledger_id))
    assert read.returncode == 0 and read.stdout.split() == ["0", "one", "1", "two", "2", "three"]

    again = bkctl(metadata_uri, "ledger", "metadata", "restore", str(path))  # exists, no terminal
    assert again.returncode == 2 and "--force" in again.stderr
    forced = bkctl(metadata_uri, "--json", "ledger", "metadata", "restore", str(path), "--force")
    assert json.loads(forced.stdout)["replaced"] is True


def test_java_metadata_restores_and_dumps_byte_for_byte(tmp_path, metadata_uri, zkstore):
    for name in ("ledgers__00__0000__L0000.bin", "ledgers__00__0000__L0001.bin"):
        data = (RAW / name).read_bytes()
        ledger_id = int(name[-8:-4]) + 100
        res = bkctl(metadata_uri, "ledger", "metadata", "restore", str(RAW / name), "--ledger-id", str(ledger_id))
        assert res.returncode == 0, res.stderr
        assert zkstore.ledgers.read_bytes(ledger_id)[0] == data
        out = tmp_path / "dump"
        assert bkctl(metadata_uri, "ledger", "metadata", "dump", str(ledger_id), str(out)).returncode == 0
        assert out.read_bytes() == data
    junk = tmp_path / "7"
    junk.write_bytes(b"not metadata")
    bad = bkctl(metadata_uri, "ledger", "metadata", "restore", str(junk))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    noname = tmp_path / "meta"
    noname.write_bytes((RAW / "ledgers__00__0000__L0000.bin").read_bytes())
    assert bkctl(metadata_uri, "ledger", "metadata", "restore", str(noname)).returncode == 2


def test_ledger_list_filters_and_totals(metadata_uri, zkstore):
    now = int(time.time() * 1000)
    day = 86400 * 1000
    ens = ["127.0.0.1:1", "127.0.0.1:2"]

    def make(ctime, meta, closed=None):
        md = LedgerMetadata.new(ens, 2, 2, ctime=ctime, custom_metadata={k: v.encode() for k, v in meta.items()})
        if closed is not None:
            md = md.closed(*closed)
        return zkstore.ledgers.create(md)[0]

    old_topic = make(now - 10 * day, {"pulsar/managed-ledger": "public/default/persistent/orders"}, (9, 5000))
    new_topic = make(now - 60 * 1000, {"pulsar/managed-ledger": "public/default/persistent/orders"}, (0, 100))
    old_open = make(now - 3 * day, {"pulsar/managed-ledger": "public/default/persistent/billing"})
    other = make(now, {"application": "x"}, (99, 10 << 20))

    def ids(*args):
        res = bkctl(metadata_uri, "--json", "ledger", "list", *args)
        assert res.returncode == 0, res.stderr
        return [json.loads(line) for line in res.stdout.splitlines()]

    def just_ids(*args):
        return [r["ledger_id"] for r in ids(*args) if "ledger_id" in r]

    assert just_ids("--meta", "pulsar/managed-ledger=*/orders") == [old_topic, new_topic]
    assert just_ids("--meta", "pulsar/*=public/default/*") == [old_topic, new_topic, old_open]
    assert just_ids("--meta", "pulsar/managed-ledger=*/orders", "--older-than", "7d") == [old_topic]
    assert just_ids("--open-longer-than", "1d") == [old_open]
    assert just_ids("--open-longer-than", "4d") == []
    assert just_ids("--min-size", "1M") == [other]
    assert just_ids("--min-size", "1000") == [old_topic, other]
    rows = ids("--meta", "pulsar/managed-ledger=*", "--totals")
    assert rows[-1] == {"totals": {"count": 3, "entries": 11, "bytes": 5100}}
    human = bkctl(metadata_uri, "ledger", "list", "--meta", "pulsar/managed-ledger=*/orders")
    assert "2 ledgers, 11 entries, 5.0 KiB" in human.stdout
    for bad in (("--older-than", "7x"), ("--min-size", "lots"), ("--meta", "novalue")):
        res = bkctl(metadata_uri, "ledger", "list", *bad)
        assert res.returncode == 2 and "Traceback" not in res.stderr
