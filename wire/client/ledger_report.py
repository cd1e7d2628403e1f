"""One ledger's outcome of a re-replication (:func:`~.rereplication.rereplicate_ledger`): the row
``bkctl recover`` prints (``--json``: its fields are the document's keys, ``lost_entries`` only
once counted) and ``bkctl decommission`` and the replication worker read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["FragmentReport", "LedgerReport"]


@dataclass(frozen=True, slots=True)
class FragmentReport:
    """A fragment of the ledger on the lost bookies: its entries (``last_entry_id`` None: open,
    end unknown), the lost bookies, each one's replacement, the entries the lost bookies held
    (None: not known) and how many were copied."""

    first_entry_id: int
    last_entry_id: int | None
    lost: tuple[str, ...]
    replacements: dict[str, str]
    entries: int | None
    entries_copied: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "first_entry_id": self.first_entry_id,
            "last_entry_id": self.last_entry_id,
            "lost": list(self.lost),
            "replacements": dict(self.replacements),
            "entries": self.entries,
            "entries_copied": self.entries_copied,
        }


@dataclass(frozen=True, slots=True)
class LedgerReport:
    """One ledger's outcome: ``state`` its state before (None: not read), ``status`` one of
    ``recovered``, ``planned``, ``skipped``, ``failed`` (``error`` says why, ``cause`` and
    ``reason`` as :func:`~.replication_causes.failure_cause`), ``clean`` (nothing on the lost
    bookies) or ``deleted`` (gone meanwhile); ``closed_first``: recovered (fenced, closed) first;
    ``bytes``: about how many it moves; ``lost_entries``: the entries with no good copy it went
    past (None: not counted, no key)."""

    ledger_id: int
    state: str | None
    status: str
    closed_first: bool = False
    fragments: tuple[FragmentReport, ...] = ()
    entries_copied: int = 0
    bytes: int = 0
    error: str | None = None
    cause: str | None = None
    reason: str | None = None
    lost_entries: int | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "ledger_id": self.ledger_id,
            "state": self.state,
            "status": self.status,
            "closed_first": self.closed_first,
            "fragments": [f.to_json() for f in self.fragments],
            "entries_copied": self.entries_copied,
            "bytes": self.bytes,
            "error": self.error,
            "cause": self.cause,
            "reason": self.reason,
        }
        if self.lost_entries is not None:
            doc["lost_entries"] = self.lost_entries
        return doc
