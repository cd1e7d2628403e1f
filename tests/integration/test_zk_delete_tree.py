"""``ZKSession.delete_tree`` on a real ZooKeeper: what ``cluster nuke`` and ``format``, the
store's plans and journals, and every test's ``zk_namespace`` end with.  A tree of thousands of
znodes goes whole and nothing beside it; a znode that gains a child meanwhile is listed and
deleted again, one that vanished meanwhile is fine; a ZooKeeper stopped (SIGSTOP) in the
middle is a clear ZKUnavailable saying how far it got, with nothing deleted above the
failure, and one line and exit 5 from ``cluster nuke``.  Run with the fast paths off too
(tests/support/fastpaths_off.txt): the listing's multiRead scanner and kazoo are twins."""

from __future__ import annotations

import os
import re
import signal

import pytest
from kazoo.client import KazooClient

from bkctl.wire import fastpath
from bkctl.wire.metadata.errors import MetadataStoreError, ZKUnavailable
from bkctl.wire.metadata.zk.session import ZKSession
from tests.support.cli import bkctl_stopping_zookeeper
from tests.support.kazoo_client import kazoo_client
from tests.support.waiting import stop_process


def _plant(client: KazooClient, top: str, parents: int, leaves: int) -> int:
    """``top/ledgers/00/{0000..}/L{0000..}``: *parents* leaves of the hierarchical layout with
    *leaves* ledgers each, created pipelined; how many znodes the tree holds."""
    client.ensure_path(f"{top}/ledgers/00")
    made = 3
    for p in range(parents):
        client.create(f"{top}/ledgers/00/{p:04d}")
        answers = [client.create_async(f"{top}/ledgers/00/{p:04d}/L{i:04d}", b"m") for i in range(leaves)]
        for answer in answers:
            answer.get(timeout=30)
        made += 1 + leaves
    return made


def _count(client: KazooClient, path: str) -> int:
    if client.exists(path) is None:
        return 0
    return 1 + sum(_count(client, f"{path}/{child}") for child in client.get_children(path))


def test_a_tree_of_thousands_of_znodes_is_deleted_whole_and_nothing_beside_it(
    zookeeper, zk_client, zk_session, zk_namespace
):
    """Every level at once, an ephemeral znode of another session among them; a root named with
    the same prefix beside it stays; a tree already gone is no error (0 deleted)."""
    top, beside = zk_namespace, f"{zk_namespace}x"
    total = _plant(zk_client, top, parents=3, leaves=1000)
    zk_client.create(f"{beside}/keep", b"k", makepath=True)
    try:
        with kazoo_client(zookeeper.connect_string) as other:
            other.create(f"{top}/ledgers/available/b0", b"", ephemeral=True, makepath=True)
            total += 2
            assert zk_session.delete_tree(top) == total
            assert zk_client.exists(top) is None
            assert zk_client.get(f"{beside}/keep")[0] == b"k"
            assert zk_session.delete_tree(top) == 0  # gone already
    finally:
        zk_client.delete(beside, recursive=True)


@pytest.fixture
def session(zookeeper):
    with ZKSession(zookeeper.connect_string, "/", timeout=20, twins=fastpath.selected()) as s:
        yield s


def test_a_znode_that_gains_a_child_meanwhile_is_listed_and_deleted_again(
    zk_client, session, zk_namespace, monkeypatch
):
    """Between the listing of the ledgers' level and their deletion, another client adds a
    child to one ledger znode (NotEmpty: listed again, the child deleted, then it) and deletes
    another one (NoNode: fine)."""
    top = zk_namespace
    total = _plant(zk_client, top, parents=1, leaves=200)
    leaves = f"{top}/ledgers/00/0000"
    real = session.children_many
    asked: list[list[str]] = []

    def listing(paths: list[str], window: int = 256):
        got = list(real(paths, window))
        asked.append(paths)
        if len(asked) == 5:  # the children of top, ledgers, 00, 0000, then of the ledgers' level
            assert sorted(paths)[0] == f"{leaves}/L0000" and len(paths) == 200
            zk_client.create(f"{leaves}/L0007/late", b"")
            zk_client.delete(f"{leaves}/L0008")
        return iter(got)

    monkeypatch.setattr(session, "children_many", listing)
    assert session.delete_tree(top) == total  # one more (late), one fewer (L0008)
    assert zk_client.exists(top) is None
    assert [f"{leaves}/L0007"] in asked[5:]  # listed again alone


