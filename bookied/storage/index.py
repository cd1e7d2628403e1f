"""The LMDB index (Java's EntryLocationIndex and LedgerMetadataIndex in one environment).

``D/current/index.lmdb/`` holds four named databases::

    runs     key i64 ledgerId | i64 first entryId  ->  u64 log id | u32 offset * (n + 1)
    ledgers  key i64 ledgerId  ->  the ledger's state (see ledger_state)
    logs     key u64 log id  ->  u64 committed size | u64 live bytes | u64 live entries
    meta     b"format" -> u32 version; b"next_log" -> u64 next log id

A ``runs`` row locates n entries of one ledger (ids first .. first+n-1, at most
:data:`RUN_MAX`) whose records lie back to back in one entry log: entry first+j's
record starts at offset j and ends where the next starts (the last offset is the
end of the run).  A flush writes each ledger's entries back to back, so one row
holds what one flush wrote of a ledger, 4 bytes an entry; a row per entry (format 1,
``idx``: key, log id, offset, length) took 42 bytes with LMDB's node and pointer, and
split leaves half full as entries of interleaved ledgers arrived.  Measured under
bench_compaction's churn (16,000 rows): 283 leaf pages at 58% full and a 2.2 MiB file;
a format 1 index is rewritten as runs when opened.

Every change of a ledger's rows rewrites the runs it touches (a re-put also the ones
either side), in the caller's transaction: the index stays one LMDB transaction per
flush, deletion or switch.
Outside this module an index row is still ``(KEY bytes, LOC bytes)`` (an
:class:`IndexRow`): what the entry log's appends produce and compaction compares
(a :class:`Move`).

The ``logs`` table says which entry logs hold committed entries and how many of
their bytes are still live; it changes in the same transaction as the ``runs``
rows that point into (or away from) a log, so the live counts are always those
of the committed index. :class:`EntryLocationIndex` keeps a copy of it in
memory (``logs``), replaced as a whole after each commit.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable, Iterator
from itertools import compress, repeat
from operator import ne, sub
from typing import NamedTuple

import lmdb

# a row's key and location, as the entry log's record twins make them
from bkctl.wire.bookie_disk.records import KEY, LOC

from .entry_log import Placed
from .errors import IndexUnavailable
from .ledger_state import LedgerState

FORMAT_VERSION = 2
#: the format whose ``idx`` rows are rewritten as ``runs`` at open
FORMAT_ROWS = 1
#: format 1 rows rewritten as runs per transaction, about (whole ledgers)
REWRITE_ROWS = 1_000_000
INDEX_DIR = "index.lmdb"

_U32 = struct.Struct(">I")
U64 = struct.Struct(">Q")
I64 = struct.Struct(">q")
LOGROW = struct.Struct(">QQQ")
_SPAN = struct.Struct(">II")  # a record's offset and the next one's (its end)
#: entries in one ``runs`` row at most (a 1,036-byte value: a leaf page holds three)
RUN_MAX = 256


class Location(NamedTuple):
    log_id: int
    offset: int  # of the record (its crc field)
    length: int  # of the whole record


class IndexRow(NamedTuple):
    """One entry's index row as it leaves this module: its key and its location, packed."""

    key: bytes  # KEY: ledger id, entry id
    location: bytes  # LOC: log id, offset, length

    def ids(self) -> tuple[int, int]:
        """(ledger id, entry id)"""
        lid, eid = KEY.unpack(self.key)
        return lid, eid

    def where(self) -> Location:
        return Location._make(LOC.unpack(self.location))


class Move(NamedTuple):
    """A row compaction switches (:meth:`EntryLocationIndex.switch`): the location it
    held when its record was copied, and the copy's (None: the row is deleted)."""

    key: bytes
    old: bytes
    new: bytes | None


#: per entry log id, what a write added: ``[end offset, bytes, entries]``
LogDeltas = dict[int, list[int]]
#: per entry log id, what went dead: ``[bytes, entries]``
DeadCounts = dict[int, list[int]]
#: the ``logs`` table: per entry log id ``[committed size, live bytes, live entries]``
LogRows = dict[int, list[int]]


