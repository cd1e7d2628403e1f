"""A lost bookie's ledger count follows its repair, and `top` has one word for one state
(issue 54, item 8): `autorecovery status` said "14 ledgers" after all 14 were re-replicated,
until the next audit; `top` called a bookie `down` in its list and `lost` in its header."""

from __future__ import annotations

import io

from rich.console import Console

from bkctl.commands.cluster import lost_text
from bkctl.ops.autorecovery import AutorecoveryReport
from bkctl.ops.prometheus import Rates
from bkctl.ops.top import TopCluster, TopDisk, TopGc, TopRow, TopSnapshot, TopState, TopZooKeeper, ZooKeeperState
from bkctl.top_screen import ViewState, render
from bkctl.wire.autorecovery import repairstate as R
from bkctl.wire.autorecovery.status import AuditorStatus
from bkctl.wire.metadata.store import UnderreplicatedMark

NOW = 1_700_000_000_000


def _snap(**kw):
    base = dict(now_ms=NOW, auditor="w1:3181", registered={"a:3181", "b:3181"}, cookies={"a:3181", "b:3181", "n:3181"})
    base.update(kw)
    return R.Snapshot(**base)


def _audited(due_ms: int) -> AuditorStatus | None:
    return AuditorStatus.from_json(
        {
            "auditor": "w1:3181",
            "lost": [{"bookie_id": "n:3181", "named_by": 14, "lost_since": NOW - 600_000, "due": due_ms}],
        }
    )


def test_the_count_follows_the_repair_once_the_ledgers_are_marked():
    marks = {i: UnderreplicatedMark(i, ("n:3181",), None) for i in (1, 2)}
    [row] = R.lost_bookies(_snap(auditor_doc=_audited(NOW - 1000), marks=marks))
    assert (row.named_by, row.under_replicated, row.marked) == (14, 2, True)
    assert "2 of its 14 ledgers still to re-replicate" in lost_text(row)
    [done] = R.lost_bookies(_snap(auditor_doc=_audited(NOW - 1000), marks={}))
    assert "0 of its 14 ledgers still to re-replicate" in lost_text(done) and "14 ledgers;" not in lost_text(done)
    # not due yet: nothing marked, nothing repaired: the audit's count, and when it is due
    [waiting] = R.lost_bookies(_snap(auditor_doc=_audited(NOW + 5000), marks={}))
    assert not waiting.marked and "14 ledgers; " in lost_text(waiting) and "due in 5 s" in lost_text(waiting)


def test_top_calls_a_bookie_lost_in_its_header_only_if_its_row_does():
    def frame_of(state: TopState) -> str:
        row = TopRow(
            bookie_id="k:3181",
            state=state,
            registration="down",
            rack=None,
            http=None,
            kind=None,
            unread={},
            read_only_reason=None,
            metrics=None,
            disk=TopDisk(),
            gc=TopGc(),
            rates=Rates(),
        )
        lost = state is TopState.LOST
        snap = TopSnapshot(
            time=NOW,
            cluster=TopCluster(
                bookies=1,
                lost=int(lost),
                down=int(not lost),
                unreachable=0,
                writable=0,
                under_replicated=0,
                auditor="a:3181",
                autorecovery_enabled=True,
                read_only=0,
            ),
            bookies=[row],
            autorecovery=AutorecoveryReport(
                enabled=True,
                lost_bookie_recovery_delay=None,
                underreplicated=0,
                auditor="a:3181",
                auditor_keeps_status=True,
                lost_bookies=[R.LostBookie("k:3181", True, None, 0, False, None, None, None, None, False, "lost")],
                auditor_waits_for="nothing",
                workers=[],
                workers_note=None,
                ledgers=[],
                lost_entries=[],
            ),
            autorecovery_error=None,
            zookeeper=TopZooKeeper(ZooKeeperState.OK, None, None, NOW, None),
        )
        text = io.StringIO()
        Console(file=text, width=200).print(render(snap, ViewState(), live=False))
        return text.getvalue()

    frame = frame_of(TopState.DOWN)
    assert "1 down" in frame and "lost: k:3181" not in frame, frame
    assert "lost: k:3181" in frame_of(TopState.LOST)
