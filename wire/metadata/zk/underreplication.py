"""The autorecovery tree below ``<root>/underreplication``, as Java's
ZkLedgerUnderreplicationManager keeps it: the replication switch, the lost-bookie
recovery delay, one ``urL`` mark per under-replicated ledger and the replication
workers' per-ledger locks.  The znode formats are :mod:`bkctl.wire.metadata.underreplication`."""

from __future__ import annotations

import itertools
import random
import re
import time
from collections.abc import Callable, Iterable, Iterator

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError
from kazoo.protocol.states import ZnodeStat

from bkctl.wire.errors import CodecError
from bkctl.wire.metadata import paths as P
from bkctl.wire.metadata import underreplication as UR
from bkctl.wire.metadata.errors import MetadataStoreError
from bkctl.wire.metadata.store import StoredValue, UnderreplicatedMark, Unwatch
from bkctl.wire.metadata.zk.session import Manager, ZKSession, zk_call, zk_gen

__all__ = ["ZKUnderreplicationManager"]

_HEX4 = re.compile(r"[0-9a-f]{4}")
#: seconds a worker's walk keeps a hex directory's list of children (:meth:`ZKUnderreplicationManager.acquire`)
_LISTING_TTL = 2.0
#: znodes listed (or marks read) in one pipelined step of :meth:`ZKUnderreplicationManager.marks`
_LISTS_AT_ONCE = 2000


