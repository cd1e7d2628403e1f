"""``bookied --rebuild-index``: a ledger directory's index made again from its entry logs (Java's
``bookkeeper shell rebuild-db-ledger-locations-index``), for a bookie whose index does not open.

It reads with the parsers the bookie and ``bookied --salvage`` already have, one per format: the
entry logs with :func:`~.entry_log.scan_records` (compaction's scan: damaged bytes are skipped and
counted, never fatal), the old index with :class:`~.offline.OfflineIndex` (salvage's read-only
view), the journals with :func:`~bkctl.bookied.journal_format.scan_file`.  Every good record of
every entry log is indexed; a later copy of an entry (a higher log id, or further on in one log:
compaction's copy, a recovery add's re-put) replaces an earlier one.  Each log's row gets its file
size as committed size and the live bytes and entries now indexed in it; a log left with none is
removed by the store when it next opens.  The journals are left as they are: the next start replays
them from their checkpoint mark, as always.

Which ledgers, and their state (fencing, master key, explicit LAC):

* **the old index opens** (``index.lmdb``, or ``index.lmdb.replaced``, which an interrupted run
  leaves): its ``ledgers`` table is the list of the ledgers the bookie holds.  A ledger deletion
  removes the ledger's row in the same transaction as its entries', so the records of a deleted
  ledger still in an entry log (a log shared with live ledgers) are left out: it does not come back.
  The fenced flag, master key and explicit LAC are the table's.
* **it does not** (damaged, or missing): the ledgers are those of the records found; when the
  configuration names a metadata store it is asked, and a ledger whose metadata is gone is left out
  (what the garbage collector would delete); without one they are kept and the collector's next pass
  deletes them.  Whether a ledger was fenced is not known then: every one is marked fenced (a writer
  still adding to it is refused, EFENCED, and changes its ensemble: nothing acknowledged is lost),
  with the master key and explicit LAC the journals still hold.

In both cases a fence record found in a journal marks its ledger fenced.

Safety: the directory's lock (:class:`~.dir_lock.DirectoryLock`, which a running bookie holds) is
taken first, so it refuses to run while the bookie runs.  The new index is written in
``index.lmdb.rebuild`` (removed first if a killed run left it), made durable, and only then put in
place: the old index is renamed ``index.lmdb.replaced``, the new one ``index.lmdb``, and the replaced
one removed.  Killed anywhere, a rerun starts over and ends with the same index: it is idempotent.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from bkctl.wire.bookie_disk import layout

from .dir_lock import DirectoryLock
from .entry_log import LOG_HEADER_SIZE, DamagedRecord, EntryLogger, scan_records
from .index import INDEX_DIR, EntryLocationIndex
from .ledger_state import LedgerState
from .offline import OfflineIndex

log = logging.getLogger("bookied.rebuild")

__all__ = ["REBUILDING", "REPLACED", "RebuildReport", "rebuild_index"]

REBUILDING = INDEX_DIR + ".rebuild"
REPLACED = INDEX_DIR + ".replaced"
#: entries indexed per LMDB transaction (a transaction's dirty pages are bounded)
BATCH_ENTRIES = 200_000


@dataclass
class RebuildReport:
    """What a rebuild of one ledger directory found and did."""

    directory: str
    old_index: str | None = None  # the old index whose ledger list was used, None if none opened
    logs: int = 0
    entries: int = 0
    ledgers: int = 0
    damaged_records: int = 0
    deleted_ledgers_left_out: list[int] = field(default_factory=list)
    fenced_unknown: int = 0  # ledgers marked fenced for want of their state

    def line(self) -> str:
        how = f"ledger list from {self.old_index}" if self.old_index else "no old index opened"
        return (
            f"{self.directory}: {self.entries} entries of {self.ledgers} ledgers in {self.logs} entry logs "
            f"({how}); {len(self.deleted_ledgers_left_out)} deleted ledgers left out, "
            f"{self.damaged_records} damaged records skipped, {self.fenced_unknown} ledgers marked fenced"
        )


def _old_states(current: str) -> tuple[str | None, dict[int, LedgerState] | None]:
    """The ledger states of the old index (or of the one an interrupted run replaced), if one opens."""
    for name in (INDEX_DIR, REPLACED):
        path = os.path.join(current, name)
        if not os.path.exists(os.path.join(path, "data.mdb")):
            continue
        try:
            index = OfflineIndex(os.path.dirname(current), name)
            try:
                states = {}
                for lid, doc in index.ledgers().items():
                    led = LedgerState()
                    led.master_key, led.fenced, led.lac = doc["master_key"], bool(doc["fenced"]), doc["explicit_lac"]
                    states[lid] = led
                return path, states
            finally:
                index.close()
        except Exception as e:  # noqa: BLE001 - a damaged index: the next source, or none
            log.warning("rebuild: %s does not open: %s", path, e)
    return None, None


def _journal_states(journal_dirs: Iterable[str]) -> dict[int, LedgerState]:
    """The fences, master keys and explicit LACs the journals' files still hold."""
    from bkctl.bookied import journal_format as bj

    states: dict[int, LedgerState] = {}
    for d in journal_dirs:
        current = layout.current_dir(d)
        if not os.path.isdir(current):
            continue
        for fid in bj.list_file_ids(current):
            path = os.path.join(current, bj.file_name(fid))
            for _offset, rec in bj.scan_file(path, 0, bj.FileScan(path)):
                if isinstance(rec, bj.EntryRecord):
                    continue
                led = states.setdefault(rec.ledger_id, LedgerState())
                if isinstance(rec, bj.FenceRecord):
                    led.fenced = True
                elif isinstance(rec, bj.MasterKeyRecord):
                    led.master_key = bytes(rec.key)
                elif isinstance(rec, bj.ExplicitLacRecord):
                    led.lac = bytes(rec.body)
    return states


