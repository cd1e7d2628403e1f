"""A restore's journal: the id each ledger gets (recorded before the ledger is created) and
which ledgers are done, so that a restore killed midway and run again finishes the job.

It is kept where the restore writes anyway -- in the target cluster, beside its root
(:class:`~bkctl.wire.metadata.store.RestoreJournals`) -- or in a file the operator names
(``--journal PATH``), never in the archive: a restore only reads the archive, which may be a
read-only mount, an Object Lock bucket or a bucket a read-only role reaches.

What a write costs does not grow with the restore: a journal is a head (the backup, the
target, the mode, when it started and finished) and lines appended as the restore goes, one a
ledger's id (``["id", OLD, NEW]``) and one a ledger done (``["done", OLD]``).  In the cluster the
lines are kept in chunks of at most :data:`~bkctl.wire.metadata.store.RESTORE_CHUNK_BYTES`, the
last one rewritten as it fills, the others never again; in a file they are appended (and
synced), the file written anew, compacted, when a restore resumes from it.

What a restore holds of its journal while it runs does not grow with it either: the ids and
the ledgers done are read into an :class:`~.idtable.IdTable` (a file, looked up as the restore
goes), a file journal is read a line at a time, and the lines not kept yet are at most
:data:`_UNSAVED_LINES`.

A journal an older bkctl wrote -- one JSON document rewritten whole, in the cluster, in a file,
or in the archive (``restores/<key>.json``, read, never written) -- is read, and kept in the
new form from then on.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple, Protocol

from bkctl.wire.bookie_disk.layout import fsync_dir
from bkctl.wire.errors import ObjectMissing

from .idtable import DoneSet, IdMap, IdTable
from .storage import ArchiveStorage

__all__ = ["ClusterPlace", "FilePlace", "Journal", "JournalPlace", "Kept"]

#: the journal is written at most this often while ledgers finish (and at the end)
_JOURNAL_EVERY = 1.0
#: lines held before they are kept, whatever the time: what a journal holds unsaved stays
#: bounded while a million ids are assigned
_UNSAVED_LINES = 8192


class Kept(NamedTuple):
    """A journal as read from its place: its head, the ids given and the ledgers done (in a
    table of their own), and whether it must be written anew before lines are appended to it
    (kept in an older form, or a file with a line a kill cut short)."""

    head: dict[str, Any]
    table: IdTable
    rewrite: bool

    @property
    def ids(self) -> IdMap:
        return self.table.ids

    @property
    def done(self) -> DoneSet:
        return self.table.done


class JournalPlace(Protocol):
    """Where a journal is kept."""

    #: for people: where it is
    where: str

    def read(self) -> Kept | None:
        """The journal kept here (None: none)."""

    def append(self, lines: list[bytes], head: bytes) -> None:
        """``lines`` added after those kept, and ``head`` in place of the head kept."""

    def rewrite(self, lines: Iterable[bytes], head: bytes) -> None:
        """The journal kept here replaced by ``head`` and ``lines``."""


def id_line(old: int, new: int) -> bytes:
    return b'["id",%d,%d]\n' % (old, new)


def done_line(old: int) -> bytes:
    return b'["done",%d]\n' % old


def _parse(lines: Iterable[bytes], table: IdTable) -> None:
    """The journal's ``lines`` read into ``table``."""
    for line in lines:
        if not line.strip():
            continue
        entry = json.loads(line)
        if isinstance(entry, list) and len(entry) == 3 and entry[0] == "id":
            table.give(int(entry[1]), int(entry[2]))
        elif isinstance(entry, list) and len(entry) == 2 and entry[0] == "done":
            table.finish(int(entry[1]))
        else:
            raise ValueError(f"not a line of a restore journal: {line[:60]!r}")


def _from_document(data: bytes) -> Kept:
    """A journal in the one-document form an older bkctl wrote."""
    doc = json.loads(data)
    if not isinstance(doc, dict):
        raise ValueError("not a restore journal")
    table = IdTable()
    table.give_many((int(k), int(v)) for k, v in doc.pop("ids", {}).items())
    for x in doc.pop("done", []):
        table.finish(int(x))
    return Kept(doc, table, rewrite=True)


