"""Which owner each byte of a bookie's live ledger data belongs to, and what reclaims the rest:
the rules of ``bkctl disk`` (which reads the bookies' own reports and renders).

* A ledger's **owner** (:class:`Owner`): the topic whose managed ledger lists it (data, cursor,
  schema and compacted ledgers as the topic's components), an orphan or a Pulsar ledger not
  listed yet (the sweep's rule, :mod:`.orphans`, called, not copied), another Pulsar component,
  or the application its ``application`` custom metadata names.
* A ledger's **copies** on each bookie (:func:`copies_by_bookie`): the entries whose write set
  includes it (:func:`~bkctl.wire.client.fragments.entries_by_bookie`, the write-set rule's one
  home) at the ledger's bytes per stored entry -- its length / entries (the mean: an estimate
  per bookie when E > Qw) plus the header and digest the client packs around each payload.  A
  closed ledger's length is in its metadata; an open one's is read from its bookies (the last
  entry each holds carries the ledger's length so far): an estimate, said so.
* One walk of every ledger's metadata (:func:`walk_ledgers`) tallies them by bookie and owner
  (:class:`Tally`), and serves the orphan sweep too.
* An entry log's dead bytes by what reclaims them (:func:`entry_log_classes`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from .orphans import OrphanSweep
from .replica_size import LedgerEnd, packed_entry_bytes, replica_bytes

if TYPE_CHECKING:
    from ..client.blocking import BlockingBookKeeper
    from ..client.bookkeeper import BookKeeperClient
    from ..metadata.ledger import LedgerMetadata
    from ..metadata.store import MetadataStore, WalkProgress
    from ..pulsar.managed_ledger import TopicName
    from ..pulsar.topics import TopicMetadataReader

__all__ = [
    "DEFAULT_THRESHOLDS",
    "OPEN_LEDGERS_A_STEP",
    "RECORD_FRAMING",
    "UNKNOWN_KEPT",
    "Cell",
    "Copy",
    "EntryLogClasses",
    "Logical",
    "Owner",
    "OwnerKind",
    "Tally",
    "Walk",
    "copies_by_bookie",
    "entry_log_classes",
    "listed_owners",
    "managed_ledger_naming",
    "managed_ledger_owner",
    "owner_by_metadata",
    "packed_entry_bytes",
    "replica_bytes",
    "walk_ledgers",
]

#: bytes an entry log adds around each stored entry: bookied's record (crc, length,
#: ledger id, entry id); Java's entry log (a 4-byte length)
RECORD_FRAMING = {"bookied": 24, "java": 4}
#: minor and major compaction thresholds when a bookie does not report its own (Java's and bookied's defaults)
DEFAULT_THRESHOLDS = (0.2, 0.8)
#: open ledgers whose last entries are read from their bookies in one step
OPEN_LEDGERS_A_STEP = 1024
#: the open ledgers whose size no bookie told whose reasons are kept (the report shows three)
UNKNOWN_KEPT = 100

#: ``topic`` (a managed ledger or Pulsar component names it), ``orphan``, ``unlisted`` (Pulsar's,
#: not listed yet, too young to judge), ``pulsar`` (another Pulsar component, no topic known) or
#: ``application`` (not Pulsar's: its ``application`` metadata)
OwnerKind = Literal["topic", "orphan", "unlisted", "pulsar", "application"]
#: the level owners are counted at: a topic's components apart, or its namespace's or tenant's
Level = Literal["topic", "namespace", "tenant"]


# ---------------------------------------------------------------- owners


@dataclass(frozen=True)
class Owner:
    """Whose a ledger is (:data:`OwnerKind`); a topic's tenant, namespace and component."""

    kind: OwnerKind
    name: str
    tenant: str | None = None
    namespace: str | None = None
    component: str | None = None

    def group(self, by: str) -> tuple[str, str, str]:
        """``(kind, name, component)`` at the level ``by`` (tenant, namespace or topic)."""
        if self.kind in ("application", "pulsar") or self.tenant is None:
            return self.kind, self.name, ""
        if by == "tenant":
            return self.kind, self.tenant, ""
        if by == "namespace":
            return self.kind, f"{self.tenant}/{self.namespace}", ""
        return self.kind, self.name, self.component or ""


