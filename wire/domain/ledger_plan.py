"""Which entries of which ledgers a read of many ledgers takes: ledger specs, time filters,
ledger plans and the entry ranges they are cut into (one task each).

Everything here is plain Python (no Spark, no Twisted, no click), so it runs in the bkctl
process, in Spark's planning worker and in unit tests alike; ``bkctl export`` (and
``bkctl backup``, which resolves the same specs) orchestrate the reading.

* :func:`parse_ledger_spec` turns ``"1,2,5-9"`` or ``"all"`` into a
  :class:`LedgerSpec`.
* :func:`parse_ctime` turns ``--since``/``--until`` values (ISO dates and
  times, epoch milliseconds, or ages such as ``7d``) into epoch milliseconds.
* :func:`plan_ledgers` reads ledger metadata through a metadata store and
  decides, per ledger, which entries an export reads: ``0..last entry`` of a
  closed ledger, ``0..LAC`` of an open one (only with ``include_open``).
* :func:`split_ranges` cuts those plans into :class:`EntryRange` pieces of
  at most ``split_entries`` entries: one Spark task each.
"""

from __future__ import annotations

import bisect
import datetime as _dt
import heapq
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeVar

from ..errors import NotFound
from ..text import custom_metadata_text
from .entry_source import EntrySource

if TYPE_CHECKING:
    from ..metadata.store import LedgerRead, MetadataStore, StoredLedgerRead
    from ..pulsar.offload_store import OffloadLocation

__all__ = [
    "DEFAULT_SPLIT_ENTRIES",
    "READ_BATCH",
    "SPLIT_BYTES",
    "EntryRange",
    "LedgerPlan",
    "LedgerPlanning",
    "LedgerSpec",
    "NoSuchLedgers",
    "OffloadedCopy",
    "SpecError",
    "parse_ctime",
    "parse_ledger_spec",
    "plan_ledgers",
    "plans_from_json",
    "plans_to_json",
    "ResolvedSpec",
    "SkippedLedger",
    "resolve_spec",
    "resolve_spec_read",
    "split_ranges",
    "task_entries",
]

#: Entries per Spark task (a larger ledger is split into several tasks).
DEFAULT_SPLIT_ENTRIES = 100_000
#: A topic's ledger whose size is known is read by tasks of about this many bytes (Spark's own
#: ``maxPartitionBytes``), so that a large ledger keeps every core busy (:func:`task_entries`).
SPLIT_BYTES = 128 << 20
#: A range spanning at most this many ids is resolved by probing each id;
#: wider ones walk the ledger tree once.
_PROBE_LIMIT = 4096
#: Ledgers listed (``all``, a wide range) that a plan reads a request of the store (one
#: pipelined read): the most of their metadata it holds at once, however many there are.
READ_BATCH = 4096


class SpecError(ValueError):
    """A ledger spec, time filter or option value that cannot be understood."""


class NoSuchLedgers(NotFound):
    """Ledgers named in the spec do not exist (exit code 3 at the CLI)."""

    def __init__(self, missing: Iterable[str]) -> None:
        self.missing = list(missing)
        shown = ", ".join(self.missing[:10])
        if len(self.missing) > 10:
            shown += f" and {len(self.missing) - 10} more"
        what = "ledger" if len(self.missing) == 1 else "ledgers"
        super().__init__(f"no such {what}: {shown}")


# ---------------------------------------------------------------- ledger specs


@dataclass(frozen=True)
class LedgerSpec:
    """Which ledgers to export: every ledger, or single ids and inclusive ranges.

    A single id must exist; a range selects the ledgers that exist inside it
    and must match at least one.
    """

    all: bool = False
    ids: tuple[int, ...] = ()
    ranges: tuple[tuple[int, int], ...] = ()

    def __str__(self) -> str:
        if self.all:
            return "all"
        parts = [str(i) for i in self.ids] + [f"{lo}-{hi}" for lo, hi in self.ranges]
        return ",".join(parts)

    def contains(self, ledger_id: int) -> bool:
        if self.all:
            return True
        return ledger_id in self.ids or any(lo <= ledger_id <= hi for lo, hi in self.ranges)


