"""The entry store's errors (one home for them, as every package keeps its own)."""

from __future__ import annotations

import errno


class WriteCacheFull(Exception):
    """The write cache is at ``write_cache_max_bytes``; retry after a flush (ETOOMANYREQUESTS)."""


class EntryStoreClosed(Exception):
    pass


class EntryCorrupted(OSError):
    """A stored entry failed its checksum or its ids do not match (reply EIO)."""

    def __init__(self, msg: str):
        super().__init__(errno.EIO, msg)


class IndexUnavailable(Exception):
    """A ledger directory's index does not open (damaged), or is missing while entry logs are there:
    the bookie does not start on it (``bookied --rebuild-index`` rebuilds it from the entry logs,
    ``bookied --salvage`` serves what the directories hold read-only)."""

    def __init__(self, directory: str, why: str):
        super().__init__(f"the index of {directory} does not open: {why}")
        self.directory = directory


class DirectoryInUse(OSError):
    """A ledger directory another process has open (a bookied running on it)."""

    def __init__(self, directory: str):
        super().__init__(errno.EBUSY, f"{directory} is in use by another process (a bookied running on it)")
        self.directory = directory
