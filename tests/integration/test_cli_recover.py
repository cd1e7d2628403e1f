"""bkctl recover and decommission against real bookied processes: a bookie's data destroyed, every
entry back to Qw live replicas (checked on each bookie over the wire), dry runs, prompts, partial failure."""

from __future__ import annotations

import json
import shutil
import time

from bkctl.wire.rebalance.executor import RunRecord, Throttle
from tests.support.cli import BKCTL, REPO, env_for, json_lines, ok, one_line_error
from tests.support.cli import bkctl_bytes as bkctl
from tests.support.ledgers import assert_fully_replicated, make_ledger, most_named
from tests.support.terminal import ended


def destroy(proc) -> None:
    """Kill a bookie and wipe its journal and ledger directories; it stays down."""
    proc.kill()
    for d in (proc.journal_dir, proc.ledger_dir):
        shutil.rmtree(d, ignore_errors=True)


def snapshot(zkstore, ids):
    return {lid: zkstore.ledgers.read_bytes(lid)[0] for lid in ids}


def test_recover_a_destroyed_bookie(bookie_cluster, metadata_uri, zkstore, writer):
    procs = bookie_cluster(5)
    uri = metadata_uri
    ports = {p.bookie_id: p.port for p in procs}
    closed_a = make_ledger(writer, 4, 2, entries=300)
    closed_b = make_ledger(writer, 4, 3, entries=80, digest_type="mac", password=b"pw")
    still_open = make_ledger(writer, 4, 2, entries=120, close=False)
    md_a, _ = zkstore.ledgers.read(closed_a)
    in_all = set(md_a.last_ensemble)
    for lid in (closed_b, still_open):
        in_all &= set(zkstore.ledgers.read(lid)[0].bookies)
    victim_id = sorted(in_all)[0]  # 4 of 5 bookies each: at least two are in all three
    victim = next(p for p in procs if p.bookie_id == victim_id)
    elsewhere = make_ledger(writer, 3, 2, entries=20)
    ids = sorted([closed_a, closed_b, still_open, elsewhere])
    on_victim = [lid for lid in ids if victim_id in zkstore.ledgers.read(lid)[0].bookies]
    assert {closed_a, closed_b, still_open} <= set(on_victim)
    destroy(victim)
    before = snapshot(zkstore, ids)

    plan = json.loads(ok(bkctl(uri, "--json", "recover", victim_id, "--dry-run")))
    assert snapshot(zkstore, ids) == before  # the dry run changed nothing
    assert plan["dry_run"] is True and plan["bookies"] == [victim_id]
    assert [r["ledger_id"] for r in plan["ledgers"]] == on_victim
    assert {r["status"] for r in plan["ledgers"]} == {"planned"}
    by_id = {r["ledger_id"]: r for r in plan["ledgers"]}
    assert by_id[still_open]["closed_first"] is True and by_id[closed_a]["closed_first"] is False
    [frag] = by_id[closed_a]["fragments"]
    assert (frag["first_entry_id"], frag["last_entry_id"], frag["lost"], frag["entries"]) == (0, 299, [victim_id], 150)
    assert frag["replacements"][victim_id] not in md_a.last_ensemble
    assert by_id[still_open]["fragments"][-1]["last_entry_id"] is None  # open: its end is not known yet
    human = ok(bkctl(uri, "recover", victim_id, "--dry-run"))
    assert "nothing changed" in human and str(closed_a) in human

    refused = bkctl(uri, "recover", victim_id)  # not a terminal, no --force
    assert refused.returncode == 2 and b"--force" in refused.stderr
    assert snapshot(zkstore, ids) == before

    done = json.loads(ok(bkctl(uri, "--json", "recover", victim_id, "--force")))
    assert done["totals"]["recovered"] == len(on_victim) and done["totals"]["failed"] == 0
    assert done["totals"]["entries_copied"] >= 150 + 60
    assert {r["ledger_id"]: r["status"] for r in done["ledgers"]} == {lid: "recovered" for lid in on_victim}
    assert {r["ledger_id"] for r in done["ledgers"] if r["closed_first"]} == {still_open}
    live = {b: port for b, port in ports.items() if b != victim_id}
    counts = {lid: assert_fully_replicated(zkstore, live, lid, {victim_id}) for lid in ids}
    assert counts == {closed_a: 300, closed_b: 80, still_open: 120, elsewhere: 20}
    for lid, n in counts.items():  # and through the client, every entry as written
        entries = json_lines(ok(bkctl(uri, "--json", "ledger", "read", lid)))
        assert [e["payload"] for e in entries] == [f"e{lid}-{i}" for i in range(n)]

    again = json.loads(ok(bkctl(uri, "--json", "recover", victim_id, "--force")))
    assert again["totals"] == {
        "ledgers": 0,
        "recovered": 0,
        "planned": 0,
        "skipped": 0,
        "failed": 0,
        "entries_copied": 0,
        "lost_entries": 0,
    }


