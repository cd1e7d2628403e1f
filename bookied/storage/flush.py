"""The entry store's flush (a checkpoint's write of the write cache), the parts that are not the
store's state: the cache's entries as the entry log's appends take them, and the index
transaction that commits where they went.  :meth:`EntryStore.flush <.store.EntryStore.flush>`
holds the locks, appends and publishes.

A flush's CPU goes to every entry it writes (tens of thousands a second, beside the reactor on
two cores), so nothing here makes an object per entry: a ledger's entries go to the entry log's
record twin as two lists (ids, bodies), its records come back with their offsets packed, and
the index stores them a run at a time (:meth:`~.index.EntryLocationIndex.put_placed`).

Nor does any step hold the GIL long: the flush thread runs beside the reactor, and a C call of
it over a whole write cache (sorting a ledger's ids, looking its bodies up, freeing the flushed
half: up to ~670,000 objects for 64 MiB of 100-byte entries) is as long a wait for every add
and read meanwhile.  Both ends work a ledger at a time, a big one :data:`~.pacing.FLUSH_SLICE`
entries at a time (:func:`ledger_batches`, :func:`drop_flushed`); the writes, fdatasyncs and
the index's commit release the GIL themselves.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from itertools import islice
from typing import NamedTuple

from .entry_log import LOG_HEADER_SIZE, Placed
from .index import EntryLocationIndex, LogDeltas, apply_log_deltas
from .ledger_state import LedgerState
from .pacing import FLUSH_SLICE, let_go, sorted_in_slices


class FlushResult(NamedTuple):
    entries: int
    bytes: int
    ledgers: int
    seconds: float


class LedgerBatch(NamedTuple):
    """One ledger's entries in a flush: ids ascending, bodies pairwise."""

    ledger_id: int
    entry_ids: list[int]
    bodies: list[bytes]


class FlushCommit(NamedTuple):
    """A flush's index transaction: the log rows committed, the logs it left without a live entry
    and their bytes, and per ledger the highest entry id flushed."""

    logs: dict
    emptied: list[int]
    emptied_bytes: int
    last_flushed: dict[int, int]


def ledger_batches(flushing: dict[int, dict[int, bytes]], pause: Callable[[], None] | None) -> list[LedgerBatch]:
    """The write cache's half ``flushing`` (ledger id -> {entry id: bytes}) as the appends take
    it: by ledger (ascending), each ledger's ids sorted (``pause()`` after each ledger and each
    slice of a big one, when pacing)."""
    batches = []
    for lid in sorted_in_slices(list(flushing)):  # (10^5 ledgers: one sort held the GIL 17 ms)
        cache = flushing[lid]
        if len(cache) > FLUSH_SLICE:
            batches.append(_big_batch(lid, cache, pause))
        elif cache:
            ids = sorted(cache)
            batches.append(LedgerBatch(lid, ids, list(map(cache.__getitem__, ids))))
        else:
            continue
        if pause is not None:
            pause()
    return batches


def _big_batch(lid: int, cache: dict[int, bytes], pause: Callable[[], None] | None) -> LedgerBatch:
    """A ledger's batch, :data:`FLUSH_SLICE` entries per C call: its ids sorted a slice of the
    cache's order at a time (the order adds came in: ascending but for retried or recovery
    adds), the slices merged only when one starts below the end of the one before."""
    keys = iter(cache)
    runs = []
    while run := sorted(islice(keys, FLUSH_SLICE)):
        runs.append(run)
    ids: list[int] = []
    if all(a[-1] < b[0] for a, b in zip(runs, runs[1:])):
        for run in runs:
            ids += run
    else:
        ids = list(heapq.merge(*runs))  # (a generator in Python: the GIL goes round meanwhile)
    del runs
    bodies: list[bytes] = []
    get = cache.__getitem__
    for i in range(0, len(ids), FLUSH_SLICE):
        bodies += map(get, ids[i : i + FLUSH_SLICE])
        if pause is not None:
            pause()
    return LedgerBatch(lid, ids, bodies)


def drop_flushed(
    flushing: dict[int, dict[int, bytes]], batches: list[LedgerBatch], pause: Callable[[], None] | None
) -> None:
    """Free the flushed half (no longer the write cache's: nothing else holds it) and its
    batches, a ledger at a time and a big ledger's entries :data:`FLUSH_SLICE` at a time: left
    to die with ``flushing``, the half's entries were freed in one C call that held the GIL
    for 25-45 ms (64 MiB of 100-byte entries).  The batches' lists, which hold every entry
    too, go last: their slices are where the entries are freed; ``batches`` is left empty."""
    for batch in batches:
        cache = flushing.pop(batch.ledger_id)
        if len(cache) > 4 * FLUSH_SLICE:  # its dict let go of its entries in slices too
            ids = batch.entry_ids
            for i in range(0, len(ids), FLUSH_SLICE):
                deque(map(cache.__delitem__, ids[i : i + FLUSH_SLICE]), 0)
        del cache
        let_go(batch.bodies, pause)
        let_go(batch.entry_ids, pause)
    flushing.clear()  # (ledgers with no entry left: no batch)
    let_go(batches, pause)  # (10^5 ledgers: as many batches)


def commit_flush(
    index: EntryLocationIndex,
    batches: list[LedgerBatch],
    placed: list[Placed],
    added: LogDeltas,
    dirty: list[tuple[int, LedgerState]],
    next_log: int,
    writing: set[int],
    pause: Callable[[], None] | None,
) -> FlushCommit:
    """The flush's index transaction: where ``placed`` the entries of ``batches`` (``added``
    to the logs), the ``dirty`` ledgers' state, the next log id; ``writing``: the logs still
    appended to (kept when left without a live entry)."""
    with index.write() as txn:
        # a re-put entry (entry id not above what the index had) replaces a row: the
        # old record's log loses it from its live counts
        dead: dict[int, list[int]] = {}
        i = 0
        for p in placed:
            index.put_placed(txn, p, dead)
            n = len(p.entry_ids)
            if pause is not None and i // FLUSH_SLICE != (i + n) // FLUSH_SLICE:  # see let_go
                pause()
            i += n
        new_logs = apply_log_deltas(index.logs, added, dead, LOG_HEADER_SIZE)
        emptied = index.put_log_rows(txn, new_logs, set(added) | set(dead), writing)
        emptied_bytes = index.committed_bytes(emptied)  # (their sizes before this commit)
        max_flushed = {b.ledger_id: b.entry_ids[-1] for b in batches}
        for lid, led in dirty:
            last = max(led.persisted_last, max_flushed.get(lid, -1))
            index.put_ledger(txn, lid, led.encode(last))
        index.put_next_log(txn, next_log)
    return FlushCommit(new_logs, emptied, emptied_bytes, max_flushed)
