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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .errors import BadInput, OpFailed

if TYPE_CHECKING:
    from bkctl.wire.metadata.store import MetadataStore

    from .bookie_conf import BookieDirs

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
def _mapped(path: str):
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


def _parse_file(path: str, parse):
    with _mapped(path) as buf:
        return parse(bytes(buf))


def _digest_length(digest: str | None) -> int | None:
    if digest is None:
        return None
    from bkctl.wire.codecs.digest import DIGEST_LENGTH, DigestType

    return DIGEST_LENGTH[DigestType.parse(digest)]


def entry_fields(data: bytes, digest_length: int | None) -> dict:
    """LAC, length and body of a packaged entry; with a digest length, its payload."""
    from bkctl.wire.codecs.digest import ENTRY_HEADER, entry_header
    from bkctl.wire.errors import CodecError

    try:
        _l, _e, lac, length = entry_header(data)
    except CodecError as e:
        return {"size": len(data), "error": str(e)}
    doc: dict[str, Any] = {"size": len(data), "lac": lac, "length": length}
    body = data[ENTRY_HEADER.size :]
    if digest_length is not None:
        doc["payload"] = body[digest_length:].decode("utf-8", "backslashreplace")
    else:
        doc["body"] = body.hex()
    return doc


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


def files(dirs: BookieDirs) -> Iterator[dict]:
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
                yield {
                    "dir": d,
                    "path": path,
                    "name": os.path.normpath(os.path.join(rel_root, name)),
                    "kind": kind,
                    "format": fmt,
                    "size": os.path.getsize(path),
                }


# -- journal -----------------------------------------------------------------------------


def journal(
    dirs: BookieDirs, ledger: int | None = None, entry: int | None = None, digest: str | None = None
) -> Iterator[dict]:
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
                        row = {
                            "file": path,
                            "format": "java",
                            "version": version,
                            "offset": r.offset,
                            "ledger_id": r.ledger_id,
                            "entry_id": r.entry_id if r.entry_id >= 0 else None,
                            "kind": r.kind,
                        }
                        row.update(entry_fields(r.data, dlen) if r.kind == "entry" else {"data": r.data.hex()})
                        yield row
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
                    row = {
                        "file": path,
                        "format": "bookied",
                        "version": bj.FORMAT_VERSION,
                        "offset": offset,
                        "ledger_id": rec.ledger_id,
                        "entry_id": entry_id,
                        "kind": kind,
                    }
                    if isinstance(rec, bj.EntryRecord):
                        row.update(entry_fields(rec.data, dlen))
                    elif isinstance(rec, bj.MasterKeyRecord):
                        row["data"] = rec.key.hex()
                    elif isinstance(rec, bj.ExplicitLacRecord):
                        row["data"] = rec.body.hex()
                    yield row


# -- entry logs ------------------------------------------------------------------------------


def entrylog(
    dirs: BookieDirs, ledger: int | None = None, entry: int | None = None, digest: str | None = None
) -> Iterator[dict]:
    dlen = _digest_length(digest)
    for d in dirs.ledgers:
        with _offline_index(d) as idx:
            logs = idx.logs() if idx is not None else {}
            for name in _names(d):
                yield from _entrylog_file(os.path.join(_current(d), name), idx, logs, ledger, entry, dlen)


@contextmanager
def _offline_index(d: str):
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


def _entrylog_file(path: str, idx, logs: dict, ledger, entry, dlen) -> Iterator[dict]:
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
                    yield dict(
                        {
                            "file": path,
                            "format": "java",
                            "offset": e.offset,
                            "ledger_id": e.ledger_id,
                            "entry_id": e.entry_id,
                        },
                        **entry_fields(e.data, dlen),
                    )
    elif name.endswith(be.LOG_SUFFIX):
        log_id = int(name[: -len(be.LOG_SUFFIX)], 16)
        for offset, length, ledger_id, entry_id, data in be.scan_log(path):  # past damaged records too
            if _wanted(ledger_id, entry_id, ledger, entry):
                state = idx.record_state(logs, log_id, offset, length, ledger_id, entry_id) if idx else None
                yield dict(
                    {
                        "file": path,
                        "format": "bookied",
                        "offset": offset,
                        "ledger_id": ledger_id,
                        "entry_id": entry_id,
                        "state": state,
                    },
                    **entry_fields(data, dlen),
                )


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


def damaged_records(dirs: BookieDirs) -> list[dict]:
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
                    loc = idx.location(rec.ledger_id, rec.entry_id) if rec.ledger_id is not None else None
                    found.append(
                        {
                            "file": path,
                            "log_id": log_id,
                            "offset": rec.offset,
                            "length": rec.length,
                            "ledger_id": rec.ledger_id,
                            "entry_id": rec.entry_id,
                            "reason": rec.reason,
                            "live": loc is not None and loc.log_id == log_id and loc.offset == rec.offset,
                        }
                    )
    return found


@contextmanager
def _rocksdb(path: str):
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


