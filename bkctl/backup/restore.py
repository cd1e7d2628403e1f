"""``bkctl restore``: a backup's ledgers and Pulsar metadata written into a cluster.

Each ledger is created again -- with its own id, or with ``remap`` a new one drawn from
the target's id generator -- with its quorums, digest type, password and custom
metadata, on bookies the target's placement policy picks; its entries are added and it
is closed (a ledger that was open when backed up is restored closed, at the entries
copied).  Then the Pulsar values: each managed ledger (its ledger list renamed, the
open ledger's size filled in), its cursors, the schema locators and the
partitioned-topic metadata; with ``remap`` every ledger id they and the cursor and
schema ledgers' entries name is rewritten (:mod:`bkctl.wire.pulsar.remap`).

Nothing is written before everything is checked: a ledger id that is taken, or a
Pulsar znode that holds another value, refuses the restore with one line (exit 4).
A journal (:mod:`.journal`: in the target cluster, or ``--journal PATH``; never in the
archive, which a restore only reads) records the id each ledger gets (before it is
created) and which are done, so that a restore killed midway and run again finishes the
job: a ledger it had begun is deleted and written again, one it had finished is kept, and
no ledger is made twice.

A ledger whose copy in the archive is damaged (its record or data object missing, a CRC32C
or the index hash that does not match) is never left behind half written: the ledger being
written is deleted.  ``skip_damaged`` restores everything else and names it; without it the
restore stops there and says what the cluster holds.  ``selection`` restores one topic,
namespace or set of ledgers of a backup (:func:`narrow`).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from bkctl.wire.backup.archive import LedgerRecord, Manifest, unb64
from bkctl.wire.backup.data_read import PY_READER, ArchiveReader, read_runs
from bkctl.wire.errors import ArchiveDamaged, ObjectMissing
from bkctl.wire.fastpath import GENERAL, Twins

from ..exitcodes import CONFLICT, FAILED, CommandError, describe, exit_code_for
from .catalog import load_manifest, manifest_ledgers, require_archive
from .feed import ChunkFeed
from .idtable import IdMap
from .journal import ClusterPlace, FilePlace, Journal
from .narrow import Wanted, narrow
from .storage import ArchiveStorage
from .take import Progress, Selection, Silent, submitted

__all__ = ["LISTED_IDS", "DamagedLedger", "RestoreResult", "restore_backup", "write_remap_table"]

#: entries (or bytes) added to a ledger per call: a chunk read from the archive, then added pipelined
_CHUNK_ENTRIES, _CHUNK_BYTES = 2000, 8 << 20
#: a ledger's first chunk, each next one twice the last up to the above: a ledger's adds start
#: once this many entries are read, not 2000 (8 MiB, tens of ms under load, while the ledger
#: just begun -- and the one begun beside it, whose ledger ended at the same time -- has nothing
#: in flight)
_FIRST_CHUNK = 128
#: adds outstanding over all the ledgers written at once
_INFLIGHT = 768
#: new ledger ids drawn at once (``remap``)
_ID_BATCH = 1000
#: the ids given are in the result up to this many (all of them in ``remap_table``)
LISTED_IDS = 10_000
#: writable bookies connected to before the ledgers are written, at most (a sample of them in a
#: larger cluster: the others are connected to at their first add)
_CONNECT_AHEAD = 64


@dataclass(frozen=True)
class DamagedLedger:
    """A ledger of the backup not restored: its copy in the archive is damaged (``why``)."""

    ledger_id: int
    why: str


@dataclass(frozen=True)
class RestoreResult:
    """What :func:`restore_backup` did; ``--json`` prints its fields
    (:func:`bkctl.ops.results.to_json`)."""

    backup: str
    target: str
    remap: bool
    selection: Selection
    #: the backup's ledgers restored (selected), damaged ones included
    ledgers: int
    #: written whole by this run (those a stopped run had finished are not written again)
    ledgers_written: int
    entries: int
    bytes: int
    topics: int
    schemas: int
    znodes_written: int
    missing_in_backup: list[int]
    unreadable_in_backup: list[int]
    damaged: list[DamagedLedger]
    #: old -> new (as strings: JSON's keys), None above :data:`LISTED_IDS` ids
    ledger_ids: dict[str, int] | None
    ledger_ids_count: int
    remap_table: str | None
    #: where the journal is kept, in words
    journal: str
    next_ledger_id_above: int | None
    seconds: float


@dataclass
class _Znode:
    path: str
    value: bytes
    what: str


class _Scan(NamedTuple):
    """One pass over the backup's ledgers a restore writes: each ledger's id and its record
    (None: damaged, ``why``)."""

    ledger_id: int
    record: LedgerRecord | None
    why: str


def _scan(storage: ArchiveStorage, manifest: Manifest, wanted: Wanted, records: bool = True) -> Iterator[_Scan]:
    """The ledgers of ``manifest`` that are ``wanted``, in ascending ids, read a chunk at a time,
    each with its record (read from the archive unless in its line; not read at all unless
    ``records``, then ``record`` None and ``why`` empty)."""
    for x in manifest_ledgers(storage, manifest):
        if x.ledger_id not in wanted:
            continue
        if x.inline is not None:  # a ledger with no entries: its record in the manifest
            yield _Scan(x.ledger_id, x.inline, "")
        elif not records:
            yield _Scan(x.ledger_id, None, "")
        else:
            try:
                yield _Scan(x.ledger_id, LedgerRecord.decode(storage.get(x.record), x.record), "")
            except ObjectMissing:
                yield _Scan(x.ledger_id, None, f"its record {x.record} is missing from the archive")
            except ArchiveDamaged as exc:
                yield _Scan(x.ledger_id, None, str(exc))


@dataclass
class _Checked:
    """What the checking pass found, in counts and in sets as large as what is wrong (not as
    the backup): ``damaged`` (old id -> why), the open ledgers' sizes (``open_sizes``)."""

    ledgers: int = 0
    damaged: dict[int, str] = field(default_factory=dict)
    widest: int = 0
    highest: int = -1
    taken: list[int] = field(default_factory=list)
    taken_count: int = 0
    pending: int = 0
    pending_bytes: int = 0
    open_sizes: dict[int, tuple[int, int]] = field(default_factory=dict)


