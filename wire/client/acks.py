"""The acknowledgements of a writer's copies (the ack -> quorum step of Java's ``PendingAddOp``).

A writer's handle (:mod:`.ledger_handle`) sends each entry to the bookies of its write set; every
connection calls the handle's :class:`Acks` back once per copy answered, as ``acks(p, slot, bookie,
error)``.  It counts the bookie's unanswered writes down, hands an error or a bookie that was behind
to the handle, and counts an acknowledgement of entry ``p`` (a
:class:`~.pending_add.PendingAdd`) once per copy of its current write set.  When that makes the
entry at the head of the pipeline complete, the handle completes the adds that are ready: at the end
of the burst under way (:mod:`.cork`; :attr:`Acks.held` says one is due), else at once.

This is the Python twin; ``_addentries.Acks`` (``wire/client/_addentries.c``, used with fast paths on:
:attr:`bkctl.wire.fastpath.Twins.entries`) is the C one, with the same interface
(tests/unit/test_client_acks.py runs the same checks on both).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from .cork import Cork, FinishesBursts
from .pending_add import PendingAdd

__all__ = ["Acks"]


class Acks:
    """Counts the acknowledgements of one writer's copies.  Handed in by the writer: the dict of
    each bookie's unanswered writes (``unanswered``), the set of bookies that are ``max_inflight``
    writes behind (``behind``), its pipeline of pending adds in entry order (``pending``), the
    ledger's ack quorum, its client's :class:`~.cork.Cork`, itself (``writer``: called at the
    burst's end), and what it does with a bookie that catches up (``answered(bookie, n)``), an error
    (``add_error(exc, p, slot, bookie)``) and completions (``complete()``).  ``held``: the writer
    has completions due at the end of the burst under way (it clears it when it does them)."""

    __slots__ = (
        "unanswered",
        "behind",
        "pending",
        "ack_quorum",
        "cork",
        "writer",
        "answered",
        "add_error",
        "complete",
        "held",
    )

    def __init__(
        self,
        unanswered: dict[str, int],
        behind: set[str],
        pending: deque[PendingAdd],
        ack_quorum: int,
        cork: Cork,
        writer: FinishesBursts,
        answered: Callable[[str, int], Any],
        add_error: Callable[[BaseException, PendingAdd, int, str], Any],
        complete: Callable[[], Any],
    ) -> None:
        self.unanswered = unanswered
        self.behind = behind
        self.pending = pending
        self.ack_quorum = ack_quorum
        self.cork = cork
        self.writer = writer
        self.answered = answered
        self.add_error = add_error
        self.complete = complete
        self.held = False

    def __call__(self, p: PendingAdd, slot: int, bookie: str, error: BaseException | None) -> None:
        """``bookie`` answered copy ``slot`` of entry ``p`` (``error`` None: acknowledged)."""
        unanswered = self.unanswered
        n = unanswered.get(bookie, 1) - 1
        unanswered[bookie] = n
        behind = self.behind
        if behind and bookie in behind:
            self.answered(bookie, n)
        if error is not None:
            self.add_error(error, p, slot, bookie)
            return
        bit = 1 << slot
        bookies = p.bookies
        if bookies is None or bookies[slot] != bookie or p.acked & bit:
            return  # from a bookie that was replaced meanwhile, or a duplicate
        p.acked |= bit
        acks = p.acks = p.acks + 1
        if self.held:
            return  # completes at the end of the burst under way, with every add ready then
        if acks >= self.ack_quorum:
            pending = self.pending
            if pending and pending[0] is p:
                # during a burst (a chunk of answers handed out) the adds it acknowledges
                # complete once, at its end, not once per answer
                if self.cork.finish_at_release(self.writer):
                    self.held = True
                else:
                    self.complete()
        # else: it completes when every earlier entry has
