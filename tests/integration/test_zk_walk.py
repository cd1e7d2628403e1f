"""The walk over every ledger on a real ZooKeeper of its own (restarted and stopped here):
the multiRead scanner reads what kazoo reads, survives a ZooKeeper restart in the middle of
a walk without losing or repeating a znode, and fails with a clear error (exit 5 in the CLI)
when ZooKeeper stops answering -- never a silent partial answer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from kazoo.client import KazooClient

from bkctl.sandbox.zookeeper import ZooKeeperServer, free_port
from bkctl.wire import fastpath
from bkctl.wire.metadata import paths as P
from bkctl.wire.metadata.errors import ZKUnavailable
from bkctl.wire.metadata.layout import LedgerLayout
from bkctl.wire.metadata.ledger import LedgerMetadata, serialize_ledger_metadata
from bkctl.wire.metadata.zk import ZKMetadataStore
from bkctl.wire.metadata.zk.scan import ZnodeScanner
from tests.support.cli import bkctl_stopping_zookeeper
from tests.support.interrupts import die_with_parent
from tests.support.waiting import stop_process

pytestmark = pytest.mark.xdist_group("zk_walk")

BOOKIES = ("127.0.0.1:3181", "127.0.0.1:3182", "127.0.0.1:3183")
N = 2500


def _metadata(ledger_id: int) -> bytes:
    ensemble = BOOKIES[:2] if ledger_id % 5 else BOOKIES[1:]
    md = LedgerMetadata.new(
        ensemble, password=b"pw", ctime=1_700_000_000_000 + ledger_id, custom_metadata={"n": str(ledger_id).encode()}
    )
    return serialize_ledger_metadata(md.closed(ledger_id % 7, ledger_id) if ledger_id % 3 else md)


class OwnZooKeeper:
    """The module's ZooKeeper server, which a test may restart (a new process, same port and data)."""

    def __init__(self, server: ZooKeeperServer):
        self.server = server

    @property
    def connect_string(self) -> str:
        return self.server.connect_string

    @property
    def pid(self) -> int:
        return self.server.pid

    def restart(self) -> None:
        self.server.stop()
        self.server = ZooKeeperServer(self.server.data_dir, port=self.server.port, preexec_fn=die_with_parent).start()


@pytest.fixture(scope="module")
def own_zookeeper(tmp_path_factory):
    """A ZooKeeper of this module's own, holding N ledgers (ids 1..N+1, 17 missing)."""
    server = ZooKeeperServer(tmp_path_factory.mktemp("zk-walk"), port=free_port(), preexec_fn=die_with_parent)
    server.start()
    zk = KazooClient(hosts=server.connect_string)
    zk.start()
    try:
        zk.create("/ledgers/LAYOUT", LedgerLayout.for_manager("hierarchical").serialize(), makepath=True)
        zk.create("/ledgers/INSTANCEID", b"walk-test")
        zk.ensure_path("/ledgers/available/readonly")
        for parent in sorted({p for i in range(1, N + 2) for p in P.ledger_parent_paths(i)}):
            zk.ensure_path(parent)
        tx = zk.transaction()
        for ledger_id in range(1, N + 2):
            if ledger_id != 17:
                tx.create(P.ledger_path(ledger_id), _metadata(ledger_id))
        assert not any(isinstance(r, Exception) for r in tx.commit())
    finally:
        zk.stop()
        zk.close()
    own = OwnZooKeeper(server)
    yield own
    own.server.stop()


