"""Read-only inspection of a stopped bookie's directories (``bkctl bookie inspect`` and
``bookie check``), for Java's files and bookied's.

Which format a file has is told by its name: Java's journal ``*.txn``, entry logs
``*.log``, index ``xx/yy/*.idx`` and ``lastMark*`` (decoded by
:mod:`bkctl.wire.codecs.javadisk`); bookied's journal ``*.bjn``, entry logs ``*.bel``,
``index.lmdb/`` and ``bookied.lastmark`` (decoded by bookied's own modules).
DbLedgerStorage's RocksDB index (``ledgers/``, ``locations/``) is listed but
not read.  Every function yields JSON-ready rows; nothing is written.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import BadInput, OpFailed
from .results import fields_of, not_in_json, omitted_when_none

if TYPE_CHECKING:
    from bkctl.bookied.storage.offline import OfflineIndex
    from bkctl.wire.metadata.store import MetadataStore

    from .bookie_conf import BookieDirs

#: what a file parser makes of its bytes (:func:`_parse_file`)
T = TypeVar("T")

#: DbLedgerStorage's databases below ``current/`` (as :data:`bkctl.bookied.storage.foreign.ROCKSDB_DIRS`,
#: not imported for it: that package loads LMDB)
ROCKSDB_DIRS = ("ledgers", "locations")


def _current(d: str) -> str:
    return os.path.join(d, "current")


def _names(d: str) -> list[str]:
    try:
        return sorted(os.listdir(_current(d)))
    except FileNotFoundError:
        return []


@contextmanager
def _mapped(path: str) -> Iterator[bytes | mmap.mmap]:
    """The file's bytes (mmap); a CodecError while they are decoded names the file (exit 1)."""
    from bkctl.wire.errors import CodecError

    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if os.fstat(f.fileno()).st_size else None
        try:
            yield b"" if mm is None else mm
        except CodecError as e:
            raise OpFailed(f"{path}: {e}") from None
        finally:
            if mm is not None:
                mm.close()


def _parse_file(path: str, parse: Callable[[bytes], T]) -> T:
    with _mapped(path) as buf:
        return parse(bytes(buf))


def _digest_length(digest: str | None) -> int | None:
    if digest is None:
        return None
    from bkctl.wire.codecs.digest import DIGEST_LENGTH, DigestType

    return DIGEST_LENGTH[DigestType.parse(digest)]


@dataclass(frozen=True, slots=True)
class EntryFields:
    """A stored entry's ``size`` and what its header says: ``lac`` and ``length``, then its
    ``payload`` as text (the digest's length known) or its ``body`` in hex; or the ``error``
    its header gave instead.  A record's JSON line carries these keys beside its own."""

    size: int
    lac: int | None = omitted_when_none()
    length: int | None = omitted_when_none()
    payload: str | None = omitted_when_none()
    body: str | None = omitted_when_none()
    error: str | None = omitted_when_none()


def entry_fields(data: bytes, digest_length: int | None) -> EntryFields:
    """LAC, length and body of a packaged entry; with a digest length, its payload."""
    from bkctl.wire.codecs.digest import ENTRY_HEADER, entry_header
    from bkctl.wire.errors import CodecError

    try:
        _l, _e, lac, length = entry_header(data)
    except CodecError as e:
        return EntryFields(len(data), error=str(e))
    body = data[ENTRY_HEADER.size :]
    if digest_length is not None:
        return EntryFields(len(data), lac, length, payload=body[digest_length:].decode("utf-8", "backslashreplace"))
    return EntryFields(len(data), lac, length, body=body.hex())


def _entry_keys(data: bytes, digest_length: int | None) -> dict[str, Any]:
    """:func:`entry_fields` as the fields of a record that holds an entry (:class:`EntryKeys`)."""
    return fields_of(entry_fields(data, digest_length))


