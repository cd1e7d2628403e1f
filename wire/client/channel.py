"""What the ledger layer needs from a connection to one bookie: one typed
interface.  :class:`~bkctl.wire.client.connection.BookieConnection` implements
it over the wire; the unit tests' fake bookie implements it in memory, so the
handles run the same code paths in both (the same behavioural suite runs on
both: tests/integration/test_bookie_channel_conformance.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from twisted.internet import defer

if TYPE_CHECKING:
    from bkctl.wire.codecs.add_frames import AddFields

__all__ = ["AddDone", "ReadDone", "BookieChannel"]

#: ``on_done(add, slot, bookie_id, error)``: how an add reports back without a
#: Deferred (``add``: what went in, as ``ctx``); ``error`` is None once the bookie acknowledged the entry.
AddDone = Callable[[Any, int, str, "BaseException | None"], Any]
#: ``on_done(ctx, slot, bookie_id, result)``: how a read reports back without
#: a Deferred; ``result`` is the stored entry's bytes, or the exception.
ReadDone = Callable[[Any, int, str, "bytes | BaseException"], Any]


@runtime_checkable
class BookieChannel(Protocol):
    """Requests to one bookie.  Every method but :meth:`add_run` and the reads with a callback
    returns a Deferred that fails with a :mod:`~bkctl.wire.client.errors` error."""

    bookie_id: str

    def add_run(self, adds: Sequence[AddFields], slots: list[int], on_done: AddDone) -> None:
        """The one way an add enters: ADD_ENTRY of each of ``adds`` (a digest-packaged entry,
        :class:`~bkctl.wire.codecs.add_frames.AddFields`: encoded once for its whole write set --
        a writer's entry is its own --, or made of its fields only), each reported through
        ``on_done`` with itself as ``ctx`` and the ``slots`` beside it (which may run before this
        returns, for a refused request).  The
        writer's hot path: no Deferred per copy of an entry, one call per bookie for a burst's
        copies."""

    def read(
        self, ledger_id: int, entry_id: int, *, fence_master_key: bytes | None = None, high_priority: bool = False
    ) -> defer.Deferred[Any]:
        """READ_ENTRY (entry -1: the bookie's last entry; with a master key: fencing)."""

    def read_with_callback(self, ledger_id: int, entry_id: int, on_done: ReadDone, ctx: Any, slot: int) -> None:
        """A plain READ_ENTRY reported through ``on_done`` (which may run before
        this returns, for a refused request).  The reader's hot path: no
        Deferred per entry."""

    def takes_reads(self, count: int) -> bool:
        """True when :meth:`read_run` would send ``count`` plain reads at once,
        none refused (False: read them one by one)."""

    def read_run(self, ledger_id: int, entry_ids: list[int], on_done: ReadDone) -> None:
        """:meth:`read_with_callback` of each of ``entry_ids`` (ctx: the entry
        id, slot 0), after :meth:`takes_reads` said yes for as many: the
        reader's hot path, one call per bookie for a window's reads."""

    def batch_read(
        self,
        ledger_id: int,
        start_entry_id: int,
        max_count: int,
        max_size: int,
        *,
        fence_master_key: bytes | None = None,
    ) -> defer.Deferred[Any]:
        """BATCH_READ_ENTRY: consecutive stored entries from ``start_entry_id``."""

    def read_long_poll(
        self, ledger_id: int, previous_lac: int, timeout_ms: int, piggyback: bool = True
    ) -> defer.Deferred[Any]:
        """Long-poll READ (v3): ``(max_lac, entry_id, body)`` once the bookie's
        LAC passes ``previous_lac`` (with entry previous_lac + 1 when
        ``piggyback`` and it has it) or after ``timeout_ms``."""

    def read_lac(self, ledger_id: int) -> defer.Deferred[Any]:
        """READ_LAC: ``(lac_body, last_entry_body)``."""

    def write_lac(self, ledger_id: int, lac: int, master_key: bytes, body: bytes) -> defer.Deferred[Any]:
        """WRITE_LAC of a digest-packaged LAC ``body``."""

    def close(self) -> defer.Deferred[Any]:
        """Fail every pending request with
        :class:`~bkctl.wire.client.errors.BookieUnavailable`, and every later
        one at once; fires (with None) once closed."""
