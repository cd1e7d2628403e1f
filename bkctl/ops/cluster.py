"""Cluster-wide metadata operations: info, metaformat, autorecovery switches."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .results import omitted_when_none

if TYPE_CHECKING:
    from bkctl.wire.metadata.store import MetadataStore


@dataclass(frozen=True)
class Layout:
    """The cluster's LAYOUT znode: its ledger manager (short name, None for a factory unknown to
    bkctl, and factory class)."""

    manager: str | None
    factory: str
    format_version: int


@dataclass(frozen=True)
class RegisteredBookies:
    """The bookies registered writable, read-only, and every bookie with a cookie (``all``)."""

    writable: list[str]
    readonly: list[str]
    all: list[str]


@dataclass(frozen=True)
class AutorecoveryState:
    """The autorecovery switch, lostBookieRecoveryDelay, the ledgers marked and the auditor."""

    enabled: bool
    lost_bookie_recovery_delay: int | None
    underreplicated: int
    auditor: str | None


@dataclass(frozen=True)
class ClusterInfo:
    """``cluster info``: the cluster in use, its instance id and layout, bookies and autorecovery."""

    uri: str
    cluster: str | None
    instance_id: str | None
    layout: Layout | None
    bookies: RegisteredBookies
    autorecovery: AutorecoveryState


@dataclass(frozen=True)
class Formatted:
    """``metaformat``: whether it formatted, whether a cluster was there, the new instance id."""

    formatted: bool
    existed: bool
    instance_id: str | None = omitted_when_none()


@dataclass(frozen=True)
class AutorecoverySwitch:
    """``autorecovery enable|disable``: the switch now, and whether this changed it."""

    enabled: bool
    changed: bool


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


def cluster_info(store: MetadataStore, cluster_name: str | None = None) -> ClusterInfo:
    layout = store.cluster.layout()
    writable, readonly = store.registration.writable_bookies(), store.registration.readonly_bookies()
    return ClusterInfo(
        store.uri,
        cluster_name,
        store.cluster.instance_id(),
        None if layout is None else Layout(layout.manager, layout.manager_factory_class, layout.format_version),
        RegisteredBookies(sorted(writable), sorted(readonly), sorted(store.registration.all_bookies())),
        autorecovery_status(store),
    )


def registered_bookies(store: MetadataStore) -> list[str]:
    """Every registered bookie, read-only ones marked, as the guards name them."""
    from bkctl.wire.metadata.registration_state import Registrations

    regs = Registrations.read(store.registration)
    return sorted(regs.taking_writes) + [f"{b} (read-only)" for b in sorted(regs.readonly)]


def metaformat(store: MetadataStore, confirm: Callable[[], bool], with_bookies: bool = False) -> Formatted:
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
        return Formatted(False, True)
    store.cluster.format()
    return Formatted(True, existed, store.cluster.instance_id())


def autorecovery_status(store: MetadataStore) -> AutorecoveryState:
    return AutorecoveryState(
        store.underreplication.is_enabled(),
        store.underreplication.lost_bookie_recovery_delay(),
        store.underreplication.count(),
        store.auditor.current(),
    )


def set_autorecovery(store: MetadataStore, enabled: bool) -> AutorecoverySwitch:
    changed = store.underreplication.enable() if enabled else store.underreplication.disable()
    return AutorecoverySwitch(enabled, changed)
