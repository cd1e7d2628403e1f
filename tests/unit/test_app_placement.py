"""The placement policy an App (a one-shot bkctl, a shell session) hands its client and commands:
one per setting, its rack map watch stopped when ``--placement`` switches and when the App closes,
so that a long shell session does not pile up watches on its ZooKeeper session."""

from __future__ import annotations

from bkctl.app import App
from bkctl.wire.client.placement import RackAwarePlacement, RegionAwarePlacement
from tests.support.fake_store import FakeMetadataStore

A, B = "127.0.0.1:3181", "127.0.0.1:3182"


class FakeStoreApp(App):
    """An App whose store is the tests' fake (which outlives the App: the test looks at it after)."""

    def __init__(self, fake: FakeMetadataStore, **kw):
        super().__init__(**kw)
        self.fake = fake

    def connect_store(self):
        return self.fake


def racked_store() -> FakeMetadataStore:
    store = FakeMetadataStore().start()  # (a cluster already)
    store.registration.register(A)
    store.registration.register(B)
    store.racks.write({"default": {A: {"rack": "/r1"}, B: {"rack": "/r2"}}}, None)
    return store


def test_the_policy_is_built_once_and_its_watch_stops_at_a_switch_and_at_close():
    store = racked_store()
    app = FakeStoreApp(store, interactive=True)
    policy = app.placement_policy()  # the rack map names the bookies: rack-aware by default
    assert type(policy) is RackAwarePlacement
    assert store.live_watches() == 0  # the default's look at the rack map let go of its watch
    policy.refresh([A, B])  # the client's first choice of bookies: the rack map is watched
    assert store.live_watches() == 1 and policy.rack(A) == "/r1"
    assert app.placement_policy() is policy  # the next command's: the same policy, the same watch
    assert store.live_watches() == 1

    app.use_placement("region")  # the shell's --placement switch
    assert store.live_watches() == 0  # the policy left stopped watching
    region = app.placement_policy()
    assert type(region) is RegionAwarePlacement and region is not policy
    region.refresh([A, B])
    assert store.live_watches() == 1

    app.close()
    assert store.live_watches() == 0  # nothing of the App's left on the store's session
    store.racks.write({"default": {A: {"rack": "/r9"}, B: {"rack": "/r2"}}}, 0)
    assert region.rack(A) == "/r1"  # not told any more


def test_a_random_policy_has_nothing_to_close_and_a_switch_to_it_stops_the_rack_watch():
    store = racked_store()
    app = FakeStoreApp(store, interactive=True, placement="rack")
    app.placement_policy().refresh([A, B])
    assert store.live_watches() == 1
    app.use_placement("random")
    assert app.placement_policy().name == "random" and store.live_watches() == 0
    app.close()
    assert store.live_watches() == 0
