"""Both metadata stores -- ZKMetadataStore and the tests' in-memory fake -- match the
MetadataStore protocol, manager by manager, signature by signature, so code tested
on the fake calls exactly what it calls on ZooKeeper (the behaviour of both is
checked alike in tests/integration/test_metadata_store_conformance.py)."""

import inspect
import typing

import pytest

from bkctl.wire import fastpath
from bkctl.wire.metadata import store as S
from bkctl.wire.metadata.zk import ZKMetadataStore
from tests.support.fake_store import FakeMetadataStore

MANAGERS = {
    "cluster": S.ClusterManager,
    "racks": S.RackMap,
    "ledgers": S.LedgerManager,
    "ledger_ids": S.LedgerIdGenerator,
    "registration": S.RegistrationManager,
    "cookies": S.CookieManager,
    "underreplication": S.UnderreplicationManager,
    "auditor": S.AuditorElection,
    "pulsar": S.PulsarMetadata,
    "rebalance": S.SavedRebalance,
    "restores": S.RestoreJournals,
    "lost_entries": S.LostEntryRecords,
}


def methods(protocol):
    return sorted(name for name, value in vars(protocol).items() if callable(value) and not name.startswith("_"))


def params(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()][1:]  # no self


def stores():
    return [ZKMetadataStore("zk://127.0.0.1:1/ledgers", twins=fastpath.selected()), FakeMetadataStore()]


def test_the_protocol_names_every_manager_the_callers_use():
    # the managers are read-only members (properties), each typed as its manager's Protocol
    members = {name: value.fget for name, value in vars(S.MetadataStore).items() if isinstance(value, property)}
    assert sorted(members) == sorted([*MANAGERS, "connected"])  # and whether the session is up
    hints = {name: typing.get_type_hints(fget)["return"] for name, fget in members.items()}
    assert hints.pop("connected") is bool and hints == MANAGERS
    assert "root" in S.MetadataStore.__annotations__
    assert methods(S.MetadataStore) == ["close", "on_session_lost", "start"]


@pytest.mark.parametrize("store", stores(), ids=["zk", "fake"])
@pytest.mark.parametrize("attribute", sorted(MANAGERS))
def test_managers_match_the_protocol(store, attribute):
    protocol = MANAGERS[attribute]
    manager = getattr(store, attribute)
    assert isinstance(manager, protocol)
    for name in methods(protocol):
        assert params(getattr(type(manager), name)) == params(getattr(protocol, name)), name


@pytest.mark.parametrize("store", stores(), ids=["zk", "fake"])
def test_stores_are_metadata_stores(store):
    assert isinstance(store, S.MetadataStore)
    for name in methods(S.MetadataStore):
        assert params(getattr(type(store), name)) == params(getattr(S.MetadataStore, name)), name
    assert store.connected is False and store.root == "/ledgers"
    assert not isinstance(object(), S.MetadataStore)


@pytest.mark.parametrize("store", stores(), ids=["zk", "fake"])
def test_append_locks_match_the_protocol(store):
    lock = store.ledgers.append_lock(1, "me")
    assert isinstance(lock, S.LedgerLock) and lock.path == "/ledgers-bkctl-locks/L1"
    for name in methods(S.LedgerLock):
        assert params(getattr(type(lock), name)) == params(getattr(S.LedgerLock, name)), name
