"""Compacting an entry store in a unit test, as one garbage collection pass does for its logs, and a
garbage collector whose passes a test runs by hand on an injected clock."""

from __future__ import annotations

from twisted.internet import defer, task

from bkctl.bookied.garbage_collector import GarbageCollector
from bkctl.bookied.storage.compactor import EntryLogCompactor, Throttle


def compact_below(
    store, min_live_ratio: float, throttle: Throttle | None = None, max_outstanding: int = 100000
) -> dict:
    """Compact the logs of ``store`` below ``min_live_ratio`` (unthrottled unless a throttle is
    given): ``{"logs", "moved_entries", "moved_bytes", "reclaimed_bytes"}``."""
    if throttle is None:
        throttle = Throttle(1, False)
        throttle.lifted = True
    stats = {"logs": 0, "moved_entries": 0, "moved_bytes": 0, "reclaimed_bytes": 0}
    with EntryLogCompactor(store, throttle, max_outstanding) as compactor:
        for log_id, _usage in store.compaction_candidates(min_live_ratio):
            result = compactor.compact(log_id)
            stats["logs"] += result.deleted
            stats["moved_entries"] += result.moved_entries
            stats["moved_bytes"] += result.moved_bytes
            stats["reclaimed_bytes"] += result.reclaimed_bytes
    return stats


def gc_on_clock(policy, stores=(), collect=lambda stores: 0, monotonic=None, on_pass_done=None):
    """A :class:`GarbageCollector` on a ``task.Clock`` whose passes wait in ``passes`` (each a
    Deferred the test fires to run it): ``(gc, clock, passes)``; ``monotonic``: the seconds its
    compaction measures (default the wall clock's); ``on_pass_done``: what the bookie does
    after each pass (looks at its disks)."""
    clock = task.Clock()
    passes = []

    def in_thread(fn):
        d = defer.Deferred()
        d.addCallback(lambda _: fn())
        passes.append(d)
        return d

    extra = {} if monotonic is None else {"monotonic": monotonic}
    gc = GarbageCollector(policy, list(stores), collect, clock, in_thread, on_pass_done=on_pass_done, **extra)
    return gc, clock, passes
