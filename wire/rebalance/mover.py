"""Carrying out a :class:`~.plan.LedgerMove` with never a copy fewer.

Under the ledger's replication lock (``underreplication/locks/urL<id>``, the znode Java's
replication workers and its over-replicated-ledger collection create before they touch a
ledger, as bookied's do), a move:

1. checks the ledger against the plan: it exists, is not marked under-replicated (a repair
   comes first: the move is left), and each segment to move is closed, still names the
   source and not the target;
2. copies each entry the source holds of those segments to the target with recovery adds,
   read from the live copies (the source's first, in write-set order; digest verified, the
   next copy on any failure): :func:`~bkctl.wire.client.rereplication.replicate_fragment`,
   the copying ``recover`` and the autorecovery workers share;
3. swaps the bookies in the metadata with the one compare-and-set every replica move makes
   (:func:`~bkctl.wire.client.replica_swap.swap_bookies`, releasing the lock in the same
   write): a ledger deleted or marked under-replicated meanwhile, or a moved segment
   changed, is left alone and the move abandoned (the target's copies are garbage its
   bookie collects); a concurrent write that leaves the moved segments as they were (a
   writer's new segment) is retried.

Until step 3 the ledger's metadata is what it was, so a move stopped anywhere (Ctrl-C, a
kill -9 of bkctl, a dead target) leaves the ledger as fully replicated as before, and a
rerun plans from what the cluster holds: nothing moved twice.
"""

from __future__ import annotations

import enum
import itertools
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from bkctl.wire.autorecovery.lostentries import record_lost
from bkctl.wire.client.credentials import ledger_credentials
from bkctl.wire.client.fragments import Fragment
from bkctl.wire.client.replica_swap import (
    Swap,
    SwapOutcome,
    default_holder,
    lock_replica,
    release_replica,
    swap_bookies,
)
from bkctl.wire.client.replication_causes import failure_cause
from bkctl.wire.client.rereplication import UnreadableEntry, replicate_fragment
from bkctl.wire.codecs.digest import DigestManager, master_key
from bkctl.wire.metadata.errors import NoSuchLedger
from bkctl.wire.metadata.ledger import LedgerMetadata
from bkctl.wire.metadata.store import LedgerRead

from .plan import LedgerMove

if TYPE_CHECKING:
    from bkctl.wire.client.bookkeeper import BookKeeperClient

__all__ = ["MoveOutcome", "MoveResult", "default_holder", "move_ledger", "move_ledgers"]


class MoveOutcome(enum.Enum):
    MOVED = "moved"
    #: not started: the ledger is locked, marked, deleted or changed since the plan
    SKIPPED = "skipped"
    #: copied, then left: deleted, fenced, marked or changed meanwhile (the copies are garbage)
    ABANDONED = "abandoned"
    #: a copy failed (a read, the target): the metadata was not touched
    FAILED = "failed"


@dataclass(frozen=True)
class MoveResult:
    move: LedgerMove
    outcome: MoveOutcome
    reason: str | None = None
    entries_copied: int = 0
    #: for a failure, one of :data:`~bkctl.wire.client.rereplication.CAUSES`
    cause: str | None = None
    #: entries no copy of which was good (every replica answered without one): not copied,
    #: recorded (:mod:`bkctl.wire.autorecovery.lostentries`) and the swap made all the same
    lost_entries: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "ledger_id": self.move.ledger_id,
            "outcome": self.outcome.value,
            "reason": self.reason,
            "cause": self.cause,
            "moves": [{"source": s, "target": t} for s, t in self.move.pairs],
            "bytes": self.move.nbytes if self.outcome is MoveOutcome.MOVED else 0,
            "entries_copied": self.entries_copied,
            "lost_entries": self.lost_entries,
            "why": self.move.reason.value,
        }


def problem_with(md: LedgerMetadata, move: LedgerMove) -> str | None:
    """Why ``move`` no longer fits ``md`` (None: it does)."""
    if md.is_in_recovery:
        return "it is being recovered (fenced)"
    segments = {first: (last, ensemble) for first, last, ensemble in md.segment_ranges()}
    for seg in move.segments:
        found = segments.get(seg.first_entry_id)
        if found is None:
            return f"no segment starts at entry {seg.first_entry_id} any more"
        last, ensemble = found
        if last is None:
            return f"its segment from entry {seg.first_entry_id} is its open last segment"
        if seg.source not in ensemble:
            return f"{seg.source} left its segment from entry {seg.first_entry_id}"
        if seg.target in ensemble:
            return f"{seg.target} joined its segment from entry {seg.first_entry_id}"
    return None