@dataclass(frozen=True, slots=True, kw_only=True)
class EntryKeys:
    """The keys a record that holds an entry adds to its line (:class:`EntryFields`'), each
    absent while None: a special record (a fence, a master key) has none of them."""

    size: int | None = omitted_when_none()
    lac: int | None = omitted_when_none()
    length: int | None = omitted_when_none()
    payload: str | None = omitted_when_none()
    body: str | None = omitted_when_none()
    error: str | None = omitted_when_none()


def _wanted(ledger_id: int, entry_id: int | None, ledger: int | None, entry: int | None) -> bool:
    return (ledger is None or ledger_id == ledger) and (entry is None or entry_id == entry)


def check_filters(ledger: int | None, entry: int | None) -> None:
    if entry is not None and ledger is None:
        raise BadInput("--entry needs --ledger")


# -- files -------------------------------------------------------------------------------

#: (name test, kind, format), first match wins
_KINDS = (
    (lambda n: n == "VERSION", "cookie", "both"),
    (lambda n: n.endswith(".txn"), "journal", "java"),
    (lambda n: n.endswith(".bjn"), "journal", "bookied"),
    (lambda n: n.endswith(".log"), "entrylog", "java"),
    (lambda n: n.endswith(".bel"), "entrylog", "bookied"),
    (lambda n: n.endswith(".idx"), "index", "java"),
    (lambda n: n.startswith("lastMark"), "lastmark", "java"),
    (lambda n: n == "bookied.lastmark", "lastmark", "bookied"),
    (lambda n: n == "lastId", "lastid", "java"),
    (lambda n: n == "bookied.layout", "layout", "bookied"),
)


def _kind(name: str) -> tuple[str, str]:
    for test, kind, fmt in _KINDS:
        if test(name):
            return kind, fmt
    return "other", ""


@dataclass(frozen=True, slots=True)
class BookieFile:
    """A file below a directory's ``current/``: its kind (journal, entrylog, index, cookie,
    lastmark, ...), its format (java, bookied, java-rocksdb, both) and size."""

    dir: str
    path: str
    name: str  #: relative to ``current/``
    kind: str
    format: str
    size: int


def files(dirs: BookieDirs) -> Iterator[BookieFile]:
    """Every file below each directory's ``current/`` with its kind, format and size."""
    for d in dirs.all:
        top = _current(d)
        for root, subdirs, names in os.walk(top):
            subdirs.sort()
            rel_root = os.path.relpath(root, top)
            parts = rel_root.split(os.sep)
            in_lmdb = "index.lmdb" in parts
            in_rocks = parts[0] in ROCKSDB_DIRS
            for name in sorted(names):
                path = os.path.join(root, name)
                kind, fmt = _kind(name)
                if in_lmdb:
                    kind, fmt = "index", "bookied"
                elif in_rocks:
                    kind, fmt = "index", "java-rocksdb"
                name = os.path.normpath(os.path.join(rel_root, name))
                yield BookieFile(d, path, name, kind, fmt, os.path.getsize(path))


# -- journal -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JournalRecord(EntryKeys):
    """A journal record: where (``file``, ``offset``), its ledger and entry (None for a special
    record), its ``kind`` (entry, master_key, fence, explicit_lac, ...), an entry's fields, and a
    special record's ``data`` in hex (none for a fence)."""

    file: str
    format: str  #: java, bookied
    version: int
    offset: int
    ledger_id: int
    entry_id: int | None
    kind: str
    data: str | None = omitted_when_none()


