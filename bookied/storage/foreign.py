"""Java's ledger storage as a stopped bookie's directories hold it, read-only: the
InterleavedLedgerStorage index files (``current/xx/yy/<id>.idx``) and DbLedgerStorage's
RocksDB databases (``current/ledgers``, ``current/locations``), whose rows point into
Java's entry logs (``current/<id>.log``).  The bytes are decoded by
:mod:`bkctl.wire.codecs.javadisk`; this module finds the files and opens the databases,
for ``bkctl bookie inspect``/``check`` and ``bookied --salvage``
(:mod:`.salvage`)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["ROCKSDB_DIRS", "db_rows", "has_rocksdb", "java_entry_logs", "java_index_files", "rocksdb_readonly"]

ROCKSDB_DIRS = ("ledgers", "locations")
#: what rocksdict writes into a database directory it opens (Java's have none): removed again
ROCKSDICT_CONFIG = "rocksdict-config.json"
_IDX_RE = re.compile(r"^[0-9a-f]+\.idx$")
_HEX_DIR_RE = re.compile(r"^[0-9a-f]{1,2}$")
_LOG_RE = re.compile(r"^[0-9a-f]+\.log$")


def _names(current: str) -> list[str]:
    try:
        return sorted(os.listdir(current))
    except FileNotFoundError:
        return []


def java_index_files(current: str) -> Iterator[tuple[int, str]]:
    """``(ledger id, path)`` of every Interleaved index file below ``current``."""
    for a in _names(current):
        pa = os.path.join(current, a)
        if not (_HEX_DIR_RE.match(a) and os.path.isdir(pa)):
            continue
        for b in sorted(os.listdir(pa)):
            pb = os.path.join(pa, b)
            if not (_HEX_DIR_RE.match(b) and os.path.isdir(pb)):
                continue
            for name in sorted(os.listdir(pb)):
                if _IDX_RE.match(name):
                    yield int(name[:-4], 16), os.path.join(pb, name)


def java_entry_logs(currents) -> dict[int, str]:
    """Entry log id -> path of the Java entry logs in these ``current`` directories."""
    logs: dict[int, str] = {}
    for current in currents:
        for name in _names(current):
            if _LOG_RE.match(name):
                logs[int(name[:-4], 16)] = os.path.join(current, name)
    return logs


def has_rocksdb(current: str) -> bool:
    return all(os.path.isdir(os.path.join(current, n)) for n in ROCKSDB_DIRS)


@contextmanager
def rocksdb_readonly(path: str):
    """A RocksDB database opened read-only, its directory left as it was (ImportError
    without the ``rocksdb`` extra: rocksdict)."""
    from rocksdict import AccessType, Options, Rdict

    config = os.path.join(path, ROCKSDICT_CONFIG)
    had_config = os.path.exists(config)
    logs = tempfile.mkdtemp(prefix="bkctl-rocksdb-")
    opts = Options(raw_mode=True)
    opts.set_db_log_dir(logs)
    db = None
    try:
        db = Rdict(path, opts, access_type=AccessType.read_only())
        yield db
    finally:
        if db is not None:
            db.close()
        if not had_config and os.path.exists(config):
            os.unlink(config)
        shutil.rmtree(logs, ignore_errors=True)


def db_rows(db, ledger_id: int | None = None) -> Iterator[tuple[int, int, int, int]]:
    """``(ledger id, entry id, entry log id, offset)`` of a ``locations`` database (one ledger's)."""
    from bkctl.wire.codecs.javadisk import db_location_key, parse_db_location, parse_db_location_key

    it = db.iter()
    if ledger_id is None:
        it.seek_to_first()
    else:
        it.seek(db_location_key(ledger_id, 0))
    while it.valid():
        lid, eid = parse_db_location_key(it.key())
        if ledger_id is not None and lid != ledger_id:
            break
        yield (lid, eid) + parse_db_location(it.value())
        it.next()