async def move_ledger(
    client: BookKeeperClient,
    move: LedgerMove,
    *,
    holder: str | None = None,
    window: int = 64,
    throttle: Callable[..., Any] | None = None,
    on_entry: Callable[[int], Any] | None = None,
    known: LedgerRead | None = None,
    read_sources: bool = True,
    past_marks: bool = False,
) -> MoveResult:
    """Carry out ``move`` (see the module doc); never raises for the ledger's own problems.
    ``known``: the ledger's metadata as just read (many at once: :func:`move_ledgers`), not
    read again; the version-checked write catches any change since.  ``read_sources``: the
    sources are live and read from first (a rebalance, a drain); False for a stopped bookie's
    replicas (a decommission), read from the other copies only.  An entry none of whose
    copies is good does not stop the move: the others are copied, the swap made, and the
    lost ones recorded (:func:`~bkctl.wire.autorecovery.lostentries.record_lost`), as a
    replication worker does.  ``past_marks``: a ledger marked under-replicated is moved all
    the same (a decommission: the mark is the stopped bookie's, and this move is its repair)."""
    store = client.store
    run = client.run_blocking
    holder = holder or default_holder()
    try:
        who = await run(lock_replica, store, move.ledger_id, holder)
    except Exception as exc:  # noqa: BLE001 - ZooKeeper gone: reported, the caller decides
        return MoveResult(move, MoveOutcome.FAILED, f"taking its replication lock: {exc}", cause="other")
    if who is not None:
        return MoveResult(
            move,
            MoveOutcome.SKIPPED,
            f"its replication lock is held by {who}: a repair or another move is on it",
        )
    result = None
    try:
        result = await _locked_move(client, move, window, throttle, on_entry, known, read_sources, past_marks, holder)
        return result
    finally:
        if result is None or result.outcome is not MoveOutcome.MOVED:  # a move's write let go of it
            await run(release_replica, store, move.ledger_id)


async def _locked_move(
    client: BookKeeperClient,
    move: LedgerMove,
    window: int,
    throttle: Callable[..., Any] | None,
    on_entry: Callable[[int], Any] | None,
    known: LedgerRead | None,
    read_sources: bool,
    past_marks: bool,
    holder: str,
) -> MoveResult:
    store = client.store
    run = client.run_blocking
    ledger_id = move.ledger_id
    if known is None:
        try:
            md, version = await run(store.ledgers.read, ledger_id)
        except NoSuchLedger:
            return MoveResult(move, MoveOutcome.SKIPPED, "deleted since the plan")
    elif known.metadata is None:
        return MoveResult(move, MoveOutcome.SKIPPED, "deleted since the plan")
    elif isinstance(known.metadata, Exception):
        return MoveResult(move, MoveOutcome.SKIPPED, f"its metadata does not read: {known.metadata}")
    else:
        md, version = known.metadata, known.version
    problem = problem_with(md, move)
    if problem is not None:
        return MoveResult(move, MoveOutcome.SKIPPED, f"changed since the plan: {problem}")
    copied = 0
    unreadable: list[UnreadableEntry] = []
    try:
        password, digest_type = ledger_credentials(ledger_id, md)
        digest = DigestManager(ledger_id, digest_type, password)
        key = master_key(password)
        ranges = {first: (last, ensemble) for first, last, ensemble in md.segment_ranges()}
        by_segment: dict[int, dict[str, str]] = {}
        for seg in move.segments:
            by_segment.setdefault(seg.first_entry_id, {})[seg.source] = seg.target
        for first, replacements in by_segment.items():
            last, ensemble = ranges[first]
            members = tuple(b for b in ensemble if b in replacements)
            fragment = Fragment(ledger_id, first, last, tuple(ensemble), members, md.write_quorum)
            copied += await replicate_fragment(
                client,
                fragment,
                replacements,
                digest,
                key,
                window=window,
                on_entry=on_entry,
                throttle=throttle,
                read_replaced=read_sources,
                on_unreadable=unreadable.append,
            )
    except Exception as exc:  # noqa: BLE001 - reported; the metadata was not touched
        if not await run(store.ledgers.exists, ledger_id):
            return MoveResult(move, MoveOutcome.ABANDONED, "deleted during the move", copied)
        cause, reason = failure_cause(exc)
        return MoveResult(move, MoveOutcome.FAILED, f"copying: {reason}", copied, cause)
    mark = None if past_marks else await run(store.underreplication.get, ledger_id)
    if mark is not None:
        return MoveResult(
            move, MoveOutcome.ABANDONED, "marked under-replicated during the move: left to the repair", copied
        )
    swaps = [Swap(seg.first_entry_id, seg.source, seg.target) for seg in move.segments]
    done = await run(swap_bookies, store, ledger_id, swaps, known=(md, version), unlock=True)
    if done.outcome is SwapOutcome.SWAPPED:
        # recorded once the swap is made, as the worker does: a ledger deleted during its copy
        # answers "no such entry" everywhere, which is no loss (a kill between the two leaves it
        # unrecorded: ledger fsck finds the entries data_lost on its own)
        if unreadable:
            await run(record_lost, store, ledger_id, unreadable, holder, int(time.time() * 1000))
        return MoveResult(move, MoveOutcome.MOVED, None, copied, lost_entries=len(unreadable))
    if done.outcome is SwapOutcome.GONE:
        return MoveResult(move, MoveOutcome.ABANDONED, "deleted during the move", copied)
    if done.outcome is SwapOutcome.DONE:
        return MoveResult(move, MoveOutcome.SKIPPED, "moved meanwhile by another run", copied)
    return MoveResult(move, MoveOutcome.ABANDONED, f"{done.reason} (during the move)", copied)