def apply_log_deltas(logs: LogRows, added: LogDeltas, dead: DeadCounts, header_size: int) -> LogRows:
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


def count_dead(dead: DeadCounts, raw_location: bytes) -> None:
    """Add the record an index row pointed at to ``dead`` (log id -> [bytes, entries])."""
    lid, _off, length = LOC.unpack(raw_location)
    acc = dead.setdefault(lid, [0, 0])
    acc[0] += length
    acc[1] += 1


#: one entry's location in a ledger's rows: (entry id, log id, offset, length)
Entry = tuple[int, int, int, int]


def encode_runs(ledger_id: int, entries: Iterable[Entry]) -> list[tuple[bytes, bytes]]:
    """The ``runs`` rows of one ledger's ``entries`` (ascending entry ids): a new row
    wherever ids skip, the log changes, a record does not start where the one before
    ended, or a row holds :data:`RUN_MAX` entries."""
    out = []
    offs: list[int] = []
    first = nxt = log = end = -1
    for eid, lg, off, length in entries:
        if offs and (eid != nxt or lg != log or off != end or len(offs) >= RUN_MAX):
            offs.append(end)
            out.append((KEY.pack(ledger_id, first), struct.pack(f">Q{len(offs)}I", log, *offs)))
            offs = []
        if not offs:
            first, log = eid, lg
        offs.append(off)
        end = off + length
        nxt = eid + 1
    if offs:
        offs.append(end)
        out.append((KEY.pack(ledger_id, first), struct.pack(f">Q{len(offs)}I", log, *offs)))
    return out


def placed_runs(placed: Placed) -> list[tuple[bytes, bytes]]:
    """:func:`encode_runs` of the entries an append placed (ascending ids, their records back to
    back in one log), a run at a time: a row's value is the log id and a slice of the placed
    offsets.  A window of :data:`RUN_MAX` ids whose first and last say none skips (a flush's
    usual case) is one row; in another, where they skip is found without a loop in Python."""
    ids, offs, lid = placed.entry_ids, placed.offsets, placed.ledger_id
    log = U64.pack(placed.log_id)
    out = []
    n = len(ids)
    a = 0
    while a < n:
        b = min(n, a + RUN_MAX)
        if ids[b - 1] - ids[a] == b - 1 - a:
            out.append((KEY.pack(lid, ids[a]), log + offs[4 * a : 4 * b + 4]))
            a = b
            continue
        # the runs up to the window's last skip (the one after it may go on past the window)
        for c in compress(range(a + 1, b), map(ne, map(sub, ids[a + 1 : b], ids[a:b]), repeat(1))):
            out.append((KEY.pack(lid, ids[a]), log + offs[4 * a : 4 * c + 4]))
            a = c
    return out


def run_size(value: bytes) -> int:
    """Entries in a ``runs`` row."""
    return (len(value) - 8) // 4 - 1


def decode_run(first: int, value: bytes) -> Iterator[Entry]:
    """The entries of a ``runs`` row whose first entry id is ``first``."""
    n = run_size(value)
    log, *offs = struct.unpack(f">Q{n + 1}I", value)
    for j in range(n):
        yield first + j, log, offs[j], offs[j + 1] - offs[j]


def run_location(value: bytes, j: int) -> bytes:
    """LOC bytes of the ``j``-th entry of a ``runs`` row."""
    off, end = _SPAN.unpack_from(value, 8 + 4 * j)
    return LOC.pack(U64.unpack_from(value)[0], off, end - off)


def run_before(cur, ledger_id: int, entry_id: int) -> tuple[int, bytes] | None:
    """``(first entry id, value)`` of the ledger's row with the highest first entry id not
    above ``entry_id`` (it may end before it), the cursor left on it; None if there is none."""
    key = KEY.pack(ledger_id, entry_id)
    if cur.set_range(key):
        if cur.key() == key:
            return entry_id, cur.value()
        if not cur.prev():
            return None
    elif not cur.last():
        return None
    lid, first = KEY.unpack(cur.key())
    return (first, cur.value()) if lid == ledger_id else None