def test_a_znode_that_keeps_gaining_children_stops_the_delete_with_its_name(
    zk_client, session, zk_namespace, monkeypatch
):
    top = zk_namespace
    _plant(zk_client, top, parents=1, leaves=100)
    busy = f"{top}/ledgers/00/0000/L0042"
    real = session.children_many
    added = iter(range(1000))

    def listing(paths: list[str], window: int = 256):
        got = list(real(paths, window))
        if busy in paths:
            zk_client.create(f"{busy}/c{next(added)}", b"")
        return iter(got)

    monkeypatch.setattr(session, "children_many", listing)
    with pytest.raises(MetadataStoreError, match=f"{busy} keeps gaining children"):
        session.delete_tree(top)
    assert zk_client.exists(busy) is not None and zk_client.exists(top) is not None  # nothing above it


def test_a_zookeeper_stopped_mid_delete_is_unavailable_with_how_far_it_got(own_zookeeper, monkeypatch):
    """SIGSTOP as the 1,000th delete is sent: ZKUnavailable naming how many went; the parents
    of what was left are all there; a new session deletes the rest."""
    server, _ = own_zookeeper
    top = "/tree"
    with kazoo_client(server.connect_string, timeout=20) as client:
        total = _plant(client, top, parents=3, leaves=700)
        with ZKSession(server.connect_string, "/", timeout=2, twins=fastpath.selected()) as session:
            kazoo = session.client
            real = kazoo.delete_async
            sent = iter(range(1, 10**6))

            def deleting(path: str, version: int = -1):
                if next(sent) == 1000:
                    stop_process(server.pid)  # stopped before the 1,000th is sent
                return real(path, version)

            monkeypatch.setattr(kazoo, "delete_async", deleting)
            try:
                with pytest.raises(ZKUnavailable) as failed:
                    session.delete_tree(top)
            finally:
                os.kill(server.pid, signal.SIGCONT)
        message = str(failed.value)
        got = re.search(
            r"unavailable.*; deleting /tree: ([\d,]+) znodes below it deleted, /tree and the rest still", message
        )
        assert got, message
        deleted = int(got.group(1).replace(",", ""))
        assert 700 <= deleted < 1000  # the first leaf's 700, part of the second's
        assert client.exists(f"{top}/ledgers/00/0000") is not None  # nothing above the failure
        assert client.exists(f"{top}/ledgers/00/0001/L0699") is not None
        left = _count(client, top)
        assert left <= total - deleted
    with ZKSession(server.connect_string, "/", timeout=20, twins=fastpath.selected()) as again:
        assert again.delete_tree(top) == left
        assert again.exists(top) is None


def test_cluster_nuke_says_zookeeper_went_away_in_one_line_and_exits_5(own_zookeeper):
    server, uri = own_zookeeper
    with kazoo_client(server.connect_string, timeout=20) as client:
        _plant(client, "", parents=1, leaves=2000)  # /ledgers/00/0000/L0000..
        stop_at_the_700th_delete = (
            "from kazoo.client import KazooClient\n"
            "real, sent = KazooClient.delete_async, [0]\n"
            "def deleting(self, path, version=-1):\n"
            "    sent[0] += 1\n"
            "    if sent[0] == 700:\n"
            "        stop_zookeeper()\n"
            "    return real(self, path, version)\n"
            "KazooClient.delete_async = deleting"
        )
        stopped = bkctl_stopping_zookeeper(
            server.pid, stop_at_the_700th_delete, "-m", uri, "--timeout", "2", "cluster", "nuke", "--force"
        )
        assert stopped.returncode == 5, stopped.stderr
        assert stopped.stderr.count("\n") == 1, stopped.stderr
        assert "unavailable" in stopped.stderr and "znodes below it deleted" in stopped.stderr
        assert client.exists("/ledgers/00/0000") is not None and client.exists("/ledgers/LAYOUT") is not None
