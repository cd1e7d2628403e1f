"""Issue 24: a bookie that runs for months -- entry-log compaction in real bookied processes.

40 ledgers are written interleaved into small entry logs (logSizeLimit 64 KiB) and 80% of them
are deleted, so that every log keeps a few live entries: only compaction gets the space back.
Kill points are deterministic: bookied started through ``tests.support.stopping_bookied PHASE``
stops (sleeps) at that compaction phase, logging it, and the test kill -9s it there.
"""

from __future__ import annotations

import json
import os
import re
import urllib.request
from pathlib import Path

import pytest

from bkctl.bookied.storage.compactor import CompactionPhase
from bkctl.sandbox.zookeeper import free_port
from bkctl.wire.client.blocking import BlockingBookKeeper
from bkctl.wire.errors import BKError
from tests.support.bookieproc import BookieProcess, start_bookies
from tests.support.cli import bkctl
from tests.support.smallfs import fill, mount_or_explain, unmount, usage
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

LEDGERS = 40
ENTRIES = 50
SIZE = 500
LOG_SIZE = 64 * 1024
FULL_DISK_ENTRIES = 300
#: GC every second; compaction only when forced (or as a test asks)
QUIET = dict(
    logSizeLimit=LOG_SIZE,
    gcWaitTime=1000,
    minorCompactionInterval=0,
    majorCompactionInterval=0,
    forceAllowCompaction="true",
)


def payload(ledger_id: int, entry_id: int) -> bytes:
    return ((b"%d/%d;" % (ledger_id, entry_id)) * SIZE)[:SIZE]


def churn(uri: str, entries: int = ENTRIES) -> tuple[list[int], list[int]]:
    """Write LEDGERS ledgers round-robin, close them, delete 80%: (kept ids, deleted ids)."""
    bk = BlockingBookKeeper(uri, add_timeout=10.0, read_timeout=10.0, timeout=60)
    try:
        ledgers = [bk.create(1, 1, 1, password=b"pw") for _ in range(LEDGERS)]
        for e in range(entries):
            for lh in ledgers:
                lh.add(payload(lh.ledger_id, e))
        for lh in ledgers:
            lh.close()
        ids = [lh.ledger_id for lh in ledgers]
        kept, deleted = ids[::5], [i for i in ids if i not in ids[::5]]
        for ledger_id in deleted:
            bk.delete(ledger_id)
        return kept, deleted
    finally:
        bk.close()


def read_all(uri: str, kept: list[int], entries: int = ENTRIES) -> None:
    bk = BlockingBookKeeper(uri, read_timeout=10.0, timeout=60)
    try:
        for ledger_id in kept:
            with bk.open(ledger_id, b"pw") as lh:
                got = dict(lh.read(0, entries - 1))
                assert got == {e: payload(ledger_id, e) for e in range(entries)}, ledger_id
    finally:
        bk.close()


