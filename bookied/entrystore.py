"""bookied's entry storage: a write cache, append-only entry logs and an LMDB index.

Entries reach the entry store right after (or while) the journal gets them;
the journal makes an ADD durable, the entry store makes it readable and lets
the journal be trimmed. The pieces:

* **Write cache.** ``put_entry`` only stores the bytes in memory (per-ledger
  dicts), so a just-added entry is read back from memory. Its size is bounded
  by ``write_cache_max_bytes``: past half of it ``on_flush_needed()`` is called
  once (wake the checkpoint thread), past all of it ``put_entry`` raises
  :class:`WriteCacheFull` (map it to ETOOMANYREQUESTS). ``flush()`` swaps the
  cache for an empty one and writes the old one out while adds go on, so the
  cache is double-buffered like DbLedgerStorage's.
* **Entry logs.** ``flush()`` sorts the cached entries by (ledger, entry),
  appends them to the current entry log with one ``write`` per chunk, and
  fdatasyncs the log *before* committing the index rows that point into it.
  A log rolls at ``log_size_limit``; every open starts a new log (lazily, at
  the first flush that has entries).
* **Index.** ``(ledgerId, entryId) -> (log id, offset, length)`` and the
  per-ledger state (master key, fenced flag, explicit LAC, last entry id) in
  LMDB. One write transaction per flush (``putmulti``), committed with an
  fsync. Re-putting an entry (recovery adds, journal replay) replaces its
  row; the old copy becomes dead space in its log.

Why LMDB and not sqlite3 (measured on this 2-core machine with
``bench/bench_storage.py``: 200,000 index rows for 100-byte entries, batches
of 10,000 rows per transaction, point reads of random keys; the machine was
shared, so ranges over several runs):

    sqlite3 3.40 (WAL, synchronous=FULL, WITHOUT ROWID, executemany):
        0.33 - 0.54 M puts/s, 0.07 - 0.15 M point gets/s
    LMDB 0.9.36 via the ``lmdb`` package (putmulti; one read txn per get):
        0.66 - 3.9 M puts/s, 0.29 - 0.67 M point gets/s

LMDB won every run, by 1.6-7x on puts and 2-4x on gets.

The index is on the hot path twice: every flush inserts every entry (25,000
adds/s must cost the flush thread little CPU, since the protocol code shares
the two cores) and every read that misses the write cache looks one row up
(about 45,000/s for a catching-up reader). A sqlite point get costs ~6.7 us of
Python-held CPU against ~2 us for LMDB, i.e. ~0.3 of a core at 45 k reads/s
instead of ~0.1. LMDB also gives readers lock-free MVCC snapshots, so the
reactor thread's lookups never wait for the flush thread's write transaction,
and it commits crash-safely (copy-on-write B-tree, fsync on commit). The cost
is one binary dependency (``lmdb``, a wheel that bundles liblmdb) and a fixed
map size (``index_map_size``, 256 GiB of address space by default; the file
only grows as used).

Threads: ``put_entry``, ``get_entry``, ``get_entries``, ``entries_between``,
the ledger-state methods and ``last_entry_id`` are meant for the reactor
thread and never do write I/O (a read of a flushed entry does one ``pread``;
``get_entries`` one per run of nearby records); they are thread-safe.
``flush``, ``delete_ledger``, ``compact`` and ``close`` do I/O and are
serialised by a lock; call them from a background thread.

Space reclamation: ``delete_ledger`` drops the ledger's index rows, its
state and its cached entries, and updates each log's live byte/entry counts;
a log whose live entry count drops to zero is deleted at once (never the log
currently being appended to). ``compact(min_live_ratio)`` rewrites logs whose
live fraction is below the ratio: it scans them, copies the records the index
still points to into the current log, repoints the index and deletes the old
log. A ledger deleted after its records were checkpointed out of the journal
stays deleted; one deleted while its records are still after the journal's
checkpoint mark is resurrected by a crash + replay, so GC must simply run
again (as in Java, where GC works from the metadata store's ledger list).

Several ledger directories are several EntryStore objects; the server shards
ledgers over them. Open a directory with one EntryStore at a time per process
(LMDB does not allow the same environment to be open twice in one process),
and from one bookie process only.

On-disk format (ours; version 1), in ``D/current/``:

``<16 hex digits>.bel`` -- entry log, a 64-byte header::

    0 4s "BKDE" | 4 u32 version (1) | 8 u64 log id | 16 u64 creation ms |
    24 u32 CRC32C of bytes 0..24 | zero padding to 64

  then records (big-endian)::

    u32 crc (CRC32C of the rest) | u32 len (16 + data length) |
    i64 ledgerId | i64 entryId | data (the packaged entry)

``index.lmdb/`` -- LMDB environment with four named databases:

    idx      key i64 ledgerId | i64 entryId  ->  u64 log id | u32 record offset | u32 record length
    ledgers  key i64 ledgerId  ->  u8 version (1) | u8 flags (1 fenced, 2 has key, 4 has LAC) |
             i64 last entry id (-1: none) | u16 key length | key | u32 LAC length | LAC body
    logs     key u64 log id  ->  u64 committed size | u64 live bytes | u64 live entries
    meta     b"format" -> u32 version; b"next_log" -> u64 next log id

At open, log files the ``logs`` database does not know (written by a flush
that crashed before its commit) are deleted, known logs are truncated to
their committed size, and logs without live entries are removed.
"""
from __future__ import annotations

