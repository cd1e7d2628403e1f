"""Autorecovery operations: ask who audits, trigger an audit, and see which
worker holds which ledger (Java's ``whoisauditor``, ``triggeraudit`` and
``queryautorecoverystatus``; the daemon itself, Java's ``autorecovery``, is
:mod:`bkctl.ops.autorecovery_daemon`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .results import inlined

if TYPE_CHECKING:
    from bkctl.wire.autorecovery.lostentries import LostRecord
    from bkctl.wire.autorecovery.repairstate import Attempt, LedgerRepair, LostBookie, Snapshot
    from bkctl.wire.metadata.store import MetadataStore


@dataclass(frozen=True)
class Auditor:
    """``autorecovery who-is-auditor``: the elected auditor, None when none is."""

    auditor: str | None


@dataclass(frozen=True)
class AuditTriggered:
    """``autorecovery trigger-audit``: the auditor that audits now, and the delay it was told again."""

    triggered: bool
    auditor: str | None
    lost_bookie_recovery_delay: int | None


@dataclass(frozen=True)
class AuditForced:
    """``autorecovery force-audit``: the checks whose last run (``ctime``, ms) went 21 days back,
    what each was before (ms or None), and the auditor whose restart runs them."""

    checks: list[str]
    ctime: int
    previous: dict[str, int | None]
    auditor: str | None


def who_is_auditor(store: MetadataStore) -> Auditor:
    return Auditor(store.auditor.current())


def trigger_audit(store: MetadataStore) -> AuditTriggered:
    """Rewrite ``lostBookieRecoveryDelay`` with its own value: the auditor audits
    at once.  Refused (AutorecoveryDisabled: exit 4, NoAuditor: exit 5) when
    no audit would run, as Java's shell and bookied's HTTP endpoint refuse it."""
    from bkctl.wire.autorecovery.control import trigger_audit as rewrite_delay

    auditor, delay = rewrite_delay(store)
    return AuditTriggered(True, auditor, delay)


#: how far back ``force-audit`` sets a check's last run, as Java's forceauditchecks: 21 days,
#: longer than any check's usual interval, so a starting auditor finds the check due at once
FORCE_AUDIT_AGE_MS = 21 * 24 * 3600 * 1000


def force_audit(store: MetadataStore, checks: Iterable[str], now_ms: int) -> AuditForced:
    """Java's ``forceauditchecks``: set the last run of each of ``checks``
    (:data:`~bkctl.wire.metadata.paths.UR_CHECK_CTIMES` names) 21 days back.  An
    auditor reads them only when it starts (Java's and ours), so they run once the
    elected auditor's daemon restarts, or a new auditor is elected.  Returns
    ``checks``, ``ctime`` (ms), ``previous`` {check: ms or null}, ``auditor``."""
    checks = list(checks)
    ctime = now_ms - FORCE_AUDIT_AGE_MS
    previous: dict[str, int | None] = {}
    for check in checks:
        previous[check] = store.underreplication.check_ctime(check)
        store.underreplication.set_check_ctime(check, ctime)
    return AuditForced(checks, ctime, previous, store.auditor.current())


@dataclass(frozen=True, slots=True)
class RepairRow:
    """A ledger's line of ``query-status``, ``underreplicated`` and ``autorecovery status``:
    its repair state (:class:`~bkctl.wire.autorecovery.repairstate.LedgerRepair`, whose keys
    the document has), the line for people, and the last failed attempt (None: none)."""

    text: str
    last_failure: Attempt | None
    repair: LedgerRepair = inlined()


@dataclass(frozen=True, slots=True)
class WorkerRow:
    """A replication worker of ``autorecovery status``: its bookie id, host, the ledgers it
    copies now, how many it holds, when its status was written (ms)."""

    worker: str
    host: str | None
    active: list[int]
    holds: int
    updated: int | None


@dataclass(frozen=True, slots=True)
class AutorecoveryReport:
    """Everything ``autorecovery status`` shows (and ``bkctl top``'s header): the switch, the
    delay, the auditor, the lost bookies, what the auditor waits for, each worker (None in
    ``workers_note`` unless an empty list says nothing), each marked or locked ledger, and the
    entries the workers found no good copy of."""

    enabled: bool
    lost_bookie_recovery_delay: int | None
    underreplicated: int
    auditor: str | None
    auditor_keeps_status: bool
    lost_bookies: list[LostBookie]
    auditor_waits_for: str
    workers: list[WorkerRow]
    workers_note: str | None
    ledgers: list[RepairRow]
    lost_entries: list[LostRecord]


def _row(snap: Snapshot, ledger_id: int) -> RepairRow:
    from bkctl.wire.autorecovery.repairstate import ledger_state, state_text

    repair = ledger_state(snap, ledger_id)
    return RepairRow(state_text(repair, snap.now_ms), repair.last_attempt, repair)


def query_status(store: MetadataStore, now_ms: int | None = None) -> list[RepairRow]:
    """Ledgers a worker holds now (their replication lock), each as the repair model
    (:mod:`bkctl.wire.autorecovery.repairstate`) says: ``state``, ``text``,
    ``worker`` (its bookie id; None for a worker that keeps no status, Java's),
    ``lock`` (what the lock holds: our worker's bookie id, Java's host name),
    ``since``/``until`` (ms), ``attempts`` and ``last_failure`` (the last of them)."""
    import time

    from bkctl.wire.autorecovery.repairstate import read_snapshot

    snap = read_snapshot(store, int(time.time() * 1000) if now_ms is None else now_ms, marks=False)
    for ledger_id in snap.locks:
        mark = store.underreplication.get(ledger_id)
        if mark is not None:
            snap.marks[ledger_id] = mark
    return [_row(snap, ledger_id) for ledger_id in sorted(snap.locks)]


def underreplicated(
    store: MetadataStore, include: Iterable[str] = (), exclude: Iterable[str] = (), now_ms: int | None = None
) -> list[RepairRow]:
    """Marked ledgers (Java's ``listunderreplicated``): ``include`` keeps those
    missing a replica on any of these bookies, ``exclude`` drops those missing
    one on any of these; each with its state as :func:`query_status` gives it."""
    import time

    from bkctl.wire.autorecovery.control import matching_marks
    from bkctl.wire.autorecovery.repairstate import read_snapshot

    snap = read_snapshot(store, int(time.time() * 1000) if now_ms is None else now_ms)
    return [_row(snap, mark.ledger_id) for mark in matching_marks(snap.marks.values(), include, exclude)]


def autorecovery_report(store: MetadataStore, now_ms: int) -> AutorecoveryReport:
    """Everything ``autorecovery status`` shows: the switch, the delay, the auditor,
    the lost bookies (:func:`~bkctl.wire.autorecovery.repairstate.lost_bookies`),
    what the auditor waits for, each worker, each marked or locked ledger's
    state (:func:`query_status`'s rows), and the entries the workers found no good
    copy of (:mod:`bkctl.wire.autorecovery.lostentries`; ledgers deleted since left out)."""
    from bkctl.wire.autorecovery.lostentries import read_records
    from bkctl.wire.autorecovery.repairstate import lost_bookies, read_snapshot

    snap = read_snapshot(store, now_ms)
    lost = lost_bookies(snap)
    doc = snap.auditor_doc
    dues = [b.due_in for b in lost if b.due_in is not None and b.due is not None and b.due > now_ms]
    if snap.auditor is None:
        waiting = "no auditor is elected: nothing is audited or marked"
    elif not snap.enabled:
        held = 0 if doc is None else doc.held_back
        waiting = "held back while autorecovery is disabled" + (
            f": {held} ledgers to mark once enabled" if held else ""
        )
    elif dues:
        waiting = f"lostBookieRecoveryDelay: the next lost bookie is due in {min(dues):g} s"
    elif doc is None:
        waiting = (
            f"not known: the auditor {snap.auditor} keeps no status (Java's?); it marks a lost "
            "bookie's ledgers lostBookieRecoveryDelay after it saw the bookie go"
        )
    else:
        waiting = "nothing"
    ledgers = [_row(snap, lid) for lid in sorted(set(snap.marks) | set(snap.locks))]
    workers = [
        WorkerRow(
            worker=d.worker or wid,
            host=d.host,
            active=sorted(d.active),
            holds=len(d.holds or {}),
            updated=d.updated,
        )
        for wid, d in sorted(snap.workers.items())
    ]
    # Java's auditor and workers keep no status: an empty list then says nothing about its workers
    workers_note = (
        None
        if workers or snap.auditor is None or doc is not None
        else (
            "not known: the auditor keeps no status (Java's?), and Java's workers keep none either -- each Java "
            "bookie with autoRecoveryDaemonEnabled runs one"
        )
    )
    return AutorecoveryReport(
        enabled=snap.enabled,
        lost_bookie_recovery_delay=snap.delay,
        underreplicated=len(snap.marks),
        auditor=snap.auditor,
        auditor_keeps_status=doc is not None,
        lost_bookies=lost,
        auditor_waits_for=waiting,
        workers=workers,
        workers_note=workers_note,
        ledgers=ledgers,
        lost_entries=[r for lid, r in sorted(read_records(store).items()) if store.ledgers.exists(lid)],
    )
