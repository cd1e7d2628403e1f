"""``bkctl disk``: where each bookie's disk space went, and the one-line answer.

The rules -- whose each ledger is, its copies on each bookie, one walk that tallies them and
serves the orphan sweep, an entry log's dead bytes by what reclaims them -- are
:mod:`bkctl.wire.domain.disk_attribution`'s; this module reads the bookies' own reports
(:mod:`.bookie_reads`) and puts both together, per bookie and for the cluster:

* **live ledger data** by owner (Pulsar tenant / namespace / topic, or application), the open
  ledgers' share an **estimate**, said so;
* **orphans** (``pulsar orphans``' rule and age caution) and Pulsar ledgers not listed yet that
  are too young to judge;
* **deleted ledgers the bookie has not collected yet**: what the bookie still counts live in
  its entry logs beyond the live data above (their metadata is gone, so only the bookie's total
  tells); a negative rest is data not in the entry logs yet (the write cache, the journal);
* **dead bytes waiting for compaction**, by each entry log's live ratio against the compaction
  thresholds, and the log still being written;
* the **journal** (when the bookie reports it) and the rest of the filesystem.

Entry-log figures come from bookied's ``gc_details``; a Java bookie's HTTP admin has none, and
what could not be read is said, per bookie.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bkctl.wire.domain.disk_attribution import (
    DEFAULT_THRESHOLDS,
    RECORD_FRAMING,
    EntryLogClasses,
    Walk,
    entry_log_classes,
    walk_ledgers,
)

from .bookie_reads import GC, GC_DETAILS, INFO, METRICS, BookieReading, read_bookies
from .bookies import Registration
from .results import omitted_when_none

if TYPE_CHECKING:
    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.metadata.store import MetadataStore, WalkProgress

    from .disk_offload import HeldTwice

BY = ("bookie", "tenant", "namespace", "topic")
#: what a read-only bookie whose journal fills its disk can do
JOURNAL_WAY_OUT = (
    "the journal is trimmed once a checkpoint has written what it holds to the entry logs; over "
    "diskUsageThreshold bookied frees it by itself once that checkpoint runs, and a deleted ledger's entries "
    "are dropped, not written (delete ledgers to free it); a checkpoint that still waits says so in the "
    "bookie's log ('checkpoint postponed') with what it needs; on a small disk keep journalMaxSizeMB, "
    "journalMaxBackups and minUsableSizeForEntryLogCreation small"
)


# ---------------------------------------------------------------- the bookie's side


def thresholds(reading: BookieReading) -> tuple[float, float, bool]:
    """(minor, major, reported): the bookie's compaction thresholds, else the defaults."""
    gc = reading.gc or {}
    minor, major = gc.get("minorCompactionThreshold"), gc.get("majorCompactionThreshold")
    if isinstance(minor, (int, float)) and isinstance(major, (int, float)):
        return float(minor), float(major), True
    return DEFAULT_THRESHOLDS[0], DEFAULT_THRESHOLDS[1], False


def journal_bytes(reading: BookieReading) -> int | None:
    """The journal's bytes, when the bookie reports them (bookied's ``info`` ``journalBytes``)."""
    return _info_int(reading, "journalBytes")


def index_bytes(reading: BookieReading) -> int | None:
    """The index's bytes, when the bookie reports them (bookied's ``info`` ``indexBytes``)."""
    return _info_int(reading, "indexBytes")


def _info_int(reading: BookieReading, key: str) -> int | None:
    value = (reading.info or {}).get(key)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class RefusedCompaction:
    """Why a forced pass runs no major, no minor compaction (None: it runs it)."""

    major: str | None
    minor: str | None


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """The compaction settings a bookie reports (bookied's gc status): intervals (s; 0: not
    periodic), forceAllowCompaction, and what a forced pass refuses."""

    minor_interval: int | None
    major_interval: int | None
    force_allow: bool | None
    refused: RefusedCompaction

    def interval(self, kind: str) -> int | None:
        """``kind``'s (minor, major) interval."""
        return self.minor_interval if kind == "minor" else self.major_interval

    def refusal(self, kind: str) -> str | None:
        """Why a forced pass runs no ``kind`` (minor, major) compaction; None when it runs it."""
        return self.refused.minor if kind == "minor" else self.refused.major


