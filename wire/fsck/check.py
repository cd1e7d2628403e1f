"""One ledger's fsck: ask each bookie of each segment's ensemble which entries it holds
(GET_LIST_OF_ENTRIES_OF_LEDGER, Java's ``AvailabilityOfEntriesOfLedger``; entries
read one by one from a bookie that cannot answer it), compare with what the write
sets say each must hold, and name one cause (:mod:`.findings`).

* Entries a registered bookie of the ensemble lacks, or that have no copy in the
  ensemble at all, are looked for on the other registered bookies: found there, the
  metadata names the wrong bookies (:attr:`~.findings.Kind.MISPLACED`, with where the
  data is, never a bookie that takes no writes: copies on a read-only, draining or
  decommissioned bookie are a moved replica's leftovers, ``leftovers``); found nowhere,
  they are lost (:attr:`~.findings.Kind.DATA_LOST`, or
  :attr:`~.findings.Kind.METADATA_ONLY` when every bookie of the ensemble is registered and
  none, nor any other, holds any entry of the ledger).
  A bookie that is not registered is not asked: its entries count as missing, and the
  other bookies are searched only for entries with no copy left.
* Every entry short of a copy has its surviving copies read and judged (with or
  without ``compare_all``): an entry whose every copy is unreadable or fails its
  digest is lost as surely as one no bookie holds (a lone copy beside a lost bookie
  is otherwise never read, and the ledger called repairable).  Each run of lost
  entries is named with its bookies and cause (:class:`~.findings.LostRun`).
* With every copy in place, some entries are read from every replica and compared
  (the first and last of each segment and ``sample`` more, or all of them), each
  copy's digest checked with the ledger's password when the metadata has it; an
  entry none of whose copies is good is lost there too.
* An open ledger's last segment is not judged (its end is not known); its earlier
  segments are.
* A ledger found to have lost data is checked once more on its metadata read anew
  (:func:`confirm_lost`) before it is called lost: one deleted or moved while its copies
  were read (a swap, a drain, autorecovery) is judged by what it is now.

Every bookie request goes through :class:`BookieRequests`: at most ``limit`` in
flight, counted.
"""

from __future__ import annotations

import bisect
import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from .findings import BadReplica, Finding, Kind, LostRun, Move, Run, runs_of
from .requests import NOTHING, BookieRequests, Held

if TYPE_CHECKING:
    from bkctl.wire.metadata.ledger import LedgerMetadata

__all__ = [
    "BookieRequests",
    "CheckOptions",
    "Held",
    "Plan",
    "asks_bookies",
    "check_ledger",
    "closed_segments",
    "confirm_lost",
    "digest_of",
    "held_by",
    "held_from_reads",
    "judged",
]


@dataclass(frozen=True)
class CheckOptions:
    """``registered``: the bookies alive (writable or read-only); ``sample``: entries compared
    across replicas besides each segment's first and last; ``compare_all``: every entry;
    ``targets``: the bookies an ensemble may be pointed at (writable, not read-only or
    draining, with a cookie: not decommissioned; None: every registered one)."""

    registered: frozenset[str]
    sample: int = 8
    compare_all: bool = False
    targets: frozenset[str] | None = None


@dataclass(frozen=True)
class _Segment:
    first: int
    last: int
    ensemble: tuple[str, ...]


def closed_segments(md: LedgerMetadata) -> list[_Segment]:
    out = []
    for first, last, ensemble in md.segment_ranges():
        if last is None:  # an open ledger's last segment: its end is not known
            continue
        if last >= first:
            out.append(_Segment(first, last, tuple(ensemble)))
    return out


