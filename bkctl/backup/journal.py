"""A restore's journal: the id each ledger gets (recorded before the ledger is created) and
which ledgers are done, so that a restore killed midway and run again finishes the job.

It is kept where the restore writes anyway -- in the target cluster, beside its root
(:class:`~bkctl.wire.metadata.store.RestoreJournals`) -- or in a file the operator names
(``--journal PATH``), never in the archive: a restore only reads the archive, which may be a
read-only mount, an Object Lock bucket or a bucket a read-only role reaches.  A journal an
older bkctl left in the archive (``restores/<key>.json``) is read, never written.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Protocol

from bkctl.wire.errors import ObjectMissing

from .storage import ArchiveStorage

__all__ = ["ClusterPlace", "FilePlace", "Journal", "JournalPlace"]

#: the journal is written at most this often while ledgers finish (and at the end)
_JOURNAL_EVERY = 1.0


class JournalPlace(Protocol):
    """Where a journal is kept: its bytes read and written whole."""

    #: for people: where it is
    where: str

    def read(self) -> bytes | None: ...

    def write(self, data: bytes) -> None: ...


class ClusterPlace:
    """The target cluster's restore journal ``key`` (``<root>-bkctl-restores/<key>``)."""

    def __init__(self, store: Any, key: str):
        self.store, self.key = store, key
        self.where = f"the target cluster ({store.root}-bkctl-restores/{key})"

    def read(self) -> bytes | None:
        data: bytes | None = self.store.restores.read(self.key)
        return data

    def write(self, data: bytes) -> None:
        self.store.restores.write(self.key, data)


class FilePlace:
    """A local file (``--journal PATH``), replaced whole (a temporary file renamed into place)."""

    def __init__(self, path: str):
        self.path = path
        self.where = path

    def read(self) -> bytes | None:
        try:
            with open(self.path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def write(self, data: bytes) -> None:
        part = f"{self.path}.part-{os.getpid()}"
        with open(part, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, self.path)


class Journal:
    """What a restore did so far (see the module documentation)."""

    def __init__(self, place: JournalPlace, doc: dict[str, Any]):
        self.place, self.doc = place, doc
        self.ids: dict[int, int] = {int(k): v for k, v in doc.get("ids", {}).items()}
        self.done: set[int] = set(doc.get("done", []))
        self.lock = threading.Lock()
        self._saved = 0.0

    @classmethod
    def open(cls, place: JournalPlace, fresh: dict[str, Any], archive: ArchiveStorage, key: str) -> Journal:
        """The journal kept at ``place``; else the one an older bkctl kept in ``archive``; else ``fresh``."""
        data = place.read()
        if data is None:
            try:
                data = archive.get(f"restores/{key}.json")
            except ObjectMissing:
                data = None
        if data is None:
            return cls(place, fresh)
        try:
            doc = json.loads(data)
        except ValueError as exc:
            from ..exitcodes import USAGE, CommandError

            raise CommandError(f"the restore journal in {place.where} does not read ({exc})", USAGE) from None
        return cls(place, doc)

    def save(self, force: bool = True) -> None:
        with self.lock:
            now = time.monotonic()
            if not force and now - self._saved < _JOURNAL_EVERY:
                return
            self._saved = now
            self.doc["ids"] = {str(k): v for k, v in sorted(self.ids.items())}
            self.doc["done"] = sorted(self.done)
            data = json.dumps(self.doc, indent=1, sort_keys=True).encode() + b"\n"
            self.place.write(data)  # under the lock: an older state never overwrites a newer one

    def finish_ledger(self, old: int) -> None:
        with self.lock:
            self.done.add(old)
        self.save(force=False)