def compaction_policy(reading: BookieReading) -> CompactionPolicy | None:
    """The compaction settings the bookie reports; None when it reports none (Java's)."""
    gc = reading.gc or {}
    if "forcedCompactionRefused" not in gc:
        return None
    refused = gc.get("forcedCompactionRefused") or {}
    return CompactionPolicy(
        minor_interval=gc.get("minorCompactionInterval"),
        major_interval=gc.get("majorCompactionInterval"),
        force_allow=gc.get("forceAllowCompaction"),
        refused=RefusedCompaction(major=refused.get("major"), minor=refused.get("minor")),
    )


@dataclass(frozen=True, slots=True)
class LiveBytes:
    """Live ledger data on a bookie (or the cluster's), by whose it is."""

    topics: int = 0
    applications: int = 0
    orphans: int = 0
    unlisted: int = 0

    def __add__(self, other: LiveBytes) -> LiveBytes:
        return LiveBytes(
            self.topics + other.topics,
            self.applications + other.applications,
            self.orphans + other.orphans,
            self.unlisted + other.unlisted,
        )

    @property
    def total(self) -> int:
        return self.topics + self.applications + self.orphans + self.unlisted


@dataclass(frozen=True, slots=True)
class BookieGroup:
    """An owner group's data on one bookie (its kind, name and component: None for all)."""

    kind: str
    name: str
    component: str | None
    ledgers: int
    stored_bytes: int
    estimated_bytes: int


@dataclass(frozen=True, slots=True)
class BookieSpace:
    """One bookie's space, attributed: its filesystem, live data by owner, what its entry logs
    hold beyond that (``awaiting_gc_bytes``; ``not_in_entry_logs_bytes``: live data not in them
    yet), its compaction classes, journal, index, and the rest; None where it does not say.
    ``unread``: what could not be read, and why."""

    bookie_id: str
    state: Registration
    http: str | None
    kind: str | None
    total_bytes: int | None
    free_bytes: int | None
    used_bytes: int | None
    live_bytes: int
    live: LiveBytes
    estimated_bytes: int
    journal_bytes: int | None
    index_bytes: int | None
    read_only_reasons: dict[str, str] | None
    minor_threshold: float
    major_threshold: float
    thresholds_reported: bool
    compaction_policy: CompactionPolicy | None
    gc: dict[str, Any] | None  #: the bookie's own gc status figures (its keys)
    unread: dict[str, str]
    groups: list[BookieGroup]
    entry_logs: int | None
    entry_log_bytes: int | None
    awaiting_gc_bytes: int | None
    not_in_entry_logs_bytes: int | None
    compaction: EntryLogClasses | None
    data_bytes: int | None
    other_files_bytes: int | None

    def dead(self, key: str) -> int:
        """Its compaction class ``key``'s dead bytes (``below_minor_dead_bytes``, ...); 0 without one."""
        return int(getattr(self.compaction, key)) if self.compaction is not None else 0


#: Owner.kind -> the bookie's ``live`` bucket
_LIVE_BUCKET = {
    "topic": "topics",
    "pulsar": "topics",
    "application": "applications",
    "orphan": "orphans",
    "unlisted": "unlisted",
}