class _Stripes:
    """Which positions of a segment's ensemble hold each of its entries (round-robin write
    sets), worked out once a segment rather than once an entry."""

    def __init__(self, seg: _Segment, size: int, quorum: int):
        from bkctl.wire.metadata.ledger import write_set_indices

        self.seg = seg
        self.size = size
        self.quorum = quorum
        # below 2**31 an entry's write set depends on its id modulo the ensemble size only
        self.table = [write_set_indices(r, size, quorum) for r in range(size)] if seg.last + quorum < 2**31 else None

    def positions(self, entry_id: int) -> list[int]:
        if self.table is not None:
            return self.table[entry_id % self.size]
        from bkctl.wire.metadata.ledger import write_set_indices

        return write_set_indices(entry_id, self.size, self.quorum)

    def bookies(self, entry_id: int) -> list[str]:
        return [self.seg.ensemble[i] for i in self.positions(entry_id)]

    def entries_of(self, position: int) -> list[int]:
        """The segment's entries the bookie at ``position`` holds, ascending."""
        first, last = self.seg.first, self.seg.last
        if self.table is None:
            return [e for e in range(first, last + 1) if position in self.positions(e)]
        if self.quorum >= self.size:
            return list(range(first, last + 1))
        starts = [first + (r - first) % self.size for r in range(self.size) if position in self.table[r]]
        return sorted(e for start in starts for e in range(start, last + 1, self.size))


#: segments of at most this many entries have their positions' entries kept (:func:`_held_by_position`)
_SHAPES_KEPT_UP_TO = 64
_shapes: dict[tuple[int, int, int, int], tuple[list[int], ...]] = {}


def _held_by_position(size: int, quorum: int, first: int, last: int) -> tuple[list[int], ...]:
    """The entries of a segment ``first..last`` each position of its ensemble holds, ascending
    (:meth:`_Stripes.entries_of`), kept for small segments: the same few shapes recur ledger
    after ledger.  The lists are shared: read them, never change them."""
    key = (size, quorum, first, last)
    shape = _shapes.get(key)
    if shape is None:
        stripes = _Stripes(_Segment(first, last, ("",) * size), size, quorum)
        shape = tuple(stripes.entries_of(p) for p in range(size))
        if last - first < _SHAPES_KEPT_UP_TO and len(_shapes) < 4096:
            _shapes[key] = shape
    return shape


class _Layout:
    """A ledger's closed segments and their write sets, looked up by entry id."""

    def __init__(self, md: LedgerMetadata, segments: list[_Segment]):
        self.segments = [_Stripes(seg, md.ensemble_size, md.write_quorum) for seg in segments]
        self.starts = [seg.first for seg in segments]
        self._sets = [
            [tuple(st.seg.ensemble[i] for i in row) for row in st.table] if st.table is not None else None
            for st in self.segments
        ]

    def write_set(self, entry_id: int) -> tuple[str, ...]:
        """The bookies of ``entry_id``'s write set (an entry of a closed segment)."""
        i = 0 if len(self.starts) == 1 else max(bisect.bisect_right(self.starts, entry_id) - 1, 0)
        sets = self._sets[i]
        if sets is not None:
            return sets[entry_id % len(sets)]
        return tuple(self.segments[i].bookies(entry_id))


async def held_by(req: BookieRequests, bookie: str, ledger_id: int, wanted: Iterable[int]) -> tuple[Held, bool]:
    """What a registered bookie holds (its entry list, else the ``wanted`` entries read one
    by one), and whether it answered at all (False: unreachable, nothing known of it)."""
    held = await req.availability(bookie, ledger_id)
    if held is not None:
        return held, True
    got: list[int] = []
    answered = False
    reads = [(e, defer.ensureDeferred(req.read(bookie, ledger_id, e))) for e in wanted]
    for entry_id, d in reads:
        try:
            body = await d
        except Exception:  # noqa: BLE001 - a copy that cannot be read is not a copy
            continue
        answered = True
        if body is not None:
            got.append(entry_id)
    return Held(runs_of(got)), answered or not reads


#: a copy read: its bytes, or why there are none ("absent when read", "unreadable: ...")
Copy = bytes | str


