"""bkctl ledger fsck against real bookieds and ZooKeeper: each planted fault named with its
cause and nothing else, the guarded fixes (dry run first), autorecovery repairing what was
marked, and a second fsck clean but for what is lost."""

from __future__ import annotations

from tests.support.cli import bkctl, json_lines, ok
from tests.support.ledgers import make_ledger
from tests.support.planted import closed_metadata, payload, put
from tests.support.waiting import wait_for

N = 12  # entries per planted ledger


def by_ledger(out: str) -> dict[int, dict]:
    docs = json_lines(out)
    assert len({d["ledger_id"] for d in docs}) == len(docs), docs  # one finding per ledger
    return {d["ledger_id"]: d for d in docs}


def plant(zkstore, ledger_id, segments, holdings, ports, flipped=None, last=N - 1, wq=2):
    zkstore.ledgers.create(closed_metadata(ledger_id, segments, last, wq), ledger_id=ledger_id)
    for bookie, entries in holdings.items():
        put(ports[bookie], ledger_id, entries, (flipped or {}).get(bookie, ()))


def test_fsck_names_each_planted_fault_and_the_fixes_make_it_clean(
    bookie_cluster, metadata_uri, zkstore, writer, ar_daemon
):
    uri = metadata_uri
    procs = bookie_cluster(4)
    ports = {p.bookie_id: p.port for p in procs}
    a, b, c, d = sorted(ports)
    every = range(N)
    healthy = make_ledger(writer, 3, 2, entries=40)
    plant(zkstore, 1001, [(0, [a, b])], {a: every, b: [e for e in every if e not in (4, 5, 6)]}, ports)
    plant(zkstore, 1002, [(0, [a, b])], {a: every, b: every}, ports, flipped={b: [7]})
    plant(zkstore, 1003, [(0, [a, b])], {c: every, d: every}, ports)  # the metadata names a, b
    plant(zkstore, 1004, [(0, [a, b]), (6, [c, d])], {a: range(6), b: range(6)}, ports)  # 6..11: no copy
    plant(zkstore, 1005, [(0, [a, b])], {}, ports)  # only in metadata
    zkstore.underreplication.mark(1006, [a])  # a deleted ledger still marked
    zkstore.underreplication.mark(healthy, [b])  # a healthy ledger marked

    r = bkctl(uri, "--json", "ledger", "fsck", "--all")
    assert r.returncode == 9, r.stderr  # the worst: data lost
    found = by_ledger(r.stdout)
    assert {lid: f["kind"] for lid, f in found.items()} == {
        healthy: "marked_healthy",
        1001: "missing",
        1002: "corrupt",
        1003: "misplaced",
        1004: "data_lost",
        1005: "metadata_only",
        1006: "marked_deleted",
    }
    assert found[1001]["missing"] == {b: [[4, 6]]} and found[1001]["marked"] is False
    assert [(x["entry_id"], x["bookie"]) for x in found[1002]["bad_replicas"]] == [(7, b)]
    moves = {(m["bookie"], m["holder"]) for m in found[1003]["moves"]}
    assert moves == {(a, c), (b, d)}
    assert found[1004]["lost_entries"] == [[6, 11]]
    assert found[1005]["lost_entries"] == [[0, 11]]
    assert found[1006]["marked_replicas"] == [a]
    assert "ledgers with findings" in r.stderr

    human = bkctl(uri, "ledger", "fsck", "1001", "1003")  # a filter; text for people
    assert human.returncode == 8 and "ledger 1001: missing" in human.stdout and "ledger 1003: misplaced" in human.stdout
    assert "1002" not in human.stdout

    before = {lid: zkstore.ledgers.read_bytes(lid) for lid in (1001, 1002, 1003)}
    refused = bkctl(uri, "ledger", "fsck", "--fix", "ensemble")  # not a terminal, no --force
    assert refused.returncode == 2 and "--force" in refused.stderr
    dry = by_ledger(
        bkctl(
            uri,
            "--json",
            "ledger",
            "fsck",
            "--all",
            "--fix",
            "mark",
            "--fix",
            "ensemble",
            "--fix",
            "unmark",
            "--dry-run",
        ).stdout
    )
    assert {lid: f["fix"]["status"] for lid, f in dry.items() if "fix" in f} == {
        1001: "would_apply",
        1002: "would_apply",
        1003: "would_apply",
        1006: "would_apply",
    }
    assert {lid: zkstore.ledgers.read_bytes(lid) for lid in before} == before
    assert zkstore.underreplication.get(1001) is None and zkstore.underreplication.get(1006) is not None

    fixed = by_ledger(
        bkctl(
            uri, "--json", "ledger", "fsck", "--all", "--fix", "mark", "--fix", "ensemble", "--fix", "unmark", "--force"
        ).stdout
    )
    assert {lid: f["fix"]["status"] for lid, f in fixed.items() if "fix" in f} == {
        1001: "applied",
        1002: "applied",
        1003: "applied",
        1006: "applied",
    }
    assert zkstore.underreplication.get(1001).replicas == (b,)
    assert zkstore.underreplication.get(1002).replicas == (b,)
    assert zkstore.underreplication.get(1006) is None
    assert zkstore.ledgers.read(1003)[0].ensembles == ((0, (c, d)),)

    # autorecovery copies what the marks name (entries missing in the middle, a corrupt copy)
    ar_daemon("ar-fsck", "auditorPeriodicBookieCheckInterval=0", "auditorPeriodicCheckInterval=0")
    wait_for(
        what="the marks handled",
        predicate=lambda: all(zkstore.underreplication.get(lid) is None for lid in (1001, 1002, healthy)),
        timeout=120,
    )
    again = bkctl(uri, "--json", "ledger", "fsck", "--all")
    assert {lid: f["kind"] for lid, f in by_ledger(again.stdout).items()} == {1004: "data_lost", 1005: "metadata_only"}
    assert again.returncode == 9
    clean = bkctl(uri, "--json", "ledger", "fsck", "--all", "1001-1003", str(healthy))
    assert clean.returncode == 0 and clean.stdout == "", clean.stderr
    for lid in (1001, 1002, 1003):  # every repairable ledger reads back as written
        entries = json_lines(ok(bkctl(uri, "--json", "ledger", "read", lid)))
        assert [e["payload"] for e in entries] == [payload(lid, e).decode() for e in range(N)]


def test_fsck_bad_arguments_are_usage_errors(metadata_uri):
    r = bkctl(metadata_uri, "ledger", "fsck", "x-y")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    r = bkctl(metadata_uri, "ledger", "fsck", "--dry-run")
    assert r.returncode == 2 and "--fix" in r.stderr
    r = bkctl(metadata_uri, "--json", "ledger", "fsck")  # an empty cluster is clean
    assert r.returncode == 0 and r.stdout == ""
    r = bkctl(metadata_uri, "--json", "ledger", "fsck", "77", "100-200")  # a range names what exists in it
    assert r.returncode == 3 and "ledger 77: no such ledger" in r.stderr and r.stdout == ""