def _db_rows(db, ledger_id: int | None = None) -> Iterator[tuple[int, int, int, int]]:
    from bkctl.bookied.storage.foreign import db_rows

    return db_rows(db, ledger_id)


def _db_ledgers(idir: str) -> Iterator[dict]:
    from bkctl.wire.codecs.javadisk import parse_db_ledger_data

    with _rocksdb(os.path.join(_current(idir), "ledgers")) as db:
        rows = [(int.from_bytes(k, "big", signed=True), parse_db_ledger_data(v)) for k, v in db.items()]
    with _rocksdb(os.path.join(_current(idir), "locations")) as db:
        for ledger_id, st in rows:
            ids = [eid for _l, eid, _lg, _o in _db_rows(db, ledger_id)]
            yield {
                "format": "java-rocksdb",
                "file": os.path.join(_current(idir), "ledgers"),
                "ledger_id": ledger_id,
                "fenced": st.fenced,
                "master_key": st.master_key.hex(),
                "explicit_lac": st.explicit_lac.hex() if st.explicit_lac else None,
                "limbo": st.limbo,
                "entries": len(ids),
                "first_entry_id": ids[0] if ids else None,
                "last_entry_id": ids[-1] if ids else None,
            }


def _db_entries(idir: str, ldir: str) -> Iterator[dict]:
    logs = _java_logs([ldir])
    path = os.path.join(_current(idir), "locations")
    with _rocksdb(path) as db:
        rows = list(_db_rows(db))
    for ledger_id, entry_id, log_id, offset in rows:
        yield {
            "format": "java-rocksdb",
            "dir": idir,
            "ledger_id": ledger_id,
            "entry_id": entry_id,
            "location": {"log_id": log_id, "offset": offset},
            "file": path,
            "read": _java_reader(logs, log_id, offset),
        }


# -- index ---------------------------------------------------------------------------------------


def _java_index_files(d: str) -> Iterator[tuple[int, str]]:
    from bkctl.bookied.storage.foreign import java_index_files

    return java_index_files(_current(d))


def index_entries(dirs: BookieDirs) -> Iterator[dict]:
    """Every index row: ``{"format", "dir", "ledger_id", "entry_id", "location"}`` plus a
    ``read()`` that returns the stored entry (raising on a bad one).  Java's .idx rows point
    into the ledger dirs' entry logs; bookied's LMDB rows into its own."""
    from bkctl.bookied import storage as be
    from bkctl.wire.codecs.javadisk import parse_index

    logs = _java_logs(dirs.ledgers)
    for d in dict.fromkeys(dirs.index or dirs.ledgers):
        for ledger_id, path in _java_index_files(d):
            idx = _parse_file(path, parse_index)
            for entry_id, (log_id, offset) in sorted(idx.locations.items()):
                yield {
                    "format": "java",
                    "dir": d,
                    "ledger_id": ledger_id,
                    "entry_id": entry_id,
                    "location": {"log_id": log_id, "offset": offset},
                    "file": path,
                    "read": _java_reader(logs, log_id, offset),
                }
    for idir, ldir in _db_pairs(dirs):
        yield from _db_entries(idir, ldir)
    for d in dirs.ledgers:
        if not os.path.isdir(os.path.join(_current(d), be.INDEX_DIR)):
            continue
        store = be.OfflineIndex(d)
        try:
            for ledger_id, entry_id, loc in store.rows():
                yield {
                    "format": "bookied",
                    "dir": d,
                    "ledger_id": ledger_id,
                    "entry_id": entry_id,
                    "location": {"log_id": loc.log_id, "offset": loc.offset, "length": loc.length},
                    "file": os.path.join(_current(d), be.INDEX_DIR),
                    "read": (lambda s=store, l=ledger_id, e=entry_id, c=loc: s.read(l, e, c)),
                }
        finally:
            store.close()


def _java_logs(ledger_dirs) -> dict[int, str]:
    """Entry log id -> path of the Java entry logs in these ledger directories."""
    from bkctl.bookied.storage.foreign import java_entry_logs

    return java_entry_logs(_current(d) for d in ledger_dirs)


def _java_reader(logs: dict[int, str], log_id: int, offset: int):
    def read() -> bytes:
        from bkctl.wire.codecs.javadisk import read_entry_at

        path = logs.get(log_id)
        if path is None:
            raise FileNotFoundError(f"entry log {log_id:x}.log is missing")
        with _mapped(path) as buf:
            return read_entry_at(buf, offset)

    return read


