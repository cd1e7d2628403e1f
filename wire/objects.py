"""One object store: a flat space of keyed objects, read and written, on S3 or in a local
directory -- with one error map and one timeout policy -- for every reader and writer of
objects: Pulsar's offloaded ledgers (:mod:`bkctl.wire.pulsar.offload_store`: reads, ``verify``,
``orphans``) and ``bkctl backup``/``restore``'s archives (:mod:`bkctl.backup.storage`).

* :class:`S3Objects` -- a bucket through boto3 (the ``s3`` extra): the standard AWS credential
  chain, an endpoint for a server that is not AWS; :class:`DirectoryObjects` -- a local folder,
  keys being paths below it.  Both implement :class:`ObjectStore`.
* **Errors**, whatever the store: an object (or bucket, or folder) that is not there is
  :class:`~bkctl.wire.errors.ObjectMissing` (exit 3), refused credentials or permissions
  :class:`~bkctl.wire.errors.ObjectDenied` (6), a store that does not answer in time or at all
  :class:`~bkctl.wire.errors.ObjectUnreachable` (5); each one line, naming store and key, never
  credentials.
* **Timeouts**: ``timeout`` seconds to connect and for each read (:data:`DEFAULT_TIMEOUT`), two
  attempts per request (botocore's standard retry mode), then :class:`ObjectUnreachable`.
* **Writes** are whole or nothing, and durable once :meth:`~ObjectStore.put` returns: a local
  file is written under a temporary name beside it (``<key>.part-<pid>-<n>``), fsynced, renamed
  and its folder fsynced (a folder made for it is fsynced in its parent before the rename, not
  before the writing); an S3 object appears, stored, when its upload is answered.
"""

from __future__ import annotations

import errno
import functools
import itertools
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO, Protocol

from .bookie_disk.layout import fsync_dir
from .errors import ObjectDenied, ObjectMissing, ObjectUnreachable

__all__ = [
    "DEFAULT_TIMEOUT",
    "PART_MARK",
    "ByteStream",
    "DirectoryObjects",
    "ObjectInfo",
    "ObjectStore",
    "S3Objects",
    "Upload",
]

#: seconds a request to an object store may take (connecting, and each read), by default
DEFAULT_TIMEOUT = 30.0
#: what a local temporary file's name holds (``<key>.part-<pid>-<n>``) until it is renamed into place
PART_MARK = ".part-"
_parts = itertools.count()


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