async def _read_held(
    req: BookieRequests, bookie: str, ledger_id: int, wanted: list[int], copies: dict[int, dict[str, Copy]]
) -> tuple[Held, bool]:
    """What a registered bookie holds of ``wanted``, found by reading each (every one is to be
    compared anyway): :func:`held_from_reads` of the answers."""
    reads = [(e, defer.ensureDeferred(req.read(bookie, ledger_id, e))) for e in wanted]
    answers: list[tuple[int, bytes | None | Exception]] = []
    for entry_id, d in reads:
        try:
            answers.append((entry_id, await d))
        except Exception as exc:  # noqa: BLE001 - judged by held_from_reads
            answers.append((entry_id, exc))
    return held_from_reads(bookie, answers, copies)


def held_from_reads(
    bookie: str, answers: Sequence[tuple[int, bytes | None | BaseException]], copies: dict[int, dict[str, Copy]]
) -> tuple[Held, bool]:
    """What a bookie holds, from its answers to the reads of every entry it should hold (entry,
    then the bytes, None for an entry it does not have, or the exception): the copies read go
    into ``copies`` for the comparison, so that nothing is read twice.  A read the bookie
    answers with an error is a copy it holds and cannot give (as its entry list would have
    named it); one it does not answer at all, when it answers none, says nothing is known of
    it (False)."""
    from bkctl.wire.errors import Unreachable

    got: list[int] = []
    unanswered: list[tuple[int, BaseException]] = []
    for entry_id, body in answers:
        if isinstance(body, Unreachable):
            unanswered.append((entry_id, body))
        elif isinstance(body, BaseException):  # held, and unreadable: judged with the others
            copies.setdefault(entry_id, {})[bookie] = f"unreadable: {body}"
            got.append(entry_id)
        elif body is not None:
            copies.setdefault(entry_id, {})[bookie] = body
            got.append(entry_id)
    if unanswered and len(unanswered) == len(answers):
        return NOTHING, False
    for entry_id, why in unanswered:  # it answers, but not these: not good copies
        copies.setdefault(entry_id, {})[bookie] = f"unreadable: {why}"
        got.append(entry_id)
    return Held(runs_of(got)), True


def _lacking(entries: list[int], held: Held) -> list[int]:
    """The ``entries`` (ascending) that ``held`` does not hold: one walk of both, or none at all
    when a single run holds them all."""
    runs = held.runs
    if not runs:
        return entries
    if len(runs) == 1 and runs[0][0] <= entries[0] and entries[-1] <= runs[0][1]:
        return []
    out: list[int] = []
    i, count = 0, len(runs)
    for e in entries:
        while i < count and runs[i][1] < e:
            i += 1
        if i == count or runs[i][0] > e:
            out.append(e)
    return out


def _read_first(wanted: list[int], sampled: set[int]) -> bool:
    """Whether reading every entry a bookie should hold takes no more requests than its entry
    list and the reads of its sampled entries (a ledger of a few entries, or ``compare_all``)."""
    if not wanted or len(wanted) > len(sampled) + 1:
        return False
    return sum(1 for e in wanted if e not in sampled) <= 1


def asks_bookies(md: LedgerMetadata) -> bool:
    """Whether :func:`check_ledger` has anything to ask the bookies about: False for a ledger
    with no entry any bookie should hold yet (an empty closed one, an open one whose only
    segment is its open last), whose check is None by its metadata alone."""
    return bool(closed_segments(md))


