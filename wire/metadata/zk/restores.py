"""bkctl's restore journals (:class:`~bkctl.wire.metadata.store.RestoreJournals`) on ZooKeeper,
under ``<root>-bkctl-restores/<key>``.

Kept in chunks (what a restore writes): the key's value is ``chunks N`` and a line break, then
the head; its children ``chunk-NNNNNN`` the chunks, each written on its own (a set, or a create
the first time), the first N of them read.  A chunk is written before a head counts it, so a
kill at any point leaves the journal as the last head counted it, never a part of it.  A save
(:meth:`ZKRestoreJournals.save`) writes its chunks and the head in one multi -- one request and
one write of ZooKeeper's log, not three to eight -- once this store knows what the key holds
(it read it, or wrote it): the chunks the head counts set, the others created, the head set; or,
with nothing under the key, the key and its chunks created.  A multi that fails (a chunk a
stopped restore wrote past the count, the key cleared meanwhile) changes nothing, and the save
is made one write at a time as before.

The one-document form an older bkctl wrote: the key's value is the number of parts once every
part is written (empty while they are), its children ``part-NNNNNN`` the bytes in pieces under
ZooKeeper's 1 MiB node limit; still read, and replaced by the first head written under its key.

A journal lives in the cluster it restores into -- beside the cluster root, so that Java's tools
never walk into it -- and not in the archive, which a restore only reads (a read-only mount, an
Object Lock bucket, a read-only role)."""

from __future__ import annotations

from collections.abc import Mapping

from kazoo.exceptions import NodeExistsError, NoNodeError

from bkctl.wire.metadata import paths as P
from bkctl.wire.metadata.errors import MetadataStoreError
from bkctl.wire.metadata.store import RESTORE_CHUNK_BYTES, RestoreJournalChunks
from bkctl.wire.metadata.zk.session import Manager, ZKSession, zk_call

__all__ = ["JOURNAL_PART_BYTES", "ZKRestoreJournals"]

#: the start of a chunked journal's value: ``chunks N`` and a line break, then the head
_CHUNKED = b"chunks "

#: bytes per part of the one-document form: well under jute.maxbuffer (1 MiB by default) with the request's own bytes
JOURNAL_PART_BYTES = 512 * 1024


#: what :attr:`ZKRestoreJournals.known` says of a key under which nothing is kept
_NOTHING = -1


