"""Fixtures for integration tests: clusters of REAL bookied processes on the real ZooKeeper."""
from __future__ import annotations

import pytest

from tests.support.bookieproc import BookieProcess, start_bookies


@pytest.fixture
def bookie_cluster(tmp_path, metadata_uri):
    """``make(n, **bk_server_conf) -> [BookieProcess]``: n real bookieds started
    in parallel and registered in ZooKeeper; all killed at the end of the test."""
    started: list[BookieProcess] = []

    def make(n: int = 3, **settings) -> list[BookieProcess]:
        procs = [BookieProcess(tmp_path / f"bookie{len(started) + i}", metadata_uri, **settings)
                 for i in range(n)]
        started.extend(procs)
        return start_bookies(procs, metadata_uri)

    yield make
    for b in started:
        b.kill()


@pytest.fixture
def bookies(tmp_path, metadata_uri):
    """``make(name, **bk_server_conf) -> BookieProcess``: a bookied not started yet
    (``.start()`` or ``.launch()`` it); all killed at the end of the test."""
    started: list[BookieProcess] = []

    def make(name="b0", **settings) -> BookieProcess:
        b = BookieProcess(tmp_path / name, metadata_uri, **settings)
        started.append(b)
        return b

    yield make
    for b in started:
        b.kill()


@pytest.fixture
def writer(metadata_uri):
    """Ledgers are written through the library (for tests of what happens to them, not of `ledger add`)."""
    from bkctl.wire.client.blocking import BlockingBookKeeper

    bk = BlockingBookKeeper(metadata_uri, timeout=60)
    yield bk
    bk.close()  # ledgers not closed stay OPEN, as a writer that went away leaves them
