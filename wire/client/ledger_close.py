"""How a writer ends (Java's ``LedgerHandle.asyncClose``): closing its ledger, or letting go of
it open.

:class:`LedgerClose` closes once, whoever asks and however often: it stops the adds, waits for
the outstanding ones, then writes CLOSED (last entry = the LAC, with its length) by
compare-and-set under the writer's metadata lock (:func:`~.ledger_updates.write_closed`; not
when another client took the ledger over meanwhile).  Releasing waits for the outstanding adds,
publishes the LAC (:class:`~.explicit_lac.ExplicitLac`) and fails the later adds, leaving the
ledger OPEN for the next writer.  Either way the writer's ``on_close`` hook runs at the end
(the append lock of ``BookKeeperClient.open_for_append``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from twisted.internet import defer
from twisted.python.failure import Failure

from .errors import ClientClosed, HandleReleased, LedgerClosedError, LedgerFencedError, LedgerMetadataConflict
from .explicit_lac import ExplicitLac

__all__ = ["ClosingWriter", "LedgerClose"]

log = logging.getLogger(__name__)

#: why a writer failed when another client owns its ledger now (or it cannot reach it): nothing to write
_TAKEN_OVER = (LedgerFencedError, LedgerClosedError, LedgerMetadataConflict, ClientClosed)


class ClosingWriter(Protocol):
    """What :class:`LedgerClose` reads of the writer it serves."""

    ledger_id: int

    @property
    def state(self) -> str: ...

    @property
    def error(self) -> BaseException | None: ...

    def drain(self) -> defer.Deferred[None]: ...


class LedgerClose:
    """The end of one writer (see the module).  ``lock``: the writer's metadata lock;
    ``explicit``: its explicit LAC, stopped as it ends.  The writer hears ``stop_adding()``
    as a close starts on an open handle (later adds fail, writers waiting for room too),
    ``write_closed()`` (awaitable) to write CLOSED, ``closed()`` once the close is over
    whatever its outcome, and ``fail(error)`` when a release fails the later adds.
    ``on_close`` is run once, at the end of a close or a release (None: nothing)."""

    __slots__ = (
        "writer",
        "on_close",
        "_lock",
        "_explicit",
        "_stop_adding",
        "_write_closed",
        "_closed",
        "_fail",
        "_waiters",
        "_done",
        "_failure",
    )

    def __init__(
        self,
        writer: ClosingWriter,
        lock: defer.DeferredLock,
        explicit: ExplicitLac,
        on_close: Callable[[], Any] | None,
        *,
        stop_adding: Callable[[], None],
        write_closed: Callable[[], Awaitable[None]],
        closed: Callable[[], None],
        fail: Callable[[BaseException], None],
    ) -> None:
        self.writer = writer
        self.on_close = on_close
        self._lock = lock
        self._explicit = explicit
        self._stop_adding = stop_adding
        self._write_closed = write_closed
        self._closed = closed
        self._fail = fail
        self._waiters: list[defer.Deferred[None]] = []
        #: whether the close is over, and how it failed (None: it went through)
        self._done = False
        self._failure: Failure | None = None

    def close(self) -> defer.Deferred[None]:
        """Fires with None once closed; calling it again gives the same outcome."""
        if self._done:
            return defer.succeed(None) if self._failure is None else defer.fail(self._failure)
        d: defer.Deferred[None] = defer.Deferred()
        self._waiters.append(d)
        if len(self._waiters) == 1:
            defer.ensureDeferred(self._close()).addBoth(self._closed_with)
        return d

    def _closed_with(self, result: object) -> None:
        self._done = True
        self._failure = result if isinstance(result, Failure) else None
        waiters, self._waiters = self._waiters, []
        for d in waiters:
            if isinstance(result, Failure):
                d.errback(result)
            else:
                d.callback(None)

    async def _close(self) -> None:
        writer = self.writer
        try:
            if writer.state == "open":
                self._explicit.stop()
                self._stop_adding()
            try:
                await writer.drain()
            except Exception:  # noqa: BLE001 - the adds got the error; decide below
                pass
            if writer.state == "failed" and isinstance(writer.error, _TAKEN_OVER):
                return  # another client owns the ledger now (or we cannot reach it): nothing to write
            await self._lock.acquire()
            try:
                await self._write_closed()
            finally:
                self._lock.release()
        finally:
            self._closed()
            on_close, self.on_close = self.on_close, None
            if on_close is not None:
                try:
                    await defer.maybeDeferred(on_close)
                except Exception:  # noqa: BLE001
                    log.warning("ledger %d: releasing the append lock failed", writer.ledger_id, exc_info=True)

    def release(self) -> defer.Deferred[None]:
        """Let go of the ledger without closing it (see the module)."""
        return defer.ensureDeferred(self._release())

    async def _release(self) -> None:
        writer = self.writer
        self._explicit.stop()
        if writer.state == "open":
            try:
                await writer.drain()
            except Exception:  # noqa: BLE001 - the adds reported it; release anyway
                pass
            if writer.state == "open":
                try:
                    await self._explicit.publish()
                except Exception:  # noqa: BLE001
                    log.info("ledger %d: publishing the LAC failed", writer.ledger_id, exc_info=True)
                self._fail(
                    HandleReleased(f"ledger {writer.ledger_id}: the handle was released (the ledger is still open)")
                )
        on_close, self.on_close = self.on_close, None
        if on_close is not None:
            await defer.maybeDeferred(on_close)