class Plan:
    """What one ledger's check asks: its closed segments and write sets (``stripes``), what each
    bookie of them should hold (``expected``), the entries compared across replicas (``sample``),
    the bookies of the ensembles (``inside``) and the registered ones among them (``asked``)."""

    __slots__ = ("md", "segments", "_stripes", "expected", "sample", "sampled", "inside", "asked")

    def __init__(self, ledger_id: int, md: LedgerMetadata, segments: list[_Segment], options: CheckOptions):
        self.md = md
        self.segments = segments
        self._stripes: _Layout | None = None
        # what each bookie should hold, as the write sets say
        self.expected: dict[str, list[int]] = {}
        size, quorum = md.ensemble_size, md.write_quorum
        for seg in segments:
            for bookie, entries in zip(seg.ensemble, _held_by_position(size, quorum, seg.first, seg.last)):
                if entries:
                    self.expected.setdefault(bookie, []).extend(entries)
        self.sample = _sample(segments, ledger_id, options)
        self.sampled = set(self.sample)
        self.inside = list(self.expected)
        self.asked = [b for b in self.inside if b in options.registered]

    @property
    def stripes(self) -> _Layout:
        """The write sets by entry id, worked out when first asked (a healthy ledger never does)."""
        if self._stripes is None:
            self._stripes = _Layout(self.md, self.segments)
        return self._stripes

    def reads_first(self, bookie: str) -> bool:
        """Whether ``bookie``'s entries are read in place of its entry list (:func:`_read_first`)."""
        return _read_first(self.expected[bookie], self.sampled)


async def check_ledger(
    req: BookieRequests, ledger_id: int, md: LedgerMetadata, version: int, options: CheckOptions
) -> Finding | None:
    """The ledger's one cause, or None when every copy is where the metadata says.

    Requests: per bookie of the ensembles, its entry list and then the reads of the entries
    compared, or, when those reads cover every entry it should hold (:func:`_read_first`),
    the reads alone; each copy is read once (:func:`_judge_copies` takes what was read)."""
    segments = closed_segments(md)
    if not segments:
        return None
    plan = Plan(ledger_id, md, segments, options)
    copies: dict[int, dict[str, Copy]] = {}
    answers = [
        defer.ensureDeferred(
            _read_held(req, b, ledger_id, plan.expected[b], copies)
            if plan.reads_first(b)
            else held_by(req, b, ledger_id, plan.expected[b])
        )
        for b in plan.asked
    ]
    held: dict[str, Held] = {b: NOTHING for b in plan.inside}
    silent: list[str] = []  # registered and not answering: nothing is known of what they hold
    for bookie, answer in zip(plan.asked, answers):
        held[bookie], answered = await answer
        if not answered:
            silent.append(bookie)
    return await judged(req, ledger_id, md, version, options, plan, held, silent, copies)


