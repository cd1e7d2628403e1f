"""bookied --salvage: a bookie that refuses to start (its journal directory damaged), holding
the only copies of some ledgers, served read-only under its old id; bookied's autorecovery
copies everything off it and every entry reads back as written."""

from __future__ import annotations

import time

from tests.support.cli import bkctl, json_lines, ok
from tests.support.ledgers import assert_fully_replicated, make_ledger, most_named
from tests.support.waiting import wait_for


def test_salvage_serves_a_bookie_that_will_not_start(bookie_cluster, bookies, metadata_uri, zkstore, writer, ar_daemon):
    procs = bookie_cluster(4)
    zkstore.underreplication.set_lost_bookie_recovery_delay(0)
    single = [make_ledger(writer, 1, 1, 1, entries=60) for _ in range(8)]  # one copy each
    double = [make_ledger(writer, 2, 2, 2, entries=30) for _ in range(3)]
    victim = most_named(zkstore, single, procs)
    vid = victim.bookie_id
    only_there = [lid for lid in single if vid in zkstore.ledgers.read(lid)[0].bookies]
    assert only_there
    victim.kill()  # kill -9: what its journal held and no entry log yet is salvaged too
    (victim.journal_dir / "current" / "VERSION").write_bytes(b"\x00garbage")
    assert victim.launch().wait(60) == 3  # refuses to start: exit 3
    assert "refusing to start" in victim.log_tail(50)

    before = bkctl(metadata_uri, "--json", "ledger", "fsck", *map(str, only_there))
    assert {f["kind"] for f in json_lines(before.stdout)} == {"data_lost"} and before.returncode == 8

    salvage = bookies("salvage")
    salvage.launch("--salvage", str(victim.base))
    salvage.wait_listening(time.monotonic() + 60)
    wait_for(what="the salvage registered", predicate=lambda: vid in zkstore.registration.readonly_bookies())
    assert "salvage: serving" in salvage.log_tail(50)
    served = bkctl(metadata_uri, "--json", "ledger", "read", only_there[0], "--bookie", vid)
    rows = json_lines(ok(served))  # straight from the salvaged bookie, each digest checked
    assert [(r["status"], r["payload"]) for r in rows] == [("ok", f"e{only_there[0]}-{i}") for i in range(60)]

    ar_daemon("ar-salvage", "auditorPeriodicBookieCheckInterval=0", "auditorPeriodicCheckInterval=0")
    every = single + double
    wait_for(
        what="every ledger off the salvaged bookie",
        predicate=lambda: not any(vid in zkstore.ledgers.read(lid)[0].bookies for lid in every),
        timeout=180,
    )
    wait_for(what="no marks left", predicate=lambda: zkstore.underreplication.count() == 0, timeout=60)
    live = {p.bookie_id: p.port for p in procs if p is not victim}
    for lid in every:
        n = assert_fully_replicated(zkstore, live, lid, {vid})
        entries = json_lines(ok(bkctl(metadata_uri, "--json", "ledger", "read", lid)))
        assert [e["payload"] for e in entries] == [f"e{lid}-{i}" for i in range(n)]
    salvage.stop()
    clean = bkctl(metadata_uri, "--json", "ledger", "fsck", "--all")
    assert clean.returncode == 0 and clean.stdout == "", clean.stdout
