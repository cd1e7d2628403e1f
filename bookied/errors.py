"""bookied's own errors: its journal's (:mod:`bkctl.bookied.journal`), which the bookie
maps to the protocol's codes (ETOOMANYREQUESTS, EIO) and to going read-only, and its
garbage collector's listing of the metadata (:mod:`bkctl.bookied.gc_listing`)."""

from __future__ import annotations

import errno


class JournalError(Exception):
    """Base class of the journal's own errors."""


class JournalFull(JournalError):
    """Back-pressure: too many bytes queued; retry later (ETOOMANYREQUESTS)."""


class JournalNoSpace(OSError):
    """ENOSPC while creating or preallocating a journal file, before any record
    was written there: the group fails, the journal does not (the next group
    tries again), unlike an error in the middle of a write."""

    def __init__(self, what: str, cause: OSError):
        super().__init__(errno.ENOSPC, f"no space left for {what}: {cause.strerror or cause}")


class JournalUnavailable(JournalError):
    """The journal is not started, closed, or failed (see ``cause``)."""

    def __init__(self, msg: str, cause: BaseException | None = None):
        super().__init__(msg)
        self.cause = cause


class GcListingError(Exception):
    """The garbage collector's listing of the metadata (:mod:`bkctl.bookied.gc_listing`)
    gave no answer: the pass deletes nothing."""


class GcListingStopped(GcListingError):
    """The bookie is shutting down: the listing under way was ended."""