def journal(
    dirs: BookieDirs, ledger: int | None = None, entry: int | None = None, digest: str | None = None
) -> Iterator[JournalRecord]:
    from bkctl.bookied import journal as bj
    from bkctl.wire.codecs.javadisk import scan_journal

    dlen = _digest_length(digest)
    for d in dirs.journal:
        for name in _names(d):
            path = os.path.join(_current(d), name)
            if name.endswith(".txn"):
                with _mapped(path) as buf:
                    version, records = scan_journal(buf)
                    for r in records:
                        if not _wanted(r.ledger_id, r.entry_id, ledger, entry):
                            continue
                        entry_id = r.entry_id if r.entry_id >= 0 else None
                        keys = _entry_keys(r.data, dlen) if r.kind == "entry" else {"data": r.data.hex()}
                        yield JournalRecord(path, "java", version, r.offset, r.ledger_id, entry_id, r.kind, **keys)
            elif name.endswith(bj.FILE_SUFFIX):
                for offset, rec in bj.scan_file(path):
                    kind = {
                        bj.EntryRecord: "entry",
                        bj.MasterKeyRecord: "master_key",
                        bj.FenceRecord: "fence",
                        bj.ExplicitLacRecord: "explicit_lac",
                    }.get(type(rec), "unknown")
                    entry_id = rec.entry_id if isinstance(rec, bj.EntryRecord) else None
                    if not _wanted(rec.ledger_id, entry_id, ledger, entry):
                        continue
                    extra: dict[str, Any] = {}
                    if isinstance(rec, bj.EntryRecord):
                        extra = _entry_keys(rec.data, dlen)
                    elif isinstance(rec, bj.MasterKeyRecord):
                        extra = {"data": rec.key.hex()}
                    elif isinstance(rec, bj.ExplicitLacRecord):
                        extra = {"data": rec.body.hex()}
                    yield JournalRecord(
                        path, "bookied", bj.FORMAT_VERSION, offset, rec.ledger_id, entry_id, kind, **extra
                    )


# -- entry logs ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LoggedEntry(EntryKeys):
    """An entry in a Java entry log: where (``offset``: the location's, just past the size
    field), its ledger and entry, its fields."""

    file: str
    format: str  #: java
    offset: int
    ledger_id: int
    entry_id: int


@dataclass(frozen=True, slots=True)
class BookiedLoggedEntry(EntryKeys):
    """An entry in a bookied entry log: as :class:`LoggedEntry` (``offset``: the record's), and its
    ``state`` in the index (live; stale: a deleted ledger's, or a copy a compaction or a re-add
    replaced; uncommitted; None without an index)."""

    file: str
    format: str  #: bookied
    offset: int
    ledger_id: int
    entry_id: int
    state: str | None


def entrylog(
    dirs: BookieDirs, ledger: int | None = None, entry: int | None = None, digest: str | None = None
) -> Iterator[LoggedEntry | BookiedLoggedEntry]:
    dlen = _digest_length(digest)
    for d in dirs.ledgers:
        with _offline_index(d) as idx:
            logs = idx.logs() if idx is not None else {}
            for name in _names(d):
                yield from _entrylog_file(os.path.join(_current(d), name), idx, logs, ledger, entry, dlen)


@contextmanager
def _offline_index(d: str) -> Iterator[OfflineIndex | None]:
    """bookied's index of ledger directory ``d`` read-only, or None where it has none."""
    from bkctl.bookied import storage as be

    if not os.path.isdir(os.path.join(_current(d), be.INDEX_DIR)):
        yield None
        return
    idx = be.OfflineIndex(d)
    try:
        yield idx
    finally:
        idx.close()


def _entrylog_file(
    path: str,
    idx: OfflineIndex | None,
    logs: dict[int, Any],
    ledger: int | None,
    entry: int | None,
    dlen: int | None,
) -> Iterator[LoggedEntry | BookiedLoggedEntry]:
    """The records of one entry log; bookied's with their ``state`` in the index (live; stale:
    a deleted ledger's, or replaced by a compaction's or a re-add's copy; uncommitted: a crash's
    leftover that bookied removes at its next start)."""
    from bkctl.bookied import storage as be
    from bkctl.wire.codecs.javadisk import scan_entry_log

    name = os.path.basename(path)
    if name.endswith(".log") and os.path.isfile(path):
        with _mapped(path) as buf:
            if len(buf) == 0:
                return
            for e in scan_entry_log(buf):
                if _wanted(e.ledger_id, e.entry_id, ledger, entry):
                    keys = _entry_keys(e.data, dlen)
                    yield LoggedEntry(path, "java", e.offset, e.ledger_id, e.entry_id, **keys)
    elif name.endswith(be.LOG_SUFFIX):
        log_id = int(name[: -len(be.LOG_SUFFIX)], 16)
        for offset, length, ledger_id, entry_id, data in be.scan_log(path):  # past damaged records too
            if _wanted(ledger_id, entry_id, ledger, entry):
                state = idx.record_state(logs, log_id, offset, length, ledger_id, entry_id) if idx else None
                keys = _entry_keys(data, dlen)
                yield BookiedLoggedEntry(path, "bookied", offset, ledger_id, entry_id, state, **keys)


