"""``bkctl disk`` against REAL ZooKeeper and bookieds after a Pulsar-like churn.

The module fixture plays a Pulsar broker and an application: topics in two
namespaces of tenant ``acme`` (data ledgers, one still open; a cursor
ledger; a schema ledger), ledgers Pulsar made for a topic that nothing lists
(orphans, or too young to judge), and application ledgers of which half are
deleted.  Every ledger's entries are written round-robin into small entry
logs (64 KiB), so that the deleted ledgers leave each log about half live.

Tolerances stated (checked below): per bookie, live, orphan and
awaiting-GC bytes within 1% of what the ledgers' own entries (payload, the
32-byte header, the 4-byte CRC32C digest, bookied's 24-byte record) put on
that bookie, counted entry by entry from the write set; the entry-log bytes
equal to the bytes of the .bel files on disk (``du -b``) within 1%.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import defaultdict
from pathlib import Path

import pytest

from bkctl.wire import fastpath
from bkctl.wire.proto import pulsar_ml_pb2 as ml
from tests.support.bookieproc import BookieProcess, start_bookies
from tests.support.cli import bkctl
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("disk")]  # one cluster for the module

SIZE = 500
PER_ENTRY = SIZE + 32 + 4 + 24  # payload, entry header, CRC32C digest, bookied's record
LOG_SIZE = 64 * 1024
TOLERANCE = 0.01
#: no GC pass unless forced, and a forced one removes deleted ledgers without compacting
SETTINGS = dict(
    logSizeLimit=LOG_SIZE,
    gcWaitTime=3600000,
    minorCompactionInterval=0,
    majorCompactionInterval=0,
    forceAllowCompaction="false",
    flushInterval=200,
)


def pulsar_custom(ml_name: str, cursor: str | None = None, component: str = "managed-ledger", **extra) -> dict:
    doc = {"application": b"pulsar", "component": component.encode()}
    if component == "managed-ledger":
        doc["pulsar/managed-ledger"] = ml_name.encode()
    if cursor:
        doc["pulsar/cursor"] = cursor.encode()
    doc.update({k: v.encode() for k, v in extra.items()})
    return doc


class Churn:
    """What the fixture wrote: each ledger's metadata (as it was) and entry count, by role."""

    def __init__(self, uri: str, procs: list[BookieProcess]):
        self.uri = uri
        self.procs = procs
        self.md: dict[int, object] = {}
        self.entries: dict[int, int] = {}
        self.roles: dict[str, list[int]] = defaultdict(list)

    def on_bookie(self, ids) -> dict[str, int]:
        """bookie -> bytes the ledgers ``ids`` put there, entry by entry from the write set."""
        out: dict[str, int] = defaultdict(int)
        for lid in ids:
            for e in range(self.entries[lid]):
                for b in self.md[lid].write_set(e):
                    out[b] += PER_ENTRY
        return out

    def ids(self, *roles) -> list[int]:
        return [lid for r in roles for lid in self.roles[r]]


def live_entries(proc: BookieProcess) -> int:
    return sum(log["liveEntries"] for log in proc.admin("/api/v1/bookie/gc_details")[0]["entryLogs"])