def _head_bytes(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True).encode()


def _lines(table: IdTable) -> Iterator[bytes]:
    for old, new in table.ids.pairs():
        yield id_line(old, new)
    for old in table.done:
        yield done_line(old)


class ClusterPlace:
    """The target cluster's restore journal ``key`` (``<root>-bkctl-restores/<key>``), in chunks:
    lines appended to the last chunk until it is full, then to a new one; a head counts them."""

    def __init__(self, store: Any, key: str):
        from bkctl.wire.metadata.store import RESTORE_CHUNK_BYTES

        self.store, self.key = store, key
        self.where = f"the target cluster ({store.root}-bkctl-restores/{key})"
        self.limit = RESTORE_CHUNK_BYTES
        self.chunks = 0  # counted by the head
        self.tail = b""  # the last chunk counted, to which lines are appended
        self.head: bytes | None = None  # as kept

    def read(self) -> Kept | None:
        kept = self.store.restores.read_chunks(self.key)
        if kept is None:
            data = self.store.restores.read(self.key)
            return None if data is None else _from_document(data)
        table = IdTable()
        for chunk in kept.chunks:
            _parse(chunk.splitlines(), table)
        self.chunks, self.tail = len(kept.chunks), (kept.chunks[-1] if kept.chunks else b"")
        self.head = kept.head
        return Kept(json.loads(kept.head), table, rewrite=False)

    def append(self, lines: list[bytes], head: bytes) -> None:
        chunks, tail = self.chunks, bytearray(self.tail)
        changed: dict[int, bytes] = {}
        for line in lines:
            if not chunks or (tail and len(tail) + len(line) > self.limit):
                if chunks:
                    changed[chunks - 1] = bytes(tail)
                chunks, tail = chunks + 1, bytearray()
            tail += line
        if lines:
            changed[chunks - 1] = bytes(tail)
        if changed or chunks != self.chunks or head != self.head:  # the chunks, then the head that counts them
            self.store.restores.save(self.key, changed, head, chunks)
        self.chunks, self.tail, self.head = chunks, bytes(tail), head

    def rewrite(self, lines: Iterable[bytes], head: bytes) -> None:
        """(Only a journal the head of which does not count chunks yet -- none, or an older
        form -- is rewritten: a chunk rewritten under a head that counts it would mix two.)"""
        self.chunks, self.tail, self.head = 0, b"", None
        self.append(list(lines), head)


class FilePlace:
    """A local file (``--journal PATH``): a line for the head (the last one counts: the file's
    first, then one after the lines saved with a changed head, never ahead of them) and the
    journal's lines, appended and fsynced (its folder too when the file is new); written anew (a
    temporary file fsynced, renamed into place, its folder fsynced) to compact it or to replace an
    older form."""

    def __init__(self, path: str):
        self.path = path
        self.where = path
        self.head: bytes | None = None  # the head line as last kept
        self.anew = False  # what is kept does not count: the first write replaces it

    def read(self) -> Kept | None:
        """(Read a line at a time: the file is as long as the restore.)"""
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - closed below, read in two ways
        except FileNotFoundError:
            return None
        with f:
            first = f.readline()
            if not first.endswith(b"\n"):  # nothing, or a first line a kill cut short: nothing was kept
                self.anew = True
                return None
            if not first.startswith(b'{"head":'):  # an older bkctl's document, one JSON value
                data = first + f.read()
                doc = json.loads(data)
                if not isinstance(doc, dict):
                    raise ValueError("not a restore journal")
                return _from_document(data)
            head, heads, torn = first.rstrip(b"\n"), 1, False
            table = IdTable()
            entries: list[bytes] = []
            for line in f:
                if not line.endswith(b"\n"):  # the last line a kill cut short: dropped, the file written anew
                    torn = True
                elif line.startswith(b"{"):
                    head, heads = line.rstrip(b"\n"), heads + 1
                else:
                    entries.append(line)
                    if len(entries) >= _UNSAVED_LINES:
                        _parse(entries, table)
                        entries.clear()
            _parse(entries, table)
        self.head = head
        return Kept(json.loads(head)["head"], table, rewrite=torn or heads > 1)

    def append(self, lines: list[bytes], head: bytes) -> None:
        if self.anew:
            self.rewrite(lines, head)
            return
        line = b'{"head":' + head + b"}"
        with open(self.path, "ab") as f:
            made = f.tell() == 0  # (made now, or left empty: its name may not be on disk yet)
            if made:  # a journal's first line is its head
                f.write(line + b"\n")
            f.writelines(lines)
            if line != self.head and not made:  # after the lines: a head is never ahead of them
                f.write(line + b"\n")
            f.flush()
            os.fsync(f.fileno())
        if made:
            fsync_dir(os.path.dirname(os.path.abspath(self.path)))
        self.head = line

    def rewrite(self, lines: Iterable[bytes], head: bytes) -> None:
        part = f"{self.path}.part-{os.getpid()}"
        line = b'{"head":' + head + b"}"
        with open(part, "wb") as f:
            f.write(line + b"\n")
            f.writelines(lines)
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, self.path)
        fsync_dir(os.path.dirname(os.path.abspath(self.path)))
        self.head, self.anew = line, False