import bisect
import errno
import logging
import mmap
import operator
import os
import re
import struct
import threading
import time
from typing import Callable, Iterable, NamedTuple

import lmdb
from crc32c import crc32c

from . import disk_layout as layout
from .journal import EntryRecord, ExplicitLacRecord, FenceRecord, MasterKeyRecord

log = logging.getLogger("bookied.entrystore")

FORMAT_VERSION = 1
LOG_MAGIC = b"BKDE"
LOG_HEADER_SIZE = 64
LOG_SUFFIX = ".bel"
INDEX_DIR = "index.lmdb"
MAX_LOG_SIZE = 3 * 1024 ** 3  # offsets are u32 in the index

_LOG_HEADER = struct.Struct(">4sIQQ")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_I64 = struct.Struct(">q")
_KEY = struct.Struct(">qq")
_LOC = struct.Struct(">QII")
_LOGROW = struct.Struct(">QQQ")
_REC_HEAD = struct.Struct(">Iqq")  # len, ledger, entry (after the crc)
_CRC_LEN = struct.Struct(">II")
_REC_CHECK = struct.Struct(">IIqq")
_STATE_HEAD = struct.Struct(">BBqH")
_first = operator.itemgetter(0)
_LOG_NAME_RE = re.compile(r"^([0-9a-f]{16})" + re.escape(LOG_SUFFIX) + "$")

#: :meth:`EntryStore.get_entries` reads records of one entry log with one pread when
#: they lie within this span and at most this many bytes apart
READ_SPAN_MAX = 1024 * 1024
READ_GAP_MAX = 64 * 1024

_F_FENCED = 1
_F_KEY = 2
_F_LAC = 4


class WriteCacheFull(Exception):
    """The write cache is at ``write_cache_max_bytes``; retry after a flush (ETOOMANYREQUESTS)."""


class EntryStoreClosed(Exception):
    pass


class EntryCorrupted(OSError):
    """A stored entry failed its checksum or its ids do not match (reply EIO)."""

    def __init__(self, msg: str):
        super().__init__(errno.EIO, msg)


class Location(NamedTuple):
    log_id: int
    offset: int  # of the record (its crc field)
    length: int  # of the whole record


class FlushResult(NamedTuple):
    entries: int
    bytes: int
    ledgers: int
    seconds: float


class _Ledger:
    __slots__ = ("master_key", "fenced", "lac", "last_entry", "persisted_last", "dirty")

    def __init__(self):
        self.master_key: bytes | None = None
        self.fenced = False
        self.lac: bytes | None = None
        self.last_entry = -1  # highest entry id put (cached or flushed)
        self.persisted_last = -1  # highest entry id with an index row
        self.dirty = True

    def encode(self, last_entry: int) -> bytes:
        flags = (_F_FENCED if self.fenced else 0) | (_F_KEY if self.master_key is not None else 0) \
            | (_F_LAC if self.lac is not None else 0)
        key = self.master_key or b""
        lac = self.lac or b""
        return b"".join((_STATE_HEAD.pack(1, flags, last_entry, len(key)), key, _U32.pack(len(lac)), lac))

    @classmethod
    def decode(cls, raw: bytes) -> "_Ledger":
        version, flags, last, klen = _STATE_HEAD.unpack_from(raw, 0)
        if version != 1:
            raise ValueError(f"unknown ledger state version {version}")
        pos = _STATE_HEAD.size
        led = cls()
        led.master_key = bytes(raw[pos:pos + klen]) if flags & _F_KEY else None
        pos += klen
        (llen,) = _U32.unpack_from(raw, pos)
        pos += 4
        led.lac = bytes(raw[pos:pos + llen]) if flags & _F_LAC else None
        led.fenced = bool(flags & _F_FENCED)
        led.last_entry = led.persisted_last = last
        led.dirty = False
        return led


def log_name(log_id: int) -> str:
    return f"{log_id:016x}{LOG_SUFFIX}"


def _encode_log_header(log_id: int) -> bytes:
    head = _LOG_HEADER.pack(LOG_MAGIC, FORMAT_VERSION, log_id, int(time.time() * 1000))
    return (head + _U32.pack(crc32c(head))).ljust(LOG_HEADER_SIZE, b"\0")


def encode_log_record(ledger_id: int, entry_id: int, data: bytes) -> bytes:
    head = _REC_HEAD.pack(len(data) + 16, ledger_id, entry_id)
    return _U32.pack(crc32c(data, crc32c(head))) + head + data


def scan_log(path: str):
    """Yield ``(offset, length, ledger_id, entry_id, data)`` for each good record of an entry log.

    Stops silently at the first bad or incomplete record.
    """
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < LOG_HEADER_SIZE:
            return
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    view = memoryview(mm)
    try:
        magic, version, _lid, _ms = _LOG_HEADER.unpack_from(view, 0)
        if magic != LOG_MAGIC or version != FORMAT_VERSION or \
                _U32.unpack_from(view, 24)[0] != crc32c(view[:24]):
            log.warning("%s: bad entry log header", path)
            return
        pos = LOG_HEADER_SIZE
        while pos + 24 <= size:
            crc, ln = _CRC_LEN.unpack_from(view, pos)
            end = pos + 8 + ln
            if ln < 16 or end > size or crc32c(view[pos + 4:end]) != crc:
                return
            ledger_id, entry_id = _KEY.unpack_from(view, pos + 8)
            yield pos, 8 + ln, ledger_id, entry_id, bytes(view[pos + 24:end])
            pos = end
    finally:
        view.release()
        mm.close()