class ByteStream(Protocol):
    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (fewer only at the end; -1: all that is left)."""
        ...

    def close(self) -> None: ...


class ObjectStore(Protocol):
    """Keyed objects (see the module documentation): ``name`` says where, for people."""

    name: str

    def head(self, key: str) -> ObjectInfo: ...

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        """Bytes ``start`` up to (not including) ``end`` (None: to the end)."""
        ...

    def open(self, key: str, start: int = 0, end: int | None = None) -> ByteStream:
        """Bytes ``start`` up to ``end`` as one stream (one request, read as it is consumed)."""
        ...

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]: ...

    def uploads(self) -> Iterator[Upload]: ...

    def put(self, key: str, data: bytes) -> None:
        """Write object ``key`` (replacing it), whole or not at all."""
        ...

    def put_file(self, key: str, path: str) -> None:
        """Write object ``key`` from the local file ``path``, whole or not at all."""
        ...

    def writing(self, key: str) -> AbstractContextManager[IO[bytes]]:
        """A file to write object ``key`` into: stored when the block ends without an error,
        whole or not at all."""
        ...

    def delete(self, key: str) -> None:
        """Remove object ``key`` (a missing one is fine)."""
        ...


# ---------------------------------------------------------------- S3


class _S3Body:
    """A GET's body read as a stream; a read that fails midway says so as the store's errors do."""

    def __init__(self, body: Any, fail: Any):
        self._body = body
        self._fail = fail

    def read(self, n: int = -1) -> bytes:
        from botocore.exceptions import BotoCoreError

        try:
            return bytes(self._body.read(None if n < 0 else n))
        except BotoCoreError as exc:
            raise self._fail(exc) from None

    def close(self) -> None:
        self._body.close()

    def __enter__(self) -> _S3Body:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class S3Objects:
    """A bucket through boto3 (see the module documentation)."""

    def __init__(self, bucket: str, endpoint: str | None, region: str | None, timeout: float = DEFAULT_TIMEOUT):
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            raise ObjectMissing("an S3 object store needs boto3: pip install 'bkctl[s3]'") from None
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

    def fail(self, exc: Exception, key: str | None) -> Exception:
        """The one error map: botocore's exception as :class:`ObjectMissing`, :class:`ObjectDenied`
        or :class:`ObjectUnreachable`."""
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
            if code == "NoSuchBucket":
                return ObjectMissing(f"{self.name}: no such bucket")
            if code in ("NoSuchKey", "404", "NotFound") or status == 404:
                return ObjectMissing(f"{what}: no such object")
            if code in ("AccessDenied", "403", "Forbidden", "SignatureDoesNotMatch", "InvalidAccessKeyId") or (
                status == 403
            ):
                return ObjectDenied(f"{what}: access denied ({code or status}); check the AWS credentials")
            return ObjectUnreachable(f"{what}: the object store answered {code or status}: {error.get('Message', '')}")
        if isinstance(exc, NoCredentialsError):
            return ObjectDenied(f"{self.name}: no AWS credentials found (AWS_ACCESS_KEY_ID..., a profile, a role)")
        if isinstance(exc, (ReadTimeoutError, BotoConnectTimeout)):
            return ObjectUnreachable(f"{what}: the object store did not answer in time")
        if isinstance(exc, (EndpointConnectionError, ConnectionClosedError)):
            return ObjectUnreachable(f"{what}: cannot reach the object store ({exc})")
        return ObjectUnreachable(f"{what}: {type(exc).__name__}: {exc}")

    def _call(self, key: str | None, fn: Any, **kwargs: Any) -> Any:
        from boto3.exceptions import S3UploadFailedError
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(Bucket=self.bucket, **kwargs)
        except (ClientError, BotoCoreError) as exc:
            raise self.fail(exc, key) from None
        except S3UploadFailedError as exc:  # upload_file's wrapper of a ClientError
            cause = exc.__context__
            if isinstance(cause, (ClientError, BotoCoreError)):
                raise self.fail(cause, key) from None
            raise ObjectUnreachable(f"{self.name}: {key}: {exc}") from None

    def head(self, key: str) -> ObjectInfo:
        doc = self._call(key, self._client.head_object, Key=key)
        return ObjectInfo(
            key, int(doc["ContentLength"]), doc["LastModified"].timestamp(), dict(doc.get("Metadata") or {})
        )

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        if end is not None and end <= start:
            return b""
        body = self.open(key, start, end)
        try:
            return body.read()
        finally:
            body.close()

    def open(self, key: str, start: int = 0, end: int | None = None) -> ByteStream:
        kwargs = {}
        if start or end is not None:
            kwargs["Range"] = f"bytes={start}-" + ("" if end is None else str(end - 1))
        answer = self._call(key, self._client.get_object, Key=key, **kwargs)
        return _S3Body(answer["Body"], lambda exc: self.fail(exc, key))

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

    def put(self, key: str, data: bytes) -> None:
        self._call(key, self._client.put_object, Key=key, Body=data)

    def put_file(self, key: str, path: str) -> None:
        self._call(key, lambda Bucket: self._client.upload_file(path, Bucket, key))

    @contextmanager
    def writing(self, key: str) -> Iterator[IO[bytes]]:
        with tempfile.NamedTemporaryFile(prefix="bkctl-object-") as f:
            yield f
            f.flush()
            self.put_file(key, f.name)

    def delete(self, key: str) -> None:
        self._call(key, self._client.delete_object, Key=key)


# ---------------------------------------------------------------- a local directory


class _FileSpan:
    def __init__(self, path: Path, start: int, end: int | None):
        self._fh: BinaryIO = open(path, "rb")
        self._fh.seek(start)
        self._left = -1 if end is None else end - start

    def read(self, n: int = -1) -> bytes:
        if self._left < 0:
            return self._fh.read(n)
        data = self._fh.read(self._left if n < 0 else min(n, self._left))
        self._left -= len(data)
        return data

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> _FileSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def forget_pages(fd: int) -> None:
    """The synced file ``fd``'s pages dropped from the page cache: an object written is not
    read again by its writer, and a backup of hundreds of MiB otherwise takes that much
    fresh page cache -- the kernel's copy into never-used pages cost about 1.5 ms of CPU
    per MiB on top (measured), where pages dropped are taken again, warm, by the next
    object.  Advice only: a file system that does not take it is left as it is."""
    if hasattr(os, "posix_fadvise"):
        with suppress(OSError):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


#: bytes a :class:`PageRecycler` lets a file grow by before it sends them to disk, and the
#: bytes sent one step before dropped: a file being written holds two or three steps of page
#: cache, not its whole size
RECYCLE_STEP = 4 << 20

#: ``sync_file_range``'s flags (linux/fs.h)
_SFR_WAIT_BEFORE, _SFR_WRITE, _SFR_WAIT_AFTER = 1, 2, 4


@functools.cache
def sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """Linux's ``sync_file_range(fd, offset, nbytes, flags)`` (``os`` has none), through ctypes
    (which lets go of the interpreter's lock for the call), looked up once; None where there is
    none (another system, a C library without it)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        call = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
    call.restype = ctypes.c_int
    return call


class PageRecycler:
    """Recycles the page cache of a file as it is written (:meth:`grown`, told its size): every
    :data:`RECYCLE_STEP` bytes the newest step is sent to disk (``sync_file_range`` WRITE, not
    waited for) and the step before it, sent one step earlier, waited for and dropped
    (``POSIX_FADV_DONTNEED``).  The file's next writes then take pages just freed -- warm --
    instead of fresh ones: the kernel's copy into fresh page cache cost a backup about as much
    CPU as reading its entries (``copy_folio_from_iter_atomic``, 20-36% of its samples), and
    with pages recycled a writer's copy cost a half to a third as much (measured: 400 MiB
    files, ``perf`` and ``getrusage``).

    Advice and early writeback only: durability is the final ``fsync``'s, as before.  Without
    ``sync_file_range`` (``sync_range=None``: another system) the steps are advised
    ``POSIX_FADV_DONTNEED`` alone, which starts their writeback and drops the pages already
    written back (about half of them).  A file system that refuses either is not asked again."""

    def __init__(self, fd: int, sync_range: Callable[[int, int, int, int], int] | None, step: int | None = None):
        self.fd, self.sync_range = fd, sync_range
        self.step = RECYCLE_STEP if step is None else step
        #: the bytes before ``dropped`` are dropped, those before ``sent`` sent to disk
        self.dropped = self.sent = 0
        self.enabled = hasattr(os, "posix_fadvise")

    def grown(self, size: int) -> None:
        """The file is ``size`` bytes long now (every byte before it written)."""
        if not self.enabled or size - self.sent < self.step:
            return
        fd, sent = self.fd, self.sent
        try:
            if self.sync_range is not None:
                self._sync(sent, size - sent, _SFR_WRITE)
                if sent > self.dropped:
                    self._sync(self.dropped, sent - self.dropped, _SFR_WAIT_BEFORE | _SFR_WRITE | _SFR_WAIT_AFTER)
            else:
                os.posix_fadvise(fd, sent, size - sent, os.POSIX_FADV_DONTNEED)  # starts the writeback
            if sent > self.dropped:
                os.posix_fadvise(fd, self.dropped, sent - self.dropped, os.POSIX_FADV_DONTNEED)
        except OSError:
            self.enabled = False
            return
        self.dropped, self.sent = sent, size

    def _sync(self, offset: int, length: int, flags: int) -> None:
        assert self.sync_range is not None
        if self.sync_range(self.fd, offset, length, flags) != 0:
            import ctypes

            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))


