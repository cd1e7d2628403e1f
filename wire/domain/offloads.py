"""Pulsar's offloaded ledgers as the managed ledgers record them (:func:`offloads`), and the
object store's orphan sweep (:class:`OffloadOrphanScan`): ``bkctl pulsar offload list``,
``verify`` and ``orphans`` call them and render.

What is Pulsar's in a bucket is told by the object alone: its key has the offloaders' form
(``<uuid>-ledger-<id>``, its ``-index``, a streaming segment's ``<uuid>[-index]``:
:func:`~bkctl.wire.pulsar.offload_format.parse_object_key`) or its user metadata is the
offloader's (:func:`~bkctl.wire.pulsar.offload_format.is_offloader_metadata`: asked of an object
whose key is not in that form, one HEAD request each, :data:`HEAD_REQUESTS` at once); a filesystem offload's MapFile folder by
its form ``<managed ledger>/<id>-<uuid>`` alone (the filesystem offloader writes no metadata).
Anything else -- a ``bkctl backup`` archive, another tool's objects -- is counted apart and never
called an orphan.  The rest is judged by the sweep's one rule, :func:`.orphans.judge`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ObjectMissing
from ..pulsar.offload_format import is_offloader_metadata, parse_mapfile_folder, parse_object_key
from ..pulsar.offload_store import OffloadLocation, OffloadRecord, OffloadSettings, record_of, store_for
from .orphans import Verdict, judge
from .topic_state import resolve_topics, topic_reader

if TYPE_CHECKING:
    from ..metadata.store import MetadataStore
    from ..objects import ObjectInfo, ObjectStore
    from ..pulsar.topics import ManagedLedger

__all__ = ["OffloadOrphan", "OffloadOrphanScan", "offloads"]

#: HEAD requests at once for the metadata of objects not in the key form (boto3's pool holds 32)
HEAD_REQUESTS = 16
#: objects of a listing judged at a time (a listing page of S3's is 1000)
LISTING_PAGE = 1000


def _managed_ledgers(store: MetadataStore, base: str | None, topic: str | None) -> Iterator[ManagedLedger]:
    topics = topic_reader(store, base)
    if topic is not None:
        yield from resolve_topics(topics, topic)
        return
    yield from topics.read_all(topics.topics(), cursors=False)


def offloads(store: MetadataStore, base: str | None = None, topic: str | None = None) -> Iterator[OffloadRecord]:
    """Every offloaded ledger (of ``topic``, or of every topic), in the managed ledgers' order."""
    for ml in _managed_ledgers(store, base, topic):
        name = str(ml.topic) if ml.topic is not None else ml.name
        for li in ml.info.ledgerInfo:
            record = record_of(li, ml.name, name)
            if record is not None:
                yield record


@dataclass(frozen=True)
class OffloadOrphan:
    """An object (or abandoned multipart upload, or MapFile folder) no managed ledger names."""

    #: ``object``, ``upload`` or ``mapfile``
    kind: str
    store: str
    key: str
    size: int
    #: seconds since the epoch (an upload's: when it was begun)
    modified: float
    upload_id: str | None = None
    #: the ledger its key names (None: a streaming segment's, or judged Pulsar's by its metadata)
    ledger_id: int | None = None
    #: whether its key has the offloaders' form (False: judged Pulsar's by its metadata)
    pulsar_key: bool = True

    def to_json(self) -> dict[str, Any]:
        from ..text import utc_iso

        return {
            "kind": self.kind,
            "store": self.store,
            "key": self.key,
            "upload_id": self.upload_id,
            "size": self.size,
            "modified": utc_iso(int(self.modified * 1000)),
            "ledger_id": self.ledger_id,
            "pulsar_key": self.pulsar_key,
        }


#: the store of one place (:func:`~bkctl.wire.pulsar.offload_store.store_for` by default)
StoreOf = Callable[[OffloadLocation, OffloadSettings], "ObjectStore"]


