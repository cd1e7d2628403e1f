"""Fixtures for integration tests: clusters of REAL bookied processes on the real ZooKeeper."""
from __future__ import annotations

import socket
import time

import pytest

from tests.bookieproc import BookieProcess


def _wait_registered(uri: str, bookie_ids: list[str], timeout: float = 30.0) -> None:
    from bkctl.wire.metadata.zk import ZKMetadataStore

    deadline = time.monotonic() + timeout
    with ZKMetadataStore(uri, timeout=20) as store:
        while True:
            missing = set(bookie_ids) - set(store.registration.writable_bookies())
            if not missing:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"bookies {sorted(missing)} did not register within {timeout}s")
            time.sleep(0.05)


def start_bookies(procs: list[BookieProcess], uri: str, timeout: float = 30.0) -> list[BookieProcess]:
    """Launch all at once, wait until each listens and is registered writable."""
    for p in procs:
        p.launch()
    deadline = time.monotonic() + timeout
    for p in procs:
        while True:
            if p.proc.poll() is not None:
                raise RuntimeError(f"bookied exited with {p.proc.returncode}:\n{p.log_tail()}")
            try:
                socket.create_connection(("127.0.0.1", p.port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"bookied did not listen within {timeout}s:\n{p.log_tail()}")
                time.sleep(0.05)
    _wait_registered(uri, [p.bookie_id for p in procs], timeout)
    return procs


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