def uncommitted_logs(dirs: BookieDirs) -> list[str]:
    """bookied entry logs the index does not know (a flush or a compaction killed before its
    commit): they hold no entry the bookie acknowledged as stored, and bookied deletes them at start."""
    from bkctl.bookied import storage as be

    found = []
    for d in dirs.ledgers:
        with _offline_index(d) as idx:
            if idx is None:
                continue
            known = idx.logs()
            for name in _names(d):
                if name.endswith(be.LOG_SUFFIX) and int(name[: -len(be.LOG_SUFFIX)], 16) not in known:
                    found.append(os.path.join(_current(d), name))
    return found


# -- DbLedgerStorage (RocksDB) -----------------------------------------------------------------------

ROCKSDB_HINT = "reading DbLedgerStorage's RocksDB index needs the rocksdb extra: pip install 'bkctl[rocksdb]'"


@dataclass(frozen=True, slots=True)
class DamagedRecord:
    """Bytes of a committed bookied entry log that are not a valid record: where, the ledger and
    entry its header claims (None when not plausible), why, and whether the index points at it."""

    file: str
    log_id: int
    offset: int
    length: int
    ledger_id: int | None
    entry_id: int | None
    reason: str
    live: bool


def damaged_records(dirs: BookieDirs) -> list[DamagedRecord]:
    """The damaged records of bookied's committed entry logs (bytes that are not a valid record;
    the scan goes on past them, as compaction's does): file, log_id, offset, length, the
    ledger_id/entry_id its header claims (None when not plausible), reason, and ``live``
    when the index points at it (that entry is then also a bad entry)."""
    from bkctl.bookied import storage as be

    found = []
    for d in dirs.ledgers:
        with _offline_index(d) as idx:
            if idx is None:
                continue
            for log_id, (committed, _live, _entries) in sorted(idx.logs().items()):
                path = os.path.join(_current(d), be.log_name(log_id))
                if not os.path.exists(path):
                    continue
                for rec in be.scan_records(path, committed):
                    if type(rec) is not be.DamagedRecord:
                        continue
                    lid, eid = rec.ledger_id, rec.entry_id  # both None, or both claimed
                    loc = idx.location(lid, eid) if lid is not None and eid is not None else None
                    live = loc is not None and loc.log_id == log_id and loc.offset == rec.offset
                    found.append(
                        DamagedRecord(
                            path, log_id, rec.offset, rec.length, rec.ledger_id, rec.entry_id, rec.reason, live
                        )
                    )
    return found


@contextmanager
def _rocksdb(path: str) -> Iterator[Any]:
    """A RocksDB database opened read-only, leaving its directory as it was."""
    from bkctl.bookied.storage.foreign import rocksdb_readonly

    try:
        import rocksdict  # noqa: F401 - the extra's presence, said as a hint when missing
    except ImportError:
        raise OpFailed(f"{path}: {ROCKSDB_HINT}") from None
    with rocksdb_readonly(path) as db:
        yield db


def _db_pairs(dirs: BookieDirs) -> Iterator[tuple[str, str]]:
    """``(index dir, ledger dir)`` of each DbLedgerStorage directory: the i-th index
    directory holds the index of the i-th ledger directory's entry logs."""
    from bkctl.bookied.storage.foreign import has_rocksdb

    index = list(dirs.index or dirs.ledgers)
    for i, ld in enumerate(dirs.ledgers):
        idir = index[i] if i < len(index) else ld
        if has_rocksdb(_current(idir)):
            yield idir, ld


