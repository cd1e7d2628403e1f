"""One ledger's fsck (wire/fsck/check.py) against fake bookies that answer as bookied does
(tests/support/fake_bookie.py, held to it by the channel conformance suite), each cause named
alone; and the guarded fixes (wire/fsck/fixes.py) on the in-memory store."""

from __future__ import annotations

from dataclasses import replace

import pytest
from twisted.internet import defer

from bkctl.wire.codecs.digest import DigestManager, DigestType
from bkctl.wire.fsck.check import BookieRequests, CheckOptions, check_ledger, confirm_lost
from bkctl.wire.fsck.findings import Kind, runs_of
from bkctl.wire.fsck.fixes import Fix, apply_fix
from bkctl.wire.metadata.ledger import LedgerMetadata
from tests.support.deferreds import successResultOf
from tests.support.fake_bookie import FakePool
from tests.support.fake_store import FakeMetadataStore

A, B, C, D, E = (f"10.0.0.{i}:3181" for i in range(1, 6))
LID = 42
N = 10


def body(entry_id: int, flip: bool = False) -> bytes:
    data = bytearray(DigestManager(LID, DigestType.CRC32C, b"pw").package(entry_id, entry_id - 1, 0, b"p%d" % entry_id))
    if flip:
        data[-1] ^= 1
    return bytes(data)


def metadata(*segments, closed: bool = True) -> LedgerMetadata:
    md = LedgerMetadata.new(segments[0][1], 2, 2, password=b"pw")
    for first, ensemble in segments[1:]:
        md = md.with_ensemble_change(first, ensemble)
    return md.closed(N - 1, 0) if closed else md


def check(pool, md, registered=(A, B, C, D, E), **options):
    found = defer.ensureDeferred(
        check_ledger(BookieRequests(pool, 4), LID, md, 3, CheckOptions(frozenset(registered), **options))
    )
    return successResultOf(found)


def holding(protocol: str = "v3", **held):
    pool = FakePool(protocol=protocol, auto=True)
    for bookie in (A, B, C, D, E):
        pool.get(bookie)
    for name, entries in held.items():
        for e in entries:
            pool.get(globals()[name]).stored[(LID, e)] = body(e)
    return pool


def test_every_copy_in_place_is_no_finding():
    assert check(holding(A=range(N), B=range(N)), metadata((0, [A, B]))) is None


@pytest.mark.parametrize("protocol", ["v3", "v2"])  # v2: no entry list, the entries are read
def test_copies_missing_on_a_live_bookie(protocol):
    f = check(holding(protocol, A=range(N), B=[0, 1, 2, 7, 8, 9]), metadata((0, [A, B])))
    assert (f.kind, f.missing, f.version) == (Kind.MISSING, {B: [(3, 6)]}, 3)
    assert "registered bookies lack entries" in f.message


def test_a_bookie_that_gives_no_entry_list_is_not_asked_again():
    pool = holding("v2", A=range(N), B=range(N))
    requests = BookieRequests(pool, 4)
    options = CheckOptions(frozenset((A, B)))
    for _ in range(2):
        assert (
            successResultOf(defer.ensureDeferred(check_ledger(requests, LID, metadata((0, [A, B])), 0, options)))
            is None
        )
    assert requests.sent["availability"] == 2 and requests.unlisted == {A, B}


def test_a_lost_bookie_is_not_asked_and_its_copies_count_as_missing():
    pool = holding(A=range(N), B=range(N))
    f = check(pool, metadata((0, [A, B])), registered=(A, C, D))
    assert (f.kind, f.missing) == (Kind.MISSING, {B: [(0, 9)]}) and "not live: " + B in f.message
    assert not any(lid == LID for lid, _e, _f in pool.get(B).reads)


def test_entries_on_bookies_outside_the_ensemble_are_misplaced():
    f = check(holding(C=range(N), D=range(N)), metadata((0, [A, B])))
    assert f.kind is Kind.MISPLACED
    assert {(m.first_entry_id, m.position, m.bookie, m.holder) for m in f.moves} == {(0, 0, A, C), (0, 1, B, D)}


