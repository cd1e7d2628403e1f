"""The BookKeeper client (Twisted): creating, opening, recovering, deleting ledgers.

    client = BookKeeperClient("zk+hierarchical://127.0.0.1:2181/ledgers")
    lh = yield client.create_ledger(3, 2, 2, password=b"pw")
    entry_id = yield lh.add_entry(b"hello")
    yield lh.close()
    rh = yield client.open_ledger(lh.ledger_id, recovery=True)
    entries = yield rh.read_entries(0, rh.last_add_confirmed)
    yield client.close()

The client owns a :class:`~bkctl.wire.client.pool.BookiePool` (one connection per
bookie) and a :class:`~bkctl.wire.metadata.zk.ZKMetadataStore` (or uses one it is
given).  The store is blocking, so every metadata call runs in the reactor's
thread pool.  Bookie ids are resolved through the BookieServiceInfo each
bookie publishes in its registration node, falling back to the id itself as
``host:port``.

Ledger handles and their semantics are in :mod:`bkctl.wire.client.read_handle`,
:mod:`~bkctl.wire.client.ledger_handle` and :mod:`~bkctl.wire.client.ledger_recovery`; the
blocking facade for scripts and the CLI is :mod:`bkctl.wire.client.blocking`.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from twisted.internet import defer, threads

from bkctl.wire import fastpath
from bkctl.wire.clock import Reactor, RunBlocking
from bkctl.wire.codecs.digest import DigestType
from bkctl.wire.codecs.protocol import DEFAULT_MAX_FRAME_SIZE
from bkctl.wire.errors import Conflict
from bkctl.wire.fastpath import Twins
from bkctl.wire.metadata.ledger import LedgerMetadata
from bkctl.wire.metadata.serviceinfo import BookieServiceInfo, parse_bookie_id_address
from bkctl.wire.metadata.store import MetadataStore

from .bookie_watcher import AvailableBookies, BookieWatcher
from .credentials import ledger_credentials
from .errors import (
    ClientClosed,
    LedgerClosedError,
    LedgerFencedError,
    LedgerLocked,
    LedgerMetadataConflict,
    LedgerRecoveryError,
    TLSRequired,
    Unauthorized,
)
from .ledger_handle import LedgerHandle
from .ledger_recovery import replicate_tail
from .placement import RandomPlacement
from .read_handle import ReadHandle

if TYPE_CHECKING:
    from .pool import BookiePool

T = TypeVar("T")

__all__ = ["AppendLock", "BookKeeperClient", "BookieAddresses"]

log = logging.getLogger(__name__)

#: Largest ensemble we bother validating with placeholder bookies before asking
#: the metadata store for real ones.
_MAX_ENSEMBLE = 1024


class AppendLock:
    """The exclusive right to append to a ledger: the store's append lock
    (:meth:`~bkctl.wire.metadata.store.LedgerManager.append_lock`) taken as this
    process, and a :class:`LedgerLocked` that names who holds it.

    Blocking; from Twisted code run it in a thread.
    """

    def __init__(self, store: MetadataStore, ledger_id: int):
        self.ledger_id = ledger_id
        self._lock = store.ledgers.append_lock(ledger_id, f"bkctl@{socket.gethostname()}:{os.getpid()}")
        self.path = self._lock.path

    def acquire(self, timeout: float) -> None:
        if self._lock.acquire(timeout):
            return
        try:
            holders = self._lock.holders()
        except Exception:  # noqa: BLE001 - only for the message
            holders = []
        who = f" by {', '.join(holders)}" if holders else ""
        raise LedgerLocked(f"ledger {self.ledger_id} is already open for append{who} (lock {self.path})")

    def release(self) -> None:
        self._lock.release()


class BookieAddresses(NamedTuple):
    """Bookies' addresses as their registrations give them (:meth:`BookKeeperClient.look_up`),
    for :meth:`BookKeeperClient.connect`."""

    addresses: dict[str, tuple[str, int]]


class BookKeeperClient:
    """Ledgers on a BookKeeper cluster, over Twisted.

    ``metadata`` is a metadata service URI (the client then owns a
    :class:`~bkctl.wire.metadata.zk.ZKMetadataStore`, connected on first use and closed
    by :meth:`close`) or a :class:`~bkctl.wire.metadata.store.MetadataStore` (used as is,
    never closed here).
    ``reactor`` defaults to the global reactor.  ``protocol``, ``add_timeout``
    and ``read_timeout`` (seconds) and any other keyword go to the
    :class:`~bkctl.wire.client.pool.BookiePool`.  ``max_inflight`` bounds the adds
    outstanding per ledger handle (``max_waiting`` how many more may wait),
    ``read_window`` the entries read at once by ``read_entries`` and
    ``read_range`` (across the batches it reads ahead; 256, as the export: more answers per chunk read from a
    bookie and per write, fewer system calls per entry; refilled half a
    window at a time),
    ``recovery_read_window`` the entries read ahead while looking for the
    tail of an open ledger, ``explicit_lac_interval`` (seconds, 0: off, as
    Java's ``explicitLacInterval``) how soon a writer sends a confirmed LAC
    that no add carried yet to its bookies (see
    :class:`~bkctl.wire.client.ledger_handle.LedgerHandle`).

    For tests: ``pool`` replaces the bookie pool, ``run_blocking(f, *args)``
    (returning a Deferred) replaces the thread pool for metadata calls, and
    ``placement`` the ensemble placement policy.
    """

    def __init__(
        self,
        metadata: str | MetadataStore,
        reactor: Reactor | None = None,
        *,
        protocol: str = "v3",
        add_timeout: float = 5.0,
        read_timeout: float = 5.0,
        max_inflight: int = 1000,
        max_waiting: int | None = None,
        read_window: int = 256,
        recovery_read_window: int = 16,
        explicit_lac_interval: float = 0.0,
        placement: RandomPlacement | None = None,
        zk_timeout: float = 10.0,
        pool: BookiePool | None = None,
        run_blocking: RunBlocking | None = None,
        twins: Twins | None = None,
        **pool_options: Any,
    ):
        if reactor is None:
            from twisted.internet import reactor as _reactor

            reactor = _reactor  # the global reactor: a module to the checker, a Reactor when it runs
        if max_inflight < 1:
            raise ValueError("max_inflight must be >= 1")
        self.reactor = reactor
        self.protocol = protocol
        #: the implementations in use (:mod:`bkctl.wire.fastpath`), handed to its connections and handles
        self.twins = fastpath.selected() if twins is None else twins
        self.add_timeout = add_timeout
        self.read_timeout = read_timeout
        self.max_inflight = int(max_inflight)
        self.max_waiting = max_waiting
        self.read_window = int(read_window)
        self.recovery_read_window = int(recovery_read_window)
        if explicit_lac_interval < 0:
            raise ValueError("explicit_lac_interval must be >= 0")
        self.explicit_lac_interval = float(explicit_lac_interval)
        self.max_frame_size = int(pool_options.get("max_frame_size", DEFAULT_MAX_FRAME_SIZE))
        self.placement = placement if placement is not None else RandomPlacement()
        self.store: MetadataStore
        if isinstance(metadata, str):
            from bkctl.wire.metadata.zk import ZKMetadataStore

            self.store = ZKMetadataStore(metadata, timeout=zk_timeout, twins=self.twins)
            self._owns_store = True
        else:
            self.store = metadata
            self._owns_store = False
        self._run_blocking = run_blocking
        self._start_lock = threading.Lock()
        self._store_started = False
        self._addresses: dict[str, tuple[str, int]] = {}
        #: addresses :meth:`connect` was given, each for its connection's next attempt only
        self._looked_up: dict[str, tuple[str, int]] = {}
        #: bookies whose registration says their bookie-rpc endpoint speaks TLS
        self._tls_bookies: set[str] = set()
        self._uses_tls = pool_options.get("tls") is not None
        #: the bookies to place on, kept by watches set at the first use (no I/O here)
        self._bookies = BookieWatcher(self.store, self.run_blocking)
        self.closed = False
        if pool is None:
            from .pool import BookiePool

            pool = BookiePool(
                reactor,
                self.resolve,
                protocol=protocol,
                add_timeout=add_timeout,
                read_timeout=read_timeout,
                twins=self.twins,
                **pool_options,
            )
        self.pool = pool

    def __repr__(self) -> str:
        return f"<BookKeeperClient {getattr(self.store, 'uri', self.store)!r}{' closed' if self.closed else ''}>"

    # -- plumbing ----------------------------------------------------------------

    def _ensure_store(self) -> None:
        if self._store_started:
            return
        with self._start_lock:
            if not self._store_started:
                start = getattr(self.store, "start", None)
                if start is not None:
                    start()
                self._store_started = True

    def run_blocking(self, fn: Callable[..., T], /, *args: object, **kwargs: object) -> defer.Deferred[T]:
        """Run a blocking (metadata store) call off the reactor thread; fires with its result."""

        def call() -> T:
            self._ensure_store()
            return fn(*args, **kwargs)

        if self._run_blocking is not None:
            return self._run_blocking(call)
        # zope's IReactorFromThreads, which the checker cannot match a Protocol to: Reactor has callFromThread
        return threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), call)  # type: ignore[arg-type]

    def _lookup_address(self, bookie_id: str) -> tuple[str, int]:
        try:
            info = self.store.registration.service_info(bookie_id)
        except Exception as exc:  # noqa: BLE001 - fall back to what we knew or the id itself
            log.info("cannot look up bookie %s in ZooKeeper (%s); using its id as address", bookie_id, exc)
            info = None
            cached = self._addresses.get(bookie_id)
            if cached is not None:
                return cached
        return self._address(bookie_id, info)

    def _address(self, bookie_id: str, info: BookieServiceInfo | None) -> tuple[str, int]:
        """The address ``info`` (the bookie's registration, None: none) gives, kept."""
        address = None
        if info is not None:
            endpoint = info.endpoint()
            if endpoint is not None and "tls" in endpoint.extensions:
                self._tls_bookies.add(bookie_id)
            try:
                address = info.rpc_address(bookie_id)
            except ValueError:
                address = None
        if address is None:
            address = parse_bookie_id_address(bookie_id)
        self._addresses[bookie_id] = address
        return address

    def connect_to(self, bookie_ids: Iterable[str]) -> defer.Deferred[None]:
        """Connect to those of ``bookie_ids`` not connected (nor connecting) yet: their addresses
        looked up in one go (:meth:`look_up`, off the reactor thread), then :meth:`connect`.
        Fires once the attempts are under way; a failure is left to the first request's."""
        wanted = [b for b in dict.fromkeys(bookie_ids) if not self.pool.get(b).connected]
        if self.closed or not wanted:
            return defer.succeed(None)
        return self.run_blocking(self.look_up, wanted).addCallback(self.connect)

    def look_up(self, bookie_ids: Iterable[str]) -> BookieAddresses:
        """The addresses of ``bookie_ids`` from their registrations, read in one go (blocking:
        not in the reactor thread) -- for :meth:`connect`; empty when the store does not
        answer (each connection then looks its bookie up as it would have)."""
        self._ensure_store()
        wanted = sorted(set(bookie_ids))
        try:
            infos = self.store.registration.service_infos(wanted)
        except Exception as exc:  # noqa: BLE001 - the connections look up on their own
            log.info("cannot look up bookies %s in ZooKeeper (%s)", ", ".join(wanted), exc)
            return BookieAddresses({})
        return BookieAddresses({b: self._address(b, infos.get(b)) for b in wanted})

    def connect(self, looked_up: BookieAddresses) -> None:
        """Connect to each bookie of ``looked_up`` now (in the reactor thread), its first
        attempt at the address given, not looked up again: the connections a command is about
        to use set up while it gets ready, not at its first request.  A later attempt (a
        reconnection) looks its bookie up afresh."""
        if self.closed:
            return
        self._looked_up.update(looked_up.addresses)
        for bookie_id in looked_up.addresses:
            self.pool.get(bookie_id).connect()

    def explain(self, exc: BaseException) -> BaseException:
        """``exc``, or the same refusal naming its cause: EUA from a bookie whose
        registration advertises TLS, to this plain-text client, is the missing
        TLS (a Java or bookied bookie requiring TLS answers every request so),
        not a wrong ledger password."""
        bookie = getattr(exc, "bookie", None)
        if isinstance(exc, Unauthorized) and not self._uses_tls and bookie in self._tls_bookies:
            return TLSRequired(f"bookie {bookie} requires TLS (use --tls-ca)", rc=exc.rc, bookie=bookie)
        return exc

    def resolve(self, bookie_id: str) -> defer.Deferred[tuple[str, int]]:
        """Fires with the (host, port) a connection to ``bookie_id`` dials next (the pool's
        resolver): the address :meth:`connect` was given for its first attempt, else the one
        its registration publishes (the id itself for a legacy or unregistered bookie; the
        last known one while the store does not answer)."""
        address = self._looked_up.pop(bookie_id, None)  # (:meth:`connect`'s: its first attempt's)
        if address is not None:
            return defer.succeed(address)
        return self.run_blocking(self._lookup_address, bookie_id)

    def bookie_lists(self) -> defer.Deferred[AvailableBookies]:
        """Fires with the writable and read-only bookie ids (:class:`AvailableBookies`):
        what every choice of bookies starts from.  Read and watched at the first call,
        then answered without a round trip until a notification changes them; the
        placement's rack source is refreshed with them (:mod:`.bookie_watcher`)."""
        return self._bookies.lists(self.placement)

    def _check_open(self) -> None:
        if self.closed:
            raise ClientClosed("the BookKeeper client is closed")

    # -- ledgers -------------------------------------------------------------------

    def create_ledger(
        self,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        digest_type: DigestType | str = DigestType.CRC32C,
        password: bytes | str = b"",
        custom_metadata: Mapping[str, bytes] | None = None,
        *,
        ledger_id: int | None = None,
        max_inflight: int | None = None,
    ) -> defer.Deferred[LedgerHandle]:
        """Fires with a writable :class:`LedgerHandle` of a new ledger.

        The metadata (OPEN, one ensemble of ``ensemble_size`` random writable
        bookies) is written first.  ``ledger_id`` picks the id (fails with
        ``LedgerExists`` if taken); by default one is generated.
        """
        return defer.ensureDeferred(
            self._create_ledger(
                ensemble_size, write_quorum, ack_quorum, digest_type, password, custom_metadata, ledger_id, max_inflight
            )
        )

    async def _create_ledger(
        self,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        digest_type: DigestType | str,
        password: bytes | str,
        custom_metadata: Mapping[str, bytes] | None,
        ledger_id: int | None,
        max_inflight: int | None,
    ) -> LedgerHandle:
        self._check_open()
        if isinstance(digest_type, str):
            digest_type = DigestType.parse(digest_type)
        digest_type = DigestType(digest_type)
        if isinstance(password, str):
            password = password.encode("utf-8")
        password = bytes(password)
        # The quorum rules (E >= Qw >= Qa >= 1) are LedgerMetadata's; check them
        # before asking ZooKeeper for bookies.
        if isinstance(ensemble_size, int) and 0 <= ensemble_size <= _MAX_ENSEMBLE:
            LedgerMetadata.new(
                [f"placeholder-{i}:1" for i in range(ensemble_size)],
                write_quorum,
                ack_quorum,
                digest_type=digest_type,
                password=password,
                custom_metadata=custom_metadata,
            )
        writable, readonly = await self.bookie_lists()
        ensemble = self.placement.new_ensemble(ensemble_size, writable, readonly, write_quorum=write_quorum)
        md = LedgerMetadata.new(
            ensemble,
            write_quorum,
            ack_quorum,
            digest_type=digest_type,
            password=password,
            custom_metadata=custom_metadata,
            ctoken=random.getrandbits(63),
        )
        created, version = await self.run_blocking(self.store.ledgers.create, md, ledger_id)
        log.info(
            "created ledger %d on %s (E=%d Qw=%d Qa=%d)", created, ensemble, ensemble_size, write_quorum, ack_quorum
        )
        return LedgerHandle(
            self,
            created,
            md,
            version,
            password,
            digest_type,
            max_inflight=max_inflight or self.max_inflight,
            max_waiting=self.max_waiting,
        )

    def read_metadata(self, ledger_id: int) -> defer.Deferred[tuple[LedgerMetadata, int]]:
        """Fires with ``(LedgerMetadata, version)``."""
        return self.run_blocking(self.store.ledgers.read, ledger_id)

    def open_ledger(
        self,
        ledger_id: int,
        recovery: bool = False,
        password: bytes | str | None = None,
        *,
        digest_type: DigestType | str | None = None,
        check_password: bool = True,
    ) -> defer.Deferred[ReadHandle]:
        """Fires with a :class:`ReadHandle`.

        Without ``recovery`` the LAC of an open ledger is read from its bookies
        and reads stop there.  With ``recovery`` an open ledger is recovered
        and closed first (metadata IN_RECOVERY, fencing, tail re-replicated,
        CLOSED at the last entry found); concurrent recoveries converge on the
        metadata the first of them wrote.  A closed ledger opens directly.

        ``password=None`` uses the password stored in the metadata; a given
        password (and ``digest_type``) must match it unless
        ``check_password=False`` (then a wrong one shows up as digest errors
        on reads and EUA on fencing).
        """
        return defer.ensureDeferred(self._open_ledger(ledger_id, recovery, password, digest_type, check_password))

    def read_lac_of(self, ledger_id: int, md: LedgerMetadata, version: int) -> defer.Deferred[int]:
        """Fires with the last add confirmed of a ledger whose metadata the caller has
        read already (a walk over many ledgers): what ``open_ledger`` would find, without
        reading the metadata again."""
        try:
            handle = self._stored_handle(ledger_id, md, version)
        except Exception:  # noqa: BLE001 - into the Deferred, as open_ledger's errors are
            return defer.fail()
        return handle.read_lac()

    def open_closed(self, ledger_id: int, md: LedgerMetadata, version: int) -> ReadHandle:
        """A :class:`ReadHandle` on a closed ledger whose metadata the caller has read
        already (a walk over many ledgers, a backup): what ``open_ledger`` gives it (its
        stored password and digest), without reading the metadata again -- one ZooKeeper
        round trip a ledger less.  ValueError for a ledger that is not closed (its LAC is
        the bookies' to say: ``open_ledger``)."""
        self._check_open()
        if not md.is_closed:
            raise ValueError(f"ledger {ledger_id} is not closed: open it with open_ledger")
        return self._stored_handle(ledger_id, md, version)

    def _stored_handle(self, ledger_id: int, md: LedgerMetadata, version: int) -> ReadHandle:
        password, digest_type = ledger_credentials(ledger_id, md, None, None, check=False)
        return ReadHandle(self, ledger_id, md, version, password, digest_type)

    async def _open_ledger(
        self,
        ledger_id: int,
        recovery: bool,
        password: bytes | str | None,
        digest_type: DigestType | str | None,
        check_password: bool,
    ) -> ReadHandle:
        self._check_open()
        md, version = await self.run_blocking(self.store.ledgers.read, ledger_id)
        password, digest_type = ledger_credentials(ledger_id, md, password, digest_type, check=check_password)
        if md.is_closed:
            return ReadHandle(self, ledger_id, md, version, password, digest_type)
        if not recovery:
            handle = ReadHandle(self, ledger_id, md, version, password, digest_type)
            await handle.read_lac()
            return handle
        for attempt in range(5):
            try:
                return await self._recover(ledger_id, md, version, password, digest_type)
            except (Conflict, LedgerRecoveryError) as exc:
                # Someone else may have finished the job (another recovery
                # closing the ledger): then their result is the result.
                md, version = await self.run_blocking(self.store.ledgers.read, ledger_id)
                if md.is_closed:
                    log.info("ledger %d: closed by another client during recovery (%s)", ledger_id, exc)
                    return ReadHandle(self, ledger_id, md, version, password, digest_type)
                if attempt == 4 or not isinstance(exc, Conflict):
                    raise
        raise AssertionError("unreachable")

    async def _recover(
        self, ledger_id: int, md: LedgerMetadata, version: int, password: bytes, digest_type: DigestType
    ) -> ReadHandle:
        from bkctl.wire.metadata.errors import MetadataVersionConflict

        while md.is_open:
            marked = md.in_recovery()
            try:
                version = await self.run_blocking(self.store.ledgers.update, ledger_id, marked, version)
                md = marked
            except MetadataVersionConflict as conflict:
                md, version = conflict.metadata, conflict.current_version
        if md.is_closed:
            return ReadHandle(self, ledger_id, md, version, password, digest_type)
        handle = LedgerHandle(
            self, ledger_id, md, version, password, digest_type, recovery=True, max_inflight=self.max_inflight
        )
        await replicate_tail(handle, fence=True)
        await handle.close()
        if not handle.metadata.is_closed:
            raise handle.error or LedgerMetadataConflict(f"ledger {ledger_id}: recovery did not close it")
        log.info(
            "recovered ledger %d: last entry %d, length %d",
            ledger_id,
            handle.metadata.last_entry_id,
            handle.metadata.length,
        )
        return ReadHandle(self, ledger_id, handle.metadata, handle.metadata_version, password, digest_type)

    def open_for_append(
        self,
        ledger_id: int,
        password: bytes | str | None = None,
        *,
        digest_type: DigestType | str | None = None,
        check_password: bool = True,
        lock_timeout: float = 0.0,
        max_inflight: int | None = None,
    ) -> defer.Deferred[LedgerHandle]:
        """Fires with a writable :class:`LedgerHandle` continuing an OPEN ledger
        (one left open by a writer that went away).

        Takes the ledger's append lock (:class:`AppendLock`; ``lock_timeout``
        seconds to wait for it, 0 = fail at once with :class:`LedgerLocked`),
        finds the tail like recovery does but without fencing, writes the
        entries past the LAC back to full write quorums, and continues at the
        entry after the last one found.  The lock is released by the handle's
        ``close()``.  A closed ledger gives :class:`LedgerClosedError`, one in
        recovery :class:`~bkctl.wire.client.errors.LedgerFencedError`; if the ledger
        gets fenced later, adds fail with LedgerFencedError.
        """
        return defer.ensureDeferred(
            self._open_for_append(ledger_id, password, digest_type, check_password, lock_timeout, max_inflight)
        )

    async def _open_for_append(
        self,
        ledger_id: int,
        password: bytes | str | None,
        digest_type: DigestType | str | None,
        check_password: bool,
        lock_timeout: float,
        max_inflight: int | None,
    ) -> LedgerHandle:
        self._check_open()
        lock = AppendLock(self.store, ledger_id)
        await self.run_blocking(lock.acquire, lock_timeout)
        handle = None
        try:
            md, version = await self.run_blocking(self.store.ledgers.read, ledger_id)
            password, digest_type = ledger_credentials(ledger_id, md, password, digest_type, check=check_password)
            if md.is_closed:
                raise LedgerClosedError(
                    f"ledger {ledger_id} is closed (last entry {md.last_entry_id}); it cannot be appended to"
                )
            if md.is_in_recovery:
                raise LedgerFencedError(
                    f"ledger {ledger_id} is being recovered (metadata IN_RECOVERY); it cannot be appended to"
                )
            handle = LedgerHandle(
                self,
                ledger_id,
                md,
                version,
                password,
                digest_type,
                max_inflight=max_inflight or self.max_inflight,
                max_waiting=self.max_waiting,
                on_close=lambda: self.run_blocking(lock.release),
            )
            await replicate_tail(handle, fence=False)
            if handle.state != "open":
                raise handle.error or LedgerClosedError(f"ledger {ledger_id} is closed")
            return handle
        except BaseException:
            if handle is not None:
                handle.drop_on_close()
            try:
                await self.run_blocking(lock.release)
            except Exception:  # noqa: BLE001
                log.warning("ledger %d: releasing the append lock failed", ledger_id, exc_info=True)
            raise

    def delete_ledger(self, ledger_id: int) -> defer.Deferred[None]:
        """Delete the ledger's metadata (bookies drop the data at their next GC).
        Fails with ``NoSuchLedger`` if there is no such ledger."""
        return self.run_blocking(self._delete_ledger, ledger_id)

    def _delete_ledger(self, ledger_id: int) -> None:
        from bkctl.wire.metadata.errors import NoSuchLedger

        if not self.store.ledgers.exists(ledger_id):
            raise NoSuchLedger(ledger_id)
        self.store.ledgers.delete(ledger_id)

    # -- life ------------------------------------------------------------------------

    def close(self) -> defer.Deferred[None]:
        """Close every bookie connection (outstanding requests fail) and, if the
        client made it, the metadata store.  Open ledgers are not closed: that
        is what a writer that goes away looks like."""
        if self.closed:
            return defer.succeed(None)
        self.closed = True
        self._bookies.close()
        d = self.pool.close()
        if self._owns_store:

            def close_store(_: object) -> defer.Deferred[None]:
                if self._run_blocking is not None:
                    return self._run_blocking(self.store.close)
                # (zope's IReactorFromThreads: see run_blocking)
                return threads.deferToThreadPool(
                    self.reactor,  # type: ignore[arg-type]
                    self.reactor.getThreadPool(),
                    self.store.close,
                )

            d.addCallback(close_store)
        d.addCallback(lambda _: None)
        return d
