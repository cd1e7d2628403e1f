"""One replica move under every command that changes where a copy lives: the same
compare-and-set rule (a conflicting write between the read and the swap retried when it left
the swapped segments alone, the swap abandoned when it changed them) for recover and the
workers (``replace_in_metadata``), rebalance and drain (the mover), ``ledger fsck --fix
ensemble`` and ``bookie replace-id``; and the replication lock taken by ``recover`` too."""

from __future__ import annotations

import pytest
from twisted.internet import defer

from bkctl.ops.replace_id import _one_ledger
from bkctl.wire.client.replica_swap import MAX_ATTEMPTS, Swap, SwapOutcome, swap_bookies
from bkctl.wire.client.replication_causes import LOCKED
from bkctl.wire.client.rereplication import replace_in_metadata, rereplicate_ledgers
from bkctl.wire.fsck.findings import Finding, Kind, Move
from bkctl.wire.fsck.fixes import Fix, apply_fix
from bkctl.wire.metadata.ledger import LedgerMetadata
from tests.support.fake_store import FakeMetadataStore

A, B, C, D, E = (f"127.0.0.1:{3181 + i}" for i in range(5))
LEDGER = 5


class Client:
    """What the async callers use of a client: the store, and its calls as Deferreds."""

    def __init__(self, store):
        self.store = store

    def run_blocking(self, fn, *args, **kwargs):
        return defer.maybeDeferred(fn, *args, **kwargs)


@pytest.fixture
def store():
    s = FakeMetadataStore().start()
    for bookie in (A, B, C, D, E):  # writable, each with a cookie: fsck points ensembles at no other
        s.registration.register(bookie)
        s.cookies.put(bookie, b"cookie")
    md = LedgerMetadata.new([A, B, C], write_quorum=2, ack_quorum=2, password=b"pw")
    md = md.with_ensemble_change(50, [A, D, C])  # two segments: 0..49 on A B C, then A D C
    s.ledgers.create(md, LEDGER)
    return s


def a_writer_closes_it(store):
    """Another writer's write between our read and our swap that leaves segment 0 alone."""

    def hook(ledger_id, *_args, **_kw):
        md, version = store.ledgers.read(ledger_id)
        store.ledgers.update(ledger_id, md.closed(99, 1000), version)

    store.before("ledgers.update", hook)


def someone_replaces_b(store):
    """A write that changes segment 0 itself (its B gone to D) between our read and our swap."""

    def hook(ledger_id, *_args, **_kw):
        md, version = store.ledgers.read(ledger_id)
        store.ledgers.update(ledger_id, md.replace_bookie(0, B, D), version)

    store.before("ledgers.update", hook)


def ours(store):
    return dict(store.ledgers.read(LEDGER)[0].ensembles)[0]


# each caller swapping B for E in segment 0 (recover's own test below: it is async)


def via_fsck(store, known):
    md, version = known
    finding = Finding(LEDGER, Kind.MISPLACED, "", moves=(Move(0, 1, B, E),), version=version)
    return apply_fix(store, finding, Fix.ENSEMBLE, dry_run=False).status


def via_replace_id(store, known):
    md, version = known
    return _one_ledger(store, LEDGER, md, version, B, E, dry_run=False).status.value


def via_helper(store, known):
    return swap_bookies(store, LEDGER, [Swap(0, B, E)], known=known).outcome.value


CALLERS = [via_helper, via_fsck, via_replace_id]


@pytest.mark.parametrize("caller", CALLERS, ids=lambda c: c.__name__)
def test_a_write_between_the_read_and_the_swap_that_leaves_the_segment_is_retried(store, caller):
    known = store.ledgers.read(LEDGER)
    a_writer_closes_it(store)
    assert caller(store, known) in ("swapped", "applied", "updated")
    md, _ = store.ledgers.read(LEDGER)
    assert md.is_closed and dict(md.ensembles)[0] == (A, E, C) and dict(md.ensembles)[50] == (A, D, C)


@pytest.mark.parametrize("caller", CALLERS, ids=lambda c: c.__name__)
def test_a_write_that_changed_the_swapped_segment_leaves_the_ledger_unwritten(store, caller):
    known = store.ledgers.read(LEDGER)
    someone_replaces_b(store)
    assert caller(store, known) == "conflict"
    assert ours(store) == (A, D, C)  # the other write stands, ours made nothing of it


def test_recover_swaps_under_the_same_rule(store):
    known = store.ledgers.read(LEDGER)
    a_writer_closes_it(store)
    results = []
    defer.ensureDeferred(replace_in_metadata(Client(store), LEDGER, 0, {B: E}, known)).addBoth(results.append)
    md, _version = results[0]
    assert md.is_closed and dict(md.ensembles)[0] == (A, E, C)
    someone_writes = store.ledgers.read(LEDGER)
    store.ledgers.update(LEDGER, someone_writes[0].replace_bookie(0, E, B), someone_writes[1])
    stale = (md, _version)  # the copy saw A E C; the segment is A B C now
    defer.ensureDeferred(replace_in_metadata(Client(store), LEDGER, 0, {E: D}, stale)).addBoth(results.append)
    assert "changed meanwhile" in str(results[1].value)


def test_metadata_that_keeps_changing_is_left_after_the_one_bound(store):
    known = store.ledgers.read(LEDGER)
    for _ in range(MAX_ATTEMPTS):
        store.before("ledgers.update", lambda lid, *_a, **_k: store.ledgers.update(lid, store.ledgers.read(lid)[0], -1))
    done = swap_bookies(store, LEDGER, [Swap(0, B, E)], known=known)
    assert done.outcome is SwapOutcome.CONFLICT and "kept changing" in done.reason
    assert ours(store) == (A, B, C)


def test_a_swap_made_already_writes_nothing(store):
    swap_bookies(store, LEDGER, [Swap(0, B, E)])
    writes = len(store.called("ledgers.update"))
    assert swap_bookies(store, LEDGER, [Swap(0, B, E)]).outcome is SwapOutcome.DONE
    assert len(store.called("ledgers.update")) == writes


def test_recover_waits_out_a_worker_holding_the_ledger_and_leaves_it_untouched(store):
    assert store.underreplication.lock(LEDGER, "worker-1")  # a replication worker is on it
    results = []
    d = rereplicate_ledgers(Client(store), [LEDGER], [B], lock_as="bkctl-move@here")
    defer.ensureDeferred(d).addBoth(results.append)
    [[report]] = results
    assert report.status == "skipped" and report.cause == LOCKED and "worker-1" in report.error
    assert store.underreplication.lock_holder(LEDGER) == "worker-1"  # still the worker's
    assert ours(store) == (A, B, C)
