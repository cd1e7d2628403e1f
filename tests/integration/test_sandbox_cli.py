"""``bkctl sandbox up/status/down`` with a real ZooKeeper."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from bkctl.commands.sandbox import sandbox
from bkctl.sandbox import cluster
from bkctl.sandbox import state as sandbox_state
from bkctl.sandbox.zookeeper import is_zookeeper_process, pid_alive, server_answers
from bkctl.wire import fastpath
from bkctl.wire.metadata.zk import ZKMetadataStore
from tests.support.cli import env_for, run_bkctl

pytestmark = pytest.mark.integration


@pytest.fixture
def sandbox_dir(tmp_path):
    """A sandbox directory whose recorded processes are stopped (by checked pid) after the test."""
    d = tmp_path / "sbx"
    yield d
    state = sandbox_state.load_state(d) if d.exists() else None
    if state:
        cluster.sandbox_down(d, grace=5)


def invoke(*args: str):
    result = CliRunner().invoke(sandbox, list(args), catch_exceptions=False)
    return result


def test_up_status_down_json(sandbox_dir):
    result = invoke("up", "--bookies", "0", "--dir", str(sandbox_dir), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert set(doc) == {
        "uri", "zookeeper", "bookies", "failed", "retired", "dir", "autorecovery", "tls", "settings", "s3"
    }  # fmt: skip
    assert doc["failed"] == [] and doc["s3"] is None
    assert doc["tls"] is None
    assert doc["bookies"] == [] and doc["dir"] == str(sandbox_dir.resolve()) and doc["autorecovery"] is False
    port, pid = doc["zookeeper"]["port"], doc["zookeeper"]["pid"]
    assert doc["uri"] == f"zk+hierarchical://127.0.0.1:{port}/ledgers"
    assert is_zookeeper_process(pid, sandbox_dir / "zookeeper")
    assert server_answers("127.0.0.1", port)
    with ZKMetadataStore(doc["uri"], twins=fastpath.selected()) as store:
        assert store.cluster.exists() and store.cluster.layout().manager == "hierarchical"
        instance_id = store.cluster.instance_id()

    # up again: same ZooKeeper, cluster untouched
    again = json.loads(invoke("up", "--bookies", "0", "--dir", str(sandbox_dir), "--json").stdout)
    assert again == doc
    with ZKMetadataStore(doc["uri"], twins=fastpath.selected()) as store:
        assert store.cluster.instance_id() == instance_id

    status = invoke("status", "--dir", str(sandbox_dir), "--json")
    assert status.exit_code == 0
    st = json.loads(status.stdout)
    assert st["zookeeper"] == {"port": port, "pid": pid, "alive": True, "heap_mb": 256}
    assert st["running"] is True

    down = invoke("down", "--dir", str(sandbox_dir), "--json")
    assert down.exit_code == 0
    assert json.loads(down.stdout)["stopped"] == [{"kind": "zookeeper", "port": port, "pid": pid}]
    assert not pid_alive(pid)

    st = json.loads(invoke("status", "--dir", str(sandbox_dir), "--json").stdout)
    assert st["zookeeper"]["alive"] is False and st["running"] is False
    assert json.loads(invoke("down", "--dir", str(sandbox_dir), "--json").stdout)["stopped"] == []


def test_zk_heap_sizes_the_zookeeper_for_a_production_sized_cluster_and_is_remembered(sandbox_dir):
    """--zk-heap, remembered; the ZooKeeper takes Pulsar's 10 MB znodes."""
    from bkctl.sandbox.zookeeper import process_cmdline

    doc = json.loads(invoke("up", "--bookies", "0", "--zk-heap", "384", "--dir", str(sandbox_dir), "--json").stdout)
    assert doc["zookeeper"]["heap_mb"] == 384
    assert "-Xmx384m" in process_cmdline(doc["zookeeper"]["pid"])
    refused = invoke("up", "--bookies", "0", "--zk-heap", "512", "--dir", str(sandbox_dir))
    assert refused.exit_code == 2 and "already runs with a 384 MiB heap" in refused.output
    # a znode over ZooKeeper's 1 MiB default, as Pulsar's (a managed ledger of 30,000 ledgers is
    # 6 MB: apache/pulsar#11490), is taken and read back by kazoo and by the walks' scanner
    from kazoo.client import KazooClient

    from bkctl.wire.metadata.zk.scan import ZnodeScanner

    hosts = f"127.0.0.1:{doc['zookeeper']['port']}"
    big = bytes(range(256)) * (6 * 4096)
    zk = KazooClient(hosts=hosts)
    zk.start()
    try:
        zk.create("/managed-ledgers-big", big)
        assert zk.get("/managed-ledgers-big")[0] == big
    finally:
        zk.stop()
        zk.close()
    with ZnodeScanner(hosts) as scanner:
        assert [got.data for got in scanner.get_many(["/managed-ledgers-big"] * 2)] == [big, big]
    cluster.sandbox_down(sandbox_dir, grace=5)
    again = json.loads(invoke("up", "--bookies", "0", "--dir", str(sandbox_dir), "--json").stdout)
    assert again["zookeeper"]["heap_mb"] == 384 and "-Xmx384m" in process_cmdline(again["zookeeper"]["pid"])


