"""Watched walks of the ledger ranges (``ranges(watched=True)``, the bookie garbage collector's):
the same answer as a fresh walk, ZooKeeper asked again only for the znodes that changed, a
change made on another session just before the walk always seen, and an answer whose watch
fired while it was read not kept.  Real ZooKeeper (the restart case is in test_zk_walk.py)."""

from __future__ import annotations

import pytest
from kazoo.protocol.states import WatchedEvent

from bkctl.wire import fastpath
from bkctl.wire.metadata.zk import ZKMetadataStore
from bkctl.wire.metadata.zk.watched_children import WatchedChildren
from tests.support.ledgers import make_ledgers


def listing(ledgers, *, watched: bool) -> dict[int, list[int]]:
    return {r.end: sorted(r.ledgers) for r in ledgers.ranges(watched=watched)}


@pytest.fixture()
def two_stores(metadata_uri):
    with (
        ZKMetadataStore(metadata_uri, timeout=20, twins=fastpath.selected()) as gc,
        ZKMetadataStore(metadata_uri, timeout=20, twins=fastpath.selected()) as other,
    ):
        yield gc, other


def test_a_repeated_watched_walk_lists_only_the_leaves_that_changed(two_stores):
    gc, other = two_stores
    make_ledgers(other, [1, 2, 20_001, 20_002, 10**6])
    first = listing(gc.ledgers, watched=True)
    assert first == listing(other.ledgers, watched=False)
    assert first == {9999: [1, 2], 29_999: [20_001, 20_002], 1_009_999: [10**6]}
    watched = gc.ledgers.watched
    listed = watched.listed
    assert listed == 5  # the root, its "00", and the three leaf parents 00/0000, 00/0002, 00/0100

    assert listing(gc.ledgers, watched=True) == first
    assert watched.listed == listed  # nothing changed: nothing asked for

    make_ledgers(other, [3])
    other.ledgers.delete(20_002)
    assert listing(gc.ledgers, watched=True) == {9999: [1, 2, 3], 29_999: [20_001], 1_009_999: [10**6]}
    assert watched.listed == listed + 2  # the two leaves that changed

    make_ledgers(other, [50_000])  # a new leaf: its parent's children changed too
    assert listing(gc.ledgers, watched=True) == listing(other.ledgers, watched=False)
    assert 50_000 in {i for ids in listing(gc.ledgers, watched=True).values() for i in ids}


def test_a_change_committed_on_another_session_just_before_the_walk_is_always_seen(two_stores):
    gc, other = two_stores
    make_ledgers(other, [1])
    listing(gc.ledgers, watched=True)
    for ledger_id in range(2, 42):
        make_ledgers(other, [ledger_id])  # returns once ZooKeeper committed it
        assert listing(gc.ledgers, watched=True)[9999][-1] == ledger_id
        other.ledgers.delete(ledger_id - 1)
        assert ledger_id - 1 not in listing(gc.ledgers, watched=True)[9999]


class _Session:
    """The two calls WatchedChildren makes of a session, the watch firing while answering."""

    def __init__(self, fire_during_read: bool):
        self.fire_during_read = fire_during_read
        self.children = ["L0001"]
        self.asked = 0
        self.watchers: dict = {}  # path -> the watcher its last read was given, as kazoo keeps it

    def on_disconnect(self, callback):
        return lambda: None

    def settle(self) -> None:
        pass

    def children_watched(self, path, watcher):
        self.asked += 1
        self.watchers[path] = watcher
        answer = list(self.children)
        if self.fire_during_read:
            self.fire_during_read = False
            self.children.append("L0002")
            watcher(WatchedEvent("CHILD", "CONNECTED", path))
        return answer


def test_an_answer_whose_watch_fired_while_it_was_read_is_not_kept():
    session = _Session(fire_during_read=True)
    kept = WatchedChildren(session)  # type: ignore[arg-type]
    assert kept.children("/l/00/0000/0000", list) == ["L0001"]  # the answer, but stale already
    assert kept.children("/l/00/0000/0000", list) == ["L0001", "L0002"]  # asked again
    assert kept.children("/l/00/0000/0000", list) == ["L0001", "L0002"]
    assert session.asked == 2 and kept.reused == 1


def test_an_event_without_a_path_or_a_dropped_connection_forgets_everything():
    session = _Session(fire_during_read=False)
    kept = WatchedChildren(session)  # type: ignore[arg-type]
    kept.children("/a", list)
    kept.children("/b", list)
    session.watchers["/a"](WatchedEvent("NONE", "LOST", None))  # kazoo's call to the watcher it was given
    kept.children("/a", list)
    assert session.asked == 3
    kept.forget()  # what the session's disconnect listener calls
    kept.children("/b", list)
    assert session.asked == 4
