"""What bookied's HTTP admin answers on Java's day-2 bookie endpoints (``HttpRouter``):
``/api/v1/bookie/gc``, ``gc_details``, ``list_disk_file``, ``last_log_mark`` and
``expand_storage``.  Bodies use Java's keys; bookied's own figures follow them.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable

from twisted.internet import defer

log = logging.getLogger("bookied.gc")


class GarbageCollector:
    """Runs the bookie's garbage collection (``run_once() -> Deferred`` of the number of
    ledgers removed) one pass at a time, periodically or forced, and keeps Java's
    ``GarbageCollectionStatus`` figures.  bookied's GC drops deleted ledgers and the
    entry logs they empty; it has no major/minor compaction, so those counters stay 0.
    """

    __name__ = "gc"  # for the periodic runner's log lines

    def __init__(self, run_once: Callable[[], defer.Deferred], clock):
        self._run_once = run_once
        self.clock = clock
        self.running: defer.Deferred | None = None
        self.forced = False
        self.runs = 0
        self.ledgers_removed = 0
        self.last_run_ms: int | None = None

    def __call__(self, force: bool = False) -> defer.Deferred:
        """Start a pass (or join the one running); fires when it is over."""
        if self.running is not None:
            self.forced = self.forced or force
            d = defer.Deferred()
            self.running.addBoth(lambda r: (d.callback(None), r)[1])
            return d
        self.forced = force
        self.running = d = defer.maybeDeferred(self._run_once)

        def done(removed):
            self.runs += 1
            self.ledgers_removed += removed or 0
            self.last_run_ms = int(self.clock.seconds() * 1000)
            return removed

        def over(result):
            self.running = None
            self.forced = False
            return result

        d.addCallback(done)
        d.addBoth(over)
        d.addErrback(lambda f: log.error("garbage collection failed: %s", f.getErrorMessage()))
        return d

    def in_force_gc(self) -> bool:
        return self.running is not None and self.forced

    def details(self) -> list[dict]:
        """Java's ``gc_details`` body: one GarbageCollectionStatus (bookied: one GC thread)."""
        last = self.last_run_ms if self.last_run_ms is not None else 0
        return [{
            "forceCompacting": self.in_force_gc(),
            "majorCompacting": False,
            "minorCompacting": False,
            "lastMajorCompactionTime": last,
            "lastMinorCompactionTime": last,
            "majorCompactionCounter": 0,
            "minorCompactionCounter": 0,
            "gcRunning": self.running is not None,
            "gcRuns": self.runs,
            "ledgersRemoved": self.ledgers_removed,
        }]


#: file_type -> (Java's key, the suffixes of Java's and bookied's files)
DISK_FILE_TYPES = {
    "journal": ("journal files", (".txn", ".bjn")),
    "entrylog": ("entrylog files", (".log", ".bel")),
    "index": ("index files", (".idx", ".mdb")),
}


def _files(dirs: Iterable[str], suffixes: tuple[str, ...]) -> list[str]:
    """Names of files ending in ``suffixes`` below each dir's ``current/``, sorted by name."""
    found = []
    for d in dict.fromkeys(dirs):
        top = os.path.join(d, "current")
        for root, _dirs, names in os.walk(top):
            found += [(n, os.path.join(root, n)) for n in names if n.endswith(suffixes)]
    return [n for n, _ in sorted(found)]


def list_disk_files(file_type: str | None, journal_dirs, ledger_dirs, index_dirs) -> dict[str, str]:
    """Java's ``list_disk_file`` body: ``{"journal files": "a\\tb\\t", ...}`` (each name
    followed by a tab); an unknown or missing ``file_type`` lists all three."""
    where = {"journal": journal_dirs, "entrylog": ledger_dirs, "index": index_dirs or ledger_dirs}
    kinds = [file_type] if file_type in DISK_FILE_TYPES else list(DISK_FILE_TYPES)
    out = {}
    for kind in kinds:
        key, suffixes = DISK_FILE_TYPES[kind]
        out[key] = "".join(n + "\t" for n in _files(where[kind], suffixes))
    return out


def last_log_marks(marks: Iterable[tuple[int, int]]) -> dict[str, str]:
    """Java's ``last_log_mark`` body: ``{"LastLogMark: Journal Id - N(hex.txn)": "Pos - P"}``
    per journal, from each journal's ``(file_id, offset)`` mark."""
    return {f"LastLogMark: Journal Id - {fid}({fid:x}.txn)": f"Pos - {offset}" for fid, offset in marks}
