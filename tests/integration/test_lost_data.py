"""Lost data is named, never a blocker, against real bookieds and ZooKeeper: an E2/W2/A2 ledger
of 67 entries on bookies A and B; B loses its disk for good and A's copy of entry 5 has a
flipped byte.  fsck calls it data_lost (exit 9) naming entry 5, its bookies and the cause, with
or without --all; after ``--fix mark`` an autorecovery daemon copies the 66 readable entries,
makes the swap and records entry 5, which ``autorecovery status`` names; each bookie of the
new ensemble then holds a good copy of every readable entry."""

from __future__ import annotations

import json

from tests.support.cli import bkctl, json_lines
from tests.support.planted import closed_metadata, payload, put
from tests.support.waiting import wait_for

N = 67
LEDGER = 2001


def one(out: str) -> dict:
    (doc,) = json_lines(out)
    return doc


def test_a_lost_entry_is_named_and_the_rest_of_its_ledger_repaired(bookie_cluster, metadata_uri, zkstore, ar_daemon):
    from bkctl.wire.metadata.store import registered_bookies

    uri = metadata_uri
    procs = bookie_cluster(3)
    by_id = {p.bookie_id: p for p in procs}
    a, b, c = sorted(by_id)
    zkstore.ledgers.create(closed_metadata(LEDGER, [(0, [a, b])], N - 1, 2), ledger_id=LEDGER)
    put(by_id[a].port, LEDGER, range(N), flipped=[5])
    put(by_id[b].port, LEDGER, range(N))
    for other in (2002, 2003):  # two healthy ledgers on the same bookies
        zkstore.ledgers.create(closed_metadata(other, [(0, [a, b])], 3, 2), ledger_id=other)
        for bookie in (a, b):
            put(by_id[bookie].port, other, range(4))
    by_id[b].stop()  # B's disk is gone: it never comes back
    wait_for(what=f"{b} unregistered", predicate=lambda: b not in registered_bookies(zkstore.registration))

    for args in (["--all"], []):  # the lone copy is read with or without --all
        r = bkctl(uri, "--json", "ledger", "fsck", *args, str(LEDGER))
        assert r.returncode == 9, (r.stdout, r.stderr)
        found = one(r.stdout)
        assert (found["kind"], found["lost_entries"], found["missing"]) == ("data_lost", [[5, 5]], {b: [[0, N - 1]]})
        assert found["lost"] == [
            {
                "first_entry_id": 5,
                "last_entry_id": 5,
                "bookies": [a, b],
                "cause": f"its only copy, on {a}, fails its digest; {b} is not live",
            }
        ]
    human = bkctl(uri, "ledger", "fsck")  # for people: the two ledgers that only miss B's copies in one line
    assert human.returncode == 9 and f"entry 5 ({a}, {b}): its only copy, on {a}, fails its digest" in human.stdout
    assert f"bookie {b} holds none of its 2 ledgers' entries: it is not live" in human.stdout, human.stdout
    assert len(human.stdout.splitlines()) == 2 and "checked 3 ledgers" in human.stderr

    fixed = bkctl(uri, "--json", "ledger", "fsck", "--fix", "mark", "--force", str(LEDGER))
    assert fixed.returncode == 9 and one(fixed.stdout)["fix"]["status"] == "applied", fixed.stdout
    assert zkstore.underreplication.get(LEDGER).replicas == (b,)

    _proc, log = ar_daemon("ar-lost", "auditorPeriodicBookieCheckInterval=0", "auditorPeriodicCheckInterval=0")
    wait_for(what="the mark handled", predicate=lambda: zkstore.underreplication.get(LEDGER) is None, timeout=120)
    assert zkstore.ledgers.read(LEDGER)[0].ensembles == ((0, (a, c)),)  # the swap is made
    for bookie, bad in ((a, "corrupt"), (c, "missing")):  # a good copy of every readable entry on each
        rows = json_lines(bkctl(uri, "--json", "ledger", "read", str(LEDGER), "--bookie", bookie).stdout)
        good = {r["entry_id"]: r["payload"] for r in rows if r["status"] == "ok"}
        assert good == {e: payload(LEDGER, e).decode() for e in range(N) if e != 5}, bookie
        assert [(r["entry_id"], r["status"]) for r in rows if r["status"] != "ok"] == [(5, bad)]

    status = json.loads(bkctl(uri, "--json", "autorecovery", "status").stdout)
    (record,) = status["lost_entries"]
    assert (record["ledger_id"], record["entries"], record["by"]) == (LEDGER, 1, "ar-lost:3181")
    assert record["runs"][0]["cause"] == f"its only copy, on {a}, fails its digest"
    text = bkctl(uri, "autorecovery", "status").stdout
    assert f"ledger {LEDGER}: entry 5 lost" in text
    assert "re-replication failed" not in log.read_text()  # not retried: done once, the loss recorded

    again = bkctl(uri, "--json", "ledger", "fsck", "--all", "--fix", "mark", "--force", str(LEDGER))
    doc = one(again.stdout)
    assert again.returncode == 9 and doc["kind"] == "data_lost" and doc["lost_entries"] == [[5, 5]]
    assert doc["recorded"] == "autorecovery (ar-lost:3181) recorded 1 of them lost, the rest repaired"
    assert "fix" not in doc and zkstore.underreplication.get(LEDGER) is None  # nothing left to copy: no mark


