"""Java's metric names, beside bookied's own: what dashboards and alert rules written for
a Java bookie query (the Apache Pulsar Helm chart's ``bookkeeper.json`` and
``bookkeeper-compaction.json``, ``bookie_SERVER_STATUS == 0``...).

Names, types and units are those of BookKeeper 4.17's stats as its Prometheus provider
writes them: the scopes ``bookkeeper_server`` (``proto/RequestStats.java``), ``bookie``
(``bookie/stats/BookieStats.java``, ``bookie/stats/GarbageCollectorStats.java``,
``bookie/BookieStateManager.java``), ``bookie_journal`` (``bookie/stats/JournalStats.java``),
``bookie_ledger`` (``bookie/LedgerDirsManager.java``) and DbLedgerStorage's figures with
their ``ledgerDir``/``indexDir`` labels (``bookie/storage/ldb/DbLedgerStorageStats.java``,
``LedgerMetadataIndexStats.java``, ``EntryLocationIndexStats.java``); all under
``bookkeeper-server/src/main/java/org/apache/bookkeeper/``.  Counters keep Java's names
(no ``_total``), OpStats are summaries in milliseconds (:func:`~bkctl.wire.process.exposition.java_summary`).

Each figure is read from what bookied keeps; where bookied's structure differs from
Java's, the docstring of the reader says what the figure is here.  docs/bookied.md
lists the names answered and those that are not.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from prometheus_client.core import GaugeMetricFamily, Metric

from bkctl.wire.process.exposition import PlainCounter, java_summary, merged
from bkctl.wire.process.opstats import OpStat

from .metrics import Metrics

__all__ = ["JAVA_OPS", "JavaCollector", "JavaFigures", "ledger_dir_usage_name"]

#: Java's request OpStats (scope ``bookkeeper_server``) -> bookied's operations they hold.
#: bookied decodes, serves and answers a request in one thread, with no queue between
#: them: a request's time and its processing's time (Java's ``X_REQUEST`` and ``X``) are
#: the same observations.
JAVA_OPS: dict[str, tuple[str, ...]] = {
    "ADD_ENTRY": ("add",),
    "READ_ENTRY": ("read", "batch_read"),
    "READ_ENTRY_LONG_POLL": ("long_poll",),
    "READ_LAC": ("read_lac",),
    "WRITE_LAC": ("write_lac",),
    "FORCE_LEDGER": ("force_ledger",),
    "GET_LIST_OF_ENTRIES_OF_LEDGER": ("get_list_of_entries",),
}


class JavaFigures(Protocol):
    """What the collector reads (bookied's :class:`~.service.BookieService` is one)."""

    metrics: Metrics

    @property
    def journals(self) -> Sequence[Any]: ...

    @property
    def stores(self) -> Sequence[Any]: ...

    @property
    def bookie(self) -> Any: ...

    @property
    def gc(self) -> Any: ...

    @property
    def cfg(self) -> Any:
        """its :class:`~.config.BookieConfig` (ledgerDirectories, diskUsageThreshold)"""

    @property
    def factory(self) -> Any:
        """its server factory (``reads``: the maxReadsInProgressLimit's count, or None)"""

    def is_readonly(self) -> bool: ...


def ledger_dir_usage_name(ledger_dir: str) -> str:
    """``bookie_ledger_dir_<dir with / as _>_usage``: Java names the gauge of a ledger
    directory after its configured path (the parent of its ``current``)."""
    import re

    return re.sub(r"[^a-zA-Z0-9_:]", "_", "bookie_ledger_dir_" + ledger_dir.rstrip("/").replace("/", "_") + "_usage")


def _gauge(name: str, help_text: str, value: float, labels: dict[str, str] | None = None) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, help_text, labels=list(labels) if labels else None)
    family.add_metric(list(labels.values()) if labels else [], value)
    return family


