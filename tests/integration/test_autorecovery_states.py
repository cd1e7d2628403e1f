"""The views tell what is happening (issue 36), with real ZooKeeper, real bookieds and a real
`bkctl autorecovery run` daemon: ledgers stuck after failed attempts are 'held after a failed
attempt', not 'being re-replicated'; an open ledger in its grace period waits for its writer;
both change as soon as the bookies come back; workers are named by bookie id; a decommissioned
bookie is not lost, a bookie named by ledgers without a cookie is said so; the daemon says when
the cluster's lostBookieRecoveryDelay wins over its own."""

from __future__ import annotations

import json

import pytest

from tests.support.bookieproc import registration_sessions, wait_registered
from tests.support.cli import bkctl, ok
from tests.support.ledgers import make_ledger, most_named
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def status(uri) -> dict:
    return json.loads(ok(bkctl(uri, "--json", "autorecovery", "status")))


def lines(uri, *args) -> list[dict]:
    return [json.loads(line) for line in ok(bkctl(uri, "--json", "autorecovery", *args)).splitlines()]


def test_stuck_and_open_ledgers_say_what_they_wait_for_until_the_bookies_come_back(
    bookie_cluster, metadata_uri, zkstore, writer, ar_daemon
):
    uri = metadata_uri
    procs = bookie_cluster(4)
    zkstore.underreplication.set_lost_bookie_recovery_delay(0)
    closed = [make_ledger(writer, 3, 2, entries=5) for _ in range(5)]
    still_open = make_ledger(writer, 3, 2, entries=5, close=False)
    _proc, log_path = ar_daemon(
        "ar-states",
        "lostBookieRecoveryDelay=15",
        "lockReleaseOfFailedLedgerGracePeriod=300000",
        "openLedgerRereplicationGracePeriod=600000",
        "auditorPeriodicBookieCheckInterval=0",
        "auditorPeriodicCheckInterval=0",
    )
    wait_for(what="the auditor", predicate=lambda: zkstore.auditor.current() == "ar-states:3181", timeout=60)
    # -o lostBookieRecoveryDelay=15 with the cluster at 0: the start says which one is used
    wait_for(
        what="the delay line",
        predicate=lambda: "lostBookieRecoveryDelay: the cluster's 0s" in log_path.read_text(),
        timeout=30,
    )
    assert "is used, not this daemon's 15s" in log_path.read_text()

    # two of four bookies gone, E=3: no ledger can get a full ensemble again
    open_md = zkstore.ledgers.read(still_open)[0]
    victims = [p for p in procs if p.bookie_id in open_md.bookies][:2]
    for p in victims:
        p.stop()
    every = closed + [still_open]

    def states():
        return {r["ledger_id"]: r for r in status(uri)["ledgers"]}

    seen: dict = {}

    def settled() -> bool:
        seen.clear()
        seen.update({lid: r["state"] for lid, r in states().items()})
        return seen == {**{lid: "held-failed" for lid in closed}, still_open: "waiting-grace"}

    wait_for(
        what=lambda: f"every closed ledger {closed} to fail and the open one {still_open} to wait; last seen: {seen}",
        predicate=settled,
        timeout=150,
    )
    rows = states()
    for lid in closed:
        r = rows[lid]
        assert r["worker"] == "ar-states:3181" and r["attempts"] and r["attempts"][-1]["reason"]
        assert r["attempts"][-1]["worker"] == "ar-states:3181" and r["until"] > r["attempts"][-1]["at"]
        assert r["text"].startswith("held after a failed attempt by ar-states:3181: ")
    grace = rows[still_open]
    assert grace["until"] - grace["since"] == 600_000 and "waits for its writer" in grace["text"]
    # bookie ids, never the host: the lock holds the worker's bookie id
    held = lines(uri, "query-status")
    assert sorted(r["ledger_id"] for r in held) == sorted(every)
    assert {(r["worker"], r["lock"]) for r in held} == {("ar-states:3181", "ar-states:3181")}
    assert {r["worker"] for r in lines(uri, "underreplicated")} == {"ar-states:3181"}
    human = ok(bkctl(uri, "autorecovery", "status"))
    assert "being re-replicated" not in human and "held after a failed attempt" in human

    # the bookies come back: the held ledgers are looked at again at once, not after 300 s / 600 s
    before = registration_sessions(uri, [p.bookie_id for p in victims])
    for p in victims:
        p.start()
    wait_registered(uri, [p.bookie_id for p in victims], replacing=before)
    wait_for(
        what="the marks to go once the bookies are back",
        predicate=lambda: zkstore.underreplication.count() == 0 and not zkstore.underreplication.locks(),
        timeout=60,
    )
    doc = status(uri)
    assert doc["underreplicated"] == 0 and doc["ledgers"] == [] and doc["lost_bookies"] == []
    assert "registered since it was held" in log_path.read_text()
    assert not zkstore.ledgers.read(still_open)[0].is_closed  # its bookie came back: never fenced


def test_a_decommissioned_bookie_is_not_lost_and_one_without_a_cookie_is_said_so(
    bookie_cluster, metadata_uri, zkstore, writer, ar_daemon
):
    uri = metadata_uri
    procs = bookie_cluster(4)
    zkstore.underreplication.set_lost_bookie_recovery_delay(0)
    ids = [make_ledger(writer, 3, 2, entries=5) for _ in range(3)]
    ar_daemon("ar-decom", "auditorPeriodicBookieCheckInterval=0", "auditorPeriodicCheckInterval=0")
    wait_for(what="the auditor", predicate=lambda: zkstore.auditor.current() == "ar-decom:3181", timeout=60)
    victim = most_named(zkstore, ids, procs)
    victim.stop()
    wait_for(
        what="the auditor to see it lost",
        predicate=lambda: [b for b in status(uri)["lost_bookies"] if b["seen_by_auditor"]],
        timeout=60,
    )
    r = bkctl(uri, "decommission", victim.bookie_id, "--force", "--wait", "120")
    assert r.returncode == 0, r.stderr
    assert zkstore.cookies.get(victim.bookie_id) is None
    # its cookie gone and no ledger naming it: not lost (it stayed listed until a trigger-audit)
    wait_for(
        what="the decommissioned bookie to leave the lost bookies",
        predicate=lambda: status(uri)["lost_bookies"] == [],
        timeout=30,
    )
    assert victim.bookie_id not in ok(bkctl(uri, "autorecovery", "status"))

    # a bookie still named by ledgers whose cookie was deleted: lost, and said to have no cookie
    ok(bkctl(uri, "autorecovery", "lost-bookie-delay", "600"))
    other = most_named(zkstore, ids, [p for p in procs if p is not victim])
    other.stop()
    zkstore.cookies.delete(other.bookie_id)

    def listed():
        return {b["bookie_id"]: b for b in status(uri)["lost_bookies"]}

    wait_for(what="the auditor to list it", predicate=lambda: other.bookie_id in listed(), timeout=60)
    row = listed()[other.bookie_id]
    assert row["cookie"] is False and row["why"] == "named by ledgers, no cookie" and row["named_by"] >= 1
    assert "named by ledgers, no cookie" in ok(bkctl(uri, "autorecovery", "status"))