def _check(
    store, storage: ArchiveStorage, manifest: Manifest, wanted: Wanted, journal: Journal, remap: bool
) -> _Checked:
    """Every ledger to write read once before anything is written: its record, the widest
    ensemble, the ids taken in the target (without ``remap``: the target's ids listed beside
    the backup's, both ascending, not asked one a ledger)."""
    out = _Checked()
    taken = _Merge(store.ledgers.ids() if not remap else iter(()))
    for scan in _scan(storage, manifest, wanted):
        out.ledgers += 1
        lid, record = scan.ledger_id, scan.record
        if record is None:
            out.damaged[lid] = scan.why
            continue
        out.widest = max(out.widest, record.ensemble_size)
        out.highest = max(out.highest, lid)
        if record.state != "CLOSED":
            out.open_sizes[lid] = (record.entries, record.payload_bytes)
        if not remap and taken.has(lid) and lid not in journal.ids:
            out.taken_count += 1
            if not out.taken:
                out.taken.append(lid)
        if lid not in journal.done:
            out.pending += 1
            out.pending_bytes += record.payload_bytes
    return out


class _Merge:
    """Whether each of ascending ids is among ``ids`` (ascending too), read beside them."""

    def __init__(self, ids: Iterator[int]):
        self.ids = ids
        self.head: int | None = next(ids, None)

    def has(self, ledger_id: int) -> bool:
        while self.head is not None and self.head < ledger_id:
            self.head = next(self.ids, None)
        return self.head == ledger_id


