"""Why a ledger could not be re-replicated: the ``cause`` of a result of
:func:`~bkctl.wire.client.rereplication.rereplicate_ledger` (``bkctl recover --json``,
``decommission``, the autorecovery workers' status) with its label, and the one short
line for people.  Apart from the copy itself so that the re-replication module holds one
concept: the copying."""

from __future__ import annotations

from .errors import EntryUnrecoverable, TargetUnusable

__all__ = [
    "CAUSES",
    "COPIES_DOWN",
    "GRACE",
    "LOCKED",
    "METADATA_GONE",
    "NO_BOOKIE",
    "OPEN",
    "OTHER",
    "UNREADABLE",
    "failure_cause",
]

#: why a ledger could not be re-replicated (a result's ``cause``), each with its label
NO_BOOKIE = "no-bookie"
COPIES_DOWN = "copies-down"
GRACE = "grace"
METADATA_GONE = "metadata-gone"
UNREADABLE = "unreadable"
OPEN = "open"
LOCKED = "locked"
OTHER = "other"
CAUSES = {
    LOCKED: "its replication lock held (a worker or a move is on it)",
    NO_BOOKIE: "no bookie to copy to",
    COPIES_DOWN: "every copy down",
    GRACE: "writer's grace period",
    METADATA_GONE: "metadata gone",
    UNREADABLE: "an entry unreadable",
    OPEN: "open, left alone (--skip-open-ledgers)",
    OTHER: "other",
}


def failure_cause(exc: BaseException) -> tuple[str, str]:
    """``(cause, reason)`` of a failed re-replication: one of :data:`CAUSES` and one
    short line for people (the exception's whole text stays the result's ``error``)."""
    from bkctl.wire.metadata.errors import MetadataStoreError, NoSuchLedger

    from .errors import NotEnoughBookies

    if isinstance(exc, NotEnoughBookies):
        return NO_BOOKIE, (
            f"needs {exc.needed} writable bookie{'s' if exc.needed != 1 else ''} outside the "
            f"ensemble, {exc.available} available"
        )
    if isinstance(exc, TargetUnusable):
        return NO_BOOKIE, str(exc)
    if isinstance(exc, EntryUnrecoverable):
        entry = f"entry {exc.entry_id}" if exc.entry_id is not None else "an entry"
        if exc.down:
            return COPIES_DOWN, f"{entry}: no bookie holding a copy answers"
        return UNREADABLE, f"{entry}: no good copy ({_first_line(str(exc).rpartition('): ')[2])})"
    if isinstance(exc, NoSuchLedger):
        return METADATA_GONE, "its metadata is gone"
    if isinstance(exc, MetadataStoreError):
        return METADATA_GONE, _first_line(str(exc))
    return OTHER, _first_line(str(exc) or type(exc).__name__)


def _first_line(text: str, width: int = 100) -> str:
    line = text.strip().splitlines()[0] if text.strip() else text
    return line if len(line) <= width else line[: width - 3] + "..."