@pytest.fixture(scope="module")
def churn(zookeeper, tmp_path_factory):
    from kazoo.client import KazooClient

    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.metadata.zk import ZKMetadataStore

    root = f"/disk{uuid.uuid4().hex[:10]}"
    uri = f"zk+hierarchical://{zookeeper.connect_string}{root}/ledgers"
    base = tmp_path_factory.mktemp("disk-bookies")
    procs = []
    for i in range(3):
        procs.append(BookieProcess(base / f"bookie{i}", uri, **SETTINGS).serve_http())
    with ZKMetadataStore(uri, timeout=20, twins=fastpath.selected()) as store:
        store.cluster.init()
    zk = KazooClient(hosts=zookeeper.connect_string)
    zk.start(timeout=20)
    bk = None
    try:
        start_bookies(procs, uri)
        bk = BlockingBookKeeper(uri, timeout=60)
        c = Churn(uri, procs)
        t1, t2 = "acme/orders/persistent/t1", "acme/logs/persistent/t2"
        plan = [  # role, entries, custom metadata
            ("t1", 60, pulsar_custom(t1)),
            ("t1", 60, pulsar_custom(t1)),
            ("t1-open", 30, pulsar_custom(t1)),
            ("t1-cursor", 5, pulsar_custom(t1, cursor="sub")),
            ("t2", 60, pulsar_custom(t2)),
            ("schema", 3, pulsar_custom("", component="schema", **{"pulsar/schemaId": "acme/orders/t1"})),
            ("orphan", 40, pulsar_custom(t1)),
            ("orphan", 40, pulsar_custom(t1)),
            ("app", 60, {"application": b"myapp"}),
            ("app-deleted", 60, {"application": b"myapp"}),
            ("app", 60, {"application": b"myapp"}),
            ("app-deleted", 60, {"application": b"myapp"}),
            ("plain", 20, {}),
        ]
        handles = [
            (role, n, bk.create(3, 2, 2, digest_type="CRC32C", password=b"", custom_metadata=custom))
            for role, n, custom in plan
        ]
        for e in range(max(n for _r, n, _c in plan)):
            for _role, n, lh in handles:
                if e < n:
                    lh.add(b"%06d" % e + b"x" * (SIZE - 6))
        for role, n, lh in handles:
            if role != "t1-open":
                lh.close()
            c.md[lh.ledger_id] = lh.metadata
            c.entries[lh.ledger_id] = n
            c.roles[role].append(lh.ledger_id)
        cursor = ml.ManagedCursorInfo(
            cursorsLedgerId=c.roles["t1-cursor"][0], markDeleteLedgerId=-1, markDeleteEntryId=-1
        )
        for name, ids, cursors in ((t1, c.ids("t1", "t1-open"), {"sub": cursor}), (t2, c.ids("t2"), {})):
            info = ml.ManagedLedgerInfo()
            for lid in ids:
                li = info.ledgerInfo.add(ledgerId=lid, timestamp=0)
                if lid not in c.roles["t1-open"]:
                    li.entries, li.size = c.entries[lid], c.entries[lid] * SIZE
            zk.create(f"{root}/managed-ledgers/{name}", info.SerializeToString(), makepath=True)
            for cname, value in cursors.items():
                zk.create(f"{root}/managed-ledgers/{name}/{cname}", value.SerializeToString())
        # every copy of every entry in the entry logs (the deleted ledgers' too) before they go
        total = sum(c.entries.values()) * 2
        wait_for(lambda: sum(live_entries(p) for p in procs) == total, what="every entry flushed to the entry logs")
        for lid in c.ids("app-deleted"):
            bk.delete(lid)
        yield c
    finally:
        if bk is not None:
            bk.close()
        zk.stop()
        zk.close()
        for p in procs:
            p.kill()


