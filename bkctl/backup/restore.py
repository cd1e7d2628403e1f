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
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from bkctl.wire.backup.archive import LedgerRecord, Manifest, read_data, unb64
from bkctl.wire.errors import ArchiveDamaged, ObjectMissing

from ..exitcodes import CONFLICT, FAILED, CommandError, describe, exit_code_for
from .catalog import load_manifest, require_archive
from .feed import ChunkFeed
from .journal import ClusterPlace, FilePlace, Journal
from .narrow import narrow
from .storage import ArchiveStorage
from .take import Progress, Selection, Silent

__all__ = ["restore_backup"]

#: entries (or bytes) added to a ledger per call: a chunk read from the archive, then added pipelined
_CHUNK_ENTRIES, _CHUNK_BYTES = 2000, 8 << 20
#: adds outstanding over all the ledgers written at once
_INFLIGHT = 768


@dataclass
class _Znode:
    path: str
    value: bytes
    what: str


def _records(storage: ArchiveStorage, manifest: Manifest) -> tuple[dict[int, LedgerRecord], dict[int, str]]:
    """Each ledger's record, and why for those whose record is missing or does not read."""
    records: dict[int, LedgerRecord] = {}
    damaged: dict[int, str] = {}
    for x in manifest.ledgers:
        if x.inline is not None:  # a ledger with no entries: its record in the manifest
            records[x.ledger_id] = x.inline
            continue
        try:
            records[x.ledger_id] = LedgerRecord.decode(storage.get(x.record), x.record)
        except ObjectMissing:
            damaged[x.ledger_id] = f"its record {x.record} is missing from the archive"
        except ArchiveDamaged as exc:
            damaged[x.ledger_id] = str(exc)
    return records, damaged


def _znodes(store, manifest: Manifest, ids: dict[int, int], records: dict[int, LedgerRecord]) -> list[_Znode]:
    """The Pulsar values to write, rewritten for ``ids``, parents before children."""
    from bkctl.wire.metadata import paths as P
    from bkctl.wire.pulsar.registry import schemas_base
    from bkctl.wire.pulsar.remap import remap_cursor_info, remap_managed_ledger_info, remap_schema_locator

    base = P.managed_ledgers_base(store.root)
    closed = {lid: (r.entries, r.payload_bytes) for lid, r in records.items() if r.state != "CLOSED"}
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


def _entries(storage: ArchiveStorage, record: LedgerRecord) -> Iterator[list[bytes]]:
    """The ledger's entries from the archive, checked, in chunks."""
    chunk: list[bytes] = []
    size = 0
    if not record.entries:  # no data object
        return
    with storage.open_read(record.data_object) as f:
        for _entry_id, payload in read_data(f, record.ledger_id, record.index_sha256):
            chunk.append(payload)
            size += len(payload)
            if len(chunk) >= _CHUNK_ENTRIES or size >= _CHUNK_BYTES:
                yield chunk
                chunk, size = [], 0
    if chunk:
        yield chunk