def test_misplaced_with_more_bookies_than_copies_points_each_position_at_its_own_holder():
    # E3/Qw2: entry e on positions e%3 and (e+1)%3; the data went to D, E in place of A, B
    md = LedgerMetadata.new([A, B, C], 2, 2, password=b"pw").closed(N - 1, 0)
    held = {D: [e for e in range(N) if e % 3 in (0, 2)], E: [e for e in range(N) if e % 3 in (0, 1)]}
    held[C] = [e for e in range(N) if e % 3 in (1, 2)]
    pool = holding()
    for bookie, entries in held.items():
        for e in entries:
            pool.get(bookie).stored[(LID, e)] = body(e)
    f = check(pool, md)
    assert f.kind is Kind.MISPLACED
    assert [(m.position, m.bookie, m.holder) for m in f.moves] == [(0, A, D), (1, B, E)]


def test_a_segment_with_no_copy_is_data_lost():
    f = check(holding(A=range(5), B=range(5)), metadata((0, [A, B]), (5, [C, D])))
    assert (f.kind, f.lost) == (Kind.DATA_LOST, [(5, 9)])


def test_lost_data_is_confirmed_on_the_metadata_read_anew():
    """A ledger found to have lost data is checked again on its metadata as it is now: one a
    mover swapped (its copies written elsewhere while the first check read) or deleted meanwhile
    is not called lost; one still as it was is."""
    md = metadata((0, [A, B]), (5, [C, D]))
    pool = holding(A=range(5), B=range(5))
    first = check(pool, md)
    assert first.kind is Kind.DATA_LOST

    def again(md_now, version):
        return check(pool, md_now)

    assert confirm_lost(first, lambda: (md, 3), again).kind is Kind.DATA_LOST  # nothing changed
    assert confirm_lost(first, lambda: None, again) is None  # deleted meanwhile
    for e in range(5, N):  # a mover copied 5-9 to D and E and swapped the metadata
        pool.get(D).stored[(LID, e)] = pool.get(E).stored[(LID, e)] = body(e)
    assert confirm_lost(first, lambda: (metadata((0, [A, B]), (5, [D, E])), 4), again) is None
    healthy_or_other = check(holding(A=range(N), B=range(3)), metadata((0, [A, B])))
    assert healthy_or_other.kind is not Kind.DATA_LOST

    def no_read():
        raise AssertionError("read again for a finding that says no data is lost")

    assert confirm_lost(healthy_or_other, no_read, again) is healthy_or_other


def test_no_copy_anywhere_with_every_bookie_answering_is_metadata_only():
    f = check(holding(), metadata((0, [A, B])))
    assert (f.kind, f.lost) == (Kind.METADATA_ONLY, [(0, 9)])


def test_a_bookie_that_does_not_answer_makes_it_data_lost_not_metadata_only():
    pool = holding(A=range(N), B=range(N))
    pool.get(A).down = pool.get(B).down = True
    f = check(pool, metadata((0, [A, B])))
    assert f.kind is Kind.DATA_LOST and f"{A}, {B} did not answer" in f.message


def test_a_flipped_byte_names_the_bad_copy():
    pool = holding(A=range(N), B=range(N))
    pool.get(B).stored[(LID, 4)] = body(4, flip=True)
    sampled = check(pool, metadata((0, [A, B])), sample=0)  # first and last only: entry 4 not read
    assert sampled is None
    f = check(pool, metadata((0, [A, B])), compare_all=True)
    assert f.kind is Kind.CORRUPT and [(b.entry_id, b.bookie) for b in f.bad] == [(4, B)]


def test_an_open_ledgers_last_segment_is_not_judged():
    md = metadata((0, [A, B]), (5, [C, D]), closed=False)
    assert check(holding(A=range(5), B=range(5)), md) is None
    f = check(holding(A=range(5), B=range(3)), md)
    assert (f.kind, f.missing) == (Kind.MISSING, {B: [(3, 4)]})


