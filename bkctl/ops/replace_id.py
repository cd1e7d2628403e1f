"""Rewrite a bookie id in every ledger's metadata (Java's ``updateledgers``,
``updateBookieInLedger`` and ``bookieid searchreplace``).

Every segment that names FROM gets TO in its place, one ledger at a time,
by the one compare-and-set every replica move makes
(:func:`~bkctl.wire.client.replica_swap.swap_bookies`): a concurrent change that
leaves those segments as they were (a close, a writer's new segment) is retried.  A ledger
that no longer names FROM is left alone, so the run is idempotent and an
interrupted run is finished by running it again.  A segment that already
names TO as well cannot take TO twice: that ledger is reported as a
conflict and left unchanged.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from .errors import BadInput, Conflict
from .results import json_key, omitted_when_none

if TYPE_CHECKING:
    from bkctl.wire.metadata.ledger import LedgerMetadata
    from bkctl.wire.metadata.store import MetadataStore


class Rewrite(Enum):
    """What became of a ledger that names FROM."""

    UPDATED = "updated"
    PLANNED = "planned"  #: a dry run's: would be updated
    UNCHANGED = "unchanged"  #: names FROM no more (another run, a writer)
    DELETED = "deleted"  #: deleted meanwhile
    CONFLICT = "conflict"  #: a segment names TO already: left unchanged
    FAILED = "failed"  #: a writer kept adding segments naming FROM


@dataclass(frozen=True, slots=True)
class LedgerRewrite:
    """One ledger naming FROM: what became of it, in how many segments."""

    ledger_id: int
    status: Rewrite
    segments: int
    error: str | None = omitted_when_none()


@dataclass(frozen=True, slots=True)
class RewriteTotals:
    """The ledgers of a run by what became of them; ``segments`` those updated (or planned)."""

    matched: int
    updated: int
    planned: int
    unchanged: int
    deleted: int
    conflict: int
    failed: int
    segments: int


@dataclass(frozen=True, slots=True)
class IdReplacement:
    """A run of ``bookie replace-id``: FROM, TO, one row per ledger that named FROM, the totals."""

    to: str
    dry_run: bool
    ledgers_scanned: int
    ledgers: list[LedgerRewrite]
    totals: RewriteTotals
    source: str = json_key("from")  #: last: to mypy, a field declared so has a default


class _Pace:
    """At most ``rate`` calls per second across threads (0: no limit)."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        if not self.interval:
            return
        with self._lock:
            now = time.monotonic()
            at = max(now, self._next)
            self._next = at + self.interval
        if at > now:
            time.sleep(at - now)


def _one_ledger(
    store: MetadataStore, ledger_id: int, md: LedgerMetadata, version: int, old: str, new: str, dry_run: bool
) -> LedgerRewrite:
    """Rewrite one ledger from the metadata the scan read, by the one compare-and-set every
    replica move makes (:func:`~bkctl.wire.client.replica_swap.swap_bookies`: a concurrent
    write that leaves those segments as they were is retried); a segment naming FROM that a
    writer added meanwhile is swapped in turn."""
    from bkctl.wire.client.replica_swap import Swap, SwapOutcome, swap_bookies

    status, segments = Rewrite.UNCHANGED, 0
    for _round in range(3):
        firsts = [first for first, ensemble in md.ensembles if old in ensemble]
        if not firsts:
            return LedgerRewrite(ledger_id, status, segments)
        joined = [first for first in firsts if new in dict(md.ensembles)[first]]
        if joined:
            error = f"its segment from entry {joined[0]} names {new} already"
            return LedgerRewrite(ledger_id, Rewrite.CONFLICT, segments, error)
        if dry_run:
            return LedgerRewrite(ledger_id, Rewrite.PLANNED, len(firsts))
        done = swap_bookies(store, ledger_id, [Swap(first, old, new) for first in firsts], known=(md, version))
        if done.outcome is SwapOutcome.GONE:
            return LedgerRewrite(ledger_id, Rewrite.DELETED, 0)
        if done.outcome is SwapOutcome.CONFLICT:
            return LedgerRewrite(ledger_id, Rewrite.CONFLICT, segments, done.reason)
        if done.outcome is SwapOutcome.SWAPPED:
            status = Rewrite.UPDATED
            segments += len(firsts)
        assert done.metadata is not None
        md, version = done.metadata, done.version
    return LedgerRewrite(ledger_id, Rewrite.FAILED, segments, "a writer keeps adding segments that name it")


def replace_bookie_id(
    store: MetadataStore,
    old: str,
    new: str,
    *,
    dry_run: bool = False,
    rate: float = 0,
    parallel: int = 1,
    allow_unknown: bool = False,
    confirm: Callable[[int], None] | None = None,
    on_start: Callable[[int], None] | None = None,
    on_ledger: Callable[[LedgerRewrite], None] | None = None,
) -> IdReplacement:
    """Rewrite ``old`` to ``new`` everywhere; returns the summary.

    ``confirm(n)`` is called (unless ``dry_run``) with the number of ledgers
    naming ``old`` before anything changes.  ``rate``: ledger updates per
    second (0 = unlimited); ``parallel``: updates at once.  ``new`` must be
    known to the cluster (registered, or with a cookie) unless
    ``allow_unknown``.  A dry run applies every check the real run applies.

    The summary: one row per ledger naming ``old`` and the totals (its --json document's keys
    ``from``, ``to``, ``dry_run``, ``ledgers_scanned``, ``ledgers``, ``totals``).
    """
    from .recovery import check_bookie_ids, require_known_bookie

    check_bookie_ids([old, new])
    if old == new:
        raise BadInput("FROM and TO are the same bookie id")
    if store.registration.is_registered(old):
        raise Conflict(f"bookie {old} is registered (running); stop it, or restart it as {new}, first")
    if not allow_unknown:
        require_known_bookie(store, new, "--allow-unknown-id", f"start the bookie as {new} first")
    scanned = 0
    matched: list[tuple[int, LedgerMetadata, int]] = []
    for ledger_id, md, version in store.ledgers.walk():
        scanned += 1
        if md is None:
            continue  # deleted meanwhile
        if isinstance(md, Exception):
            raise md
        if old in md.bookies:
            matched.append((ledger_id, md, version))
    if matched and not dry_run and confirm is not None:
        confirm(len(matched))
    if on_start is not None:
        on_start(len(matched))
    pace = _Pace(rate)

    def work(item: tuple[int, LedgerMetadata, int]) -> LedgerRewrite:
        pace.wait()
        ledger_id, md, version = item
        row = _one_ledger(store, ledger_id, md, version, old, new, dry_run)
        if on_ledger is not None:
            on_ledger(row)
        return row

    if parallel > 1 and len(matched) > 1:
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            rows = list(pool.map(work, matched))
    else:
        rows = [work(item) for item in matched]
    count = Counter(r.status for r in rows)
    totals = RewriteTotals(
        matched=len(matched),
        updated=count[Rewrite.UPDATED],
        planned=count[Rewrite.PLANNED],
        unchanged=count[Rewrite.UNCHANGED],
        deleted=count[Rewrite.DELETED],
        conflict=count[Rewrite.CONFLICT],
        failed=count[Rewrite.FAILED],
        segments=sum(r.segments for r in rows if r.status in (Rewrite.UPDATED, Rewrite.PLANNED)),
    )
    return IdReplacement(new, dry_run, scanned, rows, totals, source=old)