def test_recover_prompts_on_a_terminal_and_skips_open_ledgers(bookie_cluster, metadata_uri, zkstore, writer):
    import pexpect

    procs = bookie_cluster(4)
    uri = metadata_uri
    open_lid = make_ledger(writer, 4, 2, entries=10, close=False)
    closed_lid = make_ledger(writer, 3, 2, entries=30)
    md, _ = zkstore.ledgers.read(closed_lid)
    victim = next(p for p in procs if p.bookie_id == md.last_ensemble[0])
    target = next(p.bookie_id for p in procs if p.bookie_id not in md.last_ensemble)
    destroy(victim)
    before = snapshot(zkstore, [open_lid, closed_lid])

    child = pexpect.spawn(
        BKCTL[0],
        [*BKCTL[1:], "recover", victim.bookie_id],
        env=env_for(uri),
        cwd=str(REPO),
        timeout=60,
        encoding="utf-8",
    )
    child.expect(r"Re-replicate 2 ledgers off")
    child.sendline("n")
    child.expect(pexpect.EOF)
    assert ended(child).exitstatus == 1
    assert snapshot(zkstore, [open_lid, closed_lid]) == before

    doc = json.loads(
        ok(bkctl(uri, "--json", "recover", victim.bookie_id, "--skip-open-ledgers", "--target", target, "--force"))
    )
    status = {r["ledger_id"]: r["status"] for r in doc["ledgers"]}
    assert status == {open_lid: "skipped", closed_lid: "recovered"}
    [frag] = next(r for r in doc["ledgers"] if r["ledger_id"] == closed_lid)["fragments"]
    assert frag["replacements"] == {victim.bookie_id: target}
    assert zkstore.ledgers.read(open_lid)[0].is_open  # left alone
    live = {p.bookie_id: p.port for p in procs if p is not victim}
    assert assert_fully_replicated(zkstore, live, closed_lid, {victim.bookie_id}) == 30

    bad_target = bkctl(uri, "recover", victim.bookie_id, "--target", victim.bookie_id, "--force")
    assert bad_target.returncode == 2
    assert bkctl(uri, "recover", "not/a bookie", "--force").returncode == 2


def test_one_unrecoverable_ledger_does_not_stop_the_others(bookie_cluster, metadata_uri, zkstore, writer):
    procs = bookie_cluster(6)
    uri = metadata_uri
    fragile = make_ledger(writer, 4, 2, entries=40)
    md, _ = zkstore.ledgers.read(fragile)
    # two neighbours in the ensemble: every 4th entry had both of its copies on them
    lost = list(md.last_ensemble[:2])
    sturdy = None
    for _attempt in range(20):
        lid = make_ledger(writer, 4, 3, entries=40, tag="s")
        if set(lost) <= set(zkstore.ledgers.read(lid)[0].last_ensemble):
            sturdy = lid
            break
    assert sturdy is not None
    for p in procs:
        if p.bookie_id in lost:
            destroy(p)
    r = bkctl(uri, "--json", "recover", *lost, "--force")
    assert r.returncode == 1, r.stderr
    assert len(r.stderr.decode().strip().splitlines()) == 1
    doc = json.loads(r.stdout)
    status = {x["ledger_id"]: x for x in doc["ledgers"]}
    assert status[fragile]["status"] == "failed" and "entry 0 " in status[fragile]["error"]
    assert status[sturdy]["status"] == "recovered"
    assert doc["totals"]["failed"] >= 1
    live = {p.bookie_id: p.port for p in procs if p.bookie_id not in lost}
    assert assert_fully_replicated(zkstore, live, sturdy, set(lost)) == 40
    assert set(lost) <= set(zkstore.ledgers.read(fragile)[0].bookies)  # untouched, still names them


