"""A bookie's registration state has one rule, and every view gives its answer.

The moment that tells the views apart is a bookie moving between the lists: it creates its
new node before it deletes the old one (bookied and a Java bookie alike), so ZooKeeper shows
it in both.  Before the rule had one home, ``bookie list`` called such a bookie writable,
``bookie state`` read-only, ``rack list`` printed ``readonly`` where its docstring promised
``read-only``, and the client's placement refused it.
"""

from __future__ import annotations

import random

from bkctl.completers import bookie_states
from bkctl.ops.bookie_http import registration
from bkctl.ops.bookies import Registration, list_bookies
from bkctl.ops.cluster import registered_bookies
from bkctl.ops.racks import list_racks, set_rack
from bkctl.wire.client.placement import RandomPlacement
from bkctl.wire.metadata.cookie import Cookie
from bkctl.wire.metadata.registration_state import Registrations, RegistrationState, takes_writes
from bkctl.wire.rebalance.executor import writable_bookies
from tests.support.fake_store import FakeMetadataStore

WRITABLE, MOVING, READ_ONLY, DOWN = "127.0.0.1:3181", "127.0.0.1:3182", "127.0.0.1:3183", "127.0.0.1:3184"


class MidMove:
    """The store's registrations at the moment a bookie's new node exists and its old one is
    not yet deleted: ``moving`` is in both lists, as ZooKeeper shows it then."""

    def __init__(self, registration, moving: str):
        self.registration, self.moving = registration, moving

    def writable_bookies(self) -> list[str]:
        return sorted({*self.registration.writable_bookies(), self.moving})

    def readonly_bookies(self) -> list[str]:
        return sorted({*self.registration.readonly_bookies(), self.moving})

    def __getattr__(self, name):
        return getattr(self.registration, name)


def _cluster() -> FakeMetadataStore:
    store = FakeMetadataStore().start()
    for bookie in (WRITABLE, MOVING, READ_ONLY, DOWN):
        store.cookies.put(bookie, Cookie(bookie, ("/j",), ("/l",), "inst"))
        set_rack(store, bookie, "/rack-a")
    store.registration.register(WRITABLE)
    store.registration.register(READ_ONLY, readonly=True)
    store.registration = MidMove(store.registration, MOVING)
    return store


def test_a_bookie_in_both_lists_is_read_only_and_takes_no_writes():
    regs = Registrations(frozenset({WRITABLE, MOVING}), frozenset({MOVING, READ_ONLY}))
    assert [regs.state_of(b) for b in (WRITABLE, MOVING, READ_ONLY, DOWN)] == [
        RegistrationState.WRITABLE,
        RegistrationState.READ_ONLY,
        RegistrationState.READ_ONLY,
        RegistrationState.NOT_REGISTERED,
    ]
    assert regs.registered == {WRITABLE, MOVING, READ_ONLY}
    assert regs.taking_writes == {WRITABLE}
    assert takes_writes([MOVING, WRITABLE, WRITABLE, READ_ONLY], {MOVING, READ_ONLY}) == [WRITABLE]


def test_every_view_names_a_moving_bookie_the_same_way():
    store = _cluster()
    listed = {r.bookie_id: r.state for r in list_bookies(store, "all")}
    assert listed == {
        WRITABLE: Registration.WRITABLE,
        MOVING: Registration.READ_ONLY,
        READ_ONLY: Registration.READ_ONLY,
        DOWN: Registration.DOWN,
    }
    assert [r.bookie_id for r in list_bookies(store)] == [WRITABLE]
    assert [r.bookie_id for r in list_bookies(store, "readonly")] == [MOVING, READ_ONLY]
    assert bookie_states(store) == {WRITABLE: "writable", MOVING: "read-only", READ_ONLY: "read-only", DOWN: "down"}
    racks = {r.bookie_id: r.state.value for r in list_racks(store)}
    assert racks == {WRITABLE: "writable", MOVING: "read-only", READ_ONLY: "read-only", DOWN: "not registered"}
    assert registration(store, MOVING) is RegistrationState.READ_ONLY
    assert registered_bookies(store) == [WRITABLE, f"{MOVING} (read-only)", f"{READ_ONLY} (read-only)"]
    # and what may take new data: the movers' targets and a new ledger's ensemble
    assert writable_bookies(store) == [WRITABLE]
    placement = RandomPlacement(random.Random(7))
    regs = store.registration
    assert placement.new_ensemble(1, regs.writable_bookies(), regs.readonly_bookies()) == [WRITABLE]
