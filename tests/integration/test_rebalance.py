"""bkctl rebalance and drain against real bookied processes: replicas moved between live bookies
with every entry kept on Qw bookies throughout (checked on each bookie over the wire), kill -9 of
bkctl and of a target, ledgers deleted, marked or locked meanwhile, racks changed, and the sources'
copies collected by the bookies' over-replicated-ledger GC."""

from __future__ import annotations

import json
import signal
import subprocess
import time

from bkctl.wire.codecs import v2
from bkctl.wire.codecs.protocol import RC
from tests.support.bookieproc import WireClient, start_bookies
from tests.support.cli import BKCTL, env_for, json_lines, ok, one_line_error
from tests.support.cli import bkctl as bkctl_text
from tests.support.cli import bkctl_bytes as bkctl
from tests.support.ledgers import assert_fully_replicated, holds_entry, make_ledger
from tests.support.waiting import wait_for

#: the bookies' GC looks for over-replicated ledgers every second (a day by default)
QUICK_GC = {"gcWaitTime": 1000, "gcOverreplicatedLedgerWaitTime": 1000}


def cluster(bookies, uri, n, first=0, **settings):
    procs = [bookies(f"b{first + i}", **settings).serve_http() for i in range(n)]
    return start_bookies(procs, uri)


def fill(writer, count, *, sizes=(40, 400)):
    """``count`` closed E2/Qw2 ledgers of ``sizes[0]``..``sizes[1]`` entries each."""
    lo, hi = sizes
    return [make_ledger(writer, 2, 2, entries=lo + (i * 37) % (hi - lo + 1)) for i in range(count)]


def ensembles_sane(zkstore, ids):
    for lid in ids:
        md, _ = zkstore.ledgers.read(lid)
        for _first, ensemble in md.ensembles:
            assert len(set(ensemble)) == len(ensemble), (lid, md.ensembles)


def all_whole(zkstore, procs, ids, gone=frozenset()):
    ports = {p.bookie_id: p.port for p in procs if p.bookie_id not in gone}
    return {lid: assert_fully_replicated(zkstore, ports, lid, set(gone)) for lid in ids}


def launch(uri, *args) -> subprocess.Popen:
    """``bkctl ARGS`` running on its own, its output to be read as it comes (no terminal)."""
    return subprocess.Popen(
        [*BKCTL, *args], env=env_for(uri), stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
    )


def slow_rebalance(bookies, uri, zkstore, writer):
    """Three bookies with 18 ledgers, two new ones, and a rebalance onto them at 20 kB/s (its
    process: ``--json``): ``(old bookies, ids, entries each, every bookie, the run)``."""
    old = cluster(bookies, uri, 3)
    ids = fill(writer, 18, sizes=(300, 300))
    counts = all_whole(zkstore, old, ids)
    procs = old + cluster(bookies, uri, 2, first=3)
    run = launch(uri, "--json", "rebalance", "--force", "--max-rate", "20k", "--concurrency", "2")
    return old, ids, counts, procs, run


def until_a_move(run: subprocess.Popen) -> list[dict]:
    """The events of a ``--json`` run read as they come, up to its first move's."""
    seen: list[dict] = []
    assert run.stdout is not None
    for line in run.stdout:
        seen.append(json.loads(line))
        if seen[-1]["event"] == "move":
            break
    return seen


def copy_begun(procs, planned: dict) -> bool:
    """Whether the first entry of a ``planned`` move's first segment is on every target already."""
    ports = {p.bookie_id: p.port for p in procs}
    return all(
        holds_entry(ports[replica["target"]], planned["ledger_id"], planned["segments"][0])
        for replica in planned["moves"]
    )


def events(text):
    return [e for e in json_lines(text) if isinstance(e, dict)]


