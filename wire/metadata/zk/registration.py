"""Bookie registration, as Java's ZKRegistrationManager (a bookie's own ephemeral
node) and ZKRegistrationClient (the lists everyone reads) do it."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kazoo.exceptions import NodeExistsError, NoNodeError

from bkctl.wire.errors import CodecError
from bkctl.wire.metadata import paths as P
from bkctl.wire.metadata.bookieid import check_bookie_id
from bkctl.wire.metadata.errors import BookieRegistrationError, ClusterNotFound, MetadataStoreError
from bkctl.wire.metadata.serviceinfo import BookieServiceInfo
from bkctl.wire.metadata.store import Unwatch
from bkctl.wire.metadata.zk.session import Manager, ZKSession, zk_call

log = logging.getLogger(__name__)

__all__ = ["ZKRegistrationManager"]


def _parsed_registration(bookie_id: str, data: bytes) -> BookieServiceInfo:
    """A registration node's value, the one way :meth:`ZKRegistrationManager.service_info` and
    :meth:`~ZKRegistrationManager.service_infos` read it; a value that does not parse names the bookie."""
    try:
        return BookieServiceInfo.parse(data)
    except CodecError as exc:
        raise MetadataStoreError(f"corrupt registration of bookie {bookie_id}: {exc}") from None


class ZKRegistrationManager(Manager):
    """``available/<id>`` and ``available/readonly/<id>``: registering this process's
    bookies (restored after a session expiry) and listing everyone's."""

    def __init__(self, session: ZKSession):
        super().__init__(session)
        self._lock = threading.RLock()
        # bookie id -> (readonly, data) of what this store registered
        self._registrations: dict[str, tuple[bool, bytes]] = {}
        session.on_session_restored(self._restore)

    def _path(self, bookie_id: str, readonly: bool) -> str:
        return P.readonly_path(bookie_id, self._root) if readonly else P.available_path(bookie_id, self._root)

    @zk_call
    def register(self, bookie_id: str, service_info: bytes | BookieServiceInfo = b"", readonly: bool = False) -> None:
        """Create the bookie's EPHEMERAL registration node.

        Read-only registration creates ``available/readonly/<id>`` (and
        ``readonly/`` itself if missing) before deleting the writable node.
        A node held by another session is waited for up to twice the session
        timeout.  The registration is restored automatically after a
        session expiry, until :meth:`unregister` or the store is closed.
        """
        check_bookie_id(bookie_id)
        data = service_info if isinstance(service_info, bytes) else service_info.serialize()
        with self._lock:
            self._register(bookie_id, data, readonly)
            self._registrations[bookie_id] = (readonly, data)

    def _register(self, bookie_id: str, data: bytes, readonly: bool) -> None:
        s = self._session
        if readonly:
            readonly_dir = s.path(P.AVAILABLE, P.READONLY)
            if s.exists(readonly_dir) is None:
                s.create_if_missing(readonly_dir, data)
        self._create_ephemeral(self._path(bookie_id, readonly), data)
        s.delete_quiet(self._path(bookie_id, not readonly))

    def _create_ephemeral(self, path: str, data: bytes) -> None:
        # A killed predecessor's node goes when ZooKeeper expires its session: up to
        # a tick after its timeout, counted on the server's clock.  Waiting only one
        # session timeout made a quick restart after kill -9 fail at random.
        wait = 2 * self._session.session_timeout
        deadline = time.monotonic() + wait
        while True:
            gone = threading.Event()

            def watch(event: object, gone: threading.Event = gone) -> None:
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
            if stat.ephemeralOwner == self._session.session_id:
                if self._session.get(path)[0] != data:
                    self._zk.set(path, data)
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not gone.wait(remaining):
                raise BookieRegistrationError(
                    f"{path} is held by another ZooKeeper session (0x{stat.ephemeralOwner:x}) "
                    f"and did not go away within {wait:g}s"
                )

    @zk_call
    def unregister(self, bookie_id: str, readonly: bool | None = None) -> None:
        """Delete the registration node(s) and stop restoring them."""
        check_bookie_id(bookie_id)
        with self._lock:
            self._registrations.pop(bookie_id, None)
            kinds = (False, True) if readonly is None else (readonly,)
            for kind in kinds:
                self._session.delete_quiet(self._path(bookie_id, kind))

    def forget_registrations(self) -> None:
        """The session is closed: its ephemeral nodes are gone and nothing is restored."""
        with self._lock:
            self._registrations.clear()

    def _restore(self) -> bool:
        """Put back every registration a lost session took with it; False if one failed."""
        with self._lock:
            items = list(self._registrations.items())
        restored = True
        for bookie_id, (readonly, data) in items:
            try:
                with self._lock:
                    if self._registrations.get(bookie_id) != (readonly, data):
                        continue
                    self._register(bookie_id, data, readonly)
                log.info("re-registered bookie %s after ZooKeeper session expiry", bookie_id)
            except Exception as exc:  # keep trying on the next round
                if self._session.closing:
                    return True
                log.warning("could not re-register bookie %s: %s", bookie_id, exc)
                restored = False
        return restored

    @zk_call
    def writable_bookies(self) -> list[str]:
        return sorted(c for c in self._session.children_or_empty(self._session.path(P.AVAILABLE)) if c != P.READONLY)

    @zk_call
    def readonly_bookies(self) -> list[str]:
        return sorted(self._session.children_or_empty(self._session.path(P.AVAILABLE, P.READONLY)))

    @zk_call
    def watch_writable_bookies(self, listener: Callable[[list[str]], None]) -> Unwatch:
        """A children watch on ``available/`` (its ``readonly`` child left out)."""
        return self._session.watch_children(
            self._session.path(P.AVAILABLE), listener, keep=lambda name: name != P.READONLY
        )

    @zk_call
    def watch_readonly_bookies(self, listener: Callable[[list[str]], None]) -> Unwatch:
        """A children watch on ``available/readonly/`` (created if missing, as a bookie
        going read-only would)."""
        path = self._session.path(P.AVAILABLE, P.READONLY)
        self._zk.ensure_path(path)
        return self._session.watch_children(path, listener)

    @zk_call
    def watch_all_bookies(self, listener: Callable[[list[str]], None]) -> Unwatch:
        """A children watch on ``cookies/`` (created if missing, as a bookie's first
        cookie would)."""
        path = self._session.path(P.COOKIES)
        self._zk.ensure_path(path)
        return self._session.watch_children(path, listener)

    @zk_call
    def all_bookies(self) -> list[str]:
        """Every bookie that has a cookie (``listbookies -a``; Java's getAllBookies)."""
        return sorted(self._session.children_or_empty(self._session.path(P.COOKIES)))

    @zk_call
    def is_registered(self, bookie_id: str) -> bool:
        check_bookie_id(bookie_id)
        return any(self._session.exists(self._path(bookie_id, ro)) is not None for ro in (False, True))

    @zk_call
    def service_info(self, bookie_id: str) -> BookieServiceInfo | None:
        """The published service info (writable node first); None if not registered.

        Legacy registrations (empty data) give an info without endpoints; use
        ``info.rpc_address(bookie_id)`` to resolve either kind.
        """
        check_bookie_id(bookie_id)
        for readonly in (False, True):
            try:
                data, _ = self._session.get(self._path(bookie_id, readonly))
            except NoNodeError:
                continue
            return _parsed_registration(bookie_id, data)
        return None

    @zk_call
    def service_infos(self, bookie_ids: list[str]) -> dict[str, BookieServiceInfo | None]:
        """:meth:`service_info` of each, the writable nodes in one pipelined read, then the
        read-only nodes of those without one in another."""
        for bookie_id in bookie_ids:
            check_bookie_id(bookie_id)
        out: dict[str, BookieServiceInfo | None] = dict.fromkeys(bookie_ids)
        left = list(out)
        for readonly in (False, True):
            unread: list[str] = []
            for bookie_id, got in zip(left, self._session.get_many([self._path(b, readonly) for b in left])):
                if got is None:
                    unread.append(bookie_id)
                else:
                    out[bookie_id] = _parsed_registration(bookie_id, got[0])
            left = unread
        return out

    @zk_call
    def session_of(self, bookie_id: str) -> int | None:
        """The ZooKeeper session owning the bookie's ephemeral registration node."""
        check_bookie_id(bookie_id)
        for readonly in (False, True):
            stat = self._session.exists(self._path(bookie_id, readonly))
            if stat is not None:
                return int(stat.ephemeralOwner)
        return None
