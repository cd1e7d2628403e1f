"""What ``bkctl ledger fsck`` reports of a ledger: one :class:`Finding` naming one
cause (:class:`Kind`), ranked by :class:`Severity` (the command's exit code is the
worst one's).  Pure data, no I/O."""

from __future__ import annotations

import enum
from array import array
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BadReplica",
    "Finding",
    "Grouping",
    "Kind",
    "LostRun",
    "Move",
    "SEVERITY",
    "Severity",
    "WholeBookie",
    "group",
    "runs_of",
    "runs_outside",
]


class Severity(enum.IntEnum):
    """How bad a finding is; a run's worst is its exit status's."""

    STALE_MARK = 1  # an under-replication mark that is out of date: nothing is at risk
    REPAIRABLE = 2  # copies missing, misplaced or corrupt while a good copy lives
    LOST = 3  # entries with no live copy anywhere


class Kind(str, enum.Enum):
    """The one cause fsck names for a ledger."""

    #: entries a write set gives a bookie of the ensemble are not on it (a lost bookie,
    #: or one that answers without them); another copy of each lives
    MISSING = "missing"
    #: entries missing on bookies of the ensemble are on bookies outside it (metadata
    #: names bookies that never held them: apache/bookkeeper#4651); copies outside on a
    #: bookie that takes no writes are leftovers, never a move's target
    MISPLACED = "misplaced"
    #: replicas of an entry whose bytes differ (a digest that does not verify names the bad one)
    CORRUPT = "corrupt"
    #: the ledger has entries in its metadata, every bookie of its ensembles is registered, and
    #: none (nor any other bookie) holds any of them
    METADATA_ONLY = "metadata_only"
    #: entries with no good copy on any live bookie: none holds one, or every copy held is
    #: unreadable or fails its digest (each run of them named with its bookies and cause)
    DATA_LOST = "data_lost"
    #: the ledger's metadata does not decode
    BAD_METADATA = "bad_metadata"
    #: bookies hold entries of a ledger no metadata names (deleted since their last garbage
    #: collection, or its metadata lost): :mod:`.bookie_only`
    BOOKIE_ONLY = "bookie_only"
    #: marked under-replicated, and every copy is where it should be
    MARKED_HEALTHY = "marked_healthy"
    #: marked under-replicated, and the ledger has no metadata (deleted)
    MARKED_DELETED = "marked_deleted"


SEVERITY = {
    Kind.MARKED_HEALTHY: Severity.STALE_MARK,
    Kind.MARKED_DELETED: Severity.STALE_MARK,
    Kind.MISSING: Severity.REPAIRABLE,
    Kind.MISPLACED: Severity.REPAIRABLE,
    Kind.CORRUPT: Severity.REPAIRABLE,
    Kind.BAD_METADATA: Severity.REPAIRABLE,
    Kind.BOOKIE_ONLY: Severity.REPAIRABLE,
    Kind.METADATA_ONLY: Severity.LOST,
    Kind.DATA_LOST: Severity.LOST,
}


Run = tuple[int, int]


def runs_of(entry_ids: Iterable[int]) -> list[Run]:
    """Sorted entry ids as inclusive ``(first, last)`` runs."""
    runs: list[Run] = []
    for e in sorted(set(entry_ids)):
        if runs and e == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], e)
        else:
            runs.append((e, e))
    return runs


def runs_outside(runs: Iterable[Run], holes: Iterable[Run]) -> list[Run]:
    """The parts of ``runs`` (sorted, disjoint) that no run of ``holes`` covers."""
    out: list[Run] = []
    cuts = sorted(holes)
    for first, last in runs:
        start = first
        for a, b in cuts:
            if b < start or a > last:
                continue
            if a > start:
                out.append((start, a - 1))
            start = max(start, b + 1)
            if start > last:
                break
        if start <= last:
            out.append((start, last))
    return out


def _covered(entry_id: int, runs: Iterable[Run]) -> bool:
    return any(a <= entry_id <= b for a, b in runs)


def _runs_text(runs: Iterable[Run]) -> str:
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


@dataclass(frozen=True)
class Move:
    """Ensemble position ``position`` of the segment starting at ``first_entry_id`` names
    ``bookie``, while ``holder`` (outside that ensemble) holds the entries it should."""

    first_entry_id: int
    position: int
    bookie: str
    holder: str


@dataclass(frozen=True)
class LostRun:
    """Entries ``first``..``last`` with no good copy, all for one ``cause`` (one line: where
    the copies were and why none is good, e.g. "its only copy, on A, fails its digest; B is
    not live"); ``bookies``: those their write sets name, then any outside holding a copy."""

    first: int
    last: int
    bookies: tuple[str, ...]
    cause: str

    def text(self) -> str:
        what = f"entry {self.first}" if self.first == self.last else f"entries {self.first}-{self.last}"
        return f"{what} ({', '.join(self.bookies)}): {self.cause}"

    def to_json(self) -> dict[str, Any]:
        return {
            "first_entry_id": self.first,
            "last_entry_id": self.last,
            "bookies": list(self.bookies),
            "cause": self.cause,
        }