#: moves whose metadata is read at once (one multiRead), ahead of their copies
METADATA_READ_AHEAD = 256


def _bytes_per_entry(move: LedgerMove, on_bytes: Callable[[int], Any]) -> Callable[[int], Any]:
    size = move.nbytes // move.entries if move.entries else 0
    return lambda _entry_id: on_bytes(size)


def _forget(result: object, running: set[defer.Deferred[MoveResult]], d: defer.Deferred[MoveResult]) -> object:
    running.discard(d)
    return result


async def move_ledgers(
    client: BookKeeperClient,
    moves: Iterable[LedgerMove],
    *,
    concurrency: int = 4,
    per_bookie: int | None = None,
    on_result: Callable[[MoveResult], Any] | None = None,
    on_bytes: Callable[[int], Any] | None = None,
    stopping: Callable[[], bool] | None = None,
    **options: Any,
) -> list[MoveResult]:
    """:func:`move_ledger` for each of ``moves``, at most ``concurrency`` at a time and at most
    ``per_bookie`` (None: no such bound) into any one target bookie -- a move whose target is
    that busy waits and the next one that fits goes first; otherwise in order.  ``on_result``
    hears each, ``on_bytes(n)`` about how many bytes each entry copied was (both in the
    reactor thread).  Once ``stopping()`` says so no further move starts (those running
    finish: a move is all or nothing)."""
    if concurrency < 1 or (per_bookie is not None and per_bookie < 1):
        raise ValueError("concurrency and per_bookie must be >= 1")
    store = client.store
    run = client.run_blocking
    results: list[MoveResult] = []
    running: set[defer.Deferred[MoveResult]] = set()
    busy: Counter[str] = Counter()

    def done(result: MoveResult) -> MoveResult:
        results.append(result)
        if on_result is not None:
            on_result(result)
        return result

    def read_chunk(chunk: list[LedgerMove]) -> list[LedgerRead]:
        return list(store.ledgers.read_many([m.ledger_id for m in chunk]))

    def fits(move: LedgerMove) -> bool:
        return per_bookie is None or all(busy[target] < per_bookie for _source, target in move.pairs)

    def start(move: LedgerMove, read: LedgerRead) -> None:
        targets = [target for _source, target in move.pairs]
        busy.update(targets)

        if on_bytes is not None:
            options["on_entry"] = _bytes_per_entry(move, on_bytes)
        one = move_ledger(client, move, known=read, **options)

        async def bounded() -> MoveResult:
            try:
                return await one
            finally:
                busy.subtract(targets)

        d = defer.ensureDeferred(bounded()).addCallback(done)
        running.add(d)
        d.addBoth(_forget, running, d)

    marked = (
        {}
        if options.get("past_marks")
        else {mark.ledger_id: mark for mark in await run(lambda: list(store.underreplication.marks()))}
    )
    pending = iter(moves)
    waiting: deque[tuple[LedgerMove, LedgerRead]] = deque()
    stopped = False
    while not stopped and (chunk := list(itertools.islice(pending, METADATA_READ_AHEAD))):
        reads = await run(read_chunk, chunk)
        for move, read in zip(chunk, reads):
            mark = marked.get(move.ledger_id)
            if mark is None:
                waiting.append((move, read))
                continue
            done(
                MoveResult(
                    move,
                    MoveOutcome.SKIPPED,
                    f"marked under-replicated (missing on {', '.join(mark.replicas) or '?'}): left to the repair",
                )
            )
        while waiting and not stopped:
            ready = next((i for i, (move, _read) in enumerate(waiting) if fits(move)), None)
            if len(running) >= concurrency or ready is None:
                await defer.DeferredList(list(running), fireOnOneCallback=True, consumeErrors=True)
                continue
            if stopping is not None and stopping():
                stopped = True
                break
            move, read = waiting[ready]
            del waiting[ready]
            start(move, read)
    while running:
        await defer.DeferredList(list(running), consumeErrors=True)
    return results
