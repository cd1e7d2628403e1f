"""A backup's copies stored in threads of their own: the thread that reads a ledger hands its
batches over (:class:`Handover`) to a job of the :class:`Finisher`, which writes them into the
copy's data object, stores it (fsync and rename, or upload) and then its record.

Why the reading and the writing of one copy are in two threads: a copy's thread that also
wrote read its ledger and then wrote it, nearly in turns -- the bookies' answers to a batch come
in together, and its read-ahead of a few batches covered a ledger of 10 MiB -- and it began the
next ledger's reads only once the last one's bytes were written.  Two copies of ledgers of one
size kept step: both read, then both wrote, the bookies idle while the disk worked and the disk
idle while the bookies did (a timeline of a 78 MiB backup at ``--parallel 2``).  Now a copy's
thread reads on as long as its writer keeps up (:data:`HANDOVER_BATCHES` wait at most), and
begins its next ledger once the last batch is handed over -- its writer still writing.

What a backup guarantees is unchanged: a data object is stored whole or not at all before the
record that names it, every record before the manifest (whose writer waits for every job:
:meth:`Finisher.wait`), and a copy whose reading fails leaves no object (its writer removes
the partial one).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

__all__ = ["HANDOVER_BATCHES", "Finisher", "Handover"]

#: batches a copy's thread reads ahead of its writer (each about :data:`~.take.BATCH_BYTES`)
HANDOVER_BATCHES = 2


class Finisher:
    """Runs what stores the copies -- each a data object written, then its record -- in threads
    of its own, at most ``slots`` at once (a copy waits for a slot).  :meth:`wait` raises the
    first failure (an archive that cannot be written stops the backup)."""

    def __init__(self, slots: int):
        self.pool = ThreadPoolExecutor(max_workers=max(1, slots), thread_name_prefix="backup-store")
        self.size = max(1, slots)
        self.slots = threading.BoundedSemaphore(self.size)
        #: the jobs that failed: a job done well is forgotten (a million-ledger backup does
        #: not keep a million futures; the pool's shutdown waits for those under way)
        self.failed: list[Future[None]] = []
        self.lock = threading.Lock()

    def submit(self, job: Callable[[], None]) -> None:
        self.slots.acquire()

        def run() -> None:
            try:
                job()
            finally:
                self.slots.release()

        try:
            future = self.pool.submit(run)
        except BaseException:
            self.slots.release()
            raise
        future.add_done_callback(self._settled)

    def _settled(self, future: Future[None]) -> None:
        if future.cancelled() or future.exception() is not None:
            with self.lock:
                self.failed.append(future)

    def settle(self) -> None:
        """Wait until the jobs submitted so far are done (the finisher stays open)."""
        for _ in range(self.size):
            self.slots.acquire()
        for _ in range(self.size):
            self.slots.release()

    def check(self) -> None:
        """Raise the first failure of a job done so far."""
        if self.failed:
            self.failed[0].result()

    def wait(self) -> None:
        """Wait for every job; the first failure raised (the others waited for too)."""
        try:
            self.pool.shutdown(wait=True)
        finally:
            for future in self.failed:
                future.result()


class Abandoned(Exception):
    """What a writer's :class:`Handover` raises when the reading side gave the copy up."""


class Handover:
    """A copy's batches from the thread that reads them to the one that writes them, at most
    ``depth`` waiting.  The reader :meth:`put` s each and :meth:`close` s it, or :meth:`abandon`
    s the copy (its reading failed); the writer iterates, then :meth:`done` (or :meth:`failed`
    with what stopped it: the reader's next :meth:`put` raises it)."""

    def __init__(self, depth: int = HANDOVER_BATCHES):
        self.depth = max(1, depth)
        self.batches: deque[Any] = deque()
        self.changed = threading.Condition()
        self.closed = False
        self.abandoned = False
        #: what stopped the writer (None: it is writing, or done)
        self.failure: BaseException | None = None

    # -- the reading thread
    def put(self, batch: Any) -> None:
        """Hand ``batch`` over; waits while :attr:`depth` wait; raises what stopped the writer."""
        with self.changed:
            while len(self.batches) >= self.depth and self.failure is None:
                self.changed.wait()
            if self.failure is not None:
                raise self.failure
            self.batches.append(batch)
            self.changed.notify_all()

    def close(self) -> None:
        """Every batch handed over."""
        with self.changed:
            self.closed = True
            self.changed.notify_all()

    def abandon(self) -> None:
        """The copy given up: the writer stops (:class:`Abandoned`) and removes what it wrote."""
        with self.changed:
            self.abandoned = True
            self.batches.clear()
            self.changed.notify_all()

    # -- the writing thread
    def __iter__(self) -> Iterator[Any]:
        while True:
            with self.changed:
                while not (self.batches or self.closed or self.abandoned):
                    self.changed.wait()
                if self.abandoned:
                    raise Abandoned()
                if not self.batches:
                    return
                batch = self.batches.popleft()
                self.changed.notify_all()
            yield batch

    def failed(self, exc: BaseException) -> None:
        """The writer stopped with ``exc``: the reader's next :meth:`put` raises it."""
        with self.changed:
            self.failure = exc
            self.batches.clear()
            self.changed.notify_all()
