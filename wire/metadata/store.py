"""What the rest of the code needs from a metadata store: one typed interface.

:class:`~bkctl.wire.metadata.zk.ZKMetadataStore` implements it on ZooKeeper;
the tests' in-memory fake (``tests/support/fake_store.py``) implements it in
memory, and ``tests/unit/test_metadata_store_protocol.py`` and
``tests/integration/test_metadata_store_conformance.py`` check that both match
these signatures and behave alike.  As in Java, a store is a set of managers,
each for one job; every call is synchronous (the Twisted client runs them in
the reactor's thread pool) and fails with :mod:`bkctl.wire.metadata.errors`.

Watches (``watch_*``, ``on_session_lost``) call back from the store's own
thread on ZooKeeper (kazoo's: never block there, hand the work on) and from
the writer's call on the fake; the conformance suite checks that they fire
alike.  The cluster's own metadata (bootstrap, format and nuke, INSTANCEID,
LAYOUT: ``store.cluster``) and Pulsar's rack map (``store.racks``) are managers
like the others.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:
    from bkctl.wire.metadata.cookie import Cookie
    from bkctl.wire.metadata.errors import MetadataStoreError
    from bkctl.wire.metadata.layout import LedgerLayout
    from bkctl.wire.metadata.ledger import LedgerMetadata
    from bkctl.wire.metadata.serviceinfo import BookieServiceInfo

__all__ = [
    "AuditorElection",
    "ClusterManager",
    "CookieManager",
    "LedgerIdGenerator",
    "LedgerLock",
    "LedgerManager",
    "LedgerRange",
    "LedgerRead",
    "StoredLedgerRead",
    "MetadataStore",
    "PulsarMetadata",
    "RackMap",
    "RackMapDoc",
    "RegistrationManager",
    "RESTORE_CHUNK_BYTES",
    "RestoreJournalChunks",
    "RestoreJournals",
    "SavedRebalance",
    "StoredManagedLedger",
    "StoredValue",
    "UnderreplicatedMark",
    "UnderreplicationManager",
    "Unwatch",
    "WalkProgress",
    "registered_bookies",
    "stored_ctime",
    "with_znode_ctime",
]


class StoredValue(NamedTuple):
    """A value as the store holds it: where (the znode, for messages), its bytes, its version."""

    path: str
    value: bytes
    version: int


class StoredManagedLedger(NamedTuple):
    """A Pulsar managed ledger as stored: its ``ManagedLedgerInfo`` value and
    version, and its cursors' ``ManagedCursorInfo`` values by znode name (the
    URL-encoded cursor name); decoding them is :mod:`bkctl.wire.pulsar`'s."""

    path: str
    value: bytes
    version: int
    cursors: dict[str, bytes]


#: what a ``watch_*`` method returns: call it to stop the calls (idempotent)
Unwatch = Callable[[], None]


class UnderreplicatedMark(NamedTuple):
    """One ``urL`` marker: the ledger, the bookies missing replicas, the mark time (ms) if stored."""

    ledger_id: int
    replicas: tuple[str, ...]
    ctime: int | None


def with_znode_ctime(md: LedgerMetadata, znode_ctime: int) -> LedgerMetadata:
    """Metadata as read: a ledger written without a ``ctime`` shows its znode's
    (``parse_ledger_metadata(data, znode_ctime)`` applies it while decoding)."""
    return md if md.ctime is not None else replace(md, ctime=znode_ctime)


def stored_ctime(md: LedgerMetadata, znode_ctime: int, stored: LedgerMetadata | None) -> LedgerMetadata:
    """Metadata as written back: a ``ctime`` that :func:`with_znode_ctime` only filled
    in is not stored (Java keeps such ledgers without one)."""
    if md.ctime is not None and md.ctime == znode_ctime and (stored is None or stored.ctime is None):
        return replace(md, ctime=None)
    return md


class LedgerRange(NamedTuple):
    """A run of ledger ids as the metadata store lists them (Java's LedgerManager.LedgerRange):
    every ledger with metadata whose id is above the previous range's ``end`` and at most
    this ``end`` is in ``ledgers`` (a frozenset, or on ZooKeeper a
    :class:`~bkctl.wire.metadata.sorted_ids.SortedIds`: the same object each walk for as
    long as a watched walk keeps its leaf's listing)."""

    end: int
    ledgers: AbstractSet[int]


class LedgerRead(NamedTuple):
    """One ledger as a walk reads it: ``metadata`` is None for a ledger deleted
    meanwhile (``version`` -1) and the :class:`~.errors.MetadataStoreError` reading it
    would raise for metadata that does not decode."""

    ledger_id: int
    metadata: LedgerMetadata | MetadataStoreError | None
    version: int


class StoredLedgerRead(NamedTuple):
    """A :class:`LedgerRead` with the znode's value as stored (``raw``: None when ``metadata``
    is), for what keeps a ledger's metadata byte for byte (a backup's record)."""

    ledger_id: int
    metadata: LedgerMetadata | MetadataStoreError | None
    version: int
    raw: bytes | None


class WalkProgress(Protocol):
    """What a walk over every ledger tells as it goes (``bkctl``'s progress bars have it)."""

    def update(self, *, total: int) -> None:
        """How many ledgers the walk will read."""

    def advance(self, n: int = 1) -> None:
        """*n* more ledgers read."""


@runtime_checkable
class LedgerLock(Protocol):
    """bkctl's exclusive lock on appending to one ledger (Java has none: its writer
    is the one that created the ledger), held by the store's session: it goes with it.
    Blocking; at :func:`~.paths.append_lock_path`."""

    path: str

    def acquire(self, timeout: float = 0.0) -> bool:
        """Take it, waiting up to ``timeout`` seconds (0: not at all); False when it
        is held by someone else all that time."""

    def holders(self) -> list[str]:
        """Who holds it and who waits for it (their ``holder`` names), the holder first."""

    def release(self) -> None:
        """Let go (not held: nothing to do)."""


@runtime_checkable
class LedgerManager(Protocol):
    """Ledger metadata with compare-and-set on a version (Java's LedgerManager)."""

    def create(self, md: LedgerMetadata, ledger_id: int | None = None) -> tuple[int, int]:
        """Store a new ledger (an id is generated when none is given): ``(ledger_id, 0)``;
        :class:`~.errors.LedgerExists` when it is there."""

    def read(self, ledger_id: int) -> tuple[LedgerMetadata, int]:
        """``(metadata, version)``; :class:`~.errors.NoSuchLedger` when missing."""

    def update(self, ledger_id: int, md: LedgerMetadata, expected_version: int, *, unlock: bool = False) -> int:
        """Compare-and-set (version -1: unconditionally); the new version, or
        :class:`~.errors.MetadataVersionConflict` carrying the current metadata.  ``unlock``:
        the ledger's replication lock, which this store holds, goes in the same transaction
        (a replica move's last step); a lock gone already fails the write
        (:class:`~.errors.MetadataStoreError`), and a write that fails keeps the lock."""

    def delete(self, ledger_id: int, version: int = -1) -> None:
        """Delete (a missing ledger is fine; a version that moved on is a conflict)."""

    def exists(self, ledger_id: int) -> bool:
        """Whether the ledger has metadata."""

    def read_bytes(self, ledger_id: int) -> tuple[bytes, int]:
        """The stored value as it is (a dump's bytes) and its version;
        :class:`~.errors.NoSuchLedger` when missing."""

    def restore_bytes(self, ledger_id: int, data: bytes, overwrite: bool = False) -> int:
        """Write a stored value exactly as given (checked by decoding it:
        :class:`~.errors.MetadataStoreError` when it is not metadata), as Java's
        ``ledgermetadata -restorefromfile``: create the ledger, or with ``overwrite`` replace
        it (unconditionally); :class:`~.errors.LedgerExists` when it is there and not
        ``overwrite``.  The new version."""

    def ids(self) -> Iterator[int]:
        """Every ledger id, ascending."""

    def ranges(self, *, watched: bool = False) -> Iterator[LedgerRange]:
        """Every ledger id by ranges, ascending ``end`` (Java's getLedgerRanges): in the
        hierarchical layouts one range per leaf znode (up to 10,000 ledgers, listed with one
        getChildren), in the flat layout one; the last range's ``end`` is the highest id.
        ``watched``: the same answer, but a store that can keep what it listed while a
        watch says it holds (ZooKeeper's) asks again only for what changed since: for a
        walk repeated, as the bookie's garbage collector's."""

    def read_many(self, ledger_ids: Iterable[int], *, naming: Collection[str] | None = None) -> Iterator[LedgerRead]:
        """A :class:`LedgerRead` for each of ``ledger_ids``, in order, streaming;
        ``(ledger_id, None, -1)`` for one that is missing, the
        :class:`~.errors.MetadataStoreError` :meth:`read` would raise in place
        of metadata that does not decode.  Requests are pipelined: a walk over
        many ledgers waits a round trip per window of them, not per ledger.  With
        ``naming``, ledgers whose stored metadata cannot name one of those bookies
        are left out undecoded (callers still check the ones that are yielded)."""

    def read_many_stored(self, ledger_ids: Iterable[int]) -> Iterator[StoredLedgerRead]:
        """:meth:`read_many`, each read with the value as stored (the bytes the walk read:
        no second read a ledger for a copy that keeps them)."""

    def walk(
        self, *, naming: Collection[str] | None = None, progress: WalkProgress | None = None
    ) -> Iterator[LedgerRead]:
        """Every ledger, ascending: :meth:`read_many` of :meth:`ids`, the one walk every
        command over all ledgers takes; ``progress`` hears the total first, then how
        many are done."""

    def count(self) -> int:
        """How many ledgers there are (without listing them)."""

    def append_lock(self, ledger_id: int, holder: str) -> LedgerLock:
        """The ledger's append lock, to be taken as ``holder`` (a name others are shown)."""


@runtime_checkable
class LedgerIdGenerator(Protocol):
    def generate(self) -> int:
        """A new ledger id, never handed out before."""

    def generate_many(self, count: int) -> list[int]:
        """``count`` new ledger ids, never handed out before, ascending (drawn many a request
        where the store can: ``restore --remap`` draws an id a ledger)."""


@runtime_checkable
class RegistrationManager(Protocol):
    """Bookies' registrations (Java's RegistrationManager and RegistrationClient)."""

    def register(self, bookie_id: str, service_info: bytes | BookieServiceInfo = b"", readonly: bool = False) -> None:
        """Register the bookie (writable or read-only) for as long as the store's session lives."""

    def unregister(self, bookie_id: str, readonly: bool | None = None) -> None:
        """Remove its registration (both kinds when *readonly* is None)."""

    def writable_bookies(self) -> list[str]:
        """Registered writable bookies, sorted."""

    def readonly_bookies(self) -> list[str]:
        """Registered read-only bookies, sorted."""

    def all_bookies(self) -> list[str]:
        """Every bookie with a cookie, sorted."""

    def is_registered(self, bookie_id: str) -> bool:
        """Whether the bookie is registered (either kind)."""

    def service_info(self, bookie_id: str) -> BookieServiceInfo | None:
        """What the bookie published when it registered; None if it is not registered."""

    def service_infos(self, bookie_ids: list[str]) -> dict[str, BookieServiceInfo | None]:
        """:meth:`service_info` of each of ``bookie_ids``, read in one go (a client resolving
        the bookies of the ledgers it is about to read, before its first request)."""

    def session_of(self, bookie_id: str) -> int | None:
        """The id of the session that holds the bookie's registration (writable, else
        read-only); None when it is not registered.  A process that restarts a killed
        bookie tells the new registration from the one the killed process left until
        its session expires by this id."""

    def watch_writable_bookies(self, listener: Callable[[list[str]], None]) -> Unwatch:
        """Call ``listener(writable bookies, sorted)`` now and whenever the list changes, until
        the returned function is called (Java's ``RegistrationClient.watchWritableBookies``;
        changes close together may come as one call)."""

    def watch_readonly_bookies(self, listener: Callable[[list[str]], None]) -> Unwatch:
        """:meth:`watch_writable_bookies` for the read-only bookies."""

    def watch_all_bookies(self, listener: Callable[[list[str]], None]) -> Unwatch:
        """:meth:`watch_writable_bookies` for the bookies with a cookie (:meth:`all_bookies`):
        a cookie deleted (a decommission) or written."""


