"""The LMDB index (Java's EntryLocationIndex and LedgerMetadataIndex in one environment).

``D/current/index.lmdb/`` holds four named databases::

    idx      key i64 ledgerId | i64 entryId  ->  u64 log id | u32 record offset | u32 record length
    ledgers  key i64 ledgerId  ->  the ledger's state (see ledger_state)
    logs     key u64 log id  ->  u64 committed size | u64 live bytes | u64 live entries
    meta     b"format" -> u32 version; b"next_log" -> u64 next log id

The ``logs`` table says which entry logs hold committed entries and how many of
their bytes are still live; it changes in the same transaction as the ``idx``
rows that point into (or away from) a log, so the live counts are always those
of the committed index. :class:`EntryLocationIndex` keeps a copy of it in
memory (``logs``), replaced as a whole after each commit.
"""
from __future__ import annotations

import os
import struct
from typing import Iterable, NamedTuple

import lmdb

from .ledger_state import LedgerState

FORMAT_VERSION = 1
INDEX_DIR = "index.lmdb"

_U32 = struct.Struct(">I")
U64 = struct.Struct(">Q")
I64 = struct.Struct(">q")
KEY = struct.Struct(">qq")
LOC = struct.Struct(">QII")
LOGROW = struct.Struct(">QQQ")


class Location(NamedTuple):
    log_id: int
    offset: int  # of the record (its crc field)
    length: int  # of the whole record


def apply_log_deltas(logs: dict, added: dict, dead: dict, header_size: int) -> dict:
    """A copy of the ``logs`` table with ``added`` (log id -> [end offset, bytes, entries])
    and ``dead`` (log id -> [bytes, entries]) applied."""
    new_logs = dict(logs)
    for lid, (end, b, cnt) in added.items():
        row = list(new_logs.get(lid, (header_size, 0, 0)))
        row[0] = max(row[0], end)
        row[1] += b
        row[2] += cnt
        new_logs[lid] = row
    for lid, (b, cnt) in dead.items():
        if lid in new_logs:
            row = list(new_logs[lid])
            row[1] = max(0, row[1] - b)
            row[2] = max(0, row[2] - cnt)
            new_logs[lid] = row
    return new_logs


def count_dead(dead: dict, raw_location: bytes) -> None:
    """Add the record an index row pointed at to ``dead`` (log id -> [bytes, entries])."""
    lid, _off, length = LOC.unpack(raw_location)
    acc = dead.setdefault(lid, [0, 0])
    acc[0] += length
    acc[1] += 1


