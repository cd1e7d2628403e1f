"""Choosing bookies for ledger ensembles.

Pure functions of the bookie lists (and racks) the caller fetched; nothing
here does I/O, so the policies are easy to test and to swap.  Where racks
come from is :mod:`bkctl.wire.metadata.racks`.

* :class:`RandomPlacement` (BookKeeper's default without racks):
  ``new_ensemble`` takes ``size`` distinct writable bookies at random; a
  bookie also registered read-only is never chosen (a bookie going read-only
  creates its read-only node before it deletes the writable one, so both can
  be seen for a moment).  ``replace_bookies`` swaps each failed member of an
  ensemble for a random writable bookie outside the ensemble.
* :class:`RackAwarePlacement` (Java's ``RackawareEnsemblePlacementPolicy``):
  every write quorum -- the ``Qw`` consecutive positions, wrapping, that
  store an entry -- covers at least ``min(Qw, minNumRacksPerWriteQuorum)``
  racks, and the ensemble as a whole is spread over as many racks as there
  are.  When that cannot be done the ensemble is spread as far as possible
  (Java's fallback), unless ``enforceMinNumRacksPerWriteQuorum`` is set: then
  :class:`NotEnoughBookies` is raised, and bookies of the default rack
  (``/default-rack``: bookies the rack map does not name) are never chosen.
  A replacement is taken from the lost bookie's rack when it has a usable
  bookie (the ledger's spread stays what it was), else from a rack that
  keeps every write quorum of the position spread, preferring racks the
  ensemble does not use yet.
* :class:`RegionAwarePlacement` (Java's ``RegionAwareEnsemblePlacementPolicy``):
  racks are named ``/region/rack``; ensembles are spread over regions first
  (each write quorum covers ``min(Qw, minimum regions)`` regions), then over
  racks inside the regions.

:meth:`adherence` tells whether an ensemble meets the policy (Java's
``isEnsembleAdheringToPlacementPolicy``): ``"MEETS_STRICT"`` or ``"FAIL"``.

Too few candidates raise :class:`NotEnoughBookies`, whose message gives the
counts the operator needs ("need 3 writable bookies, found 2 (1 read-only)").
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence, Sized
from typing import TYPE_CHECKING, Any

from bkctl.wire.metadata.registration_state import takes_writes

from .errors import NotEnoughBookies
from .quorum import QuorumSchedule

if TYPE_CHECKING:
    from bkctl.wire.metadata.ledger import LedgerMetadata

#: per position of an ensemble being placed: its bookie's location keys (per level), or None (empty yet)
Slots = list[tuple[str, ...] | None]
#: per write quorum: the locations already in it (per level), and how many of its positions are empty
WindowState = tuple[list[set[str]], int]

__all__ = [
    "DEFAULT_RACK",
    "MEETS_STRICT",
    "FAIL",
    "RandomPlacement",
    "RackAwarePlacement",
    "RegionAwarePlacement",
    "POLICIES",
    "segments_not_adhering",
]

#: Java's NetworkTopology.DEFAULT_RACK: where a bookie no rack source names lives.
DEFAULT_RACK = "/default-rack"
#: The two answers of :meth:`adherence` (Java's PlacementPolicyAdherence).
MEETS_STRICT = "MEETS_STRICT"
FAIL = "FAIL"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class RandomPlacement:
    """Uniformly random ensembles (BookKeeper's default policy without racks).

    ``rng`` is any :class:`random.Random`; pass a seeded one for
    reproducible choices in tests.
    """

    name = "random"

    def __init__(self, rng: random.Random | None = None):
        self._rng = rng if rng is not None else random.SystemRandom()

    def refresh(self, bookies: Iterable[str] = ()) -> None:
        """Bring the rack source up to date for ``bookies`` (blocking; run it off the reactor):
        the client calls it when its bookie lists are read or change.  Nothing to read here."""

    def close(self) -> None:
        """Let go of what the rack source watches (idempotent); nothing here."""

    @staticmethod
    def _candidates(
        writable: Iterable[str], readonly: Collection[str], exclude: Collection[str]
    ) -> tuple[list[str], int]:
        usable = takes_writes(writable, readonly)
        candidates = [b for b in usable if b not in exclude]
        return candidates, len(usable) - len(candidates)

    def new_ensemble(
        self,
        size: int,
        writable: Iterable[str],
        readonly: Collection[str] = (),
        exclude: Collection[str] = (),
        *,
        write_quorum: int | None = None,
    ) -> list[str]:
        """``size`` distinct bookies drawn from ``writable`` minus ``readonly`` and ``exclude``."""
        if size < 1:
            raise ValueError(f"ensemble size must be >= 1, got {size}")
        exclude = set(exclude)
        candidates, excluded = self._candidates(writable, readonly, exclude)
        if len(candidates) < size:
            raise _too_few(size, candidates, readonly, excluded)
        return self._rng.sample(candidates, size)

    def replace_bookies(
        self,
        ensemble: Sequence[str],
        failed: Collection[str],
        writable: Iterable[str],
        readonly: Collection[str] = (),
        exclude: Collection[str] = (),
        *,
        write_quorum: int | None = None,
    ) -> list[str]:
        """A copy of ``ensemble`` with every member in ``failed`` replaced.

        Replacements are writable, not read-only, not already in the ensemble,
        not in ``failed`` and not in ``exclude`` (e.g. every bookie that failed
        earlier for this ledger), and distinct from each other.
        """
        failed = set(failed)
        to_replace = [i for i, b in enumerate(ensemble) if b in failed]
        if not to_replace:
            return list(ensemble)
        banned = set(ensemble) | failed | set(exclude)
        candidates, excluded = self._candidates(writable, readonly, banned)
        if len(candidates) < len(to_replace):
            raise _too_few_replacements(ensemble, to_replace, candidates, readonly, excluded)
        chosen = self._rng.sample(candidates, len(to_replace))
        out = list(ensemble)
        for i, b in zip(to_replace, chosen):
            out[i] = b
        return out

    def adherence(self, ensemble: Sequence[str], write_quorum: int) -> str:
        """Any ensemble meets the random policy."""
        return MEETS_STRICT


class PinnedPlacement(RandomPlacement):
    """Ensembles drawn only from ``bookies`` (a sanity test pinned to given bookies):
    an ensemble change that would need another bookie fails with NotEnoughBookies."""

    def __init__(self, bookies: Iterable[str], rng: random.Random | None = None):
        super().__init__(rng)
        self.bookies = tuple(bookies)

    def new_ensemble(
        self,
        size: int,
        writable: Iterable[str],
        readonly: Collection[str] = (),
        exclude: Collection[str] = (),
        *,
        write_quorum: int | None = None,
    ) -> list[str]:
        writable = set(writable)
        return super().new_ensemble(
            size, [b for b in self.bookies if b in writable], readonly, exclude, write_quorum=write_quorum
        )

    def replace_bookies(
        self,
        ensemble: Sequence[str],
        failed: Collection[str],
        writable: Iterable[str],
        readonly: Collection[str] = (),
        exclude: Collection[str] = (),
        *,
        write_quorum: int | None = None,
    ) -> list[str]:
        writable = set(writable)
        return super().replace_bookies(
            ensemble, failed, [b for b in self.bookies if b in writable], readonly, exclude, write_quorum=write_quorum
        )


def _too_few(size: int, candidates: Sized, readonly: Iterable[str], excluded: int) -> NotEnoughBookies:
    extra = f", {excluded} excluded" if excluded else ""
    return NotEnoughBookies(
        f"need {_plural(size, 'writable bookie')}, found {len(candidates)} ({len(set(readonly))} read-only{extra})",
        needed=size,
        available=len(candidates),
        readonly=len(set(readonly)),
        excluded=excluded,
    )


def _too_few_replacements(
    ensemble: Sequence[str], to_replace: Sequence[int], candidates: Sized, readonly: Iterable[str], excluded: int
) -> NotEnoughBookies:
    names = ", ".join(ensemble[i] for i in to_replace)
    return NotEnoughBookies(
        f"need {_plural(len(to_replace), 'writable bookie')} outside the ensemble to replace "
        f"{names}, found {len(candidates)} ({len(set(readonly))} read-only, "
        f"{excluded} in the ensemble or failed)",
        needed=len(to_replace),
        available=len(candidates),
        readonly=len(set(readonly)),
        excluded=excluded,
    )


def _schedule(ensemble_size: int, write_quorum: int) -> QuorumSchedule:
    """The write quorums of an ensemble (a write quorum larger than it: the whole ensemble)."""
    return QuorumSchedule(ensemble_size, min(write_quorum, ensemble_size))


class RackAwarePlacement(RandomPlacement):
    """Ensembles spread over racks (see the module's text).

    ``rack_of(bookie_id)`` gives a bookie's rack path (``None``: the default
    rack); ``refresh`` (optional, blocking) brings the rack source up to date
    when the client's bookie lists are read or change; ``close`` (optional)
    stops what the rack source watches (:meth:`close`).  ``min_racks_per_write_quorum`` and ``enforce`` are Java's
    ``minNumRacksPerWriteQuorum`` (default 2) and
    ``enforceMinNumRacksPerWriteQuorum``.
    """

    name = "rack"
    #: how many leading path components name a location at each level
    _levels: tuple[int, ...] = (0,)  # 0 = the whole rack path

    def __init__(
        self,
        rack_of: Callable[[str], str | None] | Mapping[str, str],
        *,
        min_racks_per_write_quorum: int = 2,
        enforce: bool = False,
        refresh: Callable[[Iterable[str]], None] | None = None,
        close: Callable[[], None] | None = None,
        rng: random.Random | None = None,
    ):
        super().__init__(rng)
        if isinstance(rack_of, Mapping):
            rack_of = rack_of.get
        self._rack_of = rack_of
        self._refresh = refresh
        self._close = close
        self.min_racks = max(1, int(min_racks_per_write_quorum))
        self.enforce = bool(enforce)

    def refresh(self, bookies: Iterable[str] = ()) -> None:
        if self._refresh is not None:
            self._refresh(bookies)

    def close(self) -> None:
        if self._close is not None:
            self._close()

    # -- locations ---------------------------------------------------------------
    def rack(self, bookie: str) -> str:
        """The bookie's rack path, ``/default-rack`` when no source names it."""
        rack = self._rack_of(bookie)
        return rack if rack else DEFAULT_RACK

    def _mins(self, write_quorum: int) -> tuple[int, ...]:
        """Locations each write quorum must cover, per level."""
        return (min(write_quorum, self.min_racks),)

    def _keys(self, rack: str) -> tuple[str, ...]:
        """A rack's location at each level (here only the rack itself)."""
        return (rack,)

    def _level_word(self, level: int) -> str:
        return "racks"

    # -- choosing ---------------------------------------------------------------
    def _groups(self, candidates: Iterable[str]) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for b in candidates:
            groups.setdefault(self.rack(b), []).append(b)
        if self.enforce:  # Java leaves the default rack out when enforcing
            groups.pop(DEFAULT_RACK, None)
        return groups

    @staticmethod
    def _window_state(windows: Iterable[Iterable[int]], slots: Slots, position: int, levels: int) -> list[WindowState]:
        """Per write quorum of ``position``: the locations already in it (per
        level) and how many of its other positions are still empty."""
        state: list[WindowState] = []
        for window in windows:
            seen: list[set[str]] = [set() for _ in range(levels)]
            unfilled = 0
            for p in window:
                if p == position:
                    continue
                k = slots[p]
                if k is None:
                    unfilled += 1
                else:
                    for level in range(levels):
                        seen[level].add(k[level])
            state.append((seen, unfilled))
        return state

    @staticmethod
    def _score(keys: tuple[str, ...], state: list[WindowState], mins: tuple[int, ...]) -> tuple[int, ...]:
        """Write quorums of the position a bookie at ``keys`` would leave
        short of locations, per level (smaller is better)."""
        return tuple(
            sum(1 for seen, unfilled in state if len(seen[level]) + (keys[level] not in seen[level]) + unfilled < need)
            for level, need in enumerate(mins)
        )

    def _pick_group(
        self,
        groups: dict[str, list[str]],
        position: int,
        slots: Slots,
        write_quorum: int,
        avoid: str | None,
        prefer: str | None,
    ) -> str | None:
        """The rack to take the bookie of ``position`` from, or ``None`` (enforced and impossible)."""
        ensemble_size = len(slots)
        mins = self._mins(write_quorum)
        state = self._window_state(
            _schedule(ensemble_size, write_quorum).quorums_with(position), slots, position, len(mins)
        )
        if (
            prefer is not None
            and groups.get(prefer)
            and (not self.enforce or not any(self._score(self._keys(prefer), state, mins)))
        ):
            return prefer
        usage: list[dict[str, int]] = [{} for _ in mins]
        for k in slots:
            if k is not None:
                for level in range(len(mins)):
                    usage[level][k[level]] = usage[level].get(k[level], 0) + 1
        best, best_key = None, None
        names = [r for r, members in groups.items() if members]
        self._rng.shuffle(names)
        for rack in names:
            keys = self._keys(rack)
            short = self._score(keys, state, mins)
            if self.enforce and any(short):
                continue
            key = short + tuple(usage[level].get(keys[level], 0) for level in range(len(mins))) + (rack == avoid,)
            if best_key is None or key < best_key:
                best, best_key = rack, key
        return best

    def _take(self, groups: dict[str, list[str]], rack: str) -> str:
        members = groups[rack]
        i = self._rng.randrange(len(members))
        members[i], members[-1] = members[-1], members[i]
        return members.pop()

    def _enforcement_error(
        self, what: str, groups: dict[str, list[str]], write_quorum: int, readonly: Collection[str], needed: int
    ) -> NotEnoughBookies:
        mins = self._mins(write_quorum)
        have = [len({self._keys(r)[level] for r, m in groups.items() if m}) for level in range(len(mins))]
        level = next((lv for lv in range(len(mins)) if have[lv] < mins[lv]), len(mins) - 1)
        word = self._level_word(level)
        available = sum(len(m) for m in groups.values())
        where = (
            f"the usable bookies are in only {have[level]} {word}"
            if have[level] < mins[level]
            else f"the usable bookies' {have[level]} {word} cannot give every write quorum that spread"
        )
        return NotEnoughBookies(
            f"{what}: every write quorum of {write_quorum} bookies must span {mins[level]} {word} and {where} "
            f"(enforceMinNumRacksPerWriteQuorum is set; {len(set(readonly))} read-only, "
            f"bookies in {DEFAULT_RACK} are not used)",
            needed=needed,
            available=available,
            readonly=len(set(readonly)),
        )

    def new_ensemble(
        self,
        size: int,
        writable: Iterable[str],
        readonly: Collection[str] = (),
        exclude: Collection[str] = (),
        *,
        write_quorum: int | None = None,
    ) -> list[str]:
        if size < 1:
            raise ValueError(f"ensemble size must be >= 1, got {size}")
        write_quorum = size if write_quorum is None else int(write_quorum)
        exclude = set(exclude)
        candidates, excluded = self._candidates(writable, readonly, exclude)
        if (
            self.enforce
            and len(candidates) >= size
            and sum(1 for b in candidates if self.rack(b) != DEFAULT_RACK) < size
        ):
            raise self._enforcement_error(
                f"cannot choose {size} bookies", self._groups(candidates), write_quorum, readonly, size
            )
        if len(candidates) < size:
            raise _too_few(size, candidates, readonly, excluded)
        slots: Slots = [None] * size
        out: list[str] = []
        prev = None
        groups = None  # rack -> candidates, built only when a draw finds no new rack
        for position in range(size):
            bookie = self._fresh(candidates, out, slots)
            if bookie is not None:
                rack = self.rack(bookie)
                if groups is not None:
                    groups[rack].remove(bookie)
            else:
                if groups is None:
                    taken = set(out)
                    groups = self._groups(b for b in candidates if b not in taken)
                picked = self._pick_group(groups, position, slots, write_quorum, avoid=prev, prefer=None)
                if picked is None:
                    raise self._enforcement_error(
                        f"cannot place an ensemble of {size}", groups, write_quorum, readonly, size
                    )
                rack = picked
                bookie = self._take(groups, rack)
            out.append(bookie)
            slots[position] = self._keys(rack)
            prev = rack
        return out

    def _fresh(self, candidates: list[str], chosen: list[str], slots: Slots, tries: int = 24) -> str | None:
        """A random candidate whose location is new to the ensemble at every
        level (the best any choice can do), or ``None`` when a few draws find
        none -- then the racks are weighed one by one.  Drawing bookies, not
        racks, keeps Java's odds: each bookie of an allowed rack is as likely."""
        used = [{k[level] for k in slots if k is not None} for level in range(len(self._mins(1)))]
        for _ in range(tries):
            bookie = candidates[self._rng.randrange(len(candidates))]
            rack = self.rack(bookie)
            if self.enforce and rack == DEFAULT_RACK:
                continue
            keys = self._keys(rack)
            if bookie not in chosen and not any(keys[level] in used[level] for level in range(len(used))):
                return bookie
        return None

    def replace_bookies(
        self,
        ensemble: Sequence[str],
        failed: Collection[str],
        writable: Iterable[str],
        readonly: Collection[str] = (),
        exclude: Collection[str] = (),
        *,
        write_quorum: int | None = None,
    ) -> list[str]:
        failed = set(failed)
        to_replace = [i for i, b in enumerate(ensemble) if b in failed]
        if not to_replace:
            return list(ensemble)
        write_quorum = len(ensemble) if write_quorum is None else int(write_quorum)
        banned = set(ensemble) | failed | set(exclude)
        candidates, excluded = self._candidates(writable, readonly, banned)
        if len(candidates) < len(to_replace):
            raise _too_few_replacements(ensemble, to_replace, candidates, readonly, excluded)
        groups = self._groups(candidates)
        slots = [None if i in to_replace else self._keys(self.rack(b)) for i, b in enumerate(ensemble)]
        out = list(ensemble)
        for i in to_replace:
            lost_rack = self.rack(ensemble[i])
            rack = self._pick_group(groups, i, slots, write_quorum, avoid=None, prefer=lost_rack)
            if rack is None:
                raise self._enforcement_error(
                    f"cannot replace {ensemble[i]}", groups, write_quorum, readonly, len(to_replace)
                )
            out[i] = self._take(groups, rack)
            slots[i] = self._keys(rack)
        return out

    def adherence(self, ensemble: Sequence[str], write_quorum: int) -> str:
        """``FAIL`` when a write quorum covers fewer locations than the policy
        asks (or, when enforcing, contains a bookie of the default rack)."""
        if not ensemble:
            return MEETS_STRICT
        racks = [self.rack(b) for b in ensemble]
        if self.enforce and DEFAULT_RACK in racks:
            return FAIL
        mins = self._mins(write_quorum)
        keys = [self._keys(r) for r in racks]
        for quorum in _schedule(len(ensemble), write_quorum).quorums():
            window = [keys[i] for i in quorum]
            for level, need in enumerate(mins):
                if len({k[level] for k in window}) < need:
                    return FAIL
        return MEETS_STRICT


class RegionAwarePlacement(RackAwarePlacement):
    """Racks named ``/region/rack``: write quorums cover ``min(Qw,
    min_regions)`` regions first, then ``min(Qw, min_racks_per_write_quorum)``
    racks; a rack without a region part is its own region.  Java's
    ``reppMinimumRegionsForDurability`` is ``min_regions`` (default 2)."""

    name = "region"

    def __init__(self, rack_of: Callable[[str], str | None] | Mapping[str, str], *, min_regions: int = 2, **kw: Any):
        super().__init__(rack_of, **kw)
        self.min_regions = max(1, int(min_regions))

    def _mins(self, write_quorum: int) -> tuple[int, ...]:
        return (min(write_quorum, self.min_regions), min(write_quorum, self.min_racks))

    def _keys(self, rack: str) -> tuple[str, ...]:
        return (region_of(rack), rack)

    def _level_word(self, level: int) -> str:
        return "regions" if level == 0 else "racks"


def segments_not_adhering(md: LedgerMetadata, placement: RandomPlacement) -> list[int]:
    """First entry ids of the segments of ledger metadata ``md`` whose ensemble
    does not meet ``placement`` (``bkctl ledger list --not-adhering`` and the
    auditor's placement check)."""
    return [first for first, ensemble in md.ensembles if placement.adherence(list(ensemble), md.write_quorum) == FAIL]


def region_of(rack: str) -> str:
    """``/region`` of ``/region/rack`` (a one-part path is its own region)."""
    parts = [p for p in rack.split("/") if p]
    return "/" + parts[0] if parts else DEFAULT_RACK


#: ``--placement`` names -> classes
POLICIES = {"random": RandomPlacement, "rack": RackAwarePlacement, "region": RegionAwarePlacement}
