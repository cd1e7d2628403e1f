"""recover --ledger/--rate/--delete-cookie, simpletest --bookie, ledger read --bookie and cluster nuke,
against real ZooKeeper and real bookieds."""

import json

from tests.support.cli import bkctl


def _ledger(uri, *args, entries=("a", "b", "c", "d", "e", "f")):
    res = bkctl(uri, "--json", "ledger", "create", *args)
    assert res.returncode == 0, res.stderr
    ledger_id = json.loads(res.stdout)["ledger_id"]
    assert bkctl(uri, "ledger", "add", str(ledger_id), *entries).returncode == 0
    assert bkctl(uri, "ledger", "close", str(ledger_id)).returncode == 0
    return ledger_id


def test_recover_one_ledger_with_rate_then_all_with_delete_cookie(metadata_uri, zkstore, bookie_cluster):
    bookies = bookie_cluster(4)
    first = _ledger(metadata_uri, "-e", "3", "-w", "3", "-a", "3")
    lost = zkstore.ledgers.read(first)[0].last_ensemble[0]
    second = None
    while second is None:  # a second ledger on the same bookie
        candidate = _ledger(metadata_uri, "-e", "3", "-w", "3", "-a", "3")
        if lost in zkstore.ledgers.read(candidate)[0].bookies:
            second = candidate
    victim = next(b for b in bookies if b.bookie_id == lost)
    victim.kill()
    if zkstore.registration.is_registered(lost):  # its session has not expired yet
        zkstore.registration.unregister(lost)

    assert bkctl(metadata_uri, "recover", lost, "--ledger", "999999", "--force").returncode == 3
    one = bkctl(metadata_uri, "--json", "recover", lost, "--ledger", str(first), "--rate", "100000", "--force")
    assert one.returncode == 0, one.stderr
    assert [r["ledger_id"] for r in json.loads(one.stdout)["ledgers"]] == [first]
    assert lost not in zkstore.ledgers.read(first)[0].bookies
    assert lost in zkstore.ledgers.read(second)[0].bookies  # left alone
    assert zkstore.cookies.get(lost) is not None

    rest = bkctl(metadata_uri, "--json", "recover", lost, "--delete-cookie", "--force")
    assert rest.returncode == 0, rest.stderr
    doc = json.loads(rest.stdout)
    assert doc["cookies"] == {lost: "deleted"} and zkstore.cookies.get(lost) is None
    assert lost not in zkstore.ledgers.read(second)[0].bookies
    read = bkctl(metadata_uri, "ledger", "read", str(second))
    assert read.returncode == 0 and read.stdout.split()[1::2] == ["a", "b", "c", "d", "e", "f"]


def test_simpletest_pinned_to_one_bookie(metadata_uri, zkstore, bookie_cluster):
    bookies = bookie_cluster(2)
    target = bookies[1].bookie_id
    res = bkctl(metadata_uri, "--json", "simpletest", "--bookie", target, "-n", "20")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["bookies"] == [target] and doc["ensemble_size"] == 1 and doc["ok"]
    assert bkctl(metadata_uri, "simpletest", "--bookie", "127.0.0.1:1").returncode == 3
    zkstore.registration.register("127.0.0.1:2", readonly=True)
    assert bkctl(metadata_uri, "simpletest", "--bookie", "127.0.0.1:2").returncode == 4


def test_ledger_read_one_replica(metadata_uri, zkstore, bookie_cluster):
    bookies = bookie_cluster(4)
    ledger_id = _ledger(metadata_uri, "-e", "3", "-w", "2", "-a", "2")
    md, version = zkstore.ledgers.read(ledger_id)
    ens = md.last_ensemble
    b0 = ens[0]
    res = bkctl(metadata_uri, "--json", "ledger", "read", str(ledger_id), "--bookie", b0)
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    expected = [e for e in range(6) if b0 in md.write_set(e)]
    assert [r["entry_id"] for r in rows] == expected and all(r["status"] == "ok" for r in rows)
    assert [r["payload"] for r in rows] == ["abcdef"[e] for e in expected]

    spare = next(b.bookie_id for b in bookies if b.bookie_id not in ens)  # a replica that was never written
    zkstore.ledgers.update(ledger_id, md.replace_bookie(0, ens[2], spare), version)
    res = bkctl(metadata_uri, "--json", "ledger", "read", str(ledger_id), "--bookie", spare)
    assert res.returncode == 1
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert rows and all(r["status"] == "missing" and r["bookie"] == spare for r in rows)
    assert bkctl(metadata_uri, "ledger", "read", str(ledger_id), "--bookie", "127.0.0.1:1").returncode == 3


def test_cluster_nuke(metadata_uri, zkstore):
    instance = zkstore.cluster.instance_id()
    assert bkctl(metadata_uri, "cluster", "nuke").returncode == 2
    refused = bkctl(metadata_uri, "cluster", "nuke", "--instance-id", instance)  # no terminal
    assert refused.returncode == 2 and "--force" in refused.stderr
    assert bkctl(metadata_uri, "cluster", "nuke", "--instance-id", "wrong", "--force").returncode == 4
    zkstore.registration.register("127.0.0.1:5")
    busy = bkctl(metadata_uri, "cluster", "nuke", "--instance-id", instance, "--force")
    assert busy.returncode == 4 and "stop all bookies" in busy.stderr
    zkstore.registration.unregister("127.0.0.1:5")
    done = bkctl(metadata_uri, "--json", "cluster", "nuke", "--instance-id", instance, "--force")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["nuked"] is True
    assert not zkstore.cluster.exists()
    assert bkctl(metadata_uri, "cluster", "nuke", "--instance-id", instance, "--force").returncode == 3
    again = bkctl(metadata_uri, "--json", "cluster", "nuke", "--force")
    assert again.returncode == 0 and json.loads(again.stdout)["nuked"] is False
