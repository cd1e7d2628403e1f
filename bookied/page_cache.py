"""What the journal has fsynced leaves the operating system's page cache (journalRemovePagesFromCache),
as Java's JournalChannel does: journal writes are never read back while the bookie runs, and must
not push out the entry logs' pages that reads are served from."""

from __future__ import annotations

import logging
import os

log = logging.getLogger("bookied.journal")

#: Bytes behind the last fsync that stay in the page cache (``drop_synced_pages``), as
#: Java's JournalChannel keeps them: a page still being appended to is never dropped.
PAGE_CACHE_LAG = 8 * 1024 * 1024
#: Synced bytes gathered before they are dropped from the page cache with one call.
PAGE_CACHE_DROP_STEP = 1024 * 1024


def drop_from_page_cache(fd: int, offset: int, length: int) -> None:
    """Tell the kernel the journal will not read ``length`` bytes at ``offset`` again."""
    os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)


class SyncedPages:
    """Where the current journal file's bytes still in the page cache start, and dropping them."""

    def __init__(self, directory: str, enabled: bool):
        self.directory = directory
        #: False when not asked for, or once the file system refused
        self.enabled = bool(enabled)
        self.start = 0  # where the current file's pages still in the page cache start

    def new_file(self) -> None:
        self.start = 0

    def after_sync(self, fd: int, offset: int, rolling: bool) -> None:
        """Everything of ``fd`` before ``offset`` is fsynced: drop it but for the last
        :data:`PAGE_CACHE_LAG` bytes (all of it when the file is ``rolling`` to the next)."""
        if self.enabled:
            self._drop(fd, offset if rolling else offset - PAGE_CACHE_LAG, offset)

    def _drop(self, fd: int, upto: int, offset: int) -> None:
        """Drop the current file's bytes before ``upto`` (all fsynced) from the page cache,
        once they add up to a step; a file system that refuses is not asked again."""
        if upto - self.start < PAGE_CACHE_DROP_STEP and upto < offset:
            return
        if upto <= self.start:
            return
        try:
            drop_from_page_cache(fd, self.start, upto - self.start)
        except OSError as e:
            log.warning(
                "journal %s: cannot drop written pages from the page cache (%s); "
                "journalRemovePagesFromCache is off from now on",
                self.directory,
                e,
            )
            self.enabled = False
            return
        self.start = upto
