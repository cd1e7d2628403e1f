"""The ledger storage's keys: directories and checkpoints, the disk-usage watch that turns a bookie
read-only, and garbage collection and compaction of entry logs (sections ``storage``, ``disk`` and
``gc``, in the order bookied has always listed them: ``logSizeLimit`` comes last).
"""

from __future__ import annotations

from .option import JAVA_INT_MAX, JAVA_LONG_MAX, Option

__all__ = ["OPTIONS"]


OPTIONS: tuple[Option, ...] = (
    # -- storage ------------------------------------------------------------
    Option(
        "ledgerDirectories",
        "list",
        ("/tmp/bk-data",),
        "Directories holding ledger data (entry logs).",
        "storage",
        metavar_name="DIR[,DIR...]",
    ),
    Option(
        "indexDirectories",
        "list",
        None,
        "Directories holding ledger index files.",
        "storage",
        fallback="ledgerDirectories",
        metavar_name="DIR[,DIR...]",
    ),
    Option(
        "allowStorageExpansion",
        "bool",
        False,
        "Whether new, empty ledger or index directories may be added to an existing bookie.",
        "storage",
    ),
    Option(
        "flushInterval",
        "int",
        10000,
        "Interval between checkpoints that flush ledger storage to disk so older journal "
        "files can be dropped; these periodic flushes are paced (after each piece of work the "
        "flush sleeps as long as the piece took, at most 2 ms: about half a core, which live adds "
        "barely notice), while a flush the write cache asks for (half full) runs at full speed, and so "
        "does the rest of a paced one once the cache asks.",
        "storage",
        unit="ms",
        min=1,
        max=JAVA_INT_MAX,
    ),
    Option(
        "dbStorage_writeCacheMaxSizeMb",
        "int",
        512,
        "Memory for the write cache that holds added entries until a checkpoint flushes them to ledger storage.",
        "storage",
        unit="MB",
        min=1,
        max=JAVA_LONG_MAX,
    ),
    Option(
        "dbStorage_maxThrottleTimeMs",
        "int",
        10000,
        "How long an add waits for room in a full write cache (while a checkpoint flushes it), "
        "or in a journal whose queue is full (while it writes), before the bookie refuses it "
        "with ETOOMANYREQUESTS; 0 refuses at once.",
        "storage",
        unit="ms",
        min=0,
        max=JAVA_INT_MAX,
    ),
    # -- disk ---------------------------------------------------------------
    Option(
        "diskUsageThreshold",
        "float",
        0.95,
        "Fraction in use of the fullest journal or ledger filesystem at or above which the bookie "
        "turns read-only (or, with readOnlyModeEnabled=false, shuts down).",
        "disk",
        unit="fraction",
        min=0.0,
        max=1.0,
        min_exclusive=True,
        max_exclusive=True,
    ),
    Option(
        "diskUsageWarnThreshold",
        "float",
        0.90,
        "Fraction of disk in use at or above which a warning is logged and garbage collection "
        "runs at once; at most diskUsageThreshold.",
        "disk",
        unit="fraction",
        min=0.0,
        max=1.0,
        min_exclusive=True,
        max_exclusive=True,
    ),
    Option(
        "diskUsageLwmThreshold",
        "float",
        None,
        "Fraction of disk in use below which a bookie that disk usage made read-only becomes "
        "writable again; at most diskUsageThreshold.",
        "disk",
        unit="fraction",
        min=0.0,
        max=1.0,
        min_exclusive=True,
        max_exclusive=True,
        fallback="diskUsageThreshold",
    ),
    Option(
        "diskCheckInterval",
        "int",
        10000,
        "Interval between checks of ledger and index disk usage.",
        "disk",
        unit="ms",
        min=1,
        max=JAVA_INT_MAX,
    ),
    Option(
        "minUsableSizeForEntryLogCreation",
        "int",
        int(1.2 * 1024**3),
        "Free bytes a ledger filesystem over diskUsageThreshold must keep, beyond what a checkpoint "
        "writes, for the checkpoint to write entry logs there (journal replay and recovery adds of a "
        "read-only bookie); otherwise the entries stay in the write cache and the journal until there "
        "is room.",
        "disk",
        unit="bytes",
        min=0,
        max=JAVA_LONG_MAX,
    ),
    Option(
        "minUsableSizeForHighPriorityWrites",
        "int",
        None,
        "Free bytes every journal and ledger filesystem must have for a read-only bookie to accept "
        "high-priority writes (recovery adds, high-priority explicit LAC writes; fences are always "
        "accepted).",
        "disk",
        unit="bytes",
        min=0,
        max=JAVA_LONG_MAX,
        fallback="minUsableSizeForEntryLogCreation",
    ),
    Option(
        "readOnlyModeEnabled",
        "bool",
        True,
        "Whether the bookie may turn read-only (full disk, failed journal or entry-log write); "
        "when false it shuts down instead (exit status 1), refuses to start on a full disk, and "
        "forceReadOnlyBookie cannot be set.",
        "disk",
    ),
    Option("forceReadOnlyBookie", "bool", False, "Whether the bookie starts, and stays, in read-only mode.", "disk"),
    # -- gc -----------------------------------------------------------------
    Option(
        "gcWaitTime",
        "int",
        600000,
        "Interval between garbage collection runs that reclaim the space of deleted ledgers "
        "(and compact entry logs when a compaction is due); a compaction running longer collects "
        "the deleted ledgers again every gcWaitTime, between two entry logs or two batches of one.",
        "gc",
        unit="ms",
        min=1,
        max=JAVA_LONG_MAX,
    ),
    Option(
        "minorCompactionThreshold",
        "float",
        0.2,
        "Minor compaction rewrites the entry logs whose live fraction is below this (0: no minor "
        "compaction); below majorCompactionThreshold.",
        "gc",
        unit="fraction",
        min=0.0,
        max=1.0,
    ),
    Option(
        "minorCompactionInterval",
        "int",
        3600,
        "Interval between minor compactions (0: none); at least gcWaitTime, shorter than majorCompactionInterval.",
        "gc",
        unit="s",
        min=0,
        max=JAVA_LONG_MAX // 1000,
    ),
    Option(
        "nearlyEmptyCompactionThreshold",
        "float",
        0.1,
        "Entry logs of at least half of logSizeLimit whose live fraction is below this (and below "
        "minorCompactionThreshold) are compacted at every garbage collection pass, not only at "
        "minorCompactionInterval: moving "
        "their few live entries gives back nearly a whole log (bookied only; 0: only at the "
        "intervals, as Java; off when minor compaction is).",
        "gc",
        unit="fraction",
        min=0.0,
        max=1.0,
    ),
    Option(
        "settledCompactionThreshold",
        "float",
        0.5,
        "Entry logs of at least half of logSizeLimit whose live bytes have not changed for three "
        "gcWaitTime passes and whose live fraction is below this (and below "
        "majorCompactionThreshold, or minorCompactionThreshold when major compaction is off) are "
        "compacted at the next garbage collection pass, not only at the intervals: their "
        "short-lived ledgers are gone and the rest lives on, so waiting saves no copy (bookied "
        "only; 0: only at the intervals, as Java; off when minor compaction is).",
        "gc",
        unit="fraction",
        min=0.0,
        max=1.0,
    ),
    Option(
        "minorCompactionMaxTimeMillis",
        "int",
        -1,
        "A minor compaction starts no new entry log after running this long (-1: no limit).",
        "gc",
        unit="ms",
        min=-1,
        max=JAVA_LONG_MAX,
    ),
    Option(
        "majorCompactionThreshold",
        "float",
        0.8,
        "Major compaction rewrites the entry logs whose live fraction is below this (0: no major compaction).",
        "gc",
        unit="fraction",
        min=0.0,
        max=1.0,
    ),
    Option(
        "majorCompactionInterval",
        "int",
        86400,
        "Interval between major compactions (0: none); at least gcWaitTime.",
        "gc",
        unit="s",
        min=0,
        max=JAVA_LONG_MAX // 1000,
    ),
    Option(
        "majorCompactionMaxTimeMillis",
        "int",
        -1,
        "A major compaction starts no new entry log after running this long (-1: no limit).",
        "gc",
        unit="ms",
        min=-1,
        max=JAVA_LONG_MAX,
    ),
    Option(
        "compactionRate",
        "int",
        1000,
        "Old name of compactionRateByEntries.",
        "gc",
        unit="entries/s",
        min=1,
        max=JAVA_INT_MAX,
        deprecated=True,
    ),
    Option(
        "compactionRateByEntries",
        "int",
        None,
        "Entries per second compaction copies at most (unless isThrottleByBytes).",
        "gc",
        unit="entries/s",
        min=1,
        max=JAVA_INT_MAX,
        fallback="compactionRate",
    ),
    Option(
        "compactionRateByBytes",
        "int",
        1000000,
        "Bytes per second compaction copies at most, with isThrottleByBytes.",
        "gc",
        unit="bytes/s",
        min=1,
        max=JAVA_INT_MAX,
    ),
    Option(
        "isThrottleByBytes",
        "bool",
        False,
        "Throttle compaction by compactionRateByBytes instead of compactionRateByEntries.",
        "gc",
    ),
    Option(
        "compactionMaxOutstandingRequests",
        "int",
        100000,
        "Entries compaction copies before it switches their index rows in one transaction "
        "(bookied also switches every 16 MiB and every 1,024 entries, so that its index file "
        "need not hold a copy of every index page a switch rewrites).",
        "gc",
        min=1,
        max=JAVA_INT_MAX,
    ),
    Option(
        "forceAllowCompaction",
        "bool",
        False,
        "Let a forced garbage collection (PUT /api/v1/bookie/gc, bkctl bookie gc) compact even "
        "when the compaction intervals are 0.",
        "gc",
    ),
    Option(
        "isForceGCAllowWhenNoSpace",
        "bool",
        False,
        "Over diskUsageWarnThreshold, force garbage collection instead of suspending major "
        "compaction; over diskUsageThreshold, compact at once with the rate and time limits lifted, "
        "and again at every disk check that still finds the disk full, so that a full bookie can "
        "turn writable again by itself.",
        "gc",
    ),
    Option(
        "verifyMetadataOnGC",
        "bool",
        False,
        "Before garbage collection deletes a ledger missing from the metadata store's listing, "
        "read its metadata once more and delete it only if it is truly gone (one ZooKeeper "
        "request per deleted ledger).",
        "gc",
    ),
    Option(
        "gcOverreplicatedLedgerWaitTime",
        "int",
        86400000,
        "Interval between checks for over-replicated ledgers: closed ledgers this bookie holds "
        "whose metadata no longer names it (a replica moved off by bkctl rebalance or drain, a "
        "move abandoned half way), deleted under their replication lock after one more read "
        "(0: never; one pipelined read of the bookie's ledgers' metadata each time).",
        "gc",
        unit="ms",
        min=0,
        max=JAVA_LONG_MAX,
    ),
    Option(
        "logSizeLimit",
        "int",
        1024**3,
        "Size at which an entry log is closed and a new one started.",
        "storage",
        unit="bytes",
        min=64 * 1024,
        max=3 * 1024**3,
    ),
)
