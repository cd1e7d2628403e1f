"""bookied's entry storage, in Java DbLedgerStorage's parts:

* ``write_cache`` -- WriteCache: adds in memory until a checkpoint, double-buffered.
* ``entry_log`` -- EntryLogger: the entry log format, appends, reads by offset, log files.
* ``index`` -- EntryLocationIndex: the LMDB index (entry locations, ledger rows, per-log live counts).
* ``ledger_state`` -- a ledger's master key, fenced flag, explicit LAC, last entry id.
* ``store`` -- EntryStore, one ledger directory composed of the above.
* ``flush`` -- a flush's batches of the write cache and its index transaction.
* ``compactor`` -- EntryLogCompactor and its Throttle: rewriting mostly-dead logs, crash-safely.
* ``offline`` -- a read-only view of a stopped store (``bkctl bookie inspect``/``check``).
* ``errors`` -- the errors of all of them.
"""

from .entry_log import LOG_SUFFIX, DamagedRecord, encode_log_record, log_name, scan_log, scan_records
from .errors import EntryCorrupted, EntryStoreClosed, WriteCacheFull
from .flush import FlushResult
from .index import INDEX_DIR, Location
from .offline import OfflineIndex
from .store import EntryStore

__all__ = [
    "DamagedRecord",
    "EntryCorrupted",
    "EntryStore",
    "EntryStoreClosed",
    "FlushResult",
    "INDEX_DIR",
    "LOG_SUFFIX",
    "Location",
    "OfflineIndex",
    "WriteCacheFull",
    "encode_log_record",
    "log_name",
    "scan_log",
    "scan_records",
]
