"""The entries of a ledger that re-replication found no good copy of: recorded so that the
repair of the rest is never blocked by them, nor retried for ever, and so that operators see
them (``bkctl autorecovery status``; ``bkctl ledger fsck`` finds them on its own as ``data_lost``).

A replication worker copies every readable entry of a fragment, makes the swap, and records
here each entry whose every surviving replica answered without a good copy (none holds it, or
each copy fails its digest: :class:`~bkctl.wire.client.rereplication.UnreadableEntry`).  An
entry a replica did not answer for (a timeout, a refused connection) is not lost: the ledger's
repair fails and is retried, as before.  The workers' and the auditor's checks then leave the
recorded entries out (:func:`~.checker.bookies_missing_replicas`), so a lost first or last
entry does not have the ledger marked again and moved at every audit.  A Java client reading
such an entry still gets its error: nothing here changes what a bookie holds.

Where: one node per ledger under ``<root>-bkctl-lost`` (:class:`~bkctl.wire.metadata.store.
LostEntryRecords`), beside the cluster root as the kept rebalance plan is.  Not in the
ledger's custom metadata: writing that is a compare-and-set on the ledger's metadata version,
which every mover, fsck's fixes and a live writer compare against (a record written there
would fail their swaps, or be lost to them), and Java's clients and Pulsar carry a ledger's
custom metadata along; a sibling of the root is never listed by Java's auditor or workers,
and ``cluster nuke`` removes it with the cluster.  A record outlives its ledger's deletion
until a worker or ``forget`` drops it; readers ignore the records of ledgers that are gone.

Stored as JSON: ``{"format": 1, "ledger_id", "runs": [{"first_entry_id", "last_entry_id",
"bookies", "cause"}], "recorded_at" (ms), "by" (the worker's id)}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bkctl.wire.fsck.findings import LostRun

if TYPE_CHECKING:
    from bkctl.wire.client.rereplication import UnreadableEntry
    from bkctl.wire.metadata.store import MetadataStore

__all__ = ["FORMAT", "LostRecord", "cause_of", "lost_entry_ids", "read_records", "record_lost"]

#: the version of a record
FORMAT = 1


@dataclass(frozen=True)
class LostRecord:
    """One ledger's lost entries: runs of them with their bookies and cause, when they were
    last recorded (ms) and by which worker."""

    ledger_id: int
    runs: tuple[LostRun, ...]
    recorded_at: int
    by: str

    def entry_ids(self) -> set[int]:
        return {e for r in self.runs for e in range(r.first, r.last + 1)}

    def count(self) -> int:
        return sum(r.last - r.first + 1 for r in self.runs)

    def to_json(self) -> dict[str, Any]:
        return {
            "ledger_id": self.ledger_id,
            "entries": self.count(),
            "runs": [r.to_json() for r in self.runs],
            "recorded_at": self.recorded_at,
            "by": self.by,
        }

    def encode(self) -> bytes:
        doc = {"format": FORMAT, **self.to_json()}
        del doc["entries"]
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, ledger_id: int, data: bytes) -> LostRecord | None:
        """The record, or None when it does not read (a newer format, damaged bytes)."""
        try:
            doc = json.loads(data)
            if doc.get("format") != FORMAT:
                return None
            runs = tuple(
                LostRun(
                    int(r["first_entry_id"]), int(r["last_entry_id"]), tuple(map(str, r["bookies"])), str(r["cause"])
                )
                for r in doc["runs"]
            )
            return cls(ledger_id, runs, int(doc["recorded_at"]), str(doc["by"]))
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


def cause_of(entry: UnreadableEntry) -> str:
    """One line: where the copies were and why none is good (fsck's wording)."""
    absent, bad = list(entry.absent), list(entry.bad_digest)
    if not bad:
        return f"no bookie holds it ({', '.join(absent)} asked)"
    said = (
        f"its only copy, on {bad[0]}, fails its digest"
        if len(bad) == 1
        else f"every copy fails its digest: {', '.join(bad)}"
    )
    if absent:
        said += f"; {', '.join(absent)} {'does' if len(absent) == 1 else 'do'} not hold it"
    return said


def _runs(entries: Iterable[tuple[int, tuple[str, ...], str]]) -> list[LostRun]:
    out: list[LostRun] = []
    for e, bookies, cause in sorted(entries):
        last = out[-1] if out else None
        if last is not None and last.last == e - 1 and last.bookies == bookies and last.cause == cause:
            out[-1] = LostRun(last.first, e, bookies, cause)
        else:
            out.append(LostRun(e, e, bookies, cause))
    return out


def read_records(store: MetadataStore) -> dict[int, LostRecord]:
    """Every record that reads, by ledger id (blocking)."""
    out: dict[int, LostRecord] = {}
    for ledger_id, data in store.lost_entries.all().items():
        record = LostRecord.decode(ledger_id, data)
        if record is not None:
            out[ledger_id] = record
    return out


def lost_entry_ids(store: MetadataStore, ledger_id: int) -> set[int]:
    """The ledger's recorded lost entries (blocking; none: empty)."""
    data = store.lost_entries.read(ledger_id)
    record = LostRecord.decode(ledger_id, data) if data is not None else None
    return record.entry_ids() if record is not None else set()


def record_lost(
    store: MetadataStore, ledger_id: int, lost: Iterable[UnreadableEntry], by: str, now_ms: int
) -> LostRecord:
    """Add ``lost`` to the ledger's record (an entry recorded again takes its new cause), and
    return the record kept (blocking).  Called by the worker holding the ledger's lock."""
    data = store.lost_entries.read(ledger_id)
    old = LostRecord.decode(ledger_id, data) if data is not None else None
    entries: dict[int, tuple[tuple[str, ...], str]] = {}
    for r in old.runs if old is not None else ():
        for e in range(r.first, r.last + 1):
            entries[e] = (r.bookies, r.cause)
    for u in lost:
        entries[u.entry_id] = (tuple(sorted({*u.absent, *u.bad_digest})), cause_of(u))
    record = LostRecord(ledger_id, tuple(_runs((e, b, c) for e, (b, c) in entries.items())), now_ms, by)
    store.lost_entries.write(ledger_id, record.encode())
    return record