@pytest.mark.parametrize("compare_all", [False, True])
def test_a_lone_copy_failing_its_digest_beside_a_lost_bookie_is_data_lost(compare_all):
    # B lost its disk for good (not registered); A's copy of entry 5 has a flipped byte
    pool = holding(A=range(N), B=range(N))
    pool.get(A).stored[(LID, 5)] = body(5, flip=True)
    f = check(pool, metadata((0, [A, B])), registered=(A, C, D), compare_all=compare_all)
    assert (f.kind, f.lost, f.missing) == (Kind.DATA_LOST, [(5, 5)], {B: [(0, 9)]})
    (run,) = f.lost_runs
    assert (run.first, run.last, run.bookies) == (5, 5, (A, B))
    assert run.cause == f"its only copy, on {A}, fails its digest; {B} is not live"
    assert "entry 5" in f.message and f.severity.name == "LOST"
    assert f.bookies_to_mark() == [B]  # the 9 other copies can be made
    assert f.to_json()["lost"] == [{"first_entry_id": 5, "last_entry_id": 5, "bookies": [A, B], "cause": run.cause}]


def test_a_wiped_bookie_beside_a_bad_lone_copy_is_data_lost():
    pool = holding(A=range(N))  # B is registered and answers, empty
    pool.get(A).stored[(LID, 5)] = body(5, flip=True)
    pool.get(A).stored[(LID, 6)] = body(6, flip=True)
    f = check(pool, metadata((0, [A, B])))
    assert (f.kind, f.lost) == (Kind.DATA_LOST, [(5, 6)])
    assert [r.cause for r in f.lost_runs] == [f"its only copy, on {A}, fails its digest; {B} does not hold it"]


def test_every_copy_bad_is_data_lost_not_corrupt():
    pool = holding(A=range(N), B=range(N))
    pool.get(A).stored[(LID, 4)] = body(4, flip=True)
    pool.get(B).stored[(LID, 4)] = body(4, flip=True)
    f = check(pool, metadata((0, [A, B])), compare_all=True)
    assert (f.kind, f.lost) == (Kind.DATA_LOST, [(4, 4)])
    assert f.lost_runs[0].cause.startswith("every copy is bad: ")
    from bkctl.wire.fsck.fixes import fix_for

    assert fix_for(f) is None  # nothing to copy from: no mark a worker would retry for ever


def test_a_bad_copy_beside_a_missing_one_is_marked_with_it():
    md = LedgerMetadata.new([A, B, C], 3, 3, password=b"pw").closed(N - 1, 0)
    pool = holding(A=range(N), B=range(N))
    pool.get(B).stored[(LID, 5)] = body(5, flip=True)
    f = check(pool, md, registered=(A, B, D))
    assert (f.kind, [(b.entry_id, b.bookie) for b in f.bad]) == (Kind.MISSING, [(5, B)])
    assert f.bookies_to_mark() == [B, C]


def test_copies_on_a_bookie_taking_no_writes_are_leftovers_never_a_move_target():
    # B (of the ensemble) lost its copies; C, read-only (being drained), still holds the
    # replica a drain moved off it: the copy to make is B's, not an ensemble pointed back at C
    pool = holding(A=range(N), C=range(N))
    f = check(pool, metadata((0, [A, B])), targets=frozenset((A, B, D, E)))
    assert (f.kind, f.missing, f.moves, f.leftovers) == (Kind.MISSING, {B: [(0, 9)]}, (), {C: [(0, 9)]})
    assert f.bookies_to_mark() == [B] and "leftover copies" in f.message
    from bkctl.wire.fsck.fixes import fix_for

    assert fix_for(f) is Fix.MARK
    # every entry only on bookies taking no writes: misplaced, and no fix points at them
    pool = holding(C=range(N), D=range(N))
    f = check(pool, metadata((0, [A, B])), targets=frozenset((A, B, E)))
    assert (f.kind, f.moves) == (Kind.MISPLACED, ()) and fix_for(f) is None
    assert "take no writes" in f.message and set(f.leftovers) == {C, D}


