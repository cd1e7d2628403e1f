"""`bkctl top` while ZooKeeper stalls (issue 54, item 1): a ZooKeeper of the test's own, stopped with
SIGSTOP as a stuck or paused JVM would be, under a live view in a real pseudo-terminal and under
`top --once --json`.  The view must say ZooKeeper is unreachable and since when, show the frame's
age, keep refreshing what the bookies' HTTP admins say (they need no ZooKeeper), and come back once
ZooKeeper answers again; `--once` must give up after the global --timeout, saying why."""

from __future__ import annotations

import json
import os
import re
import signal
import sys

import pexpect
import pytest

from tests.support.bookieproc import BookieProcess, start_bookies
from tests.support.cli import bkctl
from tests.support.terminal import Terminal, bkctl_env

pytestmark = pytest.mark.integration


@pytest.fixture
def stalling(tmp_path, own_zookeeper):
    """A ZooKeeper of our own (to stop) and one bookied with its HTTP admin."""
    server, uri = own_zookeeper
    bookie = BookieProcess(tmp_path / "bookie", uri, zkTimeout=30000).serve_http()
    try:
        start_bookies([bookie], uri)
        yield server, uri, bookie
    finally:
        if server.pid:
            os.kill(server.pid, signal.SIGCONT)
        bookie.kill()


def _clock(screen: str) -> str | None:
    m = re.search(r"bookies read (\d\d:\d\d:\d\d)", screen)
    return m.group(1) if m else None


def test_the_live_view_says_zookeeper_stalled_and_keeps_reading_the_bookies(stalling, tmp_path):
    zk, uri, bookie = stalling
    term = Terminal(
        [sys.executable, "-m", "bkctl", "--timeout", "2", "top", "--interval", "0.5"],
        bkctl_env(tmp_path, BKCTL_METADATA_URI=uri),
        rows=30,
        cols=150,
    )
    quitter = Terminal(
        [sys.executable, "-m", "bkctl", "--timeout", "2", "top", "--interval", "0.5"],
        bkctl_env(tmp_path, BKCTL_METADATA_URI=uri),
        rows=30,
        cols=150,
    )
    try:
        term.expect_screen(re.escape(bookie.bookie_id) + r"\s+writable", timeout=60)
        term.expect_screen(r"zookeeper\s+ok")  # ZooKeeper's own row
        quitter.expect_screen(r"zookeeper\s+ok", timeout=60)
        os.kill(zk.pid, signal.SIGSTOP)
        # q quits while ZooKeeper is stopped: nothing waits for it on the way out
        quitter.expect_screen(r"ZooKeeper unreachable since", timeout=20)
        quitter.send("q")
        quitter.child.expect(pexpect.EOF, timeout=15)
        screen = term.expect_screen(r"ZooKeeper unreachable since (\d\d:\d\d:\d\d) \((\d+) s\)", timeout=20)
        # the bookie's figures are still read over HTTP: the clock of its reading moves on
        first = _clock(term.screen.display())
        assert first, term.screen.display()
        term.wait_until(lambda: _clock(term.screen.display()) not in (None, first), f"the bookies read after {first}")
        later = term.screen.display()
        assert re.search(re.escape(bookie.bookie_id) + r"\s+writable", later), later  # its last known state
        assert re.search(r"registrations as of \d\d:\d\d:\d\d \(\d+ s old\)", later), later

        # --once gives up on the stalled ZooKeeper after its own bound (--timeout) and says so: the
        # frame it could make, naming the stall, then exit 5.  (The runner's timeout is a hang guard
        # only: a --once that waited on ZooKeeper for ever would fail there, not on a clock here.)
        once = bkctl(uri, "--timeout", "2", "--json", "top", "--once", "--interval", "0.3", timeout=90)
        assert once.returncode == 5, (once.stdout, once.stderr)
        assert "ZooKeeper is not answering" in once.stderr and "read over HTTP only" in once.stderr, once.stderr
        doc = json.loads(once.stdout)
        assert doc["zookeeper"]["state"] == "unreachable", doc
        assert doc["zookeeper"]["since"] is not None and doc["zookeeper"]["error"], doc  # since when, and why
        assert doc["zookeeper"]["read_at"] is None, doc  # a fresh process: no registration ever read
        text = bkctl(uri, "--timeout", "2", "top", "--once", "--interval", "0.3", timeout=90)
        assert text.returncode == 5, (text.stdout, text.stderr)
        assert "ZooKeeper is not answering" in text.stderr, text.stderr
        assert re.search(r"ZooKeeper unreachable since \d\d:\d\d:\d\d \(\d+ s\)", text.stdout), text.stdout
        assert "registrations as of never" in text.stdout, text.stdout  # how old the view is: it has none

        os.kill(zk.pid, signal.SIGCONT)  # back: the view says so
        term.expect_screen(r"zookeeper\s+ok", timeout=30)
        screen = term.screen.display()
        assert "ZooKeeper unreachable" not in screen, screen
        term.send("q")
        term.child.expect(pexpect.EOF, timeout=20)
    finally:
        os.kill(zk.pid, signal.SIGCONT)
        term.close()
        quitter.close()
