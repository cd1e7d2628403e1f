"""The BookKeeper metadata store on ZooKeeper (metadata.md, admin.md section 2).

:class:`ZKMetadataStore` reads and writes exactly the znodes a Java
BookKeeper cluster uses, so Java clients, bookies and tools can share a
cluster with us:

* cluster bootstrap and teardown (``initnewcluster``, ``metaformat``,
  ``nukeexistingcluster``), ``INSTANCEID`` and ``LAYOUT``;
* ledger ids from ZooKeeper sequential nodes (``idgen``, 63-bit
  ``idgen-long``) and ledger metadata with compare-and-set on the znode
  version;
* bookie registration (ephemeral nodes, restored after a session expiry),
  cookies;
* the autorecovery tree below ``<root>/underreplication``.

It is synchronous (kazoo runs its own I/O thread) and thread-safe.  Expected
failures surface as the :class:`~bkctl.wire.errors.BKError` subclasses defined
here, never as raw kazoo exceptions.
"""
from __future__ import annotations

import functools
import logging
import random
import re
import threading
import time
import uuid
import weakref
from dataclasses import replace
from typing import Callable, Iterable, Iterator, NamedTuple, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    AuthFailedError,
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    SessionClosedRequireSaslError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from bkctl.wire.metadata import paths as P
from bkctl.wire.metadata.cookie import Cookie, parse_cookie
from bkctl.wire.errors import BKError, CodecError, Conflict, NotFound, Unreachable
from bkctl.wire.metadata.bookieid import is_valid_bookie_id
from bkctl.wire.metadata.layout import LedgerLayout, MetadataServiceURI
from bkctl.wire.metadata.ledger import LedgerMetadata, parse_ledger_metadata, serialize_ledger_metadata
from bkctl.wire.metadata.serviceinfo import BookieServiceInfo
from bkctl.wire.metadata import underreplication as UR

log = logging.getLogger(__name__)

__all__ = [
    "BookieRegistrationError",
    "ClusterExists",
    "ClusterNotFound",
    "CookieExists",
    "CookieVersionConflict",
    "LayoutMismatch",
    "LedgerExists",
    "MetadataStoreError",
    "MetadataVersionConflict",
    "NoSuchCookie",
    "NoSuchLedger",
    "NukeRefused",
    "UnderreplicatedMark",
    "Versioned",
    "VersionConflict",
    "ZKMetadataStore",
    "ZKStoreError",
    "ZKUnavailable",
    "is_valid_bookie_id",
]

#: ZooKeeper's sequence numbers are a signed 32-bit counter; BookKeeper treats
#: anything at or above this as an overflow of the 31-bit id space.
_SEQ_OVERFLOW = 2**31 - 1
_KEEP_HOB_NODES = 3


# ---------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------
class ZKStoreError(BKError):
    """Base of every error raised by :class:`ZKMetadataStore`."""


class ZKUnavailable(ZKStoreError, Unreachable):
    """ZooKeeper cannot be reached (or the session was lost mid-operation)."""


class ZKAuthError(ZKStoreError, Unreachable):
    """ZooKeeper refused our credentials, or refused a znode to the identity they give."""


class MetadataStoreError(ZKStoreError):
    """An unexpected ZooKeeper answer (ACLs, quota, corrupt value...)."""


class ClusterExists(ZKStoreError, Conflict):
    """``init_cluster`` on a root that already exists."""


class ClusterNotFound(ZKStoreError, NotFound):
    """The ledgers root does not exist: the cluster was never initialised."""


class LayoutMismatch(ZKStoreError):
    """The configured ledger manager differs from the cluster's LAYOUT."""


class NukeRefused(ZKStoreError, Conflict):
    """``nuke_cluster`` found a reason not to delete anything."""


class NoSuchLedger(ZKStoreError, NotFound):
    def __init__(self, ledger_id: int):
        super().__init__(f"ledger {ledger_id} does not exist")
        self.ledger_id = ledger_id


class LedgerExists(ZKStoreError, Conflict):
    def __init__(self, ledger_id: int):
        super().__init__(f"ledger {ledger_id} already exists")
        self.ledger_id = ledger_id


class NoSuchCookie(ZKStoreError, NotFound):
    def __init__(self, bookie_id: str):
        super().__init__(f"bookie {bookie_id} has no cookie")
        self.bookie_id = bookie_id


class CookieExists(ZKStoreError, Conflict):
    def __init__(self, bookie_id: str):
        super().__init__(f"bookie {bookie_id} already has a cookie")
        self.bookie_id = bookie_id


class BookieRegistrationError(ZKStoreError, Conflict):
    """The registration node is held by another live session."""


class VersionConflict(ZKStoreError, Conflict):
    """A compare-and-set lost: the znode is no longer at ``expected_version``.

    ``current`` and ``current_version`` hold what the znode contains now
    (re-read right after the failed write).
    """

    def __init__(self, what: str, expected_version: int, current, current_version: int):
        super().__init__(
            f"{what} changed concurrently: expected version {expected_version}, "
            f"it is now at version {current_version}"
        )
        self.expected_version = expected_version
        self.current = current
        self.current_version = current_version


class MetadataVersionConflict(VersionConflict):
    """Ledger metadata CAS failure; ``current`` is the current :class:`LedgerMetadata`."""

    def __init__(self, ledger_id: int, expected_version: int, current: LedgerMetadata,
                 current_version: int):
        super().__init__(f"metadata of ledger {ledger_id}", expected_version, current, current_version)
        self.ledger_id = ledger_id

    @property
    def metadata(self) -> LedgerMetadata:
        return self.current


class CookieVersionConflict(VersionConflict):
    """Cookie CAS failure; ``current`` is the current :class:`Cookie`."""

    def __init__(self, bookie_id: str, expected_version: int, current: Cookie, current_version: int):
        super().__init__(f"cookie of bookie {bookie_id}", expected_version, current, current_version)
        self.bookie_id = bookie_id

    @property
    def cookie(self) -> Cookie:
        return self.current


# ---------------------------------------------------------------------------
# small value types
# ---------------------------------------------------------------------------
class Versioned(NamedTuple):
    """A decoded znode value and its ZooKeeper ``stat.version``."""

    value: object
    version: int


class UnderreplicatedMark(NamedTuple):
    """One ``urL`` marker: the ledger, the bookies missing replicas, the mark time (ms) if stored."""

    ledger_id: int
    replicas: tuple[str, ...]
    ctime: int | None


def _check_bookie_id(bookie_id: str) -> str:
    if not is_valid_bookie_id(bookie_id):
        raise ValueError(f"invalid bookie id {bookie_id!r}")
    return bookie_id


_AUTH_ERRORS = (NoAuthError, AuthFailedError, SessionClosedRequireSaslError)

# kazoo's connection thread dies with the exception when SASL fails (the client
# then only sees "connection closed"): keep it, keyed by thread, instead of
# letting Python print its traceback, so the store can say what happened.
_loop_failures: "weakref.WeakKeyDictionary[threading.Thread, BaseException]" = weakref.WeakKeyDictionary()
_hook_lock = threading.Lock()