def _db_rows(db: Any, ledger_id: int | None = None) -> Iterator[tuple[int, int, int, int]]:
    from bkctl.bookied.storage.foreign import db_rows

    return db_rows(db, ledger_id)


@dataclass(frozen=True, slots=True)
class IndexedLedger:
    """A ledger a bookie's index holds: its state (fenced, master key and explicit LAC in hex)
    and how many entries, first to last; DbLedgerStorage's also whether it is in limbo."""

    format: str  #: java, java-rocksdb, bookied
    file: str
    ledger_id: int
    fenced: bool
    master_key: str | None
    explicit_lac: str | None
    entries: int
    first_entry_id: int | None
    last_entry_id: int | None
    limbo: bool | None = omitted_when_none()


def _db_ledgers(idir: str) -> Iterator[IndexedLedger]:
    from bkctl.wire.codecs.javadisk import parse_db_ledger_data

    with _rocksdb(os.path.join(_current(idir), "ledgers")) as db:
        rows = [(int.from_bytes(k, "big", signed=True), parse_db_ledger_data(v)) for k, v in db.items()]
    with _rocksdb(os.path.join(_current(idir), "locations")) as db:
        for ledger_id, st in rows:
            ids = [eid for _l, eid, _lg, _o in _db_rows(db, ledger_id)]
            yield IndexedLedger(
                "java-rocksdb",
                os.path.join(_current(idir), "ledgers"),
                ledger_id,
                st.fenced,
                st.master_key.hex(),
                st.explicit_lac.hex() if st.explicit_lac else None,
                len(ids),
                ids[0] if ids else None,
                ids[-1] if ids else None,
                limbo=st.limbo,
            )


@dataclass(frozen=True, slots=True)
class IndexEntry(EntryKeys):
    """An index row: its ledger and entry, where the index points (``location``: ``log_id``,
    ``offset``, bookied's ``length``), the index's ``file``; ``read()`` gives the stored entry
    (raising on a bad one); with it read, its fields or the ``error`` the read gave."""

    format: str  #: java, java-rocksdb, bookied
    dir: str
    ledger_id: int
    entry_id: int
    location: dict[str, int]
    file: str
    read: Callable[[], bytes] = not_in_json()


def _db_entries(idir: str, ldir: str) -> Iterator[IndexEntry]:
    logs = _java_logs([ldir])
    path = os.path.join(_current(idir), "locations")
    with _rocksdb(path) as db:
        rows = list(_db_rows(db))
    for ledger_id, entry_id, log_id, offset in rows:
        where = {"log_id": log_id, "offset": offset}
        yield IndexEntry("java-rocksdb", idir, ledger_id, entry_id, where, path, _java_reader(logs, log_id, offset))


# -- index ---------------------------------------------------------------------------------------


def _java_index_files(d: str) -> Iterator[tuple[int, str]]:
    from bkctl.bookied.storage.foreign import java_index_files

    return java_index_files(_current(d))


def index_entries(dirs: BookieDirs) -> Iterator[IndexEntry]:
    """Every index row, with its ``read()``.  Java's .idx rows point into the ledger dirs' entry
    logs; bookied's LMDB rows into its own."""
    from bkctl.bookied import storage as be
    from bkctl.wire.codecs.javadisk import parse_index

    logs = _java_logs(dirs.ledgers)
    for d in dict.fromkeys(dirs.index or dirs.ledgers):
        for ledger_id, path in _java_index_files(d):
            idx = _parse_file(path, parse_index)
            for entry_id, (log_id, offset) in sorted(idx.locations.items()):
                where = {"log_id": log_id, "offset": offset}
                yield IndexEntry("java", d, ledger_id, entry_id, where, path, _java_reader(logs, log_id, offset))
    for idir, ldir in _db_pairs(dirs):
        yield from _db_entries(idir, ldir)
    for d in dirs.ledgers:
        if not os.path.isdir(os.path.join(_current(d), be.INDEX_DIR)):
            continue
        store = be.OfflineIndex(d)
        try:
            for ledger_id, entry_id, loc in store.rows():
                yield IndexEntry(
                    "bookied",
                    d,
                    ledger_id,
                    entry_id,
                    {"log_id": loc.log_id, "offset": loc.offset, "length": loc.length},
                    os.path.join(_current(d), be.INDEX_DIR),
                    partial(store.read, ledger_id, entry_id, loc),
                )
        finally:
            store.close()