def bookie_doc(reading: BookieReading, walk: Walk, by: str) -> BookieSpace:
    """One bookie's space, attributed."""
    kind = reading.kind
    framing = RECORD_FRAMING.get(kind or "java", 4)
    live = dict.fromkeys(("topics", "applications", "orphans", "unlisted"), 0)
    estimated = 0
    groups: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for (bookie, owner), cell in walk.tally.cells.items():
        if bookie != reading.bookie_id:
            continue
        stored = cell.nbytes + cell.entries * framing
        bucket = _LIVE_BUCKET[owner.kind]
        live[bucket] += stored
        est = cell.estimated_bytes + cell.estimated_entries * framing
        estimated += est
        g = groups[owner.group(by)]
        g[0] += cell.ledgers
        g[1] += stored
        g[2] += est
    live_total = sum(live.values())
    minor, major, reported = thresholds(reading)
    journal, index = journal_bytes(reading), index_bytes(reading)
    unread = dict(reading.unread)
    logs = reading.entry_logs
    classes: EntryLogClasses | None = None
    if logs is None:
        if reading.kind is not None and "gc_details" not in unread:
            unread["entry logs"] = "the bookie's gc_details has no entry-log figures (a Java bookie?)"
        in_logs = _live_in_entry_logs(reading)  # a Java bookie's /metrics still tells its entry logs' live bytes
        awaiting = None if in_logs is None else max(0, in_logs - live_total)
        not_in_logs = None if in_logs is None else max(0, live_total - in_logs)
        # the filesystem's used space is not the bookie's: other data and, on one host, other
        # bookies share it, and Java's HTTP admin sizes none of the bookie's own files
        data = None
    else:
        classes = entry_log_classes(logs, minor, major)
        rest = classes.entry_log_live_bytes - live_total
        awaiting, not_in_logs = max(0, rest), max(0, -rest)
        data = classes.entry_log_bytes + (journal or 0) + (index or 0)
    if journal is None and reading.kind is not None:
        unread.setdefault("journal", "the bookie's HTTP admin does not report the journal's size")
    if index is None and reading.kind is not None:
        unread.setdefault("index", "the bookie's HTTP admin does not report the index's size")
    used = reading.used_bytes
    return BookieSpace(
        bookie_id=reading.bookie_id,
        state=reading.state,
        http=reading.http,
        kind=kind,
        total_bytes=reading.total_bytes,
        free_bytes=reading.free_bytes,
        used_bytes=used,
        live_bytes=live_total,
        live=LiveBytes(**live),
        estimated_bytes=estimated,
        journal_bytes=journal,
        index_bytes=index,
        read_only_reasons=reading.read_only_reasons,
        minor_threshold=minor,
        major_threshold=major,
        thresholds_reported=reported,
        compaction_policy=compaction_policy(reading),
        gc=_gc_summary(reading),
        unread=unread,
        groups=[
            BookieGroup(k, n, c or None, g[0], g[1], g[2])
            for (k, n, c), g in sorted(groups.items(), key=lambda kv: -kv[1][1])
        ],
        entry_logs=None if classes is None else classes.entry_logs,
        entry_log_bytes=None if classes is None else classes.entry_log_bytes,
        awaiting_gc_bytes=awaiting,
        not_in_entry_logs_bytes=not_in_logs,
        compaction=classes,
        data_bytes=data,
        other_files_bytes=None if used is None or logs is None or data is None else max(0, used - data),
    )


def _live_in_entry_logs(reading: BookieReading) -> int | None:
    """The live bytes of the bookie's entry logs from its ``/metrics`` (Java's
    ``bookie_ACTIVE_ENTRY_LOG_SPACE_BYTES``, one sample per ledger directory), None without it."""
    from .prometheus import Scrape

    total = Scrape(reading.metrics).total("bookie_ACTIVE_ENTRY_LOG_SPACE_BYTES") if reading.metrics else None
    return None if total is None else int(total)


def _gc_summary(reading: BookieReading) -> dict[str, Any] | None:
    gc = reading.gc
    if not isinstance(gc, dict):
        return None
    keys = (
        "gcRunning",
        "gcRuns",
        "lastGcTime",
        "nextGcTime",
        "nextMinorCompactionTime",
        "nextMajorCompactionTime",
        "lastCompaction",
        "majorCompactionSuspended",
        "minorCompactionSuspended",
    )
    return {k: gc[k] for k in keys if k in gc}


