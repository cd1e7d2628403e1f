"""``bkctl top`` against REAL ZooKeeper and bookieds: ``--once --json``, and the live view in a real
pseudo-terminal -- keys, a resize, a bookie killed and started again, the terminal as it was on exit."""

from __future__ import annotations

import json
import os
import re
import signal
import sys

import pexpect
import pytest

from bkctl.wire import fastpath
from tests.support.bookieproc import BookieProcess, start_bookies
from tests.support.cli import bkctl
from tests.support.ports import free_port
from tests.support.terminal import Screen, Terminal, bkctl_env, ended

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("top")]  # one cluster for the module


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    import uuid

    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.metadata.zk import ZKMetadataStore

    uri = f"zk+hierarchical://{zookeeper.connect_string}/top{uuid.uuid4().hex[:10]}/ledgers"
    base = tmp_path_factory.mktemp("top-bookies")
    procs = []
    for i in range(3):
        p = BookieProcess(base / f"bookie{i}", uri, httpServerEnabled="true", zkTimeout=4000)
        p.settings["httpServerPort"] = p.http_port = free_port()
        procs.append(p)
    with ZKMetadataStore(uri, timeout=20, twins=fastpath.selected()) as store:
        store.cluster.init()
    try:
        start_bookies(procs, uri)
        with BlockingBookKeeper(uri, timeout=60) as bk:  # some traffic for the metrics
            lh = bk.create(3, 2, 2)
            for i in range(50):
                lh.add(b"entry %d" % i)
            lh.close()
            list(lh.read(0, 49))
        yield uri, procs
    finally:
        for p in procs:
            p.kill()


def test_once_json_is_the_snapshot(cluster):
    uri, procs = cluster
    r = bkctl(uri, "--json", "top", "--once", "--interval", "0.3", "--sort", "bookie")
    assert r.returncode == 0, r.stderr
    snap = json.loads(r.stdout)
    rows = snap["bookies"]
    assert [row["bookie_id"] for row in rows] == sorted(p.bookie_id for p in procs)
    for row in rows:
        assert row["state"] == "writable" and row["kind"] == "bookied" and row["metrics"] == "bookied"
        assert row["add_rate"] is not None and row["entry_logs"] is not None and row["used_percent"] > 0
        assert row["http"] == f"127.0.0.1:{next(p.http_port for p in procs if p.bookie_id == row['bookie_id'])}"
    assert snap["cluster"]["writable"] == 3 and snap["cluster"]["under_replicated"] == 0
    status = json.loads(bkctl(uri, "--json", "autorecovery", "status").stdout)
    assert {k: snap["autorecovery"][k] for k in ("enabled", "auditor", "underreplicated", "lost_bookies")} == {
        k: status[k] for k in ("enabled", "auditor", "underreplicated", "lost_bookies")
    }
    text = bkctl(uri, "top", "--once", "--interval", "0.3", "--filter", procs[0].bookie_id)
    assert text.returncode == 0 and procs[0].bookie_id in text.stdout and procs[1].bookie_id not in text.stdout
    piped = bkctl(uri, "top")
    assert piped.returncode == 2 and "--once" in piped.stderr


def modes(path) -> list[str]:
    """``stty -a``'s settings, without the size (the test resizes) and its line breaks (which follow the size)."""
    text = re.sub(r"rows \d+; columns \d+;", "", path.read_text())
    return text.replace(";", " ").split()


def _row(screen: str, bookie_id: str) -> str:
    return next((line for line in screen.splitlines() if line.startswith(bookie_id)), "")


def top_in_a_terminal(uri: str, tmp_path, *args: str) -> Terminal:
    """``bkctl top ARGS`` in a real pseudo-terminal, its ``stty -a`` saved before and after in tmp_path.
    Through bash, as an interactive shell would run it: a child that handled SIGINT and exited
    does not stop the script."""
    script = (
        f"stty -a > {tmp_path}/before; {sys.executable} -m bkctl top {' '.join(args)}; rc=$?; "
        f"stty -a > {tmp_path}/after; exit $rc"
    )
    return Terminal(["/bin/bash", "-c", script], bkctl_env(tmp_path, BKCTL_METADATA_URI=uri), rows=30, cols=150)


