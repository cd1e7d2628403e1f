"""Cluster-wide metadata operations: info, metaformat, autorecovery switches."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bkctl.wire.metadata.store import MetadataStore


def require_cluster(store: MetadataStore) -> None:
    """Raise (exit 3) unless the store's root holds a BookKeeper cluster
    (its LAYOUT or INSTANCEID), naming the closest root that does."""
    from bkctl.wire.metadata.errors import ClusterNotFound

    if store.cluster.holds_cluster():  # its errors are the store's (NoAuth: exit 5)
        return
    hint = store.cluster.closest_cluster_root()
    raise ClusterNotFound(
        f"no BookKeeper cluster at {store.uri}"
        + (
            f" (did you mean {hint}?)"
            if hint
            else f" (no LAYOUT or INSTANCEID under {store.root}; `bkctl metaformat` creates one)"
        )
    )


def cluster_info(store: MetadataStore, cluster_name: str | None = None) -> dict:
    layout = store.cluster.layout()
    writable, readonly = store.registration.writable_bookies(), store.registration.readonly_bookies()
    return {
        "uri": store.uri,
        "cluster": cluster_name,
        "instance_id": store.cluster.instance_id(),
        "layout": None
        if layout is None
        else {
            "manager": layout.manager,
            "factory": layout.manager_factory_class,
            "format_version": layout.format_version,
        },
        "bookies": {
            "writable": sorted(writable),
            "readonly": sorted(readonly),
            "all": sorted(store.registration.all_bookies()),
        },
        "autorecovery": autorecovery_status(store),
    }


def registered_bookies(store: MetadataStore) -> list[str]:
    """Every registered bookie, read-only ones marked, as the guards name them."""
    return store.registration.writable_bookies() + [f"{b} (read-only)" for b in store.registration.readonly_bookies()]


def metaformat(store: MetadataStore, confirm: Callable[[], bool], with_bookies: bool = False) -> dict:
    """BookKeeper's ``metaformat``: ``confirm()`` is asked only when the cluster already exists.

    Refuses (exit 4) while any bookie is registered, as ``cluster nuke`` does,
    unless ``with_bookies``: a new INSTANCEID under running bookies restarts
    ledger ids at 0, and the new ledgers collide with the old ones' data on them.
    """
    existed = store.cluster.prepare_format()
    running = registered_bookies(store) if existed else []
    if running and not with_bookies:
        from .errors import Conflict

        raise Conflict(
            f"bookies are still registered ({', '.join(running)}); stop them before formatting, "
            "or give --with-registered-bookies",
        )
    if existed and not confirm():
        return {"formatted": False, "existed": True}
    store.cluster.format()
    return {"formatted": True, "existed": existed, "instance_id": store.cluster.instance_id()}


def autorecovery_status(store: MetadataStore) -> dict:
    return {
        "enabled": store.underreplication.is_enabled(),
        "lost_bookie_recovery_delay": store.underreplication.lost_bookie_recovery_delay(),
        "underreplicated": store.underreplication.count(),
        "auditor": store.auditor.current(),
    }


def set_autorecovery(store: MetadataStore, enabled: bool) -> dict:
    changed = store.underreplication.enable() if enabled else store.underreplication.disable()
    return {"enabled": enabled, "changed": changed}