def test_recover_and_decommission_go_past_a_lost_entry_and_record_it(bookie_cluster, metadata_uri, zkstore):
    """`recover` and `decommission` as the worker: every readable entry copied, the swap made, the
    lost entry recorded and reported (exit 9), never a ledger left whole for one entry."""
    from bkctl.wire.autorecovery.lostentries import read_records
    from bkctl.wire.metadata.store import registered_bookies

    uri = metadata_uri
    procs = bookie_cluster(3)
    by_id = {p.bookie_id: p for p in procs}
    a, b, c = sorted(by_id)
    recovered, decommissioned = 3001, 3002
    for lid in (recovered, decommissioned):
        zkstore.ledgers.create(closed_metadata(lid, [(0, [a, b])], N - 1, 2), ledger_id=lid)
        put(by_id[a].port, lid, range(N), flipped=[5])
        put(by_id[b].port, lid, range(N))
    by_id[b].stop()  # B's disk is gone: it never comes back
    wait_for(what=f"{b} unregistered", predicate=lambda: b not in registered_bookies(zkstore.registration))

    plan = bkctl(uri, "--json", "decommission", b, "--dry-run")  # fsck's rule: A's lone copy is read
    assert plan.returncode == 9, (plan.stdout, plan.stderr)
    doc = json.loads(plan.stdout)
    assert sorted(r["ledger_id"] for r in doc["lost"]) == [recovered, decommissioned]
    assert all("entry 5" in r["reason"] and "fails its digest" in r["reason"] for r in doc["lost"])
    assert all(row["data_lost"] for row in doc["ledgers"]) and "would lose data" in plan.stderr
    text = bkctl(uri, "decommission", b, "--dry-run")
    assert text.returncode == 9 and f"  {recovered}: " in text.stdout and "fails its digest" in text.stdout

    r = bkctl(uri, "--json", "recover", b, "--ledger", str(recovered), "--force")
    assert r.returncode == 9, (r.stdout, r.stderr)
    doc = json.loads(r.stdout)
    assert doc["totals"]["lost_entries"] == 1 and doc["totals"]["recovered"] == 1
    assert doc["ledgers"][0]["entries_copied"] == N - 1 and "1 entry had no good copy" in r.stderr
    assert zkstore.ledgers.read(recovered)[0].ensembles == ((0, (a, c)),)  # the swap is made

    d = bkctl(uri, "--json", "decommission", b, "--force")
    assert d.returncode == 9, (d.stdout, d.stderr)
    doc = json.loads(d.stdout)
    assert doc["lost_entries"] == 1 and doc["entries_copied"] == N - 1 and doc["cookie_deleted"]
    assert zkstore.ledgers.read(decommissioned)[0].ensembles == ((0, (a, c)),)
    records = read_records(zkstore)
    for lid in (recovered, decommissioned):
        assert records[lid].entry_ids() == {5}
        rows = json_lines(bkctl(uri, "--json", "ledger", "read", str(lid), "--bookie", c).stdout)
        good = {r["entry_id"]: r["payload"] for r in rows if r["status"] == "ok"}
        assert good == {e: payload(lid, e).decode() for e in range(N) if e != 5}
