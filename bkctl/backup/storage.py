"""Where an archive lives: a flat space of named objects (``ledgers/42/0-17.data``,
``backups/<id>.json``) behind one Protocol, :class:`ArchiveStorage`, with two twins:
a local directory (:class:`LocalStorage`) and an S3 bucket and prefix
(:class:`S3Storage`, through boto3 and its standard credential chain).

Every object is written whole or not at all: a local file goes to a temporary
name and is renamed into place (after an fsync), an S3 object appears when its
upload completes.  A backup killed midway leaves no half object under a real name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, BinaryIO, Protocol

from ..exitcodes import USAGE, CommandError

__all__ = ["ArchiveStorage", "LocalStorage", "S3Storage", "open_storage"]

#: local temporary files: ``<name>.part-<pid>`` beside the object they become
_PART = ".part-"


class ArchiveStorage(Protocol):
    """A flat space of named objects (names are ``/``-separated, relative)."""

    #: where the archive is, as the user gave it (a path or ``s3://bucket/prefix``)
    url: str

    def exists(self, name: str) -> bool:
        """Whether object ``name`` is there."""

    def get(self, name: str) -> bytes:
        """Object ``name``'s bytes; FileNotFoundError when it is not there."""

    def open_read(self, name: str) -> BinaryIO:
        """Object ``name`` as a file to read from (streaming); FileNotFoundError when missing."""

    def put(self, name: str, data: bytes) -> None:
        """Write object ``name`` (replacing it), whole or not at all."""

    def put_file(self, name: str, path: str) -> None:
        """Write object ``name`` from the local file ``path``, whole or not at all."""

    def writing(self, name: str) -> contextlib.AbstractContextManager[IO[bytes]]:
        """A file to write object ``name`` into: stored when the block ends without an error,
        whole or not at all."""

    def list(self, prefix: str) -> Iterator[str]:
        """The names that start with ``prefix``, sorted."""

    def size(self, name: str) -> int:
        """Object ``name``'s size in bytes."""

    def delete(self, name: str) -> None:
        """Remove object ``name`` (a missing one is fine)."""

    def clean_partial(self) -> int:
        """Remove what an interrupted writer left (local temporary files); how many."""


class LocalStorage:
    """An archive in a local directory (created on first write)."""

    def __init__(self, root: str):
        self.url = root
        self.root = os.path.abspath(root)

    def _path(self, name: str) -> str:
        parts = name.split("/")
        if not name or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"bad object name {name!r}")
        return os.path.join(self.root, *parts)

    def exists(self, name: str) -> bool:
        return os.path.isfile(self._path(name))

    def get(self, name: str) -> bytes:
        with open(self._path(name), "rb") as f:
            return f.read()

    def open_read(self, name: str) -> BinaryIO:
        return open(self._path(name), "rb")

    def _write(self, name: str, fill: Any) -> None:
        path = self._path(name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        part = f"{path}{_PART}{os.getpid()}"
        with open(part, "wb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, path)
        dir_fd = os.open(os.path.dirname(path), os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def put(self, name: str, data: bytes) -> None:
        self._write(name, lambda f: f.write(data))

    def put_file(self, name: str, path: str) -> None:
        def copy(f: BinaryIO) -> None:
            with open(path, "rb") as src:
                shutil.copyfileobj(src, f, 1 << 20)

        self._write(name, copy)

    @contextmanager
    def writing(self, name: str) -> Iterator[IO[bytes]]:
        path = self._path(name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        part = f"{path}{_PART}{os.getpid()}-{id(path)}"
        try:
            with open(part, "wb") as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            os.replace(part, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(part)
            raise

    def list(self, prefix: str) -> Iterator[str]:
        found = []
        for dirpath, _dirs, files in os.walk(self.root):
            rel = os.path.relpath(dirpath, self.root)
            for f in files:
                if _PART in f:
                    continue
                name = f if rel == "." else f"{rel.replace(os.sep, '/')}/{f}"
                if name.startswith(prefix):
                    found.append(name)
        return iter(sorted(found))

    def size(self, name: str) -> int:
        return os.path.getsize(self._path(name))

    def delete(self, name: str) -> None:
        try:
            os.unlink(self._path(name))
        except FileNotFoundError:
            pass

    def clean_partial(self) -> int:
        gone = 0
        for dirpath, _dirs, files in os.walk(self.root):
            for f in files:
                if _PART in f:
                    os.unlink(os.path.join(dirpath, f))
                    gone += 1
        return gone


class S3Storage:
    """An archive in an S3 bucket below a prefix (``s3://bucket/prefix``), through boto3:
    the standard credential chain (environment, shared files, instance roles),
    ``endpoint`` for a server that is not AWS (SeaweedFS, MinIO, ...)."""

    def __init__(self, url: str, endpoint: str | None = None, region: str | None = None):
        from urllib.parse import urlparse

        parsed = urlparse(url)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise CommandError(f"{url}: not an s3://bucket/prefix URL", USAGE)
        try:
            import boto3
        except ImportError:
            raise CommandError("an s3:// archive needs boto3: pip install 'bkctl[s3]'", USAGE) from None
        self.url = url
        self.bucket = parsed.netloc
        self.prefix = parsed.path.strip("/")
        self.client = boto3.client("s3", endpoint_url=endpoint, region_name=region)

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def _missing(self, exc: Exception) -> bool:
        code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
        return code in ("404", "NoSuchKey", "NotFound")

    def exists(self, name: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(name))
            return True
        except Exception as exc:  # noqa: BLE001 - botocore's ClientError, imported lazily
            if self._missing(exc):
                return False
            raise

    def get(self, name: str) -> bytes:
        with self.open_read(name) as f:
            return f.read()

    def open_read(self, name: str) -> BinaryIO:
        try:
            got = self.client.get_object(Bucket=self.bucket, Key=self._key(name))
        except Exception as exc:  # noqa: BLE001
            if self._missing(exc):
                raise FileNotFoundError(f"{self.url}/{name}") from None
            raise
        body: BinaryIO = got["Body"]
        return body

    def put(self, name: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self._key(name), Body=data)

    def put_file(self, name: str, path: str) -> None:
        self.client.upload_file(path, self.bucket, self._key(name))

    @contextmanager
    def writing(self, name: str) -> Iterator[IO[bytes]]:
        with spool() as f:
            yield f
            f.flush()
            self.put_file(name, f.name)

    def list(self, prefix: str) -> Iterator[str]:
        strip = len(self._key(""))
        names: list[str] = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self._key(prefix)):
            names.extend(o["Key"][strip:] for o in page.get("Contents", ()))
        return iter(sorted(names))

    def size(self, name: str) -> int:
        return int(self.client.head_object(Bucket=self.bucket, Key=self._key(name))["ContentLength"])

    def delete(self, name: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key(name))

    def clean_partial(self) -> int:
        # a multipart upload that never completed is not an object: nothing is seen of it
        return 0


def open_storage(where: str, endpoint: str | None = None) -> ArchiveStorage:
    """The storage ``where`` names: ``s3://bucket/prefix`` or a local directory."""
    if where.startswith("s3://"):
        return S3Storage(where, endpoint)
    if "://" in where:
        raise CommandError(f"{where}: an archive is a local directory or an s3://bucket/prefix URL", USAGE)
    return LocalStorage(where)


def spool() -> IO[bytes]:
    """A temporary local file to build an object in before it is stored."""
    return tempfile.NamedTemporaryFile(prefix="bkctl-backup-", delete=True)  # noqa: SIM115 - the caller closes it