def http(b: BookieProcess, method: str, path: str, body: dict | None = None):
    req = urllib.request.Request(
        f"http://127.0.0.1:{b.http_port}{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read() or b"null")


def entry_logs(b: BookieProcess) -> list[dict]:
    return http(b, "GET", "/api/v1/bookie/gc_details")[0]["entryLogs"]


def disk_bytes(b: BookieProcess) -> tuple[int, int]:
    """(entry log bytes, index bytes) in the bookie's ledger directory."""
    current = Path(b.settings.get("ledgerDirectories", b.ledger_dir)) / "current"
    return _sizes(current.glob("*.bel")), _sizes((current / "index.lmdb").iterdir())


def _sizes(paths) -> int:
    """Bytes of the files listed that still exist: compaction unlinks logs while the test looks."""
    total = 0
    for p in paths:
        try:
            total += p.stat().st_size
        except FileNotFoundError:
            pass
    return total


def live_bytes(kept: list[int]) -> int:
    return len(kept) * ENTRIES * SIZE


def bookie(tmp_path, uri, **settings) -> BookieProcess:
    b = BookieProcess(tmp_path / "b", uri, httpServerEnabled="true", **settings)
    b.http_port = free_port()
    b.settings["httpServerPort"] = b.http_port
    return b


def gc_dropped_the_deleted_ledgers(b: BookieProcess, deleted_share: float = 0.5) -> bool:
    logs = entry_logs(b)
    return bool(logs) and sum(log["liveBytes"] for log in logs) < deleted_share * sum(log["sizeBytes"] for log in logs)


@pytest.fixture
def procs():
    started: list[BookieProcess] = []
    yield started
    for p in started:
        p.kill()


def test_short_intervals_shrink_the_ledger_directory_and_keep_every_live_entry(tmp_path, metadata_uri, procs):
    b = bookie(
        tmp_path,
        metadata_uri,
        logSizeLimit=LOG_SIZE,
        gcWaitTime=1000,
        minorCompactionInterval=2,
        majorCompactionInterval=4,
    )
    procs.append(b)
    start_bookies([b], metadata_uri)
    kept, _deleted = churn(metadata_uri)
    # not yet what the test waits for: the entries reach the entry logs at a checkpoint
    # (flushInterval, 10 s), and a compaction may already have shrunk them by then -- the
    # counter read after the disk, so that it cannot be stale
    wait_for(
        lambda: (
            disk_bytes(b)[0] > 2 * live_bytes(kept) + LOG_SIZE
            or http(b, "GET", "/api/v1/bookie/gc")["reclaimedSpaceViaCompaction"] > 0
        ),
        timeout=60,
        what="the entries flushed to the entry logs, or already compacted",
    )
    wait_for(
        lambda: (
            disk_bytes(b)[0] <= 2 * live_bytes(kept) + LOG_SIZE
            and http(b, "GET", "/api/v1/bookie/gc")["entriesMoved"] > 0
        ),
        timeout=60,
        what="compaction to move the live entries and shrink the entry logs",
    )
    status = http(b, "GET", "/api/v1/bookie/gc")
    # minor (every 2 s) or major (every 4 s) compaction, whichever finds the logs first
    assert status["majorCompactionCounter"] + status["minorCompactionCounter"] >= 1
    assert status["reclaimedSpaceViaCompaction"] > 0
    logs, index = disk_bytes(b)
    assert logs + index <= 2 * live_bytes(kept) + LOG_SIZE + index
    read_all(metadata_uri, kept)
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{b.http_port}/metrics", timeout=10).read().decode()
    assert "bookie_gc_major_compaction_total" in metrics and "bookie_gc_active_entry_log_space_bytes" in metrics
    counted = {
        name: float(value)
        for name, value in re.findall(
            r"^(bookie_gc_(?:deleted|compacted)_entry_log_total|bookie_gc_reclaimed_space_via_\w+) (\S+)$",
            metrics,
            re.M,
        )
    }
    assert counted["bookie_gc_compacted_entry_log_total"] >= 1, counted
    assert counted["bookie_gc_reclaimed_space_via_compaction"] > 0
    assert (counted["bookie_gc_deleted_entry_log_total"] > 0) == (counted["bookie_gc_reclaimed_space_via_deletes"] > 0)


@pytest.mark.parametrize("step", [p.value for p in CompactionPhase])
def test_kill_9_at_a_compaction_step_loses_nothing(tmp_path, metadata_uri, procs, step):
    b = bookie(tmp_path, metadata_uri, **QUIET)
    b.launcher = ["tests.support.stopping_bookied", step]
    procs.append(b)
    start_bookies([b], metadata_uri)
    kept, _deleted = churn(metadata_uri)
    wait_for(lambda: gc_dropped_the_deleted_ledgers(b), timeout=30, what="GC to drop the deleted ledgers")
    http(b, "PUT", "/api/v1/bookie/gc", {"forceMajor": True})
    wait_for(
        lambda: f"compaction: stopping at {step}" in b.log_path.read_text(errors="replace"),
        timeout=30,
        what=f"bookied to reach {step}",
    )
    if step == "copied":  # stopped inside compaction: that is what the collector says it does
        assert http(b, "GET", "/api/v1/bookie/gc")["state"] == "major compacting"
        details = http(b, "GET", "/api/v1/bookie/gc_details")[0]
        assert details["majorCompacting"] is True and details["minorCompacting"] is False
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{b.http_port}/metrics", timeout=10).read().decode()
        assert re.search(r"^bookie_gc_major_compacting 1(\.0)?$", metrics, re.M)
        assert re.search(r"^bookie_gc_collecting 0(\.0)?$", metrics, re.M)
    b.kill()
    conf = str(b.base / "bk_server.conf")
    if step == "copied":  # what bkctl sees of the stopped bookie: the copies are not committed yet
        doc = json.loads(bkctl(metadata_uri, "--json", "bookie", "check", "-c", conf, "--offline").stdout)
        assert doc["bad"] == 0 and doc["unverified"] == len(kept) * ENTRIES and len(doc["uncommitted_logs"]) == 1
        states = {r["state"] for r in inspect_entrylog(metadata_uri, conf)}
        assert states == {"live", "stale", "uncommitted"}
    b.launcher = ["bkctl.bookied"]
    b.start()
    read_all(metadata_uri, kept)  # nothing lost, whatever the step
    current = Path(b.ledger_dir) / "current"
    on_disk = {int(p.stem, 16) for p in current.glob("*.bel")}
    known = {log["logId"] for log in entry_logs(b)}
    assert on_disk <= known | {max(on_disk)}  # nothing left over but the new checkpoint log
    # compaction completes after the restart
    http(b, "PUT", "/api/v1/bookie/gc", {"forceMajor": True})
    wait_for(
        lambda: disk_bytes(b)[0] <= 2 * live_bytes(kept) + LOG_SIZE,
        timeout=60,
        what="compaction to finish after the restart",
    )
    read_all(metadata_uri, kept)
    assert b.stop() == 0
    doc = json.loads(bkctl(metadata_uri, "--json", "bookie", "check", "-c", conf, "--offline").stdout)
    assert doc["bad"] == 0 and doc["unverified"] == len(kept) * ENTRIES and doc["uncommitted_logs"] == []
    live = [(r["ledger_id"], r["entry_id"]) for r in inspect_entrylog(metadata_uri, conf) if r["state"] == "live"]
    assert sorted(live) == [(lid, e) for lid in sorted(kept) for e in range(ENTRIES)]  # each entry live once


def inspect_entrylog(uri: str, conf: str) -> list[dict]:
    out = bkctl(uri, "--json", "bookie", "inspect", "entrylog", "-c", conf)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


@pytest.fixture
def fs(tmp_path):
    path = tmp_path / "fs"
    mount_or_explain(path, 24)
    yield path
    unmount(path)


def test_a_full_bookie_compacts_itself_writable_with_force_gc_when_no_space(tmp_path, metadata_uri, procs, fs):
    # compaction enabled but never due, and GC passes rare: only the full disk starts one
    b = BookieProcess(
        tmp_path / "b",
        metadata_uri,
        journalDirectories=fs / "journal",
        ledgerDirectories=fs / "ledgers",
        logSizeLimit=LOG_SIZE,
        gcWaitTime=3600000,
        minorCompactionInterval=7200,
        majorCompactionInterval=86400,
        isForceGCAllowWhenNoSpace="true",
        diskCheckInterval=500,
        diskUsageThreshold=0.85,
        diskUsageWarnThreshold=0.85,
        diskUsageLwmThreshold=0.8,
        minUsableSizeForEntryLogCreation=1024 * 1024,
        journalMaxSizeMB=2,
        dbStorage_writeCacheMaxSizeMb=4,
        httpServerEnabled="true",
    )
    b.http_port = free_port()
    b.settings["httpServerPort"] = b.http_port
    procs.append(b)
    start_bookies([b], metadata_uri)
    # The journal keeps every byte written (journalMaxBackups=5 keeps its old files) and the LMDB
    # index only grows: only the entry logs' deleted share can take the disk from 87% to below the
    # 80% LWM. With 150 entries a ledger that share was ~9.5% of the disk against a 7% gap, which the
    # index's growth and the flush of cached live entries ate in one run in three; 300 leave ~19%.
    kept, _deleted = churn(metadata_uri, entries=FULL_DISK_ENTRIES)
    logs_before, _ = disk_bytes(b)
    # leave the bookie just over diskUsageThreshold, its logs mostly dead

    def just_over() -> bool:
        """Top the filler up to 87% of the disk: over diskUsageThreshold the bookie first deletes
        what its journal holds and no replay needs (its checkpointed files), which can take it
        back under; the disk stays full of entry logs, as a disk that only compaction can free."""
        if "bookie is now read-only (disk usage" in b.log_path.read_text(errors="replace"):
            return True  # (not topped up again: what its compaction frees counts below)
        if usage(fs) < 0.86:
            # straight to 87%, never through a full disk: filled to 100% and cut back, the bookie
            # could check at 100% and compact in between, and the cut, sized after, took the very
            # room its compaction made (seen: read-only for good, 363 passes with nothing left)
            st = os.statvfs(fs)
            fill(fs, "filler", leave_bytes=int(0.13 * st.f_blocks * st.f_frsize))
        # the read-only spell can be shorter than a poll (the forced pass may drop whole dead
        # logs within milliseconds): the bookie's log tells it happened
        return "bookie is now read-only (disk usage" in b.log_path.read_text(errors="replace")

    wait_for(just_over, timeout=30, what="the bookie to turn read-only")

    def stuck() -> str:
        """What a timeout says: the disk, the collector and the end of the bookie's log."""
        tail = "\n".join(b.log_path.read_text(errors="replace").splitlines()[-40:])
        gc = http(b, "GET", "/api/v1/bookie/gc")
        return f"the bookie to compact itself writable again (disk {usage(fs):.1%}, gc {gc}); its log ends:\n{tail}"

    wait_for(
        lambda: not http(b, "GET", "/api/v1/bookie/state")["readOnly"],
        timeout=180,
        what=stuck,
    )  # a hang guard
    assert "bookie is now writable" in b.log_path.read_text(errors="replace")
    assert "garbage collection forced (disk full: compaction limits lifted)" in b.log_path.read_text()
    # writable may come before the pass is over (dead logs go first): the logs shrink when it is
    wait_for(lambda: not http(b, "GET", "/api/v1/bookie/gc")["gcRunning"], timeout=60, what="the forced pass to end")
    assert disk_bytes(b)[0] < logs_before / 2 and usage(fs) < 0.8
    # what freed the space may be compaction or whole logs dropped: the write cache flushes entries
    # sorted by ledger, so some logs hold deleted ledgers only -- either way, no operator was needed
    read_all(metadata_uri, kept, entries=FULL_DISK_ENTRIES)


def test_bkctl_bookie_gc_major_wait_and_status(tmp_path, metadata_uri, procs):
    b = bookie(tmp_path, metadata_uri, **QUIET)
    procs.append(b)
    start_bookies([b], metadata_uri)
    before = bkctl(metadata_uri, "bookie", "gc", b.bookie_id, "--status", "--http", f"127.0.0.1:{b.http_port}")
    assert before.returncode == 0, before.stderr
    assert re.search(r"major compaction\s+0 runs, not periodic\n", before.stdout), before.stdout  # no time
    assert "last compaction" not in before.stdout
    kept, _deleted = churn(metadata_uri)
    wait_for(lambda: gc_dropped_the_deleted_ledgers(b), timeout=30, what="GC to drop the deleted ledgers")
    ran = bkctl(metadata_uri, "--json", "bookie", "gc", b.bookie_id, "--major", "--wait")
    assert ran.returncode == 0, ran.stderr
    doc = json.loads(ran.stdout)
    assert doc["triggered"] and doc["kind"] == "major" and not doc["status"]["gcRunning"]
    assert doc["status"]["lastCompaction"]["kind"] == "major" and doc["status"]["entriesMoved"] > 0
    shown = bkctl(metadata_uri, "bookie", "gc", b.bookie_id, "--status").stdout
    assert re.search(r"major compaction\s+1 run, last \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", shown), shown
    assert re.search(r"last compaction\s+major, \d{4}-[-\d:.TZ]+, \d+ logs compacted, \d+ entries", shown), shown
    # logs deleted whole (nothing live left) counted apart from logs compacted, as the status says
    st = http(b, "GET", "/api/v1/bookie/gc")
    assert st["logsCompacted"] >= 1 and st["reclaimedSpaceViaCompaction"] > 0
    m = re.search(
        r"reclaimed\s+[\d.]+ \w+ by deleting (\d+) logs? whole \(nothing live left\), [\d.]+ \w+ by "
        r"compacting (\d+) logs?\n",
        shown,
    )
    assert m and (int(m[1]), int(m[2])) == (st["logsDeleted"], st["logsCompacted"]), (shown, st)
    # idle, or in one of the periodic passes (gcWaitTime 1 s) that only collect: never compacting
    assert re.search(r"state\s+(idle|collecting deleted ledgers)\n", shown), shown
    # the log being written keeps its dead data, and says so (issue 36)
    active = [log for log in entry_logs(b) if log["active"]]
    assert len(active) == 1 and active[0]["keptBecause"].startswith("being written"), active
    assert re.search(
        rf"dead data kept\s+[\d.]+ \w+ in entry log {active[0]['logId']} \(active\): being written: "
        r"the entry log in use is compacted only after it rolls at logSizeLimit \(65536 bytes\)",
        shown,
    ), shown
    # a pass that reclaims nothing: the last compaction stays the one that did
    again = json.loads(bkctl(metadata_uri, "--json", "bookie", "gc", b.bookie_id, "--major", "--wait").stdout)
    assert again["status"]["lastCompaction"] == doc["status"]["lastCompaction"]
    assert again["status"]["lastCompactionRun"]["reclaimedBytes"] == 0
    shown = bkctl(metadata_uri, "bookie", "gc", b.bookie_id, "--status").stdout
    assert re.search(
        r"last compaction pass\s+major, [-\d:.TZ]+, 0 of 0 logs below the threshold compacted, 0 B "
        r"reclaimed",
        shown,
    ), shown
    assert re.search(r"minor compaction\s+0 runs, not periodic", shown), shown  # no time: none ran
    assert bkctl(metadata_uri, "bookie", "gc", b.bookie_id, "--status", "--minor").returncode == 2
    read_all(metadata_uri, kept)


def test_a_damaged_record_in_a_mostly_dead_log_is_named_once_and_the_log_reclaimed(tmp_path, metadata_uri, procs):
    from bkctl.bookied.storage import log_name, scan_log

    b = bookie(tmp_path, metadata_uri, **QUIET)
    procs.append(b)
    start_bookies([b], metadata_uri)
    kept, _deleted = churn(metadata_uri)
    wait_for(lambda: gc_dropped_the_deleted_ledgers(b), timeout=30, what="GC to drop the deleted ledgers")
    logs = {log["logId"]: log for log in entry_logs(b)}
    current = Path(b.ledger_dir) / "current"
    # a mostly-dead log (not the one being written) with live records after the one that rots; where
    # the checkpoints cut the round-robin writes decides how many live records each log got, so the
    # deadest log may hold only one or two: the deadest of those holding three or more is taken
    live_in = {
        lid: [r for r in scan_log(str(current / log_name(lid))) if r[2] in kept] for lid in logs if lid != max(logs)
    }
    victim = min(
        (lid for lid in live_in if len(live_in[lid]) >= 3), key=lambda lid: logs[lid]["liveRatio"], default=None
    )
    assert victim is not None, {lid: len(records) for lid, records in live_in.items()}
    assert logs[victim]["liveRatio"] < 0.5, logs[victim]
    path = current / log_name(victim)
    live = live_in[victim]
    offset, _length, rotten_lid, rotten_eid, _data = live[0]
    with open(path, "r+b") as f:  # one byte of the entry's data rots
        f.seek(offset + 100)
        byte = f.read(1)
        f.seek(offset + 100)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert b.stop() == 0
    conf = str(b.base / "bk_server.conf")
    checked = bkctl(metadata_uri, "--json", "bookie", "check", "-c", conf, "--offline")
    assert checked.stdout, checked.stderr
    doc = json.loads(checked.stdout)
    assert checked.returncode == 1 and doc["bad"] == 1 and doc["problems"][0]["entry_id"] == rotten_eid
    [damaged] = doc["damaged_records"]
    assert (damaged["log_id"], damaged["offset"], damaged["live"]) == (victim, offset, True)
    start_bookies([b], metadata_uri)  # bookie gc finds the bookie by its registration: wait for it too
    ran = bkctl(metadata_uri, "--json", "bookie", "gc", b.bookie_id, "--major", "--wait")
    assert ran.returncode == 0, ran.stderr
    assert victim not in {log["logId"] for log in entry_logs(b)}  # reclaimed in that pass
    assert not path.exists()
    assert bkctl(metadata_uri, "bookie", "gc", b.bookie_id, "--major", "--wait").returncode == 0  # another pass
    warned = [line for line in b.log_path.read_text().splitlines() if "damaged record in entry log" in line]
    assert len(warned) == 1 and f"entry log {victim} at offset {offset}" in warned[0] and " WARNING " in warned[0]
    assert f"{rotten_lid}/{rotten_eid}" in warned[0]
    shown = bkctl(metadata_uri, "bookie", "gc", b.bookie_id, "--status")
    assert re.search(
        rf"damaged\s+1 record; last: entry log {victim} offset {offset} \(checksum mismatch; "
        rf"live entries dropped: {rotten_lid}/{rotten_eid}\)",
        shown.stdout,
    ), shown.stdout
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{b.http_port}/metrics", timeout=10).read().decode()
    assert re.search(r"^bookie_gc_damaged_record_total 1(\.0)?$", metrics, re.M), metrics
    # every other live entry is still served; the rotten one never is (E=1: it is lost, not served damaged)
    bk = BlockingBookKeeper(metadata_uri, read_timeout=10.0, timeout=60)
    try:
        for ledger_id in kept:
            with bk.open(ledger_id, b"pw") as lh:
                if ledger_id != rotten_lid:
                    assert dict(lh.read(0, ENTRIES - 1)) == {e: payload(ledger_id, e) for e in range(ENTRIES)}
                    continue
                others = [e for e in range(ENTRIES) if e != rotten_eid]
                assert all(lh.read(e, e) == [(e, payload(ledger_id, e))] for e in others)
                with pytest.raises(BKError):
                    lh.read(rotten_eid, rotten_eid)
    finally:
        bk.close()
