"""``bkctl disk``: where each bookie's disk space went, and the one-line answer.

A bookie's used space is split into

* **live ledger data**, from the ledger metadata: each segment's entries whose
  write set includes the bookie (:meth:`Fragment.entry_count
  <bkctl.wire.client.fragments.Fragment.entry_count>`, the write-set rule's
  one home) at the ledger's bytes per stored entry -- its length / entries
  (the mean: entries of different sizes make it an estimate per bookie when
  E > Qw), plus the header and digest the client packs around each payload
  and the framing of the bookie's entry-log record.  A closed ledger's length
  is in its metadata; an open one's is read from its bookies (the last entry
  each holds carries the ledger's length so far): an **estimate**, said so.
  Grouped by Pulsar tenant / namespace / topic (data, cursor, schema and
  compacted ledgers as the topic's components) or, for other ledgers, by
  their ``application`` custom metadata;
* **orphans**: ``pulsar orphans``' rule and age caution
  (:class:`~bkctl.ops.pulsar.OrphanSweep`, called, not copied), and Pulsar
  ledgers not listed yet that are too young to judge;
* **deleted ledgers the bookie has not collected yet**: what the bookie still
  counts live in its entry logs beyond the live data above (their metadata
  is gone, so only the bookie's total tells); a negative rest is data not in
  the entry logs yet (the write cache, the journal);
* **dead bytes waiting for compaction**, by each entry log's live ratio
  against the compaction thresholds, and the log still being written;
* the **journal** (when the bookie reports it) and the rest of the filesystem.

Entry-log figures come from bookied's ``gc_details``; a Java bookie's HTTP
admin has none, and what could not be read is said, per bookie.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable

from .bookie_reads import GC, GC_DETAILS, INFO, BookieReading, read_bookies

#: bytes an entry log adds around each stored entry: bookied's record (crc, length,
#: ledger id, entry id); Java's entry log (a 4-byte length)
RECORD_FRAMING = {"bookied": 24, "java": 4}
#: minor and major compaction thresholds when a bookie does not report its own (Java's and bookied's defaults)
DEFAULT_THRESHOLDS = (0.2, 0.8)
BY = ("bookie", "tenant", "namespace", "topic")
#: open ledgers whose last entries are read from their bookies in one step
OPEN_LEDGERS_A_STEP = 1024
#: the open ledgers whose size no bookie told whose reasons are kept (the report shows three)
UNKNOWN_KEPT = 100
#: what a read-only bookie whose journal fills its disk can do
JOURNAL_WAY_OUT = (
    "a journal file is trimmed only once the journal rolls past it (journalMaxSizeMB, a restart); bookied rolls "
    "and frees it over diskUsageThreshold by itself; on a small disk keep journalMaxSizeMB, journalMaxBackups small"
)


# ---------------------------------------------------------------- owners


@dataclass(frozen=True)
class Owner:
    """Whose a ledger is: ``topic`` (a managed ledger or Pulsar component names it), ``orphan``,
    ``unlisted`` (Pulsar's, not listed yet, too young to judge), ``pulsar`` (another Pulsar
    component, no topic known) or ``application`` (not Pulsar's: its ``application`` metadata)."""

    kind: str
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


def topic_owner(kind: str, topic: Any, component: str) -> Owner:
    """An owner for a :class:`~bkctl.wire.pulsar.managed_ledger.TopicName` (None: a name that did not decode)."""
    if topic is None:
        return Owner(kind, "(undecodable topic name)", component=component)
    return Owner(kind, str(topic), topic.tenant, topic.namespace, component)


def owner_by_metadata(custom: dict[str, str]) -> Owner | None:
    """The owner a ledger's custom metadata names, for a ledger no managed ledger lists;
    None for a managed ledger's own ledger (orphan or not: the sweep decides)."""
    from bkctl.wire.pulsar.managed_ledger import (
        COMPACTED_TOPIC_KEY,
        COMPONENT,
        COMPONENT_COMPACTED,
        COMPONENT_SCHEMA,
        SCHEMA_ID_KEY,
        TopicName,
    )

    from .pulsar import pulsar_component

    component = pulsar_component(custom)
    if component is None:
        return Owner("application", custom.get("application") or "(no application metadata)")
    if component == COMPONENT:
        return None
    named = {COMPONENT_SCHEMA: custom.get(SCHEMA_ID_KEY), COMPONENT_COMPACTED: custom.get(COMPACTED_TOPIC_KEY)}
    text = named.get(component)
    if text and component == COMPONENT_SCHEMA and text.count("/") == 2:
        from .pulsar_schema import topic_of_schema_id

        text = topic_of_schema_id(text)  # a schema id's topic part is URL-encoded, as in a managed ledger's name
    if text:
        try:
            topic = TopicName.parse(text)
        except ValueError:
            topic = None
        if topic is not None:
            return topic_owner("topic", topic, "compacted" if component == COMPONENT_COMPACTED else component)
    return Owner("pulsar", component)


def managed_ledger_naming(custom: dict[str, str]) -> dict[str, str]:
    """The part of a ledger's custom metadata :func:`managed_ledger_owner` reads: what a walk
    keeps of each ledger it judges later (tens of thousands at 10^6 ledgers)."""
    from bkctl.wire.pulsar.managed_ledger import CURSOR_KEY, MANAGED_LEDGER_KEY

    return {key: custom[key] for key in (MANAGED_LEDGER_KEY, CURSOR_KEY) if key in custom}


def managed_ledger_owner(kind: str, custom: dict[str, str]) -> Owner:
    """An orphan's or an unlisted ledger's owner: the managed ledger its metadata names."""
    from bkctl.wire.pulsar.managed_ledger import CURSOR_KEY, MANAGED_LEDGER_KEY, TopicName

    name = custom.get(MANAGED_LEDGER_KEY)
    try:
        topic = TopicName.from_managed_ledger(name) if name else None
    except (ValueError, IndexError):
        topic = None
    if topic is None:
        return Owner(kind, name or "(no managed ledger named)", component="data")
    return topic_owner(kind, topic, "cursor" if CURSOR_KEY in custom else "data")


def at_level(owner: Owner, level: str | None, shared: dict) -> Owner:
    """The owner a report by ``level`` (tenant, namespace) keeps: one object for each of its groups."""
    if level not in ("tenant", "namespace") or owner.tenant is None:
        return owner
    kind, name, _c = owner.group(level)
    return shared.setdefault((kind, name, owner.namespace), Owner(kind, name, owner.tenant, owner.namespace))


def listed_owners(topics, level: str | None = None) -> dict[int, Owner]:
    """ledger id -> its topic (at ``level``), for every data and cursor ledger the managed ledgers list."""
    owners: dict[int, Owner] = {}
    shared: dict = {}
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


def packed_entry_bytes(md) -> int:
    """What the client packs around each payload: the entry header and the digest."""
    from bkctl.wire.codecs.digest import DIGEST_LENGTH, DigestType
    from bkctl.wire.codecs.protocol import ENTRY_HEADER_LENGTH

    return ENTRY_HEADER_LENGTH + DIGEST_LENGTH[md.digest_type or DigestType.CRC32]


def copies_by_bookie(md, last_entry_id: int, length: int) -> dict[str, tuple[int, int]]:
    """bookie -> (entries held, bytes packed: payloads at the mean of ``length`` over 0..``last_entry_id``, headers)."""
    from bkctl.wire.client.fragments import entries_by_bookie

    count = last_entry_id + 1
    if count <= 0:
        return {}
    per_entry = length / count + packed_entry_bytes(md)
    return {
        bookie: (held, int(round(held * per_entry))) for bookie, held in entries_by_bookie(md, last_entry_id).items()
    }


async def _last_entries(client, ledgers: list[tuple[int, tuple[str, ...]]], window: int) -> dict:
    """ledger id -> (last entry id, length) by READ_ENTRY -1 on its last ensemble (the highest), or why none answered."""
    from twisted.internet import defer

    from bkctl.wire.client.errors import NoSuchEntry, NoSuchLedgerOnBookie
    from bkctl.wire.codecs.digest import ENTRY_HEADER, entry_header

    limit = defer.DeferredSemaphore(window)
    out: dict[int, Any] = {}

    def ask(ledger_id: int, bookie: str):
        return defer.maybeDeferred(client.pool.get(bookie).read, ledger_id, -1)

    def one(ledger_id: int, bookies: tuple[str, ...]):
        d = defer.DeferredList([ask(ledger_id, b) for b in bookies], consumeErrors=True)

        def done(results):
            best, why, empty = None, None, False
            for ok, value in results:
                if ok and len(value) >= ENTRY_HEADER.size:
                    _lid, entry_id, _lac, length = entry_header(value)
                    if best is None or entry_id > best[0]:
                        best = (entry_id, length)
                elif not ok and value.check(NoSuchLedgerOnBookie, NoSuchEntry):
                    empty = True  # nothing written there yet (a Java bookie knows no ledger before its first entry)
                elif not ok:
                    why = why or str(client.explain(value.value))
            if best is None and empty and why is None:
                best = (-1, 0)  # every bookie of the last ensemble answered, none holds an entry
            out[ledger_id] = best if best is not None else (why or "no entry")

        return d.addCallback(done)

    await defer.DeferredList([limit.run(one, lid, bookies) for lid, bookies in ledgers])
    return out


# ---------------------------------------------------------------- the walk


class Tally:
    """Per (bookie, owner) ``[ledgers, entries, bytes, estimated (open ledgers') entries, bytes]``; ``logical``."""

    def __init__(self, level: str | None = None):
        self.cells: dict[tuple[str, Owner], list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
        self.logical: dict[Owner, list[int]] = defaultdict(lambda: [0, 0, 0])  # ledgers, length, open ledgers
        self.level, self.shared = level, {}  # tenant, namespace: by group (100,000 topics made 300,000 cells)

    def add(self, owner: Owner, copies: dict[str, tuple[int, int]], length: int, estimate: bool) -> None:
        owner = at_level(owner, self.level, self.shared)
        self.logical[owner] = [a + b for a, b in zip(self.logical[owner], (1, length, int(estimate)))]
        for bookie, (entries, nbytes) in copies.items():
            more = (1, entries, nbytes, entries * estimate, nbytes * estimate)
            self.cells[(bookie, owner)] = [a + b for a, b in zip(self.cells[(bookie, owner)], more)]


class _SweptStore:
    """The store as the orphan sweep sees it, each ledger it reads handed to ``on_ledger`` too: one walk for both."""

    def __init__(self, store, on_ledger: Callable):
        self._store = store
        self.ledgers = _SweptLedgers(store.ledgers, on_ledger)

    def __getattr__(self, name):
        return getattr(self._store, name)


class _SweptLedgers:
    def __init__(self, ledgers, on_ledger: Callable):
        self._ledgers = ledgers
        self._on_ledger = on_ledger

    def walk(self, **options):
        for item in self._ledgers.walk(**options):
            self._on_ledger(*item)
            yield item

    def __getattr__(self, name):
        return getattr(self._ledgers, name)


@dataclass
class Walk:
    tally: Tally
    orphans: Any  # the OrphanSweep, for its counts
    orphan_ids: list[int]
    ledgers: int
    unreadable: int
    open_estimated: int
    open_unknown: dict[int, str]


def walk_ledgers(
    store,
    bk: Callable[[], Any] | None,
    base: str | None = None,
    older_than: float = 3600.0,
    now_ms: int | None = None,
    window: int = 256,
    progress=None,
    level: str | None = None,
) -> Walk:
    """Every ledger's copies on its bookies, by owner (counted at ``level``: :class:`Tally`).
    ``bk()`` (a BlockingBookKeeper, made on first use; None: never ask the bookies) reads open
    ledgers' lengths; ``progress`` hears of the walk over every ledger's metadata."""
    from .pulsar import OrphanSweep, reader

    from bkctl.wire.text import custom_metadata_text as decode_custom_metadata

    owners = listed_owners(reader(store, base), level)
    tally = Tally(level)
    # streamed: open ledgers read a chunk at a time as found; an unlisted one waits, as (naming, copies), for the sweep
    open_chunk: list[tuple[int, Any, Owner | None, dict[str, str]]] = []
    pending: dict[int, tuple[tuple, tuple, int, bool]] = {}  # id -> naming, copies, length, estimated
    shared: dict[Any, Any] = {}  # one object for each bookie id and naming that recurs
    orphaned: set[int] = set()
    unknown: dict[int, str] = {}
    counts = {"ledgers": 0, "unreadable": 0, "estimated": 0}

    def hold(ledger_id: int, naming: dict[str, str], copies: dict, length: int, estimate: bool = False) -> None:
        key = tuple(sorted(naming.items()))
        packed = tuple((shared.setdefault(b, b), n, size) for b, (n, size) in copies.items())
        pending[ledger_id] = (shared.setdefault(key, key), packed, length, estimate)

    def settle_open() -> None:
        """Read the chunk of open ledgers' ends from their bookies; tally them (or hold them)."""
        chunk, open_chunk[:] = list(open_chunk), []
        ends: dict[int, Any] = {}
        if bk is not None and chunk:
            try:
                ends = bk().run(_last_entries, [(lid, tuple(md.last_ensemble)) for lid, md, _o, _c in chunk], window)
            except Exception as e:  # noqa: BLE001 - the closed ledgers are still worth showing
                ends = {lid: str(e) or type(e).__name__ for lid, _md, _o, _c in chunk}
        for ledger_id, md, owner, naming in chunk:
            end = ends.get(ledger_id, "the bookies were not asked")
            if not isinstance(end, tuple):  # the reasons of a few kept (each names its ledger), all counted
                unknown[ledger_id] = end if len(unknown) < UNKNOWN_KEPT else ""
                continue
            counts["estimated"] += 1
            copies, length = copies_by_bookie(md, *end), end[1]
            if owner is None:
                hold(ledger_id, naming, copies, length, True)
            else:
                tally.add(owner, copies, length, True)

    def on_ledger(ledger_id, md, _version):
        if md is None:
            return  # deleted meanwhile
        if isinstance(md, Exception):
            counts["unreadable"] += 1
            return
        counts["ledgers"] += 1
        custom = decode_custom_metadata(md.custom_metadata)
        owner = owners.get(ledger_id) or owner_by_metadata(custom)
        if not md.is_closed:
            open_chunk.append((ledger_id, md, owner, managed_ledger_naming(custom)))
            if len(open_chunk) >= OPEN_LEDGERS_A_STEP:
                settle_open()
        elif owner is None:
            hold(ledger_id, managed_ledger_naming(custom), copies_by_bookie(md, md.last_entry_id, md.length), md.length)
        else:
            tally.add(owner, copies_by_bookie(md, md.last_entry_id, md.length), md.length, False)

    def judge(upto: int | None) -> None:
        """Tally the held ledgers the sweep judged: up to ``upto`` (its orphans come in id order), or all."""
        for ledger_id in [lid for lid in pending if upto is None or lid <= upto]:
            key, packed, length, estimate = pending.pop(ledger_id)
            owner = managed_ledger_owner("orphan" if ledger_id in orphaned else "unlisted", dict(key))
            tally.add(owner, {b: (n, size) for b, n, size in packed}, length, estimate)

    swept = _SweptStore(store, on_ledger)
    sweep = OrphanSweep(swept, base, older_than=older_than, now_ms=now_ms, progress=progress, listed=owners)
    for doc in sweep:
        orphaned.add(doc["ledger_id"])
        if len(pending) >= OPEN_LEDGERS_A_STEP:
            judge(doc["ledger_id"])
    settle_open()
    judge(None)
    return Walk(tally, sweep, sorted(orphaned), counts["ledgers"], counts["unreadable"], counts["estimated"], unknown)


# ---------------------------------------------------------------- the bookie's side


def thresholds(reading: BookieReading) -> tuple[float, float, bool]:
    """(minor, major, reported): the bookie's compaction thresholds, else the defaults."""
    gc = reading.gc or {}
    minor, major = gc.get("minorCompactionThreshold"), gc.get("majorCompactionThreshold")
    if isinstance(minor, (int, float)) and isinstance(major, (int, float)):
        return float(minor), float(major), True
    return DEFAULT_THRESHOLDS[0], DEFAULT_THRESHOLDS[1], False


def entry_log_classes(logs: list[dict], minor: float, major: float) -> dict:
    """The entry logs' bytes, live bytes and dead bytes, the dead split by what will reclaim
    them: the log being written (``active``: once it rolls over), logs under the minor
    threshold (the next minor compaction), under the major one (a major compaction), over it
    (no compaction).  The active log is the one a bookie marks ``active``, else the newest
    of each ledger directory (``active_assumed``)."""
    marked = any("active" in log for log in logs)
    newest: dict[Any, int] = {}
    for log in logs:
        d = log.get("ledgerDirectory")
        newest[d] = max(newest.get(d, -1), int(log.get("logId", -1)))
    out = {
        "entry_logs": len(logs),
        "entry_log_bytes": 0,
        "entry_log_live_bytes": 0,
        "dead_bytes": 0,
        "active_log_dead_bytes": 0,
        "below_minor_dead_bytes": 0,
        "below_major_dead_bytes": 0,
        "above_major_dead_bytes": 0,
        "lowest_live_ratio": None,
        "active_assumed": not marked,
    }
    for log in logs:
        size, live = int(log.get("sizeBytes", 0)), int(log.get("liveBytes", 0))
        ratio = float(log.get("liveRatio", live / size if size else 0.0))
        dead = max(0, size - live)
        out["entry_log_bytes"] += size
        out["entry_log_live_bytes"] += live
        out["dead_bytes"] += dead
        active = bool(log.get("active")) if marked else int(log.get("logId", -1)) == newest[log.get("ledgerDirectory")]
        if active:
            out["active_log_dead_bytes"] += dead
            continue
        if out["lowest_live_ratio"] is None or ratio < out["lowest_live_ratio"]:
            out["lowest_live_ratio"] = ratio
        key = (
            "below_minor"
            if minor > 0 and ratio < minor
            else "below_major"
            if major > 0 and ratio < major
            else "above_major"
        )
        out[f"{key}_dead_bytes"] += dead
    return out


def journal_bytes(reading: BookieReading) -> int | None:
    """The journal's bytes, when the bookie reports them (bookied's ``info`` ``journalBytes``)."""
    return _info_int(reading, "journalBytes")


def index_bytes(reading: BookieReading) -> int | None:
    """The index's bytes, when the bookie reports them (bookied's ``info`` ``indexBytes``)."""
    return _info_int(reading, "indexBytes")


def _info_int(reading: BookieReading, key: str) -> int | None:
    value = (reading.info or {}).get(key)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def compaction_policy(reading: BookieReading) -> dict | None:
    """The compaction settings the bookie reports (bookied's gc status): intervals (s),
    forceAllowCompaction, and why a forced pass runs no major or minor compaction
    (``refused``); None when it reports none (Java's)."""
    gc = reading.gc or {}
    if "forcedCompactionRefused" not in gc:
        return None
    refused = gc.get("forcedCompactionRefused") or {}
    return {
        "minor_interval": gc.get("minorCompactionInterval"),
        "major_interval": gc.get("majorCompactionInterval"),
        "force_allow": gc.get("forceAllowCompaction"),
        "refused": {"major": refused.get("major"), "minor": refused.get("minor")},
    }


#: Owner.kind -> the bookie's ``live`` bucket
_LIVE_BUCKET = {
    "topic": "topics",
    "pulsar": "topics",
    "application": "applications",
    "orphan": "orphans",
    "unlisted": "unlisted",
}


def bookie_doc(reading: BookieReading, walk: Walk, by: str) -> dict:
    """One bookie's space, attributed."""
    kind = reading.kind
    framing = RECORD_FRAMING.get(kind or "java", 4)
    live = {"topics": 0, "applications": 0, "orphans": 0, "unlisted": 0}
    estimated = 0
    groups: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for (bookie, owner), (ledgers, entries, nbytes, est_entries, est_bytes) in walk.tally.cells.items():
        if bookie != reading.bookie_id:
            continue
        stored = nbytes + entries * framing
        bucket = _LIVE_BUCKET[owner.kind]
        live[bucket] += stored
        est = est_bytes + est_entries * framing
        estimated += est
        g = groups[owner.group(by)]
        g[0] += ledgers
        g[1] += stored
        g[2] += est
    live_total = sum(live.values())
    minor, major, reported = thresholds(reading)
    doc: dict[str, Any] = {
        "bookie_id": reading.bookie_id,
        "state": reading.state,
        "http": reading.http,
        "kind": kind,
        "total_bytes": reading.total_bytes,
        "free_bytes": reading.free_bytes,
        "used_bytes": reading.used_bytes,
        "live_bytes": live_total,
        "live": live,
        "estimated_bytes": estimated,
        "journal_bytes": journal_bytes(reading),
        "index_bytes": index_bytes(reading),
        "read_only_reasons": reading.read_only_reasons,
        "minor_threshold": minor,
        "major_threshold": major,
        "thresholds_reported": reported,
        "compaction_policy": compaction_policy(reading),
        "gc": _gc_summary(reading),
        "unread": dict(reading.unread),
        "groups": [
            {
                "kind": k,
                "name": n,
                "component": c or None,
                "ledgers": g[0],
                "stored_bytes": g[1],
                "estimated_bytes": g[2],
            }
            for (k, n, c), g in sorted(groups.items(), key=lambda kv: -kv[1][1])
        ],
    }
    logs = reading.entry_logs
    if logs is None:
        if reading.kind is not None and "gc_details" not in doc["unread"]:
            doc["unread"]["entry logs"] = "the bookie's gc_details has no entry-log figures (a Java bookie?)"
        doc.update(
            {
                "entry_logs": None,
                "entry_log_bytes": None,
                "awaiting_gc_bytes": None,
                "not_in_entry_logs_bytes": None,
                "compaction": None,
                # the filesystem's used space is not the bookie's: other data and, on one host, other
                # bookies share it, and Java's HTTP admin sizes none of the bookie's own files
                "data_bytes": None,
            }
        )
    else:
        classes = entry_log_classes(logs, minor, major)
        rest = classes["entry_log_live_bytes"] - live_total
        data = classes["entry_log_bytes"] + (doc["journal_bytes"] or 0) + (doc["index_bytes"] or 0)
        doc.update(
            {
                "entry_logs": classes["entry_logs"],
                "entry_log_bytes": classes["entry_log_bytes"],
                "awaiting_gc_bytes": max(0, rest),
                "not_in_entry_logs_bytes": max(0, -rest),
                "compaction": classes,
                "data_bytes": data,
            }
        )
    if doc["journal_bytes"] is None and reading.kind is not None:
        doc["unread"].setdefault("journal", "the bookie's HTTP admin does not report the journal's size")
    if doc["index_bytes"] is None and reading.kind is not None:
        doc["unread"].setdefault("index", "the bookie's HTTP admin does not report the index's size")
    used = reading.used_bytes
    doc["other_files_bytes"] = None if used is None or logs is None else max(0, used - doc["data_bytes"])
    return doc


def _gc_summary(reading: BookieReading) -> dict | None:
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


def disk_report(
    store,
    bk: Callable[[], Any] | None,
    bookie: str | None = None,
    by: str = "bookie",
    base: str | None = None,
    older_than: float = 3600.0,
    now_ms: int | None = None,
    timeout: float = 5.0,
    progress=None,
) -> dict:
    """Every bookie's (or one's) space, attributed; cluster totals; groups at ``by``; the one-line answer
    (``progress``: the ledger walk's, a ``WalkProgress``)."""
    from .bookies import list_bookies

    rows = list_bookies(store, "all")
    if bookie is not None:
        rows = [r for r in rows if r["bookie_id"] == bookie]
        if not rows:  # as `bookie gc` says of a bookie it cannot find: exit 3, not an empty table
            from ..exitcodes import NOT_FOUND, CommandError

            raise CommandError(f"no such bookie: {bookie} (neither registered nor with a cookie)", NOT_FOUND)
    level = by if by != "bookie" else "namespace"
    walk = walk_ledgers(store, bk, base, older_than, now_ms, progress=progress, level=level)
    readings = read_bookies(store, rows, (INFO, GC, GC_DETAILS), timeout)
    bookies = [bookie_doc(r, walk, level) for r in readings]
    groups: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for owner, (ledgers, length, opened) in walk.tally.logical.items():
        g = groups[owner.group(level)]
        g[0] += ledgers
        g[1] += length
        g[2] += opened
    for b in bookies:
        for g in b["groups"]:
            groups[(g["kind"], g["name"], g["component"] or "")][3] += g["stored_bytes"]
    doc = {
        "by": by,
        "bookies": bookies,
        "groups": [
            {
                "kind": k,
                "name": n,
                "component": c or None,
                "ledgers": g[0],
                "length_bytes": g[1],
                "open_ledgers": g[2],
                "stored_bytes": g[3],
            }
            for (k, n, c), g in sorted(groups.items(), key=lambda kv: (-kv[1][3], kv[0]))
        ],
        "totals": totals(bookies),
        "ledgers": {
            "walked": walk.ledgers,
            "unreadable": walk.unreadable,
            "open_estimated": walk.open_estimated,
            "open_unknown": len(walk.open_unknown),
            "open_unknown_why": sorted(set(walk.open_unknown.values()) - {""})[:3],
        },
        "orphans": {
            "ledgers": len(walk.orphan_ids),
            "older_than": older_than,
            "young": walk.orphans.young,
            "other_components": walk.orphans.unchecked,
        },
    }
    doc["summary"] = summary_line(doc)
    return doc


_SUMMED = (
    "total_bytes",
    "used_bytes",
    "data_bytes",
    "live_bytes",
    "estimated_bytes",
    "entry_log_bytes",
    "awaiting_gc_bytes",
    "not_in_entry_logs_bytes",
    "journal_bytes",
    "index_bytes",
)


def totals(bookies: list[dict]) -> dict:
    out: dict[str, Any] = {k: sum(b[k] or 0 for b in bookies) for k in _SUMMED}
    out["live"] = {k: sum(b["live"][k] for b in bookies) for k in ("topics", "applications", "orphans", "unlisted")}
    out["answered"] = sum(1 for b in bookies if b["kind"] is not None)
    unsized = [b for b in bookies if b["kind"] is not None and b["data_bytes"] is None]
    out["unsized_bookies"] = len(unsized)
    out["unsized_live_bytes"] = sum(b["live_bytes"] - b["live"]["orphans"] for b in unsized)
    for key in (
        "dead_bytes",
        "active_log_dead_bytes",
        "below_minor_dead_bytes",
        "below_major_dead_bytes",
        "above_major_dead_bytes",
    ):
        out[key] = sum((b["compaction"] or {}).get(key, 0) for b in bookies)
    return out


def _holding(bookies: list[dict], key: str) -> str:
    """The bookies with bytes of ``key``: one named, several counted."""
    ids = [b["bookie_id"] for b in bookies if (b["compaction"] or {}).get(key)]
    return ids[0] if len(ids) == 1 else "BOOKIE"


def compaction_advice(doc: dict) -> str:
    """What reclaims the largest share of the dead bytes, and how to get it now -- as the bookie's
    own settings allow: a kind of compaction that is not periodic (interval 0) is only run by a
    forced pass, which forceAllowCompaction=false refuses; then the advice says what to change."""
    from ..render import human_size

    t, bookies = doc["totals"], doc["bookies"]
    b = bookies[0] if bookies else {}
    minor, major = b.get("minor_threshold", DEFAULT_THRESHOLDS[0]), b.get("major_threshold", DEFAULT_THRESHOLDS[1])
    assumed = "" if all(x.get("thresholds_reported") for x in bookies if x["compaction"]) else ", the default"
    policy = b.get("compaction_policy") or {}

    def cure(kind: str, key: str) -> str:
        gc = f"`bkctl bookie gc {_holding(bookies, key)} --{kind}`"
        refused = (policy.get("refused") or {}).get(kind)
        if refused:
            return (
                f"no compaction takes it: {refused}; set forceAllowCompaction=true (then {gc}) or a "
                f"{kind}CompactionInterval"
            )
        if policy and not policy.get(f"{kind}_interval"):
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
    ranked = sorted(parts, key=lambda k: -t[k])
    text = parts[ranked[0]]
    others = [
        f"{human_size(t[k])} {short}"
        for k, short in (
            ("below_minor_dead_bytes", "under the minor threshold"),
            ("below_major_dead_bytes", "for a major compaction"),
            ("above_major_dead_bytes", "over the major threshold"),
            ("active_log_dead_bytes", "in the active log"),
        )
        if k != ranked[0] and t[k]
    ]
    return text + ("; " + ", ".join(others) if others else "")


def read_only_text(doc: dict) -> str | None:
    """The read-only bookies and why, as each says; how much of its filesystem is not bookie data."""
    from ..render import human_size

    parts = []
    for b in doc["bookies"]:
        if b["state"] != "read-only":
            continue
        reasons = b.get("read_only_reasons")
        why = (
            "; ".join(reasons.values())
            if reasons
            else (
                "its HTTP admin does not say why (a Java bookie? its log does)"
                if b["kind"]
                else "its HTTP admin does not answer"
            )
        )
        if b.get("other_files_bytes") is not None and b.get("used_bytes"):
            why += (
                f"; {human_size(b['other_files_bytes'])} of the {human_size(b['used_bytes'])} used on its "
                "filesystem is not bookie data"
            )
        journal = b.get("journal_bytes") or 0
        if b.get("used_bytes") and journal * 4 >= b["used_bytes"]:
            why += f"; its journal holds {human_size(journal)}: {JOURNAL_WAY_OUT}"
        parts.append(f"{b['bookie_id']} ({why})")
    return f"read-only: {', '.join(parts)}" if parts else None


def summary_line(doc: dict) -> str:
    """The one-line answer: how much is live, waiting for compaction or GC, orphaned."""
    from ..render import human_size, plural

    t = doc["totals"]
    read_only = read_only_text(doc)
    if not t["answered"]:
        return "; ".join(filter(None, [read_only, "no bookie answered on its HTTP admin: nothing to attribute"]))
    live = t["live"]["topics"] + t["live"]["applications"] + t["live"]["unlisted"] - t["unsized_live_bytes"]
    parts = [read_only] if read_only else []
    if t["answered"] > t["unsized_bookies"]:
        parts.append(f"{human_size(live)} of {human_size(t['data_bytes'])} used is live data")
    if t["unsized_bookies"]:
        parts.append(
            f"{human_size(t['unsized_live_bytes'])} is live data on {plural(t['unsized_bookies'], 'bookie')} "
            "whose HTTP admin sizes none of its files (Java's: only the filesystem's free and total "
            "space, shared with other data; `du` its ledger and journal directories)"
        )
    if t["dead_bytes"]:
        parts.append(f"{human_size(t['dead_bytes'])} is waiting for compaction ({compaction_advice(doc)})")
    if t["awaiting_gc_bytes"]:
        parts.append(
            f"{human_size(t['awaiting_gc_bytes'])} is deleted ledgers the next GC pass removes "
            "(now: `bkctl bookie gc BOOKIE`)"
        )
    if t["live"]["orphans"]:
        parts.append(f"{human_size(t['live']['orphans'])} is orphans (list: `bkctl pulsar orphans`)")
    return "; ".join(parts)
