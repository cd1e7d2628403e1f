"""One ZooKeeper session shared by every manager of the store.

:class:`ZKSession` owns the kazoo client: connecting (with the credentials,
TLS and ACLs of :mod:`~bkctl.wire.metadata.zksecurity`), closing, turning
kazoo's exceptions into :mod:`~bkctl.wire.metadata.errors`, and telling the
managers when an expired session has been replaced (so registration can put
its ephemeral nodes back).  The small znode helpers the managers share live
here too.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, Self, TypeVar

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
    SessionClosedRequireSaslError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import Callback, WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry

from bkctl.wire.errors import CodecError
from bkctl.wire.metadata.errors import ClusterNotFound, MetadataStoreError, ZKAuthError, ZKStoreError, ZKUnavailable

if TYPE_CHECKING:
    from bkctl.wire.fastpath import Twins
    from bkctl.wire.metadata.zk.scan import ZnodeScanner
    from bkctl.wire.metadata.zksecurity import ZKSecurity

log = logging.getLogger(__name__)

__all__ = ["Manager", "ZKSession", "kazoo_args", "zk_call", "zk_gen"]

_AUTH_ERRORS = (NoAuthError, AuthFailedError, SessionClosedRequireSaslError)

_CONNECTION_ERRORS = (
    ConnectionLoss,
    SessionExpiredError,
    ConnectionClosedError,
    OperationTimeoutError,
    KazooTimeoutError,
)

# kazoo's connection thread dies with the exception when SASL fails (the client
# then only sees "connection closed"): keep it, keyed by thread, instead of
# letting Python print its traceback, so the store can say what happened.
_loop_failures: weakref.WeakKeyDictionary[threading.Thread, BaseException] = weakref.WeakKeyDictionary()
_hook_lock = threading.Lock()
#: the threading.excepthook installed by _install_loop_hook (once per process)
_installed_hook = None


def _install_loop_hook() -> None:
    global _installed_hook
    with _hook_lock:
        if _installed_hook is not None:
            return
        previous = threading.excepthook

        def hook(args: threading.ExceptHookArgs) -> None:
            if args.thread is not None and isinstance(args.exc_value, _AUTH_ERRORS):
                _loop_failures[args.thread] = args.exc_value
                return
            previous(args)

        threading.excepthook = _installed_hook = hook


def _loop_failure(zk: KazooClient) -> BaseException | None:
    routine = getattr(getattr(zk, "_connection", None), "_connection_routine", None)
    return _loop_failures.get(routine) if routine is not None else None


def kazoo_args(security: ZKSecurity) -> dict[str, Any]:
    """Keyword arguments for :class:`kazoo.client.KazooClient` from a
    :class:`~bkctl.wire.metadata.zksecurity.ZKSecurity`."""
    args: dict[str, Any] = {}
    if security.digest:
        args["auth_data"] = [("digest", security.digest)]
    if security.sasl_mechanism:
        options = {"mechanism": security.sasl_mechanism.upper()}
        if security.sasl_username is not None:
            options["username"] = security.sasl_username
        if security.sasl_password is not None:
            options["password"] = security.sasl_password
        args["sasl_options"] = options
    if security.uses_tls:
        args.update(use_ssl=True, verify_certs=True)
        if security.tls_ca:
            args["ca"] = security.tls_ca
        if security.tls_cert:
            args.update(certfile=security.tls_cert, keyfile=security.tls_key)
    if security.enable_security:
        from kazoo.security import CREATOR_ALL_ACL

        args["default_acl"] = list(CREATOR_ALL_ACL)
    return args


#: lists shorter than this are read through kazoo (the walk's connection is for walks)
_SCAN_AT_LEAST = 64
#: deletes in flight at a time in :meth:`ZKSession.delete_tree`
_DELETE_WINDOW = 512
#: names :meth:`ZKSession.delete_tree` keeps of the lists one level's listing found (a leaf of the
#: hierarchical layout holds up to 10,000 ledgers); the others are listed again in their turn
_KEEP_LISTED = 10_000
#: how often :meth:`ZKSession.delete_tree` lists and deletes again a level whose znodes gain children
_DELETE_ROUNDS = 5

_P = ParamSpec("_P")
_R = TypeVar("_R")
_M = TypeVar("_M", bound="_OnSession")
_T = TypeVar("_T")
_K = TypeVar("_K")

#: what a manager's public method may raise from kazoo (KazooTimeoutError is no KazooException)
_KAZOO_ERRORS = (KazooException, KazooTimeoutError)


class _OnSession(Protocol):
    """What :func:`zk_call`'s methods belong to: an object over a session (a :class:`Manager`,
    a ledger's lock)."""

    @property
    def _session(self) -> ZKSession:
        """The session whose kazoo errors the method's become."""