class ZKRestoreJournals(Manager):
    """Read, write and clear restore journals, by key."""

    def __init__(self, session: ZKSession):
        super().__init__(session)
        #: key -> the chunks its head counts (kept in chunks), or :data:`_NOTHING`, as this store
        #: last read or wrote it (a key not here: not known, saved one write at a time)
        self.known: dict[str, int] = {}

    def _path(self, key: str) -> str:
        if not key or "/" in key or key.startswith("."):
            raise ValueError(f"bad restore journal key {key!r}")
        return f"{P.restore_journals_path(self._root)}/{key}"

    @zk_call
    def read(self, key: str) -> bytes | None:
        path = self._path(key)
        count_bytes = self._value(path)
        if count_bytes is None or not count_bytes or count_bytes.startswith(_CHUNKED):
            return None  # being written, or kept in chunks
        return b"".join(self._children(path, "part", count_bytes))

    @zk_call
    def write(self, key: str, data: bytes) -> None:
        path = self._path(key)
        self.known.pop(key, None)
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
    def read_chunks(self, key: str) -> RestoreJournalChunks | None:
        path = self._path(key)
        value = self._value(path)
        if value is None:
            self.known[key] = _NOTHING
            return None
        if not value.startswith(_CHUNKED):
            self.known.pop(key, None)
            return None  # the one-document form, or no head written yet
        first, _, head = value.partition(b"\n")
        chunks = RestoreJournalChunks(head, self._children(path, "chunk", first[len(_CHUNKED) :]))
        self.known[key] = len(chunks.chunks)
        return chunks

    def _value(self, path: str) -> bytes | None:
        try:
            return self._session.get(path)[0]
        except NoNodeError:
            return None

    def _children(self, path: str, kind: str, count_bytes: bytes) -> list[bytes]:
        """The values of ``path``'s children ``<kind>-000000`` on, as many as ``count_bytes`` says."""
        try:
            count = int(count_bytes)
        except ValueError:
            raise MetadataStoreError(f"{path}: not a count of {kind}s: {count_bytes[:40]!r}") from None
        values = []
        for index in range(count):
            try:
                values.append(self._session.get(f"{path}/{kind}-{index:06d}")[0])
            except NoNodeError:
                raise MetadataStoreError(f"{path}: {kind} {index} of {count} is missing") from None
        return values

    @zk_call
    def write_chunk(self, key: str, index: int, data: bytes) -> None:
        self._write_chunk(self._path(key), index, data)

    def _write_chunk(self, path: str, index: int, data: bytes) -> None:
        _check_chunk(index, data)
        chunk = f"{path}/chunk-{index:06d}"
        try:
            self._zk.set(chunk, data)
            return
        except NoNodeError:
            pass
        self._session.ensure_parents(chunk)  # the key too: empty, read as no journal until a head
        self._zk.create(chunk, data)

    @zk_call
    def write_head(self, key: str, head: bytes, chunks: int) -> None:
        self.known.pop(key, None)
        self._write_head(self._path(key), head, chunks)
        self.known[key] = chunks

    def _write_head(self, path: str, head: bytes, chunks: int) -> None:
        value = _head_value(head, chunks)
        was = self._value(path)
        if was is None:
            self._session.ensure_parents(path)
            self._zk.create(path, value)
            return
        self._zk.set(path, value)
        if not was.startswith(_CHUNKED):  # the one-document form replaced: its parts go
            for child in self._session.children_or_empty(path):
                if child.startswith("part-"):
                    self._session.delete_quiet(f"{path}/{child}")

    @zk_call
    def save(self, key: str, chunks: Mapping[int, bytes], head: bytes, count: int) -> None:
        path = self._path(key)
        for index, data in chunks.items():
            _check_chunk(index, data)
        known = self.known.pop(key, None)  # (not known while the save is under way)
        if known is not None and self._save_at_once(path, chunks, _head_value(head, count), known):
            self.known[key] = count
            return
        for index, data in sorted(chunks.items()):  # each chunk before the head that counts it
            self._write_chunk(path, index, data)
        self._write_head(path, head, count)
        self.known[key] = count

    def _save_at_once(self, path: str, chunks: Mapping[int, bytes], value: bytes, known: int) -> bool:
        """The chunks and the head in one multi, as the key was ``known`` to hold: whether it
        was written (else nothing was)."""
        txn = self._zk.transaction()
        if known == _NOTHING:
            txn.create(path, value)
        for index, data in sorted(chunks.items()):
            chunk = f"{path}/chunk-{index:06d}"
            if index < known:
                txn.set_data(chunk, data)
            else:
                txn.create(chunk, data)
        if known != _NOTHING:
            txn.set_data(path, value)
        return not any(isinstance(result, Exception) for result in txn.commit())

    @zk_call
    def kept(self) -> list[str]:
        return sorted(self._session.children_or_empty(P.restore_journals_path(self._root)))

    @zk_call
    def clear(self, key: str) -> None:
        self.known.pop(key, None)
        self._session.delete_tree(self._path(key))


def _check_chunk(index: int, data: bytes) -> None:
    if len(data) > RESTORE_CHUNK_BYTES or index < 0:
        raise ValueError(f"restore journal chunk {index} of {len(data)} bytes: at most {RESTORE_CHUNK_BYTES}")


def _head_value(head: bytes, chunks: int) -> bytes:
    return _CHUNKED + str(chunks).encode() + b"\n" + head
