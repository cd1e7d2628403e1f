"""The auditor on the in-memory store: the store's watches drive it -- a bookie that
leaves is audited (at once, or after lostBookieRecoveryDelay), one that comes back
in time is not marked, a rewritten delay audits at once, marking waits while
autorecovery is disabled, and a stopped auditor hears nothing more.  (The watches
fire alike on ZooKeeper: tests/integration/test_metadata_store_conformance.py.)"""

from __future__ import annotations

from twisted.internet import defer

from bkctl.wire.autorecovery.auditor import Auditor
from bkctl.wire.autorecovery.config import AutoRecoveryConfig, AutoRecoveryStats
from bkctl.wire.autorecovery.status import read_daemon_status
from bkctl.wire.metadata.ledger import LedgerMetadata
from tests.support.deferreds import successResultOf
from tests.support.fake_store import FakeMetadataStore
from tests.support.reactor_clock import ReactorClock

A, B, C = "10.0.0.1:3181", "10.0.0.2:3181", "10.0.0.3:3181"


class Client:
    """What the auditor needs of a BookKeeperClient for a lost-bookie audit: its store,
    and store calls run (here at once) off the reactor."""

    def __init__(self, store):
        self.store = store

    def run_blocking(self, fn, *args, **kwargs):
        return defer.maybeDeferred(fn, *args, **kwargs)


def started(delay: int = 0):
    store, reactor = FakeMetadataStore().start(), ReactorClock()
    for bookie in (A, B, C):
        store.registration.register(bookie)
    store.ledgers.create(LedgerMetadata.new((A, B), password=b""), 1)
    store.ledgers.create(LedgerMetadata.new((B, C), password=b""), 2)
    config = AutoRecoveryConfig(
        lost_bookie_recovery_delay=delay, auditor_periodic_check_interval=0, auditor_periodic_bookie_check_interval=0
    )
    auditor = Auditor(Client(store), config, reactor, AutoRecoveryStats(), clock=reactor.seconds, auditor_id=A)
    successResultOf(auditor.start())
    reactor.run()
    return store, reactor, auditor


def test_a_bookie_leaving_is_audited_and_its_ledgers_marked():
    store, reactor, auditor = started(delay=0)
    audits = auditor.stats.audits
    assert audits >= 1 and store.underreplication.count() == 0  # the watches' first look audits
    store.registration.unregister(A)
    assert auditor.stats.audits == audits  # the store tells from its thread; the reactor audits
    reactor.run()
    assert auditor.stats.audits == audits + 1
    assert [(m.ledger_id, m.replicas) for m in store.underreplication.marks()] == [(1, (A,))]
    assert read_daemon_status(store).auditor.auditor == A


def test_a_bookie_turning_readonly_is_not_lost():
    store, reactor, auditor = started(delay=0)
    store.registration.register(B, readonly=True)
    reactor.run()
    assert store.underreplication.count() == 0 and auditor.lost_since == {}


def test_a_bookie_back_within_the_delay_is_never_marked():
    store, reactor, auditor = started(delay=60)
    store.registration.unregister(A)
    reactor.run()
    assert A in auditor.lost_since and store.underreplication.count() == 0
    store.registration.register(A)  # joining: audited again, no longer lost
    reactor.run()
    assert auditor.lost_since == {}
    reactor.advance(60)
    reactor.run()
    assert store.underreplication.count() == 0


def test_a_bookie_lost_for_the_delay_is_marked_then():
    store, reactor, auditor = started(delay=60)
    store.registration.unregister(C)
    reactor.run()
    reactor.advance(59)
    assert store.underreplication.count() == 0
    reactor.advance(1)
    reactor.run()
    assert [(m.ledger_id, m.replicas) for m in store.underreplication.marks()] == [(2, (C,))]


def test_rewriting_the_delay_audits_at_once():
    store, reactor, auditor = started(delay=60)
    store.registration.unregister(A)
    reactor.run()
    store.underreplication.set_lost_bookie_recovery_delay(60)  # what triggeraudit does
    reactor.run()
    assert store.underreplication.get(1).replicas == (A,)


def test_marking_waits_while_autorecovery_is_disabled():
    store, reactor, auditor = started(delay=0)
    store.underreplication.disable()
    store.registration.unregister(B)
    reactor.run()
    assert store.underreplication.count() == 0 and auditor.status().held_back == 2
    store.underreplication.enable()  # the switch's watch runs the audit held back
    reactor.run()
    assert [m.ledger_id for m in store.underreplication.marks()] == [1, 2]


def test_a_stopped_auditor_hears_nothing_more():
    store, reactor, auditor = started(delay=0)
    successResultOf(auditor.stop())
    audits = auditor.stats.audits
    store.registration.unregister(A)
    store.underreplication.set_lost_bookie_recovery_delay(0)
    reactor.run()
    assert auditor.stats.audits == audits and store.underreplication.count() == 0
    assert store.live_watches() == 0  # every watch was let go