def test_findings_all_about_one_empty_bookie_are_grouped_by_it():
    from bkctl.wire.fsck.findings import group

    wiped = check(holding(A=range(N)), metadata((0, [A, B])))  # B answers and holds nothing
    assert wiped.empty == (B,) and wiped.whole_bookie() == B
    partly = check(holding(A=range(N), B=range(5)), metadata((0, [A, B])))
    assert partly.whole_bookie() is None
    down = check(holding(A=range(N), B=range(N)), metadata((0, [A, B])), registered=(A, C))
    assert down.whole_bookie() == B
    findings = [replace(wiped, ledger_id=i) for i in (1, 2, 3, 7)] + [replace(partly, ledger_id=5)]
    groups, alone = group(findings, registered=(A, B))
    assert [(g.bookie, g.live, g.ledgers) for g in groups] == [(B, True, (1, 2, 3, 7))]
    assert groups[0].text().startswith(f"bookie {B} holds none of its 4 ledgers' entries: disk lost? ")
    assert "ledgers 1-3, 7;" in groups[0].text() and [f.ledger_id for f in alone] == [5]
    groups, alone = group([replace(down, ledger_id=1), replace(down, ledger_id=2)], registered=(A,))
    assert "not live" in groups[0].text() and alone == []
    groups, alone = group([wiped], registered=(A, B))  # one ledger: its own line
    assert groups == [] and alone == [wiped]


def test_runs_outside():
    from bkctl.wire.fsck.findings import runs_outside

    assert runs_outside([(0, 9)], [(5, 5)]) == [(0, 4), (6, 9)]
    assert runs_outside([(0, 3), (7, 9)], [(0, 4), (9, 20)]) == [(7, 8)]
    assert runs_outside([(5, 5)], [(5, 5)]) == []


def test_runs_of():
    assert runs_of([5, 1, 2, 3, 9, 8, 2]) == [(1, 3), (5, 5), (8, 9)] and runs_of([]) == []


# -- fixes ---------------------------------------------------------------------------------------


@pytest.fixture
def store():
    s = FakeMetadataStore().start()
    s.underreplication.ensure_layout()
    return s


def test_the_ensemble_fix_points_at_the_holders_by_compare_and_set(store):
    md = metadata((0, [A, B]))
    store.ledgers.create(md, ledger_id=LID)
    f = check(holding(C=range(N), D=range(N)), md)
    f = replace(f, version=0)
    for bookie in (C, D):
        store.cookies.put(bookie, b"cookie")
        store.registration.register(bookie)
    assert apply_fix(store, f, Fix.ENSEMBLE, dry_run=True).status == "would_apply"
    assert store.ledgers.read(LID)[0].ensembles == ((0, (A, B)),)
    store.ledgers.update(LID, md, 0)  # changed since the check: left alone
    assert apply_fix(store, f, Fix.ENSEMBLE, dry_run=False).status == "conflict"
    f = replace(f, version=1)
    store.registration.unregister(D)
    store.registration.register(D, readonly=True)
    refused = apply_fix(store, f, Fix.ENSEMBLE, dry_run=False)  # D turned read-only (drained) since
    assert refused.status == "conflict" and f"{D} takes no writes" in refused.detail
    store.registration.unregister(D)
    store.registration.register(D)
    assert apply_fix(store, f, Fix.ENSEMBLE, dry_run=False).status == "applied"
    assert store.ledgers.read(LID)[0].ensembles == ((0, (C, D)),)


def test_the_mark_and_unmark_fixes(store):
    md = metadata((0, [A, B]))
    store.ledgers.create(md, ledger_id=LID)
    f = check(holding(A=range(N), B=range(4)), md)
    f = replace(f, version=0)
    assert apply_fix(store, f, Fix.MARK, dry_run=False).status == "applied"
    assert store.underreplication.get(LID).replicas == (B,)
    assert apply_fix(store, f, Fix.MARK, dry_run=False).status == "skipped"
    with pytest.raises(ValueError):
        apply_fix(store, f, Fix.UNMARK, dry_run=False)
    from bkctl.wire.fsck.findings import Finding

    stale = Finding(7, Kind.MARKED_DELETED, "deleted", marked=(A,))
    store.underreplication.mark(7, [A])
    assert apply_fix(store, stale, Fix.UNMARK, dry_run=True).status == "would_apply"
    assert apply_fix(store, stale, Fix.UNMARK, dry_run=False).status == "applied"
    assert store.underreplication.get(7) is None
    assert apply_fix(store, stale, Fix.UNMARK, dry_run=False).status == "skipped"