def parse_ledger_spec(spec: str) -> LedgerSpec:
    """``"all"`` or a comma-separated list of ids and ``lo-hi`` ranges
    (``"1,2,5-9"``).  Whitespace is ignored; duplicates and overlaps are fine."""
    if spec is None:
        raise SpecError("no ledger spec given")
    text = spec.strip()
    if not text:
        raise SpecError("empty ledger spec")
    if text.lower() == "all":
        return LedgerSpec(all=True)
    ids: set[int] = set()
    ranges: list[tuple[int, int]] = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            raise SpecError(f"empty item in ledger spec {spec!r}")
        m = re.fullmatch(r"(\d+)\s*-\s*(\d+)", item)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if lo > hi:
                raise SpecError(f"bad ledger range {item!r} in {spec!r}: {lo} > {hi}")
            if lo == hi:
                ids.add(lo)
            else:
                ranges.append((lo, hi))
            continue
        if re.fullmatch(r"\d+", item):
            ids.add(int(item))
            continue
        raise SpecError(f"bad ledger spec item {item!r} in {spec!r} (want ids like 7 or ranges like 5-9)")
    # merge overlapping or touching ranges
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    singles = tuple(sorted(i for i in ids if not any(lo <= i <= hi for lo, hi in merged)))
    for i in singles:
        _check_ledger_id(i)
    for _, hi in merged:
        _check_ledger_id(hi)
    return LedgerSpec(ids=singles, ranges=tuple(merged))


def _check_ledger_id(ledger_id: int) -> None:
    if ledger_id >= 1 << 63:
        raise SpecError(f"ledger id {ledger_id} is out of range (ids are 63-bit)")


class ResolvedSpec(NamedTuple):
    """The ledgers a spec selects (``ids``, ascending) and the znodes its probe read of them
    (``reads``, by id: the ids named and those of narrow ranges; none for ``all`` or a wide
    range, which list the ids without reading them) -- for a caller that reads them next
    (``bkctl backup``'s walk), so that each is read once."""

    ids: list[int]
    reads: dict[int, StoredLedgerRead]


class _Read(Protocol):
    @property
    def ledger_id(self) -> int: ...

    @property
    def metadata(self) -> object: ...


_R = TypeVar("_R", bound=_Read)


def resolve_spec(store: MetadataStore, spec: LedgerSpec) -> list[int]:
    """The existing ledger ids the spec selects, ascending.

    Raises :class:`NoSuchLedgers` naming every single id that does not exist
    and every range that matches none.
    """
    ids, _ = _resolve(store, spec, store.ledgers.read_many)
    return ids


def resolve_spec_read(store: MetadataStore, spec: LedgerSpec) -> ResolvedSpec:
    """:func:`resolve_spec`, with the znodes its probe read as stored (:class:`ResolvedSpec`)."""
    ids, reads = _resolve(store, spec, store.ledgers.read_many_stored)
    return ResolvedSpec(ids, reads)


def _resolve(
    store: MetadataStore, spec: LedgerSpec, read_many: Callable[[list[int]], Iterable[_R]]
) -> tuple[list[int], dict[int, _R]]:
    if spec.all:
        return sorted(store.ledgers.ids()), {}
    probe = _probe(store, spec, read_many)
    missing = [str(i) for i in spec.ids if i not in probe.present] + probe.empty_ranges(spec)
    if missing:
        raise NoSuchLedgers(missing)
    return sorted({*probe.present, *probe.listed}), probe.present


@dataclass
class _Probe(Generic[_R]):
    """What a spec's probe found: the znodes of the ids named and of those of narrow ranges, read
    in one pipelined read (``present``: those there, by id), and the ids of wide ranges, listed
    once and not read (``listed``, ascending)."""

    present: dict[int, _R]
    listed: list[int]

    def empty_ranges(self, spec: LedgerSpec) -> list[str]:
        """The spec's ranges that hold no ledger, as :class:`NoSuchLedgers` names them."""
        if not spec.ranges:
            return []
        hits = sorted([*self.present, *self.listed])
        empty = []
        for lo, hi in spec.ranges:
            at = bisect.bisect_left(hits, lo)
            if at == len(hits) or hits[at] > hi:
                empty.append(f"{lo}-{hi} (no ledger in that range)")
        return empty