def topic_owner(kind: OwnerKind, topic: TopicName | None, component: str) -> Owner:
    """An owner for a :class:`~bkctl.wire.pulsar.managed_ledger.TopicName` (None: a name that did not decode)."""
    if topic is None:
        return Owner(kind, "(undecodable topic name)", component=component)
    return Owner(kind, str(topic), topic.tenant, topic.namespace, component)


def owner_by_metadata(custom: Mapping[str, str]) -> Owner | None:
    """The owner a ledger's custom metadata names, for a ledger no managed ledger lists;
    None for a managed ledger's own ledger (orphan or not: the sweep decides)."""
    from ..pulsar.managed_ledger import (
        COMPACTED_TOPIC_KEY,
        COMPONENT,
        COMPONENT_COMPACTED,
        COMPONENT_SCHEMA,
        SCHEMA_ID_KEY,
        TopicName,
    )
    from .ownership import pulsar_component, topic_of_schema_id

    component = pulsar_component(dict(custom))
    if component is None:
        return Owner("application", custom.get("application") or "(no application metadata)")
    if component == COMPONENT:
        return None
    named = {COMPONENT_SCHEMA: custom.get(SCHEMA_ID_KEY), COMPONENT_COMPACTED: custom.get(COMPACTED_TOPIC_KEY)}
    text = named.get(component)
    if text and component == COMPONENT_SCHEMA and text.count("/") == 2:
        text = topic_of_schema_id(text)  # a schema id's topic part is URL-encoded, as in a managed ledger's name
    if text:
        try:
            topic: TopicName | None = TopicName.parse(text)
        except ValueError:
            topic = None
        if topic is not None:
            return topic_owner("topic", topic, "compacted" if component == COMPONENT_COMPACTED else component)
    return Owner("pulsar", component)


def managed_ledger_naming(custom: Mapping[str, str]) -> dict[str, str]:
    """The part of a ledger's custom metadata :func:`managed_ledger_owner` reads: what a walk
    keeps of each ledger it judges later (tens of thousands at 10^6 ledgers)."""
    from ..pulsar.managed_ledger import CURSOR_KEY, MANAGED_LEDGER_KEY

    return {key: custom[key] for key in (MANAGED_LEDGER_KEY, CURSOR_KEY) if key in custom}


def managed_ledger_owner(kind: OwnerKind, custom: Mapping[str, str]) -> Owner:
    """An orphan's or an unlisted ledger's owner: the managed ledger its metadata names."""
    from ..pulsar.managed_ledger import CURSOR_KEY, MANAGED_LEDGER_KEY, TopicName

    name = custom.get(MANAGED_LEDGER_KEY)
    try:
        topic = TopicName.from_managed_ledger(name) if name else None
    except (ValueError, IndexError):
        topic = None
    if topic is None:
        return Owner(kind, name or "(no managed ledger named)", component="data")
    return topic_owner(kind, topic, "cursor" if CURSOR_KEY in custom else "data")


#: one Owner object for each group a report by tenant or namespace keeps
SharedOwners = dict[tuple[str, str, str | None], Owner]


def at_level(owner: Owner, level: str | None, shared: SharedOwners) -> Owner:
    """The owner a report by ``level`` (tenant, namespace) keeps: one object for each of its groups."""
    if level not in ("tenant", "namespace") or owner.tenant is None:
        return owner
    kind, name, _c = owner.group(level)
    return shared.setdefault((kind, name, owner.namespace), Owner(owner.kind, name, owner.tenant, owner.namespace))


def listed_owners(topics: TopicMetadataReader, level: str | None = None) -> dict[int, Owner]:
    """ledger id -> its topic (at ``level``), for every data and cursor ledger the managed ledgers list."""
    owners: dict[int, Owner] = {}
    shared: SharedOwners = {}
    for ml in topics.read_all(topics.topics()):  # one deleted meanwhile is left out
        data = at_level(topic_owner("topic", ml.topic, "data"), level, shared)  # one object a topic (or group)
        for ledger_id in ml.ledger_ids:
            owners[ledger_id] = data
        cursor = at_level(topic_owner("topic", ml.topic, "cursor"), level, shared)
        for info in ml.cursors.values():
            if info.cursorsLedgerId >= 0:
                owners[info.cursorsLedgerId] = cursor
    return owners


# ---------------------------------------------------------------- one ledger on its bookies