def test_rebalance_spreads_data_onto_new_bookies_and_the_sources_collect_their_copies(
    bookies, metadata_uri, zkstore, writer
):
    uri = metadata_uri
    old = cluster(bookies, uri, 3, **QUICK_GC)
    ids = fill(writer, 24)
    counts = all_whole(zkstore, old, ids)
    new = cluster(bookies, uri, 2, first=3, **QUICK_GC)
    procs = old + new
    before = {lid: zkstore.ledgers.read(lid) for lid in ids}

    plan = events(ok(bkctl(uri, "--json", "rebalance", "--dry-run")))
    assert {lid: zkstore.ledgers.read(lid) for lid in ids} == before  # a dry run changes nothing
    head = plan[0]
    assert head["event"] == "plan" and head["dry_run"] is True and head["moves"] > 0
    use = {b["bookie"]: b for b in head["bookies"]}
    assert use[new[0].bookie_id]["before"] == 0 and use[new[0].bookie_id]["after"] > 0
    planned = [e for e in plan if e["event"] == "planned"]
    assert len(planned) == head["moves"] and plan[-1]["event"] == "summary"
    human = ok(bkctl(uri, "rebalance", "--dry-run"))
    assert "dry run: nothing changed" in human and new[1].bookie_id in human

    refused = bkctl(uri, "rebalance")  # not a terminal, no --force
    assert "--force" in one_line_error(refused, 2)

    done = events(ok(bkctl(uri, "--json", "rebalance", "--force", "--concurrency", "3")))
    moved = [e for e in done if e["event"] == "move"]
    assert moved and {e["outcome"] for e in moved} == {"moved"}
    summary = done[-1]
    assert summary["event"] == "summary" and summary["failed"] == 0 and summary["moved"] == len(moved)
    assert summary["outside_after"] == []
    ensembles_sane(zkstore, ids)
    assert all_whole(zkstore, procs, ids) == counts  # every entry on every bookie of its write set
    for lid in ids[:6]:  # and through the client, as written
        entries = json_lines(ok(bkctl(uri, "--json", "ledger", "read", lid)))
        assert [e["payload"] for e in entries] == [f"e{lid}-{i}" for i in range(counts[lid])]
    assert zkstore.underreplication.count() == 0

    again = events(ok(bkctl(uri, "--json", "rebalance", "--dry-run")))
    assert again[0]["moves"] == 0 and again[0]["outside_after"] == []  # balanced: nothing more to move

    # each source's copy is over-replicated now: its bookie deletes it (and keeps the others)
    first = moved[0]
    source = first["moves"][0]["source"]
    port = next(p.port for p in procs if p.bookie_id == source)
    client = WireClient(port)
    try:
        deadline = time.monotonic() + 30
        while client.v2(v2.ReadRequest(2, 0, first["ledger_id"], 0)).rc == RC.EOK:
            assert time.monotonic() < deadline, "the source never collected its moved copy"
            time.sleep(0.2)
    finally:
        client.close()
    assert all_whole(zkstore, procs, ids) == counts  # nothing it still holds for others went


