"""The guarded repairs of ``bkctl ledger fsck --fix``: metadata writes only (an entry is
never written), each checked against what the check read and written by
compare-and-set, so a ledger that changed since is left alone and said so.

* ``mark``: a ledger with copies missing or corrupt is marked under-replicated,
  naming those bookies, for autorecovery to copy them (:attr:`Kind.MISSING`,
  :attr:`Kind.CORRUPT`, and :attr:`Kind.DATA_LOST` for its other entries' copies: the
  bookies of :meth:`~.findings.Finding.bookies_to_mark`, never one only a lost entry
  is missing on; a ledger already marked so is left as it is).
* ``ensemble``: a misplaced ledger's segments are pointed at the bookies that hold
  the data (:attr:`Kind.MISPLACED`), from the version the check read, by the one
  compare-and-set every replica move makes (:func:`~bkctl.wire.client.replica_swap.swap_bookies`);
  never at a bookie that takes no writes (read-only, draining, or without a cookie:
  decommissioned), checked again when the fix is written.
* ``unmark``: a deleted ledger's mark is removed (:attr:`Kind.MARKED_DELETED`), by
  compare-and-set on the mark's version, once the metadata is checked gone again.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .findings import Finding, Kind

if TYPE_CHECKING:
    from bkctl.wire.metadata.store import MetadataStore

__all__ = ["Fix", "FixOutcome", "apply_fix", "fix_for"]


class Fix(str, enum.Enum):
    MARK = "mark"
    ENSEMBLE = "ensemble"
    UNMARK = "unmark"


_FIX_OF = {
    Kind.MISSING: Fix.MARK,
    Kind.CORRUPT: Fix.MARK,
    Kind.DATA_LOST: Fix.MARK,
    Kind.MISPLACED: Fix.ENSEMBLE,
    Kind.MARKED_DELETED: Fix.UNMARK,
}


def fix_for(finding: Finding) -> Fix | None:
    """The guarded fix that repairs ``finding`` (None: none does; data lost stays lost, the
    copies of a data_lost ledger's other entries are marked to be made)."""
    fix = _FIX_OF.get(finding.kind)
    if (fix is Fix.MARK and not finding.bookies_to_mark()) or (fix is Fix.ENSEMBLE and not finding.moves):
        return None
    return fix


@dataclass(frozen=True)
class FixOutcome:
    """``status``: applied, would_apply (dry run), skipped (nothing to do), conflict
    (changed since the check: nothing written)."""

    fix: Fix
    status: str
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"fix": self.fix.value, "status": self.status, "detail": self.detail}


def apply_fix(store: MetadataStore, finding: Finding, fix: Fix, dry_run: bool) -> FixOutcome:
    """Apply ``fix`` to ``finding``'s ledger (blocking: the store's calls)."""
    if fix_for(finding) is not fix:
        raise ValueError(f"{fix.value} does not repair a {finding.kind.value} finding")
    if fix is Fix.UNMARK:
        return _unmark(store, finding, dry_run)
    from bkctl.wire.metadata.errors import NoSuchLedger

    try:
        return _mark(store, finding, dry_run) if fix is Fix.MARK else _ensemble(store, finding, dry_run)
    except NoSuchLedger:  # deleted since the check (its writer's retention): one finding, not the run
        return FixOutcome(fix, "conflict", "the ledger was deleted meanwhile: nothing written")


def _mark(store: MetadataStore, finding: Finding, dry_run: bool) -> FixOutcome:
    bookies = finding.bookies_to_mark()
    current = store.underreplication.get(finding.ledger_id)
    if current is not None and set(bookies) <= set(current.replicas):
        return FixOutcome(Fix.MARK, "skipped", f"already marked ({', '.join(current.replicas)})")
    _md, version = store.ledgers.read(finding.ledger_id)
    if version != finding.version:
        return FixOutcome(Fix.MARK, "conflict", f"metadata changed since the check (version {version})")
    if dry_run:
        return FixOutcome(Fix.MARK, "would_apply", f"would mark under-replicated on {', '.join(bookies)}")
    store.underreplication.mark(finding.ledger_id, bookies)
    return FixOutcome(Fix.MARK, "applied", f"marked under-replicated on {', '.join(bookies)}")


def _ensemble(store: MetadataStore, finding: Finding, dry_run: bool) -> FixOutcome:
    from bkctl.wire.client.replica_swap import Swap, SwapOutcome, swap_bookies
    from bkctl.wire.metadata.registration_state import replica_targets

    md, version = store.ledgers.read(finding.ledger_id)
    if version != finding.version:
        return FixOutcome(Fix.ENSEMBLE, "conflict", f"metadata changed since the check (version {version})")
    refused = sorted({m.holder for m in finding.moves} - replica_targets(store.registration))
    if refused:  # read-only (draining) or decommissioned since the check: never a target
        return FixOutcome(Fix.ENSEMBLE, "conflict", f"{', '.join(refused)} takes no writes now: nothing written")
    segments = dict(md.ensembles)
    for move in finding.moves:
        ensemble = segments.get(move.first_entry_id)
        if ensemble is None or ensemble[move.position] != move.bookie:
            return FixOutcome(Fix.ENSEMBLE, "conflict", f"segment {move.first_entry_id} is not as checked")
    said = "; ".join(f"segment {m.first_entry_id}: {m.bookie} -> {m.holder}" for m in finding.moves)
    if dry_run:
        return FixOutcome(Fix.ENSEMBLE, "would_apply", f"would point {said}")
    swaps = [Swap(m.first_entry_id, m.bookie, m.holder) for m in finding.moves]
    done = swap_bookies(store, finding.ledger_id, swaps, known=(md, version))
    if done.outcome is SwapOutcome.SWAPPED:
        return FixOutcome(Fix.ENSEMBLE, "applied", f"pointed {said}")
    if done.outcome is SwapOutcome.DONE:
        return FixOutcome(Fix.ENSEMBLE, "skipped", f"already points {said}")
    if done.outcome is SwapOutcome.GONE:
        return FixOutcome(Fix.ENSEMBLE, "conflict", "the ledger was deleted meanwhile: nothing written")
    return FixOutcome(Fix.ENSEMBLE, "conflict", f"{done.reason}: nothing written")


def _unmark(store: MetadataStore, finding: Finding, dry_run: bool) -> FixOutcome:
    if store.ledgers.exists(finding.ledger_id):
        return FixOutcome(Fix.UNMARK, "conflict", "the ledger has metadata again: its mark stays")
    version = store.underreplication.mark_version(finding.ledger_id)
    if version is None:
        return FixOutcome(Fix.UNMARK, "skipped", "not marked any more")
    if dry_run:
        return FixOutcome(Fix.UNMARK, "would_apply", "would remove the mark of a deleted ledger")
    if not store.underreplication.mark_replicated(finding.ledger_id, version):
        return FixOutcome(Fix.UNMARK, "conflict", "marked again meanwhile: the mark stays")
    return FixOutcome(Fix.UNMARK, "applied", "removed the mark of a deleted ledger")