class Copy(NamedTuple):
    """What one bookie holds of a ledger: entries, and their bytes as the client packed them."""

    entries: int
    nbytes: int


def copies_by_bookie(md: LedgerMetadata, last_entry_id: int, length: int) -> dict[str, Copy]:
    """bookie -> its :class:`Copy`: its entries up to ``last_entry_id`` and their bytes (:func:`replica_bytes`)."""
    from ..client.fragments import entries_by_bookie

    if last_entry_id < 0:
        return {}
    end = LedgerEnd(last_entry_id, length)
    return {
        bookie: Copy(held, replica_bytes(md, held, end))
        for bookie, held in entries_by_bookie(md, last_entry_id).items()
    }


async def last_entries(
    client: BookKeeperClient, ledgers: list[tuple[int, tuple[str, ...]]], window: int
) -> dict[int, LedgerEnd | str]:
    """ledger id -> its :class:`LedgerEnd` by READ_ENTRY -1 on its last ensemble (the highest),
    or why none answered."""
    from twisted.internet import defer
    from twisted.python.failure import Failure

    from ..client.errors import NoSuchEntry, NoSuchLedgerOnBookie
    from ..codecs.digest import ENTRY_HEADER, entry_header

    limit = defer.DeferredSemaphore(window)
    out: dict[int, LedgerEnd | str] = {}

    def ask(ledger_id: int, bookie: str) -> defer.Deferred[Any]:
        return defer.maybeDeferred(client.pool.get(bookie).read, ledger_id, -1)

    def one(ledger_id: int, bookies: tuple[str, ...]) -> defer.Deferred[None]:
        d: defer.Deferred[list[tuple[bool, Any]]] = defer.DeferredList(
            [ask(ledger_id, b) for b in bookies], consumeErrors=True
        )

        def done(results: list[tuple[bool, Any]]) -> None:
            best: LedgerEnd | None = None
            why: str | None = None
            empty = False
            for ok, value in results:
                if ok and len(value) >= ENTRY_HEADER.size:
                    _lid, entry_id, _lac, length = entry_header(value)
                    if best is None or entry_id > best.last_entry_id:
                        best = LedgerEnd(entry_id, length)
                elif not ok and isinstance(value, Failure) and value.check(NoSuchLedgerOnBookie, NoSuchEntry):
                    empty = True  # nothing written there yet (a Java bookie knows no ledger before its first entry)
                elif not ok:
                    why = why or str(client.explain(value.value))
            if best is None and empty and why is None:
                best = LedgerEnd(-1, 0)  # every bookie of the last ensemble answered, none holds an entry
            out[ledger_id] = best if best is not None else (why or "no entry")

        return d.addCallback(done)

    await defer.DeferredList([limit.run(one, lid, bookies) for lid, bookies in ledgers])
    return out


# ---------------------------------------------------------------- the walk


@dataclass(slots=True)
class Cell:
    """One (bookie, owner)'s copies: ledgers, entries and bytes, and of them the open ledgers'
    (estimated) entries and bytes."""

    ledgers: int = 0
    entries: int = 0
    nbytes: int = 0
    estimated_entries: int = 0
    estimated_bytes: int = 0


@dataclass(slots=True)
class Logical:
    """One owner's ledgers as written, once each: ledgers, their length, how many are open."""

    ledgers: int = 0
    length: int = 0
    open_ledgers: int = 0


class Tally:
    """Per (bookie, owner) a :class:`Cell`; per owner a :class:`Logical` (counted at ``level``)."""

    def __init__(self, level: str | None = None):
        self.cells: defaultdict[tuple[str, Owner], Cell] = defaultdict(Cell)
        self.logical: defaultdict[Owner, Logical] = defaultdict(Logical)
        # tenant, namespace: by group (100,000 topics made 300,000 cells)
        self.level = level
        self.shared: SharedOwners = {}

    def add(self, owner: Owner, copies: Mapping[str, tuple[int, int]], length: int, estimate: bool) -> None:
        owner = at_level(owner, self.level, self.shared)
        logical = self.logical[owner]
        logical.ledgers += 1
        logical.length += length
        logical.open_ledgers += estimate
        for bookie, (entries, nbytes) in copies.items():
            cell = self.cells[(bookie, owner)]
            cell.ledgers += 1
            cell.entries += entries
            cell.nbytes += nbytes
            if estimate:
                cell.estimated_entries += entries
                cell.estimated_bytes += nbytes


