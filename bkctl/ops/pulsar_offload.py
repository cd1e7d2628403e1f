"""``bkctl pulsar offload list|verify|orphans``: Pulsar's tiered storage checked with no broker.

Every offloaded ledger is found through its managed ledger's ``OffloadContext`` (so each keeps
the bucket, endpoint or base path it was offloaded under), and read with
:mod:`bkctl.wire.pulsar.offload_reader`:

* :func:`offloads` -- per topic, each offloaded ledger: where, how many entries and bytes the
  managed ledger records, complete or not, BookKeeper copy deleted or not;
* :func:`verify_ledger` -- one ledger's objects against the managed ledger (entries, size),
  their user metadata (format version, role), the index's ledger metadata against the ledger's
  znode while BookKeeper still has it, every block's header, entry chain and padding (or every
  MapFile record), and with ``entries`` every entry decoded as a Pulsar entry, checksum and all;
* :class:`OrphanScan` -- objects in the buckets (and MapFiles under the base paths) that no
  managed ledger names, older than an age, and multipart uploads never completed, with what
  deleting them would free.

A store that refuses the credentials or does not answer stops the command (exit 6 / 5); a
ledger whose objects are missing or wrong is a finding of ``verify``, named.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from bkctl.wire.domain.topic_state import metadata_in_batches, resolve_topics
from bkctl.wire.domain.topic_state import topic_reader as reader
from bkctl.wire.errors import AccessDenied, Unreachable
from bkctl.wire.pulsar.errors import CorruptEntry, OffloadFormatError, OffloadMissing, OffloadUnlocated
from bkctl.wire.pulsar.offload_format import (
    check_blob_metadata,
    iter_block_entries,
    parse_mapfile_folder,
    parse_object_key,
)
from bkctl.wire.pulsar.offload_reader import OffloadedLedger
from bkctl.wire.pulsar.offload_store import OffloadLocation, OffloadSettings, location_of, store_for

__all__ = ["OffloadRecord", "OrphanScan", "offloads", "verify_ledger"]


@dataclass
class OffloadRecord:
    """One offloaded ledger of a topic, as its managed ledger records it."""

    topic: str
    managed_ledger: str
    location: OffloadLocation
    entries: int
    size: int
    ledger_info: Any = field(repr=False, default=None)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "managed_ledger": self.managed_ledger,
            "entries": self.entries,
            "size": self.size,
            "where": self.location.where(),
            **self.location.to_json(),
        }


def _managed_ledgers(store, base: str | None, topic: str | None) -> Iterator[Any]:
    topics = reader(store, base)
    if topic is not None:
        yield from resolve_topics(topics, topic)
        return
    yield from topics.read_all(topics.topics(), cursors=False)


def offloads(store, base: str | None = None, topic: str | None = None) -> Iterator[OffloadRecord]:
    """Every offloaded ledger (of ``topic``, or of every topic), in the managed ledgers' order."""
    for ml in _managed_ledgers(store, base, topic):
        for li in ml.info.ledgerInfo:
            location = location_of(li, ml.name)
            if location is not None:
                name = str(ml.topic) if ml.topic is not None else ml.name
                yield OffloadRecord(name, ml.name, location, li.entries, li.size, li)


# ---------------------------------------------------------------- verify


def _metadata_problems(index_md: Any, zk_md: Any) -> list[str]:
    """Where the offloaded copy's ledger metadata disagrees with the ledger's znode."""
    ours = {
        "ensemble size": index_md.ensemble_size,
        "write quorum": index_md.write_quorum,
        "ack quorum": index_md.ack_quorum,
        "last entry": index_md.last_entry_id,
        "length": index_md.length,
        "ensembles": tuple((first, tuple(members)) for first, members in index_md.ensembles),
        "custom metadata": dict(index_md.custom_metadata),
    }
    theirs = {
        "ensemble size": zk_md.ensemble_size,
        "write quorum": zk_md.write_quorum,
        "ack quorum": zk_md.ack_quorum,
        "last entry": zk_md.last_entry_id,
        "length": zk_md.length,
        "ensembles": tuple((first, tuple(members)) for first, members in zk_md.ensembles),
        "custom metadata": dict(zk_md.custom_metadata),
    }
    if zk_md.digest_type is not None:  # format-1 metadata keeps none
        from bkctl.wire.codecs.digest import DigestType

        ours["digest"] = DigestType.parse(index_md.digest_type)
        theirs["digest"] = zk_md.digest_type
    if index_md.state != "CLOSED":
        return [f"the offloaded copy's metadata says {index_md.state}, not CLOSED"]
    return [
        f"{what}: offloaded copy {ours[what]!r}, ZooKeeper {theirs[what]!r}"
        for what in ours
        if ours[what] != theirs[what]
    ]