class JavaCollector:
    """The Java names, read from ``figures`` at each collection (on the reactor thread)."""

    def __init__(self, figures: JavaFigures):
        self.figures = figures

    # -- OpStats ----------------------------------------------------------------------
    def _side(self, ops: tuple[str, ...], success: bool) -> OpStat | None:
        stats = [s for op in ops if (s := self.figures.metrics.opstats.get((op, success))) is not None]
        return merged(stats) if stats else None

    def _opstats(self) -> Iterator[Metric]:
        m = self.figures.metrics
        for java, ops in JAVA_OPS.items():
            ok, failed = self._side(ops, True), self._side(ops, False)
            for name in (f"bookkeeper_server_{java}_REQUEST", f"bookkeeper_server_{java}"):
                yield java_summary(name, f"{java} requests (bookied: {'/'.join(ops)}), milliseconds", ok, failed)
        add_ok, add_failed = self._side(("add",), True), self._side(("add",), False)
        read_ok, read_failed = self._side(JAVA_OPS["READ_ENTRY"], True), self._side(JAVA_OPS["READ_ENTRY"], False)
        yield java_summary("bookie_BOOKIE_ADD_ENTRY", "operation stats of AddEntry on a bookie", add_ok, add_failed)
        yield java_summary("bookie_BOOKIE_READ_ENTRY", "operation stats of ReadEntry on a bookie", read_ok, read_failed)
        yield java_summary(
            "bookie_BOOKIE_RECOVERY_ADD_ENTRY",
            "operation stats of RecoveryAddEntry on a bookie",
            m.recovery_add_latency,
            None,
        )
        # DbLedgerStorage's read-entry: bookied reads its storage in the request's own call
        yield java_summary("bookie_read_entry", "entries read from the ledger storage", read_ok, read_failed)
        # an add is journaled in the call that decodes it and answered once durable: its
        # journal time is the successful add's time (bookied keeps no enqueue stamp apart)
        yield java_summary(
            "bookie_journal_JOURNAL_ADD_ENTRY",
            "operation stats of recording addEntry requests in the journal",
            add_ok,
            None,
        )
        yield java_summary(
            "bookie_journal_JOURNAL_SYNC", "operation stats of syncing data to journal disks", m.fsync_latency, None
        )
        yield java_summary(
            "bookie_journal_JOURNAL_FORCE_WRITE_BATCH_ENTRIES",
            "The distribution of number of entries grouped together into a force write request",
            m.entries_per_fsync,
            None,
            scale=1.0,
        )

    # -- counters and gauges ----------------------------------------------------------
    def collect(self) -> Iterator[Metric]:
        f = self.figures
        yield from self._opstats()
        yield _gauge(
            "bookie_SERVER_STATUS", "Bookie status (1: up, 0: readonly, -1: unregistered)", 0 if f.is_readonly() else 1
        )
        bookie = f.bookie
        journals = list(f.journals)
        stores = list(f.stores)
        yield PlainCounter("bookie_WRITE_BYTES", "total bytes written to a bookie", bookie.bytes_written)
        yield PlainCounter("bookie_READ_BYTES", "total bytes read from a bookie", bookie.bytes_read)
        yield _gauge("bookie_JOURNAL_DIRS", "number of configured journal directories", len(journals))
        queued = sum(j.queued_records for j in journals)
        writing = sum(j.writing_records for j in journals)
        # Java's journal queue sizes are counters it raises and lowers
        yield PlainCounter("bookie_journal_JOURNAL_QUEUE_SIZE", "The journal queue size", queued)
        yield PlainCounter(
            "bookie_journal_JOURNAL_FORCE_WRITE_QUEUE_SIZE",
            "The force write queue size (bookied: records of the group being written and fsynced)",
            writing,
        )
        yield PlainCounter(
            "bookie_journal_JOURNAL_WRITE_BYTES",
            "The number of bytes appended to the journal",
            sum(j.stats.bytes for j in journals),
        )
        yield _gauge(
            "bookkeeper_server_ADD_ENTRY_IN_PROGRESS",
            "Adds received and not yet answered (bookied: in its journals' queues and groups, or waiting "
            "for room in the write cache)",
            queued + writing + bookie.throttled_adds,
        )
        reads = getattr(f.factory, "reads", None)
        if reads is not None:
            yield _gauge("bookkeeper_server_READ_ENTRY_IN_PROGRESS", "Reads in progress", reads.count)
        yield from self._storage(stores)
        yield from self._dirs()
        yield from self._gc(stores)

    def _storage(self, stores: list) -> Iterator[Metric]:
        """DbLedgerStorage's gauges, labelled by directory (bookied keeps its index beside
        its entry logs: ``indexDir`` is the ledger directory too)."""
        families = {
            "bookie_write_cache_size": ("Current number of bytes in the write cache", lambda s: s.cached_bytes),
            "bookie_ledgers_count": ("Total number of ledgers stored", lambda s: len(s.ledger_ids(ordered=False))),
            "bookie_entries_count": (
                "Total number of entries in the entry location index (flushed)",
                lambda s: sum(u.live_entries for u in s.log_usage().values()),
            ),
        }
        for name, (help_text, read) in families.items():
            family = GaugeMetricFamily(name, help_text, labels=["indexDir", "ledgerDir"])
            for store in stores:  # its directory is the ledger directory's current/, as Java's label
                family.add_metric([store.directory, store.directory], read(store))
            yield family

    def _dirs(self) -> Iterator[Metric]:
        """``bookie_ledger_*``: a directory is writable while its filesystem is under
        diskUsageThreshold; its usage gauge is in percent, as Java's."""
        f = self.figures
        dirs = list(f.cfg.ledger_directories)
        threshold = f.cfg.disk_usage_threshold
        writable = 0
        for d in dirs:
            usage = _usage(d)
            if usage is not None and usage < threshold:
                writable += 1
            yield _gauge(ledger_dir_usage_name(d), "ledger directory disk usage, percent", (usage or 0.0) * 100)
        yield _gauge("bookie_ledger_writable_dirs", "number of writable ledger directories", writable)
        yield _gauge("bookie_ledger_num_dirs", "number of ledger directories", len(dirs))

    def _gc(self, stores: list) -> Iterator[Metric]:
        gc = self.figures.gc
        counters: list[tuple[str, str, Callable[[], int]]] = [
            ("bookie_MAJOR_COMPACTION_TOTAL", "Number of major compactions", lambda: gc.major_count),
            ("bookie_MINOR_COMPACTION_TOTAL", "Number of minor compactions", lambda: gc.minor_count),
            (
                "bookie_RECLAIMED_COMPACTION_SPACE_BYTES",
                "Number of disk space bytes reclaimed via compacting entry log files",
                lambda: gc.reclaimed_by_compaction,
            ),
            (
                "bookie_RECLAIMED_DELETION_SPACE_BYTES",
                "Number of disk space bytes reclaimed via deleting entry log files",
                lambda: gc.reclaimed_by_deletion,
            ),
            (
                "bookie_DELETED_LEDGER_TOTAL",
                "Number of ledgers deleted by garbage collection",
                lambda: gc.ledgers_removed,
            ),
        ]
        for name, help_text, read in counters:
            yield PlainCounter(name, help_text, read() if gc is not None else 0)
        usage = [u for s in stores for u in s.log_usage().values()]
        yield _gauge("bookie_ACTIVE_ENTRY_LOG_TOTAL", "Current number of active entry log files", len(usage))
        yield _gauge(
            "bookie_ACTIVE_ENTRY_LOG_SPACE_BYTES",
            "Current number of active entry log space bytes",
            sum(u.live_bytes for u in usage),
        )
        yield _gauge(
            "bookie_ACTIVE_LEDGER_TOTAL",
            "Current number of active ledgers",
            sum(len(s.ledger_ids(ordered=False)) for s in stores),
        )


def _usage(directory: str) -> float | None:
    try:
        st = os.statvfs(directory)
    except OSError:
        return None
    return 1.0 - st.f_bavail / st.f_blocks if st.f_blocks else 0.0