def test_drain_empties_a_running_bookie_and_decommissions_it_once_stopped(bookies, metadata_uri, zkstore, writer):
    uri = metadata_uri
    procs = cluster(bookies, uri, 4)
    ids = fill(writer, 12, sizes=(20, 60))
    open_handle = writer.create(3, 2, 2)  # its last segment is on the victim, and one bookie is free
    still_open = open_handle.ledger_id
    open_handle.add_many(f"e{still_open}-{i}".encode() for i in range(30))
    open_on = open_handle.metadata.ensembles[0][1]
    victim = max(
        (p for p in procs if p.bookie_id in open_on),
        key=lambda p: sum(p.bookie_id in zkstore.ledgers.read(lid)[0].bookies for lid in ids),
    )
    on_victim = [lid for lid in ids if victim.bookie_id in zkstore.ledgers.read(lid)[0].bookies]
    assert on_victim

    plan = events(ok(bkctl(uri, "--json", "drain", victim.bookie_id, "--dry-run")))
    assert plan[0]["event"] == "plan" and plan[0]["moves"] == len(on_victim)
    assert [u["ledger_id"] for u in plan[0]["unmovable"]] == [still_open]  # the writer's last segment
    assert victim.bookie_id in zkstore.registration.writable_bookies()  # a dry run leaves it writable

    stuck = bkctl(uri, "--json", "drain", victim.bookie_id, "--force", "--wait", "1")
    assert stuck.returncode == 1
    report = events(stuck.stdout.decode())[-1]
    assert report["drained"] is False and report["read_only_set"] is True
    assert [r["ledger_id"] for r in report["left"]] == [still_open]
    assert "writer" in report["left"][0]["reason"]
    assert victim.bookie_id in zkstore.registration.readonly_bookies()
    ensembles_sane(zkstore, ids)
    assert all(victim.bookie_id not in zkstore.ledgers.read(lid)[0].bookies for lid in ids)
    all_whole(zkstore, procs, ids, gone={victim.bookie_id})
    assert zkstore.underreplication.count() == 0

    open_handle.close()  # its writer closes it: drain finishes, then waits for the bookie to stop
    run = launch(uri, "--json", "drain", victim.bookie_id, "--force", "--decommission", "--wait", "60")
    try:
        deadline = time.monotonic() + 60
        while any(victim.bookie_id in zkstore.ledgers.read(lid)[0].bookies for lid in [*ids, still_open]):
            assert time.monotonic() < deadline and run.poll() is None, run.communicate()
            time.sleep(0.2)
        victim.kill(signal.SIGTERM)
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, err
    final = events(out.decode())[-1]
    assert final["drained"] is True and final["cookie_deleted"] is True
    assert zkstore.cookies.get(victim.bookie_id) is None
    all_whole(zkstore, procs, [*ids, still_open], gone={victim.bookie_id})


def test_drain_refuses_a_stopped_or_unknown_bookie(bookies, metadata_uri, zkstore, writer):
    uri = metadata_uri
    procs = cluster(bookies, uri, 3, zkTimeout=4000)  # the killed one's registration goes in 4-6 s, not 10-12
    make_ledger(writer, 3, 2, entries=5)
    procs[2].kill()
    deadline = time.monotonic() + 30
    while zkstore.registration.is_registered(procs[2].bookie_id):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    err = one_line_error(bkctl(uri, "drain", procs[2].bookie_id, "--force"), 4)
    assert "decommission" in err
    assert "unknown bookie" in one_line_error(bkctl(uri, "drain", "127.0.0.1:9", "--force"), 3)


def test_kill_9_of_bkctl_mid_rebalance_loses_no_copy_and_a_rerun_finishes(bookies, metadata_uri, zkstore, writer):
    uri = metadata_uri
    old, ids, counts, procs, run = slow_rebalance(bookies, uri, zkstore, writer)
    try:
        seen = until_a_move(run)  # one move done, the next ones copying: kill -9 now
    finally:
        run.kill()
        run.wait()
    planned, first_moves = seen[0], [seen[-1]]
    assert planned["event"] == "plan" and first_moves[0]["outcome"] == "moved"
    ensembles_sane(zkstore, ids)
    assert all_whole(zkstore, procs, ids) == counts  # no ledger is a copy short
    done = events(ok(bkctl(uri, "--json", "rebalance", "--force")))
    assert done[0]["event"] == "plan" and done[0]["resumed"]["moves_planned"] >= 1  # the kept plan, gone on with
    moved_again = [
        (e["ledger_id"], m["source"])
        for e in done
        if e["event"] == "move" and e["outcome"] == "moved"
        for m in e["moves"]
    ]
    for m in first_moves[0]["moves"]:  # no replica moved twice: none leaves where the first run put it
        assert (first_moves[0]["ledger_id"], m["target"]) not in moved_again
    # the rerun ends where the kept plan said the first run would (whether a greedy plan can
    # bring every bookie within the band depends on the writer's random placement: not asked)
    assert done[-1]["failed"] == 0 and done[-1]["outside_after"] == planned["outside_after"]
    ensembles_sane(zkstore, ids)
    assert all_whole(zkstore, procs, ids) == counts
    assert zkstore.rebalance.read() is None  # the run ended: nothing kept
    if not done[-1]["skipped"]:  # (a move whose lock the killed run's session still held is skipped)
        now = events(ok(bkctl(uri, "--json", "rebalance", "--dry-run")))[0]
        assert {b["bookie"]: b["before"] for b in now["bookies"]} == {
            b["bookie"]: b["after"] for b in planned["bookies"]
        }