class _Held(NamedTuple):
    """An unlisted ledger waiting for the sweep's judgement: what names its managed ledger,
    its copies (bookie, entries, bytes), its length, whether estimated."""

    naming: tuple[tuple[str, str], ...]
    copies: tuple[tuple[str, int, int], ...]
    length: int
    estimated: bool


class _OpenLedger(NamedTuple):
    ledger_id: int
    metadata: LedgerMetadata
    owner: Owner | None
    naming: dict[str, str]


@dataclass
class Walk:
    """What :func:`walk_ledgers` found: the tally, the sweep (for its counts), the orphans' ids,
    the ledgers walked, those whose metadata does not decode, the open ones whose size was
    estimated, and the open ones whose size no bookie told (id -> why; "" past the first few)."""

    tally: Tally
    orphans: OrphanSweep
    orphan_ids: list[int]
    ledgers: int
    unreadable: int
    open_estimated: int
    open_unknown: dict[int, str] = field(default_factory=dict)


def walk_ledgers(
    store: MetadataStore,
    bk: Callable[[], BlockingBookKeeper] | None,
    base: str | None = None,
    older_than: float = 3600.0,
    now_ms: int | None = None,
    window: int = 256,
    progress: WalkProgress | None = None,
    level: str | None = None,
) -> Walk:
    """Every ledger's copies on its bookies, by owner (counted at ``level``: :class:`Tally`).
    ``bk()`` (a BlockingBookKeeper, made on first use; None: never ask the bookies) reads open
    ledgers' lengths; ``progress`` hears of the walk over every ledger's metadata."""
    from ..text import custom_metadata_text
    from .topic_state import topic_reader

    owners = listed_owners(topic_reader(store, base), level)
    tally = Tally(level)
    # streamed: open ledgers read a chunk at a time as found; an unlisted one waits, as (naming, copies), for the sweep
    open_chunk: list[_OpenLedger] = []
    pending: dict[int, _Held] = {}
    shared: dict[Any, Any] = {}  # one object for each bookie id and naming that recurs
    orphaned: set[int] = set()
    unknown: dict[int, str] = {}
    walked = unreadable = estimated = 0

    def hold(ledger_id: int, naming: dict[str, str], copies: dict[str, Copy], length: int, estimate: bool) -> None:
        key = tuple(sorted(naming.items()))
        packed = tuple((shared.setdefault(b, b), n, size) for b, (n, size) in copies.items())
        pending[ledger_id] = _Held(shared.setdefault(key, key), packed, length, estimate)

    def settle_open() -> None:
        """Read the chunk of open ledgers' ends from their bookies; tally them (or hold them)."""
        nonlocal estimated
        chunk, open_chunk[:] = list(open_chunk), []
        ends: dict[int, Any] = {}
        if bk is not None and chunk:
            try:
                ends = bk().run(last_entries, [(o.ledger_id, tuple(o.metadata.last_ensemble)) for o in chunk], window)
            except Exception as e:  # noqa: BLE001 - the closed ledgers are still worth showing
                ends = {o.ledger_id: str(e) or type(e).__name__ for o in chunk}
        for ledger_id, md, owner, naming in chunk:
            end = ends.get(ledger_id, "the bookies were not asked")
            if isinstance(end, str):  # the reasons of a few kept (each names its ledger), all counted
                unknown[ledger_id] = end if len(unknown) < UNKNOWN_KEPT else ""
                continue
            estimated += 1
            last_entry_id, length = end
            copies = copies_by_bookie(md, last_entry_id, length)
            if owner is None:
                hold(ledger_id, naming, copies, length, True)
            else:
                tally.add(owner, copies, length, True)

    def on_ledger(ledger_id: int, md: LedgerMetadata | Exception | None, _version: int) -> None:
        nonlocal walked, unreadable
        if md is None:
            return  # deleted meanwhile
        if isinstance(md, Exception):
            unreadable += 1
            return
        walked += 1
        custom = custom_metadata_text(md.custom_metadata)
        owner = owners.get(ledger_id) or owner_by_metadata(custom)
        if not md.is_closed:
            open_chunk.append(_OpenLedger(ledger_id, md, owner, managed_ledger_naming(custom)))
            if len(open_chunk) >= OPEN_LEDGERS_A_STEP:
                settle_open()
        elif owner is None:
            copies = copies_by_bookie(md, md.last_entry_id, md.length)
            hold(ledger_id, managed_ledger_naming(custom), copies, md.length, False)
        else:
            tally.add(owner, copies_by_bookie(md, md.last_entry_id, md.length), md.length, False)

    def judge(upto: int | None) -> None:
        """Tally the held ledgers the sweep judged: up to ``upto`` (its orphans come in id order), or all."""
        for ledger_id in [lid for lid in pending if upto is None or lid <= upto]:
            held = pending.pop(ledger_id)
            owner = managed_ledger_owner("orphan" if ledger_id in orphaned else "unlisted", dict(held.naming))
            tally.add(owner, {b: Copy(n, size) for b, n, size in held.copies}, held.length, held.estimated)

    sweep = OrphanSweep(
        store, base, older_than=older_than, now_ms=now_ms, progress=progress, listed=owners, on_ledger=on_ledger
    )
    for orphan in sweep:
        orphaned.add(orphan.ledger_id)
        if len(pending) >= OPEN_LEDGERS_A_STEP:
            judge(orphan.ledger_id)
    settle_open()
    judge(None)
    return Walk(tally, sweep, sorted(orphaned), walked, unreadable, estimated, unknown)