def _znodes(store, manifest: Manifest, ids: Mapping[int, int], closed: dict[int, tuple[int, int]]) -> list[_Znode]:
    """The Pulsar values to write, rewritten for ``ids`` (``closed``: the entries and bytes of
    the ledgers that were open when backed up), parents before children.  None for a backup of
    ledgers alone (nor the Pulsar modules imported: some 4 ms of a restore's start)."""
    if not (manifest.topics or manifest.schemas or manifest.partitioned):
        return []
    from bkctl.wire.metadata import paths as P
    from bkctl.wire.pulsar.registry import schemas_base
    from bkctl.wire.pulsar.remap import remap_cursor_info, remap_managed_ledger_info, remap_schema_locator

    base = P.managed_ledgers_base(store.root)
    out = []
    for t in manifest.topics:
        path = P.managed_ledger_path(base, t.managed_ledger)
        out.append(_Znode(path, remap_managed_ledger_info(unb64(t.value_b64), ids, closed), t.managed_ledger))
        for cursor, value in sorted(t.cursors_b64.items()):
            out.append(_Znode(f"{path}/{cursor}", remap_cursor_info(unb64(value), ids), f"{t.managed_ledger} {cursor}"))
    schemas = schemas_base(base)
    for s in manifest.schemas:
        out.append(_Znode(f"{schemas}/{s.key}", remap_schema_locator(unb64(s.value_b64), ids), f"schema {s.key}"))
    for p in manifest.partitioned:
        out.append(_Znode(P.partitioned_topic_path(base, p.key), unb64(p.value_b64), f"partitioned topic {p.key}"))
    return out


def _current(store, z: _Znode) -> bytes | None:
    """What the target holds at ``z.path`` (None: nothing), read through the Pulsar manager."""
    from bkctl.wire.metadata import paths as P
    from bkctl.wire.pulsar.registry import schemas_base

    base = P.managed_ledgers_base(store.root)
    schemas = schemas_base(base)
    partitioned = P.partitioned_topic_path(base, "")
    if z.path.startswith(schemas + "/"):
        got = store.pulsar.schema_locator(schemas, z.path[len(schemas) + 1 :])
        return None if got is None else got.value
    if z.path.startswith(partitioned):
        got = store.pulsar.partitioned_topic(base, z.path[len(partitioned) :])
        return None if got is None else got.value
    name = z.path[len(base) + 1 :]
    parts = name.split("/")
    is_cursor = len(parts) >= 5 and parts[-2] != "persistent"
    ml_name = "/".join(parts[:-1]) if is_cursor else name
    stored = store.pulsar.managed_ledger(base, ml_name, cursors=is_cursor)
    if stored is None:
        return None
    return stored.cursors.get(parts[-1]) if is_cursor else stored.value


def _entries(storage: ArchiveStorage, record: LedgerRecord, reader: ArchiveReader = PY_READER) -> Iterator[list[bytes]]:
    """The ledger's entries from the archive, checked (``reader``: the twin selector's), in
    chunks (:data:`_FIRST_CHUNK` entries, then each twice the last, up to
    :data:`_CHUNK_ENTRIES` or :data:`_CHUNK_BYTES`).  A run of entries read that reaches
    neither limit joins the chunk whole; only one that does is cut entry by entry."""
    chunk: list[bytes] = []
    size = 0
    limit = _FIRST_CHUNK
    if not record.entries:  # no data object
        return
    with storage.open_read(record.data_object) as f:
        for run in read_runs(f, record.ledger_id, record.index_sha256, reader, record.data_size):
            if len(chunk) + len(run.payloads) < limit and size + run.size < _CHUNK_BYTES:
                chunk += run.payloads
                size += run.size
                continue
            for payload in run.payloads:
                chunk.append(payload)
                size += len(payload)
                if len(chunk) >= limit or size >= _CHUNK_BYTES:
                    yield chunk
                    chunk, size = [], 0
                    limit = min(2 * limit, _CHUNK_ENTRIES)
    if chunk:
        yield chunk


def _rewriter(record: LedgerRecord, ids: Mapping[int, int], remap: bool) -> Callable[[bytes], bytes] | None:
    """How a cursor or schema ledger's entries change under ``ids`` (None: they do not, as
    without ``remap``, where every ledger keeps its id)."""
    from bkctl.wire.pulsar.managed_ledger import COMPONENT_KEY, COMPONENT_SCHEMA, CURSOR_KEY
    from bkctl.wire.pulsar.remap import remap_position_info, remap_schema_entry

    if not remap:
        return None
    custom = record.custom_metadata
    change = None
    if CURSOR_KEY in custom:
        change = remap_position_info
    elif custom.get(COMPONENT_KEY) == COMPONENT_SCHEMA.encode():
        change = remap_schema_entry
    if change is None:
        return None
    chosen = change

    def rewrite(data: bytes) -> bytes:
        try:
            return chosen(data, ids)
        except Exception:  # noqa: BLE001 - an entry that does not decode is restored as it was
            return data

    return rewrite


