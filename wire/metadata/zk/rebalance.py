"""bkctl's saved rebalance (:class:`~bkctl.wire.metadata.store.SavedRebalance`) on ZooKeeper:
``<root>-bkctl-rebalance`` holds the number of parts once every part is written, its children
``part-NNNNNN`` the bytes in pieces under ZooKeeper's 1 MiB node limit.

Written in that order (the count empty first, the parts, then the count), a kill at any point
leaves either the old whole or nothing readable: a reader trusts the count alone.

``<root>-bkctl-running``, an ephemeral node of the running run's session, holds its record
(:mod:`bkctl.wire.rebalance.executor`)."""

from __future__ import annotations

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from bkctl.wire.metadata import paths as P
from bkctl.wire.metadata.errors import MetadataStoreError
from bkctl.wire.metadata.zk.session import Manager, zk_call

__all__ = ["PART_BYTES", "ZKSavedRebalance"]

#: bytes per part: well under jute.maxbuffer (1 MiB by default) with the request's own bytes
PART_BYTES = 512 * 1024


def _part(path: str, index: int) -> str:
    return f"{path}/part-{index:06d}"


class ZKSavedRebalance(Manager):
    """Read, write and clear the saved rebalance."""

    @property
    def _path(self) -> str:
        return P.saved_rebalance_path(self._root)

    @zk_call
    def read(self) -> bytes | None:
        try:
            count_bytes, _ = self._session.get(self._path)
        except NoNodeError:
            return None
        if not count_bytes:
            return None  # being written, or cleared
        try:
            count = int(count_bytes)
        except ValueError:
            raise MetadataStoreError(f"{self._path}: not a count of parts: {count_bytes[:40]!r}") from None
        parts = []
        for index in range(count):
            try:
                parts.append(self._session.get(_part(self._path, index))[0])
            except NoNodeError:
                raise MetadataStoreError(f"{self._path}: part {index} of {count} is missing") from None
        return b"".join(parts)

    @zk_call
    def write(self, data: bytes) -> None:
        path = self._path
        try:
            self._zk.create(path, b"")
        except NodeExistsError:
            self._zk.set(path, b"")  # what was kept no longer counts
        for child in self._session.children_or_empty(path):
            self._session.delete_quiet(f"{path}/{child}")
        pieces = [data[i : i + PART_BYTES] for i in range(0, len(data), PART_BYTES)] or [b""]
        for index, piece in enumerate(pieces):
            self._zk.create(_part(path, index), piece)
        self._zk.set(path, str(len(pieces)).encode())

    @zk_call
    def clear(self) -> None:
        path = self._path
        try:
            self._zk.set(path, b"")
        except NoNodeError:
            return
        self._session.delete_tree(path)

    @property
    def _run_path(self) -> str:
        return P.rebalance_run_path(self._root)

    @zk_call
    def claim(self, data: bytes) -> tuple[bytes, int] | None:
        for _ in range(5):
            try:
                self._zk.create(self._run_path, data, ephemeral=True)
                return None
            except NodeExistsError:
                pass
            try:
                found, stat = self._session.get(self._run_path)
            except NoNodeError:
                continue  # it ended meanwhile: claim again
            return found, stat.version
        raise MetadataStoreError(f"{self._run_path} keeps coming and going")

    @zk_call
    def running(self) -> tuple[bytes, int] | None:
        try:
            found, stat = self._session.get(self._run_path)
        except NoNodeError:
            return None
        return found, stat.version

    @zk_call
    def update_running(self, data: bytes, version: int) -> bool:
        try:
            self._zk.set(self._run_path, data, version)
        except (NoNodeError, BadVersionError):
            return False
        return True

    @zk_call
    def drop_running(self, version: int | None = None) -> bool:
        if version is None:
            return self._session.delete_own(self._run_path)
        try:
            self._zk.delete(self._run_path, version)
        except (NoNodeError, BadVersionError):
            return False
        return True