@dataclass(frozen=True)
class BadReplica:
    """An entry whose copy on ``bookie`` differs from another replica's."""

    entry_id: int
    bookie: str
    reason: str


@dataclass(frozen=True)
class Finding:
    """One ledger's cause.  ``missing``: bookie -> entry runs it lacks; ``lost``: entry
    runs with no good live copy, ``lost_runs`` the same with their bookies and cause;
    ``moves``: where misplaced data really is; ``bad``: corrupt or unreadable copies;
    ``marked``: the ledger's under-replication mark names these bookies (None: not
    marked); ``version``: the metadata's znode version the check read."""

    ledger_id: int
    kind: Kind
    message: str
    missing: dict[str, list[Run]] = field(default_factory=dict)
    lost: list[Run] = field(default_factory=list)
    moves: tuple[Move, ...] = ()
    bad: tuple[BadReplica, ...] = ()
    marked: tuple[str, ...] | None = None
    version: int = -1
    lost_runs: tuple[LostRun, ...] = ()
    #: bookie outside the ensemble -> entry runs it holds that no move uses: over-replicated
    #: copies (a drained or rebalanced replica's, waiting for the over-replicated GC)
    leftovers: dict[str, list[Run]] = field(default_factory=dict)
    #: bookies of the ensemble holding none of the entries they should (a lost disk, a bookie down)
    empty: tuple[str, ...] = ()
    #: who uses the ledger, for people ("topic persistent://t/n/x", "cursor c of topic ..."):
    #: what the damage reaches; None when nothing of Pulsar's owns it
    owner: str | None = None

    #: bookie -> entry runs it holds of a ledger no metadata names (:attr:`Kind.BOOKIE_ONLY`)
    held: dict[str, list[Run]] = field(default_factory=dict)

    #: what autorecovery recorded of the ledger's lost entries (:mod:`bkctl.wire.autorecovery.lostentries`)
    recorded: str | None = None

    def with_recorded(self, recorded: str) -> Finding:
        from dataclasses import replace

        return replace(self, recorded=recorded)

    def with_owner(self, owner: str | None) -> Finding:
        from dataclasses import replace

        return replace(self, owner=owner)

    def whole_bookie(self) -> str | None:
        """The one bookie this finding is all about when it lacks every entry it should hold
        and nothing else is wrong: such findings are grouped by that bookie (:func:`group`)."""
        if self.kind is not Kind.MISSING or len(self.empty) != 1 or self.bad or self.leftovers:
            return None
        return self.empty[0] if set(self.missing) == set(self.empty) else None

    @property
    def severity(self) -> Severity:
        return SEVERITY[self.kind]

    def bookies_to_mark(self) -> list[str]:
        """The bookies whose copies a re-replication can make: those lacking, or holding a bad
        copy of, an entry that has a good copy somewhere (a lost entry's are not: nothing can
        be copied from, and marking them would have a worker try for ever)."""
        if self.kind is Kind.CORRUPT:
            return sorted({b.bookie for b in self.bad if not _covered(b.entry_id, self.lost)})
        if self.kind not in (Kind.MISSING, Kind.DATA_LOST):
            return []
        lacking = {b for b, runs in self.missing.items() if runs_outside(runs, self.lost)}
        lacking.update(b.bookie for b in self.bad if not _covered(b.entry_id, self.lost))
        return sorted(lacking)

    def with_marked(self, marked: tuple[str, ...] | None) -> Finding:
        from dataclasses import replace

        return replace(self, marked=marked)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "ledger_id": self.ledger_id,
            "kind": self.kind.value,
            "severity": self.severity.name.lower(),
            "message": self.message,
            "marked": self.marked is not None,
        }
        if self.marked is not None:
            doc["marked_replicas"] = list(self.marked)
        if self.missing:
            doc["missing"] = {b: [list(r) for r in runs] for b, runs in sorted(self.missing.items())}
        if self.lost:
            doc["lost_entries"] = [list(r) for r in self.lost]
        if self.lost_runs:
            doc["lost"] = [r.to_json() for r in self.lost_runs]
        if self.leftovers:
            doc["leftovers"] = {b: [list(r) for r in runs] for b, runs in sorted(self.leftovers.items())}
        if self.held:
            doc["held"] = {b: [list(r) for r in runs] for b, runs in sorted(self.held.items())}
        if self.moves:
            doc["moves"] = [
                {"first_entry_id": m.first_entry_id, "position": m.position, "bookie": m.bookie, "holder": m.holder}
                for m in self.moves
            ]
        if self.bad:
            doc["bad_replicas"] = [{"entry_id": b.entry_id, "bookie": b.bookie, "reason": b.reason} for b in self.bad]
        if self.version >= 0:
            doc["metadata_version"] = self.version
        if self.owner is not None:
            doc["owner"] = self.owner
        if self.recorded is not None:
            doc["recorded"] = self.recorded
        return doc

    def text(self) -> str:
        """One line for people."""
        parts = [f"ledger {self.ledger_id}: {self.kind.value}: {self.message}"]
        for bookie, runs in sorted(self.missing.items()):
            parts.append(f"{bookie} lacks {_runs_text(runs)}")
        if self.lost_runs:
            parts.extend(r.text() for r in self.lost_runs[:5])
            if len(self.lost_runs) > 5:
                parts.append(f"... {len(self.lost_runs) - 5} more runs of lost entries")
        elif self.lost:
            parts.append(f"no copy of {_runs_text(self.lost)}")
        for m in self.moves:
            parts.append(f"segment {m.first_entry_id} position {m.position}: {m.bookie} -> data on {m.holder}")
        for bookie, runs in sorted(self.leftovers.items()):
            parts.append(f"leftover copies of {_runs_text(runs)} on {bookie}")
        for b in self.bad[:5]:
            parts.append(f"entry {b.entry_id} on {b.bookie}: {b.reason}")
        if len(self.bad) > 5:
            parts.append(f"... {len(self.bad) - 5} more bad copies")
        if self.kind in (Kind.MISSING, Kind.CORRUPT, Kind.DATA_LOST, Kind.MISPLACED):
            parts.append("marked under-replicated" if self.marked is not None else "not marked")
        if self.recorded is not None:
            parts.append(self.recorded)
        if self.owner is not None:
            parts.append(f"owner: {self.owner}")
        return "; ".join(parts)