def test_a_target_killed_mid_copy_fails_its_moves_and_loses_nothing(bookies, metadata_uri, zkstore, writer):
    uri = metadata_uri
    old = cluster(bookies, uri, 3)
    ids = fill(writer, 12, sizes=(300, 300))
    counts = all_whole(zkstore, old, ids)
    [target] = cluster(bookies, uri, 1, first=3)
    run = launch(uri, "--json", "rebalance", "--force", "--max-rate", "20k", "--concurrency", "1")
    seen: list[dict] = []
    try:
        assert run.stdout is not None
        for line in run.stdout:
            seen.append(json.loads(line))
            if seen[-1]["event"] == "move":
                break
        target.kill()  # kill -9 while the next copy runs
        out, _err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 1
    results = [e for e in [*seen, *events(out.decode())] if e["event"] == "move"]
    assert any(e["outcome"] == "failed" for e in results)
    moved = {e["ledger_id"] for e in results if e["outcome"] == "moved"}
    ensembles_sane(zkstore, ids)
    # the ledgers not moved are whole on their old bookies; those moved lost a copy with the
    # target's death (a bookie failure: autorecovery's to repair), never through the move
    assert all_whole(zkstore, old, [lid for lid in ids if lid not in moved]) == {
        lid: n for lid, n in counts.items() if lid not in moved
    }
    assert all(target.bookie_id not in zkstore.ledgers.read(lid)[0].bookies for lid in ids if lid not in moved)


def test_deleted_marked_and_locked_ledgers_are_left_alone(bookies, metadata_uri, zkstore, writer):
    uri = metadata_uri
    old = cluster(bookies, uri, 3)
    ids = fill(writer, 16, sizes=(200, 200))
    procs = old + cluster(bookies, uri, 2, first=3)
    planned = [
        e["ledger_id"] for e in events(ok(bkctl(uri, "--json", "rebalance", "--dry-run"))) if e["event"] == "planned"
    ]
    assert len(planned) >= 3
    deleted, marked, locked = planned[:3]
    writer.delete(deleted)
    zkstore.underreplication.mark(marked, ["127.0.0.1:9"])
    assert zkstore.underreplication.lock(locked, "a-replication-worker")
    try:
        done = events(ok(bkctl(uri, "--json", "rebalance", "--force")))
    finally:
        zkstore.underreplication.release(locked)
    by_id = {e["ledger_id"]: e for e in done if e["event"] == "move"}
    assert deleted not in by_id or by_id[deleted]["outcome"] == "skipped"
    assert by_id[marked]["outcome"] == "skipped" and "under-replicated" in by_id[marked]["reason"]
    assert by_id[locked]["outcome"] == "skipped" and "a-replication-worker" in by_id[locked]["reason"]
    assert zkstore.ledgers.read(marked) is not None
    alive = [lid for lid in ids if lid != deleted]
    ensembles_sane(zkstore, alive)
    all_whole(zkstore, procs, alive)


def test_fix_placement_after_racks_changed(bookies, metadata_uri, zkstore, writer, rack_map):
    """The rack map is ZooKeeper-wide: `rack_map` makes it this test's alone meanwhile (another
    test's dropping it once made every ledger non-adhering after the fix)."""
    uri = metadata_uri
    procs = cluster(bookies, uri, 4)
    ids = fill(writer, 16, sizes=(10, 30))
    # racks assigned after the data was written: the first ledger's two bookies share one
    x, y = zkstore.ledgers.read(ids[0])[0].ensembles[0][1]
    others = [p.bookie_id for p in procs if p.bookie_id not in (x, y)]
    for bookie, rack in ((x, "/r1"), (y, "/r1"), (others[0], "/r2"), (others[1], "/r2")):
        ok(bkctl(uri, "bookie", "rack", "set", bookie, "--rack", rack))
    failing = json_lines(ok(bkctl(uri, "--json", "ledger", "list", "--not-adhering", "--placement", "rack")))
    broken = {row["ledger_id"] for row in failing}
    assert ids[0] in broken

    plan = events(ok(bkctl(uri, "--json", "--placement", "rack", "rebalance", "--fix-placement", "--dry-run")))
    assert {e["ledger_id"] for e in plan if e["event"] == "planned"} == broken
    done = events(ok(bkctl(uri, "--json", "--placement", "rack", "rebalance", "--fix-placement", "--force")))
    assert {e["ledger_id"] for e in done if e["event"] == "move" and e["outcome"] == "moved"} == broken
    assert json_lines(ok(bkctl(uri, "--json", "ledger", "list", "--not-adhering", "--placement", "rack"))) == []
    ensembles_sane(zkstore, ids)
    all_whole(zkstore, procs, ids)


