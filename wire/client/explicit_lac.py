"""A writer's LAC told to its bookies outside its adds: the explicit LAC (WRITE_LAC).

Each entry carries the LAC known when it was packaged, so a reader learns of an
entry's confirmation from the next entry.  :class:`ExplicitLac` tells the bookies
of the last ensemble the LAC itself: at once (:meth:`ExplicitLac.publish`, as a
writer that lets go of a ledger does) or, with an interval, as Java's
``ExplicitLacFlushPolicy`` does -- while adds keep carrying newer LACs nothing is
sent; once they stop, the LAC they did not carry goes out as a WRITE_LAC at most
an interval after it was confirmed, so a tailing reader sees an entry without
waiting for the next add.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from twisted.internet import defer

if TYPE_CHECKING:
    from bkctl.wire.codecs.digest import DigestManager
    from bkctl.wire.metadata.ledger import LedgerMetadata

__all__ = ["ExplicitLac", "LacWriter"]


class LacWriter(Protocol):
    """What :class:`ExplicitLac` reads of the writer it serves."""

    ledger_id: int
    master_key: bytes
    digest: DigestManager
    metadata: LedgerMetadata
    client: Any

    @property
    def last_add_confirmed(self) -> int: ...

    @property
    def state(self) -> str: ...


class ExplicitLac:
    """The explicit LAC of one writer (see the module); ``interval`` seconds (0, and
    always for a ``recovery`` writer: only :meth:`publish`; ValueError when negative).
    ``piggybacked`` is the LAC the last entry sent carried (the writer sets it as it
    packages entries)."""

    __slots__ = ("writer", "interval", "piggybacked", "told", "_timer")

    def __init__(self, writer: LacWriter, interval: float, recovery: bool = False) -> None:
        if interval < 0:
            raise ValueError("explicit_lac_interval must be >= 0")
        self.writer = writer
        self.interval = 0.0 if recovery else float(interval)
        #: the LAC packaged in the last entry sent
        self.piggybacked = -1
        #: the highest LAC the bookies were told, by adds or WRITE_LAC
        self.told = -1
        self._timer: Any = None

    def confirmed(self) -> None:
        """An add completed: the policy ticks an interval from now (unless it ticks already)."""
        if self._timer is None and self.interval:
            self._timer = self.writer.client.reactor.callLater(self.interval, self._tick)

    def _tick(self) -> None:
        """One tick of the policy; it goes on only while some confirmed LAC is not known
        to the bookies."""
        self._timer = None
        writer = self.writer
        if writer.state != "open":
            return
        lac = writer.last_add_confirmed
        if self.told < self.piggybacked:
            self.told = self.piggybacked
        elif lac > self.told:
            self.told = lac
            self.publish()  # best effort: a reader falls back on the next add's LAC
        if lac > self.told:
            self._timer = writer.client.reactor.callLater(self.interval, self._tick)

    def stop(self) -> None:
        """No more ticks (the writer closes, lets go or failed)."""
        timer, self._timer = self._timer, None
        if timer is not None and timer.active():
            timer.cancel()

    def publish(self) -> defer.Deferred[int]:
        """Send the LAC to every bookie of the last ensemble as an explicit LAC
        (WRITE_LAC, v3 connections only).  Best effort: fires with how many bookies took it."""
        writer = self.writer
        lac = writer.last_add_confirmed
        client = writer.client
        if lac < 0 or getattr(client, "protocol", "v3") != "v3":
            return defer.succeed(0)
        body = writer.digest.package_lac(lac)
        calls = []
        for bookie in writer.metadata.last_ensemble:
            try:
                calls.append(client.pool.get(bookie).write_lac(writer.ledger_id, lac, writer.master_key, body))
            except Exception as exc:  # noqa: BLE001
                calls.append(defer.fail(exc))
        return defer.DeferredList(calls, consumeErrors=True).addCallback(
            lambda answers: sum(1 for ok, _ in answers if ok)
        )
