"""Zeros written ahead of the journal's writer, so that its fdatasyncs commit no metadata.

A journal file is preallocated with ``posix_fallocate`` (:mod:`.journal_file`), which on ext4
(and XFS) leaves *unwritten* extents: every fdatasync of records written into them also commits
the extents' conversion to written, a metadata transaction.  Into blocks already written with
zeros and made durable once, an fdatasync only writes the data.  Measured on ext4 (a write, then
fdatasync, 400 times): 0.16-0.18 ms into fallocated blocks, 0.11 ms into written zeros at 18 KB
a write; 0.25 against 0.13 ms at 120 KB.  Java's JournalChannel writes one small zero buffer at
the end of each preallocation step and pays the conversion on every fsync.

:class:`ZeroAhead` is a thread per journal that writes zeros (``O_DIRECT``, :data:`ZERO_CHUNK` at
a time, then its own fdatasync for the extents' conversion) into the current file's preallocated
space, from half of ``ahead`` to ``ahead`` bytes past the writer, and publishes how far the zeros
are durable (``durable``).  O_DIRECT, because the writer's fdatasync writes back every dirty page
of the file and waits for every page being written back: buffered zeros made it write or wait for
them.  The distance, because the zeroer's thread needs the GIL, which a busy bookie's reactor
holds: a zeroer that falls behind starts again half-way ahead, leaving the writer the stretch
between as it was (fallocated), never zeros right where the writer is about to write.  After its
fdatasync the zeroer asks for the zeros' pages to be read in (``POSIX_FADV_WILLNEED``): a
partial-page write into a written block no longer in the page cache would read it first.  On a
file system that refuses O_DIRECT the zeros are buffered writes.

The writer never waits for the zeroer: what it writes where no zeros are yet goes to the
fallocated blocks as before.  The one thing the two share is ``floor``, the lowest offset the
zeroer may still write at: a write that ends past it pushes it (under the lock the zeroer holds
while it writes a chunk, which with the distance the writer does not reach), and zeros never
land on a record.

The format does not change: zeros are what the preallocated tail already read as, and replay
stops at the first zero length (:mod:`.journal_format`); a crash mid-zeroing leaves zeros, torn or
not.  Zeros are only written inside what the writer preallocated (never past the file's size, so
the zeroer never grows the file nor reports to the disk check), only while records are written
(the zeros follow the writer, so they cost the disk as many bytes again as the journal writes),
and not while the writer's groups are large.  The gain is per fsync, the cost per byte, and a
group grows with the bytes written during the fsync before it, so the group size tells when the
disk's bandwidth is what counts: measured on that ext4 disk (paired runs of a journal alone, 8
records a group, zeros on against off), records/s went x1.37 at 32 KiB a group, x1.10 at 128 KiB,
x0.78 at 256 KiB and x0.54 at 512 KiB (about 300 MB/s of journal writes, doubled).  Hence no zeros
from :data:`ZERO_MAX_GROUP` bytes per fsync (a moving average).

In bookied (journalZeroAheadMB, 4 MB): paired runs of two bookieds under one Java client
(100-byte adds, about 90 a group, load 1-3 on 2 CPUs, 6, 8 and 8 rounds) gave the side with zeros
median adds/s x1.17, x1.07 and x0.91 (ahead in 12 of 22 pairs: within the rounds' noise), fsync
mean 0.63/0.70, 0.54/0.70 and 0.71/0.69 ms, bookie CPU 2.2/2.6, 1.8/2.2 and 2.2/2.2 us an add.
Buffered zeros without the distance had measured x1.09 and x0.65 (load 6-12), O_DIRECT ones
without it x0.54 (load 4-6).  The default is on for the journal alone's gain and no measured
loss; journalZeroAheadMB=0 turns it off.

Errors never reach the journal: ENOSPC stops the zeroing of the current file (the writer's own
path reports a full disk, as before), any other error stops it for good, with a warning.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import threading

log = logging.getLogger("bookied.journal")

__all__ = ["ZERO_CHUNK", "ZERO_MAX_GROUP", "ZERO_PIECE", "ZeroAhead"]

#: Zeros made durable with one fdatasync: a metadata commit per chunk instead of per group.
ZERO_CHUNK = 1024 * 1024
#: Zeros written with one pwrite, under the lock (buffered: one copy into the page cache).
ZERO_PIECE = 1024 * 1024
#: Average bytes per fsync from which the journal is bandwidth-bound and zeroing stops.
ZERO_MAX_GROUP = 128 * 1024
#: O_DIRECT's alignment (offsets and lengths): a page, a multiple of any disk's logical block.
ALIGN = mmap.PAGESIZE
#: Less than this to zero is left for later (a chunk's fsync for a few pages is not worth it).
ZERO_MIN = 64 * 1024

_ZEROS = memoryview(bytes(ZERO_PIECE))
_NEVER = 1 << 62


class ZeroAhead:
    """Zeros ahead of the writer of one journal (see the module doc), ``ahead`` bytes at most.

    The writer calls :meth:`follow` when it opened a file (its header and first preallocation
    durable), :meth:`before_write` / :meth:`after_write` around each write, :meth:`allocated`
    when it preallocated further, :meth:`synced` after each fdatasync and :meth:`stop` when the
    journal closes (the thread is gone when it returns)."""

    def __init__(self, directory: str, ahead: int):
        self.directory = directory
        self.ahead = max(2 * ZERO_MIN, int(ahead))
        #: the lowest offset of the current file the zeroer may still write at
        self.floor = 0
        #: zeros are durable from the last record written up to here (in the current file)
        self.durable = 0
        #: where the writer's next write must end for the zeroer to have work (0: now)
        self.wake_at = _NEVER
        #: bytes per fdatasync, a moving average
        self.group_bytes = 0.0
        #: zero bytes written (all files)
        self.zeroed = 0
        self._lock = threading.Lock()  # floor, the file, and each ZERO_PIECE's pwrite
        self._wake = threading.Event()
        self._path = ""
        self._generation = 0  # which file (one more per follow)
        self._written = 0  # the writer's position in the current file
        self._allocated = 0  # the current file's preallocated end
        self._stopping = False
        self._failed = False
        self._thread: threading.Thread | None = None
        self._direct = False  # the zeroer's file is open with O_DIRECT
        self._buffer: mmap.mmap | None = None  # page-aligned zeros for O_DIRECT

    # ---------------------------------------------------------------- the writer's side
    def follow(self, path: str, position: int, allocated: int) -> None:
        """The writer's file is now ``path``, written up to ``position``, preallocated up to ``allocated``."""
        with self._lock:
            self._path = path
            self._generation += 1
            self._written = position
            self._allocated = allocated
            self.floor = position
            self.durable = position
        if self._thread is None and not self._failed:
            self._thread = threading.Thread(target=self._run, name="bookied-journal-zeros", daemon=True)
            self._thread.start()
        self._wake.set()

    def before_write(self, end: int) -> None:
        """The writer is about to write up to ``end``: the zeroer writes nothing below it from now on."""
        if end > self.floor:
            with self._lock:
                if end > self.floor:
                    self.floor = end

    def after_write(self, end: int) -> None:
        self._written = end
        if end >= self.wake_at:
            self.wake_at = _NEVER
            self._wake.set()

    def allocated(self, end: int) -> None:
        self._allocated = end
        self.wake_at = _NEVER
        self._wake.set()

    def synced(self, group_bytes: int) -> None:
        self.group_bytes += (group_bytes - self.group_bytes) * 0.2

    def stop(self) -> None:
        """Stop the zeroer and wait for its thread (an fsync of zeros at most)."""
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    # ---------------------------------------------------------------- the zeroer's thread
    def _run(self) -> None:
        fd = -1
        generation = 0
        stopped = 0  # the generation whose zeroing stopped (ENOSPC)
        try:
            while not self._stopping:
                self._wake.wait()
                self._wake.clear()
                while not self._stopping:
                    with self._lock:
                        path, current = self._path, self._generation
                    if current != generation:
                        if fd >= 0:
                            os.close(fd)
                            fd = -1
                        generation = current
                        try:
                            fd = self._open(path)
                        except OSError as e:
                            stopped = self._stop_file(e, path)
                    if stopped == generation or fd < 0:
                        break
                    try:
                        if not self._zero_chunk(fd, generation):
                            break
                    except OSError as e:
                        stopped = self._stop_file(e, path)
                        break
        finally:
            if fd >= 0:
                os.close(fd)

    def _open(self, path: str) -> int:
        """``path`` for writing zeros: with O_DIRECT, so that no zero waits in the page cache for
        the writer's fdatasync to write it back (that fdatasync writes back the whole file, and waits
        for whatever of it is being written back); buffered where the file system refuses O_DIRECT."""
        direct = getattr(os, "O_DIRECT", 0)
        try:
            fd = os.open(path, os.O_WRONLY | direct)
        except OSError as e:
            if e.errno != errno.EINVAL or not direct:
                raise
            direct = 0
            fd = os.open(path, os.O_WRONLY)
        self._direct = bool(direct)
        return fd

    def _zeros(self) -> memoryview:
        if not self._direct:
            return _ZEROS
        if self._buffer is None:
            self._buffer = mmap.mmap(-1, ZERO_PIECE)  # anonymous: zeros, page-aligned
        return memoryview(self._buffer)

    def _stop_file(self, error: OSError, path: str) -> int:
        """An error while zeroing ``path``: stop for this file (ENOSPC) or for good; returns the generation."""
        if error.errno == errno.ENOSPC:
            log.info("journal %s: no room to write zeros ahead in %s; stopped for this file", self.directory, path)
        else:
            log.warning("journal %s: writing zeros ahead in %s failed (%s); stopped", self.directory, path, error)
            self._failed = True
            self._stopping = True
        with self._lock:
            return self._generation

    def _zero_chunk(self, fd: int, generation: int) -> bool:
        """Write and fdatasync up to a chunk of zeros past the floor; False: nothing to do now
        (``wake_at`` then says when the writer should wake the zeroer again)."""
        start = end = 0
        while end - start < ZERO_CHUNK and not self._stopping:
            with self._lock:
                if generation != self._generation:
                    break
                written = self._written
                limit = min(self._allocated, written + self.ahead)
                if not start:
                    # never closer to the writer than half the way ahead: a zeroer that fell behind
                    # leaves the writer the stretch between (fallocated, as without zeros)
                    start = max(self.floor, written + self.ahead // 2)
                    if self._direct:
                        start = -(-start // ALIGN) * ALIGN
                    if self.group_bytes >= ZERO_MAX_GROUP:
                        # bandwidth-bound: look again once another ``ahead`` is written
                        self.wake_at = written + self.ahead
                        return False
                    if limit - start < ZERO_MIN:
                        # work again once the writer is half-way through the zeros, or preallocated more
                        self.wake_at = self.floor - self.ahead // 2 if start + ZERO_MIN <= self._allocated else _NEVER
                        return False
                    end = self.floor = start
                elif end != self.floor:  # the writer went past what this chunk zeroed
                    break
                n = min(ZERO_PIECE, limit - end, start + ZERO_CHUNK - end)
                if self._direct:
                    n -= n % ALIGN
                if n <= 0:
                    break
                os.pwrite(fd, self._zeros()[:n], end)
                end += n
                self.floor = end
        if end > start:
            os.fdatasync(fd)  # the extents' conversion (O_DIRECT wrote the data itself)
            if self._direct:  # the writer's partial-page writes find them, not a read
                os.posix_fadvise(fd, start, end - start, os.POSIX_FADV_WILLNEED)
            self.zeroed += end - start
            with self._lock:
                if generation == self._generation:
                    self.durable = max(self.durable, end)
        return end > start
