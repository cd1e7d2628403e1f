"""Where an archive lives: a flat space of named objects (``ledgers/42/0-17.data``,
``backups/<id>.json``) behind one Protocol, :class:`ArchiveStorage`, over the one object store
of :mod:`bkctl.wire.objects`: a local directory (:class:`LocalStorage`) and an S3 bucket and
prefix (:class:`S3Storage`, through boto3 and its standard credential chain).

Every object is written whole or not at all, and durable once stored: a local file goes to a
temporary name and is renamed into place (after an fsync; its folder fsynced after, a folder
made for it fsynced in its parent before the rename), an S3 object appears when its upload is answered.  A backup
killed midway leaves no half object under a real name.  Errors are the object store's, one
line each: an object that is not there ``ObjectMissing`` (exit 3), refused credentials or
permissions ``ObjectDenied`` (6), a store that does not answer ``ObjectUnreachable`` (5).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Protocol

from bkctl.wire.errors import ObjectMissing
from bkctl.wire.objects import DEFAULT_TIMEOUT, PART_MARK, ByteStream, DirectoryObjects, ObjectStore, S3Objects

from ..exitcodes import USAGE, CommandError

__all__ = ["ArchiveStorage", "LocalStorage", "S3Storage", "open_storage"]


class ArchiveStorage(Protocol):
    """A flat space of named objects (names are ``/``-separated, relative)."""

    #: where the archive is, as the user gave it (a path or ``s3://bucket/prefix``)
    url: str

    def exists(self, name: str) -> bool:
        """Whether object ``name`` is there."""

    def get(self, name: str) -> bytes:
        """Object ``name``'s bytes; ObjectMissing when it is not there."""

    def open_read(self, name: str) -> contextlib.AbstractContextManager[ByteStream]:
        """Object ``name`` as a stream to read from; ObjectMissing when it is not there."""

    def put(self, name: str, data: bytes) -> None:
        """Write object ``name`` (replacing it), whole or not at all."""

    def put_file(self, name: str, path: str) -> None:
        """Write object ``name`` from the local file ``path``, whole or not at all."""

    def writing(self, name: str) -> contextlib.AbstractContextManager[IO[bytes]]:
        """A file to write object ``name`` into: stored when the block ends without an error,
        whole or not at all."""

    def growing(self, f: IO[bytes]) -> Callable[[int], None] | None:
        """What to tell the size of a file :meth:`writing` gave as it grows, its writer
        writing past its buffer (a local folder recycles its page cache:
        :class:`~bkctl.wire.objects.PageRecycler`); None: nothing to tell."""

    def list(self, prefix: str) -> Iterator[str]:
        """The names that start with ``prefix``, sorted."""

    def size(self, name: str) -> int:
        """Object ``name``'s size in bytes."""

    def delete(self, name: str) -> None:
        """Remove object ``name`` (a missing one is fine)."""

    def make_folders(self, folders: Iterable[str]) -> None:
        """The folders of ``folders`` (``/``-separated, relative) made and durable ahead of the
        objects that go in them (a local folder: each fsynced in its parent; nothing in S3)."""

    def clean_partial(self) -> int:
        """Remove what an interrupted writer left (local temporary files); how many."""


class _ObjectArchive:
    """An archive's names over an object store's keys (``key`` maps one to the other)."""

    url: str
    objects: ObjectStore

    def key(self, name: str) -> str:
        """The object key of archive name ``name``."""
        return name

    def exists(self, name: str) -> bool:
        try:
            self.objects.head(self.key(name))
            return True
        except ObjectMissing:
            return False

    def get(self, name: str) -> bytes:
        return self.objects.get(self.key(name))

    def open_read(self, name: str) -> contextlib.AbstractContextManager[ByteStream]:
        return contextlib.closing(self.objects.open(self.key(name)))

    def put(self, name: str, data: bytes) -> None:
        self.objects.put(self.key(name), data)

    def put_file(self, name: str, path: str) -> None:
        self.objects.put_file(self.key(name), path)

    def writing(self, name: str) -> contextlib.AbstractContextManager[IO[bytes]]:
        return self.objects.writing(self.key(name))

    def growing(self, f: IO[bytes]) -> Callable[[int], None] | None:
        return None  # (an S3 object's file is read again by its upload: its pages kept)

    def list(self, prefix: str) -> Iterator[str]:
        base = self.key("")  # the keys' common prefix ("bk/" for s3://bucket/bk)
        names = [o.key[len(base) :] for o in self.objects.list(base + prefix)]
        return iter(sorted(n for n in names if PART_MARK not in n.rpartition("/")[2]))

    def size(self, name: str) -> int:
        return self.objects.head(self.key(name)).size

    def delete(self, name: str) -> None:
        self.objects.delete(self.key(name))

    def make_folders(self, folders: Iterable[str]) -> None:
        pass  # (an object store has no folders)

    def clean_partial(self) -> int:
        return 0


class LocalStorage(_ObjectArchive):
    """An archive in a local directory (created on first write)."""

    def __init__(self, root: str):
        self.url = root
        self.directory = DirectoryObjects(root)
        self.objects = self.directory

    def list(self, prefix: str) -> Iterator[str]:
        if not self.directory.root.is_dir():
            return iter(())
        return super().list(prefix)

    def growing(self, f: IO[bytes]) -> Callable[[int], None] | None:
        return self.directory.recycler(f).grown

    def make_folders(self, folders: Iterable[str]) -> None:
        for folder in folders:
            self.directory.make_dirs(self.directory.path(folder))

    def clean_partial(self) -> int:
        return self.directory.clean_partial() if self.directory.root.is_dir() else 0


class S3Storage(_ObjectArchive):
    """An archive in an S3 bucket below a prefix (``s3://bucket/prefix``), through boto3:
    the standard credential chain (environment, shared files, instance roles),
    ``endpoint`` for a server that is not AWS (SeaweedFS, MinIO, ...)."""

    def __init__(self, url: str, endpoint: str | None = None, region: str | None = None):
        from urllib.parse import urlparse

        parsed = urlparse(url)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise CommandError(f"{url}: not an s3://bucket/prefix URL", USAGE)
        self.url = url
        self.bucket = parsed.netloc
        self.prefix = parsed.path.strip("/")
        self.objects = S3Objects(self.bucket, endpoint, region, DEFAULT_TIMEOUT)

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name


def open_storage(where: str, endpoint: str | None = None) -> ArchiveStorage:
    """The storage ``where`` names: ``s3://bucket/prefix`` or a local directory."""
    if where.startswith("s3://"):
        return S3Storage(where, endpoint)
    if "://" in where:
        raise CommandError(f"{where}: an archive is a local directory or an s3://bucket/prefix URL", USAGE)
    return LocalStorage(where)
