"""The one in-memory metadata store of the tests: a
:class:`~bkctl.wire.metadata.store.MetadataStore` that keeps ZooKeeper's rules --
versions that move on every write and compare-and-set on them, ephemeral nodes
(registrations, auditor votes, replication locks) that end with the session,
values stored as the same bytes the real store writes -- without a ZooKeeper.

``tests/unit/test_metadata_store_protocol.py`` checks its signatures against the
protocol and ``tests/integration/test_metadata_store_conformance.py`` runs the
same behavioural checks on it and on :class:`~bkctl.wire.metadata.zk.ZKMetadataStore`
over a real ZooKeeper, so it cannot drift from the real thing.

What the tests add on top, none of which the code under test can see:

* ``store.calls``: every call, ``("ledgers.update", args)``, in order;
* ``store.before("ledgers.update", hook)``: run ``hook(*args)`` once, just before
  the next such call (another writer racing us; raise from it to fail that call);
* ``store.fail_with(exc)``: every call raises ``exc`` until ``fail_with(None)``;
* ``store.lose_connection()`` / ``store.reconnect()``: not connected, and every
  call fails with :class:`~bkctl.wire.metadata.errors.ZKUnavailable`, as the real
  store between a connection loss and its reconnection (the vote watches fire, as
  kazoo fires every watch when the connection drops);
* ``store.expire_session()``: ZooKeeper expired the session: its ephemeral nodes go
  (watchers told), the session-lost listeners are called, and a new session puts
  the registrations back, as the real store does.

Watches call their listeners synchronously, from the call that changed what they
watch (on ZooKeeper: from kazoo's thread, soon after).
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from bkctl.wire.errors import CodecError
from bkctl.wire.metadata import paths as P
from bkctl.wire.metadata import underreplication as UR
from bkctl.wire.metadata.bookieid import check_bookie_id
from bkctl.wire.metadata.cookie import Cookie, parse_cookie
from bkctl.wire.metadata.errors import (
    ClusterExists,
    ClusterNotFound,
    CookieExists,
    CookieVersionConflict,
    LedgerExists,
    MetadataStoreError,
    MetadataVersionConflict,
    NoSuchCookie,
    NoSuchLedger,
    NukeRefused,
    VersionConflict,
    ZKUnavailable,
)
from bkctl.wire.metadata.layout import LedgerLayout
from bkctl.wire.metadata.ledger import LedgerMetadata, parse_ledger_metadata, serialize_ledger_metadata
from bkctl.wire.metadata.racks import RACK_MAP_PATH, RackMapError, parse_rack_map, serialize_rack_map
from bkctl.wire.metadata.serviceinfo import BookieServiceInfo
from bkctl.wire.metadata.store import (
    RESTORE_CHUNK_BYTES,
    LedgerRange,
    LedgerRead,
    RackMapDoc,
    RestoreJournalChunks,
    StoredLedgerRead,
    StoredManagedLedger,
    StoredValue,
    UnderreplicatedMark,
    WalkProgress,
    stored_ctime,
    with_znode_ctime,
)

__all__ = ["FakeMetadataStore"]

log = logging.getLogger(__name__)

#: what the fake's "znodes" say their ctime is, when a test does not set a clock (ms)
DEFAULT_NOW_MS = 1_795_219_200_000

#: session ids, as ZooKeeper's: a new one at every start, never reused
_SESSION_IDS = itertools.count(0x1000)


def _call(method):
    """Route a manager's public method through the store's checks and call log."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        self._store.admit(f"{self._name}.{method.__name__}", args, kwargs)
        return method(self, *args, **kwargs)

    return wrapper


def _tell(listener: Callable, *args) -> None:
    """As the real store: a listener's failure is logged, the writer goes on."""
    try:
        listener(*args)
    except Exception:  # noqa: BLE001
        log.exception("metadata store listener %r failed", listener)


class _Listeners:
    """Persistent watchers of one thing, told only when what they see changed."""

    def __init__(self, look: Callable[[], Any]):
        self._look = look
        self._watchers: list[list] = []  # [listener, last value seen]

    def __len__(self) -> int:
        return len(self._watchers)

    def add(self, listener: Callable[[Any], None], *, tell: bool = True) -> Callable[[], None]:
        """Watch; ``tell``: the listener is told the value now (else at its first change)."""
        entry = [listener, self._look()]
        self._watchers.append(entry)
        if tell:
            _tell(listener, entry[1])

        def stop() -> None:
            if entry in self._watchers:
                self._watchers.remove(entry)

        return stop

    def changed(self) -> None:
        now = self._look()
        for entry in list(self._watchers):
            if entry[1] != now:
                entry[1] = now
                _tell(entry[0], now)


@dataclass(frozen=True)
class FakeRegistrations:
    """The registrations a session had: bookie id -> (read-only, service info bytes)."""

    nodes: dict[str, tuple[bool, bytes]]


class _Manager:
    _name = ""

    def __init__(self, store: FakeMetadataStore):
        self._store = store


class FakeAppendLocks:
    """The ledgers' append locks of the store's session: each lock path's contenders, the holder
    first, as kazoo's recipe queues them; they go with the session (:meth:`clear`)."""

    def __init__(self) -> None:
        self._queues: dict[str, list[FakeLedgerLock]] = {}  # lock path -> contenders, holder first
        self._changed = threading.Condition()

    def acquire(self, lock: FakeLedgerLock, timeout: float) -> bool:
        """Queue ``lock`` and wait up to ``timeout`` seconds for its turn: whether it holds the
        lock now (if not, it left the queue again)."""
        with self._changed:
            queue = self._queues.setdefault(lock.path, [])
            queue.append(lock)
            deadline = time.monotonic() + (timeout if timeout and timeout > 0 else 0)
            while queue and queue[0] is not lock and time.monotonic() < deadline:
                self._changed.wait(deadline - time.monotonic())
            if queue and queue[0] is lock:
                return True
            if lock in queue:
                queue.remove(lock)
            return False

    def holders(self, path: str) -> list[str]:
        with self._changed:
            return [lock.holder for lock in self._queues.get(path, []) if lock.holder]

    def release(self, lock: FakeLedgerLock) -> None:
        """``lock`` leaves its queue; the next contender's turn."""
        with self._changed:
            queue = self._queues.get(lock.path, [])
            if lock in queue:
                queue.remove(lock)
            if not queue:
                self._queues.pop(lock.path, None)
            self._changed.notify_all()

    def clear(self) -> None:
        """The session ended: no lock is held, nobody waits."""
        with self._changed:
            self._queues.clear()
            self._changed.notify_all()

    def paths(self) -> list[str]:
        """(Tests.)  The lock paths held or waited for."""
        with self._changed:
            return sorted(self._queues)


