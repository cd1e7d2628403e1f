"""A restore's ledger ids -- the new id each ledger of the backup gets, and the ledgers done --
kept in a file while the restore runs, not in memory.

A restore of 10^6 ledgers held them in a dict and a set: some 150 MiB of Python objects, and a
copy of the dict beside it.  Here they live in a SQLite file in a temporary directory of their
own (removed when the table is closed, or collected): written a batch at a time (at most
:data:`HELD` entries wait in memory, :attr:`IdTable.held` counts them), read back by lookup as
each ledger is written and each id a managed ledger, a cursor or a schema names is rewritten,
or in ascending old ids a page at a time.  SQLite's page cache is bounded (:data:`CACHE_KIB`),
so what the restore holds stays the same from 10^3 ledgers to 10^7.  The file is a scratch
copy: what survives a kill is the restore's journal (:mod:`.journal`), from which a rerun fills
a new table.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping, Set

__all__ = ["CACHE_KIB", "HELD", "DoneSet", "IdMap", "IdTable"]

#: entries (ids given, ledgers done) waiting in memory before they are written to the file
HELD = 4096
#: SQLite's page cache, KiB
CACHE_KIB = 4096
#: rows read a query when the table is walked in order
_PAGE = 4096


def _remove(db: sqlite3.Connection, directory: str) -> None:
    db.close()
    shutil.rmtree(directory, ignore_errors=True)


class IdTable:
    """The ids given (old -> new, :attr:`ids`) and the ledgers done (:attr:`done`) of one
    restore, in a file; safe to use from the restore's threads."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="bkctl-restore-ids-")
        db = sqlite3.connect(os.path.join(self._dir, "ids.sqlite"), check_same_thread=False, isolation_level=None)
        for pragma in ("journal_mode=OFF", "synchronous=OFF", f"cache_size=-{CACHE_KIB}", "temp_store=FILE"):
            db.execute(f"PRAGMA {pragma}")
        db.execute("CREATE TABLE ids (old INTEGER PRIMARY KEY, new INTEGER NOT NULL)")
        db.execute("CREATE TABLE done (old INTEGER PRIMARY KEY)")
        self._db = db
        self._lock = threading.RLock()
        self._ids: dict[int, int] = {}  # waiting to be written
        self._done: set[int] = set()
        self._finalize = weakref.finalize(self, _remove, db, self._dir)
        self.ids = IdMap(self)
        self.done = DoneSet(self)

    @property
    def directory(self) -> str:
        """The temporary directory the file is in (removed by :meth:`close`)."""
        return self._dir

    # -- writing ---------------------------------------------------------------------------
    @property
    def held(self) -> int:
        """Entries waiting in memory (never more than :data:`HELD`)."""
        return len(self._ids) + len(self._done)

    def give(self, old: int, new: int) -> None:
        """Ledger ``old`` gets id ``new``."""
        with self._lock:
            self._ids[old] = new
            if self.held >= HELD:
                self.flush()

    def give_many(self, pairs: Iterable[tuple[int, int]]) -> None:
        for old, new in pairs:
            self.give(old, new)

    def finish(self, old: int) -> None:
        """Ledger ``old`` is done."""
        with self._lock:
            self._done.add(old)
            if self.held >= HELD:
                self.flush()

    def flush(self) -> None:
        """What waits in memory written to the file (one transaction)."""
        with self._lock:
            if not self._ids and not self._done:
                return
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO ids VALUES (?, ?)", self._ids.items())
            self._db.executemany("INSERT OR IGNORE INTO done VALUES (?)", ((x,) for x in self._done))
            self._db.execute("COMMIT")
            self._ids, self._done = {}, set()

    def close(self) -> None:
        """The file removed (the table is empty afterwards and must not be used)."""
        self._finalize()

    # -- reading ---------------------------------------------------------------------------
    def new_id(self, old: int) -> int | None:
        with self._lock:
            if old in self._ids:
                return self._ids[old]
            row = self._db.execute("SELECT new FROM ids WHERE old = ?", (old,)).fetchone()
        return None if row is None else int(row[0])

    def is_done(self, old: int) -> bool:
        with self._lock:
            if old in self._done:
                return True
            return self._db.execute("SELECT 1 FROM done WHERE old = ?", (old,)).fetchone() is not None

    def count(self, table: str) -> int:
        with self._lock:
            self.flush()
            return int(self._db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # noqa: S608 - ours

    def rows(self, table: str) -> Iterator[tuple[int, ...]]:
        """The rows of ``table`` in ascending old ids, read :data:`_PAGE` at a time (rows
        written meanwhile above the last one read are seen too)."""
        columns = "old, new" if table == "ids" else "old"
        query = f"SELECT {columns} FROM {table} WHERE old > ? ORDER BY old LIMIT ?"  # noqa: S608 - our names
        after = -(2**63)  # below every id
        while True:
            with self._lock:
                self.flush()
                page = self._db.execute(query, (after, _PAGE)).fetchall()
            yield from page
            if len(page) < _PAGE:
                return
            after = page[-1][0]


class IdMap(Mapping[int, int]):
    """The ids given, old -> new, as a read-only mapping (compares equal to a dict of the same)."""

    def __init__(self, table: IdTable):
        self.table = table

    def __getitem__(self, old: int) -> int:
        new = self.table.new_id(old)
        if new is None:
            raise KeyError(old)
        return new

    def get(self, old: int, default=None):  # type: ignore[override] # a lookup, not the default's walk
        new = self.table.new_id(old)
        return default if new is None else new

    def __contains__(self, old: object) -> bool:
        return isinstance(old, int) and self.table.new_id(old) is not None

    def __iter__(self) -> Iterator[int]:
        return (row[0] for row in self.table.rows("ids"))

    def __len__(self) -> int:
        return self.table.count("ids")

    def pairs(self) -> Iterator[tuple[int, int]]:
        """(old, new) in ascending old ids."""
        return ((row[0], row[1]) for row in self.table.rows("ids"))


class DoneSet(Set[int]):
    """The ledgers done, as a read-only set (compares equal to a set of the same)."""

    def __init__(self, table: IdTable):
        self.table = table

    @classmethod
    def _from_iterable(cls, it: Iterable[int]) -> set[int]:  # type: ignore[override] # ``|``, ``&``: a plain set
        return set(it)

    def __contains__(self, old: object) -> bool:
        return isinstance(old, int) and self.table.is_done(old)

    def __iter__(self) -> Iterator[int]:
        return (row[0] for row in self.table.rows("done"))

    def __len__(self) -> int:
        return self.table.count("done")
