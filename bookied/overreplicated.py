"""Over-replicated ledgers: closed ledgers this bookie holds whose metadata no longer names it
(Java's ``gcOverreplicatedLedgerWaitTime`` part of ScanAndCompareGarbageCollector).

A replica moved off this bookie (``bkctl rebalance``/``drain``), a move abandoned half way
(its copies landed here, the metadata never named this bookie), a repair that wrote here and
then lost its metadata write: each leaves entries that no reader will ask for.  Deleted
ledgers go with the regular collection; these ledgers still exist, so only their metadata
tells.

Safe as Java's: only closed ledgers (an open one's writer may still name this bookie), and
each is deleted under its replication lock (``underreplication/locks/urL<id>``) after its
metadata is read once more, so that a replication worker or a move copying to this bookie
(which holds that lock until its metadata write names the bookie) never loses its copy.
Costs one pipelined metadata read of the bookie's ledgers, every ``wait_ms`` (a day by
default, as Java's).
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Sequence

from .storage.compactor import CompactableStore

log = logging.getLogger(__name__)


class OverReplicatedCollector:
    """``__call__(stores)`` (in a pool thread, from the GC pass): at most every ``wait_ms``,
    delete from ``stores`` the closed ledgers whose metadata does not name ``bookie_id``;
    returns how many.  ``metadata`` is the bookie's metadata store (ledgers and
    underreplication); ``wait_ms`` 0 turns it off."""

    def __init__(
        self,
        metadata,
        bookie_id: str,
        wait_ms: int,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.metadata = metadata
        self.bookie_id = bookie_id
        self.wait_ms = wait_ms
        self.clock = clock
        self.holder = f"bookie-gc {bookie_id}@{socket.gethostname()}"
        self._last = clock()  # as Java: the first check one wait after the start
        self.removed = 0  # since the bookie started

    def due(self) -> bool:
        return self.wait_ms > 0 and (self.clock() - self._last) * 1000 >= self.wait_ms

    def __call__(self, stores: Sequence[CompactableStore]) -> int:
        if not self.due():
            return 0
        self._last = self.clock()
        held = sorted({ledger_id for store in stores for ledger_id in store.ledger_ids(ordered=False)})
        suspects = [
            read.ledger_id
            for read in self.metadata.ledgers.read_many(held)
            if read.metadata is not None
            and not isinstance(read.metadata, Exception)
            and read.metadata.is_closed
            and self.bookie_id not in read.metadata.bookies
        ]
        gone = [ledger_id for ledger_id in suspects if self._remove(ledger_id, stores)]
        if gone:
            self.removed += len(gone)
            log.info(
                "removed %d over-replicated ledgers (closed, their metadata names other bookies): %s%s",
                len(gone),
                ", ".join(map(str, gone[:20])),
                " ..." if len(gone) > 20 else "",
            )
        return len(gone)

    def _remove(self, ledger_id: int, stores: Sequence[CompactableStore]) -> bool:
        """Under the ledger's replication lock: read again and, still closed and not naming
        this bookie nor marked, delete it from the stores before the lock goes (a copy here
        takes that lock first, and names this bookie before it lets go)."""
        from bkctl.wire.metadata.errors import MetadataStoreError, NoSuchLedger

        ur = self.metadata.underreplication
        try:
            if not ur.lock(ledger_id, self.holder):
                return False  # a worker or a move is on it
        except MetadataStoreError:
            return False
        try:
            md, _version = self.metadata.ledgers.read(ledger_id)
            if not md.is_closed or self.bookie_id in md.bookies or ur.get(ledger_id) is not None:
                return False
            for store in stores:
                if store.has_ledger(ledger_id):
                    store.delete_ledgers([ledger_id])
            return True
        except NoSuchLedger:
            return False  # the regular collection takes it
        except MetadataStoreError:
            return False
        finally:
            try:
                ur.release(ledger_id)
            except MetadataStoreError:
                pass
