"""The client's bookie lists, kept by the store's watches (wire/client/bookie_watcher.py),
on the in-memory store: read once for any number of creates, changed by notifications
(a bookie that comes or goes is seen by the next create), dropped with the session,
unwatched by the client's close, the placement's racks refreshed with them."""

from __future__ import annotations

from bkctl.wire.client.errors import ClientClosed, NotEnoughBookies
from bkctl.wire.client.placement import RandomPlacement
from bkctl.wire.metadata.ledger import LedgerMetadata
from bkctl.wire.metadata.racks import build_placement
from tests.support.deferreds import failureResultOf, successResultOf
from tests.support.ledger_client import (
    B,
    create,
    forget_reactors,  # noqa: F401 (an autouse fixture)
    make_client,
    settled,
)

LIST_READS = ("registration.writable_bookies", "registration.readonly_bookies")
WATCHES = ("registration.watch_writable_bookies", "registration.watch_readonly_bookies")


def calls(store, *names):
    return [name for name, _ in store.calls if name in names]


class CountingPlacement(RandomPlacement):
    """Random placement whose rack source counts its refreshes and what it was given."""

    def __init__(self):
        super().__init__()
        self.refreshed: list[list[str]] = []

    def refresh(self, bookies=()):
        self.refreshed.append(sorted(bookies))


def test_a_client_that_places_nothing_watches_nothing():
    client, store, _ = make_client()
    ledger_id, _version = store.ledgers.create(LedgerMetadata.new(B[:3], 2, 2))
    store.calls.clear()
    successResultOf(settled(client.read_metadata(ledger_id)))
    successResultOf(settled(client.close()))
    assert [name for name, _ in store.calls] == ["ledgers.read"]  # no watch, at no point


def test_many_creates_read_the_lists_once_and_watch_them():
    client, store, _ = make_client(bookies=B[:5], readonly=[B[5]])
    store.calls.clear()
    ledgers = [create(client, 3, 2, 2) for _ in range(50)]
    assert calls(store, *WATCHES) == list(WATCHES)  # once, at the first create
    assert calls(store, *LIST_READS) == []
    assert len(calls(store, "ledgers.create")) == 50
    assert all(B[5] not in lh.metadata.last_ensemble for lh in ledgers)  # the read-only one
    assert successResultOf(settled(client.bookie_lists())) == (B[:5], [B[5]])


def test_a_bookie_that_goes_away_is_not_picked_by_the_next_create():
    client, store, _ = make_client(bookies=B[:4])
    create(client, 3, 2, 2)
    store.registration.unregister(B[1])
    for _ in range(20):
        assert B[1] not in create(client, 3, 2, 2).metadata.last_ensemble
    store.registration.unregister(B[2])
    failure = failureResultOf(settled(client.create_ledger(3, 2, 2)), NotEnoughBookies)
    assert "found 2" in str(failure.value)
    assert len(calls(store, *WATCHES)) == 2  # notifications, not reads


def test_a_bookie_that_registers_is_picked_by_the_next_create():
    client, store, _ = make_client(bookies=B[:3])
    assert set(create(client, 3, 3, 2).metadata.last_ensemble) == set(B[:3])
    store.registration.register(B[3])
    assert set(create(client, 4, 3, 2).metadata.last_ensemble) == set(B[:4])
    store.registration.register(B[3], readonly=True)  # the bookie turns read-only
    assert successResultOf(settled(client.bookie_lists())) == (B[:3], [B[3]])


def test_a_session_loss_drops_the_lists_and_the_next_create_watches_again():
    client, store, _ = make_client(bookies=B[:4])
    create(client)
    store.expire_session()  # the registrations come back with the new session
    store.calls.clear()
    create(client)
    assert calls(store, *WATCHES) == list(WATCHES)
    store.registration.unregister(B[0])  # told once, to the new watches only
    assert successResultOf(settled(client.bookie_lists())) == (B[1:4], [])
    create(client)
    assert calls(store, *WATCHES) == list(WATCHES)


def test_the_lists_of_a_lost_session_are_not_answered_from_memory():
    client, store, _ = make_client(bookies=B[:4])
    create(client)
    store.expire_session()
    store.lose_connection()  # and no new session yet: the next create cannot know its bookies
    failureResultOf(settled(client.create_ledger(3, 2, 2)))
    store.reconnect()
    create(client)


def test_the_clients_close_unwatches(monkeypatch):
    client, store, _ = make_client(bookies=B[:4])
    stopped = []
    for name in ("watch_writable_bookies", "watch_readonly_bookies"):
        watch = getattr(store.registration, name)

        def watching(listener, watch=watch, name=name):
            stop = watch(listener)
            return lambda: stopped.append(name) or stop()

        monkeypatch.setattr(store.registration, name, watching)
    create(client)
    assert stopped == []
    successResultOf(settled(client.close()))
    assert sorted(stopped) == ["watch_readonly_bookies", "watch_writable_bookies"]
    failureResultOf(settled(client.bookie_lists()), ClientClosed)


def test_racks_are_refreshed_with_the_lists_not_at_every_create():
    placement = CountingPlacement()
    client, store, _ = make_client(bookies=B[:4], readonly=[B[4]])
    client.placement = placement
    for _ in range(10):
        create(client)
    assert placement.refreshed == [B[:5]]
    store.registration.register(B[5])
    create(client)
    create(client)
    assert placement.refreshed == [B[:5], B[:6]]  # once, after the change
    other = CountingPlacement()
    client.placement = other  # (--placement in a session): its racks read at its first use
    create(client)
    assert other.refreshed == [B[:6]] and len(placement.refreshed) == 2
    assert calls(store, *LIST_READS) == []


def test_a_rack_aware_client_watches_the_rack_map_once_and_follows_its_edits():
    client, store, _ = make_client(bookies=B[:4])
    racks = {b: {"rack": f"/r{i % 2}"} for i, b in enumerate(B[:4])}
    store.racks.write({"default": racks}, None)
    client.placement = build_placement("rack", store=store, enforce=True)
    store.calls.clear()
    for _ in range(10):
        ensemble = create(client, 2, 2, 2).metadata.last_ensemble
        assert {client.placement.rack(b) for b in ensemble} == {"/r0", "/r1"}
    assert calls(store, "racks.watch", "racks.read") == ["racks.watch"]
    store.racks.write({"default": {**racks, B[1]: {"rack": "/r0"}, B[3]: {"rack": "/r0"}}}, 0)  # one rack left
    failureResultOf(settled(client.create_ledger(2, 2, 2)), NotEnoughBookies)  # enforced: no second rack
    assert calls(store, "racks.watch", "racks.read") == ["racks.watch"]
