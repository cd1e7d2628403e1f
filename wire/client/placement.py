"""Choosing bookies for ledger ensembles.

Pure functions of the bookie lists the caller fetched from the metadata
store; nothing here does I/O, so the policy is easy to test and to swap.

* :meth:`RandomPlacement.new_ensemble`: ``size`` distinct writable bookies
  at random.  A bookie that is also registered read-only is never chosen
  (a bookie going read-only creates its read-only node before it deletes
  the writable one, so both can be seen for a moment).
* :meth:`RandomPlacement.replace_bookies`: the ensemble of a new segment
  after some of its bookies failed, each failed one swapped for a random
  writable bookie that is neither in the ensemble nor known to have failed.

Too few candidates raise :class:`NotEnoughBookies`, whose message gives the
counts the operator needs ("need 3 writable bookies, found 2 (1 read-only)").
"""
from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Sequence

from .errors import NotEnoughBookies

__all__ = ["RandomPlacement"]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class RandomPlacement:
    """Uniformly random ensembles (BookKeeper's default policy without racks).

    ``rng`` is any :class:`random.Random`; pass a seeded one for
    reproducible choices in tests.
    """

    def __init__(self, rng: random.Random | None = None):
        self._rng = rng if rng is not None else random.SystemRandom()

    @staticmethod
    def _candidates(writable: Iterable[str], readonly: Collection[str],
                    exclude: Collection[str]) -> tuple[list[str], int]:
        ro = set(readonly)
        usable = [b for b in dict.fromkeys(writable) if b not in ro]
        candidates = [b for b in usable if b not in exclude]
        return candidates, len(usable) - len(candidates)

    def new_ensemble(self, size: int, writable: Iterable[str], readonly: Collection[str] = (),
                     exclude: Collection[str] = ()) -> list[str]:
        """``size`` distinct bookies drawn from ``writable`` minus ``readonly`` and ``exclude``."""
        if size < 1:
            raise ValueError(f"ensemble size must be >= 1, got {size}")
        exclude = set(exclude)
        candidates, excluded = self._candidates(writable, readonly, exclude)
        if len(candidates) < size:
            extra = f", {excluded} excluded" if excluded else ""
            raise NotEnoughBookies(
                f"need {_plural(size, 'writable bookie')}, found {len(candidates)} "
                f"({len(set(readonly))} read-only{extra})",
                needed=size, available=len(candidates), readonly=len(set(readonly)), excluded=excluded)
        return self._rng.sample(candidates, size)

    def replace_bookies(self, ensemble: Sequence[str], failed: Collection[str], writable: Iterable[str],
                        readonly: Collection[str] = (), exclude: Collection[str] = ()) -> list[str]:
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
            names = ", ".join(ensemble[i] for i in to_replace)
            raise NotEnoughBookies(
                f"need {_plural(len(to_replace), 'writable bookie')} outside the ensemble to replace "
                f"{names}, found {len(candidates)} ({len(set(readonly))} read-only, "
                f"{excluded} in the ensemble or failed)",
                needed=len(to_replace), available=len(candidates), readonly=len(set(readonly)),
                excluded=excluded)
        chosen = self._rng.sample(candidates, len(to_replace))
        out = list(ensemble)
        for i, b in zip(to_replace, chosen):
            out[i] = b
        return out


class PinnedPlacement(RandomPlacement):
    """Ensembles drawn only from ``bookies`` (a sanity test pinned to given bookies):
    an ensemble change that would need another bookie fails with NotEnoughBookies."""

    def __init__(self, bookies: Iterable[str], rng: random.Random | None = None):
        super().__init__(rng)
        self.bookies = tuple(bookies)

    def new_ensemble(self, size: int, writable: Iterable[str], readonly: Collection[str] = (),
                     exclude: Collection[str] = ()) -> list[str]:
        writable = set(writable)
        return super().new_ensemble(size, [b for b in self.bookies if b in writable], readonly, exclude)

    def replace_bookies(self, ensemble: Sequence[str], failed: Collection[str], writable: Iterable[str],
                        readonly: Collection[str] = (), exclude: Collection[str] = ()) -> list[str]:
        writable = set(writable)
        return super().replace_bookies(ensemble, failed, [b for b in self.bookies if b in writable], readonly,
                                       exclude)