def _install_loop_hook() -> None:
    with _hook_lock:
        if getattr(threading.excepthook, "_bkctl_zk", False):
            return
        previous = threading.excepthook

        def hook(args):
            if args.thread is not None and isinstance(args.exc_value, _AUTH_ERRORS):
                _loop_failures[args.thread] = args.exc_value
                return
            previous(args)

        hook._bkctl_zk = True
        threading.excepthook = hook


def _loop_failure(zk) -> BaseException | None:
    routine = getattr(getattr(zk, "_connection", None), "_connection_routine", None)
    return _loop_failures.get(routine) if routine is not None else None

_CONNECTION_ERRORS = (
    ConnectionLoss,
    SessionExpiredError,
    ConnectionClosedError,
    OperationTimeoutError,
    KazooTimeoutError,
)

_F = TypeVar("_F", bound=Callable)


def _zk_call(method: _F) -> _F:
    """Turn stray kazoo exceptions of a public method into store errors."""

    @functools.wraps(method)
    def wrapper(self: "ZKMetadataStore", *args, **kwargs):
        self._require_started()
        try:
            return method(self, *args, **kwargs)
        except _AUTH_ERRORS as exc:
            raise self._auth_error(exc) from None
        except _CONNECTION_ERRORS as exc:
            raise self._unavailable(exc) from None
        except KazooException as exc:
            raise MetadataStoreError(f"ZooKeeper error in {method.__name__}: {type(exc).__name__} {exc}") from None

    return wrapper  # type: ignore[return-value]


def _zk_gen(method: _F) -> _F:
    """:func:`_zk_call` for generator methods (errors surface while iterating)."""

    @functools.wraps(method)
    def wrapper(self: "ZKMetadataStore", *args, **kwargs):
        self._require_started()
        gen = method(self, *args, **kwargs)
        try:
            yield from gen
        except _AUTH_ERRORS as exc:
            raise self._auth_error(exc) from None
        except _CONNECTION_ERRORS as exc:
            raise self._unavailable(exc) from None
        except KazooException as exc:
            raise MetadataStoreError(f"ZooKeeper error in {method.__name__}: {type(exc).__name__} {exc}") from None

    return wrapper  # type: ignore[return-value]


