"""bookied --salvage: a bookie that refuses to start (its journal directory damaged), holding
the only copies of some ledgers, served read-only under its old id; bookied's autorecovery
copies everything off it and every entry reads back as written."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from tests.support.cli import bkctl, json_lines, ok
from tests.support.ledgers import assert_fully_replicated, make_ledger, most_named
from tests.support.waiting import wait_for


@pytest.mark.parametrize("repair", ["autorecovery", "recover"])  # bookied's daemon, or `bkctl recover ID --force`
def test_salvage_serves_a_bookie_that_will_not_start(
    repair, bookie_cluster, bookies, metadata_uri, zkstore, writer, ar_daemon
):
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
    assert {f["kind"] for f in json_lines(before.stdout)} == {"data_lost"} and before.returncode == 9

    salvage = bookies("salvage")
    salvage.launch("--salvage", str(victim.base))
    salvage.wait_listening(time.monotonic() + 60)
    wait_for(what="the salvage registered", predicate=lambda: vid in zkstore.registration.readonly_bookies())
    assert "salvage: serving" in salvage.log_tail(50)
    served = bkctl(metadata_uri, "--json", "ledger", "read", only_there[0], "--bookie", vid)
    rows = json_lines(ok(served))  # straight from the salvaged bookie, each digest checked
    assert [(r["status"], r["payload"]) for r in rows] == [("ok", f"e{only_there[0]}-{i}") for i in range(60)]

    every = single + double
    if repair == "autorecovery":
        ar_daemon("ar-salvage", "auditorPeriodicBookieCheckInterval=0", "auditorPeriodicCheckInterval=0")
    else:  # as on a cluster whose auditor is Java's, which counts a read-only bookie alive
        refused = bkctl(metadata_uri, "recover", vid)
        assert refused.returncode == 4 and "running (registered)" in refused.stderr
        done = bkctl(metadata_uri, "--json", "recover", vid, "--force", timeout=300)
        assert done.returncode == 0, done.stderr
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


VECTORS = Path(__file__).resolve().parents[1] / "vectors"
JAVA_ID = "127.0.0.1:3181"  # bk1 of the captured Java cluster (its cookie says so)


def java_bookie_dirs(base: Path, storage: str) -> Path:
    """bk1's captured files (tests/vectors/disk) laid out as on its disk: Interleaved as
    captured, or ``db``: the same entry logs with a DbLedgerStorage RocksDB index made from
    its index files (bookie/storage/ldb/LedgerMetadataIndex.java and EntryLocationIndex.java's
    rows).  Ledger 0's index is damaged in both (a record salvage must skip)."""
    import struct

    from bkctl.wire.codecs.javadisk import parse_index

    for f in (VECTORS / "disk").glob("bk1__*.bin"):
        dest = base / f.name[:-4].replace("__", "/").removesuffix(".head")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, dest)
    current = base / "bk1" / "ledgers" / "current"
    if storage == "db":
        from rocksdict import Options, Rdict

        ledgers, locations = {}, {}
        for idx_file in sorted(current.glob("*/*/*.idx")):
            ledger_id = int(idx_file.stem, 16)
            idx = parse_index(idx_file.read_bytes())
            key = idx.master_key
            ledgers[struct.pack(">q", ledger_id)] = (
                b"\x08\x01" + (b"\x10\x01" if idx.fenced else b"") + b"\x1a" + bytes([len(key)]) + key
            )
            for entry_id, (log_id, offset) in idx.locations.items():
                locations[struct.pack(">qq", ledger_id, entry_id)] = struct.pack(">q", log_id << 32 | offset)
        locations[struct.pack(">qq", 0, 1)] = struct.pack(">q", 1 << 40)  # past its log's end: damaged
        shutil.rmtree(current / "0")
        for name, rows in (("ledgers", ledgers), ("locations", locations)):
            db = Rdict(str(current / name), Options(raw_mode=True))
            for k, v in rows.items():
                db[k] = v
            db.close()
            (current / name / "rocksdict-config.json").unlink()  # Java's databases have none
    else:
        (current / "0" / "0" / "0.idx").write_bytes(b"not an index file")
    return base / "bk1"


@pytest.mark.parametrize("storage", ["interleaved", "db"])
def test_salvage_serves_a_java_bookies_storage(
    storage, tmp_path, bookie_cluster, bookies, metadata_uri, zkstore, ar_daemon
):
    procs = bookie_cluster(3)
    zkstore.underreplication.set_lost_bookie_recovery_delay(0)
    root = java_bookie_dirs(tmp_path / "java", storage)
    for ledger_id in (0, 5, 12):  # 12: its one copy on bk1; 5: on bk1 and bk3, which is gone too
        zkstore.ledgers.restore_bytes(
            ledger_id, (VECTORS / "zk" / "raw" / f"ledgers__00__0000__L{ledger_id:04d}.bin").read_bytes()
        )
    salvage = bookies("salvage-java")
    salvage.launch("--salvage", str(root))
    salvage.wait_listening(time.monotonic() + 60)
    wait_for(what="the salvage registered", predicate=lambda: JAVA_ID in zkstore.registration.readonly_bookies())
    if storage == "interleaved":  # a damaged index file: its ledger left out at the start
        assert "; 1 damaged records left out" in salvage.log_tail(100)
    rows = json_lines(bkctl(metadata_uri, "--json", "ledger", "read", 0, "--bookie", JAVA_ID).stdout)
    # bk1's journal still holds ledger 0's entries: what the damaged index lost is served from it
    assert [(r["entry_id"], r["status"]) for r in rows] == [(1, "ok"), (2, "ok")]
    if storage == "db":  # a location past its log's end: reported when read, not fatal
        assert "(entry 0/1): served from its journal copy" in salvage.log_tail(100)
    served = {lid: json_lines(ok(bkctl(metadata_uri, "--json", "ledger", "read", lid))) for lid in (5, 12)}
    assert [e["payload"] for e in served[12]] == ["dig-DUMMY-0", "dig-DUMMY-1"]
    assert len(served[5]) == 3

    ar_daemon(f"ar-{storage}", "auditorPeriodicBookieCheckInterval=0", "auditorPeriodicCheckInterval=0")
    wait_for(
        what="ledgers 5 and 12 off the Java bookies",
        predicate=lambda: (
            not any(b.startswith("127.0.0.1:318") for lid in (5, 12) for b in zkstore.ledgers.read(lid)[0].bookies)
        ),
        timeout=180,
    )
    wait_for(
        what="their marks gone",
        predicate=lambda: all(zkstore.underreplication.get(lid) is None for lid in (5, 12)),
        timeout=60,
    )
    salvage.stop()
    live = {p.bookie_id: p.port for p in procs}
    for lid in (5, 12):
        assert assert_fully_replicated(zkstore, live, lid, {JAVA_ID}) == len(served[lid])
        again = json_lines(ok(bkctl(metadata_uri, "--json", "ledger", "read", lid)))
        assert again == served[lid]  # byte-equal: the same payloads and lengths as the salvage served