def test_up_resumes_the_same_cluster_after_down(sandbox_dir):
    doc = json.loads(invoke("up", "--bookies", "0", "--dir", str(sandbox_dir), "--json").stdout)
    with ZKMetadataStore(doc["uri"], twins=fastpath.selected()) as store:
        instance_id = store.cluster.instance_id()
    invoke("down", "--dir", str(sandbox_dir))
    assert not pid_alive(doc["zookeeper"]["pid"])
    resumed = json.loads(invoke("up", "--bookies", "0", "--dir", str(sandbox_dir), "--json").stdout)
    assert resumed["zookeeper"]["pid"] != doc["zookeeper"]["pid"]
    # the recorded port is reused when still free (another process may have taken it meanwhile)
    with ZKMetadataStore(resumed["uri"], twins=fastpath.selected()) as store:
        assert store.cluster.instance_id() == instance_id  # data kept in DIR/zookeeper/data


def test_up_with_autorecovery_runs_the_daemon_in_every_bookie(sandbox_dir):
    doc = json.loads(invoke("up", "--bookies", "2", "--autorecovery", "--dir", str(sandbox_dir), "--json").stdout)
    assert doc["autorecovery"] is True
    ids = {b["bookie_id"] for b in doc["bookies"]}
    for b in doc["bookies"]:
        conf = (sandbox_dir / f"bookie-{doc['bookies'].index(b)}" / "bk_server.conf").read_text()
        assert "autoRecoveryDaemonEnabled=true" in conf
    with ZKMetadataStore(doc["uri"], twins=fastpath.selected()) as store:
        deadline = time.monotonic() + 60
        while len(store.auditor.votes()) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(store.auditor.votes()) == 2  # one vote per bookie's daemon
        assert store.auditor.current() in ids
    # remembered: a bookie added later runs it too
    again = json.loads(invoke("up", "--bookies", "3", "--dir", str(sandbox_dir), "--json").stdout)
    assert again["autorecovery"] is True
    assert "autoRecoveryDaemonEnabled=true" in (sandbox_dir / "bookie-2" / "bk_server.conf").read_text()


