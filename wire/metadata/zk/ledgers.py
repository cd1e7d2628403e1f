"""Ledger metadata znodes, laid out by the cluster's ledger manager (Java's
HierarchicalLedgerManager and its flat / legacy / long siblings): create, read,
compare-and-set on the znode version, delete, and walking every ledger id."""

from __future__ import annotations

import functools
import re
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from kazoo.exceptions import BadVersionError, LockTimeout, NodeExistsError, NoNodeError, NotEmptyError

from bkctl.wire.errors import CodecError
from bkctl.wire.metadata import paths as P
from bkctl.wire.metadata.errors import (
    ClusterNotFound,
    LedgerExists,
    MetadataStoreError,
    MetadataVersionConflict,
    NoSuchLedger,
    ZKStoreError,
)
from bkctl.wire.metadata.ledger import LedgerMetadata, serialize_ledger_metadata
from bkctl.wire.metadata.sorted_ids import SortedIds
from bkctl.wire.metadata.store import LedgerRange, LedgerRead, StoredLedgerRead, WalkProgress, stored_ctime
from bkctl.wire.metadata.zk.session import Manager, ZKSession, zk_call, zk_gen
from bkctl.wire.metadata.zk.watched_children import WatchedChildren

if TYPE_CHECKING:
    from bkctl.wire.metadata.zk.cluster import ZKClusterManager
    from bkctl.wire.metadata.zk.ledger_ids import ZKLedgerIdGenerator

__all__ = ["ZKLedgerLock", "ZKLedgerManager"]

_DIGITS4 = re.compile(r"\d{4}")
#: how many ledgers a walk's progress hears of at a time
_PROGRESS_STEP = 1000
#: the 4 digits of each ``L####`` line of newline-joined names
_LEAF4_LINE = re.compile(r"^L(\d{4})$", re.MULTILINE)
_T = TypeVar("_T")


class ZKLedgerLock:
    """A ledger's append lock: kazoo's Lock recipe (EPHEMERAL_SEQUENTIAL contenders
    below :func:`~bkctl.wire.metadata.paths.append_lock_path`, the lowest holds it)."""

    def __init__(self, session: ZKSession, path: str, holder: str):
        self._session = session
        self.path = path
        self.holder = holder
        self._recipe = None
        self._held = False

    def _lock(self) -> Any:
        if self._recipe is None:
            self._recipe = self._session.client.Lock(self.path, self.holder)
        return self._recipe

    @zk_call
    def acquire(self, timeout: float = 0.0) -> bool:
        lock = self._lock()
        try:
            if timeout and timeout > 0:
                got = lock.acquire(blocking=True, timeout=timeout)
            else:
                got = lock.acquire(blocking=False)
        except LockTimeout:
            got = False
        self._held = self._held or bool(got)
        return bool(got)

    @zk_call
    def holders(self) -> list[str]:
        return [h for h in self._lock().contenders() if h]

    @zk_call
    def release(self) -> None:
        """Delete our contender node, then the lock's own znode unless another contender uses it."""
        if not self._held:
            return
        self._held = False
        try:
            self._lock().release()
        finally:
            try:
                self._session.client.delete(self.path)
            except Exception:  # noqa: BLE001 - NotEmpty (someone waits), NoNode, a lost connection: a courtesy
                pass


