"""The smaller findings of issue 23 (item 8), each through the real CLI against real ZooKeeper and
real bookieds: metadata dump to stdout, the root hint, the open-ledger read hint, rack set of an
unknown bookie, ensemble order in ledger list, sandbox bookies' HTTP admin and partial starts
(bkctl(1)'s exit status 2: tests/repo/test_docs_in_sync.py)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from bkctl.sandbox import cluster
from bkctl.sandbox import state as sandbox_state
from bkctl.wire.metadata.ledger import LedgerMetadata, parse_ledger_metadata
from tests.support.cli import BKCTL, REPO, json_lines, ok, one_line_error
from tests.support.cli import bkctl_bytes as bkctl
from tests.support.ports import held

pytestmark = pytest.mark.timeout(300)


def test_metadata_dump_to_stdout(metadata_uri, zkstore, tmp_path):
    lid, _ = zkstore.ledgers.create(LedgerMetadata.new(["10.0.0.1:3181", "10.0.0.2:3181"], 2, 2))
    stored = zkstore.ledgers.read_bytes(lid)[0]
    r = bkctl(metadata_uri, "ledger", "metadata", "dump", lid, "-", timeout=60)
    assert r.returncode == 0 and r.stdout == stored, r.stderr
    assert "written to stdout" in r.stderr.decode()
    assert parse_ledger_metadata(r.stdout).bookies == ("10.0.0.1:3181", "10.0.0.2:3181")
    assert not (REPO / "-").exists()
    one_line_error(bkctl(metadata_uri, "--json", "ledger", "metadata", "dump", lid, "-"), 2)


def test_a_root_below_a_cluster_suggests_the_cluster(metadata_uri, tmp_path):
    err = one_line_error(bkctl(metadata_uri + "/x", "ledger", "list"), 3)
    root = "/" + metadata_uri.split("//", 1)[1].split("/", 1)[1]
    assert f"(did you mean {root}?)" in err and "underreplication" not in err


def test_ledger_list_shows_bookies_in_ensemble_order(metadata_uri, zkstore):
    ensemble = ["10.0.0.9:3181", "10.0.0.1:3181", "10.0.0.5:3181"]
    lid, _ = zkstore.ledgers.create(
        LedgerMetadata.new(ensemble, 2, 2).with_ensemble_change(5, ["10.0.0.9:3181", "10.0.0.3:3181", "10.0.0.5:3181"])
    )
    out = ok(bkctl(metadata_uri, "ledger", "list", "--state", "open"))
    row = next(line for line in out.splitlines() if line.split() and line.split()[0] == str(lid))
    assert "10.0.0.9:3181, 10.0.0.1:3181, 10.0.0.5:3181, 10.0.0.3:3181" in row


def test_rack_set_refuses_a_bookie_the_cluster_does_not_know(bookie_cluster, metadata_uri, zkstore, rack_map):
    [bookie] = bookie_cluster(1)
    err = one_line_error(bkctl(metadata_uri, "bookie", "rack", "set", "foo", "--rack", "/r1"), 3)
    assert "unknown bookie foo" in err and "--allow-unknown-id" in err
    assert zkstore.racks.read()[0] == {}
    ok(bkctl(metadata_uri, "bookie", "rack", "set", bookie.bookie_id, "--rack", "/r1"))
    ok(bkctl(metadata_uri, "bookie", "rack", "set", "bk9.example.com:3181", "--rack", "/r2", "--allow-unknown-id"))
    assert set(zkstore.racks.read()[0]["default"]) == {bookie.bookie_id, "bk9.example.com:3181"}


def test_reading_an_open_v2_ledger_says_why_nothing_shows(bookie_cluster, metadata_uri):
    bookie_cluster(3)
    lid = json.loads(ok(bkctl(metadata_uri, "--json", "ledger", "create")))["ledger_id"]
    ok(bkctl(metadata_uri, "--protocol", "v2", "ledger", "add", lid, "-", stdin=b"a\nb\nc\n"))
    r = bkctl(metadata_uri, "ledger", "read", lid)
    assert r.returncode == 0
    err = r.stderr.decode()
    assert f"ledger {lid} is open" in err and "last add confirmed" in err and f"ledger close {lid}" in err
    ok(bkctl(metadata_uri, "ledger", "close", lid))
    r = bkctl(metadata_uri, "ledger", "read", lid)
    assert r.stdout.decode().split("\n")[:3] == ["0\ta", "1\tb", "2\tc"] and "is open" not in r.stderr.decode()


def sandbox(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(REPO))
    env.pop("BKCTL_METADATA_URI", None)
    return subprocess.run(
        [*BKCTL, "sandbox", *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=timeout
    )


@pytest.fixture
def sandbox_dir(tmp_path):
    d = tmp_path / "sbx"
    yield d
    if d.exists() and sandbox_state.load_state(d):
        cluster.sandbox_down(d, grace=5)


def test_sandbox_bookies_have_http_admin_and_up_starts_every_bookie_it_can(sandbox_dir):
    r = sandbox("up", "--bookies", "2", "--dir", str(sandbox_dir), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    uri = doc["uri"]
    for b in doc["bookies"]:
        assert b["http_port"] and b["http_port"] != b["port"]
        state = json.loads(ok(bkctl(uri, "--json", "bookie", "state", b["bookie_id"])))
        assert state["state"]["running"] is True
    status = sandbox("status", "--dir", str(sandbox_dir))
    for b in doc["bookies"]:
        assert f"HTTP admin 127.0.0.1:{b['http_port']}" in status.stdout

    # bookie 0's port taken by someone else: it cannot start, the others still do
    assert sandbox("down", "--dir", str(sandbox_dir)).returncode == 0
    first, second = doc["bookies"]
    with held(first["port"]):
        r = sandbox("up", "--bookies", "3", "--dir", str(sandbox_dir), "--json")
    assert r.returncode == 1, r.stderr
    again = json.loads(r.stdout)
    assert [f["bookie_id"] for f in again["failed"]] == [first["bookie_id"]]
    started = {b["bookie_id"] for b in again["bookies"] if b["pid"]}
    assert second["bookie_id"] in started and len(started) == 2  # bookie 1 and a new bookie 2
    assert f"bookie {first['bookie_id']} did not start" in r.stderr
    rows = json_lines(ok(bkctl(again["uri"], "--json", "bookie", "list", "--writable")))
    assert {row["bookie_id"] for row in rows} == started
