"""The bookie requests one ledger's fsck makes (wire/fsck/check.py), counted on fake bookies
(tests/support/fake_bookie.py): what the check needs and no more -- each copy read at most
once, and no entry list from a bookie whose every entry is read anyway."""

from __future__ import annotations

import pytest
from twisted.internet import defer

from bkctl.wire.codecs.digest import DigestManager, DigestType
from bkctl.wire.fsck.check import BookieRequests, CheckOptions, check_ledger
from bkctl.wire.fsck.findings import Kind
from bkctl.wire.metadata.ledger import LedgerMetadata, write_set_indices
from tests.support.deferreds import successResultOf
from tests.support.fake_bookie import FakePool

A, B, C, D = (f"10.0.1.{i}:3181" for i in range(1, 5))
LID = 7


def body(entry_id: int, flip: bool = False) -> bytes:
    data = bytearray(DigestManager(LID, DigestType.CRC32C, b"pw").package(entry_id, entry_id - 1, 0, b"e%d" % entry_id))
    if flip:
        data[-1] ^= 1
    return bytes(data)


def e3_ledger(entries: int) -> tuple[FakePool, LedgerMetadata]:
    """A closed E3/Qw2 ledger (bench/bench_fsck.py's shape) with every copy in place."""
    pool = FakePool(auto=True)
    ensemble = [A, B, C]
    for bookie in (A, B, C, D):
        pool.get(bookie)
    for e in range(entries):
        for i in write_set_indices(e, 3, 2):
            pool.get(ensemble[i]).stored[(LID, e)] = body(e)
    return pool, LedgerMetadata.new(ensemble, 2, 2, password=b"pw").closed(entries - 1, 0)


def check(pool, md, **options):
    requests = BookieRequests(pool, 16)
    found = successResultOf(
        defer.ensureDeferred(check_ledger(requests, LID, md, 0, CheckOptions(frozenset((A, B, C, D)), **options)))
    )
    reads = [(lid, e, b) for b, conn in pool.conns.items() for lid, e, _fence in conn.reads]
    return found, requests.sent, reads


@pytest.mark.parametrize("entries", [1, 2])
def test_a_small_healthy_ledger_costs_one_read_per_copy_and_no_entry_list(entries):
    # bench_fsck's ledgers: 2 entries on E3/Qw2, 4 copies; the sample reads them all, and their
    # answers say what each bookie holds: an entry list beside them is a request too many
    found, sent, reads = check(*e3_ledger(entries))
    assert found is None
    assert sent == {"availability": 0, "read": 2 * entries, "batch_read": 0}
    assert len(reads) == len(set(reads)) == 2 * entries


def test_a_large_healthy_ledger_lists_each_bookie_once_and_reads_each_sampled_copy_once():
    pool, md = e3_ledger(300)
    found, sent, reads = check(pool, md)
    assert found is None and sent["availability"] == 3
    assert len(reads) == len(set(reads)) == sent["read"] <= 2 * (2 + 8)


def test_copies_read_for_what_a_bookie_holds_are_not_read_again_to_be_judged():
    # C lacks entry 1 (its copy on B is the survivor, read and judged); nothing is read twice
    pool, md = e3_ledger(2)
    del pool.get(C).stored[(LID, 1)]
    found, sent, reads = check(pool, md)
    assert (found.kind, found.missing) == (Kind.MISSING, {C: [(1, 1)]})
    assert len(reads) == len(set(reads)) == sent["read"] == 4
    assert sent["availability"] == 1  # D, outside the ensemble, asked whether it holds the entry


def test_a_copy_read_in_place_of_the_entry_list_is_judged_as_before():
    pool, md = e3_ledger(2)
    pool.get(B).stored[(LID, 0)] = body(0, flip=True)
    found, sent, _reads = check(pool, md)
    assert found.kind is Kind.CORRUPT and [(b.entry_id, b.bookie) for b in found.bad] == [(0, B)]
    assert sent == {"availability": 0, "read": 4, "batch_read": 0}


def test_a_bookie_that_answers_none_of_the_reads_is_unreachable_not_empty():
    pool, md = e3_ledger(2)
    pool.get(C).down = True
    found, _sent, _reads = check(pool, md)
    assert found.kind is Kind.MISSING and f"{C} (unreachable)" in found.message


def test_a_striped_ledger_no_bookie_holds_is_one_lost_run_not_one_an_entry():
    # E3/Qw2 gives each entry other bookies than the next; with C gone and A, B empty every entry
    # is lost "no live bookie holds it": one run for all of them, the cause said once, so that
    # the finding of a 1000-entry ledger is a line, not 1000 runs (bench/bench_scale.py's cluster)
    pool = FakePool(auto=True)
    md = LedgerMetadata.new([A, B, C], 2, 2, password=b"pw").closed(999, 0)
    found = successResultOf(
        defer.ensureDeferred(check_ledger(BookieRequests(pool, 16), LID, md, 0, CheckOptions(frozenset((A, B, D)))))
    )
    assert found.kind is Kind.DATA_LOST and found.lost == [(0, 999)]
    (run,) = found.lost_runs
    assert (run.first, run.last, run.bookies) == (0, 999, (A, B, C))
    assert run.cause == f"no live bookie holds it; {C} is not live"
    assert found.missing[A][:3] == [(0, 0), (2, 3), (5, 6)]  # what each bookie lacks stays exact