def test_drain_moves_an_open_ledgers_closed_segment_while_its_writer_goes_on(bookies, metadata_uri, zkstore, writer):
    uri = metadata_uri
    procs = cluster(bookies, uri, 4)
    handle = writer.create(2, 2, 2)
    lid = handle.ledger_id
    handle.add_many(f"e{lid}-{i}".encode() for i in range(50))
    first_ensemble = handle.metadata.ensembles[0][1]
    victim = next(p for p in procs if p.bookie_id == first_ensemble[0])
    # the writer's next adds to a read-only bookie fail: it changes its ensemble, leaving the
    # first segment closed on the victim while it goes on writing the second
    victim.admin("/api/v1/bookie/state/readonly", "PUT", {"readOnly": True})
    deadline = time.monotonic() + 30
    while victim.bookie_id not in zkstore.registration.readonly_bookies():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    handle.add_many(f"e{lid}-{i}".encode() for i in range(50, 80))
    md, _ = zkstore.ledgers.read(lid)
    assert len(md.ensembles) == 2 and victim.bookie_id not in md.ensembles[1][1]

    done = events(ok(bkctl(uri, "--json", "drain", victim.bookie_id, "--force")))
    assert done[-1]["drained"] is True and done[-1]["moved"] == 1
    handle.add_many(f"e{lid}-{i}".encode() for i in range(80, 100))  # the writer goes on ...
    handle.close()  # ... and closes over the moved segment (its write merges with the move's)
    md, _ = zkstore.ledgers.read(lid)
    assert md.is_closed and md.last_entry_id == 99 and victim.bookie_id not in md.bookies
    ensembles_sane(zkstore, [lid])
    assert all_whole(zkstore, procs, [lid], gone={victim.bookie_id}) == {lid: 100}
    entries = json_lines(ok(bkctl(uri, "--json", "ledger", "read", lid)))
    assert [e["payload"] for e in entries] == [f"e{lid}-{i}" for i in range(100)]


def test_a_ledger_deleted_or_marked_while_its_copy_runs_is_left_and_ctrl_c_leaves_no_half_move(
    bookies, metadata_uri, zkstore, writer
):
    uri = metadata_uri
    old = cluster(bookies, uri, 2)
    payload = b"x" * 1024
    ids = []
    for _ in range(4):
        lh = writer.create(2, 2, 2)
        lh.add_many([payload] * 200)  # 200 KiB: at 40k/s a copy takes 5 s
        lh.close()
        ids.append(lh.ledger_id)
    procs = old + cluster(bookies, uri, 2, first=2)
    run = launch(uri, "--json", "rebalance", "--force", "--max-rate", "40k", "--concurrency", "2")
    seen: list[dict] = []
    try:
        assert run.stdout is not None
        for line in run.stdout:
            seen.append(json.loads(line))
            if seen[-1]["event"] == "planned" and len([e for e in seen if e["event"] == "planned"]) == 2:
                break
        first_two = [e for e in seen if e["event"] == "planned"]
        marked, deleted = [e["ledger_id"] for e in first_two]
        # both copies under way: each ledger's first entry is on the bookie it moves to (copied
        # under its replication lock, so what follows happens during its move)
        for planned in first_two:
            wait_for(
                lambda planned=planned: copy_begun(procs, planned),
                what=f"ledger {planned['ledger_id']}'s copy to start",
                interval=0.1,
            )
        zkstore.underreplication.mark(marked, ["127.0.0.1:9"])
        writer.delete(deleted)
        for line in run.stdout:
            seen.append(json.loads(line))
            if len([e for e in seen if e["event"] == "move"]) == 2:
                break
        run.send_signal(signal.SIGINT)  # Ctrl-C while the next moves copy
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, err
    seen += events(out.decode())
    by_id = {e["ledger_id"]: e for e in seen if e["event"] == "move"}
    assert by_id[marked]["outcome"] == "abandoned" and "marked under-replicated during" in by_id[marked]["reason"]
    assert by_id[deleted]["outcome"] == "abandoned" and "deleted during" in by_id[deleted]["reason"]
    assert not zkstore.ledgers.exists(deleted)
    alive = [lid for lid in ids if lid != deleted]
    ensembles_sane(zkstore, alive)
    assert all_whole(zkstore, procs, alive) == dict.fromkeys(alive, 200)  # nothing half moved
    assert zkstore.underreplication.locks() == {}  # no lock left behind