@dataclass
class _Outcome:
    """What the ledger phase did: counts, damaged ledgers (old id -> why), and the failure
    that stopped it (None: it ran to the end)."""

    entries: int = 0
    bytes: int = 0
    #: ledgers written whole
    ledgers: int = 0
    damaged: dict[int, str] | None = None
    failure: BaseException | None = None


def restore_backup(
    store,
    bk,
    storage: ArchiveStorage,
    target_uri: str,
    *,
    backup_id: str | None = None,
    remap: bool = False,
    confirm: Callable[[str], None] = lambda question: None,
    parallel: int = 4,
    progress: Progress | None = None,
    skip_damaged: bool = False,
    selection: Selection | None = None,
    journal_path: str | None = None,
    remap_table: str | None = None,
    twins: Twins = GENERAL,
) -> RestoreResult:
    """Restore backup ``backup_id`` (default: the newest) of ``storage`` into ``store``'s cluster;
    ``progress`` (a context manager, entered once ``confirm`` has said yes) counts the bytes written.
    Nothing is written to ``storage``.  The ids given (old -> new) are in the result's
    ``ledger_ids`` up to :data:`LISTED_IDS` of them (else None, ``ledger_ids_count`` says how
    many), and all of them in ``remap_table`` (a JSON file) when it is given.  ``twins``: the
    process's record (the archive's entries decoded by its ``archive_reader``)."""
    from bkctl.wire.metadata.errors import ValueExists

    progress = progress or Silent()
    selection = selection or Selection()
    began = time.monotonic()
    require_archive(storage)
    # the bookies connected to in the background while the manifest, the journal and every
    # ledger's record are read: the first adds find them ready (their look-up and connect
    # were on the way of the first ledger's first entry: 100-200 ms under load)
    writable = store.registration.writable_bookies()
    bk.connect(random.sample(writable, min(len(writable), _CONNECT_AHEAD)))
    manifest = load_manifest(storage, backup_id, ledgers=False, notes=True)
    try:
        manifest, wanted = narrow(manifest, selection, manifest_ledgers(storage, manifest))
    except ArchiveDamaged as exc:
        raise CommandError(f"{exc} (the other backups are readable: backup list)", FAILED) from None
    if not store.cluster.exists():
        store.cluster.init()
    instance = store.cluster.instance_id()
    what = "" if selection.whole_cluster else f"|{sorted(selection.to_json().items())}"
    key = hashlib.sha256(f"{instance}|{manifest.id}|{remap}{what}".encode()).hexdigest()[:16]
    place = FilePlace(journal_path) if journal_path else ClusterPlace(store, key)
    journal = Journal.open(
        place,
        {"backup": manifest.id, "target": target_uri, "instance_id": instance, "remap": remap, "started": _now()},
        storage,
        key,
    )
    with contextlib.closing(journal):  # the table of ids let go however the restore ends
        # a ledger can have been begun before only if a restore stopped after giving ids
        resumed = len(journal.ids) > 0
        try:  # every ledger's record read once before anything is written, a chunk at a time
            checked = _check(store, storage, manifest, wanted, journal, remap)
        except ArchiveDamaged as exc:
            raise CommandError(f"{exc} (the other backups are readable: backup list)", FAILED) from None
        damaged = dict(checked.damaged)
        if damaged and not skip_damaged:
            lid, why = min(damaged.items())
            raise CommandError(
                f"ledger {lid} of backup {manifest.id} is damaged in the archive ({why}; {len(damaged)} damaged): "
                "nothing was written; --skip-damaged restores the rest without them",
                FAILED,
            )
        if checked.widest > len(writable):
            raise CommandError(
                f"the backup has ledgers on {checked.widest} bookies and the target has {len(writable)} writable: "
                "start more bookies first",
                CONFLICT,
            )
        intact = checked.ledgers - len(damaged)
        if checked.taken:
            raise CommandError(
                f"ledger {checked.taken[0]} exists in the target cluster ({checked.taken_count} of the backup's "
                f"{intact} ledger ids are taken): restore into an empty cluster, or with --remap",
                CONFLICT,
            )
        if not remap:  # the values are known: each must be missing or already the same
            for z in _znodes(store, manifest, {}, checked.open_sizes):
                current = _current(store, z)
                if current is not None and bytes(current) != z.value:
                    raise CommandError(
                        f"{z.what} exists in the target cluster with other metadata ({z.path})", CONFLICT
                    )
        elif not journal.ids:  # the values depend on ids not drawn yet: each must be missing
            for z in _znodes(store, manifest, {}, checked.open_sizes):
                if _current(store, z) is not None:
                    raise CommandError(f"{z.what} exists in the target cluster ({z.path})", CONFLICT)
        confirm(
            f"Restore backup {manifest.id} ({checked.pending} ledgers, {len(manifest.topics)} topics) "
            f"into {target_uri}{' under new ledger ids' if remap else ''}?"
        )
        unnamed: Iterator[int] = (  # the id each ledger gets, before it is created
            scan.ledger_id
            for scan in _scan(storage, manifest, wanted, records=False)
            if scan.ledger_id not in journal.ids and scan.ledger_id not in damaged
        )
        if remap:  # a ledger named but not in the backup is named by an id no ledger has here either
            named = dict.fromkeys([*manifest.missing, *(u.ledger_id for u in manifest.unreadable), *damaged])
            unnamed = itertools.chain(unnamed, (lid for lid in named if lid not in journal.ids))
        for batch in _batches(unnamed, _ID_BATCH):
            for old, new in zip(batch, store.ledger_ids.generate_many(len(batch)) if remap else batch, strict=True):
                journal.assign(old, new)
        journal.save()
        ids = journal.ids  # looked up in the journal's table, never copied
        above = None
        if not remap and checked.highest >= 0:  # first: no ledger made meanwhile in the target is given a restored id
            # (imported here, not for --remap: its dataclasses are some 3 ms of a restore's start)
            from ..ops.metadata_backup import move_id_generator_past

            above = move_id_generator_past(store, checked.highest)
        progress.update(total=checked.pending_bytes)
        todo = (
            s
            for s in _scan(storage, manifest, wanted)
            if s.ledger_id not in journal.done and s.ledger_id not in damaged
        )
        outcome = _restore_ledgers(
            store,
            bk,
            storage,
            todo,
            ids,
            journal,
            progress,
            parallel,
            skip_damaged,
            remap,
            resumed,
            twins.archive_reader,
        )
        damaged.update(outcome.damaged or {})
        if outcome.failure is not None:
            journal.save()
            failure = outcome.failure
            held = _held(checked.ledgers, journal, damaged)
            raise CommandError(f"{describe(failure)}; the restore stopped: {held}", exit_code_for(failure)) from failure
        try:
            znodes = _znodes(store, manifest, ids, checked.open_sizes)
        except BaseException:
            journal.save()  # the ledgers done kept, however the rest ends
            raise
        if znodes:  # the ledgers done kept before the values that name them are written
            journal.save()
        written = 0
        for z in znodes:
            try:
                written += store.pulsar.restore_value(z.path, z.value)
            except ValueExists:
                what = f"{z.what} exists in the target cluster with other metadata ({z.path})"
                raise CommandError(what, CONFLICT) from None
        journal.doc["finished"] = _now()
        journal.save()  # (with no Pulsar values, the ledgers done and the end in one save)
        if remap_table:
            write_remap_table(ids, remap_table)
        return RestoreResult(
            backup=manifest.id,
            target=target_uri,
            remap=remap,
            selection=selection,
            ledgers=checked.ledgers,
            ledgers_written=outcome.ledgers,
            entries=outcome.entries,
            bytes=outcome.bytes,
            topics=len(manifest.topics),
            schemas=len(manifest.schemas),
            znodes_written=written,
            missing_in_backup=manifest.missing,
            unreadable_in_backup=[u.ledger_id for u in manifest.unreadable],
            damaged=[DamagedLedger(lid, why) for lid, why in sorted(damaged.items())],
            ledger_ids=_listed(ids),
            ledger_ids_count=len(ids),
            remap_table=remap_table,
            journal=place.where,
            next_ledger_id_above=above,
            seconds=round(time.monotonic() - began, 3),
        )


