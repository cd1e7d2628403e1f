"""Rewrite a bookie id in every ledger's metadata (Java's ``updateledgers``,
``updateBookieInLedger`` and ``bookieid searchreplace``).

Every segment that names FROM gets TO in its place, one ledger at a time,
by compare-and-set on the version just read: a concurrent change (a writer's
ensemble change, a close) makes the update re-read and try again.  A ledger
that no longer names FROM is left alone, so the run is idempotent and an
interrupted run is finished by running it again.  A segment that already
names TO as well cannot take TO twice: that ledger is reported as a
conflict and left unchanged.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from ..exitcodes import CONFLICT, USAGE, CommandError

MAX_ATTEMPTS = 10


class _Pace:
    """At most ``rate`` calls per second across threads (0: no limit)."""

    def __init__(self, rate: float):
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


def _segments_naming(md, bookie: str) -> list[int]:
    return [first for first, ens in md.ensembles if bookie in ens]


def _replace_all(md, old: str, new: str):
    for first in _segments_naming(md, old):
        md = md.replace_bookie(first, old, new)
    return md


def _one_ledger(store, ledger_id: int, md, version: int, old: str, new: str, dry_run: bool) -> dict:
    """Rewrite one ledger, starting from the metadata the scan read (re-read on a conflict)."""
    from bkctl.wire.errors import MetadataError, NotFound
    from bkctl.wire.metadata.errors import MetadataVersionConflict

    row = {"ledger_id": ledger_id, "status": "unchanged", "segments": 0}
    for _ in range(MAX_ATTEMPTS):
        firsts = _segments_naming(md, old)
        if not firsts:
            return row
        row["segments"] = len(firsts)
        try:
            updated = _replace_all(md, old, new)
        except MetadataError as e:
            row.update(status="conflict", error=str(e))
            return row
        if dry_run:
            row["status"] = "planned"
            return row
        try:
            store.ledgers.update(ledger_id, updated, version)
        except MetadataVersionConflict as e:
            md, version = e.metadata, e.current_version
            continue
        except NotFound:
            row.update(status="deleted", segments=0)
            return row
        row["status"] = "updated"
        return row
    row.update(status="failed", error=f"the metadata kept changing ({MAX_ATTEMPTS} attempts)")
    return row


def replace_bookie_id(
    store,
    old: str,
    new: str,
    *,
    dry_run: bool = False,
    rate: float = 0,
    parallel: int = 1,
    allow_unknown: bool = False,
    confirm: Callable[[int], None] | None = None,
    on_start: Callable[[int], None] | None = None,
    on_ledger: Callable[[dict], None] | None = None,
) -> dict:
    """Rewrite ``old`` to ``new`` everywhere; returns the summary.

    ``confirm(n)`` is called (unless ``dry_run``) with the number of ledgers
    naming ``old`` before anything changes.  ``rate``: ledger updates per
    second (0 = unlimited); ``parallel``: updates at once.  ``new`` must be
    known to the cluster (registered, or with a cookie) unless
    ``allow_unknown``.  A dry run applies every check the real run applies.

    Summary keys: ``from``, ``to``, ``dry_run``, ``ledgers_scanned``,
    ``ledgers`` (one row per ledger naming ``old``: ``ledger_id``,
    ``status`` (updated, planned, unchanged, deleted, conflict, failed),
    ``segments``, ``error``), and ``totals`` (``matched``, ``updated``,
    ``planned``, ``unchanged``, ``deleted``, ``conflict``, ``failed``,
    ``segments``).
    """
    from .recovery import check_bookie_ids, require_known_bookie

    check_bookie_ids([old, new])
    if old == new:
        raise CommandError("FROM and TO are the same bookie id", USAGE)
    if store.registration.is_registered(old):
        raise CommandError(f"bookie {old} is registered (running); stop it, or restart it as {new}, first", CONFLICT)
    if not allow_unknown:
        require_known_bookie(store, new, "--allow-unknown-id", f"start the bookie as {new} first")
    scanned = 0
    matched: list[tuple[int, object, int]] = []
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

    def work(item) -> dict:
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
    totals = {
        "matched": len(matched),
        "updated": 0,
        "planned": 0,
        "unchanged": 0,
        "deleted": 0,
        "conflict": 0,
        "failed": 0,
        "segments": 0,
    }
    for r in rows:
        totals[r["status"]] += 1
        if r["status"] in ("updated", "planned"):
            totals["segments"] += r["segments"]
    return {"from": old, "to": new, "dry_run": dry_run, "ledgers_scanned": scanned, "ledgers": rows, "totals": totals}