# ---------------------------------------------------------------------------
# the store
# ---------------------------------------------------------------------------
class ZKMetadataStore:
    """BookKeeper metadata on ZooKeeper, addressed by a metadata service URI.

    ``ZKMetadataStore("zk+hierarchical://127.0.0.1:2181/ledgers", timeout=10)``.
    ``zk://`` (or ``zk+null://``) takes the ledger manager from the cluster's
    LAYOUT (hierarchical when there is none); an explicit manager must match
    an existing LAYOUT.  *timeout* bounds the initial connection; the session
    timeout defaults to it as well.
    """

    def __init__(self, uri: str, timeout: float = 10.0, *, session_timeout: float | None = None,
                 store_ctime: bool = False, security=None):
        from bkctl.wire.metadata.zksecurity import get_default

        self.uri = uri
        #: credentials, TLS and ACLs (:class:`~bkctl.wire.metadata.zksecurity.ZKSecurity`); the process default if None
        self.security = security if security is not None else get_default()
        self._parsed = MetadataServiceURI.parse(uri)
        self.hosts: str = self._parsed.hosts
        self.root: str = self._parsed.root
        configured = self._parsed.layout_manager
        if configured is not None and configured not in P.MANAGERS:
            raise ValueError(f"ledger manager {configured!r} is not supported by this store "
                             f"(one of {', '.join(P.MANAGERS)})")
        self.configured_manager: str | None = configured
        self.timeout = float(timeout)
        self.session_timeout = float(session_timeout if session_timeout is not None else timeout)
        #: write ``ctime`` into under-replication marks (Java's
        #: storeSystemTimeAsLedgerUnderreplicatedMarkTime)
        self.store_ctime = store_ctime
        self._zk: KazooClient | None = None
        self._manager: str | None = None
        self._lock = threading.RLock()
        # bookie id -> (readonly, data) of what this store registered
        self._registrations: dict[str, tuple[bool, bytes]] = {}
        self._session_lost = False
        self._reregister_needed = threading.Event()
        self._reregister_thread: threading.Thread | None = None
        self._closing = False
        self._ur_checked = False
        self._idgen_long_present: bool | None = None

    # -- lifecycle -----------------------------------------------------------
    def start(self) -> "ZKMetadataStore":
        if self._zk is not None:
            return self
        zk = KazooClient(
            hosts=self.hosts,
            timeout=self.session_timeout,
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
            command_retry=KazooRetry(max_tries=3, delay=0.1, max_delay=1.0),
            **self.security.kazoo_args(),
        )
        zk.add_listener(self._on_state)
        _install_loop_hook()
        try:
            zk.start(timeout=self.timeout)
        except KazooTimeoutError:
            self._shutdown_client(zk)
            failed = _loop_failure(zk)
            raise (self._auth_error(failed) if failed else self._no_connection()) from None
        except AuthFailedError as exc:
            self._shutdown_client(zk)
            raise self._auth_error(exc) from None
        except Exception as exc:
            self._shutdown_client(zk)
            failed = _loop_failure(zk)
            if failed is not None:
                raise self._auth_error(failed) from None
            raise ZKUnavailable(f"cannot connect to ZooKeeper at {self.hosts}: {exc}") from None
        except BaseException:  # Ctrl-C while connecting: stop kazoo's retrying thread too
            self._shutdown_client(zk)
            raise
        self._zk = zk
        self._closing = False
        self._reregister_thread = threading.Thread(
            target=self._reregister_loop, name="zkstore-reregister", daemon=True
        )
        self._reregister_thread.start()
        return self

    @staticmethod
    def _shutdown_client(zk: KazooClient) -> None:
        try:
            zk.stop()
            zk.close()
        except Exception:  # pragma: no cover - best effort
            pass

    def close(self) -> None:
        """Close the session: every ephemeral node of this store disappears."""
        zk, self._zk = self._zk, None
        self._closing = True
        self._reregister_needed.set()
        if zk is not None:
            self._shutdown_client(zk)
        thread, self._reregister_thread = self._reregister_thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)
        with self._lock:
            self._registrations.clear()

    def __enter__(self) -> "ZKMetadataStore":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        zk = self._zk
        return zk is not None and zk.connected

    @property
    def client(self) -> KazooClient:
        """The underlying kazoo client (for tests and advanced callers)."""
        self._require_started()
        return self._zk  # type: ignore[return-value]

    @property
    def session_id(self) -> int | None:
        zk = self._zk
        cid = zk.client_id if zk is not None else None
        return cid[0] if cid else None

    def _require_started(self) -> None:
        if self._zk is None:
            raise ZKUnavailable(f"metadata store for {self.hosts} is not started")

    def _no_connection(self) -> ZKStoreError:
        """Why a start timed out: a TLS problem named by a direct handshake, else the timeout."""
        if self.security.uses_tls:
            from bkctl.wire.metadata.zksecurity import tls_problem

            problem = tls_problem(self.hosts, self.security)
            if problem:
                return ZKAuthError(f"TLS with ZooKeeper at {self.hosts} failed: {problem}")
        hint = f" ({self.security.describe()})" if self.security != type(self.security)() else ""
        return ZKUnavailable(f"cannot connect to ZooKeeper at {self.hosts} within {self.timeout:g}s{hint}")

    def _auth_error(self, exc: Exception) -> ZKAuthError:
        if isinstance(exc, NoAuthError):
            return ZKAuthError(f"ZooKeeper at {self.hosts} denied access (NoAuth) with "
                               f"{self.security.describe()}: wrong or missing credentials")
        if isinstance(exc, SessionClosedRequireSaslError):
            return ZKAuthError(f"ZooKeeper at {self.hosts} requires authentication and closed the session "
                               f"({self.security.describe()})")
        return ZKAuthError(f"ZooKeeper at {self.hosts} rejected the credentials ({self.security.describe()})")

    def _unavailable(self, exc: Exception) -> ZKStoreError:
        failed = _loop_failure(self._zk) if self._zk is not None else None
        if failed is not None:
            return self._auth_error(failed)
        reason = {
            SessionExpiredError: "session expired",
            ConnectionClosedError: "connection closed",
            ConnectionLoss: "connection lost",
        }.get(type(exc), type(exc).__name__)
        return ZKUnavailable(f"ZooKeeper at {self.hosts} unavailable: {reason}")

    # -- paths ------------------------------------------------------------------
    def _p(self, *names: str) -> str:
        return "/".join((self.root,) + names)

    @property
    def _available(self) -> str:
        return self._p(P.AVAILABLE)

    @property
    def _readonly(self) -> str:
        return self._p(P.AVAILABLE, P.READONLY)

    @property
    def _ur_base(self) -> str:
        return P.underreplication_base(self.root)

    def _ur(self, name: str) -> str:
        return P.underreplication_node(name, self.root)

    # -- low-level helpers ----------------------------------------------------
    def _exists(self, path: str):
        return self._zk.retry(self._zk.exists, path)

    def _get(self, path: str):
        return self._zk.retry(self._zk.get, path)

    def _children(self, path: str) -> list[str]:
        return self._zk.retry(self._zk.get_children, path)

    def _children_or_empty(self, path: str) -> list[str]:
        try:
            return self._children(path)
        except NoNodeError:
            return []

    def _create_if_missing(self, path: str, value: bytes = b"") -> bool:
        try:
            self._zk.create(path, value)
            return True
        except NodeExistsError:
            return False

    def _ensure_parents(self, path: str) -> None:
        parent = path.rsplit("/", 1)[0]
        if parent:
            self._zk.ensure_path(parent)

    def _delete_tree(self, path: str) -> None:
        """Delete *path* and everything below it (NONODE anywhere is fine)."""
        for _ in range(5):
            for child in self._children_or_empty(path):
                self._delete_tree(f"{path}/{child}")
            try:
                self._zk.delete(path)
                return
            except NoNodeError:
                return
            except NotEmptyError:
                continue  # something was added meanwhile; go again
        raise MetadataStoreError(f"{path} keeps gaining children; could not delete it")

    def _delete_quiet(self, path: str, version: int = -1) -> None:
        try:
            self._zk.delete(path, version)
        except (NoNodeError, NotEmptyError, BadVersionError):
            pass

    # -- cluster ---------------------------------------------------------------
    @_zk_call
    def cluster_exists(self) -> bool:
        return self._exists(self.root) is not None

    @_zk_call
    def holds_cluster(self) -> bool:
        """Whether the root holds a BookKeeper cluster (its LAYOUT or INSTANCEID)."""
        return any(self._exists(f"{self.root}/{name}") is not None for name in (P.LAYOUT, P.INSTANCEID))

    @_zk_call
    def instance_id(self) -> str | None:
        """The cluster's INSTANCEID (None if the node is missing)."""
        if self._exists(self.root) is None:
            raise ClusterNotFound(f"no BookKeeper cluster at {self.root} on {self.hosts}")
        try:
            data, _ = self._get(self._p(P.INSTANCEID))
        except NoNodeError:
            return None
        return data.decode("utf-8")

    @_zk_call
    def layout(self) -> LedgerLayout | None:
        """The cluster's LAYOUT (None if the node is missing)."""
        try:
            data, _ = self._get(self._p(P.LAYOUT))
        except NoNodeError:
            return None
        try:
            return LedgerLayout.parse(data)
        except CodecError as exc:
            raise MetadataStoreError(f"corrupt {self._p(P.LAYOUT)}: {exc}") from None

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
                f"cluster at {self.root} uses ledger manager {layout.manager_factory_class!r}, "
                "which this store does not support"
            )
        if self.configured_manager is not None and self.configured_manager != existing:
            raise LayoutMismatch(
                f"configured ledger manager {self.configured_manager!r} does not match the "
                f"cluster's LAYOUT ({existing!r}) at {self.root}"
            )
        return existing

    def _new_manager(self) -> str:
        return self.configured_manager or P.HIERARCHICAL

    def _write_layout(self, manager: str) -> None:
        data = LedgerLayout.for_manager(manager).serialize()
        path = self._p(P.LAYOUT)
        try:
            self._zk.create(path, data)
        except NodeExistsError:
            current, _ = self._get(path)
            if current != data:
                raise LayoutMismatch(
                    f"{path} was written concurrently with a different layout"
                ) from None
        self._manager = manager

    @_zk_call
    def init_cluster(self) -> str:
        """``initnewcluster``: create root, available/, readonly/, INSTANCEID, LAYOUT.

        Returns the new instance id; raises :class:`ClusterExists` when the
        root is already there.
        """
        if self._exists(self.root) is not None:
            raise ClusterExists(f"ledgers root {self.root} already exists on {self.hosts}")
        # the multi cannot create the root's own parents; make them first
        self._ensure_parents(self.root)
        instance_id = str(uuid.uuid4())
        txn = self._zk.transaction()
        txn.create(self.root, b"")
        txn.create(self._available, b"")
        txn.create(self._readonly, b"")
        txn.create(self._p(P.INSTANCEID), instance_id.encode("ascii"))
        failures = [r for r in txn.commit() if isinstance(r, Exception)]
        if any(isinstance(r, NodeExistsError) for r in failures):
            raise ClusterExists(f"ledgers root {self.root} already exists on {self.hosts}")
        real = [r for r in failures if not isinstance(r, RolledBackError)]
        if failures:
            raise MetadataStoreError(f"initialising {self.root} failed: {(real or failures)[0]!r}")
        self._write_layout(self._new_manager())
        return instance_id

    @_zk_call
    def prepare_format(self) -> bool:
        """Step 1 of ``metaformat``: create root, available/, readonly/ if missing.

        Returns whether the root existed before (the caller asks for
        confirmation in that case, then calls :meth:`format_cluster`).
        """
        existed = self._exists(self.root) is not None
        if not existed:
            self._zk.ensure_path(self.root)
        self._create_if_missing(self._available)
        self._create_if_missing(self._readonly)
        return existed

    @_zk_call
    def format_cluster(self, confirm: Callable[[], bool] | None = None) -> bool:
        """``metaformat``: wipe ledgers, id generators, cookies and under-replication marks.

        Keeps ``available/``, ``underreplication/disable``,
        ``lostBookieRecoveryDelay`` and ``auditorelection``; rewrites LAYOUT
        and INSTANCEID.  When the root existed and *confirm* is given and
        returns False, nothing is wiped and False is returned; otherwise the
        return value tells whether the root existed.
        """
        existed = self.prepare_format()
        if existed and confirm is not None and not confirm():
            return False
        self._wipe_ledgers_and_layout()
        self._delete_tree(self._ur(P.UR_LEDGERS))
        self._delete_tree(self._ur(P.UR_LOCKS))
        self._delete_tree(self._p(P.COOKIES))
        self._delete_quiet(self._p(P.INSTANCEID))
        self._zk.create(self._p(P.INSTANCEID), str(uuid.uuid4()).encode("ascii"))
        self._ur_checked = False
        return existed

    def _existing_manager(self) -> str | None:
        try:
            layout = self.layout()
        except MetadataStoreError:
            return None
        if layout is not None and layout.manager in P.MANAGERS:
            return layout.manager
        return None

    def _current_manager_for_wipe(self) -> str:
        return self._existing_manager() or self._new_manager()

    def _wipe_ledgers_and_layout(self) -> None:
        """The ledger manager's ``format``: ledger parents, id generators, LAYOUT.

        Ledger parents are recognised with the manager in effect (the old
        LAYOUT's); the new LAYOUT names the URI's manager, or, for a plain
        ``zk://`` URI, keeps the old one (hierarchical if there was none).
        """
        existing = self._existing_manager()
        manager = existing or self._new_manager()
        for child in self._children_or_empty(self.root):
            is_idgen = child in (P.IDGEN, P.IDGEN_LONG) or child.startswith(P.ID_PREFIX)
            if is_idgen or P.is_ledger_parent_name(child, manager):
                self._delete_tree(self._p(child))
        self._delete_quiet(self._p(P.LAYOUT))
        self._manager = None
        self._idgen_long_present = None
        self._write_layout(self.configured_manager or existing or P.HIERARCHICAL)

    @_zk_call
    def nuke_cluster(self, instance_id: str | None = None, force: bool = False) -> bool:
        """``nukeexistingcluster``: delete the whole cluster below (and including) the root.

        Give exactly one of *instance_id* (must equal INSTANCEID) or
        *force*.  Refuses (:class:`NukeRefused`) while bookies are registered
        or when the root holds unknown children.  Returns False when there
        was no cluster to delete.
        """
        if (instance_id is None) == (not force):
            raise ValueError("give exactly one of instance_id or force=True")
        root_exists = self._exists(self.root) is not None
        if not force:
            if not root_exists:
                raise ClusterNotFound(f"no BookKeeper cluster at {self.root} on {self.hosts}")
            current = self.instance_id()
            if current != instance_id:
                raise NukeRefused(
                    f"instance id {instance_id!r} does not match the cluster's INSTANCEID {current!r}"
                )
        if not root_exists:
            return False
        writable = self.writable_bookies()
        readonly = self.readonly_bookies()
        if writable or readonly:
            raise NukeRefused(
                "bookies are still registered ("
                + ", ".join(writable + [f"{b} (read-only)" for b in readonly])
                + "); stop all bookies before nuking the cluster"
            )
        manager = self._current_manager_for_wipe()
        for child in self._children(self.root):
            if not P.is_special_znode(child) and not P.is_ledger_parent_name(child, manager):
                raise NukeRefused(f"unexpected znode {self._p(child)}; not nuking")
        self._wipe_ledgers_and_layout()
        for child in self._children(self.root):
            if not P.is_special_znode(child):
                raise NukeRefused(f"unexpected znode {self._p(child)} appeared; stopped half-way")
            self._delete_tree(self._p(child))
        try:
            self._zk.delete(self.root)
        except NoNodeError:
            pass
        except NotEmptyError:
            raise NukeRefused(f"{self.root} gained new children while being nuked") from None
        self._manager = None
        self._ur_checked = False
        return True

    # -- ledger ids --------------------------------------------------------------
    @_zk_call
    def generate_ledger_id(self) -> int:
        """A new unique ledger id from ZooKeeper sequential nodes (BookKeeper's scheme)."""
        manager = self.manager
        if manager == P.FLAT:
            return self._short_id(self.root)
        if manager == P.LEGACY_HIERARCHICAL:
            return self._short_id(self._p(P.IDGEN))
        # hierarchical / longhierarchical: 31-bit ids until they overflow
        if not self._long_idgen_present():
            short = self._short_id(self._p(P.IDGEN), allow_overflow=True)
            if short is not None:
                return short
            self._zk.ensure_path(self._p(P.IDGEN_LONG))
            self._idgen_long_present = True
        return self._long_id()

    def _long_idgen_present(self) -> bool:
        if self._idgen_long_present is None:
            self._idgen_long_present = self._exists(self._p(P.IDGEN_LONG)) is not None
        return self._idgen_long_present

    def _sequential(self, parent: str) -> int:
        """Create ``parent/ID-<seq>`` (ephemeral, sequential), delete it, return seq."""
        created = self._zk.create(f"{parent}/{P.ID_PREFIX}", b"", ephemeral=True,
                                  sequence=True, makepath=True)
        try:
            leaf = created.rsplit("/", 1)[-1][len(P.ID_PREFIX):]
            seq = int(leaf)  # may be negative once the signed counter wraps
        finally:
            self._delete_quiet(created)
        return seq

    def _short_id(self, parent: str, allow_overflow: bool = False) -> int | None:
        seq = self._sequential(parent)
        if 0 <= seq < _SEQ_OVERFLOW:
            return seq
        if allow_overflow:
            return None
        raise MetadataStoreError(f"ledger id space of {parent} is exhausted (sequence {seq})")

    def _long_id(self) -> int:
        base = self._p(P.IDGEN_LONG)
        for _ in range(64):
            highs = []
            for child in self._children_or_empty(base):
                try:
                    highs.append(P.parse_hob_name(child))
                except ValueError:
                    continue
            if not highs:
                self._create_if_missing(f"{base}/{P.hob_name(1)}")
                continue
            highs.sort()
            high = highs[-1]
            seq = self._sequential(f"{base}/{P.hob_name(high)}")
            for old in highs[:-_KEEP_HOB_NODES]:
                self._delete_quiet(f"{base}/{P.hob_name(old)}", 0)
            if 0 <= seq < _SEQ_OVERFLOW:
                return (high << 32) | seq
            self._create_if_missing(f"{base}/{P.hob_name(high + 1)}")
        raise MetadataStoreError(f"could not allocate a 63-bit ledger id below {base}")

    # -- ledger metadata -----------------------------------------------------------
    def ledger_path(self, ledger_id: int) -> str:
        return P.ledger_path(ledger_id, self.manager, self.root)

    def _decode_ledger(self, ledger_id: int, data: bytes, stat) -> LedgerMetadata:
        try:
            md = parse_ledger_metadata(data)
        except CodecError as exc:
            raise MetadataStoreError(f"ledger {ledger_id} has corrupt metadata: {exc}") from None
        if md.ctime is None:
            md = replace(md, ctime=stat.ctime)
        return md

    @_zk_call
    def create_ledger(self, md: LedgerMetadata, ledger_id: int | None = None) -> tuple[int, int]:
        """Store *md* as a new ledger; returns ``(ledger_id, version)`` (version 0).

        With no *ledger_id* one is generated.  Raises :class:`LedgerExists`
        if the ledger znode is already there.
        """
        if ledger_id is None:
            ledger_id = self.generate_ledger_id()
        path = self.ledger_path(ledger_id)
        data = serialize_ledger_metadata(md)
        for attempt in range(5):
            try:
                self._zk.create(path, data, makepath=True)
                return ledger_id, 0
            except NodeExistsError:
                raise LedgerExists(ledger_id) from None
            except NoNodeError:
                # a concurrent delete pruned an empty parent between makepath and create
                if attempt == 4:
                    raise
        raise AssertionError("unreachable")

    @_zk_call
    def read_ledger(self, ledger_id: int) -> tuple[LedgerMetadata, int]:
        """``(metadata, version)``; ``metadata.ctime`` falls back to the znode ctime."""
        try:
            data, stat = self._get(self.ledger_path(ledger_id))
        except NoNodeError:
            raise NoSuchLedger(ledger_id) from None
        return self._decode_ledger(ledger_id, data, stat), stat.version

    @_zk_call
    def read_ledger_bytes(self, ledger_id: int) -> tuple[bytes, int]:
        """The raw znode value and its version (for dumps)."""
        try:
            data, stat = self._get(self.ledger_path(ledger_id))
        except NoNodeError:
            raise NoSuchLedger(ledger_id) from None
        return data, stat.version

    @_zk_call
    def restore_ledger_bytes(self, ledger_id: int, data: bytes, overwrite: bool = False) -> int:
        """Write serialized metadata (any format, checked by parsing) exactly as given, as
        Java's ``ledgermetadata -restorefromfile``: create the znode, or with *overwrite*
        replace an existing one (version -1).  Raises :class:`LedgerExists` when it exists
        and *overwrite* is false; returns the new version."""
        try:
            parse_ledger_metadata(data)
        except CodecError as exc:
            raise MetadataStoreError(f"not ledger metadata: {exc}") from None
        path = self.ledger_path(ledger_id)
        try:
            self._zk.create(path, data, makepath=True)
            return 0
        except NodeExistsError:
            if not overwrite:
                raise LedgerExists(ledger_id) from None
        return self._zk.set(path, data, version=-1).version

    @_zk_call
    def ledger_exists(self, ledger_id: int) -> bool:
        return self._exists(self.ledger_path(ledger_id)) is not None

    def _conflict(self, ledger_id: int, expected_version: int) -> ZKStoreError:
        try:
            data, stat = self._get(self.ledger_path(ledger_id))
        except NoNodeError:
            return NoSuchLedger(ledger_id)
        return MetadataVersionConflict(ledger_id, expected_version,
                                       self._decode_ledger(ledger_id, data, stat), stat.version)

    @_zk_call
    def update_ledger(self, ledger_id: int, md: LedgerMetadata, expected_version: int) -> int:
        """Compare-and-set the metadata; returns the new version.

        Raises :class:`MetadataVersionConflict` (carrying the current
        metadata and version) when the znode moved on, :class:`NoSuchLedger`
        when it is gone.  A ``ctime`` that :meth:`read_ledger` only filled in
        from the znode is not written into the value (Java keeps such
        ledgers without a stored ctime).
        """
        path = self.ledger_path(ledger_id)
        if md.ctime is not None:
            try:
                current, stat = self._get(path)
            except NoNodeError:
                raise NoSuchLedger(ledger_id) from None
            if expected_version != -1 and stat.version != expected_version:
                raise MetadataVersionConflict(ledger_id, expected_version,
                                              self._decode_ledger(ledger_id, current, stat), stat.version)
            if md.ctime == stat.ctime:
                try:
                    stored_ctime = parse_ledger_metadata(current).ctime
                except CodecError:
                    stored_ctime = None
                if stored_ctime is None:
                    md = replace(md, ctime=None)
        data = serialize_ledger_metadata(md)
        try:
            stat = self._zk.set(path, data, version=expected_version)
        except BadVersionError:
            raise self._conflict(ledger_id, expected_version) from None
        except NoNodeError:
            raise NoSuchLedger(ledger_id) from None
        return stat.version

    @_zk_call
    def delete_ledger(self, ledger_id: int, version: int = -1) -> None:
        """Delete the ledger znode, then its empty parents; a missing ledger is fine."""
        path = self.ledger_path(ledger_id)
        try:
            self._zk.delete(path, version)
        except NoNodeError:
            pass
        except BadVersionError:
            raise self._conflict(ledger_id, version) from None
        for parent in reversed(P.ledger_parent_paths(ledger_id, self.manager, self.root)):
            try:
                self._zk.delete(parent)
            except NotEmptyError:
                break
            except NoNodeError:
                continue

    @_zk_gen
    def iter_ledger_ids(self) -> Iterator[int]:
        """Every ledger id, ascending, walking the hierarchy one level at a time."""
        manager = self.manager
        top = sorted(self._children_or_empty(self.root))
        if manager == P.FLAT:
            ids = []
            for name in top:
                if P.is_ledger_parent_name(name, P.FLAT):
                    ids.append(int(name[1:]))
            yield from sorted(ids)
            return
        if manager in (P.HIERARCHICAL, P.LEGACY_HIERARCHICAL):
            legacy = [n for n in top if len(n) == 2 and P.is_ledger_parent_name(n, P.LEGACY_HIERARCHICAL)]
            for ledger_id in self._walk(legacy, depth=3):
                if manager == P.LEGACY_HIERARCHICAL or ledger_id < P.HIERARCHICAL_LONG_THRESHOLD:
                    yield ledger_id
        if manager in (P.HIERARCHICAL, P.LONG_HIERARCHICAL):
            long_tops = [n for n in top if len(n) == 3 and P.is_ledger_parent_name(n, P.LONG_HIERARCHICAL)]
            for ledger_id in self._walk(long_tops, depth=5):
                if manager == P.LONG_HIERARCHICAL or ledger_id >= P.HIERARCHICAL_LONG_THRESHOLD:
                    yield ledger_id

    _DIGITS4 = re.compile(r"\d{4}")
    _LEAF4 = re.compile(r"L\d{4}")

    def _walk(self, tops: list[str], depth: int) -> Iterator[int]:
        """Depth-first, sorted walk of ``depth``-level ledger paths below the root."""

        def descend(prefix: list[str]) -> Iterator[int]:
            level = len(prefix)
            names = sorted(self._children_or_empty(self._p(*prefix)))
            if level == depth - 1:
                for name in names:
                    if self._LEAF4.fullmatch(name):
                        yield int("".join(prefix) + name[1:])
                return
            for name in names:
                if self._DIGITS4.fullmatch(name):
                    yield from descend(prefix + [name])

        for top in tops:
            yield from descend([top])

    # -- bookie registration ---------------------------------------------------------
    def _registration_path(self, bookie_id: str, readonly: bool) -> str:
        return P.readonly_path(bookie_id, self.root) if readonly else P.available_path(bookie_id, self.root)

    @_zk_call
    def register_bookie(self, bookie_id: str, service_info: bytes | BookieServiceInfo = b"",
                        readonly: bool = False) -> None:
        """Create the bookie's EPHEMERAL registration node.

        Read-only registration creates ``available/readonly/<id>`` (and
        ``readonly/`` itself if missing) before deleting the writable node.
        A node held by another session is waited for up to the session
        timeout.  The registration is restored automatically after a
        session expiry, until :meth:`unregister_bookie` or :meth:`close`.
        """
        _check_bookie_id(bookie_id)
        data = service_info if isinstance(service_info, bytes) else service_info.serialize()
        with self._lock:
            self._register(bookie_id, data, readonly)
            self._registrations[bookie_id] = (readonly, data)

    def _register(self, bookie_id: str, data: bytes, readonly: bool) -> None:
        if readonly:
            if self._exists(self._readonly) is None:
                self._create_if_missing(self._readonly, data)
            self._create_registration(self._registration_path(bookie_id, True), data)
            self._delete_quiet(self._registration_path(bookie_id, False))
        else:
            self._create_registration(self._registration_path(bookie_id, False), data)
            self._delete_quiet(self._registration_path(bookie_id, True))

    def _create_registration(self, path: str, data: bytes) -> None:
        # A killed predecessor's node goes when ZooKeeper expires its session: up to
        # a tick after its timeout, counted on the server's clock.  Waiting only one
        # session timeout made a quick restart after kill -9 fail at random.
        wait = 2 * self.session_timeout
        deadline = time.monotonic() + wait
        while True:
            gone = threading.Event()

            def watch(event, gone=gone):
                gone.set()

            stat = self._zk.exists(path, watch=watch)
            if stat is None:
                try:
                    self._zk.create(path, data, ephemeral=True)
                    return
                except NodeExistsError:
                    continue
                except NoNodeError:
                    raise ClusterNotFound(
                        f"{path.rsplit('/', 1)[0]} does not exist; is the cluster initialised?"
                    ) from None
            if stat.ephemeralOwner == self.session_id:
                if self._get(path)[0] != data:
                    self._zk.set(path, data)
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not gone.wait(remaining):
                raise BookieRegistrationError(
                    f"{path} is held by another ZooKeeper session (0x{stat.ephemeralOwner:x}) "
                    f"and did not go away within {wait:g}s"
                )

    @_zk_call
    def unregister_bookie(self, bookie_id: str, readonly: bool | None = None) -> None:
        """Delete the registration node(s) and stop restoring them."""
        _check_bookie_id(bookie_id)
        with self._lock:
            self._registrations.pop(bookie_id, None)
            kinds = (False, True) if readonly is None else (readonly,)
            for kind in kinds:
                self._delete_quiet(self._registration_path(bookie_id, kind))

    def _on_state(self, state: str) -> None:
        # runs on kazoo's connection thread: never block or call ZooKeeper here
        if state == KazooState.LOST:
            self._session_lost = True
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            self._reregister_needed.set()

    def _reregister_loop(self) -> None:
        while True:
            self._reregister_needed.wait()
            if self._closing:
                return
            self._reregister_needed.clear()
            with self._lock:
                items = list(self._registrations.items())
            for bookie_id, (readonly, data) in items:
                try:
                    with self._lock:
                        if self._registrations.get(bookie_id) != (readonly, data):
                            continue
                        self._register(bookie_id, data, readonly)
                    log.info("re-registered bookie %s after ZooKeeper session expiry", bookie_id)
                except Exception as exc:  # keep trying on the next reconnect
                    if self._closing:
                        return
                    log.warning("could not re-register bookie %s: %s", bookie_id, exc)
                    self._reregister_needed.set()
                    time.sleep(0.5)

    @_zk_call
    def writable_bookies(self) -> list[str]:
        return sorted(c for c in self._children_or_empty(self._available) if c != P.READONLY)

    @_zk_call
    def readonly_bookies(self) -> list[str]:
        return sorted(self._children_or_empty(self._readonly))

    @_zk_call
    def all_bookies(self) -> list[str]:
        """Every bookie that has a cookie (``listbookies -a``)."""
        return sorted(self._children_or_empty(self._p(P.COOKIES)))

    @_zk_call
    def is_bookie_registered(self, bookie_id: str) -> bool:
        _check_bookie_id(bookie_id)
        return any(self._exists(self._registration_path(bookie_id, ro)) is not None for ro in (False, True))

    @_zk_call
    def bookie_service_info(self, bookie_id: str) -> BookieServiceInfo | None:
        """The published service info (writable node first); None if not registered.

        Legacy registrations (empty data) give an info without endpoints; use
        ``info.rpc_address(bookie_id)`` to resolve either kind.
        """
        _check_bookie_id(bookie_id)
        for readonly in (False, True):
            try:
                data, _ = self._get(self._registration_path(bookie_id, readonly))
            except NoNodeError:
                continue
            try:
                return BookieServiceInfo.parse(data)
            except CodecError as exc:
                raise MetadataStoreError(f"corrupt registration of bookie {bookie_id}: {exc}") from None
        return None

    # -- cookies ---------------------------------------------------------------------
    def _decode_cookie(self, bookie_id: str, data: bytes) -> Cookie:
        try:
            return parse_cookie(data)
        except CodecError as exc:
            raise MetadataStoreError(f"corrupt cookie of bookie {bookie_id}: {exc}") from None

    @_zk_call
    def get_cookie(self, bookie_id: str) -> tuple[Cookie, int] | None:
        _check_bookie_id(bookie_id)
        try:
            data, stat = self._get(P.cookie_path(bookie_id, self.root))
        except NoNodeError:
            return None
        return self._decode_cookie(bookie_id, data), stat.version

    @_zk_call
    def put_cookie(self, bookie_id: str, cookie: Cookie | bytes, version: int | None = None) -> int:
        """Create (``version=None``) or compare-and-set the cookie; returns the new version."""
        _check_bookie_id(bookie_id)
        data = cookie if isinstance(cookie, bytes) else cookie.serialize()
        path = P.cookie_path(bookie_id, self.root)
        if version is None:
            if self._exists(self.root) is None:
                raise ClusterNotFound(f"no BookKeeper cluster at {self.root} on {self.hosts}")
            self._create_if_missing(self._p(P.COOKIES))
            try:
                self._zk.create(path, data)
            except NodeExistsError:
                raise CookieExists(bookie_id) from None
            return 0
        try:
            return self._zk.set(path, data, version=version).version
        except NoNodeError:
            raise NoSuchCookie(bookie_id) from None
        except BadVersionError:
            raise self._cookie_conflict(bookie_id, version) from None

    def _cookie_conflict(self, bookie_id: str, version: int) -> ZKStoreError:
        current = self.get_cookie(bookie_id)
        if current is None:
            return NoSuchCookie(bookie_id)
        return CookieVersionConflict(bookie_id, version, current[0], current[1])

    @_zk_call
    def delete_cookie(self, bookie_id: str, version: int = -1) -> None:
        _check_bookie_id(bookie_id)
        try:
            self._zk.delete(P.cookie_path(bookie_id, self.root), version)
        except NoNodeError:
            raise NoSuchCookie(bookie_id) from None
        except BadVersionError:
            raise self._cookie_conflict(bookie_id, version) from None

    # -- rack map --------------------------------------------------------------------
    @_zk_call
    def read_rack_map(self) -> tuple[dict, int | None]:
        """Pulsar's rack map (``/bookies`` at the ZooKeeper root) and its
        version; ``({}, None)`` when there is none."""
        from bkctl.wire.metadata.racks import RACK_MAP_PATH, parse_rack_map

        try:
            data, stat = self._get(RACK_MAP_PATH)
        except NoNodeError:
            return {}, None
        return parse_rack_map(data), stat.version

    @_zk_call
    def write_rack_map(self, doc: dict, version: int | None) -> int:
        """Create (``version=None``) or compare-and-set the rack map; returns
        the new version (:class:`VersionConflict` when it changed meanwhile)."""
        from bkctl.wire.metadata.racks import RACK_MAP_PATH, serialize_rack_map

        data = serialize_rack_map(doc)
        try:
            if version is None:
                self._zk.create(RACK_MAP_PATH, data)
                return 0
            return self._zk.set(RACK_MAP_PATH, data, version=version).version
        except (NodeExistsError, BadVersionError, NoNodeError):
            current, current_version = self.read_rack_map()
            raise VersionConflict("the rack map " + RACK_MAP_PATH, -1 if version is None else version,
                                  current, -1 if current_version is None else current_version) from None

    # -- autorecovery ------------------------------------------------------------------
    @_zk_call
    def ensure_underreplication_layout(self) -> None:
        """Create ``B``, ``B/LAYOUT`` (checking an existing one), ``B/ledgers`` and ``B/locks``."""
        if self._exists(self.root) is None:
            raise ClusterNotFound(f"no BookKeeper cluster at {self.root} on {self.hosts}")
        self._create_if_missing(self._ur_base)
        path = self._ur(P.UR_LAYOUT)
        expected = UR.serialize_underreplication_layout()
        if not self._create_if_missing(path, expected):
            data, _ = self._get(path)
            try:
                UR.parse_underreplication_layout(data)
            except CodecError as exc:
                raise MetadataStoreError(f"{path}: {exc}") from None
        self._create_if_missing(self._ur(P.UR_LEDGERS))
        self._create_if_missing(self._ur(P.UR_LOCKS))
        self._ur_checked = True

    def _ensure_ur(self) -> None:
        if not self._ur_checked:
            self.ensure_underreplication_layout()

    @_zk_call
    def is_autorecovery_enabled(self) -> bool:
        return self._exists(self._ur(P.UR_DISABLE)) is None

    @_zk_call
    def disable_autorecovery(self) -> bool:
        """Create ``B/disable``; False if it was already disabled."""
        self._ensure_ur()
        return self._create_if_missing(self._ur(P.UR_DISABLE), b"")

    @_zk_call
    def enable_autorecovery(self) -> bool:
        """Delete ``B/disable``; False if it was already enabled."""
        self._ensure_ur()
        try:
            self._zk.delete(self._ur(P.UR_DISABLE))
            return True
        except NoNodeError:
            return False

    @_zk_call
    def get_lost_bookie_recovery_delay(self) -> int | None:
        """``B/lostBookieRecoveryDelay`` in seconds (None if the node is missing)."""
        path = self._ur(P.UR_LOST_BOOKIE_RECOVERY_DELAY)
        try:
            data, _ = self._get(path)
        except NoNodeError:
            return None
        try:
            return UR.parse_lost_bookie_recovery_delay(data)
        except CodecError as exc:
            raise MetadataStoreError(f"corrupt {path}: {exc}") from None

    @_zk_call
    def set_lost_bookie_recovery_delay(self, seconds: int) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, int) or not -2**31 <= seconds < 2**31:
            raise ValueError(f"lostBookieRecoveryDelay must be a 32-bit integer, got {seconds!r}")
        self._ensure_ur()
        path = self._ur(P.UR_LOST_BOOKIE_RECOVERY_DELAY)
        data = UR.serialize_lost_bookie_recovery_delay(seconds)
        try:
            self._zk.set(path, data, version=-1)
        except NoNodeError:
            try:
                self._zk.create(path, data)
            except NodeExistsError:
                self._zk.set(path, data, version=-1)

    @_zk_call
    def mark_underreplicated(self, ledger_id: int, missing_replicas: Iterable[str]) -> None:
        """Mark (or merge into) the ledger's ``urL`` node, retrying on version conflicts."""
        missing = list(dict.fromkeys(missing_replicas))
        self._ensure_ur()
        path = P.underreplication_path(ledger_id, self.root)
        for _ in range(100):
            ctime = int(time.time() * 1000) if self.store_ctime else None
            try:
                self._zk.create(path, UR.UnderreplicatedLedger(tuple(missing), ctime).serialize(),
                                makepath=True)
                return
            except NodeExistsError:
                pass
            try:
                data, stat = self._get(path)
            except NoNodeError:
                continue
            try:
                marker = UR.parse_underreplicated_ledger(data)
            except CodecError as exc:
                raise MetadataStoreError(f"corrupt {path}: {exc}") from None
            if all(r in marker.replicas for r in missing):
                return
            merged = marker.merged(missing)
            if ctime is not None:
                merged = UR.UnderreplicatedLedger(merged.replicas, ctime)
            try:
                self._zk.set(path, merged.serialize(), version=stat.version)
                return
            except (BadVersionError, NoNodeError):
                continue
        raise MetadataStoreError(f"could not mark ledger {ledger_id} under-replicated: too much contention")

    @_zk_call
    def get_underreplicated(self, ledger_id: int) -> UnderreplicatedMark | None:
        path = P.underreplication_path(ledger_id, self.root)
        try:
            data, _ = self._get(path)
        except NoNodeError:
            return None
        return self._decode_ur(ledger_id, path, data)

    def _decode_ur(self, ledger_id: int, path: str, data: bytes) -> UnderreplicatedMark:
        try:
            marker = UR.parse_underreplicated_ledger(data)
        except CodecError as exc:
            raise MetadataStoreError(f"corrupt {path}: {exc}") from None
        return UnderreplicatedMark(ledger_id, marker.replicas, marker.ctime)

    def _walk_underreplicated(self) -> Iterator[tuple[int, str]]:
        """``(ledger_id, path)`` of each marker, ascending (lowercase hex sorts numerically)."""
        hex4 = re.compile(r"[0-9a-f]{4}")
        base = self._ur(P.UR_LEDGERS)

        def descend(path: str, level: int) -> Iterator[tuple[int, str]]:
            names = sorted(self._children_or_empty(path))
            if level == 4:
                found = []
                for name in names:
                    try:
                        found.append((P.parse_urL_name(name), f"{path}/{name}"))
                    except ValueError:
                        continue
                yield from sorted(found)
                return
            for name in names:
                if hex4.fullmatch(name):
                    yield from descend(f"{path}/{name}", level + 1)

        yield from descend(base, 0)

    @_zk_gen
    def iter_underreplicated(self) -> Iterator[UnderreplicatedMark]:
        """``(ledger_id, replicas, ctime)`` for every marked ledger, ascending ids."""
        for ledger_id, path in self._walk_underreplicated():
            try:
                data, _ = self._get(path)
            except NoNodeError:
                continue  # replicated meanwhile
            yield self._decode_ur(ledger_id, path, data)

    @_zk_call
    def count_underreplicated(self) -> int:
        return sum(1 for _ in self._walk_underreplicated())

    @_zk_call
    def underreplication_lock_holder(self, ledger_id: int) -> str | None:
        """The host name in ``B/locks/urL<id>`` (who is re-replicating the ledger)."""
        try:
            data, _ = self._get(P.underreplication_lock_path(ledger_id, self.root))
        except NoNodeError:
            return None
        try:
            return UR.parse_lock_data(data)
        except CodecError:
            return None

    @_zk_call
    def acquire_underreplicated_ledger(self, holder: str, *, skip: Iterable[int] = ()) -> tuple[UnderreplicatedMark, int] | None:
        """Take one marked ledger that nobody holds, as Java's replication worker does:
        walk the marker tree in random order, create the ledger's lock
        ``B/locks/urL<id>`` (EPHEMERAL, ``LockDataFormat`` naming ``holder``),
        then read the marker.  Returns the mark and the marker's version (give it
        to :meth:`mark_ledger_replicated`), or None when every marker is locked
        (or in ``skip``).  The lock goes with this session."""
        self._ensure_ur()
        skipped = set(skip)
        lock_data = UR.serialize_lock_data(holder)
        hex4 = re.compile(r"[0-9a-f]{4}")

        def walk(path: str, level: int) -> Iterator[tuple[int, str]]:
            names = self._children_or_empty(path)
            random.shuffle(names)
            for name in names:
                if level == 4:
                    try:
                        yield P.parse_urL_name(name), f"{path}/{name}"
                    except ValueError:
                        continue
                elif hex4.fullmatch(name):
                    yield from walk(f"{path}/{name}", level + 1)

        for ledger_id, path in walk(self._ur(P.UR_LEDGERS), 0):
            if ledger_id in skipped:
                continue
            lock = P.underreplication_lock_path(ledger_id, self.root)
            try:
                self._zk.create(lock, lock_data, ephemeral=True)
            except NodeExistsError:
                continue
            try:
                data, stat = self._get(path)
            except NoNodeError:  # replicated between the walk and the lock
                self._delete_own(lock)
                continue
            return self._decode_ur(ledger_id, path, data), stat.version
        return None

    def _delete_own(self, path: str) -> bool:
        """Delete an ephemeral node only if this session created it (a lock that
        outlived our session may already be someone else's)."""
        try:
            _, stat = self._get(path)
        except NoNodeError:
            return False
        if stat.ephemeralOwner != self.session_id:
            return False
        try:
            self._zk.delete(path, version=stat.version)
            return True
        except (NoNodeError, BadVersionError):
            return False

    @_zk_call
    def mark_ledger_replicated(self, ledger_id: int, version: int) -> bool:
        """Delete the ledger's marker if it still has ``version`` (False: it was
        re-marked meanwhile and stays), prune its empty hex directories, and
        release the lock."""
        path = P.underreplication_path(ledger_id, self.root)
        try:
            self._zk.delete(path, version=version)
            done = True
        except NoNodeError:
            done = True
        except BadVersionError:
            done = False
        if done:
            for parent in reversed(P.underreplication_parent_paths(ledger_id, self.root)):
                try:
                    self._zk.delete(parent)
                except (NotEmptyError, NoNodeError):
                    break
        self._delete_own(P.underreplication_lock_path(ledger_id, self.root))
        return done

    @_zk_call
    def release_underreplicated_ledger(self, ledger_id: int) -> None:
        """Let go of a ledger's replication lock (only if it is ours)."""
        self._delete_own(P.underreplication_lock_path(ledger_id, self.root))

    @_zk_call
    def underreplication_locks(self) -> dict[int, str | None]:
        """Every replication lock: ledger id -> the holder's host name."""
        held: dict[int, str | None] = {}
        base = self._ur(P.UR_LOCKS)
        for name in self._children_or_empty(base):
            try:
                ledger_id = P.parse_urL_name(name)
                data, _ = self._get(f"{base}/{name}")
            except (ValueError, NoNodeError):
                continue
            try:
                held[ledger_id] = UR.parse_lock_data(data)
            except CodecError:
                held[ledger_id] = None
        return held

    @_zk_call
    def cast_auditor_vote(self, bookie_id: str) -> str:
        """Create this daemon's EPHEMERAL_SEQUENTIAL vote ``B/auditorelection/V_%010d``
        (AuditorVoteFormat); returns its node name."""
        self._ensure_ur()
        election = self._ur(P.UR_AUDITOR_ELECTION)
        self._create_if_missing(election)
        path = self._zk.create(f"{election}/{P.UR_VOTE_PREFIX}", UR.serialize_auditor_vote(bookie_id),
                               ephemeral=True, sequence=True)
        return path.rsplit("/", 1)[1]

    @_zk_call
    def auditor_votes(self) -> list[str]:
        """Vote node names, lowest sequence number (the auditor) first."""
        votes = []
        for name in self._children_or_empty(self._ur(P.UR_AUDITOR_ELECTION)):
            if name.startswith(P.UR_VOTE_PREFIX) and name[len(P.UR_VOTE_PREFIX):].isdigit():
                votes.append((int(name[len(P.UR_VOTE_PREFIX):]), name))
        return [name for _, name in sorted(votes)]

    @_zk_call
    def watch_vote_gone(self, name: str, callback: Callable[[], None]) -> bool:
        """Call ``callback`` (from kazoo's thread) once vote ``name`` is deleted or
        the session ends; False (no watch set) if it is already gone."""
        path = f"{self._ur(P.UR_AUDITOR_ELECTION)}/{name}"
        return self._zk.exists(path, watch=lambda _event: callback()) is not None

    @_zk_call
    def publish_auditor(self, bookie_id: str) -> None:
        """Write the elected auditor into ``B/auditorelection`` (informational, as Java does)."""
        self._zk.set(self._ur(P.UR_AUDITOR_ELECTION), UR.serialize_auditor_vote(bookie_id), version=-1)

    @_zk_call
    def who_is_auditor(self) -> str | None:
        """Bookie id of the lowest ``B/auditorelection/V_`` vote (None: no auditor)."""
        election = self._ur(P.UR_AUDITOR_ELECTION)
        votes = []
        for name in self._children_or_empty(election):
            if name.startswith(P.UR_VOTE_PREFIX):
                try:
                    votes.append((int(name[len(P.UR_VOTE_PREFIX):]), name))
                except ValueError:
                    continue
        for _, name in sorted(votes):
            try:
                data, _ = self._get(f"{election}/{name}")
            except NoNodeError:
                continue  # that auditor just left; the next vote wins
            try:
                return UR.parse_auditor_vote(data)
            except CodecError as exc:
                raise MetadataStoreError(f"corrupt auditor vote {name}: {exc}") from None
        return None
