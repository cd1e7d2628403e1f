"""A real bookied whose index does not open (issue 73, point 10): one line and exit 4 at start,
``bookied --rebuild-index`` refused while it runs, then rebuilt (also after kill -9 mid-way) and
every acknowledged entry reads back."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time

import pytest

from bkctl.bookied.main import EXIT_CANNOT_START, EXIT_INDEX
from bkctl.wire.client.blocking import BlockingBookKeeper
from tests.support.bookieproc import BookieProcess, start_bookies

pytestmark = pytest.mark.integration


def rebuild(bookie: BookieProcess, **kw) -> subprocess.CompletedProcess:
    conf = bookie.base / "bk_server.conf"
    return subprocess.run(
        [sys.executable, "-m", "bkctl.bookied", "--conf", str(conf), "--rebuild-index"],
        capture_output=True,
        text=True,
        timeout=120,
        **kw,
    )


def test_a_bookie_whose_index_does_not_open_says_so_and_is_rebuilt(tmp_path, metadata_uri):
    bookie = BookieProcess(tmp_path / "b", metadata_uri)
    start_bookies([bookie], metadata_uri)
    acked: dict[int, dict[int, bytes]] = {}
    bk = BlockingBookKeeper(metadata_uri, add_timeout=10.0, read_timeout=10.0, timeout=60)
    try:
        for n in range(3):
            lh = bk.create(1, 1, 1, password=b"pw")
            payloads = [b"%d-%d " % (n, i) * 50 for i in range(3000)]
            # pipelined: add_many returns once every entry is acknowledged (one at a time, each
            # waiting for its journal's fsync, the 9000 adds were most of the test's time)
            assert lh.add_many(payloads) == len(payloads) - 1
            acked[lh.ledger_id] = dict(enumerate(payloads))
            lh.close()
        refused = rebuild(bookie)  # while it runs
        assert refused.returncode == EXIT_CANNOT_START, refused.stderr
        assert "in use by another process" in refused.stderr and "stop it first" in refused.stderr
        assert bookie.stop() == 0
        with open(bookie.ledger_dir / "current" / "index.lmdb" / "data.mdb", "r+b") as f:
            f.write(b"\xa5" * 16384)  # its meta pages
        out = bookie.launch()
        assert out.wait(timeout=60) == EXIT_INDEX
        tail = bookie.log_tail(5)
        assert "Traceback" not in bookie.log_path.read_text()
        line = next(x for x in tail.splitlines() if "cannot start" in x)
        assert "does not open" in line and "--rebuild-index" in line and "--salvage" in line
        # killed mid-way, then run again
        for delay in (0.3, 0.8, 1.5):
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bkctl.bookied",
                    "--conf",
                    str(bookie.base / "bk_server.conf"),
                    "--rebuild-index",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(delay * random.uniform(0.8, 1.2))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        done = rebuild(bookie)
        assert done.returncode == 0, done.stderr
        assert "rebuilt the index" in done.stdout and "9000 entries of 3 ledgers" in done.stdout, done.stdout
        bookie.start()
        for ledger_id, entries in acked.items():
            got = dict(bk.open(ledger_id, b"pw").read(0, max(entries)))
            assert got == entries
    finally:
        bk.close()
        bookie.kill()