def test_a_second_run_is_refused_and_cancel_stops_the_first_with_no_half_move(bookies, metadata_uri, zkstore, writer):
    uri = metadata_uri
    old, ids, counts, procs, run = slow_rebalance(bookies, uri, zkstore, writer)
    try:
        seen = until_a_move(run)  # moving, at 20 kB/s: it runs for a while yet
        second = bkctl(uri, "rebalance", "--force", "--max-rate", "1G")
        err = one_line_error(second, 4)
        assert "a rebalance (pid" in err and "is running" in err and "--cancel" in err and "20.0 KiB/s" in err
        assert "is running" in one_line_error(bkctl(uri, "drain", old[0].bookie_id, "--force"), 4)
        assert "stopped a rebalance" in ok(bkctl(uri, "rebalance", "--cancel"))
        out, err_bytes = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 1 and b"rebalance stopped: cancelled by" in err_bytes
    after = events(out.decode())
    assert after[-1]["event"] == "summary" and after[-1]["stopped"].startswith("cancelled by")
    moved = [e for e in [*seen, *after] if e["event"] == "move"]
    assert len(moved) < after[-1]["planned"]  # it stopped short
    ensembles_sane(zkstore, ids)
    assert all_whole(zkstore, procs, ids) == counts  # every ledger whole: no half move
    assert zkstore.rebalance.running() is None and zkstore.rebalance.read() is None
    assert zkstore.underreplication.locks() == {}
    assert "nothing to cancel" in one_line_error(bkctl(uri, "rebalance", "--cancel"), 3)


def test_a_drain_that_cannot_finish_says_the_bookie_is_left_read_only(bookies, metadata_uri, zkstore, writer):
    uri = metadata_uri
    procs = cluster(bookies, uri, 3)
    stuck = [make_ledger(writer, 3, 3, entries=10) for _ in range(2)]  # every bookie in each: nowhere to go
    victim = procs[1].bookie_id
    dry = bkctl_text(uri, "drain", victim, "--dry-run")
    assert dry.returncode == 1, dry.stderr
    for lid in stuck:
        assert f"{lid}: cannot move: no writable bookie outside its segment from entry 0" in dry.stdout
    assert "2 ledgers of" in dry.stderr and "cannot move now" in dry.stderr
    assert victim not in zkstore.registration.readonly_bookies()  # a dry run changes nothing

    done = bkctl_text(uri, "drain", victim, "--force", "--wait", "5")
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert f"{victim} is left read-only" in last and f"bkctl bookie readonly {victim} off" in last
    assert "0 ledgers moved, 2 ledgers still on it" in last
    assert "open ledgers wait" not in done.stderr  # closed ledgers: no writer to wait for
    assert victim in zkstore.registration.readonly_bookies()
    ok(bkctl(uri, "bookie", "readonly", victim, "off"))  # the one command that undoes it
    assert victim not in zkstore.registration.readonly_bookies()
    assert all_whole(zkstore, procs, stuck)
