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