def check_record(data: bytes, ledger_id: int, entry_id: int, log_id: int, offset: int, length: int) -> bytes:
    """The entry in the record ``data`` read at the index row (``log_id``, ``offset``,
    ``length``: a :class:`Location`'s fields); EntryCorrupted if it is short, fails its
    checksum or holds another entry."""
    if len(data) != length or length < 24:
        raise EntryCorrupted(f"entry {ledger_id}/{entry_id}: short read in {log_name(log_id)}")
    crc, ln, lid, eid = _REC_CHECK.unpack_from(data, 0)
    if ln != length - 8 or lid != ledger_id or eid != entry_id or crc32c(memoryview(data)[4:]) != crc:
        raise EntryCorrupted(f"entry {ledger_id}/{entry_id}: bad record at {log_name(log_id)}:{offset}")
    return data[24:]


class OfflineIndex:
    """A read-only look at a stopped store's index (``bkctl bookie inspect`` and ``check``):
    unlike :class:`EntryStore` it repairs nothing (no truncation, no deletion) and takes no lock."""

    def __init__(self, directory: str):
        self.directory = layout.current_dir(directory)
        path = os.path.join(self.directory, INDEX_DIR)
        if not os.path.isdir(path):
            raise FileNotFoundError(f"{path}: no index")
        self._env = lmdb.open(path, readonly=True, lock=False, max_dbs=4, subdir=True)
        self._idx = self._env.open_db(b"idx", create=False)
        self._ldb = self._env.open_db(b"ledgers", create=False)

    def close(self) -> None:
        self._env.close()

    def ledgers(self) -> dict[int, dict]:
        """ledger id -> ``{"fenced", "master_key", "explicit_lac", "last_entry_id"}``."""
        out = {}
        with self._env.begin(db=self._ldb) as txn:
            for k, v in txn.cursor():
                led = _Ledger.decode(v)
                out[_I64.unpack(k)[0]] = {"fenced": led.fenced, "master_key": led.master_key,
                                          "explicit_lac": led.lac, "last_entry_id": led.last_entry}
        return out

    def rows(self, ledger_id: int | None = None):
        """``(ledger id, entry id, Location)`` of every index row (of one ledger), in key order."""
        with self._env.begin(db=self._idx) as txn:
            cur = txn.cursor()
            ok = cur.set_range(_KEY.pack(ledger_id, 0)) if ledger_id is not None else cur.first()
            while ok:
                lid, eid = _KEY.unpack(cur.key())
                if ledger_id is not None and lid != ledger_id:
                    break
                yield lid, eid, Location(*_LOC.unpack(cur.value()))
                ok = cur.next()

    def read(self, ledger_id: int, entry_id: int, loc: Location) -> bytes:
        """The entry at ``loc``, checked (EntryCorrupted; FileNotFoundError without its log)."""
        with open(os.path.join(self.directory, log_name(loc.log_id)), "rb") as f:
            data = os.pread(f.fileno(), loc.length, loc.offset)
        return check_record(data, ledger_id, entry_id, *loc)