class EntryLocationIndex:
    """The index of one ledger directory, opened for writing (one per process)."""

    def __init__(self, directory: str, map_size: int):
        self.directory = directory
        self.env = lmdb.open(os.path.join(directory, INDEX_DIR), map_size=int(map_size),
                             max_dbs=4, subdir=True, sync=True, metasync=True, readahead=False, lock=True)
        try:
            self.idx = self.env.open_db(b"idx")
            self.ledger_db = self.env.open_db(b"ledgers")
            self.log_db = self.env.open_db(b"logs")
            self.meta = self.env.open_db(b"meta")
        except BaseException:
            self.env.close()
            raise
        #: log id -> [committed size, live bytes, live entries] (the committed ``logs`` table)
        self.logs: dict[int, list[int]] = {}

    def load(self) -> tuple[int, dict[int, LedgerState]]:
        """Check the format, read the ``logs`` table (dropping rows of logs without live
        entries: a crash between commit and unlink); returns (next log id, ledger states)."""
        ledgers = {}
        with self.env.begin(write=True) as txn:
            fmt = txn.get(b"format", db=self.meta)
            if fmt is None:
                txn.put(b"format", _U32.pack(FORMAT_VERSION), db=self.meta)
            elif _U32.unpack(fmt)[0] != FORMAT_VERSION:
                raise ValueError(f"{self.directory}: entry store format {_U32.unpack(fmt)[0]} is not "
                                 f"{FORMAT_VERSION}")
            raw = txn.get(b"next_log", db=self.meta)
            next_log = U64.unpack(raw)[0] if raw else 1
            for k, v in txn.cursor(db=self.ledger_db):
                ledgers[I64.unpack(k)[0]] = LedgerState.decode(v)
            for k, v in txn.cursor(db=self.log_db):
                self.logs[U64.unpack(k)[0]] = list(LOGROW.unpack(v))
            for lid in [lid for lid, row in self.logs.items() if row[2] == 0]:
                txn.delete(U64.pack(lid), db=self.log_db)
                del self.logs[lid]
        return next_log, ledgers

    # -- reads (any thread; LMDB readers never wait for the writer)
    def get(self, key: bytes) -> bytes | None:
        txn = self.env.begin(db=self.idx)
        try:
            return txn.get(key)
        finally:
            txn.abort()

    def get_many(self, keys: list[bytes]) -> list:
        txn = self.env.begin(db=self.idx)
        try:
            return list(map(txn.get, keys))
        finally:
            txn.abort()

    def entry_ids(self, ledger_id: int) -> list[int]:
        """The ledger's flushed entry ids, ascending (its index rows; no entry is read)."""
        prefix = I64.pack(ledger_id)
        ids: list[int] = []
        txn = self.env.begin(db=self.idx)
        try:
            cur = txn.cursor()
            if cur.set_range(KEY.pack(ledger_id, 0)):
                for k in cur.iternext(values=False):
                    if k[:8] != prefix:
                        break
                    ids.append(KEY.unpack(k)[1])
        finally:
            txn.abort()
        return ids

    def write(self):
        """A write transaction (``with index.write() as txn``); commits with an fsync."""
        return self.env.begin(write=True)

    # -- writes (the store's flush lock held)
    def put_log_rows(self, txn, new_logs: dict, changed: Iterable[int], keep: set) -> list[int]:
        """Write the ``logs`` rows of ``changed`` logs from ``new_logs``; those left without
        live entries (unless in ``keep``, logs still being appended to) are removed from
        it and from the table. Returns the removed ids (to unlink after the commit)."""
        emptied = []
        for lid in changed:
            row = new_logs.get(lid)
            if row is None:
                continue
            if row[2] == 0 and lid not in keep:
                emptied.append(lid)
                del new_logs[lid]
                txn.delete(U64.pack(lid), db=self.log_db)
            else:
                txn.put(U64.pack(lid), LOGROW.pack(*row), db=self.log_db)
        return emptied

    def drop_log_row(self, txn, new_logs: dict, log_id: int) -> None:
        new_logs.pop(log_id, None)
        txn.delete(U64.pack(log_id), db=self.log_db)

    def put_ledger(self, txn, ledger_id: int, raw: bytes) -> None:
        txn.put(I64.pack(ledger_id), raw, db=self.ledger_db)

    def put_next_log(self, txn, next_log: int) -> None:
        txn.put(b"next_log", U64.pack(next_log), db=self.meta)

    def delete_ledger_rows(self, txn, ledger_id: int, dead: dict) -> int:
        """Delete the ledger's index rows and state row; their records are added to ``dead``."""
        prefix = I64.pack(ledger_id)
        count = 0
        cur = txn.cursor(db=self.idx)
        ok = cur.set_range(KEY.pack(ledger_id, 0))
        while ok:
            k = cur.key()
            if not k or k[:8] != prefix:
                break
            count_dead(dead, cur.value())
            count += 1
            ok = cur.delete()
        txn.delete(prefix, db=self.ledger_db)
        return count

    def size_on_disk(self) -> int:
        idir = os.path.join(self.directory, INDEX_DIR)
        return sum(os.path.getsize(os.path.join(idir, name)) for name in os.listdir(idir))

    def close(self) -> None:
        self.env.close()