@dataclass
class OffloadOrphanScan:
    """Objects no managed ledger names and abandoned multipart uploads in every store a managed
    ledger's offload names, plus ``extra`` locations (a bucket no ledger names any more);
    iterating gives one :class:`OffloadOrphan` each.  What is Pulsar's is told as the module
    documentation says, and judged by :func:`.orphans.judge`.  Counts after: ``orphans``,
    ``orphan_bytes``, ``uploads``, ``upload_bytes``, ``young`` (unnamed, not old enough),
    ``named`` (objects a ledger names), ``foreign`` and ``foreign_bytes`` (not Pulsar's, left
    alone), ``stores``."""

    records: list[OffloadRecord]
    settings: OffloadSettings
    #: seconds
    older_than: float
    extra: list[OffloadLocation] = field(default_factory=list)
    #: seconds since the epoch (None: now)
    now: float | None = None
    store_of: StoreOf = store_for
    orphans: int = 0
    orphan_bytes: int = 0
    uploads: int = 0
    upload_bytes: int = 0
    young: int = 0
    named: int = 0
    foreign: int = 0
    foreign_bytes: int = 0
    stores: list[str] = field(default_factory=list)

    @classmethod
    def of_cluster(
        cls,
        store: MetadataStore,
        settings: OffloadSettings,
        older_than: float,
        base: str | None = None,
        extra: list[OffloadLocation] | None = None,
    ) -> OffloadOrphanScan:
        """The scan of every offloaded ledger of the cluster's managed ledgers."""
        return cls(list(offloads(store, base)), settings, older_than, list(extra or []))

    def _named(self) -> tuple[set[str], set[str]]:
        keys: set[str] = set()
        mapfiles: set[str] = set()
        for r in self.records:
            loc = r.location
            keys |= {loc.data_key, loc.index_key, loc.uuid, f"{loc.uuid}-index"}
            mapfiles.add(loc.mapfile)
            for u in r.segment_uuids:
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

    def _count(self, verdict: Verdict, size: int, items: int = 1) -> None:
        if verdict is Verdict.FOREIGN:
            self.foreign += items
            self.foreign_bytes += size
        elif verdict is Verdict.NAMED:
            self.named += items
        elif verdict is Verdict.YOUNG:
            self.young += 1

    def __iter__(self) -> Iterator[OffloadOrphan]:
        keys, mapfiles = self._named()
        cutoff = (time.time() if self.now is None else self.now) - self.older_than
        for place in self._places():
            objects = self.store_of(place, self.settings)
            self.stores.append(objects.name)
            if place.is_filesystem:
                yield from self._mapfiles(objects, mapfiles, cutoff)
            else:
                yield from self._objects(objects, keys, cutoff)

    def _listing(self, objects: ObjectStore) -> Iterator[tuple[ObjectInfo, bool | None]]:
        """Each object of the store with whether it is Pulsar's (None: gone meanwhile), in the
        listing's order: those not in the key form asked for their metadata
        :data:`HEAD_REQUESTS` at a time, a page of the listing at a time."""
        from concurrent.futures import ThreadPoolExecutor

        listing = objects.list()
        with ThreadPoolExecutor(HEAD_REQUESTS, thread_name_prefix="bkctl-offload-head") as pool:
            while page := list(itertools.islice(listing, LISTING_PAGE)):
                asked = [o for o in page if parse_object_key(o.key) is None]
                answers = dict(zip((o.key for o in asked), pool.map(lambda o: self._offloaders(objects, o), asked)))
                for o in page:
                    yield o, answers.get(o.key, True)

    def _objects(self, objects: ObjectStore, keys: set[str], cutoff: float) -> Iterator[OffloadOrphan]:
        for o, pulsars in self._listing(objects):
            if pulsars is None:
                continue  # deleted meanwhile
            parsed = parse_object_key(o.key)
            verdict = judge(pulsars, o.key in keys, o.modified, cutoff)
            self._count(verdict, o.size)
            if verdict is Verdict.ORPHAN:
                self.orphans += 1
                self.orphan_bytes += o.size
                yield OffloadOrphan(
                    "object",
                    objects.name,
                    o.key,
                    o.size,
                    o.modified,
                    ledger_id=parsed.ledger_id if parsed else None,
                    pulsar_key=parsed is not None,
                )
        for u in objects.uploads():
            # an upload's metadata cannot be asked before it completes: its key alone tells
            parsed = parse_object_key(u.key)
            verdict = judge(parsed is not None, False, u.initiated, cutoff)
            self._count(verdict, u.size)
            if verdict is Verdict.ORPHAN:
                self.uploads += 1
                self.upload_bytes += u.size
                yield OffloadOrphan(
                    "upload",
                    objects.name,
                    u.key,
                    u.size,
                    u.initiated,
                    u.upload_id,
                    parsed.ledger_id if parsed else None,
                )

    @staticmethod
    def _offloaders(objects: ObjectStore, o: ObjectInfo) -> bool | None:
        """Whether ``o``'s user metadata is the offloader's (None: it is gone meanwhile)."""
        try:
            return is_offloader_metadata(objects.head(o.key).metadata)
        except ObjectMissing:
            return None

    def _mapfiles(self, objects: ObjectStore, named: set[str], cutoff: float) -> Iterator[OffloadOrphan]:
        folders: dict[str, list[ObjectInfo]] = {}
        for o in objects.list():
            folder, _, _name = o.key.rpartition("/")
            folders.setdefault(folder, []).append(o)
        for folder, files in sorted(folders.items()):
            parsed = parse_mapfile_folder(folder)
            size = sum(f.size for f in files)
            modified = max(f.modified for f in files)
            verdict = judge(parsed is not None, folder in named, modified, cutoff)
            self._count(verdict, size, len(files))
            if verdict is Verdict.ORPHAN:
                self.orphans += 1
                self.orphan_bytes += size
                yield OffloadOrphan(
                    "mapfile", objects.name, folder, size, modified, ledger_id=parsed.ledger_id if parsed else None
                )