def _restore_ledgers(
    store,
    bk,
    storage: ArchiveStorage,
    pending: Iterator[_Scan],
    ids: Mapping[int, int],
    journal: Journal,
    progress: Progress,
    parallel: int,
    skip_damaged: bool,
    remap: bool,
    resumed: bool,
    reader: ArchiveReader,
) -> _Outcome:
    """Write the ``pending`` ledgers (handed to the pool a window at a time, as their chunks
    are read).  A ledger whose copy turns out damaged is deleted again (never left open or
    half written); without ``skip_damaged`` the first one, like any other failure, stops the
    ledgers not begun yet (those under way finish).

    A writer hands a ledger whose every entry is started to a closer -- which waits for the
    last acknowledgements, closes it and marks it done -- and begins the next one meanwhile:
    waiting itself, it left the bookies only the other writers' adds while its ledger's last
    ones drained and the next was created, and none at all when the ledgers, of one size,
    ended together.  At most ``2 * parallel`` ledgers are begun and not closed."""
    outcome = _Outcome(damaged={})
    damaged: dict[int, str] = {}
    # the adds outstanding at once stay under a bookie's queue however many ledgers are written;
    # a ledger handed to a closer adds nothing more, its adds in flight only drain beside the
    # writers' (at most as many again: 1536 of 4 KiB, 6 MiB over the bookies, for a queue of 64 MiB)
    inflight = max(16, _INFLIGHT // max(1, parallel))
    lock = threading.Lock()
    stop = threading.Event()
    workers = max(1, parallel)
    open_ledgers = threading.BoundedSemaphore(2 * workers)

    def restore_one(scan: _Scan) -> Future | None:
        """Begin ``scan``'s ledger and start every entry: the closer's future (None: not begun)."""
        open_ledgers.acquire()  # released by the closer, or here if the ledger is not handed to one
        ending = None
        try:
            ending = begin_one(scan)
        finally:
            if ending is None:
                open_ledgers.release()
        return ending

    def begin_one(scan: _Scan) -> Future | None:
        if stop.is_set():
            return None
        old, record = scan.ledger_id, scan.record
        if record is None:  # (damaged since the checking pass read it)
            with lock:
                damaged[old] = scan.why
            if not skip_damaged:
                stop.set()
            return None
        new = ids[old]
        if resumed and store.ledgers.exists(new):  # begun by a restore that was stopped: written again
            store.ledgers.delete(new)
        lh = bk.create(
            record.ensemble_size,
            record.write_quorum,
            record.ack_quorum,
            digest_type=record.digest_type,
            password=record.password,
            custom_metadata=record.custom_metadata,
            ledger_id=new,
            max_inflight=inflight,
        )
        rewrite = _rewriter(record, ids, remap)
        feed = ChunkFeed(lh, bk.timeout)
        n = size = 0
        try:
            for chunk in _entries(storage, record, reader):
                if rewrite is not None:
                    chunk = [rewrite(e) for e in chunk]
                feed.add(chunk)  # returns once queued: the next chunk is read meanwhile
                n += len(chunk)
                size += sum(map(len, chunk))
                progress.advance(sum(map(len, chunk)))
        except (ArchiveDamaged, ObjectMissing) as exc:
            _settle(feed)
            _drop(store, new)
            why = str(exc) if isinstance(exc, ArchiveDamaged) else f"{record.data_object} is missing from the archive"
            with lock:
                damaged[old] = why
            if not skip_damaged:
                stop.set()
            return None
        except BaseException:
            _settle(feed)
            _drop(store, new)
            stop.set()
            raise
        return closers.submit(end_one, old, new, lh, feed, n, size)

    def end_one(old: int, new: int, lh: Any, feed: ChunkFeed, n: int, size: int) -> None:
        """Every entry of the ledger acknowledged, then closed and marked done (else deleted)."""
        try:
            try:
                feed.finish()  # every entry acknowledged before the ledger is closed
                lh.close()
            except BaseException:
                _settle(feed)
                _drop(store, new)
                stop.set()
                raise
            with lock:
                outcome.entries += n
                outcome.bytes += size
                outcome.ledgers += 1
            journal.finish_ledger(old)
        finally:
            open_ledgers.release()

    def told(future: Future) -> Any:
        """The future's result (None: it failed, the first failure kept in ``outcome``)."""
        try:
            return future.result()
        except Exception as exc:  # noqa: BLE001 - the first failure is told with what the cluster holds
            if outcome.failure is None:
                outcome.failure = exc
            return None

    closing: set[Future] = set()  # the closers' futures not told yet
    with (
        progress,
        ThreadPoolExecutor(max_workers=workers, thread_name_prefix="restore-close") as closers,
        ThreadPoolExecutor(max_workers=workers, thread_name_prefix="restore") as pool,
    ):  # (the writers' pool shut down first: no ledger handed to the closers after theirs)
        futures = submitted(pool, restore_one, _until(pending, stop), workers * 4)
        try:
            for future in futures:
                ending = told(future)
                if ending is not None:
                    closing.add(ending)
                for done in [f for f in closing if f.done()]:
                    closing.discard(done)
                    told(done)
        except ArchiveDamaged as exc:  # a chunk of the manifest damaged since the checking pass
            stop.set()
            if outcome.failure is None:
                outcome.failure = exc
        for ending in closing:
            told(ending)
    outcome.damaged = damaged
    if damaged and not skip_damaged and outcome.failure is None:
        lid, why = min(damaged.items())
        outcome.failure = ArchiveDamaged(f"ledger {lid} is damaged in the archive: {why}")
    return outcome


def _until(scans: Iterator[_Scan], stop: threading.Event) -> Iterator[_Scan]:
    """``scans`` until ``stop`` is set (no more chunks read once the restore stops)."""
    for scan in scans:
        if stop.is_set():
            return
        yield scan


def _listed(ids: IdMap) -> dict[str, int] | None:
    """The ids given, for the result, if there are at most :data:`LISTED_IDS` of them."""
    if len(ids) > LISTED_IDS:
        return None
    return {str(old): new for old, new in ids.pairs()}


def write_remap_table(ids: IdMap, path: str) -> None:
    """The ids given written to ``path`` as one JSON object (old -> new, ascending old ids),
    a line each, as they are read from the table."""
    import json

    with open(path, "w") as f:
        f.write("{")
        for n, (old, new) in enumerate(ids.pairs()):
            f.write(f"{',' if n else ''}\n {json.dumps(str(old))}: {new}")
        f.write("\n}\n")


def _batches(ids: Iterator[int], size: int) -> Iterator[list[int]]:
    """``ids`` in lists of ``size`` (the last shorter)."""
    while batch := list(itertools.islice(ids, size)):
        yield batch


def _settle(feed: ChunkFeed) -> None:
    """Wait for the adds still in flight of a ledger about to be dropped (their outcome no
    longer matters: nothing is written to it after its metadata is deleted)."""
    with contextlib.suppress(Exception):
        feed.finish()


def _drop(store, ledger_id: int) -> None:
    """Delete a ledger this restore began and could not finish (best effort: a rerun deletes it too)."""
    try:
        store.ledgers.delete(ledger_id)
    except Exception:  # noqa: BLE001, S110 - ZooKeeper gone: the journal has the ledger as begun, not done
        pass


def _held(ledgers: int, journal: Journal, damaged: dict[int, str]) -> str:
    """What the target holds of the backup's ``ledgers`` after a restore that stopped, in words."""
    text = (
        f"the cluster holds {len(journal.done)} of the backup's {ledgers} ledgers, whole and closed, "
        f"and none of its topics (written last); no ledger is left open or half written"
    )
    if damaged:
        text += f"; damaged in the archive: ledgers {', '.join(map(str, sorted(damaged)))} (--skip-damaged restores the rest)"
    return text + f"; the journal in {journal.place.where} lets the same command finish the job"


def _now() -> int:
    return int(time.time() * 1000)
