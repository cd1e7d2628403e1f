"""The journal file being appended to, one at a time: its I/O apart from the group
commit that decides what goes into it and when (:mod:`.journal`)."""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable

from bkctl.wire.bookie_disk import layout

from .errors import JournalNoSpace
from .journal_format import HEADER_SIZE, LogMark, encode_header, file_name
from .journal_stats import JournalStats
from .journal_zeros import ZeroAhead
from .page_cache import SyncedPages

__all__ = ["JournalFile"]


class JournalFile:
    """The current file of a journal in ``directory``: created with its header and
    fsynced with its directory, preallocated ``preallocate`` bytes at a time
    (posix_fallocate; off for good on a file system without it), written with
    plain appends, fdatasynced with what the sync made durable dropped from the
    page cache (:class:`SyncedPages`). ``zero_ahead`` (bytes, 0: off): zeros are
    written and made durable that far ahead of the writes, inside the preallocated
    space, by a thread of their own (:class:`ZeroAhead`), so that the fsyncs
    commit no metadata. ``on_grow()`` after a file was created or
    preallocated further (the bookie checks its disk on the write path);
    ``on_fsync(seconds)`` after each fsync. Used by one committer at a time."""

    def __init__(
        self,
        directory: str,
        *,
        max_size: int,
        preallocate: int,
        drop_synced_pages: bool,
        stats: JournalStats,
        zero_ahead: int = 0,
        on_grow: Callable[[], None] | None = None,
        on_fsync: Callable[[float], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ):
        self.directory = directory
        self.max_size = max_size
        #: the posix_fallocate step (0: off)
        self.preallocate = preallocate
        #: the file's fsynced bytes dropped from the page cache (journalRemovePagesFromCache)
        self.synced_pages = SyncedPages(directory, drop_synced_pages)
        self.stats = stats
        self._on_grow = on_grow
        self._on_fsync = on_fsync
        self._monotonic = monotonic
        #: Moving average of the fsync latency, seconds.
        self.fsync_average = 0.0
        self.fd = -1
        self.file_id = 0
        self.offset = 0
        self._prealloc_end = 0
        self._synced_offset = 0
        #: the zeroer (None: off)
        self.zeros = ZeroAhead(directory, zero_ahead) if zero_ahead > 0 else None

    @property
    def position(self) -> LogMark:
        """Just past the last byte written."""
        return LogMark(self.file_id, self.offset)

    def open(self, file_id: int) -> None:
        """Create ``file_id`` (its header, a first preallocation, both durable) and make it the current file."""
        path = os.path.join(self.directory, file_name(file_id))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            layout.write_all(fd, encode_header(file_id), "the journal")
            self._prealloc_end = HEADER_SIZE
            if self.preallocate:
                self._preallocate(fd, HEADER_SIZE, min(self.preallocate, self.max_size) - HEADER_SIZE)
            os.fsync(fd)
            layout.fsync_dir(self.directory)
        except BaseException as e:
            os.close(fd)
            if isinstance(e, OSError) and e.errno == errno.ENOSPC:
                os.unlink(path)  # nothing of it is used: the next try creates it afresh
                raise e if isinstance(e, JournalNoSpace) else JournalNoSpace("a new journal file", e) from None
            raise
        if self.fd >= 0:
            os.close(self.fd)
        self.fd = fd
        self.file_id = file_id
        self.offset = HEADER_SIZE
        self._synced_offset = HEADER_SIZE
        self.synced_pages.new_file()
        self.stats.files_created += 1
        if self.zeros is not None:
            self.zeros.follow(path, HEADER_SIZE, self._prealloc_end)

    def open_unpreallocated(self, file_id: int) -> None:
        """:meth:`open` without preallocating (no room for that); JournalNoSpace: no room at all."""
        step, self.preallocate = self.preallocate, 0
        try:
            self.open(file_id)
        finally:
            self.preallocate = step

    def _preallocate(self, fd: int, offset: int, length: int) -> None:
        if length <= 0:
            return
        try:
            os.posix_fallocate(fd, offset, length)
        except OSError as e:
            if e.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                self.preallocate = 0  # file system without fallocate: plain appends
                return
            if e.errno == errno.ENOSPC:
                raise JournalNoSpace("the journal's preallocation", e) from None
            raise
        self._prealloc_end = max(self._prealloc_end, offset + length)
        if self.zeros is not None and fd == self.fd:
            self.zeros.allocated(self._prealloc_end)
        if self._on_grow is not None:
            self._on_grow()

    def write(self, parts: list) -> None:
        """Append ``parts`` (bytes) with one write, preallocating ahead of them."""
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        end = self.offset + len(data)
        if self.preallocate and end > self._prealloc_end:
            want = max(end, self._prealloc_end + self.preallocate)
            try:
                self._preallocate(self.fd, self._prealloc_end, min(want, max(end, self.max_size)) - self._prealloc_end)
            except JournalNoSpace:
                # no room for a whole step: the last bytes of the disk go to what is
                # written now (the fences and recovery adds of a read-only bookie)
                self._preallocate(self.fd, self._prealloc_end, end - self._prealloc_end)
        zeros = self.zeros
        if zeros is not None:
            zeros.before_write(end)
        layout.write_all(self.fd, data, "the journal")
        self.offset = end
        if zeros is not None:
            zeros.after_write(end)
        self.stats.writes += 1
        self.stats.bytes += len(data)

    def sync(self, rolling: bool = False) -> None:
        """fdatasync what was written (``rolling``: the file is done, all its pages may go)."""
        started = self._monotonic()
        os.fdatasync(self.fd)
        took = self._monotonic() - started
        self.fsync_average += (took - self.fsync_average) * 0.2
        self.stats.fsyncs += 1
        if self._on_fsync is not None:
            self._on_fsync(took)
        if self.zeros is not None:
            self.zeros.synced(self.offset - self._synced_offset)
        self._synced_offset = self.offset
        self.synced_pages.after_sync(self.fd, self.offset, rolling)

    def close(self) -> None:
        if self.zeros is not None:
            self.zeros.stop()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
