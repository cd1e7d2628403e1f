"""Fixtures for integration tests: clusters of REAL bookied processes on the real ZooKeeper."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from bkctl.wire import fastpath
from tests.support.bookieproc import BookieProcess, start_bookies
from tests.support.spark import tasks_here, worker_spark  # noqa: F401 - fixtures: one Spark session per test process; an export's tasks run here


@pytest.fixture
def bookie_cluster(tmp_path, metadata_uri):
    """``make(n, **bk_server_conf) -> [BookieProcess]``: n real bookieds started
    in parallel and registered in ZooKeeper; all killed at the end of the test."""
    started: list[BookieProcess] = []

    def make(n: int = 3, **settings) -> list[BookieProcess]:
        procs = [BookieProcess(tmp_path / f"bookie{len(started) + i}", metadata_uri, **settings) for i in range(n)]
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
def own_zookeeper(tmp_path):
    """``(server, uri)``: a ZooKeeper of the test's own, for tests that stop it (kill, SIGSTOP),
    with a cluster initialised at ``/ledgers``; continued (SIGCONT) and stopped at the end."""
    import os

    from bkctl.sandbox.zookeeper import ZooKeeperServer
    from bkctl.wire.metadata.zk import ZKMetadataStore
    from tests.support.interrupts import die_with_parent

    server = ZooKeeperServer(tmp_path / "zk", preexec_fn=die_with_parent)
    server.start()
    uri = f"zk+hierarchical://{server.connect_string}/ledgers"
    try:
        with ZKMetadataStore(uri, timeout=20, twins=fastpath.selected()) as store:
            store.cluster.init()
        yield server, uri
    finally:
        if server.pid and server.running:
            os.kill(server.pid, signal.SIGCONT)  # a stopped JVM does not act on SIGTERM
        server.stop()


@pytest.fixture
def writer(metadata_uri):
    """Ledgers are written through the library (for tests of what happens to them, not of `ledger add`)."""
    from bkctl.wire.client.blocking import BlockingBookKeeper

    bk = BlockingBookKeeper(metadata_uri, timeout=60)
    yield bk
    bk.close()  # ledgers not closed stay OPEN, as a writer that went away leaves them


@pytest.fixture(scope="module")
def tls_certs(tmp_path_factory):
    """A CA and, signed by it, ``bookie`` (127.0.0.1) and ``client`` certificates; ``stranger``
    signed by ``other-ca.pem`` (see :func:`tests.support.tlscerts.write_certs`)."""
    from tests.support.tlscerts import write_certs

    return write_certs(
        tmp_path_factory.mktemp("tls-certs"), {"bookie": "127.0.0.1", "client": "bkctl-client", "stranger": "stranger"}
    )


@pytest.fixture
def ar_daemon(tmp_path, metadata_uri):
    """``start(name, *KEY=VALUE) -> (process, log path)``: a `bkctl autorecovery run` voting as
    ``name:3181`` (no -v: its own INFO log on stderr, kept in a file); each is stopped with
    SIGTERM at the end of the test and must exit 0."""
    from tests.support.cli import env_for

    procs = []

    def start(name: str, *settings: str) -> tuple[subprocess.Popen, object]:
        log_path = tmp_path / f"{name}.stderr"
        args = [sys.executable, "-m", "bkctl", "autorecovery", "run", "--bookie-id", f"{name}:3181"]
        for item in settings:
            args += ["--set", item]
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log, env=env_for(metadata_uri))
        procs.append(proc)
        return proc, log_path

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                assert proc.wait(30) == 0
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise
