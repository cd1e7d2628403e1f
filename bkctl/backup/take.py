"""``bkctl backup``: a cluster's ledgers and Pulsar topics copied into an archive,
read-only towards the cluster (no fencing, no metadata written).

One topic is kept at one consistent point: its managed-ledger znode and cursor znodes
are read first (one pipelined read), then its cursor ledgers, then its data ledgers --
so every position a cursor names lies inside the entries copied.  A closed ledger is
copied whole; an open one up to its last add confirmed and the entries past it that an
ack quorum of their bookies holds (what ledger recovery would keep: a live cursor's
newest position is often there), read without fencing.  Ledgers are copied by a
bounded pool of threads (``parallel``); a copy already in the archive is not copied
again (the incremental backup), and the manifest, written last, says what the backup
holds.

A copy reads its ledger in batches sized by bytes (:func:`batch_entries`) and streams them
into its data object; storing that object (its fsync and rename, or its upload) and then
its record is handed to a :class:`_Finisher`, so that the thread reads its next ledger
meanwhile -- the order a record follows its data object is kept, and the manifest waits
for every one.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, TypeVar

from bkctl.wire.backup.archive import (
    DataWriter,
    LedgerRecord,
    Manifest,
    ManifestLedger,
    TopicRecord,
    UnreadableLedger,
    ValueRecord,
    b64,
    cluster_tag,
    ledger_object,
)

from .catalog import ensure_archive, latest_manifest
from .storage import ArchiveStorage

_T = TypeVar("_T")

__all__ = ["Selection", "locator_ledgers", "schema_of", "submitted", "take_backup", "topic_ledgers", "unreadable"]


@dataclass
class Selection:
    """What to back up: ``topics`` (names; a partitioned topic means its partitions),
    ``namespaces`` (``tenant/ns``), ``ledgers`` (a ledger spec); all empty: the whole cluster."""

    topics: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    ledgers: str | None = None

    @property
    def whole_cluster(self) -> bool:
        return not (self.topics or self.namespaces or self.ledgers)

    def to_json(self) -> dict[str, Any]:
        return {"topics": self.topics, "namespaces": self.namespaces, "ledgers": self.ledgers}


@dataclass
class _Plan:
    topics: list[TopicRecord] = field(default_factory=list)
    schemas: list[ValueRecord] = field(default_factory=list)
    partitioned: list[ValueRecord] = field(default_factory=list)
    #: cursor ledgers first (copied before the data ledgers: a consistent point)
    first: list[int] = field(default_factory=list)
    then: list[int] = field(default_factory=list)


class Progress(Protocol):
    """What the backup and restore tell as they go: ``update(total=n)`` bytes, ``advance(n)``
    (:meth:`bkctl.app.App.progress`'s bars are ones; :class:`Silent` says nothing)."""

    def __enter__(self) -> Progress: ...

    def __exit__(self, *exc: object) -> None: ...

    def update(self, **kw: Any) -> None: ...

    def advance(self, n: int = 1) -> None: ...


class Silent:
    """A :class:`Progress` that says nothing."""

    def __enter__(self) -> Silent:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def update(self, **kw: Any) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass


def new_backup_id(now: float) -> str:
    """``<UTC time to the millisecond>-<random>``: ids sort as the backups were taken."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f"{int(now * 1000) % 1000:03d}Z-" + secrets.token_hex(3)


def topic_ledgers(value: bytes, cursors: dict[str, bytes]) -> tuple[list[int], list[int]]:
    """The cursor ledgers and the data ledgers (compacted ledger included; those offloaded
    and deleted from BookKeeper left out) a managed ledger and its cursors name."""
    from bkctl.wire.pulsar.managed_ledger import parse_cursor_info, parse_managed_ledger_info

    data: list[int] = []
    cursor_ledgers: list[int] = []
    for li in parse_managed_ledger_info(value).ledgerInfo:
        if not (li.HasField("offloadContext") and li.offloadContext.bookkeeperDeleted):
            data.append(li.ledgerId)
    for raw in cursors.values():
        cursor = parse_cursor_info(raw)
        if cursor.cursorsLedgerId >= 0:
            cursor_ledgers.append(cursor.cursorsLedgerId)
        for prop in cursor.properties:
            if prop.name == "CompactedTopicLedger" and prop.value >= 0:
                data.append(prop.value)
    return cursor_ledgers, data


class TopicSchema(NamedTuple):
    """Where a topic's schema is: its schema id (the partitioned topic's, for a partition) and,
    for a partition, the partitioned topic's managed-ledger name."""

    schema_id: str
    partitioned: str | None


