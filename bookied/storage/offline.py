"""A read-only look at a stopped bookie's entry store (``bkctl bookie inspect`` and ``check``)."""
from __future__ import annotations

import os

import lmdb

from .. import disk_layout as layout
from .entry_log import check_record, log_name
from .index import INDEX_DIR, KEY, LOC, LOGROW, U64, I64, Location
from .ledger_state import LedgerState


class OfflineIndex:
    """The index of a stopped store: unlike the entry store it repairs nothing (no
    truncation, no deletion) and takes no lock."""

    def __init__(self, directory: str):
        self.directory = layout.current_dir(directory)
        path = os.path.join(self.directory, INDEX_DIR)
        if not os.path.isdir(path):
            raise FileNotFoundError(f"{path}: no index")
        self._env = lmdb.open(path, readonly=True, lock=False, max_dbs=4, subdir=True)
        self._idx = self._env.open_db(b"idx", create=False)
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
            raw = txn.get(KEY.pack(ledger_id, entry_id))
        return None if raw is None else Location(*LOC.unpack(raw))

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
        with self._env.begin(db=self._idx) as txn:
            cur = txn.cursor()
            ok = cur.set_range(KEY.pack(ledger_id, 0)) if ledger_id is not None else cur.first()
            while ok:
                lid, eid = KEY.unpack(cur.key())
                if ledger_id is not None and lid != ledger_id:
                    break
                yield lid, eid, Location(*LOC.unpack(cur.value()))
                ok = cur.next()

    def read(self, ledger_id: int, entry_id: int, loc: Location) -> bytes:
        """The entry at ``loc``, checked (EntryCorrupted; FileNotFoundError without its log)."""
        with open(os.path.join(self.directory, log_name(loc.log_id)), "rb") as f:
            data = os.pread(f.fileno(), loc.length, loc.offset)
        return check_record(data, ledger_id, entry_id, *loc)