def test_live_view_in_a_terminal(cluster, tmp_path):
    uri, procs = cluster
    term = top_in_a_terminal(uri, tmp_path, "--interval", "0.5")
    victim = procs[1]
    try:
        for p in procs:
            term.expect_screen(re.escape(p.bookie_id) + r"\s+writable", timeout=60)
        term.send("?")
        term.expect_screen(r"bkctl top: keys")
        term.send("x")  # any key closes the help
        term.expect_screen(r"bookie\s+state\s+rack")
        term.send("s")
        term.expect_screen(r"sort state \(ascending\)")
        term.send("/" + victim.bookie_id.split(":")[1] + "\r")
        term.expect_screen(r"filter '" + victim.bookie_id.split(":")[1] + "'")
        term.expect_screen(re.escape(victim.bookie_id) + r"\s+writable")
        screen = term.screen.display()
        assert not _row(screen, procs[0].bookie_id) and not _row(screen, procs[2].bookie_id), screen
        term.send("\r")  # drill down into the one bookie shown
        term.expect_screen(r"bookie " + re.escape(victim.bookie_id) + r".*\n.*state writable")
        term.send("\x1b")  # back, then the filter cleared
        term.expect_screen(r"bookie\s+state\s+rack")
        term.send("\x1b")
        term.expect_screen(re.escape(procs[0].bookie_id) + r"\s+writable")

        # a narrower terminal: the next frame is laid out for it, leaving columns out, not cutting ids
        term.expect_screen(r"(?m)^bookie\s+state\s+rack\s+add/s.*notes\s*$")
        term.child.setwinsize(24, 100)
        term.screen = Screen(24, 100)
        term.expect_screen(r"(?m)^bookie\s+state\s+add/s.*reclaimable\s*$")
        term.expect_screen(re.escape(procs[2].bookie_id) + r"\s+writable")

        # a bookie dies: unreachable at once, down once its session expires; then it comes back
        victim.kill()
        term.expect_screen(re.escape(victim.bookie_id) + r"\s+(unreachable|down)", timeout=60)
        term.expect_screen(re.escape(victim.bookie_id) + r"\s+down", timeout=60)
        victim.start()
        term.expect_screen(re.escape(victim.bookie_id) + r"\s+writable", timeout=60)
        term.send("q")
        term.child.expect(pexpect.EOF, timeout=30)
    finally:
        term.close()
    assert ended(term.child).exitstatus == 0, term.text[-2000:]
    before, after = (modes(tmp_path / "before"), modes(tmp_path / "after"))
    assert before == after and "icanon" in after and "-icanon" not in after and "echo" in after


def test_ctrl_c_quits_and_restores_the_terminal(cluster, tmp_path):
    uri, procs = cluster
    term = top_in_a_terminal(uri, tmp_path)
    try:
        term.expect_screen(re.escape(procs[0].bookie_id) + r"\s+writable", timeout=60)
        term.send("\x03")
        term.child.expect(pexpect.EOF, timeout=30)
    finally:
        term.close()
    assert ended(term.child).exitstatus == 0
    assert modes(tmp_path / "before") == modes(tmp_path / "after")


def test_sigterm_ends_the_live_view_with_exit_143_and_restores_the_terminal(cluster, tmp_path):
    """SIGTERM is a flag the view's loop reads, not an exception a library's bare ``except:`` in
    the main thread could swallow: the view ends as on ``q``, the terminal put back, exit 143."""
    from tests.support.leaks import descendants

    uri, procs = cluster
    term = top_in_a_terminal(uri, tmp_path)
    try:
        term.expect_screen(re.escape(procs[0].bookie_id) + r"\s+writable", timeout=60)
        # bkctl itself, not the bash that runs it (whose command line names it too)
        top = next(
            pid
            for pid, command in descendants().items()
            if command.split()[:4] == [sys.executable, "-m", "bkctl", "top"]
        )
        os.kill(top, signal.SIGTERM)
        term.child.expect(pexpect.EOF, timeout=30)  # a hang guard, not a speed claim
    finally:
        term.close()
    assert ended(term.child).exitstatus == 143, term.text[-2000:]
    assert modes(tmp_path / "before") == modes(tmp_path / "after")
