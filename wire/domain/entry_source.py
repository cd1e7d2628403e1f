"""Where an export reads one ledger's entries, chosen once, when the plan is made.

A ledger is read from its bookies -- an open one, when the plan found entries an ack quorum
holds past its LAC, up to those -- or from its offloaded copy in tiered storage (the broker's
rules: :func:`~.topic_window.offloaded_copy`; a named ledger BookKeeper no longer has:
:func:`~.ledger_plan.plan_ledgers`' ``offloaded``), never both.  The planner decides, and
every read of that ledger carries the decision as a value: a task's range, a chunked message
read on into the topic's next ledger, a ``--from``/``--to`` bisection, the transaction scan.
No reader keeps a table of which ledgers are offloaded (such a table is filled in one room and
read in another, and a read that misses it goes to the bookies silently).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..pulsar.offload_store import OffloadLocation

__all__ = ["EntrySource"]


@dataclass(frozen=True)
class EntrySource:
    """One ledger's entries as a plan reads them: from ``offload`` when set, else from the
    bookies (past the LAC when ``unconfirmed``: an open ledger's planned tail)."""

    ledger_id: int
    offload: OffloadLocation | None = None
    unconfirmed: bool = False

    def __post_init__(self) -> None:
        if self.offload is not None and self.unconfirmed:
            raise ValueError(f"ledger {self.ledger_id}: an offloaded copy is closed, it has no unconfirmed entries")
        if self.offload is not None and self.offload.ledger_id != self.ledger_id:
            raise ValueError(f"ledger {self.ledger_id} given the offloaded copy of ledger {self.offload.ledger_id}")

    @property
    def offloaded(self) -> bool:
        return self.offload is not None
