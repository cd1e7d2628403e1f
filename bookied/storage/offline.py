"""A read-only look at a stopped bookie's entry store (``bkctl bookie inspect`` and ``check``)."""

from __future__ import annotations

import os

import lmdb

from bkctl.wire.bookie_disk import layout

from .entry_log import check_record, log_name
from .index import (
    FORMAT_ROWS,
    I64,
    INDEX_DIR,
    KEY,
    LOC,
    LOGROW,
    U64,
    Location,
    decode_run,
    ledger_runs,
    legacy_rows,
    run_covering,
)
from .ledger_state import LedgerState


class OfflineIndex:
    """The index of a stopped store: unlike the entry store it repairs nothing (no
    truncation, no deletion) and takes no lock."""

    def __init__(self, directory: str, name: str = INDEX_DIR):
        self.directory = layout.current_dir(directory)
        path = os.path.join(self.directory, name)
        if not os.path.isdir(path):
            raise FileNotFoundError(f"{path}: no index")
        self._env = lmdb.open(path, readonly=True, lock=False, max_dbs=5, subdir=True)
        with self._env.begin() as txn:
            #: a format 1 index (rows of one entry each) not yet opened by a newer bookied
            self._legacy = txn.get(
                b"format", db=self._env.open_db(b"meta", txn=txn, create=False)
            ) == FORMAT_ROWS.to_bytes(4, "big")
        self._idx = self._env.open_db(b"idx" if self._legacy else b"runs", create=False)
        self._ldb = self._env.open_db(b"ledgers", create=False)
        self._logdb = self._env.open_db(b"logs", create=False)

    def close(self) -> None:
        self._env.close()

    def ledgers(self) -> dict[int, dict]:
        """ledger id -> ``{"fenced", "master_key", "explicit_lac", "last_entry_id"}``."""
        with self._env.begin(db=self._ldb) as txn:
            return {I64.unpack(k)[0]: LedgerState.decode(v).as_dict() for k, v in txn.cursor()}

    def logs(self) -> dict[int, tuple[int, int, int]]:
        """log id -> (committed size, live bytes, live entries) of the logs holding committed entries."""
        with self._env.begin(db=self._logdb) as txn:
            return {U64.unpack(k)[0]: LOGROW.unpack(v) for k, v in txn.cursor()}

    def location(self, ledger_id: int, entry_id: int) -> Location | None:
        with self._env.begin(db=self._idx) as txn:
            if self._legacy:
                raw = txn.get(KEY.pack(ledger_id, entry_id))
                return None if raw is None else Location(*LOC.unpack(raw))
            found = run_covering(txn.cursor(), ledger_id, entry_id)
        if found is None:
            return None
        first, value = found
        return next(Location(*e[1:]) for e in decode_run(first, value) if e[0] == entry_id)

    def record_state(self, logs: dict, log_id: int, offset: int, length: int, ledger_id: int, entry_id: int) -> str:
        """What a record of an entry log is to this index: "live" (its entry's row points at
        it), "stale" (a deleted ledger's, or a copy that compaction or a re-add replaced) or
        "uncommitted" (past what the index committed: a crash's leftover, removed at the next
        start); ``logs`` is :meth:`logs`."""
        row = logs.get(log_id)
        if row is None or offset + length > row[0]:
            return "uncommitted"
        return "live" if self.location(ledger_id, entry_id) == (log_id, offset, length) else "stale"

    def rows(self, ledger_id: int | None = None):
        """``(ledger id, entry id, Location)`` of every index row (of one ledger), in key order."""
        for lid, (eid, *loc) in self._rows(ledger_id):
            yield lid, eid, Location(*loc)

    def _rows(self, ledger_id: int | None):
        with self._env.begin(db=self._idx) as txn:
            if self._legacy:
                yield from legacy_rows(txn.cursor(), ledger_id)
                return
            for lid, first, value in ledger_runs(txn.cursor(), ledger_id):
                for entry in decode_run(first, value):
                    yield lid, entry

    def read(self, ledger_id: int, entry_id: int, loc: Location) -> bytes:
        """The entry at ``loc``, checked (EntryCorrupted; FileNotFoundError without its log)."""
        with open(os.path.join(self.directory, log_name(loc.log_id)), "rb") as f:
            data = os.pread(f.fileno(), loc.length, loc.offset)
        return check_record(data, ledger_id, entry_id, *loc)
