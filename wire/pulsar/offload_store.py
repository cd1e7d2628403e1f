"""Where an offloaded ledger is, and the stores that hold it (the I/O beside :mod:`.offload_format`).

* :class:`OffloadLocation` -- what a managed ledger's ``OffloadContext`` says of one ledger: the
  uuid (``uidMsb``/``uidLsb``), the driver and its properties (``bucket``, ``region``,
  ``serviceEndpoint``; or ``storageBasePath``), complete, BookKeeper copy deleted.  Each ledger
  keeps the configuration it was offloaded under, so ledgers offloaded before a change of bucket
  or endpoint are found where they are (tests/vectors/offload/FACTS.md #19-#24).  A context
  with no uuid of its own but an ``offloadSegment`` is streaming offload's (FACTS #1, #26): its
  objects are the segment's ``<uuid>`` and ``<uuid>-index`` (one segment is read; a ledger
  spread over several is refused by the reader).
* the stores are :mod:`bkctl.wire.objects`' (one object store for offload reads, ``verify``,
  ``orphans`` and backups): :class:`S3Store` (its ``S3Objects``: the ``s3`` extra, the standard
  AWS credential chain, the endpoint the ledger's driver metadata names unless
  :attr:`OffloadSettings.endpoint` overrides it) and :class:`FileStore` (its
  ``DirectoryObjects``: the filesystem offloader's ``file:`` base path, or a local folder
  standing for it);
* :func:`store_for` -- one store per (driver, bucket, endpoint, region) and process;
* :class:`OffloadRecord` -- one offloaded ledger of a topic: its location and what its managed
  ledger records of it (entries, bytes, the streaming segments' uuids).

Errors are the object store's (``OffloadMissing``, exit 3; ``OffloadDenied``, 6;
``OffloadUnreachable``, 5: :mod:`.errors`' names for them) and ``OffloadUnlocated`` (3).
Credentials are never part of a message.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from ..objects import DEFAULT_TIMEOUT, ByteStream, DirectoryObjects, ObjectInfo, ObjectStore, S3Objects, Upload
from .errors import OffloadUnlocated
from .offload_format import data_key, index_key, streaming_data_key, streaming_index_key, uuid_of

__all__ = [
    "ByteStream",
    "FILESYSTEM",
    "FileStore",
    "JCLOUDS_S3",
    "ObjectInfo",
    "ObjectStore",
    "OffloadLocation",
    "OffloadRecord",
    "OffloadSettings",
    "S3Store",
    "Upload",
    "location_of",
    "record_of",
    "store_for",
]

#: drivers whose store speaks S3 (``aws-s3``, and ``S3`` for any S3-compatible store); the
#: other jclouds drivers (google-cloud-storage, azureblob, aliyun-oss) keep the same objects
#: but are reached through their own APIs, which this reader does not speak yet
JCLOUDS_S3 = frozenset({"aws-s3", "s3"})
FILESYSTEM = "filesystem"
#: every jclouds driver name Pulsar knows (their objects are laid out alike)
JCLOUDS = frozenset({"aws-s3", "s3", "google-cloud-storage", "azureblob", "aliyun-oss", "transient"})


@dataclass(frozen=True)
class OffloadSettings:
    """How to reach offloaded ledgers (picklable; no credentials: those come from the standard
    chain of the process that reads -- ``AWS_*`` variables, profiles, instance roles)."""

    #: an endpoint URL that replaces every S3 ledger's ``serviceEndpoint``
    endpoint: str | None = None
    #: a local folder standing for the filesystem offloader's storage base path
    filesystem_root: str | None = None
    #: seconds a request to the object store may take (connect, and each read)
    timeout: float = DEFAULT_TIMEOUT
    #: bytes per ranged GET of a data block (the broker's readBufferSizeInBytes is 1 MiB)
    read_buffer: int = 4 << 20


@dataclass(frozen=True)
class OffloadLocation:
    """One offloaded ledger's place (see the module documentation)."""

    ledger_id: int
    managed_ledger: str
    uuid: str
    driver: str | None
    properties: tuple[tuple[str, str], ...] = ()
    complete: bool = False
    bookkeeper_deleted: bool = False
    timestamp: int | None = None
    #: streaming offload (version 2): the objects are a segment's, named by its uuid alone
    streaming: bool = False
    #: streaming offload segments the ledger is spread over (the reader reads one)
    segments: int = 1

    def prop(self, name: str) -> str | None:
        value = dict(self.properties).get(name)
        return value or None  # the offloader writes "" for an unset endpoint

    @property
    def bucket(self) -> str | None:
        return self.prop("bucket")

    @property
    def region(self) -> str | None:
        return self.prop("region")

    @property
    def endpoint(self) -> str | None:
        return self.prop("serviceEndpoint")

    @property
    def is_s3(self) -> bool:
        return (self.driver or "").lower() in JCLOUDS_S3

    @property
    def is_filesystem(self) -> bool:
        return (self.driver or "").lower() == FILESYSTEM

    @property
    def data_key(self) -> str:
        return streaming_data_key(self.uuid) if self.streaming else data_key(self.uuid, self.ledger_id)

    @property
    def index_key(self) -> str:
        return streaming_index_key(self.uuid) if self.streaming else index_key(self.uuid, self.ledger_id)

    @property
    def mapfile(self) -> str:
        """The MapFile folder below the storage base path (filesystem driver)."""
        return f"{self.managed_ledger}/{self.ledger_id}-{self.uuid}"

    def where(self) -> str:
        """Where it is, for people (no credentials)."""
        if self.is_filesystem:
            return f"{(self.prop('storageBasePath') or '').rstrip('/')}/{self.mapfile}"
        endpoint = f" at {self.endpoint}" if self.endpoint else ""
        return f"{self.driver}://{self.bucket}/{self.data_key}{endpoint}"

    def to_json(self) -> dict[str, Any]:
        return {
            "ledger_id": self.ledger_id,
            "uuid": self.uuid,
            "driver": self.driver,
            "bucket": self.bucket,
            "region": self.region,
            "endpoint": self.endpoint,
            "base_path": self.prop("storageBasePath"),
            "objects": [self.mapfile] if self.is_filesystem else [self.data_key, self.index_key],
            "complete": self.complete,
            "bookkeeper_deleted": self.bookkeeper_deleted,
            "offloaded_at": self.timestamp,
        }