def disk_json(c: Churn, *args) -> dict:
    r = bkctl(c.uri, "--json", "disk", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def near(got: int, want: int) -> bool:
    return abs(got - want) <= TOLERANCE * max(want, 1)


def log_bytes_on_disk(proc: BookieProcess) -> int:
    return sum(p.stat().st_size for p in (Path(proc.ledger_dir) / "current").glob("*.bel"))


def test_disk_attributes_live_data_orphans_and_deleted_ledgers(churn):
    doc = disk_json(churn, "--older-than", "0s", "--by", "namespace")
    live = churn.on_bookie(churn.ids("t1", "t1-open", "t1-cursor", "t2", "schema", "app", "plain"))
    orphans = churn.on_bookie(churn.ids("orphan"))
    deleted = churn.on_bookie(churn.ids("app-deleted"))
    open_ones = churn.on_bookie(churn.ids("t1-open"))
    by_id = {b["bookie_id"]: b for b in doc["bookies"]}
    assert set(by_id) == {p.bookie_id for p in churn.procs}
    for p in churn.procs:
        b = by_id[p.bookie_id]
        assert b["kind"] == "bookied" and b["state"] == "writable"
        got_live = b["live"]["topics"] + b["live"]["applications"] + b["live"]["unlisted"]
        assert near(got_live, live[p.bookie_id]), (got_live, live[p.bookie_id])
        assert near(b["live"]["orphans"], orphans[p.bookie_id]), (b["live"], orphans[p.bookie_id])
        assert near(b["estimated_bytes"], open_ones[p.bookie_id]), (b["estimated_bytes"], open_ones[p.bookie_id])
        # the deleted ledgers' data: still live for the bookie until its GC removes them
        assert near(b["awaiting_gc_bytes"], deleted[p.bookie_id]), (b["awaiting_gc_bytes"], deleted[p.bookie_id])
        assert near(b["entry_log_bytes"], log_bytes_on_disk(p)), (b["entry_log_bytes"], log_bytes_on_disk(p))
        # bookied reports its journal's and index's sizes: counted as the bookie's data
        assert b["journal_bytes"] > 0 and b["index_bytes"] > 0 and not {"journal", "index"} & set(b["unread"]), b
        assert b["data_bytes"] == b["entry_log_bytes"] + b["journal_bytes"] + b["index_bytes"]
    assert doc["ledgers"]["open_estimated"] == 1 and doc["ledgers"]["open_unknown"] == 0
    assert doc["orphans"]["ledgers"] == 2
    groups = {(g["kind"], g["name"]): g for g in doc["groups"]}
    orders = churn.ids("t1", "t1-open", "t1-cursor", "schema")
    assert groups[("topic", "acme/orders")]["ledgers"] == len(orders)
    assert near(groups[("topic", "acme/orders")]["stored_bytes"], sum(churn.on_bookie(orders).values()))
    assert groups[("topic", "acme/logs")]["ledgers"] == 1
    assert groups[("application", "myapp")]["ledgers"] == 2
    assert groups[("orphan", "acme/orders")]["ledgers"] == 2
    summary = doc["summary"]
    assert "is orphans (list: `bkctl pulsar orphans`)" in summary, summary
    assert "deleted ledgers the next GC pass removes" in summary, summary


def test_disk_by_topic_shows_components_and_young_unlisted_ledgers(churn):
    doc = disk_json(churn, "--by", "topic")  # the default age caution: the 'orphans' are too young to judge
    comps = {(g["kind"], g["name"], g["component"]) for g in doc["groups"]}
    t1 = "persistent://acme/orders/t1"
    assert {
        ("topic", t1, "data"),
        ("topic", t1, "cursor"),
        ("topic", t1, "schema"),
        ("unlisted", t1, "data"),
    } <= comps, comps
    assert doc["orphans"]["ledgers"] == 0 and doc["orphans"]["young"] == 2
    assert "orphans" not in doc["summary"]


#: the advice for each place dead bytes wait in (the largest one is named in the one-line answer)
ADVICE = {
    "below_minor": "(in logs under the minor threshold 0.2: no compaction takes it: minorCompactionInterval is "
    "0 (not periodic) and forceAllowCompaction=false: a forced pass does not compact either; set "
    "forceAllowCompaction=true (then `bkctl bookie gc ",
    "below_major": "(in logs between the minor threshold 0.2 and the major 0.8: no compaction takes it: "
    "majorCompactionInterval is 0 (not periodic) and forceAllowCompaction=false",
    "above_major": "(in logs over the major threshold 0.8: no compaction takes it; raise majorCompactionThreshold",
    "active": "(in the entry log being written: compactable once it reaches logSizeLimit",
}


def dead_by_class(churn) -> dict[str, int]:
    """The bookies' own entry logs (gc_details, read here) by what would reclaim their dead bytes."""
    out = defaultdict(int)
    for p in churn.procs:
        logs = p.admin("/api/v1/bookie/gc_details")[0]["entryLogs"]
        newest = max(log["logId"] for log in logs)
        for log in logs:
            ratio = log["liveRatio"]
            key = (
                "active"
                if log["logId"] == newest
                else "below_minor"
                if ratio < 0.2
                else "below_major"
                if ratio < 0.8
                else "above_major"
            )
            out[key] += log["sizeBytes"] - log["liveBytes"]
    return out


def test_disk_after_gc_says_what_waits_for_compaction(churn):
    for p in churn.procs:
        r = bkctl(churn.uri, "bookie", "gc", p.bookie_id, "--wait", *(["--major"] if p is churn.procs[0] else []))
        assert r.returncode == 0, r.stderr
        # intervals 0 and forceAllowCompaction=false: the forced pass compacts nothing, and says why
        assert re.search(
            r"(?m)^compaction\s+none: majorCompactionInterval is 0 \(not periodic\) and "
            r"forceAllowCompaction=false",
            r.stdout,
        ), r.stdout
    doc = disk_json(churn, "--older-than", "0s")
    deleted = churn.on_bookie(churn.ids("app-deleted"))
    for b in doc["bookies"]:
        c = b["compaction"]
        assert b["awaiting_gc_bytes"] <= TOLERANCE * deleted[b["bookie_id"]], b
        # what GC freed by deleting whole logs is gone; the rest of the deleted data is dead in the logs
        assert 0 < c["dead_bytes"] <= deleted[b["bookie_id"]] + c["entry_logs"] * 64, c
    # (where the flushes cut the logs decides how live each one is: the advice follows what the logs say)
    classes = dead_by_class(churn)
    t = doc["totals"]
    assert {k: t[f"{k}_dead_bytes" if k != "active" else "active_log_dead_bytes"] for k in ADVICE} == {
        k: classes[k] for k in ADVICE
    }
    largest = max(ADVICE, key=lambda k: classes[k])
    summary = doc["summary"]
    assert f"is waiting for compaction {ADVICE[largest]}" in summary, (classes, summary)
    assert "deleted ledgers" not in summary, summary


def test_disk_one_bookie_in_text(churn):
    target = churn.procs[1].bookie_id
    r = bkctl(churn.uri, "disk", target)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "used is live data" in lines[0]
    assert any(line.startswith(target) for line in lines)
    assert not any(line.startswith(churn.procs[0].bookie_id) for line in lines), r.stdout
    assert "not read: journal" not in r.stdout and re.search(r"journal\s+index\s+other", r.stdout), r.stdout


def test_disk_names_read_only_bookies_and_why_first(churn):
    target = churn.procs[2].bookie_id
    assert bkctl(churn.uri, "bookie", "readonly", target, "on").returncode == 0
    try:
        r = bkctl(churn.uri, "disk")
        assert r.returncode == 0, r.stderr
        first = r.stdout.splitlines()[0]
        assert first.startswith(f"read-only: {target} (set through the HTTP admin API; "), first
        assert "used on its filesystem is not bookie data)" in first, first
        state = bkctl(churn.uri, "bookie", "state", target)
        assert re.search(r"readOnlyReasons\s+admin: set through the HTTP admin API", state.stdout), state.stdout
        info = bkctl(churn.uri, "bookie", "info", target)
        assert re.search(r"read-only because\s+admin: set through the HTTP admin API", info.stdout), info.stdout
    finally:
        assert bkctl(churn.uri, "bookie", "readonly", target, "off").returncode == 0
    assert not bkctl(churn.uri, "disk").stdout.startswith("read-only")


def test_a_bookie_the_cluster_does_not_know_is_exit_3(metadata_uri, zkstore):
    zkstore.cookies.put("127.0.0.1:7", b"cookie")  # down: a cookie, no registration -- known
    known = bkctl(metadata_uri, "--json", "disk", "127.0.0.1:7")
    assert known.returncode == 0, known.stderr
    assert [b["state"] for b in json.loads(known.stdout)["bookies"]] == ["down"]
    bogus = bkctl(metadata_uri, "disk", "BOGUS:1")
    assert bogus.returncode == 3 and "no such bookie: BOGUS:1" in bogus.stderr, bogus.stderr