def registered_bookies(registration: RegistrationManager) -> set[str]:
    """Every registered bookie, writable or read-only (what the auditor counts as alive), but
    a read-only one ``bookied --salvage`` serves (its service info says so: a dead bookie's
    directories, there to be copied off): its copies are not live ones, and it is lost to
    the auditor and the replication workers, which read from it all the same
    (:mod:`bkctl.wire.client.rereplication`)."""
    alive = set(registration.writable_bookies())
    for bookie in registration.readonly_bookies():
        try:
            info = registration.service_info(bookie)
        except Exception:  # noqa: BLE001 - unreadable: counted as the bookie it says it is
            info = None
        if info is None or not info.is_salvage:
            alive.add(bookie)
    return alive


@runtime_checkable
class CookieManager(Protocol):
    """Bookie cookies with compare-and-set on their version."""

    def get(self, bookie_id: str) -> tuple[Cookie, int] | None:
        """``(cookie, version)``; None when there is none."""

    def put(self, bookie_id: str, cookie: Cookie | bytes, version: int | None = None) -> int:
        """Create (``version=None``: :class:`~.errors.CookieExists` if there is one) or
        compare-and-set (:class:`~.errors.CookieVersionConflict`); the new version."""

    def delete(self, bookie_id: str, version: int = -1) -> None:
        """Delete (:class:`~.errors.NoSuchCookie` when missing)."""