class Journal:
    """What a restore did so far (see the module documentation): ``doc`` its head, ``ids`` the
    id each ledger gets (:meth:`assign`), ``done`` the ledgers written whole (:meth:`finish_ledger`),
    both in ``table`` (a file, until :meth:`close`), kept at ``place`` by :meth:`save`."""

    def __init__(self, place: JournalPlace, doc: dict[str, Any], table: IdTable, kept: bool = False):
        self.place, self.doc = place, doc
        self.table = table
        self.ids, self.done = table.ids, table.done
        self.lock = threading.Lock()
        self._saved = 0.0
        self._unsaved: list[bytes] = []
        self._head = _head_bytes(doc) if kept else None  # the head as last kept

    @classmethod
    def open(cls, place: JournalPlace, fresh: dict[str, Any], archive: ArchiveStorage, key: str) -> Journal:
        """The journal kept at ``place``; else the one an older bkctl kept in ``archive``; else ``fresh``."""
        try:
            kept = place.read()
            if kept is None:
                try:
                    kept = _from_document(archive.get(f"restores/{key}.json"))
                except ObjectMissing:
                    return cls(place, fresh, IdTable())
        except (ValueError, KeyError, TypeError) as exc:
            from ..exitcodes import USAGE, CommandError

            raise CommandError(f"the restore journal in {place.where} does not read ({exc})", USAGE) from None
        if kept.rewrite:  # the older form, or a line cut short: written anew before anything is added
            place.rewrite(_lines(kept.table), _head_bytes(kept.head))
        return cls(place, kept.head, kept.table, kept=True)

    def assign(self, old: int, new: int) -> None:
        """Ledger ``old`` is created as ``new`` (kept at the next :meth:`save`, before it is created)."""
        with self.lock:
            self.table.give(old, new)
            self._unsaved.append(id_line(old, new))
            full = len(self._unsaved) >= _UNSAVED_LINES
        if full:
            self.save()

    def save(self, force: bool = True) -> None:
        """What changed since the last save kept (unless not ``force`` and it was less than a
        second ago): the lines added, the head if it changed."""
        with self.lock:
            now = time.monotonic()
            if not force and now - self._saved < _JOURNAL_EVERY:
                return
            self._saved = now
            head = _head_bytes(self.doc)
            if not self._unsaved and head == self._head:
                return
            # under the lock: an older state never overwrites a newer one; kept for the next
            # save should this one fail
            self.place.append(self._unsaved, head)
            self._unsaved, self._head = [], head

    def finish_ledger(self, old: int) -> None:
        with self.lock:
            self.table.finish(old)
            self._unsaved.append(done_line(old))
        self.save(force=False)

    def close(self) -> None:
        """The table of ids and ledgers done let go (what is kept at ``place`` stays)."""
        self.table.close()
