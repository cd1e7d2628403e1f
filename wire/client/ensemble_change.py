"""Replacing the bookies that failed a writer (Java's ``LedgerHandle.handleBookieFailure`` and
its ensemble change loop).

A bookie that fails an add (or times out) is replaced: :class:`EnsembleChange` keeps which
bookies failed the ledger and why, and while one of them is still in the last ensemble it
asks the client's placement for replacements and writes a new segment starting at the first
unacknowledged entry, by compare-and-set (:func:`~.ledger_updates.write_ensemble_change`),
under the writer's metadata lock (which its close takes too).  Completions pause while it
runs (:attr:`EnsembleChange.changing`); then the writer re-sends every outstanding entry
whose write set changed.  A failure of the change (no replacement, the ledger taken over)
fails the writer; when no bookie can replace the failed ones, why they failed leads the error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from twisted.internet import defer

from bkctl.wire.errors import BKError
from bkctl.wire.metadata.ledger import LedgerMetadata

from .errors import NotEnoughBookies
from .ledger_updates import write_ensemble_change

__all__ = ["ChangingWriter", "EnsembleChange"]

log = logging.getLogger(__name__)


class ChangingWriter(Protocol):
    """What :class:`EnsembleChange` reads of the writer it serves."""

    ledger_id: int
    metadata: LedgerMetadata
    client: Any
    recovery: bool

    @property
    def metadata_version(self) -> int: ...

    @property
    def last_add_confirmed(self) -> int: ...

    @property
    def state(self) -> str: ...


class EnsembleChange:
    """The ensemble changes of one writer (see the module).  ``lock``: the writer's metadata
    lock.  The writer hears ``before()`` as a change starts (complete what was acknowledged
    before it), ``changed(metadata, version)`` once each new segment is written,
    ``failed(error)`` when the change failed (every outstanding add fails), and ``after()``
    once no failed bookie is left in the last ensemble (send what waited, re-send what moved).

    ``failed_bookies`` (read on every copy sent: a plain attribute) are the bookies that
    failed for this ledger, never written to again; ``changing`` is True while a change runs."""

    __slots__ = ("writer", "failed_bookies", "changing", "_causes", "_lock", "_before", "_changed", "_failed", "_after")

    def __init__(
        self,
        writer: ChangingWriter,
        lock: defer.DeferredLock,
        *,
        before: Callable[[], None],
        changed: Callable[[LedgerMetadata, int], None],
        failed: Callable[[BaseException], None],
        after: Callable[[], None],
    ) -> None:
        self.writer = writer
        self.failed_bookies: set[str] = set()
        self.changing = False
        #: why each failed bookie failed (named when none can replace it)
        self._causes: dict[str, BaseException] = {}
        self._lock = lock
        self._before = before
        self._changed = changed
        self._failed = failed
        self._after = after

    def bookie_failed(self, bookie: str, cause: BaseException | None = None) -> None:
        """``bookie`` (of the last ensemble) failed an add because of ``cause``: replace it,
        with the others that fail meanwhile (one change at a time)."""
        self.failed_bookies.add(bookie)
        if cause is not None:
            self._causes.setdefault(bookie, cause)
        if not self.changing:
            self._before()
            self.changing = True
            d = defer.ensureDeferred(self._change())
            d.addErrback(
                lambda f: log.error(
                    "ledger %d: ensemble change bookkeeping failed: %s", self.writer.ledger_id, f.getTraceback()
                )
            )

    def _going_on(self) -> bool:
        return self.writer.state in ("open", "closing")

    async def _change(self) -> None:
        writer = self.writer
        try:
            while self._going_on() and self.failed_bookies.intersection(writer.metadata.last_ensemble):
                await self._lock.acquire()
                try:
                    if self._going_on():
                        await self._change_once()
                finally:
                    self._lock.release()
        except Exception as exc:  # noqa: BLE001 - every failure fails the adds
            if not isinstance(exc, BKError):
                log.error("ledger %d: ensemble change failed unexpectedly", writer.ledger_id, exc_info=True)
            self._failed(exc)
        finally:
            self.changing = False
        if self._going_on():
            self._after()

    async def _change_once(self) -> None:
        writer = self.writer
        client = writer.client
        md = writer.metadata
        failed = self.failed_bookies
        failed_now = [b for b in md.last_ensemble if b in failed]
        writable, readonly = await client.bookie_lists()
        try:
            new_ensemble = client.placement.replace_bookies(
                md.last_ensemble, failed_now, writable, readonly, exclude=failed, write_quorum=md.write_quorum
            )
        except NotEnoughBookies as exc:  # why the bookies to replace failed is the news: it leads
            causes = "; ".join(str(self._causes[b]) for b in failed_now if b in self._causes)
            if not causes:
                raise
            raise NotEnoughBookies(
                f"{causes}; and no replacement: {exc}",
                needed=exc.needed,
                available=exc.available,
                readonly=exc.readonly,
                excluded=exc.excluded,
            ) from exc
        first = writer.last_add_confirmed + 1
        new_md, version = await write_ensemble_change(
            client, writer.ledger_id, md, writer.metadata_version, first, new_ensemble, writer.recovery
        )
        log.info(
            "ledger %d: ensemble change at entry %d: %s -> %s",
            writer.ledger_id,
            first,
            list(writer.metadata.last_ensemble),
            new_ensemble,
        )
        self._changed(new_md, version)
