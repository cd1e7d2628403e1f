"""The cluster's own znodes: bootstrap and teardown (``initnewcluster``, ``metaformat``,
``nukeexistingcluster``), ``INSTANCEID`` and ``LAYOUT`` (which names the ledger manager
every other manager lays its znodes out by)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError, NotEmptyError, RolledBackError

from bkctl.wire.metadata import paths as P
from bkctl.wire.metadata.errors import (
    ClusterExists,
    LayoutMismatch,
    MetadataStoreError,
    NukeRefused,
)
from bkctl.wire.metadata.layout import LedgerLayout
from bkctl.wire.metadata.zk.session import Manager, ZKSession, zk_call

if TYPE_CHECKING:
    from bkctl.wire.metadata.zk.registration import ZKRegistrationManager

__all__ = ["ZKClusterManager"]


class ZKClusterManager(Manager):
    """Cluster bootstrap, format and nuke, INSTANCEID and LAYOUT.

    *configured_manager* is the ledger manager the metadata service URI names
    (None for a plain ``zk://``).
    """

    def __init__(self, session: ZKSession, configured_manager: str | None, registration: ZKRegistrationManager):
        super().__init__(session)
        if configured_manager is not None and configured_manager not in P.MANAGERS:
            raise ValueError(
                f"ledger manager {configured_manager!r} is not supported by this store (one of {', '.join(P.MANAGERS)})"
            )
        self.configured_manager = configured_manager
        self._registration = registration
        self._forget: list[Callable[[], None]] = []
        self._manager: str | None = None

    def forget_also(self, *forget: Callable[[], None]) -> None:
        """Have format and nuke call *forget*: they remove znodes another manager remembers."""
        self._forget.extend(forget)

    @zk_call
    def exists(self) -> bool:
        return self._session.exists(self._root) is not None

    @zk_call
    def holds_cluster(self) -> bool:
        """Whether the root holds a BookKeeper cluster (its LAYOUT or INSTANCEID)."""
        return any(self._session.exists(self._session.path(name)) is not None for name in (P.LAYOUT, P.INSTANCEID))

    @zk_call
    def closest_cluster_root(self, budget: int = 500) -> str | None:
        """The cluster root on this ZooKeeper most like ours, for a "did you mean": an
        ancestor that is one (``/ledgers`` for ``/ledgers/x``), else the closest among the
        nearest existing ancestor's children and grandchildren (at most ``budget``
        znodes looked at); None when there is none, or when ACLs hide the neighbours."""
        try:
            return self._closest_cluster_root(budget)
        except KazooException:  # a hint is a courtesy
            return None

    def _closest_cluster_root(self, budget: int) -> str | None:
        import difflib

        s, root = self._session, self._root

        def is_cluster_root(path: str) -> bool:
            # LAYOUT alone is not enough: underreplication/ has its own LAYOUT
            return bool(s.exists(f"{path}/{P.LAYOUT}")) and bool(
                s.exists(f"{path}/{P.INSTANCEID}") or s.exists(f"{path}/{P.AVAILABLE}")
            )

        ancestor = root.rstrip("/").rsplit("/", 1)[0] or "/"
        while ancestor != "/" and not s.exists(ancestor):
            ancestor = ancestor.rsplit("/", 1)[0] or "/"
        up = ancestor
        while up != "/":
            if is_cluster_root(up):
                return up
            up = up.rsplit("/", 1)[0] or "/"
        found: list[str] = []
        level = [ancestor]
        for _depth in range(2):
            nxt = []
            for parent in level:
                for child in sorted(s.children(parent)):
                    path = f"{parent.rstrip('/')}/{child}"
                    if path == "/zookeeper" or budget <= 0:
                        continue
                    budget -= 1
                    if path != root and is_cluster_root(path):
                        found.append(path)
                    else:
                        nxt.append(path)
            level = nxt
        best = difflib.get_close_matches(root, found, n=1, cutoff=0.5)
        return best[0] if best else None

    @zk_call
    def instance_id(self) -> str | None:
        """The cluster's INSTANCEID (None if the node is missing)."""
        self._session.require_root()
        try:
            data, _ = self._session.get(self._session.path(P.INSTANCEID))
        except NoNodeError:
            return None
        return str(data.decode("utf-8"))

    @zk_call
    def set_instance_id(self, instance_id: str) -> None:
        """Write INSTANCEID (restoring a backup: the cookies and the bookies' disks
        carry the one the cluster had)."""
        self._session.require_root()
        path, data = self._session.path(P.INSTANCEID), instance_id.encode("ascii")
        try:
            self._zk.set(path, data, version=-1)
        except NoNodeError:
            self._zk.create(path, data)

    @zk_call
    def layout(self) -> LedgerLayout | None:
        """The cluster's LAYOUT (None if the node is missing)."""
        return self._session.get_parsed(self._session.path(P.LAYOUT), LedgerLayout.parse)

    @property
    def manager(self) -> str:
        """The ledger manager in effect: LAYOUT's, else the URI's, else hierarchical."""
        if self._manager is None:
            self._manager = self._resolve_manager()
        return self._manager

    def _resolve_manager(self) -> str:
        layout = self.layout()
        if layout is None:
            return self.configured_manager or P.HIERARCHICAL
        existing = layout.manager
        if existing not in P.MANAGERS:
            raise LayoutMismatch(
                f"cluster at {self._root} uses ledger manager {layout.manager_factory_class!r}, "
                "which this store does not support"
            )
        if self.configured_manager is not None and self.configured_manager != existing:
            raise LayoutMismatch(
                f"configured ledger manager {self.configured_manager!r} does not match the "
                f"cluster's LAYOUT ({existing!r}) at {self._root}"
            )
        return existing

    def _write_layout(self, manager: str) -> None:
        data = LedgerLayout.for_manager(manager).serialize()
        path = self._session.path(P.LAYOUT)
        try:
            self._zk.create(path, data)
        except NodeExistsError:
            current, _ = self._session.get(path)
            if current != data:
                raise LayoutMismatch(f"{path} was written concurrently with a different layout") from None
        self._manager = manager

    def _forget_cached(self) -> None:
        self._manager = None
        for forget in self._forget:
            forget()

    @zk_call
    def init(self) -> str:
        """``initnewcluster``: create root, available/, readonly/, INSTANCEID, LAYOUT.

        Returns the new instance id; raises :class:`ClusterExists` when the
        root is already there.
        """
        s, root = self._session, self._root
        exists = ClusterExists(f"ledgers root {root} already exists on {s.hosts}")
        if s.exists(root) is not None:
            raise exists
        # the multi cannot create the root's own parents; make them first
        s.ensure_parents(root)
        instance_id = str(uuid.uuid4())
        txn = self._zk.transaction()
        txn.create(root, b"")
        txn.create(s.path(P.AVAILABLE), b"")
        txn.create(s.path(P.AVAILABLE, P.READONLY), b"")
        txn.create(s.path(P.INSTANCEID), instance_id.encode("ascii"))
        failures = [r for r in txn.commit() if isinstance(r, Exception)]
        if any(isinstance(r, NodeExistsError) for r in failures):
            raise exists
        real = [r for r in failures if not isinstance(r, RolledBackError)]
        if failures:
            raise MetadataStoreError(f"initialising {root} failed: {(real or failures)[0]!r}")
        self._write_layout(self.configured_manager or P.HIERARCHICAL)
        return instance_id

    @zk_call
    def prepare_format(self) -> bool:
        """Step 1 of ``metaformat``: create root, available/, readonly/ if missing.

        Returns whether the root existed before (the caller asks for
        confirmation in that case, then calls :meth:`format`).
        """
        s = self._session
        existed = s.exists(self._root) is not None
        if not existed:
            self._zk.ensure_path(self._root)
        s.create_if_missing(s.path(P.AVAILABLE))
        s.create_if_missing(s.path(P.AVAILABLE, P.READONLY))
        return existed

    @zk_call
    def format(self, confirm: Callable[[], bool] | None = None) -> bool:
        """``metaformat``: wipe ledgers, id generators, cookies and under-replication marks.

        Keeps ``available/``, ``underreplication/disable``,
        ``lostBookieRecoveryDelay`` and ``auditorelection``; rewrites LAYOUT
        and INSTANCEID.  When the root existed and *confirm* is given and
        returns False, nothing is wiped and False is returned; otherwise the
        return value tells whether the root existed.
        """
        s = self._session
        existed = self.prepare_format()
        if existed and confirm is not None and not confirm():
            return False
        self._wipe_ledgers_and_layout()
        s.delete_tree(P.underreplication_node(P.UR_LEDGERS, self._root))
        s.delete_tree(P.underreplication_node(P.UR_LOCKS, self._root))
        s.delete_tree(s.path(P.COOKIES))
        s.delete_quiet(s.path(P.INSTANCEID))
        self._zk.create(s.path(P.INSTANCEID), str(uuid.uuid4()).encode("ascii"))
        self._forget_cached()
        return existed

    def _existing_manager(self) -> str | None:
        try:
            layout = self.layout()
        except MetadataStoreError:
            return None
        if layout is not None and layout.manager in P.MANAGERS:
            return layout.manager
        return None

    def _wipe_ledgers_and_layout(self) -> None:
        """The ledger manager's ``format``: ledger parents, id generators, LAYOUT.

        Ledger parents are recognised with the manager in effect (the old
        LAYOUT's); the new LAYOUT names the URI's manager, or, for a plain
        ``zk://`` URI, keeps the old one (hierarchical if there was none).
        """
        s = self._session
        existing = self._existing_manager()
        manager = existing or self.configured_manager or P.HIERARCHICAL
        for child in s.children_or_empty(self._root):
            is_idgen = child in (P.IDGEN, P.IDGEN_LONG) or child.startswith(P.ID_PREFIX)
            if is_idgen or P.is_ledger_parent_name(child, manager):
                s.delete_tree(s.path(child))
        s.delete_quiet(s.path(P.LAYOUT))
        self._forget_cached()
        self._write_layout(self.configured_manager or existing or P.HIERARCHICAL)

    @zk_call
    def nuke(self, instance_id: str | None = None, force: bool = False) -> bool:
        """``nukeexistingcluster``: delete the whole cluster below (and including) the root.

        Give exactly one of *instance_id* (must equal INSTANCEID) or
        *force*.  Refuses (:class:`NukeRefused`) while bookies are registered
        or when the root holds unknown children.  Returns False when there
        was no cluster to delete.
        """
        if (instance_id is None) == (not force):
            raise ValueError("give exactly one of instance_id or force=True")
        s, root = self._session, self._root
        root_exists = s.exists(root) is not None
        if not force:
            if not root_exists:
                self._session.require_root()
            current = self.instance_id()
            if current != instance_id:
                raise NukeRefused(f"instance id {instance_id!r} does not match the cluster's INSTANCEID {current!r}")
        if not root_exists:
            return False
        writable = self._registration.writable_bookies()
        readonly = self._registration.readonly_bookies()
        if writable or readonly:
            raise NukeRefused(
                "bookies are still registered ("
                + ", ".join(writable + [f"{b} (read-only)" for b in readonly])
                + "); stop all bookies before nuking the cluster"
            )
        manager = self._existing_manager() or self.configured_manager or P.HIERARCHICAL
        for child in s.children(root):
            if not P.is_special_znode(child) and not P.is_ledger_parent_name(child, manager):
                raise NukeRefused(f"unexpected znode {s.path(child)}; not nuking")
        self._wipe_ledgers_and_layout()
        for child in s.children(root):
            if not P.is_special_znode(child):
                raise NukeRefused(f"unexpected znode {s.path(child)} appeared; stopped half-way")
            s.delete_tree(s.path(child))
        try:
            self._zk.delete(root)
        except NoNodeError:
            pass
        except NotEmptyError:
            raise NukeRefused(f"{root} gained new children while being nuked") from None
        s.delete_tree(P.saved_rebalance_path(root))  # bkctl's own, beside it: a kept plan of the cluster gone
        s.delete_tree(P.restore_journals_path(root))  # and the journals of restores into it
        s.delete_tree(P.lost_entries_path(root))  # and the records of its lost entries
        s.delete_quiet(P.rebalance_run_path(root))
        self._forget_cached()
        return True
