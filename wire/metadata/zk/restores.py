"""bkctl's restore journals (:class:`~bkctl.wire.metadata.store.RestoreJournals`) on ZooKeeper:
``<root>-bkctl-restores/<key>`` holds the number of parts once every part is written, its
children ``part-NNNNNN`` the bytes in pieces under ZooKeeper's 1 MiB node limit.

A journal lives in the cluster it restores into -- beside the cluster root, so that Java's tools
never walk into it -- and not in the archive, which a restore only reads (a read-only mount, an
Object Lock bucket, a read-only role).  Written in that order (the count emptied first, the
parts, then the count), a kill at any point leaves either the old whole or nothing readable."""

from __future__ import annotations

from kazoo.exceptions import NodeExistsError, NoNodeError

from bkctl.wire.metadata import paths as P
from bkctl.wire.metadata.errors import MetadataStoreError
from bkctl.wire.metadata.zk.session import Manager, zk_call

__all__ = ["JOURNAL_PART_BYTES", "ZKRestoreJournals"]

#: bytes per part: well under jute.maxbuffer (1 MiB by default) with the request's own bytes
JOURNAL_PART_BYTES = 512 * 1024


class ZKRestoreJournals(Manager):
    """Read, write and clear restore journals, by key."""

    def _path(self, key: str) -> str:
        if not key or "/" in key or key.startswith("."):
            raise ValueError(f"bad restore journal key {key!r}")
        return f"{P.restore_journals_path(self._root)}/{key}"

    @zk_call
    def read(self, key: str) -> bytes | None:
        path = self._path(key)
        try:
            count_bytes, _ = self._session.get(path)
        except NoNodeError:
            return None
        if not count_bytes:
            return None  # being written
        try:
            count = int(count_bytes)
        except ValueError:
            raise MetadataStoreError(f"{path}: not a count of parts: {count_bytes[:40]!r}") from None
        pieces = []
        for index in range(count):
            try:
                pieces.append(self._session.get(f"{path}/part-{index:06d}")[0])
            except NoNodeError:
                raise MetadataStoreError(f"{path}: part {index} of {count} is missing") from None
        return b"".join(pieces)

    @zk_call
    def write(self, key: str, data: bytes) -> None:
        path = self._path(key)
        self._session.ensure_parents(path)
        try:
            self._zk.create(path, b"")
        except NodeExistsError:
            self._zk.set(path, b"")  # the old whole no longer counts
        for child in self._session.children_or_empty(path):
            self._session.delete_quiet(f"{path}/{child}")
        step = JOURNAL_PART_BYTES
        pieces = [data[i : i + step] for i in range(0, len(data), step)] or [b""]
        for index, piece in enumerate(pieces):
            self._zk.create(f"{path}/part-{index:06d}", piece)
        self._zk.set(path, str(len(pieces)).encode())

    @zk_call
    def kept(self) -> list[str]:
        return sorted(self._session.children_or_empty(P.restore_journals_path(self._root)))

    @zk_call
    def clear(self, key: str) -> None:
        self._session.delete_tree(self._path(key))