class EntryStore:
    """Entry storage in one ledger directory ``D`` (files in ``D/current/``).

    ``write_cache_max_bytes`` bounds the write cache (both halves together);
    ``log_size_limit`` is the entry log roll size (at most 3 GiB);
    ``index_map_size`` the LMDB map size; ``on_flush_needed()`` is called, in
    the thread of the ``put_entry`` that crossed it, when the cache passes half
    of its bound or first refuses an entry (once until the next flush);
    ``on_grow()`` when a new entry log is created.
    """

    def __init__(self, directory: str, *, write_cache_max_bytes: int = 64 * 1024 * 1024,
                 log_size_limit: int = 1024 ** 3, index_map_size: int = 256 * 1024 ** 3,
                 on_flush_needed: Callable[[], None] | None = None,
                 on_grow: Callable[[], None] | None = None):
        self.directory = layout.current_dir(directory)
        #: Called (in the flushing thread) when a new entry log is created: the
        #: bookie checks its disk usage on the write path.
        self._on_grow = on_grow
        os.makedirs(self.directory, exist_ok=True)
        self.write_cache_max_bytes = max(1, int(write_cache_max_bytes))
        self.log_size_limit = min(MAX_LOG_SIZE, max(LOG_HEADER_SIZE + 1, int(log_size_limit)))
        self._on_flush_needed = on_flush_needed

        self._lock = threading.Lock()  # in-memory state
        self._flush_lock = threading.RLock()  # flush / delete / compact / close
        self._files_lock = threading.Lock()  # read fds
        self._closed = False

        self._ledgers: dict[int, _Ledger] = {}
        self._active: dict[int, dict[int, bytes]] = {}
        self._active_bytes = 0
        self._flushing: dict[int, dict[int, bytes]] | None = None
        self._flushing_bytes = 0
        self._flush_requested = False

        self._readers: dict[int, int] = {}  # log id -> read fd (pread under _files_lock)
        self._wfd = -1  # current log, write side
        self._wlog = 0
        self._woff = 0
        self._logs: dict[int, list[int]] = {}  # log id -> [committed size, live bytes, live entries]
        self.last_flush: FlushResult | None = None

        self._env = lmdb.open(os.path.join(self.directory, INDEX_DIR), map_size=int(index_map_size),
                              max_dbs=4, subdir=True, sync=True, metasync=True, readahead=False,
                              lock=True)
        try:
            self._idx = self._env.open_db(b"idx")
            self._ldb = self._env.open_db(b"ledgers")
            self._logdb = self._env.open_db(b"logs")
            self._meta = self._env.open_db(b"meta")
            self._load()
        except BaseException:
            self._env.close()
            raise

    # ------------------------------------------------------------ open
    def _load(self) -> None:
        with self._env.begin(write=True) as txn:
            fmt = txn.get(b"format", db=self._meta)
            if fmt is None:
                txn.put(b"format", _U32.pack(FORMAT_VERSION), db=self._meta)
            elif _U32.unpack(fmt)[0] != FORMAT_VERSION:
                raise ValueError(f"{self.directory}: entry store format {_U32.unpack(fmt)[0]} is not "
                                 f"{FORMAT_VERSION}")
            raw = txn.get(b"next_log", db=self._meta)
            self._next_log = _U64.unpack(raw)[0] if raw else 1
            for k, v in txn.cursor(db=self._ldb):
                self._ledgers[_I64.unpack(k)[0]] = _Ledger.decode(v)
            for k, v in txn.cursor(db=self._logdb):
                self._logs[_U64.unpack(k)[0]] = list(_LOGROW.unpack(v))
            # logs without live entries (a crash between commit and unlink)
            for lid in [lid for lid, row in self._logs.items() if row[2] == 0]:
                txn.delete(_U64.pack(lid), db=self._logdb)
                del self._logs[lid]
        on_disk = {}
        for name in os.listdir(self.directory):
            m = _LOG_NAME_RE.match(name)
            if m:
                on_disk[int(m.group(1), 16)] = os.path.join(self.directory, name)
        changed = False
        for lid, path in sorted(on_disk.items()):
            row = self._logs.get(lid)
            if row is None:
                log.info("%s: removing entry log %s (no committed entries)", self.directory, path)
                os.unlink(path)
                changed = True
            elif os.path.getsize(path) > row[0]:
                os.truncate(path, row[0])
        for lid in self._logs:
            if lid not in on_disk:
                log.error("%s: entry log %s is missing; its entries cannot be read", self.directory,
                          log_name(lid))
        if changed:
            layout.fsync_dir(self.directory)
        self._next_log = max([self._next_log] + [lid + 1 for lid in on_disk])

    # ------------------------------------------------------------ adds and state
    def put_entry(self, ledger_id: int, entry_id: int, data: bytes) -> None:
        """Store an entry in the write cache (replacing an earlier copy). Never does I/O.

        Raises WriteCacheFull when the cache is at its bound.
        """
        if ledger_id < 0 or entry_id < 0:
            raise ValueError(f"invalid ids {ledger_id}/{entry_id}")
        n = len(data)
        notify = False
        with self._lock:
            if self._closed:
                raise EntryStoreClosed("entry store is closed")
            used = self._active_bytes + self._flushing_bytes
            if used and used + n > self.write_cache_max_bytes:
                notify = not self._flush_requested
                self._flush_requested = True
                exc = WriteCacheFull(f"write cache full ({used} bytes)")
            else:
                exc = None
                led = self._ledgers.get(ledger_id)
                if led is None:
                    led = self._ledgers[ledger_id] = _Ledger()
                cache = self._active.get(ledger_id)
                if cache is None:
                    cache = self._active[ledger_id] = {}
                old = cache.get(entry_id)
                if old is not None:
                    self._active_bytes -= len(old)
                cache[entry_id] = data
                self._active_bytes += n
                if entry_id > led.last_entry:
                    led.last_entry = entry_id
                if not self._flush_requested and self._active_bytes * 2 >= self.write_cache_max_bytes:
                    self._flush_requested = notify = True
        if notify and self._on_flush_needed is not None:
            try:
                self._on_flush_needed()
            except Exception:
                log.exception("on_flush_needed raised")
        if exc is not None:
            raise exc

    def _ledger_for_update(self, ledger_id: int) -> _Ledger:
        if self._closed:
            raise EntryStoreClosed("entry store is closed")
        led = self._ledgers.get(ledger_id)
        if led is None:
            led = self._ledgers[ledger_id] = _Ledger()
        led.dirty = True
        return led

    def set_master_key(self, ledger_id: int, key: bytes) -> None:
        """Store the ledger's master key (creating the ledger). Persisted at the next flush."""
        with self._lock:
            self._ledger_for_update(ledger_id).master_key = bytes(key)

    def get_master_key(self, ledger_id: int) -> bytes | None:
        led = self._ledgers.get(ledger_id)
        return None if led is None else led.master_key

    def set_fenced(self, ledger_id: int) -> bool:
        """Mark the ledger fenced; True if it was not fenced before. Persisted at the next flush."""
        with self._lock:
            led = self._ledgers.get(ledger_id)
            if led is not None and led.fenced:
                return False
            self._ledger_for_update(ledger_id).fenced = True
            return True

    def is_fenced(self, ledger_id: int) -> bool:
        led = self._ledgers.get(ledger_id)
        return led is not None and led.fenced

    def set_explicit_lac(self, ledger_id: int, body: bytes) -> None:
        with self._lock:
            self._ledger_for_update(ledger_id).lac = bytes(body)

    def get_explicit_lac(self, ledger_id: int) -> bytes | None:
        led = self._ledgers.get(ledger_id)
        return None if led is None else led.lac

    def has_ledger(self, ledger_id: int) -> bool:
        return ledger_id in self._ledgers

    def ledger_ids(self) -> list[int]:
        with self._lock:
            return sorted(self._ledgers)

    def last_entry_id(self, ledger_id: int) -> int | None:
        """Highest entry id stored for the ledger (cached or flushed), None if it has no entries."""
        led = self._ledgers.get(ledger_id)
        if led is None or led.last_entry < 0:
            return None
        return led.last_entry

    def apply(self, record) -> None:
        """Re-apply a journal record (replay). Idempotent; flushes when the cache is full."""
        t = type(record)
        if t is EntryRecord:
            try:
                self.put_entry(record.ledger_id, record.entry_id, record.data)
            except WriteCacheFull:
                self.flush()
                self.put_entry(record.ledger_id, record.entry_id, record.data)
        elif t is MasterKeyRecord:
            self.set_master_key(record.ledger_id, record.key)
        elif t is FenceRecord:
            self.set_fenced(record.ledger_id)
        elif t is ExplicitLacRecord:
            self.set_explicit_lac(record.ledger_id, record.body)
        else:
            raise TypeError(f"not a journal record: {record!r}")

    @property
    def cached_bytes(self) -> int:
        """Bytes in the write cache (including a flush in progress)."""
        return self._active_bytes + self._flushing_bytes

    # ------------------------------------------------------------ reads
    def _cached(self, ledger_id: int, entry_id: int) -> bytes | None:
        with self._lock:
            cache = self._active.get(ledger_id)
            if cache is not None:
                data = cache.get(entry_id)
                if data is not None:
                    return data
            if self._flushing:
                cache = self._flushing.get(ledger_id)
                if cache is not None:
                    return cache.get(entry_id)
        return None

    def location(self, ledger_id: int, entry_id: int) -> Location | None:
        """Index row of a flushed entry."""
        with self._env.begin(db=self._idx) as txn:
            raw = txn.get(_KEY.pack(ledger_id, entry_id))
        return None if raw is None else Location(*_LOC.unpack(raw))

    def get_entry(self, ledger_id: int, entry_id: int) -> bytes | None:
        """The entry's bytes, from the write cache or the entry logs; None if absent.

        Raises EntryCorrupted (an OSError, EIO) if the stored copy fails its checksum.
        """
        data = self._cached(ledger_id, entry_id)
        if data is not None:
            return data
        if ledger_id not in self._ledgers or entry_id < 0:
            return None
        return self._read_flushed(ledger_id, entry_id)

    def _open_reader(self, log_id: int) -> int | None:
        """A read fd of the entry log, kept in ``_readers``; None if the log is gone (compacted
        or deleted after the index row was read). Call with ``_files_lock`` held."""
        try:
            fd = os.open(os.path.join(self.directory, log_name(log_id)), os.O_RDONLY)
        except FileNotFoundError:
            return None
        self._readers[log_id] = fd
        return fd

    def _read_flushed(self, ledger_id: int, entry_id: int) -> bytes | None:
        key = _KEY.pack(ledger_id, entry_id)
        for _attempt in range(3):
            txn = self._env.begin(db=self._idx)
            try:
                raw = txn.get(key)
            finally:
                txn.abort()
            if raw is None:
                return None
            log_id, offset, length = _LOC.unpack(raw)
            with self._files_lock:
                fd = self._readers.get(log_id)
                if fd is None:
                    fd = self._open_reader(log_id)
                    if fd is None:
                        continue  # compacted or deleted under us: look the row up again
                data = os.pread(fd, length, offset)
            return check_record(data, ledger_id, entry_id, log_id, offset, length)
        raise EntryCorrupted(f"entry {ledger_id}/{entry_id}: its entry log is missing")

    def get_entries(self, ledger_id: int, entry_ids: list[int]) -> list:
        """:meth:`get_entry` of each of ``entry_ids`` (one ledger), in their order: per entry its
        bytes, None if absent, or the EntryCorrupted (OSError) :meth:`get_entry` would raise.

        Cached entries come from the write cache; the others are looked up in one
        index transaction, and records lying close together in one entry log are
        read with one ``pread`` (at most :data:`READ_SPAN_MAX` bytes, skipping at
        most :data:`READ_GAP_MAX` bytes between records); each record is checked on
        its own, so a bad one fails only its entry.
        """
        out: list = [None] * len(entry_ids)
        flushed = []
        with self._lock:
            active = self._active.get(ledger_id)
            flushing = self._flushing.get(ledger_id) if self._flushing else None
            for i, entry_id in enumerate(entry_ids):
                data = active.get(entry_id) if active is not None else None
                if data is None and flushing is not None:
                    data = flushing.get(entry_id)
                if data is not None:
                    out[i] = data
                elif entry_id >= 0:
                    flushed.append(i)
        if not flushed or ledger_id not in self._ledgers:
            return out
        for _attempt in range(3):
            txn = self._env.begin(db=self._idx)
            try:
                pack = _KEY.pack
                raws = list(map(txn.get, [pack(ledger_id, entry_ids[i]) for i in flushed]))
            finally:
                txn.abort()
            unpack = _LOC.unpack
            rows = [unpack(raw) + (i,) for i, raw in zip(flushed, raws) if raw is not None]
            if not rows:
                return out
            rows.sort()
            flushed = []  # entries whose log went away under us: looked up again
            with self._files_lock:
                n = len(rows)
                k = 0
                while k < n:
                    log_id, start, length, _i = rows[k]
                    end = k + 1
                    stop = start + length
                    while end < n:
                        nlog, noff, nlen, _ = rows[end]
                        if nlog != log_id or noff - stop > READ_GAP_MAX or noff + nlen - start > READ_SPAN_MAX:
                            break
                        stop = max(stop, noff + nlen)
                        end += 1
                    try:
                        fd = self._readers.get(log_id)
                        if fd is None:
                            fd = self._open_reader(log_id)
                            if fd is None:
                                flushed.extend(row[3] for row in rows[k:end])
                                k = end
                                continue
                        span = os.pread(fd, stop - start, start)
                    except OSError as e:  # what get_entry would raise, for these entries only
                        for row in rows[k:end]:
                            out[row[3]] = e
                        k = end
                        continue
                    for k in range(k, end):
                        _, off, length, i = rows[k]
                        pos = off - start
                        try:
                            out[i] = check_record(span[pos:pos + length], ledger_id, entry_ids[i],
                                                  log_id, off, length)
                        except EntryCorrupted as e:
                            out[i] = e
                    k = end
            if not flushed:
                return out
        for i in flushed:
            out[i] = EntryCorrupted(f"entry {ledger_id}/{entry_ids[i]}: its entry log is missing")
        return out

    def entries_between(self, ledger_id: int, first: int, last: int | None = None,
                        max_count: int | None = None, max_bytes: int | None = None) -> list[bytes]:
        """Consecutive entries ``first, first+1, ...`` (BATCH_READ).

        Stops at the first missing entry, after ``last``, after ``max_count``
        entries, or before the entry that would take the total past
        ``max_bytes`` (the first entry is always returned if it exists).
        """
        out: list[bytes] = []
        total = 0
        eid = first
        if ledger_id not in self._ledgers:
            return out
        while (last is None or eid <= last) and (max_count is None or len(out) < max_count):
            data = self.get_entry(ledger_id, eid)
            if data is None:
                break
            if out and max_bytes is not None and total + len(data) > max_bytes:
                break
            out.append(data)
            total += len(data)
            eid += 1
        return out

    def _retire(self, log_id: int) -> None:
        with self._files_lock:
            fd = self._readers.pop(log_id, None)
            if fd is not None:
                os.close(fd)

    # ------------------------------------------------------------ entry log writing
    def _new_log(self) -> None:
        self._close_writer()
        log_id = self._next_log
        self._next_log += 1
        path = os.path.join(self.directory, log_name(log_id))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            layout.write_all(fd, _encode_log_header(log_id), "an entry log")
            os.fsync(fd)
            layout.fsync_dir(self.directory)
        except BaseException:
            os.close(fd)
            raise
        self._wfd, self._wlog, self._woff = fd, log_id, LOG_HEADER_SIZE
        if self._on_grow is not None:
            self._on_grow()

    def _close_writer(self) -> None:
        if self._wfd >= 0:
            os.close(self._wfd)
            self._wfd = -1
            self._wlog = 0

    def _append_records(self, batches: Iterable[tuple[int, list]]) -> tuple[list, dict]:
        """Append records to the current log (rolling as needed) and fdatasync what was written.

        ``batches`` is ``[(ledger_id, [(entry_id, data), ...]), ...]``. Returns
        ``(rows, added)``: the index rows ``(key bytes, location bytes)`` in
        input order, and per log id ``[end offset, bytes added, entries added]``.
        """
        rows: list = []
        added: dict[int, list[int]] = {}
        parts: list = []
        pack_head = _REC_HEAD.pack
        pack_crc = _U32.pack
        pack_loc = _LOC.pack
        append_row = rows.append
        extend_parts = parts.extend
        limit = self.log_size_limit
        wlog = self._wlog if self._wfd >= 0 else 0
        pos = written = self._woff  # end of queued data / end of data written to the file
        first = pos  # where this call started in the current log
        count = 0
        chunk = 4 * 1024 * 1024

        def write_out():
            nonlocal written
            if parts:
                layout.write_all(self._wfd, b"".join(parts), "an entry log")
                parts.clear()
                written = pos
                self._woff = pos

        def account():
            if wlog and pos > first:
                acc = added.setdefault(wlog, [0, 0, 0])
                acc[0] = pos
                acc[1] += pos - first
                acc[2] += count

        try:
            for ledger_id, pairs in batches:
                for entry_id, data in pairs:
                    n = len(data) + 24
                    if not wlog or (pos > LOG_HEADER_SIZE and pos + n > limit):
                        write_out()
                        account()
                        if wlog:
                            os.fdatasync(self._wfd)
                        self._new_log()
                        wlog = self._wlog
                        pos = written = first = self._woff
                        count = 0
                    head = pack_head(n - 8, ledger_id, entry_id)
                    extend_parts((pack_crc(crc32c(data, crc32c(head))), head, data))
                    append_row((head[4:], pack_loc(wlog, pos, n)))
                    pos += n
                    count += 1
                    if pos - written >= chunk:
                        write_out()
            write_out()
            account()
            if added:
                os.fdatasync(self._wfd)
        except BaseException:
            # the file position is unknown now: stop using this log; bytes in it that no
            # committed index row covers are cut off at the next open
            self._close_writer()
            raise
        return rows, added

    # ------------------------------------------------------------ flush
    def flush(self) -> FlushResult:
        """Write the write cache to the entry log and index, fsynced. Call from a background thread.

        On an I/O error the entries stay cached (and readable) and the error
        propagates; the next flush retries them.
        """
        t0 = time.perf_counter()
        with self._flush_lock:
            with self._lock:
                if self._closed:
                    raise EntryStoreClosed("entry store is closed")
                if self._flushing is None:
                    self._flushing, self._flushing_bytes = self._active, self._active_bytes
                else:  # retry of a failed flush: newer copies win
                    for lid, cache in self._active.items():
                        self._flushing.setdefault(lid, {}).update(cache)
                    self._flushing_bytes = sum(len(d) for c in self._flushing.values() for d in c.values())
                self._active, self._active_bytes = {}, 0
                self._flush_requested = False
                flushing = self._flushing
                dirty = [(lid, led) for lid, led in self._ledgers.items() if led.dirty or lid in flushing]
                for _lid, led in dirty:
                    led.dirty = False
            try:
                n, nbytes = self._write_flush(flushing, dirty)
            except BaseException:
                with self._lock:
                    for lid, led in dirty:
                        if self._ledgers.get(lid) is led:
                            led.dirty = True
                raise
            with self._lock:
                self._flushing, self._flushing_bytes = None, 0
            result = FlushResult(n, nbytes, len(flushing), time.perf_counter() - t0)
            self.last_flush = result
            return result

    def _write_flush(self, flushing: dict, dirty: list) -> tuple[int, int]:
        batches = []
        nbytes = 0
        for lid in sorted(flushing):
            cache = flushing[lid]
            if cache:
                pairs = sorted(cache.items())
                batches.append((lid, pairs))
                nbytes += sum(map(len, cache.values()))
        if not batches and not dirty:
            return 0, 0
        rows, added = self._append_records(batches)
        with self._env.begin(write=True) as txn:
            # rows whose entry id is not above what the index already had may replace a row:
            # fetch the old location so that its log's live counts drop
            fresh = []
            dead: dict[int, list[int]] = {}
            i = 0
            for lid, pairs in batches:
                led = self._ledgers.get(lid)
                persisted = led.persisted_last if led is not None else -1
                k = bisect.bisect_right(pairs, persisted, key=_first) if persisted >= 0 else 0
                for key, loc in rows[i:i + k]:
                    old = txn.replace(key, loc, db=self._idx)
                    if old is not None:
                        ol, _oo, olen = _LOC.unpack(old)
                        acc = dead.setdefault(ol, [0, 0])
                        acc[0] += olen
                        acc[1] += 1
                fresh.extend(rows[i + k:i + len(pairs)])
                i += len(pairs)
            if fresh:
                txn.cursor(db=self._idx).putmulti(fresh, dupdata=False, overwrite=True)
            new_logs = dict(self._logs)
            for lid, (end, b, cnt) in added.items():
                row = list(new_logs.get(lid, (LOG_HEADER_SIZE, 0, 0)))
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
            emptied = [lid for lid in dead if lid in new_logs and new_logs[lid][2] == 0
                       and lid != self._wlog]
            for lid in set(added) | set(dead):
                if lid in emptied:
                    txn.delete(_U64.pack(lid), db=self._logdb)
                    del new_logs[lid]
                elif lid in new_logs:
                    txn.put(_U64.pack(lid), _LOGROW.pack(*new_logs[lid]), db=self._logdb)
            max_flushed = {lid: pairs[-1][0] for lid, pairs in batches}
            for lid, led in dirty:
                last = max(led.persisted_last, max_flushed.get(lid, -1))
                txn.put(_I64.pack(lid), led.encode(last), db=self._ldb)
            txn.put(b"next_log", _U64.pack(self._next_log), db=self._meta)
        with self._lock:
            self._logs = new_logs
            for lid, last in max_flushed.items():
                led = self._ledgers.get(lid)
                if led is not None and last > led.persisted_last:
                    led.persisted_last = last
        self._unlink_logs(emptied)
        return len(rows), nbytes

    def _unlink_logs(self, log_ids: Iterable[int]) -> None:
        removed = False
        for lid in log_ids:
            # unlink first so that no reader can reopen it, then close idle fds
            try:
                os.unlink(os.path.join(self.directory, log_name(lid)))
                removed = True
            except FileNotFoundError:
                pass
            self._retire(lid)
        if removed:
            layout.fsync_dir(self.directory)

    # ------------------------------------------------------------ GC
    def delete_ledger(self, ledger_id: int) -> int:
        """Forget a ledger: cached entries, index rows, state. Returns the number of index rows dropped.

        Entry logs left without live entries are deleted. Does I/O: call it from a background thread.
        """
        with self._flush_lock:
            with self._lock:
                if self._closed:
                    raise EntryStoreClosed("entry store is closed")
                self._ledgers.pop(ledger_id, None)
                cache = self._active.pop(ledger_id, None)
                if cache:
                    self._active_bytes -= sum(len(d) for d in cache.values())
                if self._flushing:
                    cache = self._flushing.pop(ledger_id, None)
                    if cache:
                        self._flushing_bytes -= sum(len(d) for d in cache.values())
            prefix = _I64.pack(ledger_id)
            dead: dict[int, list[int]] = {}
            count = 0
            with self._env.begin(write=True) as txn:
                cur = txn.cursor(db=self._idx)
                ok = cur.set_range(_KEY.pack(ledger_id, 0))
                while ok:
                    k = cur.key()
                    if not k or k[:8] != prefix:
                        break
                    lid, _off, length = _LOC.unpack(cur.value())
                    acc = dead.setdefault(lid, [0, 0])
                    acc[0] += length
                    acc[1] += 1
                    count += 1
                    ok = cur.delete()
                txn.delete(prefix, db=self._ldb)
                new_logs = dict(self._logs)
                emptied = []
                for lid, (b, cnt) in dead.items():
                    if lid not in new_logs:
                        continue
                    row = [new_logs[lid][0], max(0, new_logs[lid][1] - b), max(0, new_logs[lid][2] - cnt)]
                    if row[2] == 0 and lid != self._wlog:
                        emptied.append(lid)
                        del new_logs[lid]
                        txn.delete(_U64.pack(lid), db=self._logdb)
                    else:
                        new_logs[lid] = row
                        txn.put(_U64.pack(lid), _LOGROW.pack(*row), db=self._logdb)
            with self._lock:
                self._logs = new_logs
            self._unlink_logs(emptied)
            return count

    def compact(self, min_live_ratio: float = 0.5) -> dict:
        """Rewrite entry logs whose live fraction is below ``min_live_ratio``; delete the originals.

        Returns ``{"logs": n, "moved_entries": n, "moved_bytes": n, "reclaimed_bytes": n}``.
        """
        stats = {"logs": 0, "moved_entries": 0, "moved_bytes": 0, "reclaimed_bytes": 0}
        with self._flush_lock:
            if self._closed:
                raise EntryStoreClosed("entry store is closed")
            victims = []
            for lid, (size, live, entries) in sorted(self._logs.items()):
                if lid == self._wlog:
                    continue
                payload = max(1, size - LOG_HEADER_SIZE)
                if entries == 0 or live < min_live_ratio * payload:
                    victims.append((lid, size))
            for lid, size in victims:
                path = os.path.join(self.directory, log_name(lid))
                moving = []
                olds = []
                with self._env.begin(db=self._idx) as txn:
                    for off, length, ledger_id, entry_id, data in scan_log(path):
                        raw = txn.get(_KEY.pack(ledger_id, entry_id))
                        if raw is not None and _LOC.unpack(raw) == (lid, off, length):
                            moving.append((ledger_id, entry_id, data))
                            olds.append(raw)
                rows, added = self._append_records([(l, [(e, d)]) for l, e, d in moving])
                with self._env.begin(write=True) as txn:
                    for (key, newloc), old in zip(rows, olds):
                        if txn.get(key, db=self._idx) == old:
                            txn.put(key, newloc, db=self._idx)
                    new_logs = dict(self._logs)
                    for nl, (end, b, cnt) in added.items():
                        row = list(new_logs.get(nl, (LOG_HEADER_SIZE, 0, 0)))
                        row[0] = max(row[0], end)
                        row[1] += b
                        row[2] += cnt
                        new_logs[nl] = row
                        txn.put(_U64.pack(nl), _LOGROW.pack(*row), db=self._logdb)
                    new_logs.pop(lid, None)
                    txn.delete(_U64.pack(lid), db=self._logdb)
                    txn.put(b"next_log", _U64.pack(self._next_log), db=self._meta)
                with self._lock:
                    self._logs = new_logs
                self._unlink_logs([lid])
                stats["logs"] += 1
                stats["moved_entries"] += len(moving)
                stats["moved_bytes"] += sum(len(d) for _l, _e, d in moving)
                stats["reclaimed_bytes"] += size
        return stats

    # ------------------------------------------------------------ misc
    def log_ids(self) -> list[int]:
        """Entry logs that hold committed entries, ascending."""
        return sorted(self._logs)

    def disk_usage(self) -> dict:
        """Bytes on disk: entry logs (total and live) and the index."""
        logs = dict(self._logs)
        total = 0
        for lid in logs:
            try:
                total += os.path.getsize(os.path.join(self.directory, log_name(lid)))
            except OSError:
                pass
        index = 0
        idir = os.path.join(self.directory, INDEX_DIR)
        for name in os.listdir(idir):
            index += os.path.getsize(os.path.join(idir, name))
        return {"entry_logs": len(logs), "entry_log_bytes": total,
                "live_bytes": sum(r[1] for r in logs.values()),
                "live_entries": sum(r[2] for r in logs.values()),
                "index_bytes": index, "cached_bytes": self.cached_bytes}

    def close(self, *, flush: bool = True) -> None:
        """Flush (unless ``flush=False``), then close files and the index. Idempotent."""
        with self._flush_lock:
            if self._closed:
                return
            try:
                if flush:
                    self.flush()
            finally:
                with self._lock:
                    self._closed = True
                self._close_writer()
                with self._files_lock:
                    for fd in self._readers.values():
                        os.close(fd)
                    self._readers.clear()
                self._env.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