def index_ledgers(dirs: BookieDirs) -> Iterator[dict]:
    """One row per indexed ledger: format, fenced, master key, explicit LAC, entries, first and
    last entry id."""
    from bkctl.bookied import storage as be
    from bkctl.wire.codecs.javadisk import parse_index

    for d in dict.fromkeys(dirs.index or dirs.ledgers):
        for ledger_id, path in _java_index_files(d):
            idx = _parse_file(path, parse_index)
            ids = sorted(idx.locations)
            yield {
                "format": "java",
                "file": path,
                "ledger_id": ledger_id,
                "fenced": idx.fenced,
                "master_key": idx.master_key.hex(),
                "explicit_lac": idx.explicit_lac.hex() if idx.explicit_lac else None,
                "entries": len(ids),
                "first_entry_id": ids[0] if ids else None,
                "last_entry_id": ids[-1] if ids else None,
            }
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
                yield {
                    "format": "bookied",
                    "file": os.path.join(_current(d), be.INDEX_DIR),
                    "ledger_id": ledger_id,
                    "fenced": st["fenced"],
                    "master_key": st["master_key"].hex() if st["master_key"] else None,
                    "explicit_lac": st["explicit_lac"].hex() if st["explicit_lac"] else None,
                    "entries": len(ids),
                    "first_entry_id": ids[0] if ids else None,
                    "last_entry_id": ids[-1] if ids else None,
                }
        finally:
            store.close()


def index(
    dirs: BookieDirs, ledger: int | None = None, entry: int | None = None, digest: str | None = None
) -> Iterator[dict]:
    """Without ``ledger``: :func:`index_ledgers`.  With it: that ledger's index rows, each with
    the entry read through its location."""
    if ledger is None:
        yield from index_ledgers(dirs)
        return
    dlen = _digest_length(digest)
    for row in index_entries(dirs):
        if not _wanted(row["ledger_id"], row["entry_id"], ledger, entry):
            continue
        read = row.pop("read")
        try:
            row.update(entry_fields(read(), dlen))
        except Exception as e:  # noqa: BLE001 - a bad location is what the operator looks for
            row["error"] = str(e)
        yield row


# -- lastMark --------------------------------------------------------------------------------


def lastmark(dirs: BookieDirs) -> Iterator[dict]:
    from bkctl.bookied import journal as bj
    from bkctl.wire.bookie_disk.layout import is_last_mark
    from bkctl.wire.codecs.javadisk import parse_last_mark

    for d in dirs.ledgers:
        for name in _names(d):
            if is_last_mark(name):
                path = os.path.join(_current(d), name)
                file_id, offset = _parse_file(path, parse_last_mark)
                yield {
                    "file": path,
                    "format": "java",
                    "journal_file_id": file_id,
                    "journal_file": f"{file_id:x}.txn",
                    "offset": offset,
                }
    for d in dirs.journal:
        mark = bj.read_mark_file(_current(d))
        if mark is not None:
            yield {
                "file": os.path.join(_current(d), bj.MARK_FILE),
                "format": "bookied",
                "journal_file_id": mark.file_id,
                "journal_file": bj.file_name(mark.file_id),
                "offset": mark.offset,
            }


# -- check -----------------------------------------------------------------------------------


def check(dirs: BookieDirs, store: MetadataStore | None = None, on_total=None, on_entry=None) -> dict:
    """Read every indexed entry; its header must name the indexed ledger and entry, and its
    digest must verify with the ledger's digest type and password when its metadata can be
    read (``store``); otherwise the entry counts as ``unverified``.  Returns ``entries``,
    ``ok``, ``unverified``, ``bad``, ``problems`` (ledger_id, entry_id, format, error),
    ``uncommitted_logs`` (:func:`uncommitted_logs`: not a problem, reported) and
    ``damaged_records`` (:func:`damaged_records`: bookied's entry logs scanned as compaction
    scans them; a live one is also a bad entry)."""
    from bkctl.wire.codecs.digest import DigestManager, entry_header
    from bkctl.wire.errors import NotFound

    rows = list(index_entries(dirs))
    if on_total is not None:
        on_total(len(rows))
    managers: dict[int, DigestManager | None] = {}

    def manager(ledger_id: int):
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

    doc: dict[str, Any] = {
        "entries": len(rows),
        "ok": 0,
        "unverified": 0,
        "bad": 0,
        "ledgers": len({r["ledger_id"] for r in rows}),
        "problems": [],
        "uncommitted_logs": uncommitted_logs(dirs),
        "damaged_records": damaged_records(dirs),
    }
    for r in rows:
        try:
            data = r["read"]()
            lid, eid, _lac, _length = entry_header(data)
            if (lid, eid) != (r["ledger_id"], r["entry_id"]):
                raise ValueError(f"holds entry {lid}/{eid}")
            dm = manager(r["ledger_id"])
            if dm is None:
                doc["unverified"] += 1
            else:
                dm.verify(data, r["entry_id"])
                doc["ok"] += 1
        except Exception as e:  # noqa: BLE001 - every bad entry is reported
            doc["bad"] += 1
            doc["problems"].append(
                {
                    "ledger_id": r["ledger_id"],
                    "entry_id": r["entry_id"],
                    "format": r["format"],
                    "location": r["location"],
                    "error": str(e) or type(e).__name__,
                }
            )
        if on_entry is not None:
            on_entry()
    return doc