def _probe(store: MetadataStore, spec: LedgerSpec, read_many: Callable[[list[int]], Iterable[_R]]) -> _Probe[_R]:
    # the ids named and those of narrow ranges looked up in one pipelined read, not a
    # round trip each (a backup of 4,000 named ledgers waited 4,000 of them before its walk)
    span = sum(hi - lo + 1 for lo, hi in spec.ranges)
    narrow = span <= _PROBE_LIMIT
    probed = [i for lo, hi in spec.ranges for i in range(lo, hi + 1)] if narrow else []
    probe = [*spec.ids, *probed]
    present = {r.ledger_id: r for r in read_many(probe) if r.metadata is not None} if probe else {}
    listed = [] if narrow else [i for i in store.ledgers.ids() if any(lo <= i <= hi for lo, hi in spec.ranges)]
    return _Probe(present, listed)


# ---------------------------------------------------------------- time filters

_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])", re.IGNORECASE)
_AGE_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_ctime(text: str, now_ms: int | None = None) -> int:
    """Epoch milliseconds for a ``--since``/``--until`` value.

    Accepts an ISO-8601 date (``2026-11-21``: midnight UTC) or date and time
    (``2026-11-21T10:00:00``, UTC unless it carries an offset or ``Z``), an
    integer of epoch milliseconds, or an age back from now (``90s``, ``15m``,
    ``12h``, ``7d``, ``2w``).
    """
    value = str(text).strip()
    if not value:
        raise SpecError("empty time")
    if re.fullmatch(r"\d{9,}", value):
        return int(value)
    m = _AGE.fullmatch(value)
    if m:
        if now_ms is None:
            import time

            now_ms = int(time.time() * 1000)
        return now_ms - int(float(m.group(1)) * _AGE_SECONDS[m.group(2).lower()] * 1000)
    iso = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", iso):
            moment = _dt.datetime.combine(_dt.date.fromisoformat(iso), _dt.time(), _dt.UTC)
        else:
            moment = _dt.datetime.fromisoformat(iso)
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=_dt.UTC)
    except ValueError:
        raise SpecError(
            f"bad time {text!r}: want an ISO date/time (2026-11-21, 2026-11-21T10:00Z), "
            "epoch milliseconds, or an age such as 7d"
        ) from None
    return int(moment.timestamp() * 1000)


# ---------------------------------------------------------------- plans