def test_up_with_tls_runs_tls_only_bookies(sandbox_dir):
    doc = json.loads(invoke("up", "--bookies", "2", "--tls", "--dir", str(sandbox_dir), "--json").stdout)
    ca = doc["tls"]["ca"]
    assert Path(ca).is_file()
    env = env_for(doc["uri"])

    def bkctl(*args):
        return run_bkctl(env, *args, timeout=60)

    made = bkctl("--tls-ca", ca, "--json", "ledger", "create", "-e", "2", "-w", "2", "-a", "2")
    assert made.returncode == 0, made.stderr
    lid = str(json.loads(made.stdout)["ledger_id"])
    assert bkctl("--tls-ca", ca, "ledger", "add", lid, "over tls").returncode == 0
    assert b"over tls" in bkctl("--tls-ca", ca, "ledger", "read", lid).stdout
    plain = bkctl("ledger", "read", lid)
    assert plain.returncode != 0 and b"TLS" in plain.stderr


def test_up_with_set_writes_checked_settings_into_every_bookie(sandbox_dir):
    doc = json.loads(
        invoke(
            "up",
            "--bookies",
            "1",
            "--set",
            "logSizeLimit=1048576",
            "--set",
            "isForceGCAllowWhenNoSpace=true",
            "--set",
            "httpServerEnabled=false",
            "--dir",
            str(sandbox_dir),
            "--json",
        ).stdout
    )
    assert doc["settings"] == {
        "logSizeLimit": "1048576",
        "isForceGCAllowWhenNoSpace": "true",
        "httpServerEnabled": "false",
    }
    conf = (sandbox_dir / "bookie-0" / "bk_server.conf").read_text()
    assert "logSizeLimit=1048576" in conf and "isForceGCAllowWhenNoSpace=true" in conf
    assert "httpServerEnabled=false" in conf and "httpServerEnabled=true" not in conf  # replaces the sandbox's
    assert doc["bookies"][0]["http_port"] is None  # no HTTP admin to show
    # remembered for bookies started later; KEY= forgets one
    again = json.loads(
        invoke("up", "--bookies", "2", "--set", "httpServerEnabled=", "--dir", str(sandbox_dir), "--json").stdout
    )
    assert again["settings"] == {"logSizeLimit": "1048576", "isForceGCAllowWhenNoSpace": "true"}
    conf = (sandbox_dir / "bookie-1" / "bk_server.conf").read_text()
    assert "logSizeLimit=1048576" in conf and "httpServerEnabled=true" in conf