# ---------------------------------------------------------------- the report


@dataclass(frozen=True, slots=True)
class OwnerGroup:
    """An owner group's ledgers across the cluster: their length, open ones, and the bytes every
    copy of them takes on the bookies."""

    kind: str
    name: str
    component: str | None
    ledgers: int
    length_bytes: int
    open_ledgers: int
    stored_bytes: int


@dataclass(frozen=True, slots=True)
class DiskTotals:
    """The bookies' figures summed (a figure a bookie does not say counts 0); ``answered``: the
    bookies whose HTTP admin answered, ``unsized_bookies`` those of them that size none of their
    files (Java's), whose live data is ``unsized_live_bytes``."""

    total_bytes: int
    used_bytes: int
    data_bytes: int
    live_bytes: int
    estimated_bytes: int
    entry_log_bytes: int
    awaiting_gc_bytes: int
    not_in_entry_logs_bytes: int
    journal_bytes: int
    index_bytes: int
    live: LiveBytes
    answered: int
    unsized_bookies: int
    unsized_live_bytes: int
    dead_bytes: int
    active_log_dead_bytes: int
    below_minor_dead_bytes: int
    below_major_dead_bytes: int
    above_major_dead_bytes: int


@dataclass(frozen=True, slots=True)
class WalkedLedgers:
    """What the ledger walk read: open ledgers sized by an estimate, or not counted (and why)."""

    walked: int
    unreadable: int
    open_estimated: int
    open_unknown: int
    open_unknown_why: list[str]


@dataclass(frozen=True, slots=True)
class OrphanCount:
    """The orphans found (``pulsar orphans``' rule), and the ledgers too young or of other
    components, not judged."""

    ledgers: int
    older_than: float
    young: int
    other_components: int


@dataclass(frozen=True, slots=True)
class DiskReport:
    """``bkctl disk``: every bookie's space, the owner groups at ``by``, the totals, what was
    walked, and the one-line answer; ``offloaded_twice``, once the command added it."""

    by: str
    bookies: list[BookieSpace]
    groups: list[OwnerGroup]
    totals: DiskTotals
    ledgers: WalkedLedgers
    orphans: OrphanCount
    summary: str
    offloaded_twice: HeldTwice | None = omitted_when_none()


def disk_report(
    store: MetadataStore,
    bk: Callable[[], BlockingBookKeeper] | None,
    bookie: str | None = None,
    by: str = "bookie",
    base: str | None = None,
    older_than: float = 3600.0,
    now_ms: int | None = None,
    timeout: float = 5.0,
    progress: WalkProgress | None = None,
) -> DiskReport:
    """Every bookie's (or one's) space, attributed; cluster totals; groups at ``by``; the one-line answer
    (``progress``: the ledger walk's, a ``WalkProgress``)."""
    from .bookies import list_bookies

    rows = list_bookies(store, "all")
    if bookie is not None:
        rows = [r for r in rows if r.bookie_id == bookie]
        if not rows:  # as `bookie gc` says of a bookie it cannot find: exit 3, not an empty table
            from .errors import NotFound

            raise NotFound(f"no such bookie: {bookie} (neither registered nor with a cookie)")
    level = by if by != "bookie" else "namespace"
    walk = walk_ledgers(store, bk, base, older_than, now_ms, progress=progress, level=level)
    readings = read_bookies(store, rows, (INFO, GC, GC_DETAILS, METRICS), timeout)
    bookies = [bookie_doc(r, walk, level) for r in readings]
    groups: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for owner, logical in walk.tally.logical.items():
        g = groups[owner.group(level)]
        g[0] += logical.ledgers
        g[1] += logical.length
        g[2] += logical.open_ledgers
    for b in bookies:
        for bg in b.groups:
            groups[(bg.kind, bg.name, bg.component or "")][3] += bg.stored_bytes
    summed = totals(bookies)
    return DiskReport(
        by=by,
        bookies=bookies,
        groups=[
            OwnerGroup(k, n, c or None, g[0], g[1], g[2], g[3])
            for (k, n, c), g in sorted(groups.items(), key=lambda kv: (-kv[1][3], kv[0]))
        ],
        totals=summed,
        ledgers=WalkedLedgers(
            walked=walk.ledgers,
            unreadable=walk.unreadable,
            open_estimated=walk.open_estimated,
            open_unknown=len(walk.open_unknown),
            open_unknown_why=sorted(set(walk.open_unknown.values()) - {""})[:3],
        ),
        orphans=OrphanCount(
            ledgers=len(walk.orphan_ids),
            older_than=older_than,
            young=walk.orphans.young,
            other_components=walk.orphans.unchecked,
        ),
        summary=summary_line(bookies, summed),
    )


