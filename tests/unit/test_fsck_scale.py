"""What ``bkctl ledger fsck`` keeps while it streams (wire/fsck/findings.py's Grouping): the
findings all about one wiped bookie -- a third of a million-ledger cluster's ledgers -- are
kept as ids and counts until their one line at the end, not as findings."""

from __future__ import annotations

import gc
import weakref

import pytest

from bkctl.wire.fsck import check as fsck_check
from bkctl.wire.fsck.findings import Finding, Grouping, Kind

A, B = "10.0.3.1:3181", "10.0.3.2:3181"


def wiped(ledger_id: int, bookie: str = B) -> Finding:
    return Finding(ledger_id, Kind.MISSING, "copies missing", missing={bookie: [(0, 99)]}, empty=(bookie,))


def test_a_wiped_bookies_findings_are_kept_as_ids_and_counts_not_findings():
    grouping = Grouping()
    refs = []
    for lid in range(1, 201):
        f = wiped(lid)
        refs.append(weakref.ref(f))
        assert grouping.add(f, None, "mark: applied" if lid % 2 else None)
        del f
    lone = wiped(500, A)
    assert grouping.add(lone, "its outcome")
    other = Finding(7, Kind.CORRUPT, "differs")
    assert not grouping.add(other)  # not all about one bookie: the caller shows it at once
    gc.collect()
    assert sum(r() is not None for r in refs) == 1  # the first one only
    groups, alone = grouping.groups(registered=[A, B])
    ((whole, notes),) = groups
    assert (whole.bookie, whole.live, whole.ledgers) == (B, True, tuple(range(1, 201)))
    assert notes == {"mark: applied": 100}
    assert [(f.ledger_id, tag) for f, tag in alone] == [(500, "its outcome")]


def test_ledgers_with_nothing_on_the_bookies_are_judged_without_the_reactor(monkeypatch):
    """Most of a large cluster's ledgers may be empty or open in their first segment: their
    check is their metadata alone, so they are not handed to the reactor one by one (a
    thread hop a ledger, 303 us each at load 20: 5 minutes of a 10^6-ledger run)."""
    from types import SimpleNamespace

    from bkctl.ops import ledger_fsck
    from bkctl.wire import fastpath
    from bkctl.wire.metadata.ledger import LedgerMetadata
    from tests.support.fake_bookie import FakePool
    from tests.support.fake_store import FakeMetadataStore

    store = FakeMetadataStore().start()
    new = LedgerMetadata.new([A, B, "10.0.3.3:3181"], 2, 2, password=b"")
    empty = [store.ledgers.create(new.closed(-1, 0))[0] for _ in range(20)]
    opened = [store.ledgers.create(new)[0] for _ in range(5)]
    full = store.ledgers.create(new.closed(9, 100))[0]  # no bookie is registered: a finding
    store.underreplication.mark(empty[0], [A])
    handed: list[int] = []  # the ledgers checked one at a time, through the bookies
    check_ledger = fsck_check.check_ledger

    def counted(requests, ledger_id, md, version, options):
        handed.append(ledger_id)
        return check_ledger(requests, ledger_id, md, version, options)

    monkeypatch.setattr(fsck_check, "check_ledger", counted)
    client = SimpleNamespace(store=store, pool=FakePool(auto=True), twins=fastpath.selected())
    run = ledger_fsck.FsckRun(SimpleNamespace(client=client))
    findings = list(run.findings())
    assert set(handed) == {full}  # (twice: a data_lost finding is checked again on its metadata read anew)
    assert run.totals.ledgers == len(empty) + len(opened) + 1
    assert [(f.ledger_id, f.kind) for f in findings][0] == (empty[0], Kind.MARKED_HEALTHY)
    assert [f.ledger_id for f in findings][1:] == [full]


