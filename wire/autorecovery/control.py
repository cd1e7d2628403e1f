"""The operator's side of autorecovery, shared by ``bkctl autorecovery`` and
bookied's HTTP admin API (blocking: call them off the reactor thread).

* :func:`trigger_audit` -- Java's ``BookKeeperAdmin.triggerAudit``: rewriting
  ``B/lostBookieRecoveryDelay`` with its own value makes the elected auditor
  audit at once.  Refused, as Java refuses it, while autorecovery is disabled
  or no auditor is elected (:func:`require_auditor`); the delay is never
  changed, only rewritten.
* :func:`matching_marks` -- Java's ``listunderreplicated`` filters.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from bkctl.wire.errors import AutorecoveryDisabled, NoAuditor
from bkctl.wire.metadata.store import MetadataStore, UnderreplicatedMark

__all__ = ["matching_marks", "require_auditor", "trigger_audit"]


def require_auditor(store: MetadataStore) -> str:
    """The elected auditor's id; :class:`AutorecoveryDisabled` while autorecovery
    is disabled, :class:`NoAuditor` when no daemon has won the election."""
    if not store.underreplication.is_enabled():
        raise AutorecoveryDisabled("autorecovery is disabled (`bkctl autorecovery enable` enables it)")
    auditor = store.auditor.current()
    if auditor is None:
        raise NoAuditor("no auditor elected: no autorecovery daemon is running")
    return auditor


def trigger_audit(store: MetadataStore) -> tuple[str, int]:
    """Rewrite ``lostBookieRecoveryDelay`` with the value it has: the auditor's
    watch fires on any write.  Returns (auditor, delay).  A missing delay (the
    auditor has not started yet) is :class:`NoAuditor`: writing one would set
    the delay every later auditor uses instead of its own configuration."""
    auditor = require_auditor(store)
    delay = store.underreplication.lost_bookie_recovery_delay()
    if delay is None:
        raise NoAuditor(
            f"no auditor elected yet: {auditor} won the election but has not started "
            "(no lostBookieRecoveryDelay); try again shortly"
        )
    store.underreplication.set_lost_bookie_recovery_delay(delay)
    return auditor, delay


def matching_marks(
    marks: Iterable[UnderreplicatedMark], include: Iterable[str] = (), exclude: Iterable[str] = ()
) -> Iterator[UnderreplicatedMark]:
    """The :class:`~bkctl.wire.metadata.store.UnderreplicatedMark` s missing a replica on
    one of ``include`` (all when empty) and on none of ``exclude``."""
    wanted, unwanted = set(include), set(exclude)
    for mark in marks:
        if wanted and not wanted.intersection(mark.replicas):
            continue
        if unwanted.intersection(mark.replicas):
            continue
        yield mark