class DirectoryObjects:
    """A local folder; keys are ``/``-separated paths below it (see the module documentation)."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        self.name = str(self.root)
        self._making = threading.Lock()
        #: folders :meth:`make_dirs` made whose entry is not yet synced in their parent (the
        #: writer that made one syncs it before its object is renamed into place)
        self._unsynced: set[Path] = set()
        #: held while those entries are synced: a writer into such a folder waits for its sync
        self._syncing = threading.Lock()

    def path(self, key: str) -> Path:
        """The file of ``key`` (a key that would leave the folder is refused)."""
        parts = key.split("/")
        if not key or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"bad object key {key!r}")
        return self.root.joinpath(*parts)

    def fail(self, exc: OSError, key: str) -> Exception:
        """The one error map, for files."""
        where = exc.filename or self.path(key)
        if isinstance(exc, FileNotFoundError):
            return ObjectMissing(f"{where}: no such file")
        if isinstance(exc, PermissionError) or exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return ObjectDenied(f"{where}: {exc.strerror or 'permission denied'}")
        return exc

    def head(self, key: str) -> ObjectInfo:
        try:
            st = self.path(key).stat()
        except OSError as exc:
            raise self.fail(exc, key) from None
        return ObjectInfo(key, st.st_size, st.st_mtime)

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        with self.open(key, start, end) as f:
            return f.read()

    def open(self, key: str, start: int = 0, end: int | None = None) -> _FileSpan:
        try:
            return _FileSpan(self.path(key), start, end)
        except OSError as exc:
            raise self.fail(exc, key) from None

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        if not self.root.is_dir():
            raise ObjectMissing(f"{self.root}: no such folder")
        for dirpath, _dirs, files in os.walk(self.root):
            for name in files:
                path = Path(dirpath) / name
                key = path.relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    try:
                        st = path.stat()
                    except FileNotFoundError:
                        continue  # gone meanwhile
                    yield ObjectInfo(key, st.st_size, st.st_mtime)

    def uploads(self) -> Iterator[Upload]:
        return iter(())

    @contextmanager
    def writing(self, key: str) -> Iterator[IO[bytes]]:
        path = self.path(key)
        part = path.with_name(f"{path.name}{PART_MARK}{os.getpid()}-{next(_parts)}")
        try:
            self.make_dirs(path.parent, sync=False)  # (synced below, by whoever writes in it first)
            with open(part, "wb") as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
                forget_pages(f.fileno())
            self.sync_made(path.parent)
            os.replace(part, path)
            fsync_dir(path.parent)
        except BaseException as exc:
            try:
                part.unlink()
            except OSError:
                pass
            if isinstance(exc, OSError):
                raise self.fail(exc, key) from None
            raise

    def recycler(self, f: IO[bytes]) -> PageRecycler:
        """The page cache of ``f``, a file :meth:`writing` gave, recycled as it grows."""
        return PageRecycler(f.fileno(), sync_file_range())

    def make_dirs(self, folder: Path, *, sync: bool = True) -> None:
        """``folder`` and the folders above it that are missing made, each one's entry synced
        in its parent before this returns (a file synced in a folder whose own entry a crash
        loses is lost with it) -- or, ``sync=False``, left for :meth:`sync_made` to sync
        before anything in them is said stored: :meth:`writing` makes its folder so, and a
        backup's copy, which makes a folder for each ledger, begins reading at once while the
        folder's sync waits for the end of the object, in the thread that stores it.  Under a
        lock: a folder another thread is still making is waited for."""
        with self._making:
            missing: list[Path] = []
            above = folder
            while not above.is_dir():
                missing.append(above)
                above = above.parent
            for new in reversed(missing):
                new.mkdir(exist_ok=True)
                self._unsynced.add(new)
        if sync:
            self.sync_made(folder)

    def sync_made(self, folder: Path) -> None:
        """The entries of ``folder`` and of the folders above it that :meth:`make_dirs` made
        and did not sync yet, synced in their parents, outermost first.  A writer into a folder
        another writer made waits here while that one syncs it (an entry is forgotten only
        once synced); one with nothing left to sync, the common case, takes no turn."""
        with self._making:
            if not any(f in self._unsynced for f in (folder, *folder.parents)):
                return
        with self._syncing:
            with self._making:
                pending = sorted(
                    (f for f in (folder, *folder.parents) if f in self._unsynced), key=lambda f: len(f.parts)
                )
            for made in pending:
                fsync_dir(made.parent)
                with self._making:
                    self._unsynced.discard(made)

    def put(self, key: str, data: bytes) -> None:
        with self.writing(key) as f:
            f.write(data)

    def put_file(self, key: str, path: str) -> None:
        with self.writing(key) as f, open(path, "rb") as src:
            shutil.copyfileobj(src, f, 1 << 20)

    def clean_partial(self) -> int:
        """Remove the temporary files writers that were stopped left behind; how many."""
        gone = 0
        for dirpath, _dirs, files in os.walk(self.root):
            for name in files:
                if PART_MARK in name:
                    os.unlink(os.path.join(dirpath, name))
                    gone += 1
        return gone

    def delete(self, key: str) -> None:
        try:
            self.path(key).unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise self.fail(exc, key) from None