def test_the_scanner_reads_what_kazoo_reads_in_order_with_the_missing_ones(own_zookeeper):
    paths = [P.ledger_path(i) for i in range(1, N + 2)] + ["/ledgers/nothing/here"]
    zk = KazooClient(hosts=own_zookeeper.connect_string)
    zk.start()
    try:
        expected = []
        for path in paths:
            try:
                expected.append(zk.get(path))
            except Exception:  # noqa: BLE001 - NoNode
                expected.append(None)
    finally:
        zk.stop()
        zk.close()
    with ZnodeScanner(own_zookeeper.connect_string, batch=64, window=3) as scanner:
        got = list(scanner.get_many(paths))
        assert scanner.requests == -(-len(paths) // 64)  # multiRead: one request a batch
    assert [g is None for g in got] == [e is None for e in expected]
    assert [g.data for g in got if g] == [e[0] for e in expected if e]
    assert [(g.stat.ctime, g.stat.version, g.stat.mzxid) for g in got if g] == [
        (e[1].ctime, e[1].version, e[1].mzxid) for e in expected if e
    ]
    with ZnodeScanner(own_zookeeper.connect_string) as scanner:
        assert list(scanner.children_many(["/ledgers/00/0000", "/ledgers/none"]))[1] is None


def test_a_zookeeper_restart_in_the_middle_of_a_walk_is_survived(own_zookeeper):
    store = ZKMetadataStore(
        f"zk+hierarchical://{own_zookeeper.connect_string}/ledgers", timeout=20, twins=fastpath.selected()
    )
    paths = [P.ledger_path(i) for i in range(1, N + 2)]
    scanner = ZnodeScanner(own_zookeeper.connect_string, timeout=20, batch=50, window=2)
    walk = scanner.get_many(paths)
    first = [next(walk) for _ in range(400)]
    own_zookeeper.restart()
    rest = list(walk)
    scanner.close()
    got = first + rest
    assert len(got) == len(paths)  # nothing lost, nothing twice
    assert [g is None for g in got] == [i == 17 for i in range(1, N + 2)]
    assert all(g.data == _metadata(i) for i, g in zip(range(1, N + 2), got) if g is not None)
    assert scanner.reconnects == 1
    # and the store's own walk, after the restart, still reads every ledger
    with store:
        assert sum(1 for r in store.ledgers.walk() if r.metadata is not None) == N


def test_a_watched_walk_after_a_zookeeper_restart_lists_afresh_and_sees_what_changed(own_zookeeper):
    """The bookie GC's watched walk (ranges(watched=True)) forgets what it kept when its
    connection drops: a ledger created after the restart, in a leaf it had kept, is seen."""
    uri = f"zk+hierarchical://{own_zookeeper.connect_string}/ledgers"
    added = N + 10  # in leaf 00/0000, with ledgers 1..N+1
    with ZKMetadataStore(uri, timeout=20, twins=fastpath.selected()) as gc:
        before = {r.end: r.ledgers for r in gc.ledgers.ranges(watched=True)}
        assert added not in before[9999] and len(before[9999]) == N
        watched = gc.ledgers.watched
        listed = watched.listed
        own_zookeeper.restart()
        with ZKMetadataStore(uri, timeout=20, twins=fastpath.selected()) as other:
            other.ledgers.create(LedgerMetadata.new(list(BOOKIES[:2])), ledger_id=added)
            try:
                after = {r.end: r.ledgers for r in gc.ledgers.ranges(watched=True)}
                assert after[9999] == before[9999] | {added}
                assert watched.listed > listed  # listed again, not answered from before the drop
            finally:
                other.ledgers.delete(added)


def test_a_zookeeper_that_stops_answering_fails_the_walk_with_how_far_it_got(own_zookeeper):
    scanner = ZnodeScanner(own_zookeeper.connect_string, timeout=2, batch=50, window=2)
    walk = scanner.get_many([P.ledger_path(i) for i in range(1, N + 2)])
    got = [next(walk) for _ in range(300)]
    # stopped for certain before the walk goes on (kill() alone returns before the JVM stops,
    # and a ZooKeeper still running answered a whole walk once): it reads only what is in flight
    stop_process(own_zookeeper.pid)
    try:
        with pytest.raises(ZKUnavailable) as failed:
            for value in walk:  # the batch in flight, if answered before the stop, then the error
                got.append(value)
        assert f"unavailable after {len(got):,} znodes: no answer within 2s (no server answered for 2s)" in str(
            failed.value
        )
        assert 300 <= len(got) <= 300 + scanner.batch * scanner.window
    finally:
        os.kill(own_zookeeper.pid, signal.SIGCONT)
        scanner.close()


def test_the_cli_says_zookeeper_went_away_in_one_line_and_exits_5(own_zookeeper):
    """``ledger list --json`` over a ZooKeeper stopped (SIGSTOP) before the walk: one line on
    stderr, exit 5 (unreachable), no traceback and no progress noise on a pipe."""
    uri = f"zk+hierarchical://{own_zookeeper.connect_string}/ledgers"
    ok = subprocess.run(
        [sys.executable, "-m", "bkctl", "-m", uri, "--timeout", "3", "ledger", "list", "--bookie", BOOKIES[2]],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stderr == ""  # a pipe: no progress
    listed = [line.split()[0] for line in ok.stdout.splitlines()[1:-1]]
    assert listed == [str(i) for i in range(5, N + 2, 5)]  # only the ledgers on that bookie
    # the walk's reads, where both twins go through (the multiRead scanner, or kazoo's pipelined
    # gets with fast paths off): ZooKeeper stops as the first is drawn
    stop_as_the_walk_begins = (
        "from bkctl.wire.metadata.zk.session import ZKSession\n"
        "real = ZKSession.get_many\n"
        "def stalled(self, *args, **kwargs):\n"
        "    stop_zookeeper()\n"
        "    yield from real(self, *args, **kwargs)\n"
        "ZKSession.get_many = stalled"
    )
    stopped = bkctl_stopping_zookeeper(
        own_zookeeper.pid,
        stop_as_the_walk_begins,
        "-m",
        uri,
        "--timeout",
        "2",
        "--json",
        "ledger",
        "list",
        "--state",
        "open",
    )
    assert stopped.returncode == 5, stopped.stderr
    assert stopped.stderr.count("\n") == 1 and "unavailable" in stopped.stderr
    assert "Traceback" not in stopped.stderr