class ZKUnderreplicationManager(Manager):
    """Marks, locks, the enable switch and the recovery delay.

    *store_ctime* writes the mark time into marks (Java's
    storeSystemTimeAsLedgerUnderreplicatedMarkTime), read from *wall_clock*
    (seconds since the epoch).
    """

    def __init__(self, session: ZKSession, store_ctime: bool = False, wall_clock: Callable[[], float] = time.time):
        super().__init__(session)
        self.store_ctime = store_ctime
        self._wall_clock = wall_clock
        self._checked = False
        #: hex directory -> (when, its children) (:meth:`_shuffled`)
        self._listings: dict[str, tuple[float, tuple[str, ...]]] = {}
        self._kept_lists_used = False  # whether the walk of :meth:`acquire` read a kept list

    def forget_cached(self) -> None:
        self._checked = False
        self._listings.clear()

    def _node(self, name: str) -> str:
        return P.underreplication_node(name, self._root)

    @zk_call
    def ensure_layout(self) -> None:
        """Create ``B``, ``B/LAYOUT`` (checking an existing one), ``B/ledgers`` and ``B/locks``."""
        s = self._session
        s.require_root()
        s.create_if_missing(P.underreplication_base(self._root))
        path = self._node(P.UR_LAYOUT)
        if not s.create_if_missing(path, UR.serialize_underreplication_layout()):
            data, _ = s.get(path)
            try:
                UR.parse_underreplication_layout(data)
            except CodecError as exc:
                raise MetadataStoreError(f"{path}: {exc}") from None
        s.create_if_missing(self._node(P.UR_LEDGERS))
        s.create_if_missing(self._node(P.UR_LOCKS))
        self._checked = True

    def ensure_checked(self) -> None:
        """:meth:`ensure_layout` once per store (again after a format or nuke)."""
        if not self._checked:
            self.ensure_layout()

    # -- the switch and the delay ------------------------------------------------
    @zk_call
    def is_enabled(self) -> bool:
        """Whether ledger replication is enabled (no ``B/disable``)."""
        return self._session.exists(self._node(P.UR_DISABLE)) is None

    @zk_call
    def disable(self) -> bool:
        """Create ``B/disable``; False if it was already disabled."""
        self.ensure_checked()
        return self._session.create_if_missing(self._node(P.UR_DISABLE), b"")

    @zk_call
    def enable(self) -> bool:
        """Delete ``B/disable``; False if it was already enabled."""
        self.ensure_checked()
        try:
            self._zk.delete(self._node(P.UR_DISABLE))
            return True
        except NoNodeError:
            return False

    @zk_call
    def lost_bookie_recovery_delay(self) -> int | None:
        """``B/lostBookieRecoveryDelay`` in seconds (None if the node is missing)."""
        return self._session.get_parsed(
            self._node(P.UR_LOST_BOOKIE_RECOVERY_DELAY), UR.parse_lost_bookie_recovery_delay
        )

    @zk_call
    def set_lost_bookie_recovery_delay(self, seconds: int) -> None:
        data = UR.serialize_lost_bookie_recovery_delay(seconds)
        self.ensure_checked()
        path = self._node(P.UR_LOST_BOOKIE_RECOVERY_DELAY)
        try:
            self._zk.set(path, data, version=-1)
        except NoNodeError:
            try:
                self._zk.create(path, data)
            except NodeExistsError:
                self._zk.set(path, data, version=-1)

    @zk_call
    def watch_lost_bookie_recovery_delay(self, listener: Callable[[StoredValue | None], None]) -> Unwatch:
        """A data watch on ``B/lostBookieRecoveryDelay``: every write moves its version."""
        path = self._node(P.UR_LOST_BOOKIE_RECOVERY_DELAY)
        return self._session.watch_data(
            path,
            lambda data, stat: listener(
                None if stat is None or data is None else StoredValue(path, data, stat.version)
            ),
        )

    @zk_call
    def watch_enabled(self, listener: Callable[[bool], None]) -> Unwatch:
        """A data watch on ``B/disable``, told only when it comes or goes."""
        last: list[bool] = []

        def changed(_data: bytes | None, stat: ZnodeStat | None) -> None:
            enabled = stat is None
            if last != [enabled]:
                last[:] = [enabled]
                listener(enabled)

        return self._session.watch_data(self._node(P.UR_DISABLE), changed)

    # -- the auditor's periodic checks ----------------------------------------------
    @staticmethod
    def _check_node(check: str) -> str:
        if check not in P.UR_CHECK_CTIMES:
            raise ValueError(f"unknown auditor check {check!r} (one of {', '.join(P.UR_CHECK_CTIMES)})")
        return check

    @zk_call
    def check_ctime(self, check: str) -> int | None:
        return self._session.get_parsed(self._node(self._check_node(check)), UR.parse_last_run_time)

    @zk_call
    def set_check_ctime(self, check: str, ctime_ms: int) -> None:
        path = self._node(self._check_node(check))
        data = UR.serialize_last_run_time(ctime_ms)
        self._session.require_root()
        try:
            self._zk.set(path, data, version=-1)
        except NoNodeError:
            try:
                self._zk.create(path, data, makepath=True)
            except NodeExistsError:
                self._zk.set(path, data, version=-1)

    # -- marks ---------------------------------------------------------------------
    @zk_call
    def mark(self, ledger_id: int, missing_replicas: Iterable[str]) -> None:
        """Mark (or merge into) the ledger's ``urL`` node, retrying on version conflicts."""
        missing = list(dict.fromkeys(missing_replicas))
        self.ensure_checked()
        path = P.underreplication_path(ledger_id, self._root)
        for _ in range(100):
            ctime = int(self._wall_clock() * 1000) if self.store_ctime else None
            try:
                self._zk.create(path, UR.UnderreplicatedLedger(tuple(missing), ctime).serialize(), makepath=True)
                return
            except NodeExistsError:
                pass
            try:
                data, stat = self._session.get(path)
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

    @zk_call
    def get(self, ledger_id: int) -> UnderreplicatedMark | None:
        """The ledger's mark, None when it is not marked."""
        path = P.underreplication_path(ledger_id, self._root)
        try:
            data, _ = self._session.get(path)
        except NoNodeError:
            return None
        return self._decode(ledger_id, path, data)

    @zk_call
    def mark_version(self, ledger_id: int) -> int | None:
        """The version of the ledger's mark, None when it is not marked."""
        try:
            _, stat = self._session.get(P.underreplication_path(ledger_id, self._root))
        except NoNodeError:
            return None
        version: int = stat.version
        return version

    @staticmethod
    def _decode(ledger_id: int, path: str, data: bytes) -> UnderreplicatedMark:
        try:
            marker = UR.parse_underreplicated_ledger(data)
        except CodecError as exc:
            raise MetadataStoreError(f"corrupt {path}: {exc}") from None
        return UnderreplicatedMark(ledger_id, marker.replicas, marker.ctime)

    def _shuffled(self) -> Iterator[tuple[int, str]]:
        """``(ledger_id, path)`` of each mark in random order, as Java's replication worker
        walks.  The hex directories' lists are kept :data:`_LISTING_TTL` seconds: every mark
        has a leaf directory of its own, so the level above a leaf lists one name for each
        mark among its 65,536 ids, and read again for every ledger a worker takes, the cost
        of taking one grew with the marks (25,000 marks: 25,000 names a ledger taken).  A
        name gone meanwhile lists as empty; a new directory shows within the TTL, or at once
        to :meth:`acquire`, which looks again at fresh lists before it says there is none."""

        def names_in(path: str, level: int) -> list[str]:
            if level == 4:
                return self._session.children_or_empty(path)
            now = time.monotonic()
            cached = self._listings.get(path)
            if cached is None or now - cached[0] >= _LISTING_TTL:
                cached = self._listings[path] = (now, tuple(self._session.children_or_empty(path)))
            else:
                self._kept_lists_used = True
            return list(cached[1])

        def descend(path: str, level: int) -> Iterator[tuple[int, str]]:
            names = names_in(path, level)
            random.shuffle(names)
            if level == 4:
                for name in names:
                    try:
                        yield P.parse_urL_name(name), f"{path}/{name}"
                    except ValueError:
                        continue
                return
            for name in names:
                if _HEX4.fullmatch(name):
                    yield from descend(f"{path}/{name}", level + 1)

        yield from descend(self._node(P.UR_LEDGERS), 0)

    def _walk_all(self) -> Iterator[tuple[int, str]]:
        """``(ledger_id, path)`` of each mark, ascending, one level of the hex tree at a
        time: every mark has a leaf directory of its own (the id's low 16 bits), so the
        lists are read :data:`_LISTS_AT_ONCE` at a time, pipelined
        (:meth:`ZKSession.children_many`), not one request after the other."""
        level: Iterator[str] = iter([self._node(P.UR_LEDGERS)])
        for _ in range(4):
            level = self._below(level, _HEX4.fullmatch)
        for path in self._below(level, lambda name: name.startswith("urL")):
            try:
                yield P.parse_urL_name(path), path
            except ValueError:
                continue

    def _below(self, parents: Iterator[str], keep: Callable[[str], object]) -> Iterator[str]:
        """The children of each of ``parents`` that ``keep`` accepts, sorted, in order."""
        while chunk := list(itertools.islice(parents, _LISTS_AT_ONCE)):
            # read whole before anything is handed on: the next level reads while this one waits
            listed = list(self._session.children_many(chunk))
            for parent, names in zip(chunk, listed):
                for name in sorted(n for n in names or () if keep(n)):
                    yield f"{parent}/{name}"

    @zk_gen
    def marks(self) -> Iterator[UnderreplicatedMark]:
        """Every mark, ascending ledger ids (the tree a level at a time, the marks
        :data:`_LISTS_AT_ONCE` at a time: :meth:`ZKSession.get_each`)."""
        found = self._walk_all()
        while chunk := list(itertools.islice(found, _LISTS_AT_ONCE)):
            got = list(self._session.get_each([((i, p), p) for i, p in chunk]))
            for (ledger_id, path), value in got:
                if value is not None:  # else replicated meanwhile
                    yield self._decode(ledger_id, path, value[0])

    @zk_call
    def count(self) -> int:
        return sum(1 for _ in self._walk_all())

    # -- the replication workers' locks --------------------------------------------
    @zk_call
    def lock_holder(self, ledger_id: int) -> str | None:
        """The host name in ``B/locks/urL<id>`` (who is re-replicating the ledger)."""
        try:
            data, _ = self._session.get(P.underreplication_lock_path(ledger_id, self._root))
        except NoNodeError:
            return None
        try:
            return UR.parse_lock_data(data)
        except CodecError:
            return None

    @zk_call
    def acquire(self, holder: str, *, skip: Iterable[int] = ()) -> tuple[UnderreplicatedMark, int] | None:
        """Take one marked ledger that nobody holds, as Java's replication worker does:
        walk the marks in random order, create the ledger's lock
        ``B/locks/urL<id>`` (EPHEMERAL, ``LockDataFormat`` naming ``holder``),
        then read the mark.  Returns the mark and its version (give it
        to :meth:`mark_replicated`), or None when every mark is locked
        (or in ``skip``).  The lock goes with this session."""
        self.ensure_checked()
        skipped = set(skip)
        lock_data = UR.serialize_lock_data(holder)
        while True:
            self._kept_lists_used = False
            for ledger_id, path in self._shuffled():
                if ledger_id in skipped:
                    continue
                lock = P.underreplication_lock_path(ledger_id, self._root)
                try:
                    self._zk.create(lock, lock_data, ephemeral=True)
                except NodeExistsError:
                    continue
                try:
                    data, stat = self._session.get(path)
                except NoNodeError:  # replicated between the walk and the lock
                    self._session.delete_own(lock)
                    continue
                return self._decode(ledger_id, path, data), stat.version
            if not self._kept_lists_used:
                return None
            # nothing to take in lists kept up to _LISTING_TTL: a mark made since (a ledger
            # just marked, by this store or another) would wait for them to expire
            self._listings.clear()

    @zk_call
    def lock(self, ledger_id: int, holder: str) -> bool:
        """Create ``B/locks/urL<id>`` (EPHEMERAL, naming ``holder``) for a ledger marked or
        not: the znode Java's workers and its over-replicated-ledger collection create
        before they touch a ledger (False: it exists, someone holds it)."""
        self.ensure_checked()
        try:
            self._zk.create(
                P.underreplication_lock_path(ledger_id, self._root), UR.serialize_lock_data(holder), ephemeral=True
            )
        except NodeExistsError:
            return False
        return True

    @zk_call
    def mark_replicated(self, ledger_id: int, version: int) -> bool:
        """Delete the ledger's mark if it still has ``version`` (False: it was
        re-marked meanwhile and stays), prune its empty hex directories, and
        release the lock."""
        path = P.underreplication_path(ledger_id, self._root)
        try:
            self._zk.delete(path, version=version)
            done = True
        except NoNodeError:
            done = True
        except BadVersionError:
            done = False
        if done:
            for parent in reversed(P.underreplication_parent_paths(ledger_id, self._root)):
                try:
                    self._zk.delete(parent)
                except (NotEmptyError, NoNodeError):
                    break
        self._session.delete_own(P.underreplication_lock_path(ledger_id, self._root))
        return done

    @zk_call
    def release(self, ledger_id: int) -> None:
        """Let go of a ledger's replication lock (only if it is ours)."""
        self._session.delete_own(P.underreplication_lock_path(ledger_id, self._root))

    # -- our daemons' status nodes ---------------------------------------------------
    @zk_call
    def publish_daemon_status(self, name: str, value: bytes) -> None:
        """Set ``B/bkctl-daemons/<name>``, or create it EPHEMERAL (another session's is replaced)."""
        path = P.daemon_status_path(name, self._root)
        try:
            self._zk.set(path, value)
            return
        except NoNodeError:
            pass
        try:
            self._zk.create(path, value, ephemeral=True, makepath=True)
        except NodeExistsError:  # another session's node (a daemon that just died): replace it
            self._session.delete_quiet(path)
            self._zk.create(path, value, ephemeral=True, makepath=True)

    @zk_call
    def daemon_statuses(self) -> dict[str, bytes]:
        """The ephemeral nodes below ``B/bkctl-daemons`` (two levels), by relative name."""
        found: dict[str, bytes] = {}

        def walk(path: str, prefix: str, depth: int) -> None:
            for child in sorted(self._session.children_or_empty(path)):
                try:
                    data, stat = self._session.get(f"{path}/{child}")
                except NoNodeError:
                    continue  # its daemon just went
                if stat.ephemeralOwner:
                    found[prefix + child] = data
                elif stat.numChildren and depth < 2:
                    walk(f"{path}/{child}", f"{prefix}{child}/", depth + 1)

        walk(self._node(P.UR_DAEMON_STATUS), "", 1)
        return found

    @zk_call
    def locks(self) -> dict[int, str | None]:
        """Every replication lock: ledger id -> the holder's host name."""
        held: dict[int, str | None] = {}
        base = self._node(P.UR_LOCKS)
        for name in self._session.children_or_empty(base):
            try:
                ledger_id = P.parse_urL_name(name)
                data, _ = self._session.get(f"{base}/{name}")
            except (ValueError, NoNodeError):
                continue
            try:
                held[ledger_id] = UR.parse_lock_data(data)
            except CodecError:
                held[ledger_id] = None
        return held

    @zk_call
    def lock_ctimes(self) -> dict[int, int]:
        taken: dict[int, int] = {}
        base = self._node(P.UR_LOCKS)
        for name in self._session.children_or_empty(base):
            try:
                ledger_id = P.parse_urL_name(name)
            except ValueError:
                continue
            stat = self._session.exists(f"{base}/{name}")
            if stat is not None:
                taken[ledger_id] = stat.ctime
        return taken