def test_decommission(bookie_cluster, metadata_uri, zkstore, writer):
    procs = bookie_cluster(4)
    uri = metadata_uri
    lids = [make_ledger(writer, 3, 2, entries=50) for _ in range(3)]
    lids.append(make_ledger(writer, 3, 2, entries=25, close=False))
    victim = most_named(zkstore, lids, procs)
    victim_id = victim.bookie_id
    used_victim = {lid for lid in lids if victim_id in zkstore.ledgers.read(lid)[0].bookies}

    running = bkctl(uri, "decommission", victim_id, "--force")
    assert "stop it" in one_line_error(running, 4)
    running_plan = json.loads(ok(bkctl(uri, "--json", "decommission", victim_id, "--dry-run")))
    assert running_plan["registered"] and sorted(r["ledger_id"] for r in running_plan["ledgers"]) == sorted(used_victim)
    assert "is registered (running): stop it" in ok(bkctl(uri, "decommission", victim_id, "--dry-run"))
    victim.stop()  # graceful: its registration goes at once
    deadline = time.monotonic() + 30
    while zkstore.registration.is_registered(victim_id):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert bkctl(uri, "decommission", victim_id).returncode == 2  # no terminal, no --force
    assert zkstore.cookies.get(victim_id) is not None

    refused = bkctl(uri, "decommission", victim_id, "--force", "--daemons")  # no auditor is elected
    assert "no auditor" in one_line_error(refused, 4)
    assert "no auditor" in one_line_error(bkctl(uri, "decommission", victim_id, "--dry-run", "--daemons"), 4)
    before = snapshot(zkstore, lids)
    # the global --timeout is ZooKeeper's, below a second too; the plan names every ledger and replacement
    plan = json.loads(ok(bkctl(uri, "--timeout", "0.5", "--json", "decommission", victim_id, "--dry-run")))
    assert plan["dry_run"] and plan["mode"] == "local" and plan["cookie_deleted"] is False
    assert sorted(r["ledger_id"] for r in plan["ledgers"]) == sorted(used_victim)
    assert {r["status"] for r in plan["ledgers"]} == {"planned"}
    assert all(f["replacements"] for r in plan["ledgers"] for f in r["fragments"])
    assert snapshot(zkstore, lids) == before and zkstore.cookies.get(victim_id) is not None
    assert "dry run" in ok(bkctl(uri, "decommission", victim_id, "--dry-run"))
    # one mover at a time: a rebalance running (here a record left by one killed on another host) refuses it
    zkstore.rebalance.claim(RunRecord("rebalance", "host-b", 4242, 1.7e9, Throttle(), session_timeout=8.0).encode())
    refused = one_line_error(bkctl(uri, "decommission", victim_id, "--force"), 4)
    assert "a rebalance (pid 4242 on host-b" in refused and "session expires, in at most 8 s" in refused
    assert snapshot(zkstore, lids) == before
    zkstore.rebalance.drop_running()
    doc = json.loads(ok(bkctl(uri, "--json", "decommission", victim_id, "--force")))
    assert doc["bookie_id"] == victim_id and doc["cookie_deleted"] is True and doc["remaining_ledgers"] == []
    assert doc["mode"] == "local"
    assert len(doc["ledgers"]) == len(used_victim) >= 3
    assert zkstore.cookies.get(victim_id) is None
    live = {p.bookie_id: p.port for p in procs if p is not victim}
    for lid in lids:
        md, _ = zkstore.ledgers.read(lid)
        assert victim_id not in md.bookies
        # the open ledger is closed (recovered) only if it used the victim
        assert md.is_closed == (lid != lids[-1] or lids[-1] in used_victim)
        if md.is_closed:
            assert assert_fully_replicated(zkstore, live, lid, {victim_id}) == (50 if lid != lids[-1] else 25)

    unknown = bkctl(uri, "decommission", "127.0.0.1:1", "--force")  # no cookie, in no ledger
    assert unknown.returncode == 3 and "unknown bookie 127.0.0.1:1" in unknown.stderr.decode()