@dataclass(frozen=True)
class LedgerPlan:
    """One ledger of an export: entries ``first..last`` (none when last < first)."""

    ledger_id: int
    state: str
    ctime_ms: int | None
    metadata: dict[str, str] = field(default_factory=dict, compare=False)
    first: int = 0
    last: int = -1
    #: payload bytes of the whole ledger when the metadata says (closed ledgers)
    length: int | None = None
    segments: int = 1
    #: read from its offloaded copy (:class:`~bkctl.wire.pulsar.offload_store.OffloadLocation`), not the bookies
    offload: Any = field(default=None, compare=False)

    @property
    def entries(self) -> int:
        return max(0, self.last - self.first + 1)

    def to_json(self) -> dict[str, Any]:
        return {
            "ledger_id": self.ledger_id,
            "state": self.state,
            "ctime_ms": self.ctime_ms,
            "metadata": dict(self.metadata),
            "first": self.first,
            "last": self.last,
            "length": self.length,
            "segments": self.segments,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> LedgerPlan:
        try:
            return cls(
                ledger_id=int(doc["ledger_id"]),
                state=str(doc.get("state", "CLOSED")),
                ctime_ms=None if doc.get("ctime_ms") is None else int(doc["ctime_ms"]),
                metadata={str(k): str(v) for k, v in (doc.get("metadata") or {}).items()},
                first=int(doc.get("first", 0)),
                last=int(doc["last"]),
                length=None if doc.get("length") is None else int(doc["length"]),
                segments=int(doc.get("segments", 1)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SpecError(f"bad ledger plan {doc!r}: {exc}") from None


@dataclass(frozen=True)
class EntryRange:
    """Entries ``first..last`` (inclusive) of one ledger: the work of one Spark task."""

    ledger_id: int
    first: int
    last: int
    ctime_ms: int | None
    state: str
    metadata: dict[str, str] = field(default_factory=dict, compare=False)
    #: the ledger's offloaded copy the task reads instead of the bookies (None: the bookies)
    offload: Any = field(default=None, compare=False)

    @property
    def entries(self) -> int:
        return self.last - self.first + 1

    @property
    def source(self) -> EntrySource:
        """Where the task's entries are read (the plan's choice)."""
        return EntrySource(self.ledger_id, self.offload)


def plans_to_json(plans: Iterable[LedgerPlan]) -> str:
    import json

    return json.dumps([p.to_json() for p in plans], separators=(",", ":"), sort_keys=True)


def plans_from_json(text: str) -> list[LedgerPlan]:
    import json

    try:
        docs = json.loads(text)
    except ValueError as exc:
        raise SpecError(f"the plan option is not JSON: {exc}") from None
    if not isinstance(docs, list):
        raise SpecError("the plan option must be a JSON list of ledger plans")
    return [LedgerPlan.from_json(d) for d in docs]


@dataclass(frozen=True)
class SkippedLedger:
    """A ledger the spec selects that the plan leaves out, and why (``reason``, as the
    manifest and ``--json`` tell it); ``topic``: the topic whose managed ledger lists it,
    in a topic export's plan (:class:`~.topic_plan.TopicPlan`), None in a ledger export's."""

    ledger_id: int
    reason: str
    topic: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The manifest's document of it: ``{"ledger_id", "reason"}``, and ``"topic"`` when
        it has one."""
        if self.topic is None:
            return {"ledger_id": self.ledger_id, "reason": self.reason}
        return {"ledger_id": self.ledger_id, "topic": self.topic, "reason": self.reason}


@dataclass(frozen=True)
class OffloadedCopy:
    """A ledger BookKeeper no longer has that a Pulsar managed ledger offloaded whole: where its
    copy is (the plan reads it there) and its last entry id, as the copy's index says."""

    location: OffloadLocation
    last: int


@dataclass(frozen=True)
class LedgerPlanning:
    """What :func:`plan_ledgers` planned: ``plans`` in ledger id order (empty ledgers included,
    with ``last = -1``) and the ledgers it left out (``skipped``, in id order)."""

    plans: list[LedgerPlan]
    skipped: list[SkippedLedger]


def plan_ledgers(
    store: MetadataStore,
    spec: LedgerSpec,
    *,
    include_open: bool = False,
    since_ms: int | None = None,
    until_ms: int | None = None,
    lac_of: Callable[[int], int] | None = None,
    offloaded: Callable[[list[int]], dict[int, OffloadedCopy]] | None = None,
) -> LedgerPlanning:
    """Read the metadata of every ledger the spec selects and plan what to read
    (:class:`LedgerPlanning`).

    A ledger is left out (skipped) when it is not closed and ``include_open`` is not given,
    when its ctime is outside ``since_ms <= ctime < until_ms``, or when it was listed (the
    spec "all" or a wide range) and deleted before its read.

    Each ledger's znode is read once, pipelined: the ids named and those of narrow ranges in
    the probe that finds them (:func:`resolve_spec`'s), those listed (``all``, wide ranges)
    :data:`READ_BATCH` a read as the plan goes, so that it holds no more than the plans.

    ``lac_of(ledger_id)`` gives the last add confirmed of a ledger that is not
    closed (open it without recovery); it is needed only with ``include_open``.
    ``offloaded(ids)`` gives, of the named ledgers BookKeeper no longer has, those a Pulsar
    managed ledger offloaded to tiered storage, by id (:class:`OffloadedCopy`); they are
    planned to be read from there (their ctime unknown: ``--since``/``--until`` leave them out).
    """
    from ..metadata.errors import MetadataStoreError

    if include_open and lac_of is None:
        raise ValueError("include_open needs lac_of")
    probe: _Probe[LedgerRead] = _Probe({}, []) if spec.all else _probe(store, spec, store.ledgers.read_many)
    gone = [i for i in spec.ids if i not in probe.present]
    found: dict[int, OffloadedCopy] = {}
    if gone and offloaded is not None and since_ms is None and until_ms is None:
        found = offloaded(gone)
    missing = [str(i) for i in gone if i not in found] + probe.empty_ranges(spec)
    if missing:
        raise NoSuchLedgers(missing)
    plans: list[LedgerPlan] = [
        LedgerPlan(ledger_id, "CLOSED", None, {}, 0, copy.last, None, 0, copy.location)
        for ledger_id, copy in found.items()
    ]
    skipped: list[SkippedLedger] = []
    listed = store.ledgers.ids() if spec.all else probe.listed
    probed = sorted(probe.present.values(), key=_ledger_id)
    for read in heapq.merge(probed, _read_batched(store, listed), key=_ledger_id):
        ledger_id, md = read.ledger_id, read.metadata
        if md is None:  # listed, and gone by its read (a probed ledger is read by its probe)
            skipped.append(SkippedLedger(ledger_id, "deleted while planning"))
            continue
        if isinstance(md, MetadataStoreError):  # what reading it alone raises
            raise md
        ctime = md.ctime
        if since_ms is not None and (ctime is None or ctime < since_ms):
            skipped.append(SkippedLedger(ledger_id, "created before --since"))
            continue
        if until_ms is not None and (ctime is None or ctime >= until_ms):
            skipped.append(SkippedLedger(ledger_id, "created at or after --until"))
            continue
        state = md.state.name
        if md.is_closed:
            last, length = md.last_entry_id, md.length
        elif not include_open or lac_of is None:  # (include_open has a lac_of: checked above)
            skipped.append(SkippedLedger(ledger_id, f"{state.lower()} (use --include-open)"))
            continue
        else:
            last, length = int(lac_of(ledger_id)), None
        plans.append(
            LedgerPlan(
                ledger_id=ledger_id,
                state=state,
                ctime_ms=ctime,
                metadata=custom_metadata_text(md.custom_metadata),
                first=0,
                last=last,
                length=length,
                segments=len(md.ensembles),
            )
        )
    plans.sort(key=lambda p: p.ledger_id)
    return LedgerPlanning(plans, skipped)


def _ledger_id(read: LedgerRead) -> int:
    return read.ledger_id


def _read_batched(store: MetadataStore, ids: Iterable[int]) -> Iterator[LedgerRead]:
    """The metadata of each of ``ids``, in order: :data:`READ_BATCH` ledgers a pipelined read,
    each batch read whole before it is planned (no read held open while ``lac_of`` asks a
    bookie), so that a plan of every ledger holds no more than a batch of their metadata."""
    it = iter(ids)
    while batch := list(itertools.islice(it, READ_BATCH)):
        yield from list(store.ledgers.read_many(batch))


def split_ranges(plans: Iterable[LedgerPlan], split_entries: int = DEFAULT_SPLIT_ENTRIES) -> list[EntryRange]:
    """Cut each plan into ranges of at most ``split_entries`` entries, in
    ledger then entry order.  Empty ledgers give no range."""
    if split_entries < 1:
        raise SpecError(f"splitEntries must be at least 1, not {split_entries}")
    return list(_iter_ranges(plans, split_entries))


def task_entries(split_entries: int, ledger_bytes: int | None, ledger_entries: int, target: int | None = None) -> int:
    """Entries per task for a ledger of ``ledger_entries`` entries and ``ledger_bytes`` bytes
    (None: not known): at most ``split_entries``, and the ledger cut into ranges of as many
    entries each, of at most about ``target`` bytes (:data:`SPLIT_BYTES`)."""
    if not ledger_bytes or ledger_entries <= 0:
        return split_entries
    tasks = -(-ledger_bytes // (SPLIT_BYTES if target is None else target))
    return max(1, min(split_entries, -(-ledger_entries // tasks)))


def _iter_ranges(plans: Iterable[LedgerPlan], split_entries: int) -> Iterator[EntryRange]:
    for plan in plans:
        start = plan.first
        while start <= plan.last:
            stop = min(plan.last, start + split_entries - 1)
            yield EntryRange(plan.ledger_id, start, stop, plan.ctime_ms, plan.state, plan.metadata, plan.offload)
            start = stop + 1
