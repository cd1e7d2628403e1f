"""The write-ahead journal's keys (bookied/journal.py): directories, durability, group commit,
file sizes (section ``journal``).
"""

from __future__ import annotations

from .option import JAVA_INT_MAX, JAVA_LONG_MAX, Option

__all__ = ["OPTIONS"]


OPTIONS: tuple[Option, ...] = (
    # -- journal ------------------------------------------------------------
    Option(
        "journalDirectories",
        "list",
        None,
        "Directories for the write-ahead journal, one journal per directory.",
        "journal",
        fallback="journalDirectory",
        metavar_name="DIR[,DIR...]",
    ),
    Option(
        "journalDirectory",
        "str",
        "/tmp/bk-txn",
        "Single journal directory, used only when journalDirectories is unset (deprecated since BookKeeper 4.5).",
        "journal",
        deprecated=True,
        metavar_name="DIR",
    ),
    Option(
        "journalSyncData",
        "bool",
        True,
        "Whether journal writes are fsynced before entries are acknowledged; when false an add is "
        "acknowledged once written to the operating system's page cache, the journal is fsynced "
        "only when a file rolls and at shutdown, a power failure can lose acknowledged entries, "
        "and the bookie logs a warning at start.",
        "journal",
    ),
    Option(
        "journalWriteData",
        "bool",
        True,
        "Whether entries are written to the journal before being acknowledged; when false an add "
        "is acknowledged as soon as the entry is in the write cache, only the next checkpoint "
        "(flushInterval) makes it durable, a crash loses what came since, and the bookie logs a "
        "warning at start (master keys and fences are still journaled).",
        "journal",
    ),
    Option(
        "journalAdaptiveGroupWrites",
        "bool",
        True,
        "Whether journal writes queued while an fsync runs share the next fsync (group commit), "
        "which bookied's journal, writing and fsyncing each group in one step, always does; "
        "false is not supported and is warned about at start.",
        "journal",
    ),
    Option(
        "journalMaxGroupWaitMSec",
        "int",
        2,
        "Longest time a journal write waits to be grouped with others before being forced.",
        "journal",
        unit="ms",
        min=0,
        max=JAVA_LONG_MAX,
        attr_name="journal_max_group_wait_msec",
    ),
    Option(
        "journalBufferedWritesThreshold",
        "int",
        512 * 1024,
        "Amount of queued journal data that ends the wait for a group (journalMaxGroupWaitMSec, "
        "with journalFlushWhenQueueEmpty=false) and writes it at once.",
        "journal",
        unit="bytes",
        min=0,
        max=JAVA_LONG_MAX,
    ),
    Option(
        "journalBufferedEntriesThreshold",
        "int",
        0,
        "Number of queued journal records which, once exceeded, ends the wait for a group "
        "(journalMaxGroupWaitMSec, with journalFlushWhenQueueEmpty=false) and writes it at once; "
        "0 disables this limit.",
        "journal",
        unit="entries",
        min=0,
        max=JAVA_LONG_MAX,
    ),
    Option(
        "journalFlushWhenQueueEmpty",
        "bool",
        True,
        "Write and fsync as soon as the journal writer is free instead of waiting up to "
        "journalMaxGroupWaitMSec for company; groups still form from what arrives during an fsync "
        "(bookied defaults to true, Java to false).",
        "journal",
    ),
    Option(
        "journalRecoveryAddGroupWaitMSec",
        "int",
        5,
        "Longest time a journal group made only of recovery adds (the copies autorecovery and "
        "bkctl recover write, and a recovering client's re-adds) waits for company before being forced, with "
        "journalFlushWhenQueueEmpty too; an ordinary add ends the wait at once, so live writers "
        "never wait for it, and the copies cost the disk fewer fsyncs (bookied only; 0 = no wait).",
        "journal",
        unit="ms",
        min=0,
        max=1000,
        attr_name="journal_recovery_add_group_wait_msec",
    ),
    Option(
        "journalMaxSizeMB",
        "int",
        2048,
        "Size at which the current journal file is closed and a new one started.",
        "journal",
        unit="MB",
        min=1,
        max=JAVA_LONG_MAX,
    ),
    Option(
        "journalMaxBackups",
        "int",
        5,
        "Number of journal files a checkpoint keeps among those it no longer needs (the newest); "
        "they are not replayed.",
        "journal",
        unit="files",
        min=0,
        max=JAVA_INT_MAX,
    ),
    Option(
        "journalPreAllocSizeMB",
        "int",
        16,
        "Space preallocated at a time as a journal file grows.",
        "journal",
        unit="MB",
        min=1,
        max=JAVA_INT_MAX,
    ),
    Option(
        "journalZeroAheadMB",
        "int",
        4,
        "How far ahead of the records a thread of the journal's own writes zeros into the "
        "preallocated space and fsyncs them, so that the group commits' fsyncs write data only, "
        "without the metadata of preallocated blocks written for the first time (on ext4 about "
        "0.6x the fsync latency of small groups, for a journal alone); the zeros follow the writes, "
        "so they double the journal's disk writes, and stop while the groups average 128 KB or "
        "more; they are read back into the page cache ahead of the writer (bookied only; 0 = off, "
        "as it is with journalSyncData=false).",
        "journal",
        unit="MB",
        min=0,
        max=1024,
    ),
    Option(
        "journalRemovePagesFromCache",
        "bool",
        True,
        "Whether the journal drops what it has fsynced, but for its last 8 MB, from the operating "
        "system's page cache, so that journal writes, which are never read back while the bookie "
        "runs, do not push out the entry logs' pages that reads are served from.",
        "journal",
    ),
)