def totals(bookies: list[BookieSpace]) -> DiskTotals:
    """The bookies' figures summed."""
    unsized = [b for b in bookies if b.kind is not None and b.data_bytes is None]
    return DiskTotals(
        total_bytes=sum(b.total_bytes or 0 for b in bookies),
        used_bytes=sum(b.used_bytes or 0 for b in bookies),
        data_bytes=sum(b.data_bytes or 0 for b in bookies),
        live_bytes=sum(b.live_bytes for b in bookies),
        estimated_bytes=sum(b.estimated_bytes for b in bookies),
        entry_log_bytes=sum(b.entry_log_bytes or 0 for b in bookies),
        awaiting_gc_bytes=sum(b.awaiting_gc_bytes or 0 for b in bookies),
        not_in_entry_logs_bytes=sum(b.not_in_entry_logs_bytes or 0 for b in bookies),
        journal_bytes=sum(b.journal_bytes or 0 for b in bookies),
        index_bytes=sum(b.index_bytes or 0 for b in bookies),
        live=sum((b.live for b in bookies), LiveBytes()),
        answered=sum(1 for b in bookies if b.kind is not None),
        unsized_bookies=len(unsized),
        unsized_live_bytes=sum(b.live_bytes - b.live.orphans for b in unsized),
        dead_bytes=sum(b.dead("dead_bytes") for b in bookies),
        active_log_dead_bytes=sum(b.dead("active_log_dead_bytes") for b in bookies),
        below_minor_dead_bytes=sum(b.dead("below_minor_dead_bytes") for b in bookies),
        below_major_dead_bytes=sum(b.dead("below_major_dead_bytes") for b in bookies),
        above_major_dead_bytes=sum(b.dead("above_major_dead_bytes") for b in bookies),
    )


def _holding(bookies: list[BookieSpace], key: str) -> str:
    """The bookies with bytes of ``key``: one named, several counted."""
    ids = [b.bookie_id for b in bookies if b.dead(key)]
    return ids[0] if len(ids) == 1 else "BOOKIE"


