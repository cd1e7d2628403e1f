"""Cluster-wide metadata operations: info, metaformat, autorecovery switches."""
from __future__ import annotations

from typing import Callable


def require_cluster(store) -> None:
    """Raise (exit 3) unless the store's root holds a BookKeeper cluster
    (its LAYOUT or INSTANCEID), naming the closest root that does."""
    from kazoo.exceptions import KazooException

    from bkctl.wire.metadata.errors import ClusterNotFound

    if store.cluster.holds_cluster():  # its errors are the store's (NoAuth: exit 5)
        return
    try:
        hint = _closest_cluster_root(store.client, store.root)
    except KazooException:  # a hint is a courtesy: ACLs may hide the neighbours
        hint = None
    raise ClusterNotFound(f"no BookKeeper cluster at {store.uri}"
                          + (f" (did you mean {hint}?)" if hint else " (no LAYOUT or INSTANCEID under "
                             f"{store.root}; `bkctl metaformat` creates one)"))


def _closest_cluster_root(zk, root: str, budget: int = 500) -> str | None:
    """The cluster root on this ZooKeeper most like ``root``: cluster roots
    are looked for among the nearest existing ancestor's children and
    grandchildren (at most ``budget`` znodes)."""
    import difflib

    from bkctl.wire.metadata import paths as P

    ancestor = root.rstrip("/").rsplit("/", 1)[0] or "/"
    while ancestor != "/" and not zk.exists(ancestor):
        ancestor = ancestor.rsplit("/", 1)[0] or "/"
    found: list[str] = []
    level = [ancestor]
    for _depth in range(2):
        nxt = []
        for parent in level:
            for child in sorted(zk.get_children(parent)):
                path = f"{parent.rstrip('/')}/{child}"
                if path == "/zookeeper" or budget <= 0:
                    continue
                budget -= 1
                if path != root and zk.exists(f"{path}/{P.LAYOUT}"):
                    found.append(path)
                else:
                    nxt.append(path)
        level = nxt
    best = difflib.get_close_matches(root, found, n=1, cutoff=0.5)
    return best[0] if best else None


def cluster_info(store, cluster_name: str | None = None) -> dict:
    layout = store.cluster.layout()
    writable, readonly = store.registration.writable_bookies(), store.registration.readonly_bookies()
    return {
        "uri": store.uri,
        "cluster": cluster_name,
        "instance_id": store.cluster.instance_id(),
        "layout": None if layout is None else {"manager": layout.manager,
                                               "factory": layout.manager_factory_class,
                                               "format_version": layout.format_version},
        "bookies": {"writable": sorted(writable), "readonly": sorted(readonly),
                    "all": sorted(store.registration.all_bookies())},
        "autorecovery": autorecovery_status(store),
    }


def metaformat(store, confirm: Callable[[], bool]) -> dict:
    """BookKeeper's ``metaformat``: ``confirm()`` is asked only when the cluster already exists."""
    existed = store.cluster.prepare_format()
    if existed and not confirm():
        return {"formatted": False, "existed": True}
    store.cluster.format()
    return {"formatted": True, "existed": existed, "instance_id": store.cluster.instance_id()}


def autorecovery_status(store) -> dict:
    return {
        "enabled": store.underreplication.is_enabled(),
        "lost_bookie_recovery_delay": store.underreplication.lost_bookie_recovery_delay(),
        "underreplicated": store.underreplication.count(),
        "auditor": store.auditor.current(),
    }


def set_autorecovery(store, enabled: bool) -> dict:
    changed = store.underreplication.enable() if enabled else store.underreplication.disable()
    return {"enabled": enabled, "changed": changed}


def underreplicated(store, include=(), exclude=()) -> list[dict]:
    """Marked ledgers (Java's ``listunderreplicated``): ``include`` keeps those
    missing a replica on any of these bookies, ``exclude`` drops those missing
    one on any of these; ``worker`` is the host holding the replication lock."""
    from bkctl.wire.autorecovery.control import matching_marks

    locks = store.underreplication.locks()
    rows = []
    for m in matching_marks(store.underreplication.marks(), include, exclude):
        rows.append({"ledger_id": m.ledger_id, "missing_replicas": list(m.replicas), "ctime": m.ctime,
                     "worker": locks.get(m.ledger_id)})
    return rows