@runtime_checkable
class UnderreplicationManager(Protocol):
    """Autorecovery's shared state (Java's LedgerUnderreplicationManager)."""

    def ensure_layout(self) -> None:
        """Create what the auditor and the workers need below the cluster root (an existing
        under-replication LAYOUT is checked); :class:`~.errors.ClusterNotFound` without a cluster."""

    def is_enabled(self) -> bool:
        """Whether ledger replication is enabled."""

    def enable(self) -> bool:
        """Enable it; False if it already was."""

    def disable(self) -> bool:
        """Disable it; False if it already was."""

    def lost_bookie_recovery_delay(self) -> int | None:
        """The delay in seconds (None: never set)."""

    def set_lost_bookie_recovery_delay(self, seconds: int) -> None:
        """Set it (a ValueError unless a 32-bit integer)."""

    def watch_lost_bookie_recovery_delay(self, listener: Callable[[StoredValue | None], None]) -> Unwatch:
        """Call ``listener`` with the delay's node as stored (None: there is none) now and
        after every write to it -- a write of the same value too, with a new version (the
        auditor audits at once then) -- until the returned function is called."""

    def watch_enabled(self, listener: Callable[[bool], None]) -> Unwatch:
        """Call ``listener(enabled)`` now and whenever replication is enabled or disabled,
        until the returned function is called."""

    def check_ctime(self, check: str) -> int | None:
        """When the auditor's periodic ``check`` last ran, in ms (None: never): *check* is
        one of :data:`~bkctl.wire.metadata.paths.UR_CHECK_CTIMES` (Java's
        ``get{CheckAllLedgers,PlacementPolicyCheck,ReplicasCheck}CTime``)."""

    def set_check_ctime(self, check: str, ctime_ms: int) -> None:
        """Record when ``check`` last ran (Java's ``set...CTime``; ``forceauditchecks``
        sets it weeks back so that a starting auditor runs the check at once)."""

    def mark(self, ledger_id: int, missing_replicas: Iterable[str]) -> None:
        """Mark the ledger under-replicated, merging into an existing mark."""

    def get(self, ledger_id: int) -> UnderreplicatedMark | None:
        """The ledger's mark; None when it is not marked."""

    def marks(self) -> Iterator[UnderreplicatedMark]:
        """Every mark, ascending ledger ids."""

    def count(self) -> int:
        """How many ledgers are marked."""

    def lock_holder(self, ledger_id: int) -> str | None:
        """Who holds the ledger's replication lock (None: nobody, or unreadable)."""

    def acquire(self, holder: str, *, skip: Iterable[int] = ()) -> tuple[UnderreplicatedMark, int] | None:
        """Lock one marked ledger nobody holds: ``(mark, version)``; None when there is none."""

    def lock(self, ledger_id: int, holder: str) -> bool:
        """Take the ledger's replication lock whether it is marked or not (False: someone
        holds it): a replica move holds it so that no replication worker, Java's or ours,
        copies the same ledger meanwhile, and no bookie's over-replicated-ledger collection
        deletes the copy on its way.  It goes with this store's session; :meth:`release` it."""

    def mark_replicated(self, ledger_id: int, version: int) -> bool:
        """Remove the mark if still at *version* (False: re-marked, it stays); release the lock."""

    def mark_version(self, ledger_id: int) -> int | None:
        """The version of the ledger's mark (for :meth:`mark_replicated`); None when not marked."""

    def release(self, ledger_id: int) -> None:
        """Release this store's lock on the ledger."""

    def locks(self) -> dict[int, str | None]:
        """Every replication lock: ledger id -> holder."""

    def lock_ctimes(self) -> dict[int, int]:
        """Every replication lock: ledger id -> when it was taken (ms since the epoch:
        the znode's ctime, ZooKeeper's clock) -- since when a worker holds the ledger,
        all that can be known of one that keeps no status (Java's)."""

    def publish_daemon_status(self, name: str, value: bytes) -> None:
        """Write ``value`` as status node ``name`` (``auditor``, ``workers/<id>``: at most two
        levels) of this session: it goes when the session ends; one another session left
        is replaced.  Ours, not Java's: see :mod:`bkctl.wire.autorecovery.status`."""

    def daemon_statuses(self) -> dict[str, bytes]:
        """Every daemon's status node: name (as published) -> value."""


@runtime_checkable
class AuditorElection(Protocol):
    """The autorecovery auditor's election (Java's LedgerAuditorManager)."""

    def cast_vote(self, bookie_id: str) -> str:
        """Enter the election for as long as the store's session lives; the vote's name."""

    def votes(self) -> list[str]:
        """Vote names, the auditor's first."""

    def current(self) -> str | None:
        """The elected auditor's bookie id (None: no auditor)."""

    def publish(self, bookie_id: str) -> None:
        """Say who won (the election's own node, for people to read, as Java does)."""

    def withdraw_vote(self, name: str) -> None:
        """Delete this session's vote ``name`` (gone already: fine): the next voter takes
        over now, not when the session ends."""

    def watch_vote_gone(self, name: str, callback: Callable[[], None]) -> bool:
        """Call ``callback()`` once, when vote ``name`` goes or the connection drops (either
        way: look at the votes again); False, and no call, when it is already gone.  That the
        session ended (the votes went with it): :meth:`MetadataStore.on_session_lost`."""


