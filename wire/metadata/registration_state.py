"""A bookie's registration state: one answer for every command that names it.

A bookie registers by an ephemeral node, ``available/<id>`` when writable and
``available/readonly/<id>`` when read-only.  Moving from one to the other it creates
the new node before it deletes the old one, as a Java bookie does, so for a moment it
is in both lists.  It counts as read-only then: a bookie that may be turning read-only
(draining, a full disk) must not be handed new data, and the client's placement
chooses no bookie of the read-only list for a new ensemble.  ``bookie list``, ``rack
list``, ``bookie describe``, the movers' targets and the shell's completions all ask
here, so they never disagree while a bookie moves.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .store import RegistrationManager

__all__ = ["RegistrationState", "Registrations", "replica_targets", "takes_writes"]


class RegistrationState(Enum):
    """How a bookie is registered in ZooKeeper (the words every view prints)."""

    WRITABLE = "writable"
    READ_ONLY = "read-only"
    NOT_REGISTERED = "not registered"


def takes_writes(writable: Iterable[str], readonly: Collection[str]) -> list[str]:
    """The bookies of ``writable`` that are not also read-only, in ``writable``'s order
    without repeats: the bookies new data may go to."""
    ro = set(readonly)
    return [b for b in dict.fromkeys(writable) if b not in ro]


@dataclass(frozen=True, slots=True)
class Registrations:
    """Both registration lists, read once: the states of many bookies from two reads."""

    writable: frozenset[str]
    readonly: frozenset[str]

    @classmethod
    def read(cls, registration: RegistrationManager) -> Registrations:
        return cls(frozenset(registration.writable_bookies()), frozenset(registration.readonly_bookies()))

    def state_of(self, bookie_id: str) -> RegistrationState:
        if bookie_id in self.readonly:
            return RegistrationState.READ_ONLY
        if bookie_id in self.writable:
            return RegistrationState.WRITABLE
        return RegistrationState.NOT_REGISTERED

    @property
    def registered(self) -> frozenset[str]:
        """Every registered bookie, either kind."""
        return self.writable | self.readonly

    @property
    def taking_writes(self) -> frozenset[str]:
        """The bookies new data may go to (:func:`takes_writes`)."""
        return self.writable - self.readonly


def replica_targets(registration: RegistrationManager) -> frozenset[str]:
    """The bookies fsck may point a segment at (a replica's new holder, checked again before a
    fix writes): taking writes (not read-only: draining or full) and holding a cookie (a bookie
    decommissioned while still registered has none)."""
    return Registrations.read(registration).taking_writes.intersection(registration.all_bookies())