# ---------------------------------------------------------------- entry logs


@dataclass
class EntryLogClasses:
    """The entry logs' bytes, live bytes and dead bytes, the dead split by what will reclaim
    them (:func:`entry_log_classes`)."""

    entry_logs: int = 0
    entry_log_bytes: int = 0
    entry_log_live_bytes: int = 0
    dead_bytes: int = 0
    active_log_dead_bytes: int = 0
    below_minor_dead_bytes: int = 0
    below_major_dead_bytes: int = 0
    above_major_dead_bytes: int = 0
    lowest_live_ratio: float | None = None
    active_assumed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "entry_logs": self.entry_logs,
            "entry_log_bytes": self.entry_log_bytes,
            "entry_log_live_bytes": self.entry_log_live_bytes,
            "dead_bytes": self.dead_bytes,
            "active_log_dead_bytes": self.active_log_dead_bytes,
            "below_minor_dead_bytes": self.below_minor_dead_bytes,
            "below_major_dead_bytes": self.below_major_dead_bytes,
            "above_major_dead_bytes": self.above_major_dead_bytes,
            "lowest_live_ratio": self.lowest_live_ratio,
            "active_assumed": self.active_assumed,
        }


def entry_log_classes(logs: Sequence[Mapping[str, Any]], minor: float, major: float) -> EntryLogClasses:
    """The entry logs (as a bookie's ``gc_details`` lists them) by what reclaims their dead
    bytes: the log being written (``active``: once it rolls over), logs under the minor
    threshold (the next minor compaction), under the major one (a major compaction), over it
    (no compaction).  The active log is the one a bookie marks ``active``, else the newest
    of each ledger directory (``active_assumed``)."""
    marked = any("active" in log for log in logs)
    newest: dict[Any, int] = {}
    for log in logs:
        d = log.get("ledgerDirectory")
        newest[d] = max(newest.get(d, -1), int(log.get("logId", -1)))
    out = EntryLogClasses(entry_logs=len(logs), active_assumed=not marked)
    for log in logs:
        size, live = int(log.get("sizeBytes", 0)), int(log.get("liveBytes", 0))
        ratio = float(log.get("liveRatio", live / size if size else 0.0))
        dead = max(0, size - live)
        out.entry_log_bytes += size
        out.entry_log_live_bytes += live
        out.dead_bytes += dead
        active = bool(log.get("active")) if marked else int(log.get("logId", -1)) == newest[log.get("ledgerDirectory")]
        if active:
            out.active_log_dead_bytes += dead
            continue
        if out.lowest_live_ratio is None or ratio < out.lowest_live_ratio:
            out.lowest_live_ratio = ratio
        if minor > 0 and ratio < minor:
            out.below_minor_dead_bytes += dead
        elif major > 0 and ratio < major:
            out.below_major_dead_bytes += dead
        else:
            out.above_major_dead_bytes += dead
    return out