@runtime_checkable
class PulsarMetadata(Protocol):
    """Pulsar's metadata beside the cluster's, read-only: the managed ledgers
    and cursors Pulsar's managed-ledger store keeps below ``base``
    (``/managed-ledgers`` beside ``/ledgers``: :func:`~.paths.managed_ledgers_base`)
    and its partitioned-topic metadata.  Values come back as stored; their
    formats are :mod:`bkctl.wire.pulsar.managed_ledger`'s."""

    def managed_ledger_names(self, base: str, tenant: str | None = None, namespace: str | None = None) -> list[str]:
        """Every managed ledger below ``base``, sorted: ``tenant/namespace/persistent/<encoded
        topic>``, and v1 ``tenant/cluster/namespace/persistent/...`` (whose namespace is
        ``cluster/namespace``); only those of ``tenant`` and ``namespace`` when given."""

    def managed_ledger(self, base: str, name: str, cursors: bool = True) -> StoredManagedLedger | None:
        """The managed ledger ``name`` (with its cursors unless *cursors* is False);
        None when there is none.  The cursors are read pipelined."""

    def managed_ledgers(self, base: str, names: Iterable[str], cursors: bool = True) -> Iterator[StoredManagedLedger]:
        """:meth:`managed_ledger` of each of ``names`` in order, streaming and read in
        pipelined steps (a walk over every topic); those that are gone are left out."""

    def partitioned_topic(self, base: str, name: str) -> StoredValue | None:
        """The partitioned-topic metadata (JSON) of the topic whose managed ledger would be
        ``name``, kept beside ``base`` (:func:`~.paths.partitioned_topic_path`); None when there is none."""

    def schema_ids(self, base: str) -> list[str]:
        """Every schema id with a locator below ``base`` (Pulsar's ``/schemas``), sorted:
        ``tenant/namespace/<encoded topic>``."""

    def schema_locator(self, base: str, schema_id: str) -> StoredValue | None:
        """The schema locator of ``schema_id`` (``base/<schema id>``); None when there is none."""

    def restore_value(self, path: str, value: bytes) -> bool:
        """Write one of Pulsar's znodes back as a backup holds it (``bkctl restore``: a
        managed ledger, a cursor, a schema locator, partitioned-topic metadata), its parents
        made where missing: True when written, False when it holds ``value`` already;
        :class:`~.errors.ValueExists` when it holds something else."""


@runtime_checkable
class ClusterManager(Protocol):
    """The cluster's own metadata: bootstrap and teardown (Java's ``initnewcluster``,
    ``metaformat``, ``nukeexistingcluster``), its INSTANCEID and its LAYOUT (which names
    the ledger manager every other manager lays its znodes out by)."""

    def exists(self) -> bool:
        """Whether the ledgers root exists."""

    def holds_cluster(self) -> bool:
        """Whether the root holds a BookKeeper cluster (its LAYOUT or INSTANCEID)."""

    def closest_cluster_root(self, budget: int = 500) -> str | None:
        """The cluster root nearby most like ours, for a "did you mean" (None: none found)."""

    def instance_id(self) -> str | None:
        """INSTANCEID (None when the node is missing; ClusterNotFound without a root)."""

    def set_instance_id(self, instance_id: str) -> None:
        """Write INSTANCEID (restoring a backup)."""

    def layout(self) -> LedgerLayout | None:
        """LAYOUT (None when the node is missing)."""

    def init(self) -> str:
        """Create the cluster (root, available/, readonly/, INSTANCEID, LAYOUT); its new
        instance id; ClusterExists when the root is there already."""

    def prepare_format(self) -> bool:
        """Create the root, available/ and readonly/ where missing; whether the root existed."""

    def format(self, confirm: Callable[[], bool] | None = None) -> bool:
        """Wipe ledgers, id generators, cookies and under-replication marks and locks, write
        a new INSTANCEID and LAYOUT (registrations stay); when the root existed and ``confirm``
        says no, nothing: False.  Otherwise whether the root existed."""

    def nuke(self, instance_id: str | None = None, force: bool = False) -> bool:
        """Delete the whole cluster, given its ``instance_id`` or ``force`` (exactly one);
        NukeRefused while bookies are registered or for an instance id that is not the
        cluster's.  False when there was no cluster."""


#: Pulsar's rack map as read: ``{group: {bookie: {"rack": ..., "hostname": ...}}}``
RackMapDoc = dict[str, dict[str, dict[str, Any]]]