def _java_logs(ledger_dirs: Iterable[str]) -> dict[int, str]:
    """Entry log id -> path of the Java entry logs in these ledger directories."""
    from bkctl.bookied.storage.foreign import java_entry_logs

    return java_entry_logs(_current(d) for d in ledger_dirs)


def _java_reader(logs: dict[int, str], log_id: int, offset: int) -> Callable[[], bytes]:
    def read() -> bytes:
        from bkctl.wire.codecs.javadisk import read_entry_at

        path = logs.get(log_id)
        if path is None:
            raise FileNotFoundError(f"entry log {log_id:x}.log is missing")
        with _mapped(path) as buf:
            return read_entry_at(buf, offset)

    return read


def index_ledgers(dirs: BookieDirs) -> Iterator[IndexedLedger]:
    """One row per indexed ledger: format, fenced, master key, explicit LAC, entries, first and
    last entry id."""
    from bkctl.bookied import storage as be
    from bkctl.wire.codecs.javadisk import parse_index

    for d in dict.fromkeys(dirs.index or dirs.ledgers):
        for ledger_id, path in _java_index_files(d):
            idx = _parse_file(path, parse_index)
            ids = sorted(idx.locations)
            yield IndexedLedger(
                "java",
                path,
                ledger_id,
                idx.fenced,
                idx.master_key.hex(),
                idx.explicit_lac.hex() if idx.explicit_lac else None,
                len(ids),
                ids[0] if ids else None,
                ids[-1] if ids else None,
            )
    for idir, _ldir in _db_pairs(dirs):
        yield from _db_ledgers(idir)
    for d in dirs.ledgers:
        if not os.path.isdir(os.path.join(_current(d), be.INDEX_DIR)):
            continue
        store = be.OfflineIndex(d)
        try:
            counts: dict[int, list[int]] = {}
            for ledger_id, entry_id, _loc in store.rows():
                counts.setdefault(ledger_id, []).append(entry_id)
            for ledger_id, st in sorted(store.ledgers().items()):
                ids = counts.get(ledger_id, [])
                yield IndexedLedger(
                    "bookied",
                    os.path.join(_current(d), be.INDEX_DIR),
                    ledger_id,
                    st["fenced"],
                    st["master_key"].hex() if st["master_key"] else None,
                    st["explicit_lac"].hex() if st["explicit_lac"] else None,
                    len(ids),
                    ids[0] if ids else None,
                    ids[-1] if ids else None,
                )
        finally:
            store.close()


def index(
    dirs: BookieDirs, ledger: int | None = None, entry: int | None = None, digest: str | None = None
) -> Iterator[IndexedLedger | IndexEntry]:
    """Without ``ledger``: :func:`index_ledgers`.  With it: that ledger's index rows, each with
    the entry read through its location."""
    if ledger is None:
        yield from index_ledgers(dirs)
        return
    dlen = _digest_length(digest)
    for row in index_entries(dirs):
        if not _wanted(row.ledger_id, row.entry_id, ledger, entry):
            continue
        try:
            yield replace(row, **_entry_keys(row.read(), dlen))
        except Exception as e:  # noqa: BLE001 - a bad location is what the operator looks for
            yield replace(row, error=str(e))


# -- lastMark --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LastMark:
    """The journal position a ledger storage is checkpointed to, and the file that says it."""

    file: str
    format: str  #: java, bookied
    journal_file_id: int
    journal_file: str
    offset: int


