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

A copy reads its ledger in batches sized by bytes (:func:`batch_entries`) and hands them over
to a job of a :class:`~.storing.Finisher`, which streams them into its data object and stores
that object (its fsync and rename, or its upload) and then its record, so that the thread
reads on, and begins its next ledger, while the writer writes -- the order a record follows
its data object is kept, and the manifest waits for every one.

At a cluster's scale (issue 74) nothing is held a ledger: the whole cluster is walked as the
store lists it (ascending ids, after the cursor ledgers), each ledger's manifest line goes into
a chunk of the manifest as soon as it and those before it are settled, and the previous
backup's lines are read a chunk at a time in step with the walk (:class:`_Previous`) -- for the
incremental check and for what was deleted since.  A ledger with no entries is recorded in its
line alone (no objects, no handle opened).
"""

from __future__ import annotations

import contextlib
import heapq
import os
import secrets
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from bkctl.wire.backup.archive import (
    CHUNK_LEDGERS,
    MARKER,
    ArchiveParts,
    ChunkRef,
    ChunkWriter,
    DataWriter,
    LedgerNote,
    LedgerRecord,
    Manifest,
    ManifestLedger,
    NoteWriter,
    TopicRecord,
    ValueRecord,
    b64,
    backup_folders,
    cluster_tag,
    ledger_object,
    py_archive_parts,
)
from bkctl.wire.errors import ArchiveDamaged
from bkctl.wire.fastpath import GENERAL, Twins

from .catalog import latest_manifest, manifest_ledgers, new_marker
from .storage import ArchiveStorage
from .storing import Abandoned, Finisher, Handover

if TYPE_CHECKING:
    from bkctl.wire.metadata.store import StoredLedgerRead

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
    #: every ledger of the cluster besides (``then`` the named ones): walked as the store lists them
    walk_all: bool = False
    #: the ledgers' znodes the plan read already (a ledger spec's probe), by id: the walk's
    #: reads of these (:func:`_reads`), not read a second time
    read: dict[int, StoredLedgerRead] = field(default_factory=dict)


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
    """The topics, schemas and ledgers ``selection`` names, read from the metadata store.
    A selection of ledgers alone reads no Pulsar metadata (nor imports its modules)."""
    from ..exitcodes import USAGE, CommandError
    from ..wire.domain.ledger_plan import SpecError, parse_ledger_spec, resolve_spec_read

    out = _Plan()
    cursor_ledgers: list[int] = []
    named: list[int] = []
    if selection.topics or selection.namespaces or selection.whole_cluster:
        cursor_ledgers, named = _plan_topics(store, selection, out)
    other: list[int] = []
    if selection.ledgers:
        try:
            resolved = resolve_spec_read(store, parse_ledger_spec(selection.ledgers))
        except SpecError as exc:
            raise CommandError(str(exc), USAGE) from None
        other, out.read = resolved.ids, resolved.reads
    out.walk_all = selection.whole_cluster
    out.first = list(dict.fromkeys(cursor_ledgers))
    seen = set(out.first)
    out.then = [i for i in dict.fromkeys(named + other) if i not in seen]
    return out


def _plan_topics(store, selection: Selection, out: _Plan) -> tuple[list[int], list[int]]:
    """The topics, schemas and partitioned topics ``selection`` names into ``out``; their
    cursor ledgers, and their data and schema ledgers."""
    from bkctl.wire.domain.topic_state import resolve_topics
    from bkctl.wire.domain.topic_state import topic_reader as reader
    from bkctl.wire.metadata import paths as P
    from bkctl.wire.pulsar.registry import schemas_base

    from ..exitcodes import USAGE, CommandError

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
    return cursor_ledgers, data_ledgers + schema_ledgers


#: bytes of entries a copy asks for at once (:func:`batch_entries`): a batch is written once
#: it is whole, so a copy's writer waits for its first batch, and after the backup's last byte
#: is read what is left to write is its writers' batches (storing.py) -- 4 MiB batches made
#: those ends longer than their hand-overs (a few hundred a GiB) cost
BATCH_BYTES = 1 << 20


def batch_entries(payload_bytes: int, entries: int) -> int:
    """Entries per batch read for a ledger of ``entries`` holding ``payload_bytes`` (0: not
    known, an open ledger): about :data:`BATCH_BYTES` of them, between 64 and 8192 entries.
    A batch is one hand-over from the client's thread to the copy's: small entries in
    batches of a fixed count cost more in hand-overs than in reading."""
    if entries <= 0 or payload_bytes <= 0:
        return 256
    return max(64, min(8192, BATCH_BYTES * entries // payload_bytes))


class _Slot:
    """A ledger's place in the manifest, in the walk's order: ``settled`` once its copy is
    stored or found (``line``), or it turned out missing or unreadable (``note``)."""

    __slots__ = ("ledger_id", "line", "note", "settled")

    def __init__(self, ledger_id: int):
        self.ledger_id = ledger_id
        self.line: ManifestLedger | None = None
        self.note: LedgerNote | None = None
        self.settled = False


class _Check(NamedTuple):
    """A ledger as the walk read it (``StoredLedgerRead``: its znode's value too) and its line
    in the previous backup."""

    read: Any
    previous: ManifestLedger | None


class _Copier:
    """Copies ledgers into the archive, each once (a copy already there is kept)."""

    def __init__(
        self,
        store,
        bk,
        storage: ArchiveStorage,
        progress: Progress,
        finisher: Finisher,
        parts: ArchiveParts = py_archive_parts,
    ):
        self.store, self.bk, self.storage, self.progress = store, bk, storage, progress
        self.parts = parts
        self.finisher = finisher
        self.cluster = cluster_tag(store.cluster.instance_id())

    def check_or_copy(self, check: _Check) -> _Slot:
        """The incremental check on metadata the pipelined walk read: a closed ledger whose
        copy the previous backup names (its line, read in step with the walk) or the archive
        holds is recorded as it is, without reading its metadata again one round trip at a
        time (366 ledgers/s at load 15, where the walk reads 8,000/s); anything else is copied."""
        read = check.read
        slot = _Slot(read.ledger_id)
        if not self._found(slot, read.metadata, check.previous):
            md = read.metadata
            walked = md is not None and not isinstance(md, Exception) and md.is_closed and read.raw is not None
            self.copy(read.ledger_id, slot, stored=read if walked else None)
        return slot

    def _found(self, slot: _Slot, md: Any, previous: ManifestLedger | None) -> bool:
        if md is None or isinstance(md, Exception) or not md.is_closed:
            return False
        ledger_id = slot.ledger_id
        record_name = ledger_object(ledger_id, self.cluster, md.ctoken, md.last_entry_id + 1) + ".json"
        if previous is not None and previous.record == record_name:  # the same copy: its line again
            line = ManifestLedger(
                ledger_id, record_name, previous.entries, previous.payload_bytes, False, previous.inline
            )
        elif md.last_entry_id >= 0 and self.storage.exists(record_name):
            record = LedgerRecord.decode(self.storage.get(record_name), record_name)
            line = ManifestLedger(ledger_id, record_name, record.entries, record.payload_bytes, False)
        else:
            return False
        self._finish(slot, line)
        self.progress.advance(line.payload_bytes)
        return True

    def copy(self, ledger_id: int, slot: _Slot | None = None, stored: Any = None) -> _Slot:
        """Copy ``ledger_id`` (its line in ``slot`` once stored).  ``stored``: a closed ledger's
        znode as the walk read it (``StoredLedgerRead``: its value, metadata and version; no
        second read, neither here nor to open its handle: most of a full backup's time for an
        empty ledger); else the znode is read here (an open ledger's as close to its copy as
        can be)."""
        from bkctl.wire.metadata.errors import NoSuchLedger

        slot = slot or _Slot(ledger_id)
        try:
            if stored is not None:
                raw, md, version = stored.raw, stored.metadata, stored.version
            else:
                raw, version = self.store.ledgers.read_bytes(ledger_id)
                md = self.store.ledgers.parse(raw, None)
        except NoSuchLedger:
            slot.note = LedgerNote(ledger_id, "missing")
            slot.settled = True
            return slot
        try:
            self._copy(slot, raw, md, version)
        except Exception as exc:  # noqa: BLE001 - sorted by unreadable(): the rest is raised
            why = unreadable(exc)
            if why is None:
                raise
            slot.note = LedgerNote(ledger_id, "unreadable", why)
            slot.settled = True
        return slot

    def _record(self, slot: _Slot, raw: bytes, md: Any, entries: int, stem: str) -> LedgerRecord:
        """The record of a copy of ``entries`` (no data object yet: the caller fills it in)."""
        return LedgerRecord(
            ledger_id=slot.ledger_id,
            cluster=self.cluster,
            ctoken=md.ctoken,
            entries=entries,
            payload_bytes=0,
            state=md.state.name,
            ensemble_size=md.ensemble_size,
            write_quorum=md.write_quorum,
            ack_quorum=md.ack_quorum,
            digest_type=md.digest_type.name if md.digest_type is not None else "CRC32C",
            password_b64=b64(md.password or b""),
            custom_metadata_b64={k: b64(v) for k, v in md.custom_metadata.items()},
            metadata_b64=b64(raw),
            data_object="",
            index_sha256="",
            data_size=0,
            copied_at=int(time.time() * 1000),
        )

    def _copy(self, slot: _Slot, raw: bytes, md: Any, version: int) -> None:
        ledger_id = slot.ledger_id
        # a closed ledger's copy is looked for before its handle is opened (a metadata read
        # and a handle a ledger: the incremental check of a cluster with nothing changed)
        handle = None if md.is_closed else self.bk.open(ledger_id)
        last = md.last_entry_id if handle is None else handle.read_tail().last
        entries = last + 1
        stem = ledger_object(ledger_id, self.cluster, md.ctoken, entries)
        record_name = stem + ".json"
        if not entries:  # nothing to copy: no objects, its record in its manifest line
            inline = self._record(slot, raw, md, 0, stem)
            self._finish(slot, ManifestLedger(ledger_id, record_name, 0, 0, True, inline))
            return
        if self.storage.exists(record_name):
            record = LedgerRecord.decode(self.storage.get(record_name), record_name)
            self._finish(slot, ManifestLedger(ledger_id, record_name, record.entries, record.payload_bytes, False))
            self.progress.advance(record.payload_bytes)
            return
        batch = batch_entries(md.length if md.is_closed else 0, entries)
        if handle is None:  # the walk's metadata read is the handle's; opened as its reads begin
            batches = self.bk.read_closed(ledger_id, md, version, 0, last, batch)
        else:
            batches = handle.read_range(0, last, batch=batch, allow_unconfirmed=True)
        record = self._record(slot, raw, md, entries, stem)
        handover = Handover()
        self.finisher.submit(lambda: self._write(slot, record, stem, handover))
        try:
            for got in batches:  # read on while the writer writes (storing.py)
                handover.put(got)
        except BaseException:
            handover.abandon()  # (its writer removes the partial object)
            raise
        handover.close()

    def _write(self, slot: _Slot, record: LedgerRecord, stem: str, handover: Handover) -> None:
        """In the finisher's thread: the batches ``handover`` gives written into the copy's data
        object ``stem.data``, stored (synced and renamed, or uploaded), then its record
        ``stem.json``, then its line."""
        ledger_id, entries = slot.ledger_id, record.entries
        try:
            with self.storage.writing(stem + ".data") as f:  # the partial object removed on a failure
                writer = DataWriter(f, ledger_id, self.storage.growing(f), self.parts)
                for got in handover:
                    before = writer.payload_bytes
                    writer.add_batch(got)
                    self.progress.advance(writer.payload_bytes - before)
                if writer.entries != entries:
                    raise RuntimeError(f"ledger {ledger_id}: read {writer.entries} entries of {entries}")
        except Abandoned:
            return  # the reading failed: the copy's thread tells it
        except BaseException as exc:
            handover.failed(exc)
            raise
        # the data object stored (synced, renamed or uploaded) before the record naming it
        record.payload_bytes = writer.payload_bytes
        record.data_object = stem + ".data"
        record.index_sha256 = writer.sha.hexdigest()
        record.data_size = writer.size
        self.storage.put(stem + ".json", record.encode())
        self._finish(slot, ManifestLedger(ledger_id, stem + ".json", entries, writer.payload_bytes, True))

    @staticmethod
    def _finish(slot: _Slot, line: ManifestLedger) -> None:
        slot.line = line
        slot.settled = True


def submitted(pool: Executor, fn: Callable[[_T], object], items: Iterable[_T], window: int) -> Iterator[Future]:
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


class _Previous:
    """The previous backup's ledger lines, read a chunk at a time in step with a walk in
    ascending ids (a merge-join): :meth:`find` a ledger's line, :meth:`passed` the ids gone
    by that were not asked for.  A chunk that does not read ends it (``damaged``): the ledgers
    past it are looked for in the archive, and no ledger is called deleted."""

    def __init__(self, storage: ArchiveStorage, manifest: Manifest | None):
        self.lines: Iterator[ManifestLedger] | None = None
        if manifest is not None:
            self.lines = manifest_ledgers(storage, manifest)
        self.head: ManifestLedger | None = None
        self.damaged = False

    def _next(self) -> ManifestLedger | None:
        if self.head is None and self.lines is not None:
            try:
                self.head = next(self.lines, None)
            except ArchiveDamaged:
                self.damaged, self.head = True, None
            if self.head is None:
                self.lines = None
        return self.head

    def find(self, ledger_id: int) -> ManifestLedger | None:
        """Ledger ``ledger_id``'s line (taken: not :meth:`passed`), None when there is none."""
        self.passed(ledger_id)
        head = self._next()
        if head is None or head.ledger_id != ledger_id:
            return None
        self.head = None
        return head

    def passed(self, ledger_id: float) -> list[int]:
        """The ids below ``ledger_id`` not asked for since (``ledger_id`` itself is kept)."""
        gone: list[int] = []
        while (head := self._next()) is not None and head.ledger_id < ledger_id:
            gone.append(head.ledger_id)
            self.head = None
        return gone


class _Lines:
    """A backup's ledger lines into its chunks in ascending ids, its notes into theirs: the
    cursor ledgers' (copied first, ``held``) merged with the walk's; with the previous backup's
    lines (``previous``: the same selection) the ledgers of it gone since noted ``deleted``
    (in chunks of their own, named by the head only if the previous backup read to its end)."""

    def __init__(self, writer: ChunkWriter, notes: NoteWriter, deleted: NoteWriter, previous: _Previous | None):
        self.writer, self.notes, self.deleted, self.previous = writer, notes, deleted, previous
        self.held: deque[_Slot] = deque()

    def hold(self, slots: Iterable[_Slot]) -> None:
        self.held = deque(sorted(slots, key=lambda s: s.ledger_id))

    def add(self, slot: _Slot) -> None:
        while self.held and self.held[0].ledger_id < slot.ledger_id:
            self._emit(self.held.popleft())
        self._emit(slot)

    def _emit(self, slot: _Slot) -> None:
        if slot.line is not None:
            self.writer.add(slot.line)
        elif slot.note is not None:
            self.notes.add(slot.note)
            if slot.note.kind != "unreadable":
                return  # gone: its line in the previous backup is passed (deleted)
        else:
            return
        if self.previous is not None:
            for gone in self.previous.passed(slot.ledger_id):
                self.deleted.add(LedgerNote(gone, "deleted"))
            self.previous.find(slot.ledger_id)  # this one is kept

    def finish(self) -> tuple[list[ChunkRef], list[ChunkRef]]:
        """The chunks of lines, and of notes (the deleted ones' only when known)."""
        while self.held:
            self._emit(self.held.popleft())
        known = False
        if self.previous is not None:
            for gone in self.previous.passed(float("inf")):
                self.deleted.add(LedgerNote(gone, "deleted"))
            known = not self.previous.damaged
        deleted = self.deleted.finish()
        if not known:  # not known past a damaged chunk (those chunks no head names: left over)
            self.deleted.counts["deleted"] = 0
            deleted = []
        return self.writer.finish(), self.notes.finish() + deleted


def _then_ids(store, work: _Plan, skip: set[int]) -> Iterator[int]:
    """The ledgers after the cursor ledgers, ascending: those named and, for the whole cluster,
    every ledger as the store lists them (ascending, streamed: not a list of a million)."""
    named = sorted(set(work.then) - skip)
    if not work.walk_all:
        yield from named
        return
    last = -1
    for lid in heapq.merge(store.ledgers.ids(), named):
        if lid != last and lid not in skip:
            yield lid
        last = lid


def _reads(store, ids: Iterable[int], known: dict[int, StoredLedgerRead]) -> Iterator[StoredLedgerRead]:
    """The znode of each of ``ids``, in order: those in ``known`` (the plan's reads, taken out)
    as the plan read them, the others read by one pipelined read as the walk goes."""
    order: deque[StoredLedgerRead | None] = deque()  # None: the store's next answer

    def unknown() -> Iterator[int]:
        for ledger_id in ids:
            got = known.pop(ledger_id, None)
            order.append(got)
            if got is None:
                yield ledger_id

    for read in store.ledgers.read_many_stored(unknown()):
        while (head := order.popleft()) is not None:
            yield head
        yield read
    yield from (read for read in order if read is not None)


def _walk(pool: Executor, copier: _Copier, reads: Iterable[Any], previous: _Previous, window: int, progress: Progress):
    """Each ledger of ``reads`` checked or copied, its :class:`_Slot` in order; the bytes to
    copy told to ``progress`` as the metadata says (closed ledgers) as the walk goes."""
    total = 0

    def checks() -> Iterator[_Check]:
        nonlocal total
        for n, read in enumerate(reads):
            md = read.metadata
            if md is not None and not isinstance(md, Exception) and md.is_closed:
                total += md.length
            if n % 1024 == 0:
                progress.update(total=total)
            yield _Check(read, previous.find(read.ledger_id))
        progress.update(total=total)

    for future in submitted(pool, copier.check_or_copy, checks(), window):
        yield future.result()


def _connect(bk, reads: Iterable[StoredLedgerRead]) -> None:
    """The bookies of the ledgers the plan read (those with entries to copy), looked up in one go
    and connected to while the backup gets ready -- not each looked up, then connected, at the
    first copy's first read."""
    from bkctl.wire.metadata.ledger import LedgerMetadata

    bookies: set[str] = set()
    for read in reads:
        md = read.metadata
        if isinstance(md, LedgerMetadata) and not (md.is_closed and md.last_entry_id < 0):
            bookies.update(md.bookies)
    if bookies:
        bk.connect(bookies)


def _ready(storage: ArchiveStorage, marker: bytes | None, backup_id: str) -> None:
    """A new archive's ``marker`` stored and the folders of the backup's chunks and manifest
    made (each durable), while the plan is read: not among the last steps, whose fsyncs the
    backup waits for one after the other (the last chunk, the manifest)."""
    if marker is not None:
        storage.put(MARKER, marker)
    storage.make_folders(backup_folders(backup_id))


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
    chunk_ledgers: int = CHUNK_LEDGERS,
    twins: Twins = GENERAL,
) -> Manifest:
    """Back ``selection`` up into ``storage``; the manifest written (its head: the ledger lines
    are in its chunks, :func:`~.catalog.manifest_ledgers`).  What it holds at once is bounded by
    ``parallel`` and ``chunk_ledgers``, not by the cluster's ledgers: the lines go into chunks
    as the walk settles them, the previous backup's are read a chunk at a time.  ``twins``: the
    implementations in use (:mod:`bkctl.wire.fastpath`; the command's, the general paths else)."""
    progress = progress or Silent()
    started = clock()
    marker = new_marker(storage, started)  # (checked now: stored while the plan is read)
    storage.clean_partial()
    previous = latest_manifest(storage)
    backup_id = new_backup_id(started)
    parallel = max(1, parallel)
    finisher = Finisher(2 * parallel)  # a copy's writer may finish while its thread reads the next
    finisher.submit(lambda: _ready(storage, marker, backup_id))
    try:
        work = plan(store, selection)
        same = previous is not None and previous.selection == selection.to_json()
        if not same:  # (an incremental backup may read no bookie at all: connected at its first copy)
            _connect(bk, work.read.values())
        finisher.settle()  # the marker stored before anything else is
        finisher.check()
    except BaseException:
        with contextlib.suppress(Exception):  # the plan's failure is the one told
            finisher.wait()
        raise
    copier = _Copier(store, bk, storage, progress, finisher, twins.archive_parts)
    lines = _Lines(
        ChunkWriter(backup_id, storage.put, chunk_ledgers),
        NoteWriter(backup_id, storage.put, chunk_ledgers),
        NoteWriter(backup_id, storage.put, chunk_ledgers, stem="deleted"),
        _Previous(storage, previous) if same else None,
    )
    first = sorted(set(work.first))
    # the plan's reads serve the walk only when nothing is copied between them (a ledger
    # deleted meanwhile is "missing", as the walk's own read finds it; a cursor ledger's
    # copy can take long): a selection of ledgers alone, the bench's
    known = work.read if not first else {}
    pending: deque[_Slot] = deque()
    try:
        with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="backup") as pool:
            reads = store.ledgers.read_many_stored(first)  # (few: looked for in the archive, not the chunks)
            held = list(_walk(pool, copier, reads, _Previous(storage, None), parallel * 16, progress))
            finisher.settle()  # the cursor ledgers' copies stored before any data ledger is read
            finisher.check()
            lines.hold(held)
            reads = _reads(store, _then_ids(store, work, set(first)), known)
            for slot in _walk(pool, copier, reads, _Previous(storage, previous), parallel * 16, progress):
                pending.append(slot)
                while pending and pending[0].settled:
                    lines.add(pending.popleft())
                finisher.check()
    except BaseException:
        with contextlib.suppress(Exception):  # the copies' failure is the one told
            finisher.wait()
        raise
    finisher.wait()  # every copy's objects stored before the manifest names them
    for slot in pending:
        lines.add(slot)
    chunks, notes = lines.finish()
    deleted: dict[str, list[Any]] = {"ledgers": [], "topics": []}
    if same and previous is not None:
        deleted["topics"] = sorted(
            {t.managed_ledger for t in previous.topics} - {t.managed_ledger for t in work.topics}
        )
    manifest = Manifest(
        id=backup_id,
        started=int(started * 1000),
        finished=int(clock() * 1000),
        source={
            "metadata_uri": source_uri,
            "instance_id": store.cluster.instance_id(),
            "host": os.uname().nodename,
        },
        selection=selection.to_json(),
        ledgers=[],
        topics=work.topics,
        schemas=work.schemas,
        partitioned=work.partitioned,
        missing=[],
        unreadable=[],
        deleted=deleted,
        previous=previous.id if previous is not None else None,
        chunks=chunks,
        counts={**lines.writer.counts, **lines.notes.counts, "deleted": lines.deleted.counts["deleted"]},
        notes=notes,
    )
    storage.put(manifest.name, manifest.encode())
    return manifest