@runtime_checkable
class RackMap(Protocol):
    """Pulsar's rack map (``/bookies`` at the ZooKeeper root, outside the ledgers root: every
    cluster on the server shares it), which rack-aware placement reads; its format is
    :mod:`bkctl.wire.metadata.racks`'s."""

    def read(self) -> tuple[RackMapDoc, int | None]:
        """The rack map and its version; ``({}, None)`` when there is none."""

    def write(self, doc: Mapping[str, Mapping[str, Mapping[str, Any]]], version: int | None) -> int:
        """Create (``version=None``) or compare-and-set the rack map: its new version
        (VersionConflict, holding the current map, when it changed meanwhile)."""

    def watch(self, listener: Callable[[RackMapDoc], None]) -> Unwatch:
        """Call ``listener(rack map)`` now and whenever it changes (``{}``: there is none)
        until the returned function is called.  A map that does not parse is logged and
        not told: the listener keeps the last good one (:meth:`read` raises on it)."""


@runtime_checkable
class SavedRebalance(Protocol):
    """bkctl's own, beside the cluster: the moves of a rebalance under way, kept so that a rerun
    after its kill goes on with them rather than planning again (a plan made from a half-moved
    cluster can move a replica the killed run had just placed: :mod:`bkctl.wire.rebalance.saved`).
    One at a time per cluster; any size (kept in parts under ZooKeeper's node limit)."""

    def read(self) -> bytes | None:
        """What :meth:`write` kept, or None (none, or one whose writing did not finish)."""

    def write(self, data: bytes) -> None:
        """Keep ``data`` in place of whatever was kept (it counts once wholly written)."""

    def clear(self) -> None:
        """Forget what was kept (nothing kept: nothing to do)."""

    def claim(self, data: bytes) -> tuple[bytes, int] | None:
        """Record a run as running, ``data`` its record, in a node of this session's (it goes
        with the session: a run killed leaves none once its session expires): None once
        recorded, else the record already there and its version (this session's too)."""

    def running(self) -> tuple[bytes, int] | None:
        """The running run's record and its version; None when none runs."""

    def update_running(self, data: bytes, version: int) -> bool:
        """Rewrite the record if still at ``version`` (a cancel asked): False when it changed or went."""

    def drop_running(self, version: int | None = None) -> bool:
        """Remove the record: this session's (``version`` None), or whoever's at ``version``
        (a run found dead): False when there was none to remove."""


#: the most bytes one chunk of a restore journal holds (:meth:`RestoreJournals.write_chunk`): a
#: write well under ZooKeeper's jute.maxbuffer (1 MiB by default) however large the journal
RESTORE_CHUNK_BYTES = 128 * 1024


class RestoreJournalChunks(NamedTuple):
    """A restore journal kept in chunks: its head and the chunks the head counts, in order."""

    head: bytes
    chunks: list[bytes]