@pytest.mark.parametrize(
    "setting, message",
    [
        ("minorCompactionThreshold=1.5", "minorCompactionThreshold: '1.5'"),
        ("noSuchKey=1", "unknown bk_server.conf key 'noSuchKey'"),
        ("numAddWorkerThreads=4", "does not support"),
        ("ledgerDirectories=/x", "the sandbox sets it itself"),
        ("justakey", "expected KEY=VALUE"),
        ("minorCompactionInterval=10", "minorCompactionInterval: '10' seconds is shorter than gcWaitTime"),
    ],
)
def test_up_refuses_a_bad_set_with_one_line_and_usage_exit(sandbox_dir, setting, message):
    result = CliRunner().invoke(sandbox, ["up", "--bookies", "1", "--set", setting, "--dir", str(sandbox_dir)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert message in lines[-1] and not (sandbox_dir / "bookie-0" / "bk_server.conf").exists()


def test_human_output_ends_with_uri(sandbox_dir):
    result = invoke("up", "--bookies", "0", "--dir", str(sandbox_dir))
    assert result.exit_code == 0
    uri_line, export_line = result.stdout.strip().splitlines()[-2:]
    assert uri_line.startswith("metadata URI: zk+hierarchical://127.0.0.1:")
    assert export_line.startswith(f"export BKCTL_METADATA_URI='{uri_line.split(': ', 1)[1]}'")


def test_status_without_sandbox(tmp_path):
    result = CliRunner().invoke(sandbox, ["status", "--dir", str(tmp_path / "none")])
    assert result.exit_code == 3
    assert "no sandbox" in result.output


def test_down_across_processes(sandbox_dir):
    """The real CLI: `up` in one process, `down` in another, by the recorded pid."""
    env = env_for(None)
    up = run_bkctl(env, "sandbox", "up", "--bookies", "0", "--dir", str(sandbox_dir), "--json", text=True)
    assert up.returncode == 0, up.stderr
    doc = json.loads(up.stdout)
    pid = doc["zookeeper"]["pid"]
    assert is_zookeeper_process(pid, sandbox_dir / "zookeeper")
    down = run_bkctl(env, "sandbox", "down", "--dir", str(sandbox_dir), text=True)
    assert down.returncode == 0, down.stderr
    assert f"pid {pid}" in down.stdout
    assert not pid_alive(pid)


def test_up_with_a_bookie(sandbox_dir):
    result = invoke("up", "--bookies", "1", "--dir", str(sandbox_dir), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    [bookie] = doc["bookies"]
    assert bookie["bookie_id"] == f"127.0.0.1:{bookie['port']}"
    assert bookie["dirs"] == [
        str(sandbox_dir.resolve() / "bookie-0" / "journal"),
        str(sandbox_dir.resolve() / "bookie-0" / "ledgers"),
    ]
    with ZKMetadataStore(doc["uri"], twins=fastpath.selected()) as store:
        assert store.registration.writable_bookies() == [bookie["bookie_id"]]
        assert store.cookies.get(bookie["bookie_id"]) is not None

    st = json.loads(invoke("status", "--dir", str(sandbox_dir), "--json").stdout)
    assert st["bookies"][0]["alive"] and st["bookies"][0]["registered"] == "writable"

    down = json.loads(invoke("down", "--dir", str(sandbox_dir), "--json").stdout)
    kinds = [item["kind"] for item in down["stopped"]]
    assert kinds == ["bookie", "zookeeper"]
    assert not pid_alive(bookie["pid"]) and not pid_alive(doc["zookeeper"]["pid"])

    # up again (no --bookies: as many as it had) restarts the same bookie (same port, same cookie-stamped dirs)
    again = json.loads(invoke("up", "--dir", str(sandbox_dir), "--json").stdout)
    assert [b["bookie_id"] for b in again["bookies"]] == [bookie["bookie_id"]]
    with ZKMetadataStore(again["uri"], twins=fastpath.selected()) as store:
        assert store.registration.writable_bookies() == [bookie["bookie_id"]]


def test_up_after_kill_9_returns_with_each_bookie_registered_by_its_new_session(sandbox_dir):
    """A SIGKILLed bookie's registration stays until ZooKeeper expires its session; `up`
    returns only once the restarted bookie registered by a session of its own.  A bookie
    that cannot start is reported and not listed with the pid of the process before it."""
    import os
    import signal

    from tests.support.ports import held
    from tests.support.waiting import wait_for

    doc = json.loads(invoke("up", "--bookies", "2", "--dir", str(sandbox_dir), "--json").stdout)
    first, second = doc["bookies"]
    with ZKMetadataStore(doc["uri"], twins=fastpath.selected()) as store:
        killed_sessions = {b["bookie_id"]: store.registration.session_of(b["bookie_id"]) for b in doc["bookies"]}
    for b in doc["bookies"]:
        os.kill(b["pid"], signal.SIGKILL)
    wait_for(lambda: not pid_alive(first["pid"]) and not pid_alive(second["pid"]), what="the bookies to die")
    with held(first["port"]):  # bookie 0 cannot start again
        result = invoke("up", "--bookies", "2", "--dir", str(sandbox_dir), "--json")
    assert result.exit_code == 1, result.output
    again = json.loads(result.stdout)
    assert [f["bookie_id"] for f in again["failed"]] == [first["bookie_id"]]
    [restarted] = again["bookies"]  # the failed one is not listed with its predecessor's pid
    assert restarted["bookie_id"] == second["bookie_id"] and restarted["pid"] != second["pid"]
    with ZKMetadataStore(
        doc["uri"], twins=fastpath.selected()
    ) as store:  # read right after `up`: the new process's registration
        assert store.registration.session_of(second["bookie_id"]) not in (None, killed_sessions[second["bookie_id"]])
    st = json.loads(invoke("status", "--dir", str(sandbox_dir), "--json").stdout)
    rows = {row["bookie_id"]: row for row in st["bookies"]}
    assert rows[first["bookie_id"]]["pid"] is None and not rows[first["bookie_id"]]["alive"]
    assert rows[second["bookie_id"]]["pid"] == restarted["pid"]


def test_up_after_a_decommission_drops_the_retired_slot(sandbox_dir):
    """`bkctl decommission` deletes the bookie's cookie last; bookied then refuses to start on its
    stamped directories, and `up` exited 1 for ever on that slot.  It drops the slot instead, moves
    its directory aside and starts a new bookie in its place."""
    first = json.loads(invoke("up", "--bookies", "1", "--dir", str(sandbox_dir), "--json").stdout)
    [old] = first["bookies"]
    invoke("down", "--dir", str(sandbox_dir), "--json")
    invoke("up", "--bookies", "0", "--dir", str(sandbox_dir), "--json")  # ZooKeeper only
    with ZKMetadataStore(first["uri"], twins=fastpath.selected()) as store:
        store.cookies.delete(old["bookie_id"])  # what decommission does once the data is elsewhere
    again = invoke("up", "--bookies", "1", "--dir", str(sandbox_dir))
    assert again.exit_code == 0, again.output
    assert f"retired     {old['bookie_id']} (decommissioned" in again.stdout
    doc = json.loads(invoke("up", "--bookies", "1", "--dir", str(sandbox_dir), "--json").stdout)
    [new] = doc["bookies"]
    assert new["bookie_id"] != old["bookie_id"] and doc["failed"] == [] and doc["retired"] == []
    assert (sandbox_dir / "bookie-0.decommissioned" / "journal").is_dir()  # moved aside, nothing deleted
    assert not (sandbox_dir / "bookie-0").exists() and (sandbox_dir / "bookie-1" / "journal").is_dir()


def test_down_on_a_full_disk_stops_every_bookie_it_started(tmp_path):
    """Issue 73, point 9: on a full disk `down` could not write its state file and stopped
    half-way, and a bookie whose pid a failed save never recorded was left running.  It finds
    the sandbox's bookies by their configuration, stops everything, and warns about the file."""
    from tests.support.smallfs import fill, mount_or_explain, unmount

    d = tmp_path / "sbx"
    mount_or_explain(d, 64)
    try:
        up = invoke("up", "--bookies", "1", "--dir", str(d), "--json")
        assert up.exit_code == 0, up.output
        doc = json.loads(up.stdout)
        bookie, zk_pid = doc["bookies"][0], doc["zookeeper"]["pid"]
        # what a save that met the full disk leaves: the running bookie not recorded
        state = json.loads((d / "sandbox.json").read_text())
        state["bookies"][0]["pid"] = None
        (d / "sandbox.json").write_text(json.dumps(state))
        filler = fill(d, "filler", leave_bytes=0)
        down = invoke("down", "--dir", str(d), "--json")
        assert down.exit_code == 0, down.output
        result = json.loads(down.stdout)
        assert {"kind": "bookie", "bookie_id": bookie["bookie_id"], "pid": bookie["pid"]} in result["stopped"]
        assert not pid_alive(bookie["pid"]) and not pid_alive(zk_pid)
        assert result["warnings"] and "sandbox.json" in result["warnings"][0]
        filler.unlink()
        assert json.loads(invoke("down", "--dir", str(d), "--json").stdout)["stopped"] == []
    finally:
        (d / "filler").unlink(missing_ok=True)
        if (d / "sandbox.json").exists():
            cluster.sandbox_down(d, grace=5)  # (nothing left to stop when the test passed)
        unmount(d)