@pytest.mark.parametrize("fix", [Fix.MARK, Fix.ENSEMBLE])
def test_a_ledger_deleted_after_the_check_is_one_conflict_not_the_end_of_the_run(store, fix):
    md = metadata((0, [A, B]))
    pool = holding(A=range(N), B=range(4)) if fix is Fix.MARK else holding(C=range(N), D=range(N))
    f = replace(check(pool, md), version=0)  # checked, then deleted by its writer before the fix
    outcome = apply_fix(store, f, fix, dry_run=False)
    assert outcome.status == "conflict" and "deleted meanwhile" in outcome.detail
    assert store.underreplication.get(LID) is None


def test_the_mark_fix_of_a_data_lost_ledger_names_only_the_bookies_it_can_fill(store):
    md = metadata((0, [A, B]))
    store.ledgers.create(md, ledger_id=LID)
    pool = holding(A=range(N), B=range(N))
    pool.get(A).stored[(LID, 5)] = body(5, flip=True)
    f = replace(check(pool, md, registered=(A, C, D)), version=0)
    outcome = apply_fix(store, f, Fix.MARK, dry_run=False)
    assert outcome.status == "applied" and store.underreplication.get(LID).replicas == (B,)
    # a ledger whose only missing copy is its lost entry's: nothing to mark
    pool = holding(A=range(N), B=[e for e in range(N) if e != 5])
    pool.get(A).stored[(LID, 5)] = body(5, flip=True)
    from bkctl.wire.fsck.fixes import fix_for

    f = check(pool, md)
    assert f.kind is Kind.DATA_LOST and f.missing == {B: [(5, 5)]} and fix_for(f) is None


def test_a_damaged_ledgers_owner_is_named():
    from bkctl.ops.ledger_fsck import OwnerNames
    from bkctl.wire.proto import pulsar_ml_pb2 as ml

    s = FakeMetadataStore().start()
    info = ml.ManagedLedgerInfo()
    info.ledgerInfo.add(ledgerId=LID, entries=N)
    cursor = ml.ManagedCursorInfo(cursorsLedgerId=43, markDeleteLedgerId=LID, markDeleteEntryId=0)
    s.pulsar.put_managed_ledger(
        "public/default/persistent/orders", info.SerializeToString(), {"billing": cursor.SerializeToString()}
    )
    pulsar = {"component": b"managed-ledger", "pulsar/managed-ledger": b"public/default/persistent/orders"}
    md = replace(metadata((0, [A, B])), custom_metadata=pulsar)
    names = OwnerNames(s)
    assert names.name(LID, md) == "topic persistent://public/default/orders"
    assert names.name(43, md) == "cursor billing of topic persistent://public/default/orders"
    assert names.name(44, md) == "a Pulsar ledger no topic lists (orphan)"
    assert names.name(45, metadata((0, [A, B]))) is None  # not Pulsar's, listed by none
    f = check(holding(A=range(N)), md).with_owner(names.name(LID, md))
    assert f.to_json()["owner"] == "topic persistent://public/default/orders" and "owner: topic" in f.text()


def test_a_bookie_whose_http_admin_cannot_list_its_ledgers_is_named_not_checked():
    """The bookie-only check asks each bookie's HTTP admin for its ledgers; one that cannot
    answer (no HTTP endpoint published, not registered) is named, and the run goes on."""
    from types import SimpleNamespace

    from bkctl.ops.ledger_fsck import FsckRun
    from bkctl.wire.metadata.serviceinfo import BookieServiceInfo
    from tests.support.fake_store import FakeMetadataStore

    HTTP_LESS, GONE = "10.0.2.1:3181", "10.0.2.2:3181"
    store = FakeMetadataStore().start()
    store.registration.register(HTTP_LESS, BookieServiceInfo.for_bookie("10.0.2.1", 3181))  # no HTTP endpoint
    run = FsckRun(SimpleNamespace(client=SimpleNamespace(store=store)))
    assert run.bookie_lists(frozenset({HTTP_LESS, GONE})) is not None
    assert sorted(run.totals.not_checked) == sorted([HTTP_LESS, GONE])
    assert "publishes no HTTP endpoint" in run.totals.not_checked[HTTP_LESS]
    assert "is not registered" in run.totals.not_checked[GONE]