def _rewriter(record: LedgerRecord, ids: dict[int, int]) -> Callable[[bytes], bytes] | None:
    """How a cursor or schema ledger's entries change under ``ids`` (None: they do not)."""
    from bkctl.wire.pulsar.managed_ledger import COMPONENT_KEY, COMPONENT_SCHEMA, CURSOR_KEY
    from bkctl.wire.pulsar.remap import remap_position_info, remap_schema_entry

    if all(old == new for old, new in ids.items()):
        return None
    custom = record.custom_metadata
    remap = None
    if CURSOR_KEY in custom:
        remap = remap_position_info
    elif custom.get(COMPONENT_KEY) == COMPONENT_SCHEMA.encode():
        remap = remap_schema_entry
    if remap is None:
        return None
    chosen = remap

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
) -> dict[str, Any]:
    """Restore backup ``backup_id`` (default: the newest) of ``storage`` into ``store``'s cluster;
    ``progress`` (a context manager, entered once ``confirm`` has said yes) counts the bytes written.
    Nothing is written to ``storage``."""
    from bkctl.wire.metadata.errors import ValueExists

    from ..ops.metadata_backup import move_id_generator_past

    progress = progress or Silent()
    selection = selection or Selection()
    began = time.monotonic()
    require_archive(storage)
    manifest = narrow(load_manifest(storage, backup_id), selection)
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
    records, damaged = _records(storage, manifest)
    if damaged and not skip_damaged:
        lid, why = min(damaged.items())
        raise CommandError(
            f"ledger {lid} of backup {manifest.id} is damaged in the archive ({why}; {len(damaged)} damaged): "
            "nothing was written; --skip-damaged restores the rest without them",
            FAILED,
        )
    writable = len(store.registration.writable_bookies())
    widest = max((r.ensemble_size for r in records.values()), default=0)
    if widest > writable:
        raise CommandError(
            f"the backup has ledgers on {widest} bookies and the target has {writable} writable: "
            "start more bookies first",
            CONFLICT,
        )
    fresh = [lid for lid in records if lid not in journal.ids]
    if not remap:
        taken = [lid for lid in fresh if store.ledgers.exists(lid)]
        if taken:
            raise CommandError(
                f"ledger {taken[0]} exists in the target cluster ({len(taken)} of the backup's {len(records)} "
                "ledger ids are taken): restore into an empty cluster, or with --remap",
                CONFLICT,
            )
    if not remap:  # the values are known: each must be missing or already the same
        for z in _znodes(store, manifest, {}, records):
            current = _current(store, z)
            if current is not None and bytes(current) != z.value:
                raise CommandError(f"{z.what} exists in the target cluster with other metadata ({z.path})", CONFLICT)
    elif not journal.ids:  # the values depend on ids not drawn yet: each must be missing
        for z in _znodes(store, manifest, {}, records):
            if _current(store, z) is not None:
                raise CommandError(f"{z.what} exists in the target cluster ({z.path})", CONFLICT)
    pending = [lid for lid in records if lid not in journal.done]
    confirm(
        f"Restore backup {manifest.id} ({len(pending)} ledgers, {len(manifest.topics)} topics) "
        f"into {target_uri}{' under new ledger ids' if remap else ''}?"
    )
    for lid in fresh:  # the id each ledger gets, recorded before it is created
        journal.ids[lid] = store.ledger_ids.generate() if remap else lid
    if remap:  # a ledger named but not in the backup is named by an id no ledger has here either
        for lid in [*manifest.missing, *(u.ledger_id for u in manifest.unreadable), *damaged]:
            if lid not in journal.ids:
                journal.ids[lid] = store.ledger_ids.generate()
    journal.save()
    ids = dict(journal.ids)
    above = None
    if not remap and records:  # first: no ledger made meanwhile in the target is given a restored id
        above = move_id_generator_past(store, max(records))
    progress.update(total=sum(records[lid].payload_bytes for lid in pending))
    outcome = _restore_ledgers(store, bk, storage, records, pending, ids, journal, progress, parallel, skip_damaged)
    journal.save()
    damaged.update(outcome.damaged or {})
    if outcome.failure is not None:
        exc = outcome.failure
        held = _held(store, records, ids, journal, damaged)
        raise CommandError(f"{describe(exc)}; the restore stopped: {held}", exit_code_for(exc)) from exc
    written = 0
    for z in _znodes(store, manifest, ids, records):
        try:
            written += store.pulsar.restore_value(z.path, z.value)
        except ValueExists:
            what = f"{z.what} exists in the target cluster with other metadata ({z.path})"
            raise CommandError(what, CONFLICT) from None
    journal.doc["finished"] = _now()
    journal.save()
    return {
        "backup": manifest.id,
        "target": target_uri,
        "remap": remap,
        "selection": selection.to_json(),
        "ledgers": len(manifest.ledgers),
        "ledgers_written": len([lid for lid in pending if lid not in damaged]),
        "entries": outcome.entries,
        "bytes": outcome.bytes,
        "topics": len(manifest.topics),
        "schemas": len(manifest.schemas),
        "znodes_written": written,
        "missing_in_backup": manifest.missing,
        "unreadable_in_backup": [u.ledger_id for u in manifest.unreadable],
        "damaged": [{"ledger_id": lid, "why": why} for lid, why in sorted(damaged.items())],
        "ledger_ids": {str(k): v for k, v in sorted(ids.items())},
        "journal": place.where,
        "next_ledger_id_above": above,
        "seconds": round(time.monotonic() - began, 3),
    }


