"""The operator's side of autorecovery, shared by ``bkctl autorecovery`` and
bookied's HTTP admin API (blocking: call them off the reactor thread).

* :func:`trigger_audit` -- Java's ``BookKeeperAdmin.triggerAudit``: rewriting
  ``B/lostBookieRecoveryDelay`` with its own value makes the elected auditor
  audit at once.
* :func:`matching_marks` -- Java's ``listunderreplicated`` filters.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator

__all__ = ["matching_marks", "trigger_audit"]


def trigger_audit(store) -> int:
    """Rewrite ``lostBookieRecoveryDelay`` with the value it has (0 when it is
    missing); returns that value.  The auditor's watch fires on any write."""
    delay = store.underreplication.lost_bookie_recovery_delay()
    delay = 0 if delay is None else delay
    store.underreplication.set_lost_bookie_recovery_delay(delay)
    return delay


def matching_marks(marks: Iterable, include: Iterable[str] = (), exclude: Iterable[str] = ()) -> Iterator:
    """The :class:`~bkctl.wire.metadata.store.UnderreplicatedMark` s missing a replica on
    one of ``include`` (all when empty) and on none of ``exclude``."""
    include, exclude = set(include), set(exclude)
    for mark in marks:
        if include and not include.intersection(mark.replicas):
            continue
        if exclude.intersection(mark.replicas):
            continue
        yield mark