def _translate(session: ZKSession, exc: Exception, name: str) -> ZKStoreError:
    if isinstance(exc, _AUTH_ERRORS):
        return session.auth_error(exc)
    if isinstance(exc, _CONNECTION_ERRORS):
        return session.unavailable(exc)
    return MetadataStoreError(f"ZooKeeper error in {name}: {type(exc).__name__} {exc}")


def zk_call(method: Callable[Concatenate[_M, _P], _R]) -> Callable[Concatenate[_M, _P], _R]:
    """Turn stray kazoo exceptions of a manager's public method into store errors."""

    @functools.wraps(method)
    def wrapper(self: _M, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        self._session.require_started()
        try:
            return method(self, *args, **kwargs)
        except _KAZOO_ERRORS as exc:
            raise _translate(self._session, exc, method.__name__) from None

    return wrapper


def zk_gen(method: Callable[Concatenate[_M, _P], Iterator[_R]]) -> Callable[Concatenate[_M, _P], Iterator[_R]]:
    """:func:`zk_call` for generator methods (errors surface while iterating)."""

    @functools.wraps(method)
    def wrapper(self: _M, *args: _P.args, **kwargs: _P.kwargs) -> Iterator[_R]:
        self._session.require_started()
        gen = method(self, *args, **kwargs)
        try:
            yield from gen
        except _KAZOO_ERRORS as exc:
            raise _translate(self._session, exc, method.__name__) from None

    return wrapper


class ZKSession:
    """The kazoo client of one metadata store, and the znode helpers its managers share.

    *timeout* bounds the initial connection; the session timeout defaults to it.
    """

    def __init__(
        self,
        hosts: str,
        root: str,
        timeout: float = 10.0,
        *,
        session_timeout: float | None = None,
        security: ZKSecurity | None = None,
        twins: Twins,
    ):
        from bkctl.wire.metadata.zksecurity import get_default

        #: the fast paths in use (:mod:`bkctl.wire.fastpath`, its builder's record): whether walks
        #: take the multiRead scanner, and the decoder of ledger metadata
        #: (:attr:`~bkctl.wire.fastpath.Twins.ledger_metadata`)
        self.twins = twins

        self.hosts = hosts
        self.root = root
        #: credentials, TLS and ACLs (:class:`~bkctl.wire.metadata.zksecurity.ZKSecurity`); the process default if None
        self.security = security if security is not None else get_default()
        self.timeout = float(timeout)
        self.session_timeout = float(session_timeout if session_timeout is not None else timeout)
        self._zk: KazooClient | None = None
        self._session_lost = False
        self._restore_needed = threading.Event()
        self._restore_thread: threading.Thread | None = None
        self._restorers: list[Callable[[], bool]] = []
        self._lost_listeners: list[Callable[[], None]] = []
        self._disconnect_listeners: list[Callable[[], None]] = []
        self._closing = False
        self._scanner: ZnodeScanner | None = None  # the walks' connection (walk_scanner), made on first use
        self._scanner_lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------
    def start(self) -> Self:
        if self._zk is not None:
            return self
        from bkctl.wire.metadata.zk.bounded_waits import BoundedWaitHandler

        zk = KazooClient(
            hosts=self.hosts,
            timeout=self.session_timeout,
            handler=BoundedWaitHandler(self.call_bound),
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
            command_retry=KazooRetry(max_tries=3, delay=0.1, max_delay=1.0),
            **kazoo_args(self.security),
        )
        zk.add_listener(self._on_state)
        _install_loop_hook()
        try:
            zk.start(timeout=self.timeout)
        except KazooTimeoutError:
            self._shutdown_client(zk)
            failed = _loop_failure(zk)
            raise (self.auth_error(failed) if failed else self._no_connection()) from None
        except AuthFailedError as exc:
            self._shutdown_client(zk)
            raise self.auth_error(exc) from None
        except Exception as exc:
            self._shutdown_client(zk)
            failed = _loop_failure(zk)
            if failed is not None:
                raise self.auth_error(failed) from None
            raise ZKUnavailable(f"cannot connect to ZooKeeper at {self.hosts}: {exc}") from None
        except BaseException:  # Ctrl-C while connecting: stop kazoo's retrying thread too...
            # ...without waiting for it: stop() joins kazoo's connection thread, which an attempt
            # at a server that takes the connection and never answers (stopped, hung) holds until
            # its read times out, 10 s or the session timeout; Ctrl-C ends the command now
            threading.Thread(target=self._shutdown_client, args=(zk,), name="zkstore-stop", daemon=True).start()
            raise
        self._zk = zk
        self._closing = False
        self._restore_thread = threading.Thread(target=self._restore_loop, name="zkstore-reregister", daemon=True)
        self._restore_thread.start()
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
        self._restore_needed.set()
        if zk is not None:
            self._shutdown_client(zk)
        if self._scanner_lock.acquire(timeout=5):  # a walk still going keeps it until it ends
            scanner, self._scanner = self._scanner, None
            self._scanner_lock.release()
            if scanner is not None:
                scanner.close()
        thread, self._restore_thread = self._restore_thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def call_bound(self) -> float:
        """How long one ZooKeeper call waits for its answer (:mod:`.bounded_waits`): twice the
        session timeout, past which the session it was made in has expired."""
        return 2 * max(self.session_timeout, self.timeout)

    @property
    def connected(self) -> bool:
        zk = self._zk
        return zk is not None and zk.connected

    @property
    def client(self) -> KazooClient:
        """The underlying kazoo client (for the managers, tests and kazoo recipes)."""
        zk = self._zk
        if zk is None:
            raise ZKUnavailable(f"metadata store for {self.hosts} is not started")
        return zk

    @property
    def session_id(self) -> int | None:
        zk = self._zk
        cid = zk.client_id if zk is not None else None
        return cid[0] if cid else None

    def require_started(self) -> None:
        if self._zk is None:
            raise ZKUnavailable(f"metadata store for {self.hosts} is not started")

    # -- a new session after an expiry -------------------------------------------
    def on_session_restored(self, restore: Callable[[], bool]) -> None:
        """Call *restore* (on the store's own thread) after an expired session has been
        replaced; it returns False to be called again half a second later."""
        self._restorers.append(restore)

    def on_session_lost(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call *callback* (on kazoo's thread) whenever the session ends, expired or
        closed; returns the function that stops the calls."""
        return _listen(self._lost_listeners, callback)

    def on_disconnect(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call *callback* (on kazoo's thread) whenever the connection drops or the session
        ends: what was read before may have changed unseen; returns the function that stops
        the calls."""
        return _listen(self._disconnect_listeners, callback)

    def _on_state(self, state: str) -> None:
        # runs on kazoo's connection thread: never block or call ZooKeeper here
        if state != KazooState.CONNECTED:
            for callback in list(self._disconnect_listeners):
                _call_listener(callback)
        if state == KazooState.LOST:
            self._session_lost = True
            for callback in list(self._lost_listeners):
                _call_listener(callback)
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            self._restore_needed.set()

    def _restore_loop(self) -> None:
        while True:
            self._restore_needed.wait()
            if self._closing:
                return
            self._restore_needed.clear()
            for restore in list(self._restorers):
                if self._closing:
                    return
                if not restore():
                    self._restore_needed.set()
                    time.sleep(0.5)

    @property
    def closing(self) -> bool:
        return self._closing

    # -- errors ------------------------------------------------------------------
    def _no_connection(self) -> ZKStoreError:
        """Why a start timed out: a TLS problem named by a direct handshake, else the timeout."""
        if self.security.uses_tls:
            from bkctl.wire.metadata.zksecurity import tls_problem

            problem = tls_problem(self.hosts, self.security)
            if problem:
                return ZKAuthError(f"TLS with ZooKeeper at {self.hosts} failed: {problem}")
        hint = f" ({self.security.describe()})" if self.security != type(self.security)() else ""
        return ZKUnavailable(f"cannot connect to ZooKeeper at {self.hosts} within {self.timeout:g}s{hint}")

    def auth_error(self, exc: BaseException) -> ZKAuthError:
        if isinstance(exc, NoAuthError):
            return ZKAuthError(
                f"ZooKeeper at {self.hosts} denied access (NoAuth) with "
                f"{self.security.describe()}: wrong or missing credentials"
            )
        if isinstance(exc, SessionClosedRequireSaslError):
            return ZKAuthError(
                f"ZooKeeper at {self.hosts} requires authentication and closed the session ({self.security.describe()})"
            )
        return ZKAuthError(f"ZooKeeper at {self.hosts} rejected the credentials ({self.security.describe()})")

    def unavailable(self, exc: BaseException) -> ZKStoreError:
        failed = _loop_failure(self._zk) if self._zk is not None else None
        if failed is not None:
            return self.auth_error(failed)
        reason = {
            SessionExpiredError: "session expired",
            ConnectionClosedError: "connection closed",
            ConnectionLoss: "connection lost",
            KazooTimeoutError: f"no answer within {self.call_bound:g}s",
        }.get(type(exc), type(exc).__name__)
        return ZKUnavailable(f"ZooKeeper at {self.hosts} unavailable: {reason}")

    # -- znode helpers -----------------------------------------------------------
    def path(self, *names: str) -> str:
        """A znode below the ledgers root."""
        return "/".join((self.root,) + names)

    def require_root(self) -> None:
        """Raise :class:`ClusterNotFound` unless the ledgers root exists."""
        if self.exists(self.root) is None:
            raise ClusterNotFound(f"no BookKeeper cluster at {self.root} on {self.hosts}")

    def exists(self, path: str) -> ZnodeStat | None:
        return self.client.retry(self.client.exists, path)

    def get(self, path: str) -> tuple[bytes, ZnodeStat]:
        value: tuple[bytes, ZnodeStat] = self.client.retry(self.client.get, path)
        return value

    def walk_scanner(self) -> ZnodeScanner | None:
        """A connection of its own for one long walk (:class:`~.scan.ZnodeScanner`, the
        fast path of :meth:`get_many`), or None where kazoo has to walk: fast paths off
        (``BKCTL_FASTPATHS=0``), SASL credentials, a chroot in the connect string."""
        from bkctl.wire.metadata.zk.scan import ZnodeScanner

        if not self.twins.enabled or not ZnodeScanner.usable_with(self.hosts, self.security):
            return None
        return ZnodeScanner(self.hosts, self.security, timeout=max(self.session_timeout, self.timeout))

    def get_many(self, paths: Iterable[str], window: int = 256) -> Iterator[tuple[bytes, Any] | None]:
        """``(value, stat)`` of each path, in order (None: no such znode), streaming.

        Read by a :meth:`walk_scanner` where there is one (multiRead batches on a
        connection of its own, which survives a lost connection by reading again what
        was not answered); else through kazoo with up to ``window`` gets in flight,
        where a get that failed otherwise (a connection loss) is retried alone, as
        :meth:`get` retries. A short list, or a stream that ends within
        ``_SCAN_AT_LEAST`` paths (its head is drawn to see), is read through kazoo:
        the scanner's connection is a second ZooKeeper session, not worth opening
        for a few reads."""
        if not isinstance(paths, (list, tuple)):
            it = iter(paths)
            head = list(itertools.islice(it, _SCAN_AT_LEAST))
            paths = head if len(head) < _SCAN_AT_LEAST else itertools.chain(head, it)
        if not (isinstance(paths, (list, tuple)) and len(paths) < _SCAN_AT_LEAST):
            scanned = self._scanned(lambda scanner: scanner.get_many(paths))
            if scanned is not None:
                yield from scanned
                return
        it = iter(paths)
        while True:
            chunk = list(itertools.islice(it, window))
            if not chunk:
                return
            pending = [(path, self.client.get_async(path)) for path in chunk]
            for path, result in pending:
                try:
                    yield result.get()
                except NoNodeError:
                    yield None
                except KazooException:
                    try:
                        yield self.get(path)
                    except NoNodeError:
                        yield None

    def children_many(self, paths: list[str], window: int = 256) -> Iterator[list[str] | None]:
        """The children of each path, in order (None: no such znode); a long list is read
        by the walks' scanner (:meth:`get_many`), a short one, or any where kazoo walks,
        through kazoo with up to ``window`` lists in flight (:meth:`_pipelined`)."""
        if len(paths) >= _SCAN_AT_LEAST:
            scanned = self._scanned(lambda scanner: scanner.children_many(paths))
            if scanned is not None:
                yield from scanned
                return
        for _, listed in self._pipelined(self.client.get_children_async, paths, window):
            yield None if isinstance(listed, NoNodeError) else listed

    def _pipelined(self, call: Callable[[str], Any], paths: list[str], window: int) -> Iterator[tuple[str, Any]]:
        """``(path, answer)`` of ``call(path)`` (one of kazoo's ``*_async``) for each path, in
        order, up to ``window`` in flight (kazoo answers them in order on the one session);
        a NoNode or NotEmpty answer is handed back as the exception.  An answer lost with the
        connection is asked again alone once kazoo is connected again; each wait is bounded
        (:attr:`call_bound`: a stopped ZooKeeper is a KazooTimeoutError, not a hang)."""
        for start in range(0, len(paths), window):
            asked = [(path, call(path)) for path in paths[start : start + window]]
            for path, answer in asked:
                for again in (False, True):
                    try:
                        yield path, (call(path) if again else answer).get()
                        break
                    except (NoNodeError, NotEmptyError) as refused:
                        yield path, refused
                        break
                    except _CONNECTION_ERRORS:
                        if again:
                            raise

    def _scanned(self, read: Callable[[ZnodeScanner], Iterator[_T]]) -> Iterator[_T] | None:
        """``read(scanner)`` with the scanner :meth:`_scanner_for_walk` gives, handed back
        (or closed) when the reading ends; None where kazoo has to read."""
        scanner, shared = self._scanner_for_walk()
        if scanner is None:
            return None

        def reading() -> Iterator[_T]:
            try:
                yield from read(scanner)
            finally:
                if shared:
                    self._scanner_lock.release()
                else:
                    scanner.close()

        return reading()

    def _scanner_for_walk(self) -> tuple[ZnodeScanner | None, bool]:
        """``(scanner, shared)``: the session's own scanner when no other walk holds it
        (its connection is kept between walks: a Pulsar walk reads thousands of small
        lists, and a ZooKeeper session each would be a write through the quorum), else a
        new one for this walk alone; None where kazoo walks."""
        if self._scanner_lock.acquire(blocking=False):
            if self._scanner is None:
                self._scanner = self.walk_scanner()
            if self._scanner is not None and not self._closing:
                return self._scanner, True
            self._scanner_lock.release()
            return None, False
        return self.walk_scanner(), False

    def get_each(self, keyed: Iterable[tuple[_K, str]]) -> Iterator[tuple[_K, tuple[bytes, Any] | None]]:
        """:meth:`get_many` of ``(key, path)`` pairs: ``(key, (value, stat) or None)`` in
        order, streaming (the pairs are drawn as the reads go out; a list is read as
        :meth:`get_many` reads a list: a short one through kazoo)."""
        if isinstance(keyed, list):
            yield from zip([key for key, _ in keyed], self.get_many([path for _, path in keyed]))
            return
        asked: deque[_K] = deque()

        def paths() -> Iterator[str]:
            for key, path in keyed:
                asked.append(key)
                yield path

        for got in self.get_many(paths()):
            yield asked.popleft(), got

    def get_parsed(self, path: str, parse: Callable[[bytes], _T]) -> _T | None:
        """The znode's value through *parse* (None if the znode is missing; a value
        that does not parse is a :class:`MetadataStoreError` naming the znode)."""
        try:
            data, _ = self.get(path)
        except NoNodeError:
            return None
        try:
            return parse(data)
        except CodecError as exc:
            raise MetadataStoreError(f"corrupt {path}: {exc}") from None

    def children(self, path: str) -> list[str]:
        children: list[str] = self.client.retry(self.client.get_children, path)
        return children

    def children_watched(self, path: str, watcher: Callable[[WatchedEvent], None]) -> list[str]:
        """*path*'s children, leaving a one-shot watch: kazoo calls *watcher* (on its callback
        thread) at their first change after this answer, at the znode's deletion, or with a
        ``path`` of None when the session's watches are lost.  ZooKeeper refuses a watch on a
        missing znode: NoNodeError, and nothing is watched."""
        children: list[str] = self.client.retry(self.client.get_children, path, watch=watcher)
        return children

    def settle(self) -> None:
        """Return once every watch event of a change ZooKeeper committed before this call has
        been handed to its watcher: a sync (the server this session talks to catches up with
        the leader, sending the events of what it applies first), then a mark behind them on
        kazoo's callback queue, waited for."""
        client = self.client
        client.retry(client.sync, self.root or "/")
        handed = threading.Event()
        client.handler.dispatch_callback(Callback("watch", handed.set, ()))
        if not handed.wait(self.session_timeout):
            raise ZKUnavailable(
                f"ZooKeeper at {self.hosts}: watch events not handed over in {self.session_timeout:g} s"
            )

    def children_or_empty(self, path: str) -> list[str]:
        try:
            return self.children(path)
        except NoNodeError:
            return []

    def create_if_missing(self, path: str, value: bytes = b"") -> bool:
        try:
            self.client.create(path, value)
            return True
        except NodeExistsError:
            return False

    def ensure_parents(self, path: str) -> None:
        parent = path.rsplit("/", 1)[0]
        if parent:
            self.client.ensure_path(parent)

    def delete_tree(self, path: str) -> int:
        """Delete *path* and everything below it, deepest first; how many znodes went.

        A level at a time: the children of a level's znodes are listed together (the
        walks' scanner, or kazoo's requests pipelined: :meth:`children_many`), then its
        znodes are deleted with up to :data:`_DELETE_WINDOW` deletes in flight, after
        everything below them.  Only the levels on the way down are held (one parent's
        children each: the hierarchical layout bounds them at 10,000), and of the lists a
        level's listing found, :data:`_KEEP_LISTED` names at the most (the others are
        listed again when their turn comes).  A znode gone meanwhile is fine (nothing
        there at all: 0); one that gained a child meanwhile is listed and deleted again,
        up to :data:`_DELETE_ROUNDS` times, then a :class:`MetadataStoreError`.  A
        ZooKeeper that goes away is a :class:`ZKUnavailable` saying how many were deleted:
        nothing above the znode that failed was deleted."""
        deleted = _Deleted()
        try:
            self._delete_level([path], deleted)
        except (*_CONNECTION_ERRORS, ZKUnavailable) as exc:
            why = exc if isinstance(exc, ZKUnavailable) else self.unavailable(exc)
            raise ZKUnavailable(
                f"{why}; deleting {path}: {deleted.count:,} znodes below it deleted, {path} and the rest still there"
            ) from None
        return deleted.count

    def _delete_level(self, paths: list[str], deleted: _Deleted) -> None:
        """Delete *paths* (one level: siblings, or the top alone) with all below them."""
        for _ in range(_DELETE_ROUNDS):
            inner: list[tuple[str, list[str] | None]] = []  # those with children, and the lists kept
            kept = 0
            for names, parent in zip(self.children_many(paths), paths):  # the listing's end first: the scanner let go
                if names:
                    keep = kept + len(names) <= _KEEP_LISTED
                    inner.append((parent, names if keep else None))
                    kept += len(names) if keep else 0
            for parent, names in inner:
                if names is None:
                    names = next(self.children_many([parent])) or []
                self._delete_level([_below(parent, name) for name in names], deleted)
            paths = self._delete_each(paths, deleted)
            if not paths:
                return
        raise MetadataStoreError(f"{paths[0]} keeps gaining children; could not delete it")

    def _delete_each(self, paths: list[str], deleted: _Deleted) -> list[str]:
        """Delete each of *paths* (pipelined); those that gained a child meanwhile."""
        again: list[str] = []
        for path, answer in self._pipelined(self.client.delete_async, paths, _DELETE_WINDOW):
            if isinstance(answer, NotEmptyError):
                again.append(path)
            elif not isinstance(answer, NoNodeError):
                deleted.count += 1
        return again

    def delete_quiet(self, path: str, version: int = -1) -> None:
        try:
            self.client.delete(path, version)
        except (NoNodeError, NotEmptyError, BadVersionError):
            pass

    def delete_own(self, path: str) -> bool:
        """Delete an ephemeral node only if this session created it (a lock that
        outlived our session may already be someone else's)."""
        try:
            _, stat = self.get(path)
        except NoNodeError:
            return False
        if stat.ephemeralOwner != self.session_id:
            return False
        try:
            self.client.delete(path, version=stat.version)
            return True
        except (NoNodeError, BadVersionError):
            return False

    # -- watches (kazoo's recipes: set again after every event and every new session) --
    def watch_children(
        self, path: str, listener: Callable[[list[str]], None], keep: Callable[[str], bool] = lambda name: True
    ) -> Callable[[], None]:
        """Call ``listener(sorted children that keep)`` now and whenever that list changed
        (from kazoo's thread) until the returned function is called.

        The watch outlives its znode.  Kazoo's ChildrenWatch ends, silently, where it finds
        its znode gone -- and a format or a nuke deletes ``cookies/`` and ``available/``
        with a watching auditor still running.  So a DataWatch on the znode itself stands
        above it: the znode gone, the listener is told the list emptied; the znode there
        again (a new one: its creation zxid differs), a ChildrenWatch is set on it, and any
        older one drops itself at its next call."""
        stopped = threading.Event()
        lock = threading.Lock()
        last: list[list[str]] = []
        watched: list[int | None] = [None]  # the creation zxid of the znode the live ChildrenWatch is on

        def tell(children: list[str]) -> None:
            with lock:
                if last and last[0] == children:
                    return
                last[:] = [children]
                _call_listener(listener, children)

        def children_of(czxid: int) -> Callable[[list[str]], bool | None]:
            def changed(children: list[str]) -> bool | None:
                if stopped.is_set() or watched[0] != czxid:
                    return False  # kazoo drops the watch
                tell(sorted(c for c in children if keep(c)))
                return None

            return changed

        def znode(_data: bytes | None, stat: ZnodeStat | None) -> bool | None:
            if stopped.is_set():
                return False
            if stat is None:
                watched[0] = None
                tell([])
            elif stat.czxid != watched[0]:
                watched[0] = stat.czxid
                self.client.ChildrenWatch(path, children_of(stat.czxid))
            return None

        self.client.DataWatch(path, znode)
        return stopped.set

    def watch_data(self, path: str, listener: Callable[[bytes | None, Any], None]) -> Callable[[], None]:
        """Call ``listener(value, stat)`` (None, None: no such znode) now and after every
        change of the znode (kazoo's DataWatch, from its thread) until the returned
        function is called."""
        stopped = threading.Event()

        def changed(data: bytes | None, stat: ZnodeStat | None) -> bool | None:
            if stopped.is_set():
                return False
            _call_listener(listener, data, stat)
            return None

        self.client.DataWatch(path, changed)
        return stopped.set


class _Deleted:
    """How many znodes one :meth:`ZKSession.delete_tree` deleted so far."""

    def __init__(self) -> None:
        self.count = 0


def _below(parent: str, name: str) -> str:
    return f"{parent.rstrip('/')}/{name}"


def _listen(listeners: list[Callable[[], None]], callback: Callable[[], None]) -> Callable[[], None]:
    """Add *callback* to *listeners*; the function that takes it out again."""
    listeners.append(callback)

    def stop() -> None:
        try:
            listeners.remove(callback)
        except ValueError:
            pass

    return stop


def _call_listener(listener: Callable[..., None], *args: object) -> None:
    """A watcher's failure is its own: logged, and the store's thread goes on."""
    try:
        listener(*args)
    except Exception:  # noqa: BLE001
        log.exception("metadata store listener %r failed", listener)


class Manager:
    """One job of the store over the shared session (see :mod:`bkctl.wire.metadata.zk`)."""

    def __init__(self, session: ZKSession):
        self._session = session

    @property
    def _zk(self) -> KazooClient:
        return self._session.client

    @property
    def _root(self) -> str:
        return self._session.root