async def judged(
    req: BookieRequests,
    ledger_id: int,
    md: LedgerMetadata,
    version: int,
    options: CheckOptions,
    plan: Plan,
    held: dict[str, Held],
    silent: list[str],
    copies: dict[int, dict[str, Copy]],
) -> Finding | None:
    """The ledger's one cause from what each bookie of ``plan`` was found to hold (``held``;
    ``silent``: those that did not answer) and the copies read so far: the rest of
    :func:`check_ledger`, once the bookies' holdings are known however they were asked."""
    segments, stripes, expected, sample = plan.segments, plan.stripes, plan.expected, plan.sample
    registered = options.registered
    inside = plan.inside
    missing: dict[str, list[int]] = {}
    for bookie, entries in expected.items():
        lacks = _lacking(entries, held[bookie])
        if lacks:
            missing[bookie] = lacks
    if not missing:
        return await _compare(req, ledger_id, md, version, stripes, sample, options, copies)
    # an entry every bookie of its write set lacks has no copy in the ensemble
    lacks_count = Counter(chain.from_iterable(missing.values()))
    short = sorted(lacks_count)
    no_copy = [e for e in short if lacks_count[e] >= md.write_quorum]
    # look elsewhere when a live bookie of the ensemble lacks entries, or some have no copy left
    outside: dict[str, Held] = {}
    if no_copy or any(b in registered for b in missing):
        others = sorted(registered.difference(inside))
        found = [defer.ensureDeferred(req.availability(b, ledger_id)) for b in others]
        for bookie, d in zip(others, found):
            h = await d
            if h:
                outside[bookie] = h
    unknown = sorted(b for b in inside if b not in registered) + [f"{b} (unreachable)" for b in silent]
    nowhere = [e for e in no_copy if not any(e in h for h in outside.values())]
    if nowhere and not any(held.values()) and not outside and not unknown:
        return Finding(
            ledger_id,
            Kind.METADATA_ONLY,
            f"no bookie holds any of its {segments[-1].last + 1} entries",
            lost=runs_of(nowhere),
            version=version,
        )
    # every entry short of a copy: its surviving copies are read and judged, for a lone copy
    # that fails its digest is as lost as no copy at all
    holding = {b for b in inside if b in registered and held[b]}
    holders = (
        {
            e: [b for b in stripes.write_set(e) if b in holding and e in held[b]]
            + sorted(h for h, got in outside.items() if e in got)
            for e in short
        }
        if holding or outside
        else {}  # no live bookie holds any entry of it: nothing to read
    )
    bad, no_good = await _judge_copies(req, ledger_id, md, holders, copies)
    lost_runs = _lost_runs(stripes, sorted(set(nowhere) | set(no_good)), holders, bad, registered, silent)
    missing_runs = {b: runs_of(es) for b, es in missing.items()}
    if lost_runs:
        return _lost_finding(ledger_id, version, lost_runs, bad, missing_runs)
    # an ensemble is pointed only at a bookie that takes writes: copies on a read-only (draining)
    # or decommissioned bookie are a moved replica's leftovers, waiting for the over-replicated GC
    targets = registered if options.targets is None else options.targets
    moves = _moves(stripes, missing, {h: got for h, got in outside.items() if h in targets})
    leftovers = {h: list(got.runs) for h, got in outside.items() if h not in {m.holder for m in moves}}
    idle = sorted(h for h in outside if h not in targets)
    if moves:
        return Finding(
            ledger_id,
            Kind.MISPLACED,
            "entries the ensemble should hold are on bookies outside it",
            missing=missing_runs,
            moves=tuple(moves),
            bad=tuple(bad),
            version=version,
            leftovers=leftovers,
        )
    only_outside = [e for e in no_copy if e not in nowhere]
    if only_outside:  # no copy in the ensemble, and those outside are on bookies taking no writes
        return Finding(
            ledger_id,
            Kind.MISPLACED,
            f"{len(only_outside)} entries are only on bookies outside the ensemble that take no writes "
            f"({', '.join(idle)}): no fix points an ensemble at them; make one writable again, or copy "
            "them off with `bkctl recover`",
            missing=missing_runs,
            bad=tuple(bad),
            version=version,
            leftovers=leftovers,
        )
    gone = sorted(b for b in missing if b not in registered) + [f"{b} (unreachable)" for b in silent]
    why = f"not live: {', '.join(gone)}" if gone else "registered bookies lack entries"
    empty = tuple(sorted(b for b in missing if not held[b]))  # hold none of what they should
    return Finding(
        ledger_id,
        Kind.MISSING,
        f"{sum(len(es) for es in missing.values())} copies missing ({why})"
        + (f"; {len(bad)} surviving copies bad (another copy of each is good)" if bad else "")
        + (f"; leftover copies outside the ensemble on {', '.join(sorted(leftovers))}" if leftovers else ""),
        missing=missing_runs,
        bad=tuple(bad),
        version=version,
        leftovers=leftovers,
        empty=empty,
    )


def digest_of(ledger_id: int, md: LedgerMetadata) -> Any:
    """The ledger's :class:`~bkctl.wire.codecs.digest.DigestManager`, or None when its metadata
    has no password (then a copy's bytes cannot be judged alone)."""
    from bkctl.wire.client.credentials import ledger_credentials
    from bkctl.wire.codecs.digest import DigestManager

    try:
        password, digest_type = ledger_credentials(ledger_id, md)
        return DigestManager(ledger_id, digest_type, password) if md.password is not None else None
    except Exception:  # noqa: BLE001 - no credentials: the bytes are compared, not judged
        return None