@runtime_checkable
class RestoreJournals(Protocol):
    """bkctl's own, beside the cluster: what each ``bkctl restore`` into this cluster has done so
    far (the id each ledger gets, which are done), kept in the target and not in the archive,
    which a restore only reads; by key (one per backup and mode).

    A journal is kept in chunks of at most :data:`RESTORE_CHUNK_BYTES`, each written on its own
    (:meth:`write_chunk`), and a head that says how many chunks count (:meth:`write_head`): a
    chunk written past the count is not read until a head counts it.  The one-document form an
    older bkctl wrote (:meth:`read`, :meth:`write`) is still read; a head written under its key
    replaces it."""

    def read(self, key: str) -> bytes | None:
        """The one-document journal an older bkctl kept under ``key`` (:meth:`write`), or None
        (none, one whose writing did not finish, or one kept in chunks)."""

    def write(self, key: str, data: bytes) -> None:
        """Keep ``data`` under ``key`` in the one-document form an older bkctl wrote, in place of
        whatever was kept (it counts once wholly written)."""

    def read_chunks(self, key: str) -> RestoreJournalChunks | None:
        """The journal kept in chunks under ``key``, or None (none, the one-document form, or
        one whose head was never written)."""

    def write_chunk(self, key: str, index: int, data: bytes) -> None:
        """Keep chunk ``index`` (from 0) of journal ``key``, in place of any (ValueError when
        over :data:`RESTORE_CHUNK_BYTES`); read once a head counts it."""

    def write_head(self, key: str, head: bytes, chunks: int) -> None:
        """Keep the head of journal ``key`` and the number of its chunks that count (the first
        ``chunks``), in place of any head or one-document journal kept under ``key``."""

    def save(self, key: str, chunks: Mapping[int, bytes], head: bytes, count: int) -> None:
        """Keep ``chunks`` (index -> data) of journal ``key``, then its head counting ``count``:
        what :meth:`write_chunk` of each then :meth:`write_head` do, in one write where the
        store can (ZooKeeper: one multi, once the store has read or written the journal)."""

    def kept(self) -> list[str]:
        """The keys of the journals kept, sorted."""

    def clear(self, key: str) -> None:
        """Forget the journal ``key`` (none kept: nothing to do)."""


@runtime_checkable
class LostEntryRecords(Protocol):
    """bkctl's own, beside the cluster: per ledger, the entries a re-replication found no good
    copy of (:mod:`bkctl.wire.autorecovery.lostentries` keeps the format), so that workers and
    auditors do not try them for ever and ``autorecovery status`` and ``ledger fsck`` name them."""

    def read(self, ledger_id: int) -> bytes | None:
        """The ledger's record, or None."""

    def write(self, ledger_id: int, data: bytes) -> None:
        """Keep ``data`` as the ledger's record, in place of any."""

    def all(self) -> dict[int, bytes]:
        """Every ledger's record, by ledger id."""

    def forget(self, ledger_id: int) -> None:
        """Drop the ledger's record (none: nothing to do)."""


@runtime_checkable
class MetadataStore(Protocol):
    """A BookKeeper cluster's metadata: a session and its managers."""

    root: str
    #: the metadata service URI the store speaks to (for messages)
    uri: str

    # The managers are read-only members: a store's own classes (ZKAuditorElection...) then
    # satisfy them, as a mutable attribute's type would have to be the Protocol's exactly.
    @property
    def cluster(self) -> ClusterManager:
        """The store's ClusterManager."""

    @property
    def racks(self) -> RackMap:
        """The store's RackMap."""

    @property
    def ledgers(self) -> LedgerManager:
        """The store's LedgerManager."""

    @property
    def ledger_ids(self) -> LedgerIdGenerator:
        """The store's LedgerIdGenerator."""

    @property
    def registration(self) -> RegistrationManager:
        """The store's RegistrationManager."""

    @property
    def cookies(self) -> CookieManager:
        """The store's CookieManager."""

    @property
    def underreplication(self) -> UnderreplicationManager:
        """The store's UnderreplicationManager."""

    @property
    def auditor(self) -> AuditorElection:
        """The store's AuditorElection."""

    @property
    def pulsar(self) -> PulsarMetadata:
        """The store's PulsarMetadata."""

    @property
    def rebalance(self) -> SavedRebalance:
        """The store's SavedRebalance."""

    @property
    def restores(self) -> RestoreJournals:
        """The store's RestoreJournals."""

    @property
    def lost_entries(self) -> LostEntryRecords:
        """The store's LostEntryRecords."""

    @property
    def connected(self) -> bool:
        """Whether the session is up."""

    def start(self) -> MetadataStore:
        """Open the session (idempotent); returns the store."""

    def on_session_lost(self, callback: Callable[[], None]) -> Unwatch:
        """Call ``callback()`` whenever the store's session ends, expired or closed (its
        ephemeral nodes -- registrations, votes, locks -- went with it), until the returned
        function is called; a listener may be set before :meth:`start`."""

    def close(self) -> None:
        """End the session: its registrations, votes and locks go with it."""
