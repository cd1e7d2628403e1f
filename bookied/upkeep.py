"""The bookie's upkeep of its storage: checkpoints and disk checks.

A checkpoint marks the journals, flushes the entry stores and trims the journals up to the marks
(every flushInterval, and when a write cache asks); a disk check (every diskCheckInterval, when the
journal grows a file, after a checkpoint and a garbage collection pass) turns the bookie read-only or
writable again and tells garbage collection how full the disks are.  The two hang together: a
checkpoint that finds no room waits for the disk check that finds it again.  The service owns the
components (stores, journals, bookie, collector); this object reads them from it when it runs.
"""

from __future__ import annotations

import errno
import logging
import os
from typing import TYPE_CHECKING, Any, Protocol

from twisted.internet import threads
from twisted.python.failure import Failure

if TYPE_CHECKING:
    from .bookie import Bookie
    from .config import BookieConfig
    from .garbage_collector import GarbageCollector
    from .journal import Journal
    from .storage import EntryStore

log = logging.getLogger("bookied")


class NoRoomForCheckpoint(OSError):
    """A disk over diskUsageThreshold has no room for what a checkpoint would write."""


def _free_bytes(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


class Upkept(Protocol):
    """What the upkeep reads of the bookie service, when it runs (the service sets them up as it starts)."""

    cfg: BookieConfig
    reactor: Any
    stores: list[EntryStore]
    journals: list[Journal]
    bookie: Bookie | None
    gc: GarbageCollector | None
    zk: Any
    running: bool
    stopping: bool


class StorageUpkeep:
    """Checkpoints and disk checks of one bookie service (:class:`~.service.BookieService`)."""

    def __init__(self, service: Upkept):
        self.service = service
        self.checkpointing = False  # a checkpoint runs (the shutdown waits for it)
        self._checkpoint_again = False  # a store asked for a flush while a checkpoint ran
        self._disk_warned = False  # over diskUsageWarnThreshold at the last check
        self._disk_check_pending = False  # a write-path disk check is on its way to the reactor
        self.disk_checks = 0  # disk checks done (bookie_disk_checks_total)
        self._checkpoint_waiting = False  # checkpoints postponed for want of room
        self._collecting_for_room = False  # a pass asked for by a postponed checkpoint runs

    def flush_needed(self) -> None:
        self.service.reactor.callFromThread(self.checkpoint, True)

    def checkpoint(self, needed: bool = False):
        """Mark the journals, flush the entry stores, then trim the journals up to the marks.

        ``needed``: a store's write cache asked for it (half full, or full).  Asked
        while a checkpoint runs -- the other half filled during its flush -- it runs
        as soon as that one has succeeded: a store asks once per flush, so a request
        dropped here left the adds waiting for the cache until the next flushInterval.
        Only a periodic checkpoint's flush is paced (``EntryStore.flush(paced=True)``)."""
        if not self.service.stores:
            return None
        if self.checkpointing:
            self._checkpoint_again = self._checkpoint_again or needed
            return None
        self.checkpointing = True
        marks = [j.mark() for j in self.service.journals]

        disk_full = "disk" in self.service.bookie.readonly_causes if self.service.bookie is not None else False
        reserve = self.service.cfg.min_usable_size_for_entry_log_creation

        def work():
            for s in self.service.stores:
                if disk_full and s.cached_bytes:
                    free = _free_bytes(s.directory)
                    if free < s.cached_bytes + reserve:
                        # keep the entries in the write cache and the journal (not trimmed):
                        # the next checkpoint tries again, once there is room
                        raise NoRoomForCheckpoint(
                            f"{s.directory}: {free} bytes free, a checkpoint needs {s.cached_bytes} "
                            f"plus minUsableSizeForEntryLogCreation {reserve}"
                        )
            for s in self.service.stores:
                s.flush(paced=not needed)  # paced: no add waits for a periodic checkpoint
            for j, m in zip(self.service.journals, marks):
                j.checkpoint(m)

        def done(result):
            self.checkpointing = False
            again, self._checkpoint_again = self._checkpoint_again, False
            waited = self._checkpoint_waiting
            if not isinstance(result, Failure):
                self._checkpoint_waiting = False  # (before the disk check: it would run one more)
            bookie = self.service.bookie
            if bookie is not None and not self.service.stopping:
                self.check_disks()  # the entry logs grew: look at the disks now
                # after the disk check: a bookie that turned read-only refuses the waiting adds
                bookie.write_cache_drained()
            if not isinstance(result, Failure):
                if waited:
                    log.info("checkpoint done: there is room again")
                if bookie is not None:
                    bookie.clear_readonly("ledger")  # the entry logs take writes again
                if again and not self.service.stopping:
                    self.checkpoint(True)
                return result
            if isinstance(result.value, NoRoomForCheckpoint):
                if not self._checkpoint_waiting:
                    log.warning(
                        "checkpoint postponed: %s; the journal is kept until it runs: a deleted ledger's "
                        "entries leave the write cache at once (garbage collection is asked for now, and "
                        "at each postponed checkpoint), or lower minUsableSizeForEntryLogCreation below "
                        "what this disk can keep free",
                        result.value,
                    )
                self._checkpoint_waiting = True
                self._collect_for_room()
                return None
            log.error("checkpoint failed: %s", result.value)
            if isinstance(result.value, OSError) and bookie is not None:
                # ENOSPC, EIO...: the entries stay in the write cache (readable, and
                # in the journal); take no new ones until a checkpoint succeeds again
                bookie.mark_readonly("ledger", f"entry log write failed: {result.value}")
            if isinstance(result.value, OSError) and result.value.errno == errno.ENOSPC:
                self._checkpoint_waiting = True  # for room, as a postponed one
                self._collect_for_room()
            return None

        d = threads.deferToThreadPool(self.service.reactor, self.service.reactor.getThreadPool(), work)
        d.addBoth(done)
        return d

    def _collect_for_room(self) -> None:
        """A checkpoint was postponed for want of room: have garbage collection remove the deleted
        ledgers now rather than at the next gcWaitTime (their entries leave the write cache, and a
        checkpoint that then has less or nothing to write lets the journal go), and checkpoint again
        as soon as a pass removed one.  One pass at a time; a postponed checkpoint (every
        flushInterval) asks again, so the ledgers deleted meanwhile are seen."""
        collector = self.service.gc
        if collector is None or self.service.zk is None or self.service.stopping or self._collecting_for_room:
            return
        self._collecting_for_room = True

        def collected(result):
            self._collecting_for_room = False
            removed = getattr(result, "ledgers_removed", 0)  # None when stopped; a Failure: logged by the collector
            if removed and self._checkpoint_waiting and self.service.running and not self.service.stopping:
                self.checkpoint()
            return None

        collector.collect_deleted().addBoth(collected)

    def disk_usage(self) -> float:
        """The fullest of the journal and ledger filesystems, as a fraction."""
        return self.disk_stats()[0]

    def disk_stats(self) -> tuple[float, int]:
        """(usage of the fullest journal/ledger filesystem, fewest free bytes on any)."""
        worst, least = 0.0, None
        for d in list(self.service.cfg.journal_directories) + list(self.service.cfg.ledger_directories):
            st = os.statvfs(d)
            if st.f_blocks:
                worst = max(worst, 1.0 - st.f_bavail / st.f_blocks)
            free = st.f_bavail * st.f_frsize
            least = free if least is None else min(least, free)
        return worst, least or 0

    def disk_check_soon(self) -> None:
        """From the journal's thread when it created or preallocated a file: check
        the disks in the reactor thread now, not at the next diskCheckInterval."""
        if not self._disk_check_pending:
            self._disk_check_pending = True
            self.service.reactor.callFromThread(self.check_disks)

    def check_disks(self) -> None:
        self._disk_check_pending = False
        bookie = self.service.bookie
        if bookie is None:  # the service has not made it yet: nothing to mark
            return
        try:
            usage, free = self.disk_stats()
        except OSError as e:
            log.error("disk check failed: %s", e)
            return
        self.disk_checks += 1
        cfg = self.service.cfg
        # Java's "available for high-priority writes": recovery adds and fences of a
        # read-only bookie need the room this keeps
        bookie.allow_high_priority_writes = free >= cfg.min_usable_size_for_high_priority_writes
        # what the journals hold and no replay needs goes first (a journal that
        # filled the disk is trimmed only once it rolls: see Journal.reclaim), before
        # the collector hears how full the disk is: a disk the journal alone takes back
        # under the threshold needs no forced pass
        # (and while the disk keeps the bookie read-only, above the LWM: between the two the journal
        # that filled the disk would otherwise keep it read-only for good)
        full = usage >= cfg.disk_usage_threshold or (
            "disk" in bookie.readonly_causes and usage >= cfg.disk_usage_lwm_threshold
        )
        if full and not self.service.stopping and sum(j.reclaim() for j in self.service.journals) > 0:
            try:
                usage, free = self.disk_stats()
            except OSError as e:
                log.error("disk check failed: %s", e)
                return
            bookie.allow_high_priority_writes = free >= cfg.min_usable_size_for_high_priority_writes
        collector = self.service.gc
        if collector is not None and self.service.zk is not None and not self.service.stopping:
            # full while over the threshold, and as long as the disk keeps the bookie read-only
            # (above the LWM): Java calls allDisksFull at every check while no directory is
            # writable, so a forced pass with the limits lifted follows each one that could not
            # free enough (entries still in the write cache), not one unlifted pass at the warn
            # crossing and then nothing until gcWaitTime
            if usage >= cfg.disk_usage_threshold or (
                "disk" in bookie.readonly_causes and usage >= cfg.disk_usage_lwm_threshold
            ):
                collector.disk_full()
            elif usage >= cfg.disk_usage_warn_threshold:
                collector.disk_almost_full()
            else:
                collector.disk_writable()
        if usage >= cfg.disk_usage_threshold:
            if "disk" not in bookie.readonly_causes:
                bookie.mark_readonly(
                    "disk", f"disk usage {usage:.1%} over diskUsageThreshold {cfg.disk_usage_threshold:.0%}"
                )
        elif usage < cfg.disk_usage_lwm_threshold:  # hysteresis: writable again only below the LWM
            bookie.clear_readonly("disk")
            if self._checkpoint_waiting and self.service.running:
                self.checkpoint()  # what waited for room (journal replay included) goes out now
        if usage < cfg.disk_usage_warn_threshold:
            self._disk_warned = False
        elif not self._disk_warned:
            self._disk_warned = True
            log.warning(
                "disk usage %.1f%% is over diskUsageWarnThreshold %g", usage * 100, cfg.disk_usage_warn_threshold
            )