def _lost_finding(
    ledger_id: int,
    version: int,
    lost_runs: list[LostRun],
    bad: list[BadReplica],
    missing: dict[str, list[Run]] | None = None,
) -> Finding:
    count = sum(r.last - r.first + 1 for r in lost_runs)
    return Finding(
        ledger_id,
        Kind.DATA_LOST,
        f"{count} {'entry' if count == 1 else 'entries'} with no good copy on any live bookie: "
        + "; ".join(r.text() for r in lost_runs[:3])
        + (f"; ... {len(lost_runs) - 3} more runs" if len(lost_runs) > 3 else ""),
        missing=missing or {},
        lost=_joined((r.first, r.last) for r in lost_runs),
        bad=tuple(bad),
        version=version,
        lost_runs=tuple(lost_runs),
    )


def _joined(runs: Iterable[Run]) -> list[Run]:
    """Ascending disjoint runs, those that touch made one."""
    out: list[Run] = []
    for first, last in runs:
        if out and first <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return out


async def _judge_copies(
    req: BookieRequests,
    ledger_id: int,
    md: LedgerMetadata,
    holders: dict[int, list[str]],
    known: dict[int, dict[str, Copy]],
) -> tuple[list[BadReplica], list[int]]:
    """Read every copy ``holders`` names (entry -> the live bookies holding it) that ``known``
    (the copies read already) lacks, and judge it: the bad copies, and the entries none of whose
    copies is good."""
    digest = digest_of(ledger_id, md)
    bad: list[BadReplica] = []
    no_good: list[int] = []
    entries = [e for e, where in holders.items() if where]
    window = 32
    for start in range(0, len(entries), window):
        chunk = entries[start : start + window]
        reads = [
            (e, b, defer.ensureDeferred(req.read(b, ledger_id, e)))
            for e in chunk
            for b in holders[e]
            if b not in known.get(e, {})
        ]
        copies: dict[int, dict[str, Copy]] = {
            e: {b: known[e][b] for b in holders[e] if b in known.get(e, {})} for e in chunk
        }
        for e, bookie, d in reads:
            try:
                body = await d
                copies[e][bookie] = body if body is not None else "absent when read"
            except Exception as exc:  # noqa: BLE001
                copies[e][bookie] = f"unreadable: {exc}"
        for e, by_bookie in copies.items():
            judged = _judge(e, by_bookie, digest)
            bad.extend(judged)
            if _none_good(judged, by_bookie):
                no_good.append(e)
    return bad, no_good


def _copy_fault(reason: str) -> str:
    if reason.startswith("digest"):
        return "fails its digest"
    if reason.startswith("absent"):
        return "was gone when read"
    if reason.startswith("unreadable"):
        return "is unreadable"
    return "differs from the other copies"


def _lost_runs(
    stripes: _Layout,
    lost: list[int],
    holders: dict[int, list[str]],
    bad: list[BadReplica],
    registered: frozenset[str],
    silent: list[str],
) -> list[LostRun]:
    """Each lost entry's bookies and cause, consecutive entries of the same ones as one run
    (a cause worked out once for each write set, holders and faults met).  Consecutive entries
    no live bookie holds are one run whatever their write sets (a striped ensemble gives each
    entry other bookies): its bookies are theirs together, the cause said once for them."""
    faults = {(b.entry_id, b.bookie): _copy_fault(b.reason) for b in bad}
    causes: dict[tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]], tuple[tuple[str, ...], str]] = {}
    out: list[LostRun] = []
    nowhere: list[int] = []  # the run of entries no live bookie holds under way: first, last
    nowhere_sets: set[str] = set()

    def close_nowhere() -> None:
        if nowhere:
            bookies, cause = _lost_cause(tuple(nowhere_sets), [], (), registered, silent)
            out.append(LostRun(nowhere[0], nowhere[1], bookies, cause))
            nowhere.clear()
            nowhere_sets.clear()

    for e in lost:
        where = holders.get(e, [])
        if not where:
            if nowhere and nowhere[1] != e - 1:
                close_nowhere()
            if not nowhere:
                nowhere.extend((e, e))
            nowhere[1] = e
            nowhere_sets.update(stripes.write_set(e))
            continue
        close_nowhere()
        key = (stripes.write_set(e), tuple(where), tuple(faults.get((e, b), "") for b in where))
        said = causes.get(key)
        if said is None:
            said = causes[key] = _lost_cause(key[0], where, key[2], registered, silent)
        bookies, cause = said
        last = out[-1] if out else None
        if last is not None and last.last == e - 1 and last.cause == cause and last.bookies == bookies:
            out[-1] = LostRun(last.first, e, bookies, cause)
        else:
            out.append(LostRun(e, e, bookies, cause))
    close_nowhere()
    return out