@dataclass(frozen=True)
class OffloadRecord:
    """One offloaded ledger of a topic, as its managed ledger records it."""

    topic: str
    managed_ledger: str
    location: OffloadLocation
    entries: int
    size: int
    #: the uuids of the streaming offload segments its offload context names (their objects are
    #: ``<uuid>`` and ``<uuid>-index``)
    segment_uuids: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "managed_ledger": self.managed_ledger,
            "entries": self.entries,
            "size": self.size,
            "where": self.location.where(),
            **self.location.to_json(),
        }


def record_of(ledger_info: Any, managed_ledger: str, topic: str) -> OffloadRecord | None:
    """The :class:`OffloadRecord` of one ``ManagedLedgerInfo.LedgerInfo`` (None: never offloaded)."""
    location = location_of(ledger_info, managed_ledger)
    if location is None:
        return None
    segments = tuple(uuid_of(s.uidMsb, s.uidLsb) for s in ledger_info.offloadContext.offloadSegment)
    return OffloadRecord(topic, managed_ledger, location, ledger_info.entries, ledger_info.size, segments)


def location_of(ledger_info: Any, managed_ledger: str) -> OffloadLocation | None:
    """The offload of one ``ManagedLedgerInfo.LedgerInfo`` (None: never offloaded)."""
    if not ledger_info.HasField("offloadContext"):
        return None
    ctx = ledger_info.offloadContext
    # the context's own uuid is what a broker reads by (version 1); a streaming offload's
    # segments carry theirs, and their own driver metadata when they have it
    streaming = not (ctx.HasField("uidMsb") or ctx.HasField("uidLsb"))
    if streaming and not ctx.offloadSegment:
        return None
    source = ctx.offloadSegment[0] if streaming else ctx
    meta = source.driverMetadata if source.HasField("driverMetadata") else ctx.driverMetadata
    driver = meta.name if source.HasField("driverMetadata") or ctx.HasField("driverMetadata") else None
    props = tuple((kv.key, kv.value) for kv in meta.properties) if driver is not None else ()
    complete = (
        bool(ctx.complete) if ctx.HasField("complete") or not streaming else all(s.complete for s in ctx.offloadSegment)
    )
    return OffloadLocation(
        ledger_info.ledgerId,
        managed_ledger,
        uuid_of(source.uidMsb, source.uidLsb),
        driver,
        props,
        complete,
        bool(ctx.bookkeeperDeleted),
        ctx.timestamp if ctx.HasField("timestamp") else None,
        streaming=streaming,
        segments=len(ctx.offloadSegment) if streaming else 1,
    )


# ---------------------------------------------------------------- stores

#: the stores are the one object store's (:mod:`bkctl.wire.objects`), under the names this module
#: has always given them
S3Store = S3Objects
FileStore = DirectoryObjects


_stores: dict[tuple[Any, ...], ObjectStore] = {}
_stores_lock = threading.Lock()
_stores_pid: int | None = None


def store_for(location: OffloadLocation, settings: OffloadSettings) -> ObjectStore:
    """The store of ``location`` (one per process and place)."""
    global _stores_pid
    if location.is_s3:
        bucket = location.bucket
        if not bucket:
            raise OffloadUnlocated(f"ledger {location.ledger_id}: its offload's driver metadata names no bucket")
        key: tuple[Any, ...] = ("s3", bucket, settings.endpoint or location.endpoint, location.region, settings.timeout)
    elif location.is_filesystem:
        key = ("fs", settings.filesystem_root or location.prop("storageBasePath"))
    elif location.driver is None:
        raise OffloadUnlocated(
            f"ledger {location.ledger_id} is offloaded but its offload context names no driver (no driver metadata)"
        )
    else:
        raise OffloadUnlocated(
            f"ledger {location.ledger_id} is offloaded with driver {location.driver!r}; this reader reads "
            f"{', '.join(sorted(JCLOUDS_S3))} and {FILESYSTEM}"
        )
    with _stores_lock:
        if _stores_pid != os.getpid():  # a forked child makes its own connections
            _stores.clear()
            _stores_pid = os.getpid()
        store = _stores.get(key)
        if store is None:
            store = _stores[key] = _make(location, settings)
        return store


def _make(location: OffloadLocation, settings: OffloadSettings) -> ObjectStore:
    if location.is_s3:
        return S3Store(location.bucket or "", settings.endpoint or location.endpoint, location.region, settings.timeout)
    if settings.filesystem_root:
        return FileStore(settings.filesystem_root)
    base = location.prop("storageBasePath")
    if base is None or base == "null":
        raise OffloadUnlocated(
            f"ledger {location.ledger_id}: the filesystem offload names no storage base path "
            "(--offload-root names the folder it is in)"
        )
    if base.startswith("file://"):
        return FileStore(base[len("file://") :])
    if base.startswith("/"):
        return FileStore(base)
    raise OffloadUnlocated(
        f"ledger {location.ledger_id} is offloaded to {base}: only file: paths are read (mount it and give "
        "--offload-root)"
    )