class FakeLedgerLock:
    """A ledger's append lock as kazoo's recipe behaves: the first contender holds it,
    others may wait (in turn) for it; it goes with the store's session."""

    def __init__(self, store: FakeMetadataStore, path: str, holder: str):
        self._store = store
        self.path = path
        self.holder = holder
        self._held = False

    def _enter(self, name: str, *args) -> None:
        self._store.admit(f"ledgers.append_lock.{name}", (self.path,) + args, {})

    def acquire(self, timeout: float = 0.0) -> bool:
        self._enter("acquire", timeout)
        self._held = self._store.append_locks.acquire(self, timeout)
        return self._held

    def holders(self) -> list[str]:
        self._enter("holders")
        return self._store.append_locks.holders(self.path)

    def release(self) -> None:
        self._enter("release")
        if not self._held:
            return
        self._held = False
        self._store.append_locks.release(self)


class FakeLedgerManager(_Manager):
    _name = "ledgers"

    def __init__(self, store):
        super().__init__(store)
        self._znodes: dict[int, tuple[bytes, int, int]] = {}  # id -> (value, version, ctime ms)
        self.ranges_listed = 0

    def _read(self, ledger_id: int) -> tuple[LedgerMetadata, int]:
        try:
            data, version, ctime = self._znodes[ledger_id]
        except KeyError:
            raise NoSuchLedger(ledger_id) from None
        return with_znode_ctime(parse_ledger_metadata(data), ctime), version

    @_call
    def create(self, md: LedgerMetadata, ledger_id: int | None = None) -> tuple[int, int]:
        if ledger_id is None:
            ledger_id = self._store.ledger_ids.next_id()
        P.ledger_path(ledger_id)  # the real store's check of the id
        if ledger_id in self._znodes:
            raise LedgerExists(ledger_id)
        self._znodes[ledger_id] = (serialize_ledger_metadata(md), 0, self._store.now_ms())
        return ledger_id, 0

    @_call
    def read(self, ledger_id: int) -> tuple[LedgerMetadata, int]:
        return self._read(ledger_id)

    @_call
    def update(self, ledger_id: int, md: LedgerMetadata, expected_version: int, *, unlock: bool = False) -> int:
        current, version = self._read(ledger_id)
        if expected_version not in (-1, version):
            raise MetadataVersionConflict(ledger_id, expected_version, current, version)
        if unlock:
            if self._store.underreplication.lock_holder(ledger_id) is None:
                raise MetadataStoreError(
                    f"ledger {ledger_id}: its replication lock is gone; its metadata was not written"
                )
            self._store.underreplication.release(ledger_id)
        data, _, ctime = self._znodes[ledger_id]
        stored = parse_ledger_metadata(data)
        self._znodes[ledger_id] = (serialize_ledger_metadata(stored_ctime(md, ctime, stored)), version + 1, ctime)
        return version + 1

    @_call
    def delete(self, ledger_id: int, version: int = -1) -> None:
        if ledger_id not in self._znodes:
            return
        current, current_version = self._read(ledger_id)
        if version not in (-1, current_version):
            raise MetadataVersionConflict(ledger_id, version, current, current_version)
        del self._znodes[ledger_id]

    @_call
    def exists(self, ledger_id: int) -> bool:
        return ledger_id in self._znodes

    @_call
    def read_bytes(self, ledger_id: int) -> tuple[bytes, int]:
        try:
            data, version, _ctime = self._znodes[ledger_id]
        except KeyError:
            raise NoSuchLedger(ledger_id) from None
        return data, version

    @_call
    def restore_bytes(self, ledger_id: int, data: bytes, overwrite: bool = False) -> int:
        try:
            parse_ledger_metadata(data)
        except CodecError as exc:
            raise MetadataStoreError(f"not ledger metadata: {exc}") from None
        P.ledger_path(ledger_id)  # the real store's check of the id
        stored = self._znodes.get(ledger_id)
        if stored is not None and not overwrite:
            raise LedgerExists(ledger_id)
        version = 0 if stored is None else stored[1] + 1
        self._znodes[ledger_id] = (data, version, self._store.now_ms() if stored is None else stored[2])
        return version

    @_call
    def ids(self) -> Iterator[int]:
        return iter(sorted(self._znodes))

    def append_lock(self, ledger_id: int, holder: str) -> FakeLedgerLock:
        return FakeLedgerLock(self._store, P.append_lock_path(ledger_id, self._store.root), holder)

    @_call
    def ranges(self, *, watched: bool = False) -> Iterator[LedgerRange]:
        """As the hierarchical layout lists them: one range per 10,000 ids that hold a ledger
        (one leaf znode each); ``ranges_listed`` counts the leaves listed, as ZooKeeper's
        getChildren calls would.  ``watched`` changes nothing: nothing is kept, every walk
        lists afresh (what a watched walk answers too)."""
        leaves: dict[int, set[int]] = {}
        for ledger_id in self._znodes:
            leaves.setdefault(ledger_id // 10000, set()).add(ledger_id)
        for leaf in sorted(leaves):
            self.ranges_listed += 1
            yield LedgerRange(leaf * 10000 + 9999, frozenset(leaves[leaf]))

    @_call
    def read_many(self, ledger_ids: Iterable[int], *, naming: Collection[str] | None = None) -> Iterator[LedgerRead]:
        out = []
        marks = tuple(b.encode() for b in naming) if naming is not None else None
        for ledger_id in ledger_ids:
            stored = self._znodes.get(ledger_id)
            if stored is None:
                out.append(LedgerRead(ledger_id, None, -1))
                continue
            if marks is not None and not any(m in stored[0] for m in marks):
                continue
            md, version = self._read(ledger_id)
            out.append(LedgerRead(ledger_id, md, version))
        return iter(out)

    @_call
    def read_many_stored(self, ledger_ids: Iterable[int]) -> Iterator[StoredLedgerRead]:
        out = []
        for ledger_id in ledger_ids:
            stored = self._znodes.get(ledger_id)
            if stored is None:
                out.append(StoredLedgerRead(ledger_id, None, -1, None))
                continue
            md, version = self._read(ledger_id)
            out.append(StoredLedgerRead(ledger_id, md, version, stored[0]))
        return iter(out)

    def walk(
        self, *, naming: Collection[str] | None = None, progress: WalkProgress | None = None
    ) -> Iterator[LedgerRead]:
        if progress is not None:
            progress.update(total=self.count())
        for read in self.read_many(self.ids(), naming=naming):
            if progress is not None:
                progress.advance(1)
            yield read

    @_call
    def count(self) -> int:
        return len(self._znodes)

    def wipe(self) -> None:
        """(Format, nuke.)  Every ledger goes."""
        self._znodes.clear()


class FakeLedgerIdGenerator(_Manager):
    _name = "ledger_ids"

    def __init__(self, store):
        super().__init__(store)
        self._sequence = 0  # ZooKeeper's first sequential node is 0000000000

    def next_id(self) -> int:
        """The next id, not logged as a call (the ledgers' create without an id takes it so)."""
        seq, self._sequence = self._sequence, self._sequence + 1
        return seq

    def reset(self) -> None:
        """(Format, nuke.)  The sequence starts again at 0."""
        self._sequence = 0

    @_call
    def generate(self) -> int:
        return self.next_id()

    @_call
    def generate_many(self, count: int) -> list[int]:
        return [self.next_id() for _ in range(count)]


class FakeRegistrationManager(_Manager):
    _name = "registration"

    def __init__(self, store):
        super().__init__(store)
        self._nodes: dict[str, tuple[bool, bytes]] = {}  # bookie id -> (readonly, service info)
        self._writable_watch = store.listeners(self.writable)
        self._readonly_watch = store.listeners(self.readonly)
        self._cookie_watch = store.listeners(lambda: self._store.cookies.bookie_ids())

    def writable(self) -> list[str]:
        """The writable bookies, not logged as a call (:meth:`writable_bookies` is)."""
        return sorted(b for b, (ro, _) in self._nodes.items() if not ro)

    def readonly(self) -> list[str]:
        """The read-only bookies, not logged as a call (:meth:`readonly_bookies` is)."""
        return sorted(b for b, (ro, _) in self._nodes.items() if ro)

    def _changed(self) -> None:
        self._writable_watch.changed()
        self._readonly_watch.changed()

    def cookies_changed(self) -> None:
        """(From the cookies.)  A cookie was written or deleted: the watchers of all bookies
        are told when the list changed."""
        self._cookie_watch.changed()

    def end_session(self) -> FakeRegistrations:
        """The session ended: the registrations go (watchers told); what they were, for a
        new session to :meth:`restore`."""
        gone = FakeRegistrations(dict(self._nodes))
        self._nodes.clear()
        self._changed()
        return gone

    def restore(self, registrations: FakeRegistrations) -> None:
        """A new session registers again what the last one had (as ZKRegistrationManager)."""
        self._nodes.update(registrations.nodes)
        self._changed()

    @_call
    def register(self, bookie_id: str, service_info: bytes | BookieServiceInfo = b"", readonly: bool = False) -> None:
        check_bookie_id(bookie_id)
        data = service_info if isinstance(service_info, bytes) else service_info.serialize()
        self._nodes[bookie_id] = (readonly, data)
        self._changed()

    @_call
    def session_of(self, bookie_id: str) -> int | None:
        check_bookie_id(bookie_id)
        return self._store.session_id if bookie_id in self._nodes else None

    @_call
    def unregister(self, bookie_id: str, readonly: bool | None = None) -> None:
        check_bookie_id(bookie_id)
        node = self._nodes.get(bookie_id)
        if node is not None and readonly in (None, node[0]):
            del self._nodes[bookie_id]
            self._changed()

    @_call
    def writable_bookies(self) -> list[str]:
        return self.writable()

    @_call
    def readonly_bookies(self) -> list[str]:
        return self.readonly()

    @_call
    def watch_writable_bookies(self, listener: Callable[[list[str]], None]) -> Callable[[], None]:
        return self._writable_watch.add(listener)

    @_call
    def watch_readonly_bookies(self, listener: Callable[[list[str]], None]) -> Callable[[], None]:
        return self._readonly_watch.add(listener)

    @_call
    def watch_all_bookies(self, listener: Callable[[list[str]], None]) -> Callable[[], None]:
        return self._cookie_watch.add(listener)

    @_call
    def all_bookies(self) -> list[str]:
        return self._store.cookies.bookie_ids()

    @_call
    def is_registered(self, bookie_id: str) -> bool:
        check_bookie_id(bookie_id)
        return bookie_id in self._nodes

    @_call
    def service_info(self, bookie_id: str) -> BookieServiceInfo | None:
        check_bookie_id(bookie_id)
        node = self._nodes.get(bookie_id)
        if node is None:
            return None
        try:
            return BookieServiceInfo.parse(node[1])
        except CodecError as exc:
            raise MetadataStoreError(f"corrupt registration of bookie {bookie_id}: {exc}") from None

    @_call
    def service_infos(self, bookie_ids: list[str]) -> dict[str, BookieServiceInfo | None]:
        return {bookie_id: self.service_info(bookie_id) for bookie_id in bookie_ids}


class FakeCookieManager(_Manager):
    _name = "cookies"

    def __init__(self, store):
        super().__init__(store)
        self._nodes: dict[str, tuple[bytes, int]] = {}

    def bookie_ids(self) -> list[str]:
        """The bookies with a cookie, not logged as a call (every bookie known to the cluster)."""
        return sorted(self._nodes)

    def wipe(self) -> None:
        """(Format, nuke.)  Every cookie goes: the watchers of all bookies are told the list
        emptied, and go on watching (as the ZooKeeper store's watch outlives ``cookies/``)."""
        self._nodes.clear()
        self._store.registration.cookies_changed()

    def _get(self, bookie_id: str) -> tuple[Cookie, int] | None:
        node = self._nodes.get(bookie_id)
        if node is None:
            return None
        try:
            return parse_cookie(node[0]), node[1]
        except CodecError as exc:
            raise MetadataStoreError(f"corrupt cookie of bookie {bookie_id}: {exc}") from None

    def _conflict(self, bookie_id: str, version: int) -> Exception:
        cookie, current = self._get(bookie_id)  # type: ignore[misc]
        return CookieVersionConflict(bookie_id, version, cookie, current)

    @_call
    def get(self, bookie_id: str) -> tuple[Cookie, int] | None:
        check_bookie_id(bookie_id)
        return self._get(bookie_id)

    @_call
    def put(self, bookie_id: str, cookie: Cookie | bytes, version: int | None = None) -> int:
        check_bookie_id(bookie_id)
        data = cookie if isinstance(cookie, bytes) else cookie.serialize()
        node = self._nodes.get(bookie_id)
        if version is None:
            if node is not None:
                raise CookieExists(bookie_id)
            self._nodes[bookie_id] = (data, 0)
            self._store.registration.cookies_changed()
            return 0
        if node is None:
            raise NoSuchCookie(bookie_id)
        if version not in (-1, node[1]):
            raise self._conflict(bookie_id, version)
        self._nodes[bookie_id] = (data, node[1] + 1)
        return node[1] + 1

    @_call
    def delete(self, bookie_id: str, version: int = -1) -> None:
        check_bookie_id(bookie_id)
        node = self._nodes.get(bookie_id)
        if node is None:
            raise NoSuchCookie(bookie_id)
        if version not in (-1, node[1]):
            raise self._conflict(bookie_id, version)
        del self._nodes[bookie_id]
        self._store.registration.cookies_changed()


class FakeUnderreplicationManager(_Manager):
    _name = "underreplication"

    def __init__(self, store, store_ctime: bool = False):
        super().__init__(store)
        self.store_ctime = store_ctime
        self._enabled = True
        self._delay: tuple[bytes, int] | None = None  # the node: (value, version)
        self._delay_watch = store.listeners(self._delay_node)
        self._enabled_watch = store.listeners(lambda: self._enabled)
        self._statuses: dict[str, bytes] = {}  # our daemons' (ephemeral) status nodes
        self._marks: dict[int, tuple[UR.UnderreplicatedLedger, int]] = {}  # id -> (mark, version)
        self._locks: dict[int, str] = {}  # ledger id -> holder (this session's: they go with it)
        self._lock_ctimes: dict[int, int] = {}  # ledger id -> when its lock was taken (ms)
        self._check_ctimes: dict[str, int] = {}  # checkallledgersctime and friends -> ms

    def _delay_node(self) -> StoredValue | None:
        if self._delay is None:
            return None
        return StoredValue(P.underreplication_node(P.UR_LOST_BOOKIE_RECOVERY_DELAY, self._store.root), *self._delay)

    def end_session(self) -> None:
        """The session ended: its replication locks and status nodes go."""
        self._locks.clear()
        self._statuses.clear()

    def wipe(self) -> None:
        """(Format, nuke.)  Every mark goes, and its lock."""
        self._marks.clear()
        self._locks.clear()
        self._lock_ctimes.clear()

    @_call
    def ensure_layout(self) -> None:
        return None  # the fake's tree is always there

    @_call
    def is_enabled(self) -> bool:
        return self._enabled

    @_call
    def enable(self) -> bool:
        changed, self._enabled = not self._enabled, True
        self._enabled_watch.changed()
        return changed

    @_call
    def disable(self) -> bool:
        changed, self._enabled = self._enabled, False
        self._enabled_watch.changed()
        return changed

    @_call
    def watch_enabled(self, listener: Callable[[bool], None]) -> Callable[[], None]:
        return self._enabled_watch.add(listener)

    @_call
    def lost_bookie_recovery_delay(self) -> int | None:
        return None if self._delay is None else UR.parse_lost_bookie_recovery_delay(self._delay[0])

    @_call
    def watch_lost_bookie_recovery_delay(self, listener: Callable[[StoredValue | None], None]) -> Callable[[], None]:
        return self._delay_watch.add(listener)

    @_call
    def check_ctime(self, check: str) -> int | None:
        if check not in P.UR_CHECK_CTIMES:
            raise ValueError(f"unknown auditor check {check!r}")
        return self._check_ctimes.get(check)

    @_call
    def set_check_ctime(self, check: str, ctime_ms: int) -> None:
        if check not in P.UR_CHECK_CTIMES:
            raise ValueError(f"unknown auditor check {check!r}")
        self._check_ctimes[check] = ctime_ms

    @_call
    def set_lost_bookie_recovery_delay(self, seconds: int) -> None:
        data = UR.serialize_lost_bookie_recovery_delay(seconds)
        self._delay = (data, 0 if self._delay is None else self._delay[1] + 1)
        self._delay_watch.changed()  # a new version even for the same value

    @_call
    def mark(self, ledger_id: int, missing_replicas: Iterable[str]) -> None:
        P.underreplication_path(ledger_id)  # the real store's check of the id
        missing = list(dict.fromkeys(missing_replicas))
        ctime = self._store.now_ms() if self.store_ctime else None
        node = self._marks.get(ledger_id)
        if node is None:
            self._marks[ledger_id] = (UR.UnderreplicatedLedger(tuple(missing), ctime), 0)
            return
        marker, version = node
        if all(r in marker.replicas for r in missing):
            return
        merged = marker.merged(missing)
        if ctime is not None:
            merged = UR.UnderreplicatedLedger(merged.replicas, ctime)
        self._marks[ledger_id] = (merged, version + 1)

    def _mark(self, ledger_id: int) -> UnderreplicatedMark:
        marker = self._marks[ledger_id][0]
        return UnderreplicatedMark(ledger_id, marker.replicas, marker.ctime)

    @_call
    def get(self, ledger_id: int) -> UnderreplicatedMark | None:
        return self._mark(ledger_id) if ledger_id in self._marks else None

    @_call
    def mark_version(self, ledger_id: int) -> int | None:
        node = self._marks.get(ledger_id)
        return None if node is None else node[1]

    @_call
    def marks(self) -> Iterator[UnderreplicatedMark]:
        return iter([self._mark(i) for i in sorted(self._marks)])

    @_call
    def count(self) -> int:
        return len(self._marks)

    @_call
    def lock_holder(self, ledger_id: int) -> str | None:
        return self._locks.get(ledger_id)

    @_call
    def acquire(self, holder: str, *, skip: Iterable[int] = ()) -> tuple[UnderreplicatedMark, int] | None:
        skipped = set(skip)
        for ledger_id in sorted(self._marks):
            if ledger_id in skipped or ledger_id in self._locks:
                continue
            self._locks[ledger_id] = holder
            self._lock_ctimes[ledger_id] = self._store.now_ms()
            return self._mark(ledger_id), self._marks[ledger_id][1]
        return None

    @_call
    def lock(self, ledger_id: int, holder: str) -> bool:
        if ledger_id in self._locks:
            return False
        self._locks[ledger_id] = holder
        self._lock_ctimes[ledger_id] = self._store.now_ms()
        return True

    @_call
    def mark_replicated(self, ledger_id: int, version: int) -> bool:
        node = self._marks.get(ledger_id)
        done = node is None or node[1] == version
        if done:
            self._marks.pop(ledger_id, None)
        self._locks.pop(ledger_id, None)
        return done

    @_call
    def release(self, ledger_id: int) -> None:
        self._locks.pop(ledger_id, None)

    @_call
    def locks(self) -> dict[int, str | None]:
        return dict(self._locks)

    @_call
    def lock_ctimes(self) -> dict[int, int]:
        return {lid: self._lock_ctimes[lid] for lid in self._locks}

    @_call
    def publish_daemon_status(self, name: str, value: bytes) -> None:
        P.daemon_status_path(name)  # the real store's check of the name
        self._statuses[name] = bytes(value)

    @_call
    def daemon_statuses(self) -> dict[str, bytes]:
        return dict(sorted(self._statuses.items()))


class FakeAuditorElection(_Manager):
    _name = "auditor"

    def __init__(self, store):
        super().__init__(store)
        self._votes: dict[str, str] = {}  # vote name -> bookie id
        self._sequence = 0
        self.published: str | None = None  # who the auditor said it is
        self._vote_watches: dict[str, list[Callable[[], None]]] = {}  # one-shot

    def fire_vote_watches(self, names: Iterable[str] | None = None) -> None:
        """Tell and drop the vote watches of ``names`` (None: every one, as kazoo does when the
        connection drops)."""
        for name in list(self._vote_watches) if names is None else list(names):
            for callback in self._vote_watches.pop(name, []):
                _tell(callback)

    def end_session(self) -> None:
        """The session ended: its votes go, and every vote watch fires."""
        gone = list(self._votes)
        self._votes.clear()
        self.fire_vote_watches(gone)
        self.fire_vote_watches()  # kazoo tells every watch when the session goes

    @_call
    def cast_vote(self, bookie_id: str) -> str:
        name = f"{P.UR_VOTE_PREFIX}{self._sequence:010d}"
        self._sequence += 1
        self._votes[name] = bookie_id
        return name

    @_call
    def votes(self) -> list[str]:
        return sorted(self._votes)

    @_call
    def current(self) -> str | None:
        return self._votes[min(self._votes)] if self._votes else None

    @_call
    def publish(self, bookie_id: str) -> None:
        self.published = bookie_id

    @_call
    def withdraw_vote(self, name: str) -> None:
        if self._votes.pop(name, None) is not None:
            self.fire_vote_watches([name])

    @_call
    def watch_vote_gone(self, name: str, callback: Callable[[], None]) -> bool:
        if name not in self._votes:
            return False
        self._vote_watches.setdefault(name, []).append(callback)
        return True

    def vote_watches(self) -> int:
        """(Tests.)  Vote watches set and not yet fired."""
        return sum(len(callbacks) for callbacks in self._vote_watches.values())


class FakePulsarMetadata(_Manager):
    """Pulsar's metadata as a broker left it; tests put it in place with
    :meth:`put_managed_ledger` and :meth:`put_partitioned_topic` (not in the protocol:
    the code under test only reads)."""

    _name = "pulsar"

    def __init__(self, store):
        super().__init__(store)
        # (base, managed-ledger name) -> [value, version, {cursor znode name: value}]
        self._managed: dict[tuple[str, str], list] = {}
        self._partitioned: dict[tuple[str, str], tuple[bytes, int]] = {}
        self._locators: dict[tuple[str, str], tuple[bytes, int]] = {}

    def _base(self, base: str | None) -> str:
        return (base or P.managed_ledgers_base(self._store.root)).rstrip("/") or "/"

    # -- what tests do -----------------------------------------------------------
    def put_managed_ledger(
        self, name: str, value: bytes, cursors: dict[str, bytes] | None = None, *, base: str | None = None
    ) -> None:
        """Write (or rewrite: its version moves on) managed ledger ``name``
        (``tenant/namespace/persistent/<encoded topic>``) and add ``cursors`` (znode name -> value)."""
        parts = name.split("/")
        assert len(parts) in (4, 5) and parts[-2] == "persistent" and all(parts), name
        node = self._managed.get((self._base(base), name))
        if node is None:
            self._managed[(self._base(base), name)] = [value, 0, dict(cursors or {})]
        else:
            node[0], node[1] = value, node[1] + 1
            node[2].update(cursors or {})

    def put_partitioned_topic(self, name: str, value: bytes, *, base: str | None = None) -> None:
        key = (self._base(base), name)
        old = self._partitioned.get(key)
        self._partitioned[key] = (value, 0 if old is None else old[1] + 1)

    def put_schema_locator(self, schema_id: str, value: bytes, *, base: str) -> None:
        key = (base.rstrip("/"), schema_id)
        old = self._locators.get(key)
        self._locators[key] = (value, 0 if old is None else old[1] + 1)

    # -- the protocol ------------------------------------------------------------
    @_call
    def managed_ledger_names(self, base: str, tenant: str | None = None, namespace: str | None = None) -> list[str]:
        base = self._base(base)
        out = []
        for at, name in self._managed:
            parts = name.split("/")
            if at == base and tenant in (None, parts[0]) and namespace in (None, "/".join(parts[1:-2])):
                out.append(name)
        return sorted(out)

    @_call
    def managed_ledger(self, base: str, name: str, cursors: bool = True) -> StoredManagedLedger | None:
        base = self._base(base)
        node = self._managed.get((base, name))
        if node is None:
            return None
        value, version, cursor_values = node
        return StoredManagedLedger(
            P.managed_ledger_path(base, name), value, version, dict(sorted(cursor_values.items())) if cursors else {}
        )

    def managed_ledgers(self, base: str, names: Iterable[str], cursors: bool = True) -> Iterator[StoredManagedLedger]:
        for name in names:
            stored = self.managed_ledger(base, name, cursors)
            if stored is not None:
                yield stored

    @_call
    def partitioned_topic(self, base: str, name: str) -> StoredValue | None:
        base = self._base(base)
        node = self._partitioned.get((base, name))
        if node is None:
            return None
        return StoredValue(P.partitioned_topic_path(base, name), *node)

    @_call
    def schema_ids(self, base: str) -> list[str]:
        return sorted(sid for at, sid in self._locators if at == base.rstrip("/"))

    @_call
    def schema_locator(self, base: str, schema_id: str) -> StoredValue | None:
        node = self._locators.get((base.rstrip("/"), schema_id))
        return None if node is None else StoredValue(f"{base.rstrip('/')}/{schema_id}", *node)

    @_call
    def restore_value(self, path: str, value: bytes) -> bool:
        """As ZooKeeper's: the value goes where the readers find it (a managed ledger, a
        cursor, a schema locator, partitioned-topic metadata), its parents made as needed
        (an empty managed-ledger value, as ZooKeeper's empty parent znode)."""
        from bkctl.wire.metadata.errors import ValueExists

        value = bytes(value)
        current, write = self._restore_target(path)
        if current is not None:
            if current == value:
                return False
            raise ValueExists(path)
        write(value)
        return True

    def _restore_target(self, path: str):
        """What ``path`` holds now (None: nothing) and how to write it."""
        for marker, kind in (("/admin/partitioned-topics/", "partitioned"), ("/schemas/", "schema")):
            if marker in path:
                prefix, name = path.split(marker, 1)
                base = f"{prefix}/{P.MANAGED_LEDGERS}"
                if kind == "partitioned":
                    node = self._partitioned.get((self._base(base), name))
                    return (
                        None if node is None else node[0]
                    ), lambda v, name=name, base=base: self.put_partitioned_topic(name, v, base=base)
                sbase = f"{prefix}/schemas"
                node = self._locators.get((sbase, name))
                return (None if node is None else node[0]), lambda v, name=name, sbase=sbase: self.put_schema_locator(
                    name, v, base=sbase
                )
        prefix, _, name = path.partition(f"/{P.MANAGED_LEDGERS}/")
        base = self._base(f"{prefix}/{P.MANAGED_LEDGERS}")
        parts = name.split("/")
        if len(parts) >= 5 and parts[-2] != "persistent":  # a cursor below its managed ledger
            ml_name, cursor = "/".join(parts[:-1]), parts[-1]
            node = self._managed.get((base, ml_name))
            if node is None:
                self.put_managed_ledger(ml_name, b"", base=base)
                node = self._managed[(base, ml_name)]
            return node[2].get(cursor), lambda v: node[2].__setitem__(cursor, v)
        node = self._managed.get((base, name))
        return (None if node is None else node[0]), lambda v: self.put_managed_ledger(name, v, base=base)


class FakeClusterManager(_Manager):
    """The cluster's own "znodes": created initialised (root, INSTANCEID, a hierarchical
    LAYOUT), as the tests' ZooKeeper clusters are (``metadata_uri``)."""

    _name = "cluster"

    def __init__(self, store):
        super().__init__(store)
        self._root = True  # the ledgers root exists
        self._instance_id: str | None = str(uuid.uuid4())
        self._layout: LedgerLayout | None = LedgerLayout.for_manager(P.HIERARCHICAL)

    def _manager(self) -> str:
        layout = self._layout
        return (layout.manager if layout is not None else None) or P.HIERARCHICAL

    def _require_root(self) -> None:
        if not self._root:
            raise ClusterNotFound(f"no BookKeeper cluster at {self._store.root} on the fake")

    @_call
    def exists(self) -> bool:
        return self._root

    @_call
    def holds_cluster(self) -> bool:
        return self._root and (self._layout is not None or self._instance_id is not None)

    @_call
    def closest_cluster_root(self, budget: int = 500) -> str | None:
        return None  # the fake holds one cluster, and no neighbour

    @_call
    def instance_id(self) -> str | None:
        self._require_root()
        return self._instance_id

    @_call
    def set_instance_id(self, instance_id: str) -> None:
        self._require_root()
        self._instance_id = instance_id

    @_call
    def layout(self) -> LedgerLayout | None:
        return self._layout if self._root else None

    @_call
    def init(self) -> str:
        if self._root:
            raise ClusterExists(f"ledgers root {self._store.root} already exists on the fake")
        self._root = True
        self._instance_id = str(uuid.uuid4())
        self._layout = LedgerLayout.for_manager(P.HIERARCHICAL)
        return self._instance_id

    def _prepare_format(self) -> bool:
        existed, self._root = self._root, True
        return existed

    @_call
    def prepare_format(self) -> bool:
        return self._prepare_format()

    def _wipe(self) -> None:
        """What format and nuke delete: ledgers, id generators, cookies, marks and their locks."""
        store = self._store
        store.ledgers.wipe()
        store.ledger_ids.reset()
        store.cookies.wipe()
        store.underreplication.wipe()

    @_call
    def format(self, confirm: Callable[[], bool] | None = None) -> bool:
        existed = self._prepare_format()
        if existed and confirm is not None and not confirm():
            return False
        self._wipe()
        self._layout = LedgerLayout.for_manager(self._manager())
        self._instance_id = str(uuid.uuid4())
        return existed

    @_call
    def nuke(self, instance_id: str | None = None, force: bool = False) -> bool:
        if (instance_id is None) == (not force):
            raise ValueError("give exactly one of instance_id or force=True")
        if not force:
            self._require_root()
            if self._instance_id != instance_id:
                raise NukeRefused(
                    f"instance id {instance_id!r} does not match the cluster's INSTANCEID {self._instance_id!r}"
                )
        if not self._root:
            return False
        registration = self._store.registration
        writable, readonly = registration.writable(), registration.readonly()
        if writable or readonly:
            raise NukeRefused(
                "bookies are still registered ("
                + ", ".join(writable + [f"{b} (read-only)" for b in readonly])
                + "); stop all bookies before nuking the cluster"
            )
        self._wipe()
        self._store.rebalance.clear()
        for key in self._store.restores.kept():
            self._store.restores.clear(key)
        for ledger_id in self._store.lost_entries.all():
            self._store.lost_entries.forget(ledger_id)
        self._root, self._instance_id, self._layout = False, None, None
        return True


class FakeRackMap(_Manager):
    """Pulsar's rack map, kept as the bytes the real store writes."""

    _name = "racks"

    def __init__(self, store):
        super().__init__(store)
        self._node: tuple[bytes, int] | None = None  # (value, version)
        self._doc: RackMapDoc = {}  # the last map that parsed, what watchers are told
        self._watch = store.listeners(lambda: self._doc)

    @_call
    def read(self) -> tuple[RackMapDoc, int | None]:
        if self._node is None:
            return {}, None
        return parse_rack_map(self._node[0]), self._node[1]

    @_call
    def watch(self, listener: Callable[[RackMapDoc], None]) -> Callable[[], None]:
        try:
            parse_rack_map(self._node[0] if self._node is not None else None)
        except RackMapError:  # as ZooKeeper's: a map that does not parse is not told
            return self._watch.add(listener, tell=False)
        return self._watch.add(listener)

    def put_bytes(self, data: bytes) -> None:
        """(Tests.)  Store ``data`` as the rack map, as a hand edit would, parsed or not."""
        self._node = (data, 0 if self._node is None else self._node[1] + 1)
        self._changed()

    def _changed(self) -> None:
        try:
            self._doc = parse_rack_map(self._node[0] if self._node is not None else None)
        except RackMapError:
            return  # as ZooKeeper's: logged there, the watchers keep the last good map
        self._watch.changed()

    @_call
    def write(self, doc: Mapping[str, Mapping[str, Mapping[str, Any]]], version: int | None) -> int:
        node = self._node
        if (node is not None) if version is None else (node is None or node[1] != version):
            current = parse_rack_map(node[0]) if node is not None else {}
            raise VersionConflict(
                "the rack map " + RACK_MAP_PATH,
                -1 if version is None else version,
                current,
                -1 if node is None else node[1],
            )
        self._node = (serialize_rack_map(doc), 0 if node is None else node[1] + 1)
        self._changed()
        return self._node[1]


class FakeSavedRebalance(_Manager):
    """The saved rebalance, as its bytes."""

    _name = "rebalance"

    def __init__(self, store):
        super().__init__(store)
        self._data: bytes | None = None
        #: the running run's record: (data, version, the session that made it)
        self._run: tuple[bytes, int, int | None] | None = None

    @_call
    def read(self) -> bytes | None:
        return self._data

    @_call
    def write(self, data: bytes) -> None:
        self._data = bytes(data)

    @_call
    def clear(self) -> None:
        self._data = None

    @_call
    def claim(self, data: bytes) -> tuple[bytes, int] | None:
        if self._run is not None:
            return self._run[0], self._run[1]
        self._run = (bytes(data), 0, self._store.session_id)
        return None

    @_call
    def running(self) -> tuple[bytes, int] | None:
        return None if self._run is None else (self._run[0], self._run[1])

    @_call
    def update_running(self, data: bytes, version: int) -> bool:
        if self._run is None or self._run[1] != version:
            return False
        self._run = (bytes(data), version + 1, self._run[2])
        return True

    @_call
    def drop_running(self, version: int | None = None) -> bool:
        run = self._run
        if run is None or (run[2] != self._store.session_id if version is None else run[1] != version):
            return False
        self._run = None
        return True

    def end_session(self) -> None:
        """The session ended: a run it held goes."""
        if self._run is not None and self._run[2] == self._store.session_id:
            self._run = None


class FakeRestoreJournals(_Manager):
    """The restore journals by key: the one-document form's bytes, or a head, its count of chunks
    and the chunks written (those past the count kept but not read, as on ZooKeeper)."""

    _name = "restores"

    def __init__(self, store):
        super().__init__(store)
        self._data: dict[str, bytes] = {}
        self._heads: dict[str, tuple[bytes, int]] = {}
        self._chunks: dict[str, dict[int, bytes]] = {}

    @staticmethod
    def _check(key: str) -> None:
        if not key or "/" in key or key.startswith("."):
            raise ValueError(f"bad restore journal key {key!r}")

    @_call
    def read(self, key: str) -> bytes | None:
        return None if key in self._heads else self._data.get(key)

    @_call
    def write(self, key: str, data: bytes) -> None:
        self._check(key)
        self._heads.pop(key, None)
        self._chunks.pop(key, None)  # as ZooKeeper's: the key's children go first
        self._data[key] = bytes(data)

    @_call
    def read_chunks(self, key: str) -> RestoreJournalChunks | None:
        if key not in self._heads:
            return None
        head, count = self._heads[key]
        kept = self._chunks.get(key, {})
        for index in range(count):
            if index not in kept:
                raise MetadataStoreError(f"restore journal {key}: chunk {index} of {count} is missing")
        return RestoreJournalChunks(head, [kept[index] for index in range(count)])

    @_call
    def write_chunk(self, key: str, index: int, data: bytes) -> None:
        self._check(key)
        if len(data) > RESTORE_CHUNK_BYTES or index < 0:
            raise ValueError(f"restore journal chunk {index} of {len(data)} bytes: at most {RESTORE_CHUNK_BYTES}")
        self._chunks.setdefault(key, {})[index] = bytes(data)

    @_call
    def write_head(self, key: str, head: bytes, chunks: int) -> None:
        self._check(key)
        self._data.pop(key, None)
        self._heads[key] = (bytes(head), chunks)

    def save(self, key: str, chunks: Mapping[int, bytes], head: bytes, count: int) -> None:
        for index, data in sorted(chunks.items()):
            self.write_chunk(key, index, data)
        self.write_head(key, head, count)

    @_call
    def kept(self) -> list[str]:
        return sorted({*self._data, *self._heads, *self._chunks})

    @_call
    def clear(self, key: str) -> None:
        self._data.pop(key, None)
        self._heads.pop(key, None)
        self._chunks.pop(key, None)


class FakeLostEntryRecords(_Manager):
    """The records of lost entries, as their bytes by ledger id."""

    _name = "lost_entries"

    def __init__(self, store):
        super().__init__(store)
        self._records: dict[int, bytes] = {}

    @_call
    def read(self, ledger_id: int) -> bytes | None:
        return self._records.get(int(ledger_id))

    @_call
    def write(self, ledger_id: int, data: bytes) -> None:
        self._records[int(ledger_id)] = bytes(data)

    @_call
    def all(self) -> dict[int, bytes]:
        return dict(sorted(self._records.items()))

    @_call
    def forget(self, ledger_id: int) -> None:
        self._records.pop(int(ledger_id), None)


class FakeMetadataStore:
    """An in-memory :class:`~bkctl.wire.metadata.store.MetadataStore` (one session).

    ``now_ms`` gives the "znodes'" ctime (ledgers, and marks with *store_ctime*).
    """

    def __init__(
        self,
        root: str = P.DEFAULT_ROOT,
        *,
        store_ctime: bool = False,
        now_ms: Callable[[], int] = lambda: DEFAULT_NOW_MS,
    ):
        self.root = root
        self.uri = f"zk://fake{root}"
        self.now_ms = now_ms
        self.calls: list[tuple[str, tuple]] = []
        self._started = False
        self.session_id: int | None = None
        self._lost = False
        self._failure: BaseException | None = None
        self._hooks: dict[str, list[Callable[..., Any]]] = {}
        self._in_hook = False
        self.append_locks = FakeAppendLocks()
        self._lost_listeners: list[Callable[[], None]] = []
        self._watch_sets: list[_Listeners] = []  # every manager's persistent watches
        self.cluster = FakeClusterManager(self)
        self.racks = FakeRackMap(self)
        self.ledgers = FakeLedgerManager(self)
        self.ledger_ids = FakeLedgerIdGenerator(self)
        self.registration = FakeRegistrationManager(self)
        self.cookies = FakeCookieManager(self)
        self.underreplication = FakeUnderreplicationManager(self, store_ctime)
        self.auditor = FakeAuditorElection(self)
        self.pulsar = FakePulsarMetadata(self)
        self.rebalance = FakeSavedRebalance(self)
        self.restores = FakeRestoreJournals(self)
        self.lost_entries = FakeLostEntryRecords(self)

    # -- the session ---------------------------------------------------------------
    def start(self) -> FakeMetadataStore:
        if not self._started:
            self.session_id = next(_SESSION_IDS)
        self._started = True
        return self

    def close(self) -> None:
        """End the session: its ephemeral nodes (registrations, votes, locks, status nodes) go."""
        if self._started:
            self._started = False
            self._end_session()

    def _end_session(self) -> FakeRegistrations:
        """Its ephemeral nodes go; the registrations there were."""
        self.append_locks.clear()
        registered = self.registration.end_session()
        self.underreplication.end_session()
        self.auditor.end_session()
        self.rebalance.end_session()
        for callback in list(self._lost_listeners):
            _tell(callback)
        return registered

    def on_session_lost(self, callback: Callable[[], None]) -> Callable[[], None]:
        # as ZooKeeper's: no session needed to listen, and listening never fails
        self.calls.append(("on_session_lost", (callback,)))
        self._lost_listeners.append(callback)

        def stop() -> None:
            if callback in self._lost_listeners:
                self._lost_listeners.remove(callback)

        return stop

    def __enter__(self) -> FakeMetadataStore:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        return self._started and not self._lost

    # -- what tests do to it ---------------------------------------------------------
    def before(self, name: str, hook: Callable[..., Any]) -> None:
        """Run ``hook(*args)`` once, just before the next call of ``name`` (``"ledgers.update"``)."""
        self._hooks.setdefault(name, []).append(hook)

    def fail_with(self, failure: BaseException | None) -> None:
        """Every call raises *failure* (None: calls work again)."""
        self._failure = failure

    def lose_connection(self) -> None:
        self._lost = True
        self.auditor.fire_vote_watches()  # kazoo tells every watch when the connection drops

    def expire_session(self) -> None:
        """The session expired: its ephemeral nodes go, the session-lost listeners are
        told, and a new session restores the registrations (as ZKRegistrationManager)."""
        registered = self._end_session()
        self.session_id = next(_SESSION_IDS)
        self.registration.restore(registered)

    def reconnect(self) -> None:
        self._lost = False

    def listeners(self, look: Callable[[], Any]) -> _Listeners:
        """A manager's persistent watches of what ``look()`` gives, counted by :meth:`live_watches`."""
        watches = _Listeners(look)
        self._watch_sets.append(watches)
        return watches

    def live_watches(self) -> int:
        """(Tests.)  The watches set and not yet stopped: the persistent ones (bookie lists,
        cookies, the recovery delay and switch, the rack map), vote watches not yet fired and
        session-lost listeners; what a component that stops its watches leaves at 0."""
        persistent = sum(len(watches) for watches in self._watch_sets)
        return persistent + self.auditor.vote_watches() + len(self._lost_listeners)

    def called(self, name: str) -> list[tuple]:
        """The arguments of every call of ``name`` so far."""
        return [args for called, args in self.calls if called == name]

    def admit(self, name: str, args: tuple, kwargs: dict) -> None:
        """(The managers, before each call.)  Refuse it as the real store would (not started, the
        connection lost, a failure set by :meth:`fail_with`), else log it and run its hook."""
        if not self._started:
            raise ZKUnavailable("metadata store for the fake is not started")
        if self._lost:
            raise ZKUnavailable("ZooKeeper at the fake unavailable: connection lost")
        if self._failure is not None:
            raise self._failure
        self.calls.append((name, args + tuple(kwargs.values())))
        hooks = self._hooks.get(name)
        if hooks and not self._in_hook:  # a hook's own calls run no hooks
            hook = hooks.pop(0)
            self._in_hook = True
            try:
                hook(*args, **kwargs)
            finally:
                self._in_hook = False
