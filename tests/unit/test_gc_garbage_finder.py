"""The GC's comparison of the bookie's ledgers with the metadata's ranges, and what it remembers
between passes (bookied.gc_listing.GarbageFinder), over SortedIds leaves."""

from __future__ import annotations

import random
from array import array

from bkctl.bookied.gc_listing import GarbageFinder, ascending
from bkctl.wire.metadata.sorted_ids import SortedIds
from bkctl.wire.metadata.store import LedgerRange


def test_sorted_ids_is_a_set_of_its_ids_ascending_without_repeats():
    ids = SortedIds([30, 10, 20, 10, 2**40])
    assert list(ids) == [10, 20, 30, 2**40] and len(ids) == 4
    assert 20 in ids and 2**40 in ids and 25 not in ids and 5 not in ids and 2**41 not in ids
    assert "20" not in ids and 20.0 not in ids  # ledger ids are ints
    assert ids == frozenset({10, 20, 30, 2**40}) and frozenset({10, 20, 30, 2**40}) == ids
    assert ids != {10, 20} and SortedIds() == frozenset() and 0 not in SortedIds()
    assert ids - {10} == {20, 30, 2**40} and {1, 10, 20}.difference(ids) == {1}


class Leaves:
    """A ledger manager whose ranges are kept leaves, as a watched walk hands them out: the
    same SortedIds object until a leaf is replaced (its watch fired)."""

    def __init__(self, ids):
        by_leaf: dict[int, list[int]] = {}
        for i in ids:
            by_leaf.setdefault(i // 10000, []).append(i)
        self.leaves = {leaf: SortedIds(v) for leaf, v in by_leaf.items()}
        self.reads: list[list[int]] = []
        self.present: set[int] = set()  # metadata a re-read finds (verify)

    def ranges(self, *, watched=False):
        assert watched
        for leaf in sorted(self.leaves):
            yield LedgerRange(leaf * 10000 + 9999, self.leaves[leaf])

    def replace(self, leaf, ids):
        self.leaves[leaf] = SortedIds(ids)

    def read_many(self, ids):
        self.reads.append(list(ids))
        return [(i, object() if i in self.present else None, 0) for i in ids]


def test_the_answer_is_the_bookies_ledgers_missing_from_the_listing():
    rng = random.Random(57)
    meta = set(rng.sample(range(1, 60000), 20000))
    local = set(rng.sample(sorted(meta), 5000)) | set(rng.sample(range(1, 80000), 500)) | {10**6, 3 * 10**6}
    find = GarbageFinder()
    assert find(Leaves(meta), ascending(local)) == sorted(local - meta)
    # a list does as well as a packed array (the in-process path's)
    assert GarbageFinder()(Leaves(meta), sorted(local)) == sorted(local - meta)


def test_a_pass_computes_again_only_the_ranges_whose_leaf_or_bookie_ids_changed():
    meta = Leaves(i for i in range(0, 50000) if i % 7)  # 5 ranges; multiples of 7 have no metadata
    local = array("q", range(0, 50000, 5))
    find = GarbageFinder()
    first = find(meta, local)
    assert first == [i for i in local if i % 7 == 0] and find.compared == 5 and find.remembered == 0

    assert find(meta, local) == first and find.compared == 0 and find.remembered == 5

    # a ledger deleted in leaf 2 (its watch fired: a new listing object): only that range again
    meta.replace(2, [i for i in range(20000, 30000) if i % 7 and i != 20005])
    second = find(meta, local)
    assert second == sorted(first + [20005]) and find.compared == 1 and find.remembered == 4

    # the bookie deleted what the last pass found, and took a ledger without metadata in leaf 4
    local = array("q", sorted((set(local) - set(second)) | {40012 - 40012 % 7}))
    third = find(meta, local)
    assert third == [40012 - 40012 % 7] and find.compared == 5  # every range's bookie ids changed

    assert find(meta, local) == third and find.remembered == 5


def test_an_equal_listing_that_is_not_the_kept_one_is_compared_again():
    """Memory answers only for the very object it compared: a fresh walk's equal leaves are
    compared again (an answer is right however the leaf came)."""
    meta = Leaves(range(1, 20000, 2))
    local = array("q", range(1, 20000, 3))
    find = GarbageFinder()
    first = find(meta, local)
    meta.leaves = {leaf: SortedIds(ids) for leaf, ids in meta.leaves.items()}
    assert find(meta, local) == first and find.compared == 2 and find.remembered == 0


def test_verify_reads_the_missing_again_at_every_pass_and_keeps_those_found():
    meta = Leaves([1, 2, 3])
    meta.present = {5}  # created after the listing, found by the re-read
    local = array("q", [1, 2, 3, 4, 5])
    find = GarbageFinder()
    assert find(meta, local, verify=True) == [4]
    assert find(meta, local, verify=True) == [4] and find.remembered == 1
    assert meta.reads == [[4, 5], [4, 5]]  # remembered or not, what would be deleted is read again
