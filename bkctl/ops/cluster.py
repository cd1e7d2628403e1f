"""Cluster-wide metadata operations: info, metaformat, autorecovery switches."""
from __future__ import annotations

from typing import Callable


def cluster_info(store) -> dict:
    layout = store.layout()
    writable, readonly = store.writable_bookies(), store.readonly_bookies()
    return {
        "uri": store.uri,
        "instance_id": store.instance_id(),
        "layout": None if layout is None else {"manager": layout.manager,
                                               "factory": layout.manager_factory_class,
                                               "format_version": layout.format_version},
        "bookies": {"writable": sorted(writable), "readonly": sorted(readonly),
                    "all": sorted(store.all_bookies())},
        "autorecovery": autorecovery_status(store),
    }


def metaformat(store, confirm: Callable[[], bool]) -> dict:
    """BookKeeper's ``metaformat``: ``confirm()`` is asked only when the cluster already exists."""
    existed = store.prepare_format()
    if existed and not confirm():
        return {"formatted": False, "existed": True}
    store.format_cluster()
    return {"formatted": True, "existed": existed, "instance_id": store.instance_id()}


def autorecovery_status(store) -> dict:
    return {
        "enabled": store.is_autorecovery_enabled(),
        "lost_bookie_recovery_delay": store.get_lost_bookie_recovery_delay(),
        "underreplicated": store.count_underreplicated(),
        "auditor": store.who_is_auditor(),
    }


def set_autorecovery(store, enabled: bool) -> dict:
    changed = store.enable_autorecovery() if enabled else store.disable_autorecovery()
    return {"enabled": enabled, "changed": changed}


def underreplicated(store, include=(), exclude=()) -> list[dict]:
    """Marked ledgers (Java's ``listunderreplicated``): ``include`` keeps those
    missing a replica on any of these bookies, ``exclude`` drops those missing
    one on any of these; ``worker`` is the host holding the replication lock."""
    from bkctl.wire.autorecovery.admin import matching_marks

    locks = store.underreplication_locks()
    rows = []
    for m in matching_marks(store.iter_underreplicated(), include, exclude):
        rows.append({"ledger_id": m.ledger_id, "missing_replicas": list(m.replicas), "ctime": m.ctime,
                     "worker": locks.get(m.ledger_id)})
    return rows