def _lost_cause(
    write_set_: tuple[str, ...],
    where: list[str],
    faults: tuple[str, ...],
    registered: frozenset[str],
    silent: list[str],
) -> tuple[tuple[str, ...], str]:
    """A lost entry's bookies (its write set's, then any outside holding a copy) and cause, from
    its write set, the live bookies holding a copy and each one's fault ("" unknown)."""
    write_set = sorted(write_set_)
    bookies = tuple(write_set + [b for b in where if b not in write_set])
    said: list[str] = []
    if not where:
        said.append("no live bookie holds it")
    elif len(where) == 1:
        said.append(f"its only copy, on {where[0]}, {faults[0] or 'is bad'}")
    else:
        said.append("every copy is bad: " + ", ".join(f"{b} {f or 'bad'}" for b, f in zip(where, faults)))
    down = [b for b in write_set if b not in registered]
    mute = [b for b in write_set if b in silent]
    empty = [b for b in write_set if b in registered and b not in silent and b not in where]
    if down:
        said.append(f"{', '.join(down)} {'is' if len(down) == 1 else 'are'} not live")
    if mute:
        said.append(f"{', '.join(mute)} did not answer")
    if empty and where:
        said.append(f"{', '.join(empty)} {'does' if len(empty) == 1 else 'do'} not hold it")
    return bookies, "; ".join(said)


def _moves(stripes: _Layout, missing: dict[str, list[int]], outside: dict[str, Held]) -> list[Move]:
    """Per segment and ensemble position whose bookie lacks entries: an outside bookie that
    holds every entry of that position.  Positions with the fewest such bookies choose first,
    each the one holding the fewest entries of the segment beyond the position's (with E > Qw
    a bookie holding the next position's entries holds some of this one's too)."""
    moves: list[Move] = []
    for st in stripes.segments:
        seg = st.seg
        taken: set[str] = set(seg.ensemble)
        wanted: list[tuple[int, str, list[str], list[int]]] = []
        for position, bookie in enumerate(seg.ensemble):
            if not any(seg.first <= e <= seg.last for e in missing.get(bookie, ())):
                continue
            should = st.entries_of(position)
            holders = sorted(h for h, held in outside.items() if all(e in held for e in should))
            wanted.append((position, bookie, holders, should))
        for position, bookie, holders, should in sorted(wanted, key=lambda w: (len(w[2]), w[0])):
            free = [h for h in holders if h not in taken]
            if not free:
                continue
            extra = {h: sum(1 for e in range(seg.first, seg.last + 1) if e in outside[h]) - len(should) for h in free}
            holder = min(free, key=lambda h: (extra[h], h))
            moves.append(Move(seg.first, position, bookie, holder))
            taken.add(holder)
    return sorted(moves, key=lambda m: (m.first_entry_id, m.position))


