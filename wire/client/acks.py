"""The acknowledgements of a writer's copies (the ack -> quorum step of Java's ``PendingEntryOp``).

A writer's handle (:mod:`.ledger_handle`) sends each entry to the bookies of its write set; every
connection calls the handle's :class:`Acks` back once per copy answered, as ``acks(p, slot, bookie,
error)``.  The counter keeps each bookie's backlog (its writes sent and not answered: the writer
tells it :meth:`Acks.sent`), knows which bookies are ``max_inflight`` writes behind (:attr:`Acks.behind`,
for the writer to hold its adds), counts an acknowledgement of entry ``p`` (a
:class:`~.pending_add.PendingEntry`) once per copy of its current write set, and reports to its
:class:`AckSink` -- an object with a declared interface, the writer -- what the writer acts on: a
copy that failed, every bookie behind caught up, an entry at its ack quorum.  It holds nothing of
the writer's own (its pipeline, its state): what it needs of them it asks the sink.

This is the Python twin; ``_addentries.Acks`` (``wire/client/_addentries.c``, used with fast paths on:
:attr:`bkctl.wire.fastpath.Twins.entries`) is the C one, with the same interface
(tests/unit/test_client_acks.py runs the same checks on both; :class:`AckCounter` is the slot both fill).
"""

from __future__ import annotations

from typing import Protocol

from .pending_add import PendingEntry

__all__ = ["AckCounter", "AckSink", "Acks"]


class AckSink(Protocol):
    """What an acknowledgement counter calls: the writer whose copies it counts (the ledger handle)."""

    def copy_failed(self, error: BaseException, p: PendingEntry, slot: int, bookie: str, /) -> None:
        """``bookie`` failed copy ``slot`` of entry ``p`` with ``error`` (already counted as answered)."""

    def caught_up(self) -> None:
        """The last bookie that was behind is back under the writer's resume mark: the adds that
        waited for it may start."""

    def quorum_reached(self, p: PendingEntry, /) -> bool:
        """Entry ``p`` has its ack quorum: complete what is ready (in entry order) now, or return
        True when that is put off to the end of the burst under way (the counter then tells no more
        entry until the writer clears :attr:`Acks.held`)."""


class AckCounter(Protocol):
    """The interface both twins fill (``Twins.entries.acks`` builds one): ``acks(sink, ack_quorum,
    max_inflight, resume_at)``; see :class:`Acks` for each member."""

    held: bool

    @property
    def behind(self) -> set[str]: ...

    def __call__(self, p: PendingEntry, slot: int, bookie: str, error: BaseException | None, /) -> None: ...

    def sent(self, bookie: str, n: int, /) -> None: ...

    def backlog(self, bookie: str, /) -> int: ...

    def forget(self, bookie: str, /) -> None: ...


class Acks:
    """Counts the acknowledgements of one writer's copies for ``sink`` (:class:`AckSink`): an entry
    has its quorum at ``ack_quorum`` copies acknowledged; a bookie is behind once ``max_inflight``
    of its writes are unanswered, and caught up again at ``resume_at`` or fewer.  ``held``: the
    sink put its completions off to the end of the burst under way (the writer clears it when it
    does them); ``behind``: the bookies ``max_inflight`` writes behind, the writer holding its
    adds while there is one (read it, a plain attribute: the writer reads it on every add; the
    counter changes it)."""

    __slots__ = ("sink", "ack_quorum", "max_inflight", "resume_at", "held", "behind", "_unanswered")

    def __init__(self, sink: AckSink, ack_quorum: int, max_inflight: int, resume_at: int) -> None:
        self.sink = sink
        self.ack_quorum = ack_quorum
        self.max_inflight = max_inflight
        self.resume_at = resume_at
        self.held = False
        self._unanswered: dict[str, int] = {}
        self.behind: set[str] = set()

    def sent(self, bookie: str, n: int) -> None:
        """``n`` more writes to ``bookie`` unanswered: it is behind at ``max_inflight``."""
        unanswered = self._unanswered.get(bookie, 0) + n
        self._unanswered[bookie] = unanswered
        if unanswered >= self.max_inflight:
            self.behind.add(bookie)

    def backlog(self, bookie: str) -> int:
        """``bookie``'s writes sent and not answered yet."""
        return self._unanswered.get(bookie, 0)

    def forget(self, bookie: str) -> None:
        """``bookie`` is being replaced: nothing waits for it to catch up."""
        self.behind.discard(bookie)

    def __call__(self, p: PendingEntry, slot: int, bookie: str, error: BaseException | None) -> None:
        """``bookie`` answered copy ``slot`` of entry ``p`` (``error`` None: acknowledged)."""
        unanswered = self._unanswered
        n = unanswered.get(bookie, 1) - 1
        unanswered[bookie] = n
        behind = self.behind
        if behind and bookie in behind and n <= self.resume_at:
            behind.discard(bookie)
            if not behind:
                self.sink.caught_up()
        if error is not None:
            self.sink.copy_failed(error, p, slot, bookie)
            return
        bit = 1 << slot
        bookies = p.bookies
        if bookies is None or bookies[slot] != bookie or p.acked & bit:
            return  # from a bookie that was replaced meanwhile, or a duplicate
        p.acked |= bit
        acks = p.acks = p.acks + 1
        if self.held or acks < self.ack_quorum:
            return  # completes at the end of the burst under way, or once more copies are in
        if self.sink.quorum_reached(p):
            self.held = True  # during a burst the adds it acknowledges complete once, at its end