def compaction_advice(bookies: list[BookieSpace], t: DiskTotals) -> str:
    """What reclaims the largest share of the dead bytes, and how to get it now -- as the bookie's
    own settings allow: a kind of compaction that is not periodic (interval 0) is only run by a
    forced pass, which forceAllowCompaction=false refuses; then the advice says what to change."""
    from ..humanize import human_size

    b = bookies[0] if bookies else None
    minor = b.minor_threshold if b is not None else DEFAULT_THRESHOLDS[0]
    major = b.major_threshold if b is not None else DEFAULT_THRESHOLDS[1]
    assumed = "" if all(x.thresholds_reported for x in bookies if x.compaction) else ", the default"
    policy = b.compaction_policy if b is not None else None

    def cure(kind: str, key: str) -> str:
        gc = f"`bkctl bookie gc {_holding(bookies, key)} --{kind}`"
        refused = policy.refusal(kind) if policy is not None else None
        if refused:
            return (
                f"no compaction takes it: {refused}; set forceAllowCompaction=true (then {gc}) or a "
                f"{kind}CompactionInterval"
            )
        if policy is not None and not policy.interval(kind):
            return f"{kind} compaction is not periodic ({kind}CompactionInterval=0): {gc} takes it"
        return f"the next {kind} compaction takes it, or now {gc}"

    parts = {
        "below_minor_dead_bytes": f"in logs under the minor threshold {minor:g}{assumed}: "
        + cure("minor", "below_minor_dead_bytes"),
        "below_major_dead_bytes": f"in logs between the minor threshold {minor:g} and the major {major:g}{assumed}: "
        + cure("major", "below_major_dead_bytes"),
        "above_major_dead_bytes": f"in logs over the major threshold {major:g}{assumed}: no compaction takes it; "
        "raise majorCompactionThreshold",
        "active_log_dead_bytes": "in the entry log being written: compactable once it reaches logSizeLimit",
    }
    dead = {k: int(getattr(t, k)) for k in parts}
    ranked = sorted(parts, key=lambda k: -dead[k])
    text = parts[ranked[0]]
    others = [
        f"{human_size(dead[k])} {short}"
        for k, short in (
            ("below_minor_dead_bytes", "under the minor threshold"),
            ("below_major_dead_bytes", "for a major compaction"),
            ("above_major_dead_bytes", "over the major threshold"),
            ("active_log_dead_bytes", "in the active log"),
        )
        if k != ranked[0] and dead[k]
    ]
    return text + ("; " + ", ".join(others) if others else "")


def read_only_text(bookies: list[BookieSpace]) -> str | None:
    """The read-only bookies and why, as each says; how much of its filesystem is not bookie data."""
    from ..humanize import human_size

    parts = []
    for b in bookies:
        if b.state is not Registration.READ_ONLY:
            continue
        reasons = b.read_only_reasons
        why = (
            "; ".join(reasons.values())
            if reasons
            else (
                "its HTTP admin does not say why (a Java bookie? its log does)"
                if b.kind
                else "its HTTP admin does not answer"
            )
        )
        if b.other_files_bytes is not None and b.used_bytes:
            why += (
                f"; {human_size(b.other_files_bytes)} of the {human_size(b.used_bytes)} used on its "
                "filesystem is not bookie data"
            )
        journal = b.journal_bytes or 0
        if b.used_bytes and journal * 4 >= b.used_bytes:
            why += f"; its journal holds {human_size(journal)}: {JOURNAL_WAY_OUT}"
        parts.append(f"{b.bookie_id} ({why})")
    return f"read-only: {', '.join(parts)}" if parts else None


def summary_line(bookies: list[BookieSpace], t: DiskTotals) -> str:
    """The one-line answer: how much is live, waiting for compaction or GC, orphaned."""
    from ..humanize import human_size, plural

    read_only = read_only_text(bookies)
    if not t.answered:
        return "; ".join(filter(None, [read_only, "no bookie answered on its HTTP admin: nothing to attribute"]))
    live = t.live.topics + t.live.applications + t.live.unlisted - t.unsized_live_bytes
    parts = [read_only] if read_only else []
    if t.answered > t.unsized_bookies:
        parts.append(f"{human_size(live)} of {human_size(t.data_bytes)} used is live data")
    if t.unsized_bookies:
        parts.append(
            f"{human_size(t.unsized_live_bytes)} is live data on {plural(t.unsized_bookies, 'bookie')} "
            "whose HTTP admin sizes none of its files (Java's: only the filesystem's free and total "
            "space, shared with other data; `du` its ledger and journal directories)"
        )
    if t.dead_bytes:
        parts.append(f"{human_size(t.dead_bytes)} is waiting for compaction ({compaction_advice(bookies, t)})")
    if t.awaiting_gc_bytes:
        parts.append(
            f"{human_size(t.awaiting_gc_bytes)} is deleted ledgers the next GC pass removes "
            "(now: `bkctl bookie gc BOOKIE`)"
        )
    if t.live.orphans:
        parts.append(f"{human_size(t.live.orphans)} is orphans (list: `bkctl pulsar orphans`)")
    return "; ".join(parts)