def schema_of(managed_ledger: str) -> TopicSchema | None:
    """The schema of the topic of ``managed_ledger`` (None: not a topic's name)."""
    from bkctl.wire.pulsar.managed_ledger import TopicName, encode_local_name

    try:
        topic = TopicName.from_managed_ledger(managed_ledger)
    except ValueError:
        return None
    whole = topic.partitioned_topic
    schema_id = f"{whole.tenant}/{whole.namespace}/{encode_local_name(whole.local)}"
    return TopicSchema(schema_id, whole.managed_ledger if whole != topic else None)


def locator_ledgers(value: bytes) -> list[int]:
    """The schema ledgers a schema locator names."""
    from bkctl.wire.proto import pulsar_schema_pb2 as spb

    locator = spb.SchemaLocator.FromString(value)
    return [e.position.ledgerId for e in [locator.info, *locator.index] if e.position.ledgerId >= 0]


def plan(store, selection: Selection) -> _Plan:
    """The topics, schemas and ledgers ``selection`` names, read from the metadata store."""
    from bkctl.wire.domain.topic_state import resolve_topics
    from bkctl.wire.domain.topic_state import topic_reader as reader
    from bkctl.wire.metadata import paths as P
    from bkctl.wire.pulsar.registry import schemas_base

    from ..exitcodes import USAGE, CommandError
    from ..wire.domain.ledger_plan import SpecError, parse_ledger_spec, resolve_spec

    out = _Plan()
    base = P.managed_ledgers_base(store.root)
    topics = reader(store, base)
    names: list[str] = []
    if selection.whole_cluster:
        names = store.pulsar.managed_ledger_names(base)
    for ns in selection.namespaces:
        tenant, _, namespace = ns.partition("/")
        if not tenant or not namespace:
            raise CommandError(f"{ns!r} is not a namespace (want tenant/namespace)", USAGE)
        names.extend(store.pulsar.managed_ledger_names(base, tenant, namespace))
    for name in selection.topics:
        names.extend(ml.name for ml in resolve_topics(topics, name))
    names = list(dict.fromkeys(names))
    cursor_ledgers: list[int] = []
    data_ledgers: list[int] = []
    schema_ids: list[str] = []
    partitioned: list[str] = []
    # (managed_ledgers leaves out those deleted meanwhile: matched by path)
    by_path = {s.path: s for s in store.pulsar.managed_ledgers(base, names)}
    for name in names:
        stored = by_path.get(P.managed_ledger_path(base, name))
        if stored is None:
            continue  # deleted meanwhile
        out.topics.append(TopicRecord(name, b64(stored.value), {k: b64(v) for k, v in stored.cursors.items()}))
        cursors_named, data_named = topic_ledgers(stored.value, stored.cursors)
        cursor_ledgers.extend(cursors_named)
        data_ledgers.extend(data_named)
        named = schema_of(name)
        if named is not None:
            schema_ids.append(named.schema_id)
            if named.partitioned is not None:
                partitioned.append(named.partitioned)
    schemas = schemas_base(base)
    if selection.whole_cluster:
        schema_ids = store.pulsar.schema_ids(schemas)
    schema_ledgers: list[int] = []
    for sid in dict.fromkeys(schema_ids):
        got = store.pulsar.schema_locator(schemas, sid)
        if got is None:
            continue
        out.schemas.append(ValueRecord(sid, b64(got.value)))
        schema_ledgers.extend(locator_ledgers(got.value))
    for name in dict.fromkeys(partitioned):
        got = store.pulsar.partitioned_topic(base, name)
        if got is not None:
            out.partitioned.append(ValueRecord(name, b64(got.value)))
    other: list[int] = []
    if selection.ledgers:
        try:
            other = resolve_spec(store, parse_ledger_spec(selection.ledgers))
        except SpecError as exc:
            raise CommandError(str(exc), USAGE) from None
    elif selection.whole_cluster:
        other = sorted(store.ledgers.ids())
    out.first = list(dict.fromkeys(cursor_ledgers))
    seen = set(out.first)
    out.then = [i for i in dict.fromkeys(data_ledgers + schema_ledgers + other) if i not in seen]
    return out


