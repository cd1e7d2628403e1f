"""Ledger ids as a read-only set over one sorted array: 8 bytes a ledger.

A walk of the ledger ranges hands out up to 10,000 ids a leaf znode, a million at 10^6
ledgers.  As a frozenset a million ids take about 80 MB (an int object and a hash slot
each) and a second of CPU to build; packed and sorted they take 8 MB, and a walk that keeps
its listings between passes (the bookie's garbage collector,
:class:`~bkctl.wire.metadata.zk.watched_children.WatchedChildren`) keeps them at that cost.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Set

__all__ = ["SortedIds"]


class SortedIds(Set[int]):
    """``ids`` without repeats, ascending; membership is a binary search."""

    __slots__ = ("_ids",)

    def __init__(self, ids: Iterable[int] = ()):
        self._ids = array("q", sorted(set(ids)))

    def __contains__(self, value: object) -> bool:
        if type(value) is not int:
            return False
        ids = self._ids
        i = bisect_left(ids, value)
        return i < len(ids) and ids[i] == value

    def __iter__(self) -> Iterator[int]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def __repr__(self) -> str:
        return f"SortedIds({len(self._ids)} ids)"
