"""bookied's start-up refusals, through the real process (issue 15, items 6 and 15).

A port in use, a directory that cannot be created and a decommissioned bookie
each get a one-line message and their documented exit status (bookied(8)),
and none of them leaves anything in ZooKeeper.
"""

from __future__ import annotations

import socket
import subprocess
import sys

from bkctl.bookied.main import EXIT_CANNOT_START, EXIT_CONFIG, EXIT_REFUSED
from bkctl.wire import fastpath
from bkctl.wire.metadata.zk import ZKMetadataStore
from tests.support.bookieproc import BookieProcess
from tests.support.bookieproc import wait_registered as _wait_registered


def _log_lines(bookie: BookieProcess) -> list[str]:
    return bookie.log_path.read_text().splitlines()


def test_port_in_use_exits_1_before_touching_zookeeper(bookies, zkstore):
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    try:
        bookie = bookies(port=squatter.getsockname()[1])
        bookie.launch()
        assert bookie.proc.wait(timeout=30) == EXIT_CANNOT_START
    finally:
        squatter.close()
    lines = _log_lines(bookie)
    assert not any("Traceback" in line for line in lines), lines
    assert any(f"bookiePort {bookie.port} on 127.0.0.1 is in use" in line for line in lines), lines
    # no phantom bookie: no cookie in ZooKeeper, none on disk
    assert zkstore.cookies.get(bookie.bookie_id) is None
    assert not (bookie.ledger_dir / "current" / "VERSION").exists()


def test_version_flag():
    out = subprocess.run(
        [sys.executable, "-m", "bkctl.bookied", "--version"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0
    from bkctl import __version__
    from bkctl.wire import fastpath

    version, twins = out.stdout.strip().splitlines()
    assert version == f"bookied (bkctl) {__version__}"
    assert twins == fastpath.report_line(fastpath.c_twins_report())  # this process runs with the same switch


def test_directory_that_cannot_be_created_names_it_and_its_key(bookies, tmp_path, zkstore):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    bookie = bookies(ledgerDirectories=blocker / "ledgers")
    bookie.launch()
    assert bookie.proc.wait(timeout=30) == EXIT_CONFIG
    text = bookie.log_path.read_text()
    assert "Traceback" not in text
    assert f"ledgerDirectories: cannot create {blocker / 'ledgers'}" in text, text
    assert zkstore.cookies.get(bookie.bookie_id) is None


def test_decommissioned_bookie_refuses_to_start_until_formatted(bookies, zkstore, metadata_uri):
    bookie = bookies().start()
    _wait_registered(metadata_uri, [bookie.bookie_id], procs=[bookie])
    assert bookie.stop() == 0
    # what `bkctl decommission` does once the bookie's ledgers are copied: delete its cookie
    cookie, version = zkstore.cookies.get(bookie.bookie_id)
    zkstore.cookies.delete(bookie.bookie_id, version)

    bookie.launch()
    assert bookie.proc.wait(timeout=30) == EXIT_REFUSED
    text = bookie.log_path.read_text()
    assert "decommissioned" in text and "bkctl bookieformat" in text, text
    assert "Traceback" not in text
    assert zkstore.cookies.get(bookie.bookie_id) is None  # it did not come back by itself
    with ZKMetadataStore(metadata_uri, twins=fastpath.selected()) as zk:
        assert bookie.bookie_id not in zk.registration.writable_bookies() + zk.registration.readonly_bookies()

    # formatted (the operator's explicit choice), it starts as a new, empty bookie
    conf = bookie.base / "bk_server.conf"
    out = subprocess.run(
        [sys.executable, "-m", "bkctl", "-m", metadata_uri, "bookieformat", "-c", str(conf), "--force"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    bookie.start()
    assert zkstore.cookies.get(bookie.bookie_id) is not None