def lastmark(dirs: BookieDirs) -> Iterator[LastMark]:
    from bkctl.bookied import journal as bj
    from bkctl.wire.bookie_disk.layout import is_last_mark
    from bkctl.wire.codecs.javadisk import parse_last_mark

    for d in dirs.ledgers:
        for name in _names(d):
            if is_last_mark(name):
                path = os.path.join(_current(d), name)
                file_id, offset = _parse_file(path, parse_last_mark)
                yield LastMark(path, "java", file_id, f"{file_id:x}.txn", offset)
    for d in dirs.journal:
        mark = bj.read_mark_file(_current(d))
        if mark is not None:
            path = os.path.join(_current(d), bj.MARK_FILE)
            yield LastMark(path, "bookied", mark.file_id, bj.file_name(mark.file_id), mark.offset)


# -- check -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EntryProblem:
    """An indexed entry that did not read back whole: where the index points (``location``:
    ``log_id``, ``offset``, bookied's ``length``) and why."""

    ledger_id: int
    entry_id: int
    format: str
    location: dict[str, int]
    error: str


@dataclass(frozen=True, slots=True)
class CheckReport:
    """``bookie check``: the indexed entries read back by outcome (``ok``; ``unverified``: no
    metadata to check the digest with; ``bad``), each bad one's problem, the entry logs the index
    does not know, and the damaged records of bookied's entry logs."""

    entries: int
    ledgers: int
    ok: int
    unverified: int
    bad: int
    problems: list[EntryProblem]
    uncommitted_logs: list[str]
    damaged_records: list[DamagedRecord]


def check(
    dirs: BookieDirs,
    store: MetadataStore | None = None,
    on_total: Callable[[int], object] | None = None,
    on_entry: Callable[[], object] | None = None,
) -> CheckReport:
    """Read every indexed entry; its header must name the indexed ledger and entry, and its
    digest must verify with the ledger's digest type and password when its metadata can be
    read (``store``); otherwise the entry counts as ``unverified``.  The report lists too the
    :func:`uncommitted_logs` (not a problem, reported) and the :func:`damaged_records`
    (bookied's entry logs scanned as compaction scans them; a live one is also a bad entry)."""
    from bkctl.wire.codecs.digest import DigestManager, entry_header
    from bkctl.wire.errors import NotFound

    rows = list(index_entries(dirs))
    if on_total is not None:
        on_total(len(rows))
    managers: dict[int, DigestManager | None] = {}

    def manager(ledger_id: int) -> DigestManager | None:
        if ledger_id not in managers:
            managers[ledger_id] = None
            if store is not None:
                from bkctl.wire.client.credentials import ledger_credentials

                try:
                    md, _ = store.ledgers.read(ledger_id)
                    password, digest_type = ledger_credentials(ledger_id, md)
                    managers[ledger_id] = DigestManager(ledger_id, digest_type, password)
                except NotFound:
                    pass
        return managers[ledger_id]

    uncommitted, damaged = uncommitted_logs(dirs), damaged_records(dirs)
    ok = unverified = 0
    problems: list[EntryProblem] = []
    for r in rows:
        try:
            data = r.read()
            lid, eid, _lac, _length = entry_header(data)
            if (lid, eid) != (r.ledger_id, r.entry_id):
                raise ValueError(f"holds entry {lid}/{eid}")
            dm = manager(r.ledger_id)
            if dm is None:
                unverified += 1
            else:
                dm.verify(data, r.entry_id)
                ok += 1
        except Exception as e:  # noqa: BLE001 - every bad entry is reported
            error = str(e) or type(e).__name__
            problems.append(EntryProblem(r.ledger_id, r.entry_id, r.format, r.location, error))
        if on_entry is not None:
            on_entry()
    ledgers = len({r.ledger_id for r in rows})
    return CheckReport(len(rows), ledgers, ok, unverified, len(problems), problems, uncommitted, damaged)
