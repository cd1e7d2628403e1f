"""The client's bookie lists kept by ZooKeeper watches, against REAL ZooKeeper and REAL
bookied processes: creates read the lists once, whatever their number; a bookied stopped
(by its pid) is not picked once its registration node is gone, a new one is; an expired
session drops them and the next create reads and watches them again."""

from __future__ import annotations

import signal

import pytest
from kazoo.client import KazooClient

from bkctl.wire import fastpath
from bkctl.wire.client.blocking import BlockingBookKeeper
from bkctl.wire.client.errors import NotEnoughBookies
from bkctl.wire.metadata.zk import ZKMetadataStore
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def zk_requests(monkeypatch):
    """The names of the requests this process's ZooKeeper clients send, in order."""
    sent: list[str] = []
    call = KazooClient._call

    def counting(zk, request, result):
        sent.append(type(request).__name__)
        return call(zk, request, result)

    monkeypatch.setattr(KazooClient, "_call", counting)
    return sent


def children_reads(sent: list[str]) -> int:
    return sum(1 for name in sent if name.startswith("GetChildren"))


def lists(bk: BlockingBookKeeper):
    return bk.run(lambda client: client.bookie_lists())


def test_creates_read_the_bookie_lists_once_and_follow_registrations(bookie_cluster, metadata_uri, zk_requests):
    procs = {p.bookie_id: p for p in bookie_cluster(3)}
    bk = BlockingBookKeeper(metadata_uri, add_timeout=30.0, read_timeout=30.0, timeout=120)
    zk_requests.clear()  # (the cluster's start, waiting for the registrations, reads them too)
    try:
        first = bk.create(2, 2, 2)
        first.close()
        reads = children_reads(zk_requests)
        assert reads == 2, zk_requests  # writable and read-only, watched
        for _ in range(20):
            bk.create(2, 2, 2).close()
        assert children_reads(zk_requests) == reads  # 20 more creates: no list read

        gone = first.metadata.last_ensemble[0]
        procs[gone].kill(signal.SIGTERM)  # by its pid; a clean stop takes its registration with it
        wait_for(lambda: gone not in lists(bk).writable, timeout=60, what=f"{gone} gone from the lists")
        for _ in range(10):
            assert gone not in bk.create(2, 2, 2).metadata.last_ensemble
        with pytest.raises(NotEnoughBookies):
            bk.create(3, 2, 2)

        [new] = bookie_cluster(1)
        wait_for(lambda: new.bookie_id in lists(bk).writable, timeout=60, what=f"{new.bookie_id} in the lists")
        assert new.bookie_id in bk.create(3, 2, 2).metadata.last_ensemble
        # two notifications, each read once by its watch: not a read a create
        assert children_reads(zk_requests) <= reads + 4, zk_requests
    finally:
        bk.close()


def test_an_expired_session_drops_the_lists_and_the_next_create_watches_again(
    bookie_cluster, metadata_uri, zk_requests
):
    procs = bookie_cluster(3)
    store = ZKMetadataStore(metadata_uri, timeout=20, twins=fastpath.selected()).start()
    bk = BlockingBookKeeper(store, add_timeout=30.0, read_timeout=30.0, timeout=120)
    try:
        bk.create(3, 2, 2).close()
        old = store.session_id
        session_id, password = store.client.client_id
        zk_requests.clear()
        thief = KazooClient(hosts=store.hosts, client_id=(session_id, password))  # ZooKeeper expires it
        thief.start(timeout=20)
        thief.stop()
        thief.close()
        wait_for(lambda: store.connected and store.session_id not in (None, old), timeout=60, what="a new session")
        # kazoo's recipes of the dropped watches read once more in the new session, to learn
        # they are stopped: let them, then count what the next create sends
        wait_for(lambda: children_reads(zk_requests) >= 2, timeout=60, what="the old watches' last reads")
        zk_requests.clear()
        bk.create(3, 2, 2).close()
        assert children_reads(zk_requests) == 2, zk_requests  # read and watched again, once
        procs[0].kill(signal.SIGTERM)
        wait_for(lambda: procs[0].bookie_id not in lists(bk).writable, timeout=60, what="the new watch to tell")
        with pytest.raises(NotEnoughBookies):
            bk.create(3, 2, 2)
    finally:
        bk.close()
        store.close()
