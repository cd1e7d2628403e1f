"""Where an offloaded ledger is, and the stores that hold it (the I/O beside :mod:`.offload_format`).

* :class:`OffloadLocation` -- what a managed ledger's ``OffloadContext`` says of one ledger: the
  uuid (``uidMsb``/``uidLsb``), the driver and its properties (``bucket``, ``region``,
  ``serviceEndpoint``; or ``storageBasePath``), complete, BookKeeper copy deleted.  Each ledger
  keeps the configuration it was offloaded under, so ledgers offloaded before a change of bucket
  or endpoint are found where they are (tests/vectors/offload/FACTS.md #19-#24).  A context
  with no uuid of its own but an ``offloadSegment`` is streaming offload's (FACTS #1, #26): its
  objects are the segment's ``<uuid>`` and ``<uuid>-index`` (one segment is read; a ledger
  spread over several is refused by the reader).
* :class:`ObjectStore` -- the little a reader needs of a bucket: ``head``, ranged ``get``,
  ``list``, ``uploads`` (multipart uploads never completed) -- :class:`S3Store` through boto3
  (the ``s3`` extra: the standard AWS credential chain, the endpoint the ledger's driver
  metadata names unless :attr:`OffloadSettings.endpoint` overrides it) and :class:`FileStore`
  (the filesystem offloader's ``file:`` base path, or a local folder standing for it).
* :func:`store_for` -- one store per (driver, bucket, endpoint, region) and process.

Errors are :mod:`.errors`' ``OffloadMissing`` (exit 3), ``OffloadDenied`` (6),
``OffloadUnreachable`` (5), ``OffloadUnlocated`` (3).  Credentials are never part of a message.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from .errors import OffloadDenied, OffloadMissing, OffloadUnlocated, OffloadUnreachable
from .offload_format import data_key, index_key, streaming_data_key, streaming_index_key, uuid_of

__all__ = [
    "FILESYSTEM",
    "FileStore",
    "JCLOUDS_S3",
    "ObjectInfo",
    "ObjectStore",
    "OffloadLocation",
    "OffloadSettings",
    "S3Store",
    "Upload",
    "location_of",
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
    timeout: float = 30.0
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


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    #: seconds since the epoch
    modified: float
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Upload:
    """A multipart upload begun and never completed (its parts are stored, and paid for)."""

    key: str
    upload_id: str
    initiated: float
    size: int


class ObjectStore(Protocol):
    name: str

    def head(self, key: str) -> ObjectInfo: ...

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        """Bytes ``start`` up to (not including) ``end`` (None: to the end)."""
        ...

    def open(self, key: str, start: int, end: int) -> ByteStream:
        """Bytes ``start`` up to ``end`` as one stream (one request, read as it is consumed)."""
        ...

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]: ...

    def uploads(self) -> Iterator[Upload]: ...


class ByteStream(Protocol):
    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes (fewer only at the end)."""
        ...

    def close(self) -> None: ...


class _S3Body:
    """A GET's body read as a stream; a read that fails mid-way says so as the store's errors do."""

    def __init__(self, body: Any, fail: Any):
        self._body = body
        self._fail = fail

    def read(self, n: int) -> bytes:
        from botocore.exceptions import BotoCoreError

        try:
            return bytes(self._body.read(n))
        except BotoCoreError as exc:
            raise self._fail(exc) from None

    def close(self) -> None:
        self._body.close()


class _FileSpan:
    def __init__(self, path: Path, start: int, end: int):
        self._fh: BinaryIO = open(path, "rb")
        self._fh.seek(start)
        self._left = end - start

    def read(self, n: int) -> bytes:
        data = self._fh.read(min(n, self._left))
        self._left -= len(data)
        return data

    def close(self) -> None:
        self._fh.close()