def _sample(segments: list[_Segment], ledger_id: int, options: CheckOptions) -> list[int]:
    if options.compare_all:
        return [e for seg in segments for e in range(seg.first, seg.last + 1)]
    chosen = {e for seg in segments for e in (seg.first, seg.last)}
    pool = [(seg.first, seg.last) for seg in segments]
    total = sum(b - a + 1 for a, b in pool)
    if total > len(chosen) and options.sample > 0:
        rng = random.Random(ledger_id)  # the same entries each run: a finding can be checked again
        for _ in range(options.sample):
            k = rng.randrange(total)
            for a, b in pool:
                if k <= b - a:
                    chosen.add(a + k)
                    break
                k -= b - a + 1
    return sorted(chosen)


async def _compare(
    req: BookieRequests,
    ledger_id: int,
    md: LedgerMetadata,
    version: int,
    stripes: _Layout,
    sample: list[int],
    options: CheckOptions,
    known: dict[int, dict[str, Copy]],
) -> Finding | None:
    """Read the sampled entries from every replica (but the copies ``known`` holds already);
    differing bytes are the finding (every copy of an entry bad: that entry is lost)."""
    copies = {e: [b for b in stripes.write_set(e) if b in options.registered] for e in sample}
    bad, no_good = await _judge_copies(req, ledger_id, md, copies, known)
    if not bad:
        return None
    if no_good:
        return _lost_finding(ledger_id, version, _lost_runs(stripes, no_good, copies, bad, options.registered, []), bad)
    return Finding(
        ledger_id,
        Kind.CORRUPT,
        f"{len(bad)} copies differ from their replicas",
        bad=tuple(bad),
        version=version,
    )


def _none_good(judged: list[BadReplica], copies: dict[str, bytes | str]) -> bool:
    """Whether no copy of an entry is good: each is unreadable, gone or fails its digest (copies
    that only differ from one another are not judged lost: one of them may be right)."""
    faulty = {b.bookie for b in judged if not b.reason.startswith("differs")}
    return bool(copies) and faulty >= set(copies)


def _judge(entry_id: int, copies: dict[str, bytes | str], digest: Any) -> list[BadReplica]:
    """The bad copies of one entry: unreadable ones, ones whose digest fails, and, when
    no digest can judge, the ones that differ from the most common bytes."""
    bad = [BadReplica(entry_id, b, c) for b, c in copies.items() if isinstance(c, str)]
    bodies = {b: c for b, c in copies.items() if isinstance(c, bytes)}
    if digest is not None:
        for b, body in bodies.items():
            try:
                digest.verify(body, entry_id)
            except Exception as exc:  # noqa: BLE001 - the digest names the bad copy
                bad.append(BadReplica(entry_id, b, f"digest: {exc}"))
        good = {b: body for b, body in bodies.items() if all(x.bookie != b for x in bad)}
        if len(set(good.values())) > 1:  # both verify and still differ
            bad.extend(BadReplica(entry_id, b, "differs from another copy that verifies") for b in sorted(good))
        return bad
    if len(set(bodies.values())) > 1:
        counts: dict[bytes, int] = {}
        for body in bodies.values():
            counts[body] = counts.get(body, 0) + 1
        common = max(counts, key=lambda k: counts[k])
        bad.extend(BadReplica(entry_id, b, "differs from the other copies") for b, c in bodies.items() if c != common)
    return bad


def confirm_lost(
    finding: Finding,
    reread: Callable[[], tuple[LedgerMetadata, int] | None],
    check_again: Callable[[LedgerMetadata, int], Finding | None],
) -> Finding | None:
    """``finding`` if it does not say data is lost; else what a second check says, on the
    ledger's metadata read anew by ``reread`` (None: the ledger is gone -- deleted meanwhile,
    no finding).  Lost data is named only when it is lost: a ledger whose copies moved or
    were deleted while the first check read them (a copy "gone when read") is not."""
    if finding.kind is not Kind.DATA_LOST:
        return finding
    now = reread()
    if now is None:
        return None
    md, version = now
    return check_again(md, version)