@dataclass(frozen=True)
class WholeBookie:
    """The findings that are all one bookie's: it holds none of the entries of ``ledgers`` it
    should (a disk lost, or it is down); ``live``: it is registered and answers."""

    bookie: str
    live: bool
    ledgers: tuple[int, ...]

    def text(self) -> str:
        n = len(self.ledgers)
        shown = ", ".join(_runs_text(runs_of(self.ledgers)).split(",")[:10])
        more = "" if len(runs_of(self.ledgers)) <= 10 else ", ..."
        why = "disk lost?" if self.live else "it is not live (down, or gone for good?)"
        return (
            f"bookie {self.bookie} holds none of its {n} ledger{'s' if n != 1 else ''}' entries: {why} "
            f"(missing; ledgers {shown}{more}; another copy of each lives: --fix mark, or `bkctl recover`)"
        )


class Grouping:
    """Findings grouped by cause as they stream, kept small: those all about one bookie holding
    none of its entries (:meth:`Finding.whole_bookie`) by bookie -- its ledger ids, a count of
    the notes given with them (how a fix went), and its first finding with its tag (shown
    alone when it is the only one) -- not the findings (a wiped bookie of a million-ledger
    cluster is a third of its ledgers)."""

    def __init__(self) -> None:
        self._ids: dict[str, array[int]] = {}
        self._notes: dict[str, Counter[str]] = {}
        self._first: dict[str, tuple[Finding, Any]] = {}

    def add(self, finding: Finding, tag: Any = None, note: str | None = None) -> bool:
        """Keep ``finding`` in its bookie's group (False: it is not all about one bookie)."""
        bookie = finding.whole_bookie()
        if bookie is None:
            return False
        if bookie not in self._ids:
            self._ids[bookie], self._notes[bookie] = array("q"), Counter()
            self._first[bookie] = (finding, tag)
        self._ids[bookie].append(finding.ledger_id)
        if note is not None:
            self._notes[bookie][note] += 1
        return True

    def __bool__(self) -> bool:
        return bool(self._ids)

    def groups(
        self, registered: Iterable[str]
    ) -> tuple[list[tuple[WholeBookie, Counter[str]]], list[tuple[Finding, Any]]]:
        """Each bookie of two ledgers or more with its notes' counts, by bookie; the findings
        (with their tags) of the bookies of one, in ledger id order."""
        live = set(registered)
        groups: list[tuple[WholeBookie, Counter[str]]] = []
        alone: list[tuple[Finding, Any]] = []
        for bookie in sorted(self._ids):
            if len(self._ids[bookie]) < 2:
                alone.append(self._first[bookie])
            else:
                ids = tuple(sorted(self._ids[bookie]))
                groups.append((WholeBookie(bookie, bookie in live, ids), self._notes[bookie]))
        return groups, sorted(alone, key=lambda fo: fo[0].ledger_id)


def group(findings: Iterable[Finding], registered: Iterable[str]) -> tuple[list[WholeBookie], list[Finding]]:
    """Findings grouped by cause for people: those that are all about one bookie holding none of
    its entries, by bookie (two ledgers or more), and the others, each on its own."""
    grouping = Grouping()
    alone = [f for f in findings if not grouping.add(f)]
    groups, single = grouping.groups(registered)
    return [g for g, _ in groups], sorted(alone + [f for f, _ in single], key=lambda f: f.ledger_id)
