"""A rebalance's plan kept in the cluster's metadata store while it is carried out, so that a
rerun after a kill goes on with it instead of planning again.

Why: the balance plan is greedy, and a plan made again from a half-moved cluster is not the
rest of the first one.  A bookie the first plan filled past the mean (within the tolerance)
while other moves were still to come can then be among the fullest, and give away the very
replica it was just given: measured over random interrupted plans, about one rerun in fourteen
moved a replica twice that way.  Kept, the plan's moves are each carried out once: a rerun
takes the ones whose ledgers do not show them done yet.

The plan is kept from just before the first move until the run ends (whatever the moves'
outcomes): only a run that did not end -- killed, interrupted, its machine lost -- leaves one.
Stored as zlib'd JSON (:class:`~bkctl.wire.metadata.store.SavedRebalance` keeps the bytes).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from bkctl.wire.errors import SavedPlanError
from bkctl.wire.metadata.ledger import LedgerMetadata
from bkctl.wire.metadata.store import LedgerRead

from .plan import LedgerMove, MoveReason, Plan, SegmentMove

__all__ = ["FORMAT", "SavedPlan", "is_done"]

#: the version of the kept document
FORMAT = 1


@dataclass(frozen=True)
class SavedPlan:
    """A plan as kept: its moves, its figures, and when it was made (seconds since the epoch)."""

    plan: Plan
    planned_at: float

    def encode(self) -> bytes:
        p = self.plan
        doc = {
            "format": FORMAT,
            "planned_at": self.planned_at,
            "mean": p.mean,
            "tolerance": p.tolerance,
            "ledgers_walked": p.ledgers_walked,
            "before": p.before,
            "after": p.after,
            "moves": [
                [
                    m.ledger_id,
                    m.reason.value,
                    m.nbytes,
                    m.entries,
                    [[s.first_entry_id, s.source, s.target] for s in m.segments],
                ]
                for m in p.moves
            ],
        }
        return zlib.compress(json.dumps(doc, separators=(",", ":")).encode(), 6)

    @classmethod
    def decode(cls, data: bytes) -> SavedPlan:
        try:
            doc = json.loads(zlib.decompress(data))
            if doc.get("format") != FORMAT:
                raise SavedPlanError(f"a kept rebalance of format {doc.get('format')!r}; this bkctl reads {FORMAT}")
            moves = [
                LedgerMove(
                    int(lid),
                    tuple(SegmentMove(int(first), str(source), str(target)) for first, source, target in segments),
                    int(nbytes),
                    int(entries),
                    MoveReason(reason),
                )
                for lid, reason, nbytes, entries, segments in doc["moves"]
            ]
            plan = Plan(
                moves,
                [],
                {str(b): int(n) for b, n in doc["before"].items()},
                {str(b): int(n) for b, n in doc["after"].items()},
                float(doc["mean"]),
                None if doc["tolerance"] is None else float(doc["tolerance"]),
                int(doc["ledgers_walked"]),
            )
            return cls(plan, float(doc["planned_at"]))
        except SavedPlanError:
            raise
        except (zlib.error, ValueError, KeyError, TypeError, AttributeError) as e:
            raise SavedPlanError(f"the kept rebalance does not read ({type(e).__name__}: {e})") from None

    def left(self, reads: Iterable[LedgerRead | None]) -> list[LedgerMove]:
        """The moves not done yet, given each move's ledger as read now (``reads`` in the order
        of the moves; None: gone): a deleted ledger's move is left for the mover to skip."""
        return [
            m
            for m, read in zip(self.plan.moves, reads, strict=True)
            if read is None or not isinstance(read.metadata, LedgerMetadata) or not is_done(read.metadata, m)
        ]


def is_done(md: LedgerMetadata, move: LedgerMove) -> bool:
    """Whether ``md`` shows ``move`` carried out: each of its segments names the target and
    not the source."""
    ensembles = dict(md.ensembles)
    for seg in move.segments:
        ensemble = ensembles.get(seg.first_entry_id)
        if ensemble is None or seg.source in ensemble or seg.target not in ensemble:
            return False
    return True