def _entry_problem(data: Any, entry_id: int) -> str | None:
    from bkctl.wire.pulsar.entry import decode_entry

    try:
        decode_entry(bytes(data), verify=True)
    except CorruptEntry as exc:
        return f"entry {entry_id} does not decode as a Pulsar entry: {exc.reason}"
    return None


def verify_ledger(record: OffloadRecord, settings: OffloadSettings, zk_md: Any, entries: bool = False) -> list[str]:
    """The problems of one offloaded ledger (empty: it checks out); ``zk_md`` its znode's
    metadata while BookKeeper still has it (None: deleted).  A store that refuses access or does
    not answer raises (``AccessDenied``, ``Unreachable``)."""
    location = record.location
    if not location.complete:
        return []  # an offload under way (or abandoned): nothing a reader may use yet
    try:
        ledger = OffloadedLedger(location, settings)
        if location.is_filesystem:
            return _verify_mapfile(record, ledger, zk_md, entries)
        return _verify_objects(record, ledger, zk_md, entries)
    except OffloadUnlocated as exc:
        return [str(exc)]
    except OffloadMissing as exc:
        return [f"missing: {exc}"]
    except OffloadFormatError as exc:
        return [str(exc)]


def _counts(record: OffloadRecord, last_entry_id: int, length: int) -> list[str]:
    problems = []
    if last_entry_id + 1 != record.entries:
        problems.append(
            f"the offloaded copy holds {last_entry_id + 1} entries, the managed ledger says {record.entries}"
        )
    if length != record.size:
        problems.append(f"the offloaded copy's length is {length} bytes, the managed ledger says {record.size}")
    return problems


def _verify_objects(record: OffloadRecord, ledger: OffloadedLedger, zk_md: Any, entries: bool) -> list[str]:
    location, store = record.location, ledger.store
    problems = []
    heads = {}
    for key, role in ((location.data_key, "data"), (location.index_key, "index")):
        heads[role] = store.head(key)
        why = check_blob_metadata(heads[role].metadata, role, key)
        if why:
            problems.append(why)
    index = ledger.index()
    if index.data_object_length != heads["data"].size:
        problems.append(
            f"{location.data_key} is {heads['data'].size} bytes, its index says {index.data_object_length} (truncated?)"
        )
    if index.metadata is not None:
        problems += _counts(record, index.metadata.last_entry_id, index.metadata.length)
        if zk_md is not None:
            problems += _metadata_problems(index.metadata, zk_md)
    if problems:
        return problems
    expect = 0
    for block, length in index.block_spans():
        data = store.get(location.data_key, block.offset, block.offset + length)
        where = f"{location.data_key} block {block.part_id} at {block.offset}"
        for entry_id, payload in iter_block_entries(data, where, location.ledger_id):
            if entry_id != expect:
                return [f"{where}: entry {entry_id} where {expect} was due"]
            if entries:
                why = _entry_problem(payload, entry_id)
                if why:
                    problems.append(f"{where}: {why}")
            expect += 1
    if expect != record.entries:
        problems.append(f"the blocks hold entries 0..{expect - 1}, the managed ledger says {record.entries}")
    return problems


def _verify_mapfile(record: OffloadRecord, ledger: OffloadedLedger, zk_md: Any, entries: bool) -> list[str]:
    md, stored = ledger.mapfile()
    problems = _counts(record, md.last_entry_id, md.length)
    if zk_md is not None:
        problems += _metadata_problems(md, zk_md)
    if len(stored) != md.last_entry_id + 1:
        problems.append(f"the MapFile holds {len(stored)} entries, its metadata says {md.last_entry_id + 1}")
    if entries:
        problems += [why for entry_id, data in stored if (why := _entry_problem(data, entry_id))]
    return problems


def verify(
    store, settings: OffloadSettings, base: str | None = None, topic: str | None = None, entries: bool = False
) -> Iterator[dict[str, Any]]:
    """One row per offloaded ledger: the record's fields, ``ok`` and ``problems``."""
    records = list(offloads(store, base, topic))
    zk = metadata_in_batches(store, [r.location.ledger_id for r in records])
    for record in records:
        zk_md = next(zk)
        problems = verify_ledger(record, settings, zk_md, entries)
        yield {
            "topic": record.topic,
            "ledger_id": record.location.ledger_id,
            "where": record.location.where(),
            "complete": record.location.complete,
            "in_bookkeeper": zk_md is not None,
            "ok": not problems,
            "problems": problems,
        }


# ---------------------------------------------------------------- orphans