def _restore_ledgers(
    store,
    bk,
    storage: ArchiveStorage,
    records: dict[int, LedgerRecord],
    pending: list[int],
    ids: dict[int, int],
    journal: Journal,
    progress: Progress,
    parallel: int,
    skip_damaged: bool,
) -> _Outcome:
    """Write the ``pending`` ledgers.  A ledger whose copy turns out damaged is deleted again
    (never left open or half written); without ``skip_damaged`` the first one, like any other
    failure, stops the ledgers not begun yet (those under way finish)."""
    outcome = _Outcome(damaged={})
    damaged: dict[int, str] = {}
    # the adds outstanding at once stay under a bookie's queue however many ledgers are written
    inflight = max(16, _INFLIGHT // max(1, parallel))
    lock = threading.Lock()
    stop = threading.Event()

    def restore_one(old: int) -> None:
        if stop.is_set():
            return
        record = records[old]
        new = ids[old]
        if store.ledgers.exists(new):  # begun by a restore that was stopped: written again
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
        rewrite = _rewriter(record, ids)
        feed = ChunkFeed(lh, bk.timeout)
        n = size = 0
        try:
            for chunk in _entries(storage, record):
                if rewrite is not None:
                    chunk = [rewrite(e) for e in chunk]
                feed.add(chunk)  # returns once started: the next chunk is read meanwhile
                n += len(chunk)
                size += sum(map(len, chunk))
                progress.advance(sum(map(len, chunk)))
            feed.finish()  # every entry acknowledged before the ledger is closed
            lh.close()
        except (ArchiveDamaged, ObjectMissing) as exc:
            _settle(feed)
            _drop(store, new)
            why = str(exc) if isinstance(exc, ArchiveDamaged) else f"{record.data_object} is missing from the archive"
            with lock:
                damaged[old] = why
            if not skip_damaged:
                stop.set()
            return
        except BaseException:
            _settle(feed)
            _drop(store, new)
            stop.set()
            raise
        with lock:
            outcome.entries += n
            outcome.bytes += size
        journal.finish_ledger(old)

    with progress, ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="restore") as pool:
        for future in [pool.submit(restore_one, lid) for lid in pending]:
            try:
                future.result()
            except Exception as exc:  # noqa: BLE001 - the first failure is told with what the cluster holds
                if outcome.failure is None:
                    outcome.failure = exc
    outcome.damaged = damaged
    if damaged and not skip_damaged and outcome.failure is None:
        lid, why = min(damaged.items())
        outcome.failure = ArchiveDamaged(f"ledger {lid} is damaged in the archive: {why}")
    return outcome


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


def _held(
    store, records: dict[int, LedgerRecord], ids: dict[int, int], journal: Journal, damaged: dict[int, str]
) -> str:
    """What the target holds of the backup after a restore that stopped, in words."""
    done = sorted(journal.done & set(records))
    text = (
        f"the cluster holds {len(done)} of the backup's {len(records) + len(damaged)} ledgers, whole and closed, "
        f"and none of its topics (written last); no ledger is left open or half written"
    )
    if damaged:
        text += f"; damaged in the archive: ledgers {', '.join(map(str, sorted(damaged)))} (--skip-damaged restores the rest)"
    return text + f"; the journal in {journal.place.where} lets the same command finish the job"


def _now() -> int:
    return int(time.time() * 1000)
