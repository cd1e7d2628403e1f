"""A writer's updates of its ledger's metadata, by compare-and-set against the other
clients that may write it too (a recovering reader, another writer, an admin): an
ensemble change and the close.  Each takes the metadata and version the writer knows,
writes, and on a version conflict reads what the other client wrote and decides: its
own write went through after all, the ledger was taken over (closed, or being
recovered, by someone else: the writer must stop), or the change can be made on top
of the other one.  As Java's ``LedgerHandle`` (``ChangeEnsembleOp``, ``doAsyncCloseInternal``).
"""

from __future__ import annotations

import logging
from typing import Any

from bkctl.wire.metadata.errors import MetadataVersionConflict
from bkctl.wire.metadata.ledger import LedgerMetadata

from .errors import LedgerClosedError, LedgerFencedError, LedgerMetadataConflict

__all__ = ["check_still_ours", "write_closed", "write_ensemble_change"]

log = logging.getLogger(__name__)

#: Conflicts an update goes through before it gives up (the metadata keeps changing).
ATTEMPTS = 100


def check_still_ours(ledger_id: int, current: LedgerMetadata, recovery: bool) -> None:
    """Raise when ``current`` (the stored metadata) shows another client took the ledger over."""
    if current.is_closed:
        raise LedgerClosedError(f"ledger {ledger_id} was closed by another client at entry {current.last_entry_id}")
    if current.is_in_recovery and not recovery:
        raise LedgerFencedError(f"ledger {ledger_id} is being recovered by another client (metadata is IN_RECOVERY)")


async def write_ensemble_change(
    client: Any,
    ledger_id: int,
    md: LedgerMetadata,
    version: int,
    first: int,
    new_ensemble: list[str],
    recovery: bool,
) -> tuple[LedgerMetadata, int]:
    """Write a new last segment starting at entry ``first`` on ``new_ensemble`` over ``md``
    (stored at ``version``); returns the metadata and version stored then."""
    new_md = md.with_ensemble_change(first, new_ensemble)
    store = client.store
    for _attempt in range(ATTEMPTS):
        try:
            version = await client.run_blocking(store.ledgers.update, ledger_id, new_md, version)
            return new_md, version
        except MetadataVersionConflict as conflict:
            current, current_version = conflict.metadata, conflict.current_version
            check_still_ours(ledger_id, current, recovery)
            if current.ensembles[-1] == new_md.ensembles[-1]:
                return current, current_version  # our write went through after all
            if current.ensembles[-1] != md.ensembles[-1]:
                raise LedgerMetadataConflict(
                    f"ledger {ledger_id}: another client changed the ensemble of the last "
                    f"segment (now {list(current.ensembles[-1][1])} from entry "
                    f"{current.ensembles[-1][0]})"
                ) from None
            md = current
            new_md = current.with_ensemble_change(first, new_ensemble)
            version = current_version
    raise LedgerMetadataConflict(f"ledger {ledger_id}: metadata keeps changing")


async def write_closed(
    client: Any, ledger_id: int, md: LedgerMetadata, version: int, lac: int, length: int, recovery: bool
) -> tuple[LedgerMetadata, int]:
    """Write ``md`` (stored at ``version``) CLOSED at entry ``lac`` with ``length``; returns
    the metadata and version stored then (another recovery's close, for a recoverer)."""
    store = client.store
    for _attempt in range(ATTEMPTS):
        if md.is_closed:
            return md, version
        new_md = md.closed(lac, length)
        try:
            version = await client.run_blocking(store.ledgers.update, ledger_id, new_md, version)
            return new_md, version
        except MetadataVersionConflict as conflict:
            current, current_version = conflict.metadata, conflict.current_version
            if current.is_closed:
                if recovery or (current.last_entry_id == lac and current.length == length):
                    if current.last_entry_id != lac:
                        log.warning(
                            "ledger %d: another recovery closed it at entry %d (this one found %d); keeping theirs",
                            ledger_id,
                            current.last_entry_id,
                            lac,
                        )
                    return current, current_version
                raise LedgerClosedError(
                    f"ledger {ledger_id} was closed by another client at entry "
                    f"{current.last_entry_id} (length {current.length}); this writer had confirmed "
                    f"entries up to {lac} (length {length})"
                ) from None
            if current.is_in_recovery and not recovery:
                raise LedgerFencedError(
                    f"ledger {ledger_id} is being recovered by another client; it will be closed by the recovery"
                ) from None
            md, version = current, current_version  # changed otherwise: close on top of it
    raise LedgerMetadataConflict(f"ledger {ledger_id}: metadata keeps changing")