def test_the_owner_of_a_ledger_naming_no_topic_is_looked_up_not_scanned_for(monkeypatch):
    """fsck names the owner of each damaged ledger; one whose metadata names no managed ledger
    (a plain ledger, or one an older broker made) is looked for in every topic: indexed once,
    not every topic scanned a finding (2.6 s each at 10^4 topics: hours at 10^6 ledgers)."""
    from bkctl.wire.domain.ownership import Owners
    from bkctl.wire.metadata.ledger import LedgerMetadata
    from bkctl.wire.proto import pulsar_ml_pb2 as ml
    from bkctl.wire.pulsar.topics import ManagedLedger
    from tests.support.fake_store import FakeMetadataStore

    store = FakeMetadataStore().start()
    for t in range(5):
        info = ml.ManagedLedgerInfo()
        for lid in (100 * t + 1, 100 * t + 2):
            info.ledgerInfo.add(ledgerId=lid, entries=1)
        cursor = ml.ManagedCursorInfo(cursorsLedgerId=100 * t + 50, markDeleteLedgerId=100 * t + 1)
        store.pulsar.put_managed_ledger(
            f"acme/ns/persistent/t{t}", info.SerializeToString(), {"sub": cursor.SerializeToString()}
        )
    listings = []
    ledger_ids = ManagedLedger.ledger_ids

    def counted(self):
        listings.append(self.name)
        return ledger_ids.fget(self)

    monkeypatch.setattr(ManagedLedger, "ledger_ids", property(counted))
    owners = Owners(store)
    plain = LedgerMetadata.new([A, B], 2, 2, password=b"")
    answers = [owners.owner_of(lid, plain) for lid in (302, 450, 999, 1, 999)]
    assert [(o.owner, o.topic, o.cursor) for o in answers] == [
        ("topic", "persistent://acme/ns/t3", None),
        ("cursor", "persistent://acme/ns/t4", "sub"),
        ("not-pulsar", None, None),
        ("topic", "persistent://acme/ns/t0", None),
        ("not-pulsar", None, None),
    ]
    assert len(listings) == 5  # each managed ledger's listing read once, not once a ledger asked


def test_a_drains_loss_check_reads_the_metadata_as_it_checks(monkeypatch):
    """``lost_with`` (drain's and decommission's dry runs: fsck's data_lost rule) checks a
    bookie's ledgers a chunk at a time; their metadata is read as the chunks go, not held for
    every ledger on the bookie first (286,000 at 10^6 ledgers: 535 MiB)."""
    from types import SimpleNamespace

    from bkctl.ops import recovery
    from bkctl.wire.client import blocking
    from bkctl.wire.metadata.ledger import LedgerMetadata
    from bkctl.wire.metadata.store import LedgerRead

    md = LedgerMetadata.new([A, B, "10.0.3.3:3181"], 2, 2, password=b"").closed(9, 100)
    produced: list[int] = []

    def read_many(ids, naming=None):
        for lid in ids:
            produced.append(lid)
            yield LedgerRead(lid, md, 0)

    store = SimpleNamespace(
        ledgers=SimpleNamespace(read_many=read_many),
        registration=SimpleNamespace(writable_bookies=lambda: [A, B], readonly_bookies=lambda: []),
    )
    seen: list[int] = []

    def checked(fn, client, chunk, registered, timeout=None):
        seen.append(len(produced))
        return {chunk[0][0]: "lost"}

    monkeypatch.setattr(blocking, "run_in_reactor", checked)
    lost = recovery.lost_with(SimpleNamespace(client=None), store, range(1, 1001), A)  # type: ignore[arg-type]
    assert len(lost) == -(-1000 // recovery.LOSS_CHECK_CHUNK)
    assert seen[0] <= 2 * recovery.LOSS_CHECK_CHUNK  # the first chunk checked before the rest was read


@pytest.mark.parametrize("enabled", [True, False])
def test_the_healthy_ledgers_fast_path_follows_the_process_switch(monkeypatch, enabled):
    """fsck's healthy-ledger path (wire/fsck/healthy.py) is a fast path: the command takes it
    only when its client's twins are enabled, so BKCTL_FASTPATHS=0 checks every ledger the
    general way (and the fast-paths-off run of the suite checks that way's findings)."""
    from types import SimpleNamespace

    from bkctl.ops import ledger_fsck
    from bkctl.wire import fastpath
    from bkctl.wire.fsck import healthy
    from bkctl.wire.metadata.ledger import LedgerMetadata
    from tests.support.fake_bookie import FakePool
    from tests.support.fake_store import FakeMetadataStore

    store = FakeMetadataStore().start()
    new = LedgerMetadata.new([A, B, "10.0.3.3:3181"], 2, 2, password=b"")
    full = store.ledgers.create(new.closed(1, 100))[0]
    asked: list[bool] = []
    check_ledgers = healthy.check_ledgers

    def recorded(req, items, options, *, fast=True):
        asked.append(fast)
        return check_ledgers(req, items, options, fast=fast)

    monkeypatch.setattr(healthy, "check_ledgers", recorded)
    client = SimpleNamespace(store=store, pool=FakePool(auto=True), twins=fastpath.build(enabled))
    findings = list(ledger_fsck.FsckRun(SimpleNamespace(client=client)).findings())
    assert asked == [enabled]
    assert [f.ledger_id for f in findings] == [full]  # no bookie registered: a finding either way
