"""Autorecovery operations: ask who audits, trigger an audit, and see which
worker holds which ledger (Java's ``whoisauditor``, ``triggeraudit`` and
``queryautorecoverystatus``; the daemon itself, Java's ``autorecovery``, is
:mod:`bkctl.ops.autorecovery_daemon`)."""
from __future__ import annotations

from bkctl.wire.autorecovery.service import CONFIG_KEYS, AutoRecoveryConfig, config_from_keys


def config_from_settings(settings: dict[str, str]) -> AutoRecoveryConfig:
    """An :class:`AutoRecoveryConfig` from bk_server.conf keys (Java's names and
    units), each checked by bookied's schema as bookied checks it
    (:func:`bkctl.bookied.config.validate_setting`); ValueError (a ConfigError)
    with a one-line message names an unknown key or a bad value."""
    from bkctl.bookied.config import ConfigError, validate_setting

    values = {}
    for key, text in settings.items():
        if key not in CONFIG_KEYS:
            raise ConfigError(f"unknown autorecovery key {key!r} (one of {', '.join(sorted(CONFIG_KEYS))})",
                              key=key)
        values[key] = validate_setting(key, text)
    return config_from_keys(values)


def who_is_auditor(store) -> dict:
    return {"auditor": store.auditor.current()}


def trigger_audit(store) -> dict:
    """Rewrite ``lostBookieRecoveryDelay`` with its own value: the auditor audits
    at once.  Refused (AutorecoveryDisabled: exit 4, NoAuditor: exit 5) when
    no audit would run, as Java's shell and bookied's HTTP endpoint refuse it."""
    from bkctl.wire.autorecovery.control import trigger_audit as rewrite_delay

    auditor, delay = rewrite_delay(store)
    return {"triggered": True, "auditor": auditor, "lost_bookie_recovery_delay": delay}


#: how far back ``force-audit`` sets a check's last run, as Java's forceauditchecks: 21 days,
#: longer than any check's usual interval, so a starting auditor finds the check due at once
FORCE_AUDIT_AGE_MS = 21 * 24 * 3600 * 1000


def force_audit(store, checks, now_ms: int) -> dict:
    """Java's ``forceauditchecks``: set the last run of each of ``checks``
    (:data:`~bkctl.wire.metadata.paths.UR_CHECK_CTIMES` names) 21 days back.  An
    auditor reads them only when it starts (Java's and ours), so they run once the
    elected auditor's daemon restarts, or a new auditor is elected.  Returns
    ``checks``, ``ctime`` (ms), ``previous`` {check: ms or null}, ``auditor``."""
    ctime = now_ms - FORCE_AUDIT_AGE_MS
    previous = {}
    for check in checks:
        previous[check] = store.underreplication.check_ctime(check)
        store.underreplication.set_check_ctime(check, ctime)
    return {"checks": list(checks), "ctime": ctime, "previous": previous, "auditor": store.auditor.current()}


def _worker_of(ledger_id: int, workers: dict) -> tuple[str | None, dict | None]:
    """(daemon id, its last failure on this ledger) of the worker whose status says it holds the ledger."""
    for worker_id, doc in workers.items():
        failure = doc.get("last_failure")
        on_it = failure if isinstance(failure, dict) and failure.get("ledger_id") == ledger_id else None
        if doc.get("current") == ledger_id or ledger_id in (doc.get("held") or []):
            return worker_id, on_it
    return None, None


def query_status(store) -> list[dict]:
    """Ledgers being re-replicated now: ``worker`` (the daemon's bookie id, from its
    status node; the lock's host name when no daemon publishes one), ``host``
    (what the lock holds, as Java writes it), ``state`` (re-replicating, or
    failed: lock kept before another worker tries) and ``last_failure``
    (``reason``, ``at`` ms) of that worker on that ledger."""
    from bkctl.wire.autorecovery.status import read_daemon_status

    workers = read_daemon_status(store)["workers"]
    rows = []
    for ledger_id, host in sorted(store.underreplication.locks().items()):
        worker, failure = _worker_of(ledger_id, workers)
        rows.append({"ledger_id": ledger_id, "worker": worker or host, "host": host,
                     "state": "failed, lock kept" if failure else "re-replicating",
                     "last_failure": failure})
    return rows


def autorecovery_report(store, now_ms: int) -> dict:
    """Everything ``autorecovery status`` shows: the switch, the delay, the auditor,
    lost bookies (cookie, not registered: since when the auditor saw them go, when
    they are due), what the auditor waits for, each worker, each marked ledger."""
    from bkctl.wire.autorecovery.status import read_daemon_status

    daemons = read_daemon_status(store)
    auditor_doc = daemons["auditor"] or {}
    enabled = store.underreplication.is_enabled()
    delay = store.underreplication.lost_bookie_recovery_delay()
    registered = set(store.registration.writable_bookies()) | set(store.registration.readonly_bookies())
    seen = {d["bookie_id"]: d for d in auditor_doc.get("lost", []) if isinstance(d, dict) and "bookie_id" in d}
    lost = []
    for bookie in sorted((set(store.registration.all_bookies()) | set(seen)) - registered):
        d = seen.get(bookie, {})
        due = d.get("due")
        lost.append({"bookie_id": bookie, "lost_since": d.get("lost_since"), "due": due,
                     "due_in": None if due is None else max(0.0, round((due - now_ms) / 1000.0, 1)),
                     "not_waited": d.get("not_waited"), "seen_by_auditor": bookie in seen})
    auditor = store.auditor.current()
    if auditor is None:
        waiting = "no auditor is elected: nothing is audited or marked"
    elif not enabled:
        held = auditor_doc.get("held_back") or 0
        waiting = ("held back while autorecovery is disabled"
                   + (f": {held} ledgers to mark once enabled" if held else ""))
    elif any(row["due"] is not None for row in lost):
        soonest = min(row["due_in"] for row in lost if row["due_in"] is not None)
        waiting = f"lostBookieRecoveryDelay: the next lost bookie is due in {soonest:g} s"
    else:
        waiting = "nothing"
    workers = daemons["workers"]
    ledgers = []
    locks = store.underreplication.locks()
    for mark in store.underreplication.marks():
        worker, failure = _worker_of(mark.ledger_id, workers)
        if mark.ledger_id not in locks:
            state = "waiting for a worker" if enabled else "waiting: autorecovery is disabled"
        elif failure:
            state = f"failed: {failure.get('reason')}"
        else:
            state = "being re-replicated"
        ledgers.append({"ledger_id": mark.ledger_id, "missing_replicas": list(mark.replicas), "ctime": mark.ctime,
                        "worker": worker or locks.get(mark.ledger_id), "state": state})
    return {"enabled": enabled, "lost_bookie_recovery_delay": delay, "underreplicated": len(ledgers),
            "auditor": auditor, "lost_bookies": lost, "auditor_waits_for": waiting,
            "workers": [dict(doc, worker=worker_id) for worker_id, doc in sorted(workers.items())],
            "ledgers": ledgers}