class ZKLedgerManager(Manager):
    """Ledger metadata with compare-and-set on the znode version."""

    def __init__(self, session: ZKSession, cluster: ZKClusterManager, ids: ZKLedgerIdGenerator):
        super().__init__(session)
        self._cluster = cluster
        self._ids = ids
        self._watched: WatchedChildren | None = None  # made by the first watched walk
        #: the decoder of a ledger znode's value (``parse(data, znode_ctime)``: the session's
        #: :attr:`~bkctl.wire.fastpath.Twins.ledger_metadata`, C or Python)
        self.parse = session.twins.ledger_metadata.parse

    def path(self, ledger_id: int) -> str:
        return P.ledger_path(ledger_id, self._cluster.manager, self._root)

    def append_lock(self, ledger_id: int, holder: str) -> ZKLedgerLock:
        """The ledger's append lock (:class:`ZKLedgerLock`; nothing is asked of ZooKeeper yet)."""
        return ZKLedgerLock(self._session, P.append_lock_path(ledger_id, self._root), holder)

    def _decode(self, ledger_id: int, data: bytes, stat: Any) -> LedgerMetadata:
        try:
            return self.parse(data, stat.ctime)
        except CodecError as exc:
            raise MetadataStoreError(f"ledger {ledger_id} has corrupt metadata: {exc}") from None

    @zk_call
    def create(self, md: LedgerMetadata, ledger_id: int | None = None) -> tuple[int, int]:
        """Store *md* as a new ledger; returns ``(ledger_id, version)`` (version 0).

        With no *ledger_id* one is generated.  Raises :class:`LedgerExists`
        if the ledger znode is already there.
        """
        if ledger_id is None:
            ledger_id = self._ids.generate()
        path = self.path(ledger_id)
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

    @zk_call
    def read(self, ledger_id: int) -> tuple[LedgerMetadata, int]:
        """``(metadata, version)``; ``metadata.ctime`` falls back to the znode ctime."""
        try:
            data, stat = self._session.get(self.path(ledger_id))
        except NoNodeError:
            raise NoSuchLedger(ledger_id) from None
        return self._decode(ledger_id, data, stat), stat.version

    @zk_call
    def read_bytes(self, ledger_id: int) -> tuple[bytes, int]:
        """The raw znode value and its version (for dumps)."""
        try:
            data, stat = self._session.get(self.path(ledger_id))
        except NoNodeError:
            raise NoSuchLedger(ledger_id) from None
        return data, stat.version

    @zk_call
    def restore_bytes(self, ledger_id: int, data: bytes, overwrite: bool = False) -> int:
        """Write serialized metadata (any format, checked by parsing) exactly as given, as
        Java's ``ledgermetadata -restorefromfile``: create the znode, or with *overwrite*
        replace an existing one (version -1).  Raises :class:`LedgerExists` when it exists
        and *overwrite* is false; returns the new version."""
        try:
            self.parse(data, None)
        except CodecError as exc:
            raise MetadataStoreError(f"not ledger metadata: {exc}") from None
        path = self.path(ledger_id)
        try:
            self._zk.create(path, data, makepath=True)
            return 0
        except NodeExistsError:
            if not overwrite:
                raise LedgerExists(ledger_id) from None
        return int(self._zk.set(path, data, version=-1).version)

    @zk_call
    def exists(self, ledger_id: int) -> bool:
        return self._session.exists(self.path(ledger_id)) is not None

    def _conflict(self, ledger_id: int, expected_version: int) -> ZKStoreError:
        try:
            data, stat = self._session.get(self.path(ledger_id))
        except NoNodeError:
            return NoSuchLedger(ledger_id)
        return MetadataVersionConflict(ledger_id, expected_version, self._decode(ledger_id, data, stat), stat.version)

    @zk_call
    def update(self, ledger_id: int, md: LedgerMetadata, expected_version: int, *, unlock: bool = False) -> int:
        """Compare-and-set the metadata; returns the new version.

        Raises :class:`MetadataVersionConflict` (carrying the current
        metadata and version) when the znode moved on, :class:`NoSuchLedger`
        when it is gone.  A ``ctime`` that :meth:`read` only filled in
        from the znode is not written into the value (Java keeps such
        ledgers without a stored ctime).  ``unlock``: the ledger's replication lock
        (``underreplication/locks/urL<id>``) is deleted in the same multi as the write.
        """
        path = self.path(ledger_id)
        if md.ctime is not None:
            try:
                current, stat = self._session.get(path)
            except NoNodeError:
                raise NoSuchLedger(ledger_id) from None
            if expected_version != -1 and stat.version != expected_version:
                raise MetadataVersionConflict(
                    ledger_id, expected_version, self._decode(ledger_id, current, stat), stat.version
                )
            if md.ctime == stat.ctime:
                try:
                    stored = self.parse(current, None)
                except CodecError:
                    stored = None
                md = stored_ctime(md, stat.ctime, stored)
        data = serialize_ledger_metadata(md)
        if unlock:
            return self._update_unlocking(ledger_id, path, data, expected_version)
        try:
            stat = self._zk.set(path, data, version=expected_version)
        except BadVersionError:
            raise self._conflict(ledger_id, expected_version) from None
        except NoNodeError:
            raise NoSuchLedger(ledger_id) from None
        return int(stat.version)

    def _update_unlocking(self, ledger_id: int, path: str, data: bytes, expected_version: int) -> int:
        txn = self._zk.transaction()
        txn.set_data(path, data, version=expected_version)
        txn.delete(P.underreplication_lock_path(ledger_id, self._root))
        written, unlocked = txn.commit()
        if isinstance(written, BadVersionError):
            raise self._conflict(ledger_id, expected_version)
        if isinstance(written, NoNodeError):
            raise NoSuchLedger(ledger_id)
        if isinstance(unlocked, NoNodeError):
            raise MetadataStoreError(f"ledger {ledger_id}: its replication lock is gone; its metadata was not written")
        if isinstance(written, Exception) or isinstance(unlocked, Exception):
            raise MetadataStoreError(f"ledger {ledger_id}: writing its metadata failed: {written!r}, {unlocked!r}")
        return int(written.version)

    @zk_call
    def delete(self, ledger_id: int, version: int = -1) -> None:
        """Delete the ledger znode, then its empty parents; a missing ledger is fine."""
        path = self.path(ledger_id)
        try:
            self._zk.delete(path, version)
        except NoNodeError:
            pass
        except BadVersionError:
            raise self._conflict(ledger_id, version) from None
        for parent in reversed(P.ledger_parent_paths(ledger_id, self._cluster.manager, self._root)):
            try:
                self._zk.delete(parent)
            except NotEmptyError:
                break
            except NoNodeError:
                continue

    @zk_gen
    def read_many(self, ledger_ids: Iterable[int], *, naming: Collection[str] | None = None) -> Iterator[LedgerRead]:
        """:class:`LedgerRead` ``(ledger_id, metadata, version)`` for each of ``ledger_ids``,
        in order, streaming (:meth:`ZKSession.get_many`: multiRead batches on a connection
        of its own, or pipelined gets): ``(ledger_id, None, -1)`` for a missing ledger, and
        the :class:`MetadataStoreError` :meth:`read` would raise in place of metadata that
        does not decode (so a walk goes on past it).  With *naming*, a ledger whose stored
        value does not contain one of those bookie ids is left out without being decoded
        (the caller still checks the decoded ones: a bookie id inside another matches)."""
        for got in self._reads(ledger_ids, naming):
            yield LedgerRead(got.ledger_id, got.metadata, got.version)

    @zk_gen
    def read_many_stored(self, ledger_ids: Iterable[int]) -> Iterator[StoredLedgerRead]:
        """:meth:`read_many` with each znode's value as stored (what the walk read)."""
        yield from self._reads(ledger_ids, None)

    def _reads(self, ledger_ids: Iterable[int], naming: Collection[str] | None) -> Iterator[StoredLedgerRead]:
        marks = tuple(b.encode("utf-8") for b in naming) if naming is not None else None
        asked: deque[int] = deque()  # ids whose reads are out, in order

        def ids() -> Iterator[int]:
            for ledger_id in ledger_ids:
                asked.append(ledger_id)
                yield ledger_id

        for got in self._session.get_many(P.ledger_paths(ids(), self._cluster.manager, self._root)):
            ledger_id = asked.popleft()
            if got is None:
                yield StoredLedgerRead(ledger_id, None, -1, None)
                continue
            data, stat = got
            if marks is not None and not any(m in data for m in marks):
                continue
            try:
                md = self._decode(ledger_id, data, stat)
            except MetadataStoreError as exc:
                yield StoredLedgerRead(ledger_id, exc, -1, None)
                continue
            yield StoredLedgerRead(ledger_id, md, stat.version, data)

    def walk(
        self, *, naming: Collection[str] | None = None, progress: WalkProgress | None = None
    ) -> Iterator[LedgerRead]:
        """Every ledger's metadata in id order, streaming (:meth:`read_many` of
        :meth:`ids`): the one walk every command over all ledgers takes.  *progress*
        hears the number of ledgers first (:meth:`count`) and then how many are done."""
        if progress is None:
            yield from self.read_many(self.ids(), naming=naming)
            return
        progress.update(total=self.count())
        yield from self.read_many(_counting(self.ids(), progress), naming=naming)

    @zk_call
    def count(self) -> int:
        """How many ledgers there are, from the leaf znodes' child counts (no id is
        listed): the total a walk's progress shows."""
        manager = self._cluster.manager
        top = self._session.children_or_empty(self._root)
        if manager == P.FLAT:
            return sum(1 for name in top if P.is_ledger_parent_name(name, P.FLAT))
        leaves: list[str] = []
        if manager in (P.HIERARCHICAL, P.LEGACY_HIERARCHICAL):
            legacy = [n for n in top if len(n) == 2 and P.is_ledger_parent_name(n, P.LEGACY_HIERARCHICAL)]
            leaves += self._leaf_parents(legacy, depth=3)
        if manager in (P.HIERARCHICAL, P.LONG_HIERARCHICAL):
            long_tops = [n for n in top if len(n) == 3 and P.is_ledger_parent_name(n, P.LONG_HIERARCHICAL)]
            leaves += self._leaf_parents(long_tops, depth=5)
        return sum(got[1].numChildren for got in self._session.get_many(leaves) if got is not None)

    def _leaf_parents(self, tops: list[str], depth: int) -> list[str]:
        """The znodes whose children are ledger leaves (``L####``), ``depth`` levels down."""
        level = [[t] for t in tops]
        for _ in range(depth - 2):
            level = [
                prefix + [name]
                for prefix in level
                for name in self._session.children_or_empty(self._session.path(*prefix))
                if _DIGITS4.fullmatch(name)
            ]
        return [self._session.path(*prefix) for prefix in level]

    @zk_gen
    def ids(self) -> Iterator[int]:
        """Every ledger id, ascending, walking the hierarchy one level at a time."""
        for rng in self.ranges():
            yield from rng.ledgers  # a SortedIds: ascending already

    @zk_gen
    def ranges(self, *, watched: bool = False) -> Iterator[LedgerRange]:
        """Every ledger id by leaf znode (one getChildren each, up to 10,000 ids), ascending;
        a range's ``end`` is the last id its leaf can hold (below the long layout's threshold
        in the combined hierarchical layout).  A missing ledgers root is
        :class:`ClusterNotFound`, as Java's iterator fails, never an empty listing: the
        bookie's garbage collector would take it for every ledger deleted.

        ``watched``: each znode's children as this store last listed them if a watch says
        they have not changed since (:class:`~.watched_children.WatchedChildren`; settled
        first, so the answer is what a fresh listing would give): a walk repeated, as the
        garbage collector's, asks ZooKeeper only for what changed."""
        listing = self._watched_listing() if watched else self._fresh_listing
        manager = self._cluster.manager
        try:
            top = listing(self._root, sorted, missing_ok=False)
        except NoNodeError:
            raise ClusterNotFound(f"no BookKeeper cluster at {self._root} on {self._session.hosts}") from None
        if manager == P.FLAT:
            ids = SortedIds(int(name[1:]) for name in top if P.is_ledger_parent_name(name, P.FLAT))
            yield LedgerRange(P.MAX_LEDGER_ID, ids)
            return
        if manager in (P.HIERARCHICAL, P.LEGACY_HIERARCHICAL):
            legacy = [n for n in top if len(n) == 2 and P.is_ledger_parent_name(n, P.LEGACY_HIERARCHICAL)]
            for end, ids in self._walk(listing, legacy, depth=3):
                if manager == P.HIERARCHICAL and end >= P.HIERARCHICAL_LONG_THRESHOLD:
                    ids = SortedIds(i for i in ids if i < P.HIERARCHICAL_LONG_THRESHOLD)
                    end = P.HIERARCHICAL_LONG_THRESHOLD - 1
                yield LedgerRange(end, ids)
        if manager in (P.HIERARCHICAL, P.LONG_HIERARCHICAL):
            long_tops = [n for n in top if len(n) == 3 and P.is_ledger_parent_name(n, P.LONG_HIERARCHICAL)]
            for end, ids in self._walk(listing, long_tops, depth=5):
                if manager == P.HIERARCHICAL and end - 9999 < P.HIERARCHICAL_LONG_THRESHOLD:
                    ids = SortedIds(i for i in ids if i >= P.HIERARCHICAL_LONG_THRESHOLD)
                yield LedgerRange(end, ids)

    @property
    def watched(self) -> WatchedChildren | None:
        """What watched walks keep (None before the first): its ``listed`` and ``reused``
        counts say how many znodes were asked for and how many answered from it."""
        return self._watched

    def _fresh_listing(self, path: str, parse: Callable[[list[str]], _T], missing_ok: bool = True) -> _T:
        session = self._session
        return parse(session.children_or_empty(path) if missing_ok else session.children(path))

    def _watched_listing(self) -> _Listing:
        """The kept listings' reader, settled (made once per store session, on first use)."""
        watched = self._watched
        if watched is None:
            watched = self._watched = WatchedChildren(self._session)
        watched.settle()
        return watched.listing

    def _walk(self, listing: _Listing, tops: list[str], depth: int) -> Iterator[tuple[int, SortedIds]]:
        """Depth-first, sorted walk of ``depth``-level ledger paths below the root: per leaf
        parent, the last id it can hold and the ids it holds."""
        session = self._session

        def descend(prefix: list[str]) -> Iterator[tuple[int, SortedIds]]:
            path = session.path(*prefix)
            if len(prefix) == depth - 1:
                base = int("".join(prefix)) * 10000
                yield base + 9999, listing(path, functools.partial(_leaf_ids, base))
                return
            for name in listing(path, _digit_names):
                yield from descend(prefix + [name])

        for top in tops:
            yield from descend([top])


class _Listing(Protocol):
    """How a walk reads a znode's children: ``parse(children)``; a missing znode has none,
    or is NoNodeError when not ``missing_ok``."""

    def __call__(self, path: str, parse: Callable[[list[str]], _T], missing_ok: bool = True) -> _T: ...


def _leaf_ids(base: int, names: list[str]) -> SortedIds:
    """A leaf parent's ledger ids (``base`` + each ``L####`` child's digits), packed: up to
    10,000 a leaf, a million in a walk, found and summed in C (a znode name holds no
    newline: ZooKeeper refuses control characters)."""
    return SortedIds(map(base.__add__, map(int, _LEAF4_LINE.findall("\n".join(names)))))


def _digit_names(names: list[str]) -> list[str]:
    """An inner level's four-digit children, sorted."""
    return sorted(name for name in names if _DIGITS4.fullmatch(name))


def _counting(ledger_ids: Iterable[int], progress: WalkProgress) -> Iterator[int]:
    """*ledger_ids*, telling *progress* of every thousand asked for."""
    n = 0
    for ledger_id in ledger_ids:
        yield ledger_id
        n += 1
        if n == _PROGRESS_STEP:
            progress.advance(n)
            n = 0
    progress.advance(n)