def run_covering(cur, ledger_id: int, entry_id: int) -> tuple[int, bytes] | None:
    """``(first entry id, value)`` of the row holding the entry, the cursor left on it; None."""
    found = run_before(cur, ledger_id, entry_id)
    return found if found is not None and 0 <= entry_id - found[0] < run_size(found[1]) else None


def ledger_runs(cur, ledger_id: int | None = None) -> Iterator[tuple[int, int, bytes]]:
    """``(ledger id, first entry id, value)`` of every ``runs`` row (of one ledger), in key order."""
    ok = cur.set_range(KEY.pack(ledger_id, 0)) if ledger_id is not None else cur.first()
    while ok:
        lid, first = KEY.unpack(cur.key())
        if ledger_id is not None and lid != ledger_id:
            return
        yield lid, first, cur.value()
        ok = cur.next()


def legacy_rows(cur, ledger_id: int | None = None) -> Iterator[tuple[int, Entry]]:
    """``(ledger id, entry)`` of every format 1 ``idx`` row (of one ledger), in key order."""
    ok = cur.set_range(KEY.pack(ledger_id, 0)) if ledger_id is not None else cur.first()
    while ok:
        lid, eid = KEY.unpack(cur.key())
        if ledger_id is not None and lid != ledger_id:
            return
        yield lid, (eid, *LOC.unpack(cur.value()))
        ok = cur.next()


def open_index(directory: str, map_size: int, has_logs: bool) -> tuple[EntryLocationIndex, int, dict[int, LedgerState]]:
    """The index of ``directory`` (a ``current/``), loaded: (index, next log id, ledger states).
    IndexUnavailable when it does not open, or is missing while the directory holds entry logs
    (``has_logs``): a new, empty index there would have the store delete every log at open."""
    path = os.path.join(directory, INDEX_DIR)
    if has_logs and not os.path.exists(os.path.join(path, "data.mdb")):
        raise IndexUnavailable(directory, f"{INDEX_DIR} is missing and the directory holds entry logs")
    try:
        index = EntryLocationIndex(directory, map_size)
    except lmdb.Error as e:
        raise IndexUnavailable(directory, f"{INDEX_DIR}: {e}") from None
    try:
        next_log, ledgers = index.load()
    except (lmdb.Error, struct.error) as e:
        index.close()
        raise IndexUnavailable(directory, f"{INDEX_DIR}: {e}") from None
    except BaseException:
        index.close()
        raise
    return index, next_log, ledgers