def rebuild_index(
    ledger_dir: str,
    journal_dirs: Iterable[str] = (),
    *,
    map_size: int = 256 * 1024**3,
    metadata_exists: Callable[[int], bool] | None = None,
) -> RebuildReport:
    """Rebuild the index of ``ledger_dir`` (see the module doc); ``metadata_exists(ledger_id)``:
    whether the metadata store holds the ledger (asked only when no old index opens).
    DirectoryInUse while a bookie runs on it."""
    current = layout.current_dir(ledger_dir)
    report = RebuildReport(current)
    with DirectoryLock(current):
        shutil.rmtree(os.path.join(current, REBUILDING), ignore_errors=True)
        report.old_index, old = _old_states(current)
        journal = _journal_states(journal_dirs)
        # (ledger id -> entry id -> location), the later copy of an entry winning
        found: dict[int, dict[int, tuple[int, int, int]]] = {}
        logs = EntryLogger.logs_in(current)
        report.logs = len(logs)
        for log_id in sorted(logs):
            for rec in scan_records(logs[log_id]):
                if isinstance(rec, DamagedRecord):
                    report.damaged_records += 1
                    continue
                offset, length, ledger_id, entry_id, _data = rec
                found.setdefault(ledger_id, {})[entry_id] = (log_id, offset, length)
        if old is not None:
            states = old
            report.deleted_ledgers_left_out = sorted(lid for lid in found if lid not in old)
        else:
            gone = [lid for lid in found if metadata_exists is not None and not metadata_exists(lid)]
            report.deleted_ledgers_left_out = sorted(gone)
            states = {}
            for lid in found:
                if lid not in gone:
                    states[lid] = led = journal.get(lid) or LedgerState()
                    report.fenced_unknown += not led.fenced
                    led.fenced = True
        for lid, led in journal.items():
            if lid in states and led.fenced:
                states[lid].fenced = True
        _write(current, logs, {lid: found.get(lid, {}) for lid in states}, states, map_size, report)
        _put_in_place(current)
    report.ledgers = len(states)
    return report


def _write(current: str, logs: dict, found: dict, states: dict, map_size: int, report: RebuildReport) -> None:
    """The new index, in :data:`REBUILDING`, committed (each commit fsyncs)."""
    index = EntryLocationIndex(current, map_size, REBUILDING)
    try:
        index.load()  # (stamps the format)
        live: dict[int, list[int]] = {}
        batch: list[tuple[int, list]] = []
        size = 0

        def commit() -> None:
            with index.write() as txn:
                for lid, entries in batch:
                    index.put_entries(txn, lid, entries, {})
            batch.clear()

        for lid in sorted(states):
            entries = [(eid, *where) for eid, where in sorted(found[lid].items())]
            for _eid, log_id, _offset, length in entries:
                acc = live.setdefault(log_id, [0, 0])
                acc[0] += length
                acc[1] += 1
            report.entries += len(entries)
            batch.append((lid, entries))
            size += len(entries)
            if size >= BATCH_ENTRIES:
                commit()
                size = 0
        commit()
        with index.write() as txn:
            rows = {
                log_id: [max(os.path.getsize(logs[log_id]), LOG_HEADER_SIZE), nbytes, count]
                for log_id, (nbytes, count) in live.items()
            }
            index.put_log_rows(txn, rows, list(rows), set())
            for lid, led in states.items():
                index.put_ledger(txn, lid, led.encode(max(found[lid], default=-1)))
            index.put_next_log(txn, max(logs, default=0) + 1)
    finally:
        index.close()


def _put_in_place(current: str) -> None:
    """The rebuilt index becomes ``index.lmdb``; the old one goes (see the module doc)."""
    old, replaced = os.path.join(current, INDEX_DIR), os.path.join(current, REPLACED)
    if os.path.exists(old):
        shutil.rmtree(replaced, ignore_errors=True)
        os.rename(old, replaced)
        layout.fsync_dir(current)
    os.rename(os.path.join(current, REBUILDING), old)
    layout.fsync_dir(current)
    shutil.rmtree(replaced, ignore_errors=True)