class OrphanScan:
    """Objects no managed ledger names and abandoned multipart uploads (see the module
    documentation), in every store a managed ledger's offload names, plus ``extra`` locations
    (a bucket no ledger names any more); iterating gives one row each.  Only what has the
    offloaders' key form is judged (``<uuid>-ledger-<id>``, its ``-index``, a streaming segment's
    ``<uuid>[-index]``, a MapFile folder ``<managed ledger>/<id>-<uuid>``): anything else in the
    bucket -- a backup archive, another tool's objects -- is not Pulsar's to call orphaned, and is
    counted apart.  Counts after: ``orphans``, ``orphan_bytes``, ``uploads``, ``upload_bytes``,
    ``young`` (unnamed, not old enough), ``named`` (objects a ledger names), ``foreign`` and
    ``foreign_bytes`` (not in Pulsar's key form, left alone), ``stores``."""

    def __init__(
        self,
        store,
        settings: OffloadSettings,
        older_than: float,
        base: str | None = None,
        extra: list[OffloadLocation] | None = None,
        now: float | None = None,
    ):
        self.records = list(offloads(store, base))
        self.settings = settings
        self.older_than = older_than
        self.extra = list(extra or [])
        self.now = time.time() if now is None else now
        self.orphans = self.orphan_bytes = self.uploads = self.upload_bytes = self.young = self.named = 0
        self.foreign = self.foreign_bytes = 0
        self.stores: list[str] = []

    def _named(self) -> tuple[set[str], set[str]]:
        keys: set[str] = set()
        mapfiles: set[str] = set()
        for r in self.records:
            loc = r.location
            keys |= {loc.data_key, loc.index_key, loc.uuid, f"{loc.uuid}-index"}
            mapfiles.add(loc.mapfile)
            for seg in r.ledger_info.offloadContext.offloadSegment:
                from bkctl.wire.pulsar.offload_format import uuid_of

                u = uuid_of(seg.uidMsb, seg.uidLsb)
                keys |= {u, f"{u}-index"}
        return keys, mapfiles

    def _places(self) -> list[OffloadLocation]:
        seen: dict[tuple[Any, ...], OffloadLocation] = {}
        for loc in [r.location for r in self.records] + self.extra:
            if loc.is_s3:
                seen.setdefault(("s3", loc.bucket, self.settings.endpoint or loc.endpoint, loc.region), loc)
            elif loc.is_filesystem:
                seen.setdefault(("fs", self.settings.filesystem_root or loc.prop("storageBasePath")), loc)
        return list(seen.values())

    def __iter__(self) -> Iterator[dict[str, Any]]:
        keys, mapfiles = self._named()
        cutoff = self.now - self.older_than
        for place in self._places():
            objects = store_for(place, self.settings)
            self.stores.append(objects.name)
            if place.is_filesystem:
                yield from self._mapfiles(objects, mapfiles, cutoff)
                continue
            for o in objects.list():
                if o.key in keys:
                    self.named += 1
                    continue
                if parse_object_key(o.key) is None:
                    self.foreign += 1
                    self.foreign_bytes += o.size
                    continue
                if o.modified > cutoff:
                    self.young += 1
                    continue
                self.orphans += 1
                self.orphan_bytes += o.size
                yield _orphan("object", objects.name, o.key, o.size, o.modified)
            for u in objects.uploads():
                if parse_object_key(u.key) is None:
                    self.foreign += 1
                    self.foreign_bytes += u.size
                    continue
                if u.initiated > cutoff:
                    self.young += 1
                    continue
                self.uploads += 1
                self.upload_bytes += u.size
                yield _orphan("upload", objects.name, u.key, u.size, u.initiated, u.upload_id)

    def _mapfiles(self, objects: Any, named: set[str], cutoff: float) -> Iterator[dict[str, Any]]:
        folders: dict[str, list[Any]] = {}
        for o in objects.list():
            folder, _, _name = o.key.rpartition("/")
            folders.setdefault(folder, []).append(o)
        for folder, files in sorted(folders.items()):
            if parse_mapfile_folder(folder) is None:
                self.foreign += len(files)
                self.foreign_bytes += sum(f.size for f in files)
                continue
            if folder in named:
                self.named += len(files)
                continue
            modified = max(f.modified for f in files)
            if modified > cutoff:
                self.young += 1
                continue
            size = sum(f.size for f in files)
            self.orphans += 1
            self.orphan_bytes += size
            yield _orphan("mapfile", objects.name, folder, size, modified)


def _orphan(
    kind: str, store: str, key: str, size: int, modified: float, upload_id: str | None = None
) -> dict[str, Any]:
    """One row of :class:`OrphanScan` (``ledger_id`` read off the key's form)."""
    parsed = parse_mapfile_folder(key) if kind == "mapfile" else parse_object_key(key)
    return {
        "kind": kind,
        "store": store,
        "key": key,
        "upload_id": upload_id,
        "size": size,
        "modified": _iso(modified),
        "ledger_id": parsed.ledger_id if parsed else None,
        "pulsar_key": parsed is not None,
    }


def _iso(seconds: float) -> str:
    from bkctl.wire.text import utc_iso

    return str(utc_iso(int(seconds * 1000)))


def refused(exc: BaseException) -> bool:
    """Whether ``exc`` is the store refusing or not answering (stops a command: exit 6 or 5)."""
    return isinstance(exc, (AccessDenied, Unreachable))