class EntryLocationIndex:
    """The index of one ledger directory, opened for writing (one per process); ``name``: its
    folder in ``directory`` (another one than :data:`INDEX_DIR` for an index being rebuilt)."""

    def __init__(self, directory: str, map_size: int, name: str = INDEX_DIR):
        self.directory = directory
        self.env = lmdb.open(
            os.path.join(directory, name),
            map_size=int(map_size),
            max_dbs=5,
            subdir=True,
            sync=True,
            metasync=True,
            readahead=False,
            lock=True,
        )
        try:
            self.runs = self.env.open_db(b"runs")
            self.ledger_db = self.env.open_db(b"ledgers")
            self.log_db = self.env.open_db(b"logs")
            self.meta = self.env.open_db(b"meta")
        except BaseException:
            self.env.close()
            raise
        #: log id -> [committed size, live bytes, live entries] (the committed ``logs`` table)
        self.logs: dict[int, list[int]] = {}

    def load(self) -> tuple[int, dict[int, LedgerState]]:
        """Check the format (rewriting a format 1 index's rows as runs), read the ``logs``
        table (dropping rows of logs without live entries: a crash between commit and
        unlink); returns (next log id, ledger states)."""
        ledgers = {}
        with self.env.begin() as txn:
            fmt = txn.get(b"format", db=self.meta)
        version = _U32.unpack(fmt)[0] if fmt is not None else None
        if version == FORMAT_ROWS:
            self._rewrite_rows()
        elif version not in (None, FORMAT_VERSION):
            raise ValueError(f"{self.directory}: entry store format {version} is not {FORMAT_VERSION}")
        with self.env.begin(write=True) as txn:
            if version is None:
                txn.put(b"format", _U32.pack(FORMAT_VERSION), db=self.meta)
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

    def _rewrite_rows(self) -> None:
        """Format 1 -> 2: each ledger's ``idx`` rows become runs, whole ledgers of about
        :data:`REWRITE_ROWS` rows per transaction (one transaction's dirty pages are bounded:
        LMDB refuses more than 128 Ki of them), each moving its ledgers out of ``idx`` into
        ``runs``; the last one drops ``idx`` and writes format 2.  A crash in between leaves
        format 1 with some ledgers already moved, and the next open goes on."""
        while True:
            with self.env.begin(write=True) as txn:
                old = self.env.open_db(b"idx", txn=txn)
                put = txn.cursor(db=self.runs).putmulti
                entries: list[Entry] = []
                moved: list[int] = []
                for count, (lid, entry) in enumerate(legacy_rows(txn.cursor(db=old))):
                    if not moved or lid != moved[-1]:
                        if entries:
                            put(encode_runs(moved[-1], entries))
                            entries = []
                        if count >= REWRITE_ROWS:
                            break
                        moved.append(lid)
                    entries.append(entry)
                else:
                    if entries:
                        put(encode_runs(moved[-1], entries))
                    txn.drop(old, delete=True)
                    txn.put(b"format", _U32.pack(FORMAT_VERSION), db=self.meta)
                    return
                cur = txn.cursor(db=old)
                for lid in moved:
                    cur.set_range(I64.pack(lid))
                    while cur.key()[:8] == I64.pack(lid):
                        cur.delete()

    # -- reads (any thread; LMDB readers never wait for the writer)
    def get(self, key: bytes) -> bytes | None:
        """LOC bytes of the entry ``key`` (KEY bytes) names; None if it has no row
        (:func:`run_covering` inlined: a single read's lookup, on the reactor thread)."""
        txn = self.env.begin(db=self.runs)
        try:
            cur = txn.cursor()
            if cur.set_range(key):
                k = cur.key()
                if k != key and not cur.prev():
                    return None
            elif not cur.last():
                return None
            k = cur.key()
            value = cur.value()
        finally:
            txn.abort()
        if k[:8] != key[:8]:
            return None
        j = I64.unpack_from(key, 8)[0] - I64.unpack_from(k, 8)[0]
        if not 0 <= j < (len(value) - 12) >> 2:
            return None
        off, end = _SPAN.unpack_from(value, 8 + 4 * j)
        return LOC.pack(U64.unpack_from(value)[0], off, end - off)

    def get_many(self, keys: list[bytes]) -> list:
        """:meth:`get` of each key, in one read transaction."""
        out: list = [None] * len(keys)
        pack = LOC.pack
        for log, off, length, k in self.locate((*KEY.unpack(key), k) for k, key in enumerate(keys)):
            out[k] = pack(log, off, length)
        return out

    def locate(self, ids: Iterable[tuple[int, int, int]]) -> list[tuple[int, int, int, int]]:
        """``(log id, offset, length, tag)`` of each ``(ledger id, entry id, tag)`` that has a
        row (the others left out), in order, in one read transaction (entries of one run find
        it once): the rows :meth:`~.entry_log.EntryLogger.read_records` takes, tagged with
        where each entry's bytes go."""
        out: list[tuple[int, int, int, int]] = []
        append = out.append
        span = _SPAN.unpack_from
        txn = self.env.begin(db=self.runs)
        try:
            cur = txn.cursor()
            run_lid = first = n = log = -1
            value = b""
            for lid, eid, tag in ids:
                j = eid - first
                if lid != run_lid or not 0 <= j < n:
                    found = run_covering(cur, lid, eid)
                    if found is None:
                        continue
                    run_lid, (first, value) = lid, found
                    n, log, j = run_size(value), U64.unpack_from(value)[0], eid - first
                off, end = span(value, 8 + 4 * j)
                append((log, off, end - off, tag))
        finally:
            txn.abort()
        return out

    def locate_range(self, ledger_id: int, first: int, count: int) -> list[tuple[int, int, int, int]]:
        """:meth:`locate` of one ledger's entries ``first`` .. ``first + count - 1``, tagged
        ``0`` .. ``count - 1`` (a run of reads): a row's entries are taken at once, with no loop
        per entry in Python."""
        out: list[tuple[int, int, int, int]] = []
        eid, end = first, first + count
        txn = self.env.begin(db=self.runs)
        try:
            cur = txn.cursor()
            while eid < end:
                found = run_covering(cur, ledger_id, eid)
                if found is None:  # no row holds it: on from the ledger's next row
                    if not cur.set_range(KEY.pack(ledger_id, eid)):
                        break
                    lid, eid = KEY.unpack(cur.key())
                    if lid != ledger_id:
                        break
                    continue
                start, value = found
                k = min(end, start + run_size(value)) - eid
                offs = struct.unpack_from(f">{k + 1}I", value, 8 + 4 * (eid - start))
                tag = eid - first
                out += zip(repeat(U64.unpack_from(value)[0], k), offs, map(sub, offs[1:], offs), range(tag, tag + k))
                eid += k
        finally:
            txn.abort()
        return out

    def entry_ids(self, ledger_id: int) -> list[int]:
        """The ledger's flushed entry ids, ascending (its index rows; no entry is read)."""
        ids: list[int] = []
        txn = self.env.begin(db=self.runs)
        try:
            for _lid, first, value in ledger_runs(txn.cursor(), ledger_id):
                ids.extend(range(first, first + run_size(value)))
        finally:
            txn.abort()
        return ids

    def rows(self, log_id: int | None = None) -> list[IndexRow]:
        """Every index row (pointing into ``log_id``): a walk of the whole index."""
        out: list[IndexRow] = []
        txn = self.env.begin(db=self.runs)
        try:
            for lid, first, value in ledger_runs(txn.cursor()):
                if log_id is None or U64.unpack_from(value)[0] == log_id:
                    out.extend(
                        IndexRow(KEY.pack(lid, eid), LOC.pack(lg, off, length))
                        for eid, lg, off, length in decode_run(first, value)
                    )
        finally:
            txn.abort()
        return out

    def write(self):
        """A write transaction (``with index.write() as txn``); commits with an fsync."""
        return self.env.begin(write=True)

    def committed_bytes(self, log_ids: Iterable[int]) -> int:
        """The committed sizes of ``log_ids`` summed (those :attr:`logs` has: taken before a
        commit that drops them is published)."""
        logs = self.logs
        return sum(logs[lid][0] for lid in log_ids if lid in logs)

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

    def put_entries(self, txn, ledger_id: int, entries: list[Entry], dead: dict) -> None:
        """Point the ledger's ``entries`` (ascending ids) at their new records; the records of
        rows they replace are added to ``dead``.  Entries above all the ledger's rows (a flush's
        usual case) are written as new runs without reading any."""
        if not entries:
            return
        lo, hi = entries[0][0], entries[-1][0]
        cur = txn.cursor(db=self.runs)
        below = run_before(cur, ledger_id, hi)  # rows never overlap: only this one could reach lo
        if below is None or below[0] + run_size(below[1]) <= lo:
            cur.putmulti(encode_runs(ledger_id, entries), dupdata=False, overwrite=True)
            return
        new = {e[0]: e for e in entries}

        def replace(held: dict) -> None:
            for eid, entry in new.items():
                old = held.get(eid)
                if old is not None:
                    acc = dead.setdefault(old[1], [0, 0])
                    acc[0] += old[3]
                    acc[1] += 1
                held[eid] = entry

        self.change(txn, ledger_id, lo, hi, replace)

    def put_placed(self, txn, placed: Placed, dead: dict) -> None:
        """:meth:`put_entries` of the entries an append placed (ascending ids); above all the
        ledger's rows (a flush's usual case) their runs are written with no loop per entry."""
        ids = placed.entry_ids
        if not ids:
            return
        cur = txn.cursor(db=self.runs)
        below = run_before(cur, placed.ledger_id, ids[-1])
        if below is None or below[0] + run_size(below[1]) <= ids[0]:
            cur.putmulti(placed_runs(placed), dupdata=False, overwrite=True)
        else:
            self.put_entries(txn, placed.ledger_id, placed.locations(), dead)

    def change(self, txn, ledger_id: int, lo: int, hi: int, edit: Callable[[dict], None]) -> None:
        """Rewrite the ledger's runs holding entries ``lo`` .. ``hi`` and the ones either side:
        ``edit`` gets them as a dict (entry id -> :data:`Entry`) to change in place."""
        cur = txn.cursor(db=self.runs)
        held: dict[int, Entry] = {}
        keys = []
        ok = run_before(cur, ledger_id, max(0, lo - 1)) is not None or cur.set_range(
            KEY.pack(ledger_id, max(0, lo - 1))
        )
        while ok:
            k = cur.key()
            lid, first = KEY.unpack(k)
            if lid != ledger_id or first > hi + 1:
                break
            keys.append(k)
            for entry in decode_run(first, cur.value()):
                held[entry[0]] = entry
            ok = cur.next()
        for k in keys:
            txn.delete(k, db=self.runs)
        edit(held)
        cur.putmulti(encode_runs(ledger_id, sorted(held.values())), dupdata=False, overwrite=True)

    def switch(self, txn: lmdb.Transaction, moves: list[Move], dead: DeadCounts) -> int:
        """``moves`` are ``(key, old row, new row or None)``: each row that still holds its old
        row takes the new one (None: deleted) and its old record is dead; one that does not
        (re-put or deleted meanwhile) leaves the new record dead.  Returns the rows switched.

        Run by run, without the neighbours :meth:`change` decodes: a compaction moves every
        live entry of a log, so the runs it rewrites are whole and their copies lie back to
        back.  (Through :meth:`change`, a batch of 1,024 moves over 13 ledgers held the GIL
        12 ms, against 1 ms for the row-per-entry index.)  A run a batch boundary cuts stays
        two rows."""
        by_ledger: dict[int, dict[int, tuple]] = {}
        for key, old, new in moves:
            lid, eid = KEY.unpack(key)
            by_ledger.setdefault(lid, {})[eid] = (old, new)
        switched = 0
        cur = txn.cursor(db=self.runs)
        pack = LOC.pack
        for lid, pending in by_ledger.items():
            for eid in sorted(pending):
                if eid not in pending:  # taken with its run
                    continue
                found = run_covering(cur, lid, eid)
                if found is None:  # deleted meanwhile: the copy is dead space
                    new = pending.pop(eid)[1]
                    if new is not None:
                        count_dead(dead, new)
                    continue
                first, value = found
                n = run_size(value)
                log, *offs = struct.unpack(f">Q{n + 1}I", value)
                entries: list[Entry] = []
                changed = False
                for j in range(n):
                    e = first + j
                    here = (e, log, offs[j], offs[j + 1] - offs[j])
                    change = pending.pop(e, None)
                    if change is not None:
                        old, new = change
                        if old == pack(*here[1:]):
                            count_dead(dead, old)
                            switched += 1
                            changed = True
                            if new is None:
                                continue
                            here = (e, *LOC.unpack(new))
                        elif new is not None:  # re-put meanwhile
                            count_dead(dead, new)
                    entries.append(here)
                if changed:
                    cur.delete()
                    cur.putmulti(encode_runs(lid, entries), dupdata=False, overwrite=True)
        return switched

    def delete_ledger_rows(self, txn, ledger_id: int, dead: dict) -> int:
        """Delete the ledger's index rows and state row; their records are added to ``dead``."""
        count = 0
        cur = txn.cursor(db=self.runs)
        ok = cur.set_range(KEY.pack(ledger_id, 0))
        while ok:
            k = cur.key()
            if not k or KEY.unpack(k)[0] != ledger_id:
                break
            value = cur.value()
            n = run_size(value)
            log, off = struct.unpack_from(">QI", value)
            acc = dead.setdefault(log, [0, 0])
            acc[0] += _U32.unpack_from(value, 8 + 4 * n)[0] - off  # a run's records lie back to back
            acc[1] += n
            count += n
            ok = cur.delete()
        txn.delete(I64.pack(ledger_id), db=self.ledger_db)
        return count

    def size_on_disk(self) -> int:
        idir = os.path.join(self.directory, INDEX_DIR)
        return sum(os.path.getsize(os.path.join(idir, name)) for name in os.listdir(idir))

    def close(self) -> None:
        self.env.close()
