"""Ledgers bookies hold that no metadata names (:attr:`~.findings.Kind.BOOKIE_ONLY`).

Each bookie that can tell which ledgers it holds (bookied's ``/api/v1/bookie/list_ledgers``:
Java's bookie has no such listing) gives its ids, ascending, before the metadata walk starts;
:class:`BookieLists` walks them beside the metadata's ids (ascending too), so that what is kept
is one array of ids per bookie, not a set of every ledger.  An id a bookie holds that the walk
passes without meeting is held by no ledger the metadata names: deleted since the bookie's last
garbage collection (which deletes it), or metadata lost (then the bookies hold its only trace).
:func:`check_bookie_only` asks the bookies holding it which entries they hold.
"""

from __future__ import annotations

import heapq
import operator
from array import array
from collections.abc import Iterable, Iterator, Mapping
from itertools import islice
from typing import TYPE_CHECKING

from twisted.internet import defer

from .findings import Finding, Kind, Run

if TYPE_CHECKING:
    from .check import BookieRequests

__all__ = ["BookieLists", "check_bookie_only", "listed_ids"]


class BookieLists:
    """The ledger ids each bookie holds (ascending), walked beside the metadata's ids."""

    def __init__(self, held: Mapping[str, Iterable[int]]):
        self._ids = {bookie: _ascending(ids) for bookie, ids in held.items()}
        self._at = dict.fromkeys(self._ids, 0)

    @property
    def bookies(self) -> list[str]:
        return sorted(self._ids)

    def passed(self, ledger_id: int) -> Iterator[tuple[int, list[str]]]:
        """The walk met ``ledger_id`` (ascending calls, each answer consumed whole before the
        next): each id below it that a bookie holds and the walk did not meet, ascending, with
        the bookies holding it; ``ledger_id`` itself is named by the metadata."""
        heads = [(ids[i], b) for b, ids in self._ids.items() if (i := self._at[b]) < len(ids) and ids[i] < ledger_id]
        heapq.heapify(heads)
        while heads:
            lid = heads[0][0]
            holders: list[str] = []
            while heads and heads[0][0] == lid:
                _, bookie = heapq.heappop(heads)
                holders.append(bookie)
                ids = self._ids[bookie]
                i = self._at[bookie] = self._at[bookie] + 1
                if i < len(ids) and ids[i] < ledger_id:
                    heapq.heappush(heads, (ids[i], bookie))
            yield lid, sorted(holders)
        for bookie, ids in self._ids.items():
            i = self._at[bookie]
            if i < len(ids) and ids[i] == ledger_id:
                self._at[bookie] = i + 1

    def rest(self) -> Iterator[tuple[int, list[str]]]:
        """Once the walk is over: every id it did not meet, with its bookies."""
        return self.passed(1 << 63)


#: what a listing's body starts with, whitespace left out (bookied's ``{"ledgers":[id,...]}``)
_LISTING_HEAD = b'{"ledgers":['


def listed_ids(chunks: Iterable[bytes]) -> array[int]:
    """The ids of a bookie's listing ``{"ledgers":[id,...]}`` (bookied's
    ``/api/v1/bookie/list_ledgers``), its body read in ``chunks``, straight into an array:
    never the whole text nor a list of its ints (at 10^6 ledgers those were ~60 MB of fsck's
    peak a bookie, where the array is 8 MB).  Anything else is a :class:`ValueError`."""
    ids: array[int] = array("q")
    head = b""  # the body before the list's "[", whitespace left out
    carry = b""  # the digits of an id split between two chunks
    tail: bytes | None = None  # after the list's "]": None while inside it
    for chunk in chunks:
        if tail is not None:
            tail += chunk.strip()
            if len(tail) > 1:
                break
            continue
        if len(head) < len(_LISTING_HEAD):
            opened = chunk.find(b"[")
            head += b"".join((chunk if opened < 0 else chunk[: opened + 1]).split())
            if opened < 0:
                if not _LISTING_HEAD.startswith(head):
                    break
                continue
            if head != _LISTING_HEAD:
                break
            chunk = chunk[opened + 1 :]
        closed = chunk.find(b"]")
        data = carry + (chunk if closed < 0 else chunk[:closed])
        if closed < 0:
            cut = data.rfind(b",")
            if cut < 0:
                carry = data
                continue
            ids.extend(map(int, data[:cut].split(b",")))  # an empty id ("[,") a ValueError of int()
            carry = data[cut + 1 :]
            continue
        if data.strip() or ids:  # "[]" is no ids; "[1,]" or "[,]" a ValueError of int()
            ids.extend(map(int, data.split(b",")))
        tail = chunk[closed + 1 :].strip()
    if head != _LISTING_HEAD or tail != b"}":
        raise ValueError('not a listing {"ledgers":[id,...]}')
    return ids


def _ascending(ids: Iterable[int]) -> array[int]:
    """``ids`` as an ascending array, taken as is when it is one already (a bookie's listing is
    ascending: no list of a million ints made to sort it)."""
    got = ids if isinstance(ids, array) and ids.typecode == "q" else array("q", ids)
    if any(map(operator.gt, got, islice(got, 1, None))):
        got = array("q", sorted(got))
    return got


async def check_bookie_only(req: BookieRequests, ledger_id: int, bookies: list[str], version: int = -1) -> Finding:
    """The finding of a ledger no metadata names that ``bookies`` hold: the entries each holds
    (its entry list; none when it cannot give one)."""
    asked = [(b, defer.ensureDeferred(req.availability(b, ledger_id))) for b in bookies]
    held: dict[str, list[Run]] = {}
    for bookie, d in asked:
        got = await d
        held[bookie] = list(got.runs) if got is not None else []
    where = ", ".join(f"{b} ({_entries(runs)})" for b, runs in held.items())
    return Finding(
        ledger_id,
        Kind.BOOKIE_ONLY,
        f"no metadata names it, and {where} hold{'s' if len(held) == 1 else ''} its entries: deleted since "
        "the bookies' last garbage collection (which deletes them), or its metadata was lost (then these "
        "copies are all that is left of it: save them before that collection)",
        held=held,
        version=version,
    )


def _entries(runs: list[Run]) -> str:
    if not runs:
        return "entries not listed"
    count = sum(b - a + 1 for a, b in runs)
    shown = ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs[:5]) + (",..." if len(runs) > 5 else "")
    return f"{count} {'entry' if count == 1 else 'entries'}: {shown}"
