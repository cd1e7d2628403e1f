"""bkctl bookie list --disk, readonly, gc, state and bookied's day-2 HTTP endpoints, on real bookieds."""

import json
import time
import urllib.request

import pytest

from tests.support.cli import bkctl

pytestmark = pytest.mark.integration


def _http(zkstore, bookie_id):
    from bkctl.ops.bookie_http import http_address

    return http_address(zkstore, bookie_id)


def _get(address, path, method="GET", body=None):
    req = urllib.request.Request(f"http://{address}{path}", method=method, data=body)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def test_bookie_list_disk(metadata_uri, zkstore, bookie_cluster):
    bookies = bookie_cluster(3)
    zkstore.cookies.put("127.0.0.1:9", b'5\nbookieHost: "127.0.0.1:9"\njournalDir: "/j"\nledgerDirs: "1\\t/l"\n')
    res = bkctl(metadata_uri, "--json", "bookie", "list", "--disk")
    assert res.returncode == 0, res.stderr
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    doc = {"bookies": lines[:-1], **lines[-1]}  # JSON lines, the totals last
    rows = {r["bookie_id"]: r for r in doc["bookies"]}
    assert set(rows) == {b.bookie_id for b in bookies} | {"127.0.0.1:9"}
    for b in bookies:
        r = rows[b.bookie_id]
        assert r["state"] == "writable" and r["total_bytes"] > 0 and 0 <= r["free_bytes"] <= r["total_bytes"]
        assert r["used_bytes"] == r["total_bytes"] - r["free_bytes"]
    assert rows["127.0.0.1:9"]["state"] == "down" and rows["127.0.0.1:9"]["total_bytes"] is None
    total = doc["total"]
    assert total["answered"] == 3 and total["bookies"] == 4
    assert total["total_bytes"] == sum(rows[b.bookie_id]["total_bytes"] for b in bookies)
    human = bkctl(metadata_uri, "bookie", "list", "--disk")
    assert "total (3/4 answered)" in human.stdout and "down" in human.stdout


def test_readonly_state_and_gc_through_http(metadata_uri, zkstore, bookie_cluster):
    bookies = bookie_cluster(3, httpServerEnabled="true", httpServerPort=0)
    b = bookies[0].bookie_id
    state = json.loads(bkctl(metadata_uri, "--json", "bookie", "state", b).stdout)
    assert state["state"]["running"] is True and state["state"]["readOnly"] is False
    assert state["registration"] == "writable"

    on = bkctl(metadata_uri, "--json", "bookie", "readonly", b, "on")
    assert on.returncode == 0, on.stderr
    assert json.loads(on.stdout) == {
        "bookie_id": b,
        "http": state["http"],
        "read_only": True,
        "registration": "read-only",
    }
    assert b in zkstore.registration.readonly_bookies() and b not in zkstore.registration.writable_bookies()
    disk = [json.loads(line) for line in bkctl(metadata_uri, "--json", "bookie", "list", "--disk").stdout.splitlines()]
    assert {r["bookie_id"]: r["state"] for r in disk[:-1]}[b] == "read-only"
    off = bkctl(metadata_uri, "--json", "bookie", "readonly", b, "off")
    assert off.returncode == 0 and json.loads(off.stdout)["registration"] == "writable"
    assert b in zkstore.registration.writable_bookies()

    ledger_id = json.loads(bkctl(metadata_uri, "--json", "ledger", "create", "-e", "3", "-w", "3", "-a", "3").stdout)[
        "ledger_id"
    ]
    assert bkctl(metadata_uri, "ledger", "add", str(ledger_id), "x", "y").returncode == 0
    assert bkctl(metadata_uri, "ledger", "close", str(ledger_id)).returncode == 0
    assert bkctl(metadata_uri, "ledger", "delete", str(ledger_id), "--force").returncode == 0
    ran = bkctl(metadata_uri, "--json", "bookie", "gc", b)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["message"] == f"Triggered GC on BookieServer: {b}"
    deadline = time.monotonic() + 20
    while True:
        status = json.loads(bkctl(metadata_uri, "--json", "bookie", "gc", b, "--status").stdout)
        details = status["details"][0]
        if details["gcRuns"] >= 1 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert status["triggered"] is False and details["ledgersRemoved"] >= 1
    assert set(details) >= {
        "forceCompacting",
        "majorCompacting",
        "minorCompacting",
        "lastMajorCompactionTime",
        "lastMinorCompactionTime",
        "majorCompactionCounter",
        "minorCompactionCounter",
    }

    assert bkctl(metadata_uri, "bookie", "state", "127.0.0.1:1").returncode == 3
    no_http = bookie_cluster(1)[0]
    res = bkctl(metadata_uri, "bookie", "state", no_http.bookie_id)
    assert res.returncode == 1 and "HTTP endpoint" in res.stderr


def test_bookied_serves_java_disk_endpoints(metadata_uri, zkstore, bookie_cluster):
    bookie = bookie_cluster(1, httpServerEnabled="true", httpServerPort=0)[0]
    address = _http(zkstore, bookie.bookie_id)
    files = _get(address, "/api/v1/bookie/list_disk_file")
    assert set(files) == {"journal files", "entrylog files", "index files"}
    assert files["journal files"].endswith("\t") and ".bjn\t" in files["journal files"]
    assert set(_get(address, "/api/v1/bookie/list_disk_file?file_type=journal")) == {"journal files"}
    marks = _get(address, "/api/v1/bookie/last_log_mark")
    ((key, value),) = marks.items()
    assert key.startswith("LastLogMark: Journal Id - ") and key.endswith(".txn)") and value.startswith("Pos - ")
    assert _get(address, "/api/v1/bookie/gc")["is_in_force_gc"] == "false"
    assert _get(address, "/api/v1/bookie/expand_storage", "PUT") == "Success expand storage"


def test_bookie_gc_needs_only_its_http_address_and_the_global_timeout_stays_zookeepers(
    metadata_uri, zkstore, bookie_cluster
):
    b = bookie_cluster(1, httpServerEnabled="true", httpServerPort=0)[0]
    address = _http(zkstore, b.bookie_id)
    nowhere = "zk+hierarchical://127.0.0.1:1/ledgers"  # no ZooKeeper there: --http is all gc needs
    status = bkctl(nowhere, "--json", "bookie", "gc", b.bookie_id, "--status", "--http", address, "--timeout", "2")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["http"] == address
    waited = bkctl(nowhere, "--json", "bookie", "gc", b.bookie_id, "--http", address, "--wait", "--wait-timeout", "120")
    assert waited.returncode == 0, waited.stderr
    doc = json.loads(waited.stdout)
    assert doc["triggered"] and doc["error"] is None and not doc["status"]["gcRunning"]
    assert f"garbage collection of {b.bookie_id}: triggered" in waited.stderr  # piped: a line, not a bar
    # without --http the registration is read from ZooKeeper, given the global --timeout to answer
    unreachable = bkctl(nowhere, "bookie", "gc", b.bookie_id, "--status", "--timeout", "2")
    assert unreachable.returncode == 5 and "within 2s" in unreachable.stderr, unreachable.stderr
