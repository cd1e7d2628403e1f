"""The lock a process holds on a ledger directory while it writes there: a running bookie's entry
store and ``bookied --rebuild-index`` take it, so that neither writes under the other (two entry
stores on one directory would each delete the other's new entry logs at open).

An exclusive ``flock`` on ``current/bookied.lock``, taken without waiting: the kernel drops it when
the process ends, kill -9 included, so a lock is never left behind.  The file itself stays (empty).
"""

from __future__ import annotations

import fcntl
import os

from .errors import DirectoryInUse

LOCK_FILE = "bookied.lock"


class DirectoryLock:
    """Held from construction to :meth:`release` (DirectoryInUse if another process holds it)."""

    def __init__(self, current: str):
        self.path = os.path.join(current, LOCK_FILE)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise DirectoryInUse(current) from None

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # (the lock goes with the descriptor)
            self._fd = -1

    def __enter__(self) -> DirectoryLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
