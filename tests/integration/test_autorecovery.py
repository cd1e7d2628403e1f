"""Autorecovery with real ZooKeeper, real bookieds and real `bkctl autorecovery run` daemons:
a lost bookie is detected, its ledgers marked, re-replicated by the workers and unmarked,
without any operator command; the disable switch holds it back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.support.cli import bkctl_bytes as bkctl
from tests.support.cli import ok
from tests.support.ledgers import assert_fully_replicated, holds_entry, make_ledger, most_named
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def daemons(tmp_path, metadata_uri):
    """Start `bkctl autorecovery run` processes; each is stopped with SIGTERM and must exit 0."""
    procs: list[subprocess.Popen] = []

    def start(
        name: str, *settings: str, env: dict | None = None, session_timeout: float | None = None
    ) -> subprocess.Popen:
        log = open(tmp_path / f"autorecovery-{name}.log", "wb")
        args = [
            sys.executable,
            "-m",
            "bkctl",
            "-m",
            metadata_uri,
            "-v",
            # its ZooKeeper session's timeout, so its locks' (default 10 s)
            *(["--timeout", str(session_timeout)] if session_timeout is not None else []),
            "autorecovery",
            "run",
            "--bookie-id",
            f"{name}:3181",
        ]
        for item in settings:
            args += ["--set", item]
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, **(env or {})))
        procs.append(proc)
        return proc

    yield start
    codes = []
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                codes.append(proc.wait(30))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                codes.append("hung")
    assert all(c == 0 for c in codes), codes


FAST = (
    "openLedgerRereplicationGracePeriod=3000",
    "lockReleaseOfFailedLedgerGracePeriod=1000",
    "auditorPeriodicBookieCheckInterval=0",
    "auditorPeriodicCheckInterval=0",
)


def test_a_lost_bookie_is_rereplicated_without_an_operator(bookie_cluster, metadata_uri, zkstore, writer, daemons):
    procs = bookie_cluster(4, zkTimeout=4000)
    ports = {p.bookie_id: p.port for p in procs}
    zkstore.underreplication.set_lost_bookie_recovery_delay(0)
    closed = [make_ledger(writer, 3, 2, entries=60 + 10 * i) for i in range(6)]
    still_open = make_ledger(writer, 3, 2, entries=40, close=False)
    daemons("ar-one", *FAST)
    daemons("ar-two", *FAST)
    auditor = wait_for(what="an auditor", predicate=zkstore.auditor.current)
    assert auditor in ("ar-one:3181", "ar-two:3181")
    assert ok(bkctl(metadata_uri, "autorecovery", "whoisauditor")).strip() == auditor

    named = {}
    for lid in closed + [still_open]:
        for b in zkstore.ledgers.read(lid)[0].bookies:
            named[b] = named.get(b, 0) + 1
    victim_id = max(zkstore.ledgers.read(still_open)[0].bookies, key=named.get)  # the open ledger loses one too
    victim = next(p for p in procs if p.bookie_id == victim_id)
    on_victim = [lid for lid in closed + [still_open] if victim_id in zkstore.ledgers.read(lid)[0].bookies]
    victim.kill()

    def repaired():
        return (
            all(victim_id not in zkstore.ledgers.read(lid)[0].bookies for lid in on_victim)
            and zkstore.underreplication.count() == 0
        )

    wait_for(what="every ledger to stop naming the lost bookie", predicate=repaired, timeout=150)
    # a worker deletes the mark, then releases its lock (as Java's markLedgerReplicated)
    wait_for(what="the workers to release their locks", predicate=lambda: zkstore.underreplication.locks() == {})
    live = {b: port for b, port in ports.items() if b != victim_id}
    for lid in closed + [still_open]:  # the open one was fenced and closed after its grace period
        assert assert_fully_replicated(zkstore, live, lid, {victim_id}) > 0
    assert still_open in on_victim and zkstore.ledgers.read(still_open)[0].last_entry_id == 39


def test_disable_holds_the_repair_back_and_enable_lets_it_finish(
    bookie_cluster, metadata_uri, zkstore, writer, daemons, tmp_path
):
    procs = bookie_cluster(4, zkTimeout=4000)
    zkstore.underreplication.set_lost_bookie_recovery_delay(0)
    ids = [make_ledger(writer, 3, 2, entries=30) for _ in range(4)]
    daemons("ar-solo", *FAST)
    wait_for(what="an auditor", predicate=zkstore.auditor.current)
    ok(bkctl(metadata_uri, "autorecovery", "disable"))
    victim = most_named(zkstore, ids, procs)  # 4 ledgers on 3 of 4 bookies: it holds 3 or 4 of them
    victim_id = victim.bookie_id
    on_victim = [lid for lid in ids if victim_id in zkstore.ledgers.read(lid)[0].bookies]
    assert len(on_victim) >= 3
    victim.kill()
    wait_for(
        what="the bookie's registration to go",
        predicate=lambda: victim_id not in zkstore.registration.writable_bookies(),
        timeout=30,
    )
    assert bkctl(metadata_uri, "autorecovery", "trigger-audit").returncode == 4  # refused while disabled
    log = tmp_path / "autorecovery-ar-solo.log"  # the audit ran anyway: the registration went
    wait_for(
        what="an audit that finds the lost bookie's ledgers and holds them back",
        predicate=lambda: "held back while autorecovery is disabled" in log.read_text(errors="replace"),
    )
    import json

    wait_for(
        what="the status to say so",
        predicate=lambda: (
            "ledgers to mark once enabled"
            in json.loads(ok(bkctl(metadata_uri, "--json", "autorecovery", "status")))["auditor_waits_for"]
        ),
    )
    assert zkstore.underreplication.count() == 0
    assert all(victim_id in zkstore.ledgers.read(lid)[0].bookies for lid in on_victim)
    ok(bkctl(metadata_uri, "autorecovery", "enable"))
    wait_for(
        what="the repair once enabled",
        predicate=lambda: (
            all(victim_id not in zkstore.ledgers.read(lid)[0].bookies for lid in on_victim)
            and zkstore.underreplication.count() == 0
        ),
        timeout=120,
    )


def _in_process_auditor(store):
    """An Auditor (never started: only its checks are called) on the crochet reactor."""
    from twisted.internet import reactor

    from bkctl.wire.autorecovery.auditor import Auditor
    from bkctl.wire.autorecovery.config import AutoRecoveryConfig
    from bkctl.wire.client.blocking import run_in_reactor
    from bkctl.wire.client.bookkeeper import BookKeeperClient

    client = run_in_reactor(lambda: BookKeeperClient(store, reactor))
    auditor = run_in_reactor(lambda: Auditor(client, AutoRecoveryConfig(), reactor))
    auditor.running = True
    return auditor, client


def test_ledger_check_marks_a_registered_bookie_that_lacks_its_entries(bookie_cluster, zkstore, writer):
    """A bookie named by a segment, registered and answering, but without the
    entries: only the periodic ledger check (reads) can find it; the bookie
    audit (registrations) cannot."""
    from bkctl.wire.client.blocking import run_in_reactor

    procs = bookie_cluster(3)
    lid = make_ledger(writer, 2, 2, entries=20)
    md, version = zkstore.ledgers.read(lid)
    empty = next(p.bookie_id for p in procs if p.bookie_id not in md.bookies)
    zkstore.ledgers.update(lid, md.replace_bookie(0, md.ensembles[0][1][1], empty), version)
    auditor, client = _in_process_auditor(zkstore)
    try:
        run_in_reactor(lambda: auditor.request_audit())
        assert zkstore.underreplication.get(lid) is None  # every bookie is registered
        run_in_reactor(lambda: auditor.request_audit(check_ledgers=True))
        assert zkstore.underreplication.get(lid).replicas == (empty,)
        assert zkstore.client.exists(zkstore.root + "/underreplication/checkallledgersctime") is not None
    finally:
        auditor.running = False
        run_in_reactor(client.close)


def test_replicas_check_counts_entries_below_the_quorums(bookie_cluster, zkstore, writer):
    from bkctl.wire.client.blocking import run_in_reactor

    procs = bookie_cluster(3)
    lid = make_ledger(writer, 3, 2, entries=30)
    auditor, client = _in_process_auditor(zkstore)
    try:
        totals = run_in_reactor(lambda: auditor.replicas_check())
        assert (totals["entries"], totals["below_write_quorum"], totals["no_replica"]) == (30, 0, 0)
        md = zkstore.ledgers.read(lid)[0]
        victim = next(p for p in procs if p.bookie_id == md.ensembles[0][1][0])
        victim.kill()
        held = sum(1 for e in range(30) if victim.bookie_id in md.write_set(e))
        totals = run_in_reactor(lambda: auditor.replicas_check(), timeout=60)
        assert totals["below_write_quorum"] == held == totals["below_ack_quorum"]
        assert totals["no_replica"] == 0 and totals["ledgers_below_ack_quorum"] == 1
        assert zkstore.underreplication.get(lid) is None  # reported, not marked (as Java)
        assert zkstore.client.exists(zkstore.root + "/underreplication/replicascheckctime") is not None
    finally:
        auditor.running = False
        run_in_reactor(client.close)


def test_systemd_readiness_and_a_clean_sigterm(metadata_uri, zkstore, daemons, tmp_path):
    import socket

    sock_path = str(tmp_path / "notify.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(sock_path)
    server.settimeout(120)  # a deadline for a hang: the daemon starts slowly on a loaded machine
    proc = daemons("ar-notify", *FAST, env={"NOTIFY_SOCKET": sock_path})
    assert "READY=1" in server.recv(4096).decode()
    assert zkstore.auditor.current() == "ar-notify:3181"  # READY=1 comes after its vote
    proc.send_signal(signal.SIGTERM)
    assert "STOPPING=1" in server.recv(4096).decode()
    assert proc.wait(30) == 0
    assert zkstore.auditor.votes() == []  # it left the election at once
    server.close()


def test_bookieds_repair_the_loss_of_the_auditors_own_bookie(bookie_cluster, metadata_uri, zkstore, writer):
    """The issue's scenario: 5 bookieds running the daemon inside, 12 closed and 2
    open ledgers being written; SIGKILL the auditor's own bookie: a new auditor is
    elected and every ledger stops naming the dead bookie with no operator
    command; then SIGKILL a second bookie and every entry still reads back.  The
    live writers never see an add fail."""
    import threading

    from bkctl.wire.client.blocking import BlockingBookKeeper

    procs = bookie_cluster(
        5,
        zkTimeout=4000,
        autoRecoveryDaemonEnabled="true",
        openLedgerRereplicationGracePeriod=3000,
        lockReleaseOfFailedLedgerGracePeriod=1000,
        auditorPeriodicBookieCheckInterval=0,
        auditorPeriodicCheckInterval=0,
    )
    zkstore.underreplication.set_lost_bookie_recovery_delay(0)
    closed = [make_ledger(writer, 3, 2, entries=50 + i) for i in range(12)]
    by_id = {p.bookie_id: p for p in procs}
    auditor = wait_for(what="an auditor among the bookies", predicate=zkstore.auditor.current, timeout=60)
    assert auditor in by_id

    live_writer = BlockingBookKeeper(metadata_uri, timeout=60)
    stop = threading.Event()
    written: dict[int, list[bytes]] = {}
    errors: list[BaseException] = []

    def keep_writing(lh):
        try:
            i = 0
            while not stop.is_set():
                payload = f"live{lh.ledger_id}-{i}".encode()
                lh.add(payload)
                written[lh.ledger_id].append(payload)
                i += 1
                time.sleep(0.005)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    handles = [live_writer.create(3, 2, 2) for _ in range(2)]
    threads = []
    for lh in handles:
        written[lh.ledger_id] = []
        t = threading.Thread(target=keep_writing, args=(lh,), daemon=True)
        t.start()
        threads.append(t)

    def each_wrote(more: dict[int, int]):
        return errors or all(len(written[lid]) >= n for lid, n in more.items())

    try:
        wait_for(lambda: each_wrote(dict.fromkeys(written, 20)), what="the live writers' first entries")
        ids = closed + [lh.ledger_id for lh in handles]
        first = by_id[auditor]
        on_first = [lid for lid in ids if auditor in zkstore.ledgers.read(lid)[0].bookies]
        assert on_first
        first.kill()
        successor = wait_for(
            what="a new auditor",
            predicate=lambda: (zkstore.auditor.current() or auditor) != auditor and zkstore.auditor.current(),
            timeout=60,
        )
        assert successor in by_id and successor != auditor

        def repaired():
            return (
                all(auditor not in zkstore.ledgers.read(lid)[0].bookies for lid in ids)
                and zkstore.underreplication.count() == 0
            )

        wait_for(what="every ledger to stop naming the dead bookie", predicate=repaired, timeout=150)
        assert not errors, errors
        second = next(p for b, p in by_id.items() if b not in (auditor, successor))
        second.kill()
        # the live writers go on past a second lost bookie (an ensemble change where it was in theirs)
        past = {lid: len(entries) + 20 for lid, entries in written.items()}
        wait_for(lambda: each_wrote(past), what="the live writers to go on after the second loss", timeout=60)
        stop.set()
        for t in threads:
            t.join(30)
        assert not errors, errors
        for lh in handles:
            lh.close()
        reader = BlockingBookKeeper(metadata_uri, timeout=120)
        try:
            for lid in closed:
                md = zkstore.ledgers.read(lid)[0]
                got = [p for batch in reader.open(lid).read_range(0, batch=100) for _, p in batch]
                assert got == [f"e{lid}-{i}".encode() for i in range(md.last_entry_id + 1)]
            for lh in handles:
                got = [p for batch in reader.open(lh.ledger_id).read_range(0, batch=100) for _, p in batch]
                assert got == written[lh.ledger_id] and len(got) > 50
        finally:
            reader.close()
    finally:
        stop.set()
        live_writer.close()


def test_a_worker_killed_mid_copy_leaves_the_ledger_to_another(bookie_cluster, metadata_uri, zkstore, writer, daemons):
    """replicationRateByBytes slows the first worker down so that it is SIGKILLed in
    the middle of the copy: nothing is marked replicated, the metadata still names the
    lost bookie, its lock goes with its session, and a second worker finishes the job;
    every entry is then on every bookie of the new ensemble (read from each directly)."""
    procs = bookie_cluster(4, zkTimeout=4000)
    ports = {p.bookie_id: p.port for p in procs}
    zkstore.underreplication.set_lost_bookie_recovery_delay(0)
    lid = make_ledger(writer, 3, 2, entries=3000)
    md = zkstore.ledgers.read(lid)[0]
    victim = next(p for p in procs if p.bookie_id == md.ensembles[0][1][0])
    # its session as short as the bookies' (4 s): the wait below for its lock to go is that long
    slow = daemons("ar-slow", *FAST, "replicationRateByBytes=20000", "rereplicationEntryBatchSize=4", session_timeout=4)
    wait_for(what="an auditor", predicate=zkstore.auditor.current)
    victim.kill()
    wait_for(
        what="the slow worker to take the ledger", predicate=lambda: lid in zkstore.underreplication.locks(), timeout=60
    )
    # mid copy: the lost copy's first entry is on the bookie that takes it (the one bookie outside
    # the ensemble); at 20 kB/s the copy of ~280 kB goes on for a while yet
    spare = next(p for p in procs if p.bookie_id not in md.ensembles[0][1])
    wait_for(what="the slow worker's copy to begin", predicate=lambda: holds_entry(spare.port, lid, 0), timeout=60)
    slow.kill()
    slow.wait(10)
    assert zkstore.underreplication.get(lid) is not None  # not marked replicated
    assert victim.bookie_id in zkstore.ledgers.read(lid)[0].bookies  # metadata untouched
    wait_for(
        what="the dead worker's lock to go with its session",
        predicate=lambda: lid not in zkstore.underreplication.locks(),
        timeout=60,
    )
    daemons("ar-fast", *FAST)
    wait_for(
        what="the second worker to finish",
        predicate=lambda: (
            victim.bookie_id not in zkstore.ledgers.read(lid)[0].bookies and zkstore.underreplication.get(lid) is None
        ),
        timeout=120,
    )
    live = {b: port for b, port in ports.items() if b != victim.bookie_id}
    assert assert_fully_replicated(zkstore, live, lid, {victim.bookie_id}) == 3000


def test_decommission_lets_the_daemons_copy(bookie_cluster, metadata_uri, zkstore, writer, daemons):
    """With an auditor elected, `bkctl decommission` triggers the audit (which ignores
    lostBookieRecoveryDelay, as Java's triggeraudit) and waits for the daemons."""
    import json

    procs = bookie_cluster(4)
    ports = {p.bookie_id: p.port for p in procs}
    zkstore.underreplication.set_lost_bookie_recovery_delay(3600)
    ids = [make_ledger(writer, 3, 2, entries=40) for _ in range(4)]
    daemons("ar-decom", *FAST)
    wait_for(what="an auditor", predicate=zkstore.auditor.current)
    victim = most_named(zkstore, ids, procs)
    on_victim = [lid for lid in ids if victim.bookie_id in zkstore.ledgers.read(lid)[0].bookies]
    assert len(on_victim) >= 3
    victim.stop()
    wait_for(
        what="the registration to go",
        predicate=lambda: not zkstore.registration.is_registered(victim.bookie_id),
        timeout=30,
    )
    plan = json.loads(ok(bkctl(metadata_uri, "--json", "decommission", victim.bookie_id, "--dry-run")))
    assert plan["dry_run"] and plan["mode"] == "autorecovery"
    assert [(r["ledger_id"], r["status"]) for r in plan["ledgers"]] == [(lid, "planned") for lid in sorted(on_victim)]
    assert zkstore.underreplication.count() == 0 and zkstore.cookies.get(victim.bookie_id) is not None
    doc = json.loads(
        ok(
            bkctl(
                metadata_uri, "--timeout", "5", "--json", "decommission", victim.bookie_id, "--force", "--wait", "120"
            )
        )
    )
    assert doc["mode"] == "autorecovery" and doc["entries_copied"] is None
    assert [r["ledger_id"] for r in doc["ledgers"]] == sorted(on_victim)
    assert {r["status"] for r in doc["ledgers"]} == {"replicated"}
    assert doc["cookie_deleted"] is True and zkstore.cookies.get(victim.bookie_id) is None
    live = {b: port for b, port in ports.items() if b != victim.bookie_id}
    for lid in ids:
        assert assert_fully_replicated(zkstore, live, lid, {victim.bookie_id}) == 40


def test_a_decommission_the_daemons_cannot_finish_talks_and_says_why(
    bookie_cluster, metadata_uri, zkstore, writer, daemons
):
    """3 bookies, ledgers on all 3: with one gone no writable bookie is left outside their
    ensembles, so every worker's attempt fails.  Right after a kill -9 the bookie is still
    registered, and the refusal says why; then the piped wait says what it does on stderr,
    its failure names the worker and its reason, and --json prints remaining_ledgers too."""
    import json

    # a session that outlives the first decommission's start on a loaded machine (at 10 s, when
    # each bkctl run was a fresh Python importing bkctl, it could expire first, and that
    # decommission then waited instead of refusing); a run forked from the worker's zygote
    # (tests/support/cli.py) has nothing to import, and the wait below for the session to
    # expire is this long, idle
    procs = bookie_cluster(3, zkTimeout=15000)
    zkstore.underreplication.set_lost_bookie_recovery_delay(3600)
    ids = sorted(make_ledger(writer, 3, 2, entries=10) for _ in range(2))
    daemons(
        "ar-stuck",
        "lockReleaseOfFailedLedgerGracePeriod=300000",
        "auditorPeriodicBookieCheckInterval=0",
        "auditorPeriodicCheckInterval=0",
    )
    wait_for(what="an auditor", predicate=zkstore.auditor.current)
    victim = procs[0]
    victim.kill()
    early = bkctl(metadata_uri, "decommission", victim.bookie_id, "--force")
    assert early.returncode == 4 and b"until its session expires" in early.stderr, early.stderr
    wait_for(
        what="the killed bookie's session to expire",
        timeout=90,
        predicate=lambda: not zkstore.registration.is_registered(victim.bookie_id),
    )

    first = bkctl(metadata_uri, "--json", "decommission", victim.bookie_id, "--force", "--wait", "1")
    assert first.returncode == 1, first.stderr
    doc = json.loads(first.stdout)  # the document, on failure too
    assert doc["remaining_ledgers"] == ids and doc["cookie_deleted"] is False
    assert doc["error"].startswith(f"2 ledgers still use bookie {victim.bookie_id} after 1 s")
    assert {r["ledger_id"]: r["status"] for r in doc["ledgers"]} == {lid: "waiting" for lid in ids}
    err = first.stderr.decode()
    assert err.startswith("decommissioning ") and "audit triggered (auditor ar-stuck:3181)" in err, err

    def failed_attempts():
        rows = [
            json.loads(line) for line in ok(bkctl(metadata_uri, "--json", "autorecovery", "query-status")).splitlines()
        ]
        return [r for r in rows if r["last_failure"]]

    # both ledgers held after a failed attempt (one failed while the other still being tried
    # made the message below say "1 held ...; 1 being re-replicated")
    wait_for(
        what="the worker to fail on both ledgers",
        timeout=120,
        predicate=lambda: {r["ledger_id"] for r in failed_attempts() if r["state"] == "held-failed"} == set(ids),
    )
    again = bkctl(metadata_uri, "decommission", victim.bookie_id, "--force", "--wait", "1")  # piped, human
    assert again.returncode == 1
    last = again.stderr.decode().strip().splitlines()[-1]
    assert last == (
        f"bkctl: error: 2 ledgers still use bookie {victim.bookie_id} after 1 s; cookie kept: 2 no bookie to copy to"
    ), last
    # every ledger left, one line each, under its cause
    left = again.stdout.decode().splitlines()
    assert left[0] == "no bookie to copy to (2 ledgers):", left
    assert [line.split(":")[0].strip() for line in left[1:]] == [str(i) for i in ids], left
    assert all("ar-stuck:3181: need 1 writable bookie outside the ensemble" in line for line in left[1:]), left
    assert zkstore.cookies.get(victim.bookie_id) is not None


def test_force_audit_has_the_next_auditor_run_the_checks_at_once(metadata_uri, zkstore, daemons):
    """Java's forceauditchecks: the checks' last runs set 21 days back, in ZooKeeper's nodes;
    an auditor reads them when it starts, so a restarted one runs a check due every day at once."""
    import json

    from bkctl.wire.metadata import paths as P

    every_day = ("auditorPeriodicCheckInterval=86400", "auditorPeriodicBookieCheckInterval=0")
    first = daemons("ar-force", *every_day)

    def ledger_check_ran():
        return zkstore.underreplication.check_ctime(P.UR_CHECK_ALL_LEDGERS_CTIME)

    ran = wait_for(ledger_check_ran, what="the first ledger check (it never ran: at once)")
    assert bkctl(metadata_uri, "autorecovery", "force-audit").returncode == 2  # which checks?
    doc = json.loads(ok(bkctl(metadata_uri, "--json", "autorecovery", "force-audit", "--check-all-ledgers")))
    assert doc["checks"] == [P.UR_CHECK_ALL_LEDGERS_CTIME] and doc["previous"] == {P.UR_CHECK_ALL_LEDGERS_CTIME: ran}
    assert doc["auditor"] == "ar-force:3181" and ledger_check_ran() == doc["ctime"]
    assert ran - doc["ctime"] > 20 * 24 * 3600 * 1000  # weeks before the run it replaces (21 days before now)
    assert zkstore.underreplication.check_ctime(P.UR_REPLICAS_CHECK_CTIME) is None  # only what was asked
    assert "restart the daemon of ar-force:3181" in ok(bkctl(metadata_uri, "autorecovery", "force-audit", "--all"))
    forced = ledger_check_ran()
    first.send_signal(signal.SIGTERM)
    assert first.wait(30) == 0
    daemons("ar-force", *every_day)  # a day's interval, yet it runs at once
    wait_for(lambda: ledger_check_ran() > forced, what="the restarted auditor's ledger check")


def test_a_bookie_back_without_its_copies_is_refilled_when_no_other_bookie_is_free(
    bookie_cluster, metadata_uri, zkstore, writer, daemons
):
    """A bookie killed while entries were on their way to it comes back (registered, writable)
    without them; the ledger is marked.  With no bookie left outside the ensemble to move the
    fragment to, the worker writes the copies back to it in place (Java's replicator fails to
    find a replacement and leaves the ledger marked until a bookie is added)."""
    procs = bookie_cluster(3)
    lid = make_ledger(writer, 2, 2, entries=30)
    md, version = zkstore.ledgers.read(lid)
    spare = next(p for p in procs if p.bookie_id not in md.bookies)
    left = next(p for p in procs if p.bookie_id == md.ensembles[0][1][1])
    # the spare takes the place of a member without its copies; the member leaves the cluster
    zkstore.ledgers.update(lid, md.replace_bookie(0, left.bookie_id, spare.bookie_id), version)
    left.stop()
    zkstore.underreplication.mark(lid, [spare.bookie_id])
    daemons("ar-refill", *FAST)
    wait_for(what="the ledger's mark to go", predicate=lambda: zkstore.underreplication.get(lid) is None, timeout=45)
    assert spare.bookie_id in zkstore.ledgers.read(lid)[0].bookies  # kept its place
    live = {p.bookie_id: p.port for p in procs if p is not left}
    assert assert_fully_replicated(zkstore, live, lid, {left.bookie_id}) == 30