#: bytes of entries a copy asks for at once (:func:`batch_entries`)
BATCH_BYTES = 4 << 20


def batch_entries(payload_bytes: int, entries: int) -> int:
    """Entries per batch read for a ledger of ``entries`` holding ``payload_bytes`` (0: not
    known, an open ledger): about :data:`BATCH_BYTES` of them, between 64 and 8192 entries.
    A batch is one hand-over from the client's thread to the copy's: small entries in
    batches of a fixed count cost more in hand-overs than in reading."""
    if entries <= 0 or payload_bytes <= 0:
        return 256
    return max(64, min(8192, BATCH_BYTES * entries // payload_bytes))


class _Finisher:
    """Stores what the copies wrote -- a data object, then its record -- in threads of its
    own, at most ``slots`` at once (a copy waits for a slot), so that a copy's thread reads
    its next ledger while the last one's data object is synced or uploaded.  :meth:`wait`
    raises the first failure (an archive that cannot be written stops the backup)."""

    def __init__(self, slots: int):
        self.pool = ThreadPoolExecutor(max_workers=max(1, slots), thread_name_prefix="backup-store")
        self.slots = threading.BoundedSemaphore(max(1, slots))
        #: the jobs that failed: a job done well is forgotten (a million-ledger backup does
        #: not keep a million futures; the pool's shutdown waits for those under way)
        self.failed: list[Future[None]] = []
        self.lock = threading.Lock()

    def submit(self, job: Callable[[], None]) -> None:
        self.slots.acquire()

        def run() -> None:
            try:
                job()
            finally:
                self.slots.release()

        try:
            future = self.pool.submit(run)
        except BaseException:
            self.slots.release()
            raise
        future.add_done_callback(self._settled)

    def _settled(self, future: Future[None]) -> None:
        if future.cancelled() or future.exception() is not None:
            with self.lock:
                self.failed.append(future)

    def wait(self) -> None:
        """Wait for every job; the first failure raised (the others waited for too)."""
        try:
            self.pool.shutdown(wait=True)
        finally:
            for future in self.failed:
                future.result()


class _Copier:
    """Copies ledgers into the archive, each once (a copy already there is kept)."""

    def __init__(self, store, bk, storage: ArchiveStorage, progress: Progress, finisher: _Finisher):
        self.store, self.bk, self.storage, self.progress = store, bk, storage, progress
        self.finisher = finisher
        self.cluster = cluster_tag(store.cluster.instance_id())
        self.lock = threading.Lock()
        self.done: dict[int, ManifestLedger] = {}
        self.missing: list[int] = []
        self.unreadable: list[UnreadableLedger] = []

    def check_or_copy(self, read: Any) -> None:
        """The incremental check on metadata the pipelined walk read (``LedgerRead``): a
        closed ledger whose copy the archive holds is recorded as it is, without reading its
        metadata again one round trip at a time (366 ledgers/s at load 15, where the walk
        reads 8,000/s); anything else is copied."""
        if not self._found(read.ledger_id, read.metadata):
            self.copy(read.ledger_id)

    def _found(self, ledger_id: int, md: Any) -> bool:
        if md is None or isinstance(md, Exception) or not md.is_closed:
            return False
        record_name = ledger_object(ledger_id, self.cluster, md.ctoken, md.last_entry_id + 1) + ".json"
        if not self.storage.exists(record_name):
            return False
        record = LedgerRecord.decode(self.storage.get(record_name), record_name)
        self._finish(ManifestLedger(ledger_id, record_name, record.entries, record.payload_bytes, False))
        self.progress.advance(record.payload_bytes)
        return True

    def copy(self, ledger_id: int) -> None:
        from bkctl.wire.metadata.errors import NoSuchLedger

        try:
            raw, _version = self.store.ledgers.read_bytes(ledger_id)
            md = self.store.ledgers.parse(raw, None)
        except NoSuchLedger:
            with self.lock:
                self.missing.append(ledger_id)
            return
        try:
            self._copy(ledger_id, raw, md)
        except Exception as exc:  # noqa: BLE001 - sorted by unreadable(): the rest is raised
            why = unreadable(exc)
            if why is None:
                raise
            with self.lock:
                self.unreadable.append(UnreadableLedger(ledger_id, why))

    def _copy(self, ledger_id: int, raw: bytes, md: Any) -> None:
        # a closed ledger's copy is looked for before its handle is opened (a metadata read
        # and a handle a ledger: the incremental check of a cluster with nothing changed)
        handle = None if md.is_closed else self.bk.open(ledger_id)
        last = md.last_entry_id if handle is None else handle.read_tail().last
        entries = last + 1
        stem = ledger_object(ledger_id, self.cluster, md.ctoken, entries)
        record_name = stem + ".json"
        if self.storage.exists(record_name):
            record = LedgerRecord.decode(self.storage.get(record_name), record_name)
            self._finish(ManifestLedger(ledger_id, record_name, record.entries, record.payload_bytes, False))
            self.progress.advance(record.payload_bytes)
            return
        if handle is None:
            handle = self.bk.open(ledger_id)
        data = self.storage.writing(stem + ".data")
        f = data.__enter__()
        try:
            writer = DataWriter(f, ledger_id)
            if entries:
                batch = batch_entries(md.length if md.is_closed else 0, entries)
                for got in handle.read_range(0, last, batch=batch, allow_unconfirmed=not md.is_closed):
                    before = writer.payload_bytes
                    writer.add_batch(got)
                    self.progress.advance(writer.payload_bytes - before)
            if writer.entries != entries:
                raise RuntimeError(f"ledger {ledger_id}: read {writer.entries} entries of {entries}")
        except BaseException as exc:
            data.__exit__(type(exc), exc, exc.__traceback__)  # the partial object removed
            raise
        record = LedgerRecord(
            ledger_id=ledger_id,
            cluster=self.cluster,
            ctoken=md.ctoken,
            entries=entries,
            payload_bytes=writer.payload_bytes,
            state=md.state.name,
            ensemble_size=md.ensemble_size,
            write_quorum=md.write_quorum,
            ack_quorum=md.ack_quorum,
            digest_type=md.digest_type.name if md.digest_type is not None else "CRC32C",
            password_b64=b64(md.password or b""),
            custom_metadata_b64={k: b64(v) for k, v in md.custom_metadata.items()},
            metadata_b64=b64(raw),
            data_object=stem + ".data",
            index_sha256=writer.sha.hexdigest(),
            data_size=writer.size,
            copied_at=int(time.time() * 1000),
        )
        done = ManifestLedger(ledger_id, record_name, entries, writer.payload_bytes, True)

        def store() -> None:
            data.__exit__(None, None, None)  # the data object stored (synced, renamed or uploaded)...
            self.storage.put(record_name, record.encode())  # ...before the record naming it
            self._finish(done)

        self.finisher.submit(store)

    def _finish(self, entry: ManifestLedger) -> None:
        with self.lock:
            self.done[entry.ledger_id] = entry


def submitted(pool: Executor, fn: Callable[[_T], None], items: Iterable[_T], window: int) -> Iterator[Future]:
    """``fn`` of each ledger (its id, or its metadata read) submitted to ``pool``, at most
    ``window`` not yet taken by the caller (a cluster's million ledgers are not a million
    futures at once), in order."""
    pending: deque[Future] = deque()
    for item in items:
        pending.append(pool.submit(fn, item))
        if len(pending) >= window:
            yield pending.popleft()
    yield from pending


def unreadable(exc: BaseException) -> str | None:
    """Why a ledger cannot be copied, when ``exc`` is its bookies' answer (an entry no bookie
    holds, a digest that does not check, bookies that do not answer); None for what stops the
    whole backup (ZooKeeper gone, the archive not writable, the client closed)."""
    from bkctl.wire.client.errors import ClientClosed
    from bkctl.wire.errors import BKError, ObjectDenied, ObjectMissing, ObjectUnreachable
    from bkctl.wire.metadata.errors import ZKStoreError

    archive = (ObjectDenied, ObjectMissing, ObjectUnreachable)  # the archive's, not the ledger's
    if not isinstance(exc, BKError) or isinstance(exc, (ZKStoreError, ClientClosed, *archive)):
        return None
    return f"{type(exc).__name__}: {exc}"


def _estimate(store, ledger_ids: Iterable[int]) -> int:
    """The payload bytes the ledgers hold as their metadata says (closed ones; open ones count 0)."""
    total = 0
    for got in store.ledgers.read_many(list(ledger_ids)):
        md = got.metadata
        if md is not None and not isinstance(md, Exception) and md.is_closed:
            total += md.length
    return total


def take_backup(
    store,
    bk,
    storage: ArchiveStorage,
    selection: Selection,
    source_uri: str,
    *,
    parallel: int = 4,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.time,
) -> Manifest:
    """Back ``selection`` up into ``storage``; the manifest written."""
    progress = progress or Silent()
    started = clock()
    ensure_archive(storage, started)
    storage.clean_partial()
    previous = latest_manifest(storage)
    work = plan(store, selection)
    progress.update(total=_estimate(store, work.first + work.then))
    finisher = _Finisher(max(1, parallel))
    copier = _Copier(store, bk, storage, progress, finisher)
    try:
        with ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="backup") as pool:
            for phase in (work.first, work.then):
                reads = store.ledgers.read_many(phase)
                for future in submitted(pool, copier.check_or_copy, reads, max(1, parallel) * 16):
                    future.result()
    except BaseException:
        with contextlib.suppress(Exception):  # the copies' failure is the one told
            finisher.wait()
        raise
    finisher.wait()  # every copy's objects stored before the manifest names them
    ledger_ids = [lid for lid in work.first + work.then if lid in copier.done]
    deleted: dict[str, list[Any]] = {"ledgers": [], "topics": []}
    if previous is not None and previous.selection == selection.to_json():
        had = {x.ledger_id for x in previous.ledgers}
        deleted["ledgers"] = sorted(had - set(ledger_ids))
        deleted["topics"] = sorted(
            {t.managed_ledger for t in previous.topics} - {t.managed_ledger for t in work.topics}
        )
    manifest = Manifest(
        id=new_backup_id(started),
        started=int(started * 1000),
        finished=int(clock() * 1000),
        source={
            "metadata_uri": source_uri,
            "instance_id": store.cluster.instance_id(),
            "host": os.uname().nodename,
        },
        selection=selection.to_json(),
        ledgers=[copier.done[lid] for lid in ledger_ids],
        topics=work.topics,
        schemas=work.schemas,
        partitioned=work.partitioned,
        missing=sorted(set(copier.missing)),
        unreadable=sorted(copier.unreadable, key=lambda u: u.ledger_id),
        deleted=deleted,
        previous=previous.id if previous is not None else None,
    )
    storage.put(manifest.name, manifest.encode())
    return manifest