class S3Store:
    """A bucket through boto3 (see the module documentation)."""

    def __init__(self, bucket: str, endpoint: str | None, region: str | None, timeout: float = 30.0):
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            raise OffloadUnlocated("reading offloaded ledgers from S3 needs boto3: pip install 'bkctl[s3]'") from None
        self.bucket = bucket
        self.endpoint = endpoint
        self.name = f"s3://{bucket}" + (f" at {endpoint}" if endpoint else "")
        config = Config(
            connect_timeout=timeout,
            read_timeout=timeout,
            retries={"max_attempts": 2, "mode": "standard"},
            max_pool_connections=32,
        )
        self._client: Any = boto3.session.Session().client(
            "s3", endpoint_url=endpoint, region_name=region or None, config=config
        )

    def _fail(self, exc: Exception, key: str | None) -> Exception:
        from botocore.exceptions import (
            ClientError,
            ConnectionClosedError,
            EndpointConnectionError,
            NoCredentialsError,
            ReadTimeoutError,
        )
        from botocore.exceptions import ConnectTimeoutError as BotoConnectTimeout

        what = f"{self.name}: {key}" if key else self.name
        if isinstance(exc, ClientError):
            error = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("NoSuchKey", "404", "NotFound") or (status == 404 and code != "NoSuchBucket"):
                return OffloadMissing(f"{what}: no such object")
            if code == "NoSuchBucket":
                return OffloadMissing(f"{self.name}: no such bucket")
            if code in ("AccessDenied", "403", "Forbidden", "SignatureDoesNotMatch", "InvalidAccessKeyId") or (
                status == 403
            ):
                return OffloadDenied(f"{what}: access denied ({code or status}); check the AWS credentials")
            return OffloadUnreachable(f"{what}: the object store answered {code or status}: {error.get('Message', '')}")
        if isinstance(exc, NoCredentialsError):
            return OffloadDenied(f"{self.name}: no AWS credentials found (AWS_ACCESS_KEY_ID..., a profile, a role)")
        if isinstance(exc, (ReadTimeoutError, BotoConnectTimeout)):
            return OffloadUnreachable(f"{what}: the object store did not answer in time")
        if isinstance(exc, (EndpointConnectionError, ConnectionClosedError)):
            return OffloadUnreachable(f"{what}: cannot reach the object store ({exc})")
        return OffloadUnreachable(f"{what}: {type(exc).__name__}: {exc}")

    def _call(self, key: str | None, fn: Any, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(Bucket=self.bucket, **kwargs)
        except (ClientError, BotoCoreError) as exc:
            raise self._fail(exc, key) from None

    def head(self, key: str) -> ObjectInfo:
        doc = self._call(key, self._client.head_object, Key=key)
        return ObjectInfo(
            key, int(doc["ContentLength"]), doc["LastModified"].timestamp(), dict(doc.get("Metadata") or {})
        )

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        from botocore.exceptions import BotoCoreError

        if end is not None and end <= start:
            return b""
        span = f"bytes={start}-" + ("" if end is None else str(end - 1))
        kwargs = {"Range": span} if start or end is not None else {}
        answer = self._call(key, self._client.get_object, Key=key, **kwargs)
        try:
            return bytes(answer["Body"].read())
        except BotoCoreError as exc:
            raise self._fail(exc, key) from None

    def open(self, key: str, start: int, end: int) -> ByteStream:
        answer = self._call(key, self._client.get_object, Key=key, Range=f"bytes={start}-{end - 1}")
        return _S3Body(answer["Body"], lambda exc: self._fail(exc, key))

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        token: dict[str, str] = {}
        while True:
            page = self._call(None, self._client.list_objects_v2, Prefix=prefix, **token)
            for o in page.get("Contents", []):
                yield ObjectInfo(o["Key"], int(o["Size"]), o["LastModified"].timestamp())
            if not page.get("IsTruncated"):
                return
            token = {"ContinuationToken": page["NextContinuationToken"]}

    def uploads(self) -> Iterator[Upload]:
        marker: dict[str, str] = {}
        while True:
            page = self._call(None, self._client.list_multipart_uploads, **marker)
            for u in page.get("Uploads", []):
                parts = self._call(u["Key"], self._client.list_parts, Key=u["Key"], UploadId=u["UploadId"])
                size = sum(int(p.get("Size", 0)) for p in parts.get("Parts", []))
                yield Upload(u["Key"], u["UploadId"], u["Initiated"].timestamp(), size)
            if not page.get("IsTruncated"):
                return
            marker = {"KeyMarker": page["NextKeyMarker"], "UploadIdMarker": page["NextUploadIdMarker"]}


class FileStore:
    """A folder standing for the filesystem offloader's storage base path; keys are paths below it."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        self.name = str(self.root)

    def _path(self, key: str) -> Path:
        return self.root / key

    def head(self, key: str) -> ObjectInfo:
        try:
            st = self._path(key).stat()
        except FileNotFoundError:
            raise OffloadMissing(f"{self._path(key)}: no such file") from None
        except PermissionError:
            raise OffloadDenied(f"{self._path(key)}: permission denied") from None
        return ObjectInfo(key, st.st_size, st.st_mtime)

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        try:
            with open(self._path(key), "rb") as fh:
                fh.seek(start)
                return fh.read() if end is None else fh.read(max(0, end - start))
        except FileNotFoundError:
            raise OffloadMissing(f"{self._path(key)}: no such file") from None
        except PermissionError:
            raise OffloadDenied(f"{self._path(key)}: permission denied") from None

    def open(self, key: str, start: int, end: int) -> ByteStream:
        try:
            return _FileSpan(self._path(key), start, end)
        except FileNotFoundError:
            raise OffloadMissing(f"{self._path(key)}: no such file") from None
        except PermissionError:
            raise OffloadDenied(f"{self._path(key)}: permission denied") from None

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        if not self.root.is_dir():
            raise OffloadMissing(f"{self.root}: no such folder")
        for dirpath, _dirs, files in os.walk(self.root):
            for name in files:
                path = Path(dirpath) / name
                key = str(path.relative_to(self.root))
                if key.startswith(prefix):
                    st = path.stat()
                    yield ObjectInfo(key, st.st_size, st.st_mtime)

    def uploads(self) -> Iterator[Upload]:
        return iter(())


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
