"""A writer's acknowledgement counter, both twins: :class:`bkctl.wire.client.acks.Acks` and its C
twin ``_addentries.Acks`` (fast paths on), checked alike: it keeps each bookie's backlog itself and
reports to a declared sink (:class:`~bkctl.wire.client.acks.AckSink`), holding nothing of the
writer's own."""

from __future__ import annotations

import gc
from collections import deque

import pytest

from bkctl.wire import fastpath
from bkctl.wire.client.acks import Acks
from bkctl.wire.client.cork import Cork
from bkctl.wire.client.pending_add import PendingAdd
from tests.support.entries import MAKERS, maker_id, python_entry

_C = fastpath.build(True).entries.c
TWINS = [Acks] + ([_C.Acks] if _C is not None else [])
BOTH = [(kind, make) for kind in TWINS for make in MAKERS]
BOTH_IDS = [f"{kind.__module__}-{maker_id(make)}" for kind, make in BOTH]


class Sink:
    """What the counter calls (an :class:`~bkctl.wire.client.acks.AckSink`), recorded; its pipeline
    and its burst handling are a writer's, as the ledger handle has them."""

    def __init__(self, cork: Cork) -> None:
        self.calls: list[tuple] = []
        self.pending: deque[PendingAdd] = deque()
        self.cork = cork

    def burst_ended(self) -> None:
        self.calls.append(("burst_ended",))

    def caught_up(self) -> None:
        self.calls.append(("caught_up",))

    def copy_failed(self, exc: BaseException, p: PendingAdd, slot: int, bookie: str) -> None:
        self.calls.append(("error", exc, p.entry_id, slot, bookie))

    def quorum_reached(self, p: PendingAdd) -> bool:
        self.calls.append(("quorum", p.entry_id))
        if not self.pending or self.pending[0] is not p:
            return False
        if self.cork.finish_at_release(self):
            return True
        self.calls.append(("complete",))
        return False


def _setup(kind, qa=2, make=python_entry, max_inflight=10, resume_at=8):
    sink = Sink(Cork())
    acks = kind(sink, qa, max_inflight, resume_at)
    for bookie in "abc":
        acks.sent(bookie, 3)
    for e in range(3):
        p = make(e, b"body", 4 * (e + 1))
        p.bookies = ("a", "b", "c")[e % 3 :] + ("a", "b", "c")[: e % 3]
        sink.pending.append(p)
    return acks, sink


def _backlogs(acks) -> dict[str, int]:
    return {b: acks.backlog(b) for b in "abcz"}


@pytest.mark.parametrize("kind, make", BOTH, ids=BOTH_IDS)
def test_the_sink_hears_of_each_entry_at_its_quorum_and_completes_the_head(kind, make):
    acks, sink = _setup(kind, make=make)
    p0, p1, _p2 = sink.pending
    acks(p1, 0, "b", None)
    acks(p1, 1, "c", None)
    assert (p1.acked, p1.acks) == (0b11, 2) and sink.calls == [("quorum", 1)]  # not the head: it waits
    acks(p0, 0, "a", None)
    assert (p0.acked, p0.acks) == (0b01, 1) and sink.calls == [("quorum", 1)]
    acks(p0, 1, "b", None)
    assert sink.calls == [("quorum", 1), ("quorum", 0), ("complete",)] and not acks.held
    assert _backlogs(acks) == {"a": 2, "b": 1, "c": 2, "z": 0}


@pytest.mark.parametrize("kind, make", BOTH, ids=BOTH_IDS)
def test_duplicates_and_copies_from_a_replaced_bookie_do_not_count(kind, make):
    acks, sink = _setup(kind, make=make)
    p0 = sink.pending[0]
    acks(p0, 0, "a", None)
    acks(p0, 0, "a", None)  # a duplicate
    acks(p0, 1, "z", None)  # slot 1 went to b
    assert (p0.acked, p0.acks) == (0b01, 1) and sink.calls == []
    assert _backlogs(acks) == {"a": 1, "b": 3, "c": 3, "z": 0}  # every answer counts as answered
    p0.bookies = None
    acks(p0, 1, "b", None)
    assert (p0.acked, p0.acks) == (0b01, 1) and sink.calls == []


@pytest.mark.parametrize("kind", TWINS, ids=lambda k: k.__module__)
def test_during_a_burst_completion_is_due_at_its_end_once(kind):
    acks, sink = _setup(kind, qa=1)
    p0, p1, _p2 = sink.pending
    assert sink.cork.hold()
    acks(p0, 0, "a", None)
    assert acks.held and sink.calls == [("quorum", 0)]
    sink.pending.popleft()  # as if completed; the next head's ack during the same burst adds nothing
    acks(p1, 0, "b", None)
    assert p1.acks == 1 and sink.calls == [("quorum", 0)]
    sink.cork.release()
    assert sink.calls == [("quorum", 0), ("burst_ended",)]
    acks.held = False
    assert not acks.held


@pytest.mark.parametrize("kind", TWINS, ids=lambda k: k.__module__)
def test_a_bookie_is_behind_at_max_inflight_and_caught_up_at_the_resume_mark(kind):
    acks, sink = _setup(kind, max_inflight=5, resume_at=3)
    p0 = sink.pending[0]
    acks.sent("a", 1)
    assert not acks.behind and acks.backlog("a") == 4
    acks.sent("a", 1)
    acks.sent("b", 2)
    assert acks.behind == {"a", "b"}
    acks(p0, 0, "a", None)
    acks(p0, 0, "a", None)  # a duplicate is answered all the same: 3 left, a caught up
    assert acks.behind == {"b"} and ("caught_up",) not in sink.calls
    acks.forget("b")  # replaced: nothing waits for it
    assert not acks.behind and ("caught_up",) not in sink.calls
    acks.sent("c", 2)
    acks(p0, 1, "c", None)
    assert acks.behind == {"c"}  # 4 left: still above the mark
    acks(sink.pending[1], 1, "c", None)
    assert not acks.behind and sink.calls.count(("caught_up",)) == 1


@pytest.mark.parametrize("kind", TWINS, ids=lambda k: k.__module__)
def test_an_error_goes_to_the_sink_after_the_backlog_counts_it(kind):
    acks, sink = _setup(kind, max_inflight=3, resume_at=2)
    assert acks.behind == {"a", "b", "c"}
    p0 = sink.pending[0]
    boom = ConnectionError("gone")
    acks(p0, 0, "a", boom)
    assert sink.calls == [("error", boom, 0, 0, "a")]
    assert (p0.acked, p0.acks) == (0, 0) and acks.backlog("a") == 2 and acks.behind == {"b", "c"}


@pytest.mark.parametrize("kind", TWINS, ids=lambda k: k.__module__)
def test_a_sink_raising_raises_through_the_counter(kind):
    acks, sink = _setup(kind, qa=1)

    def quorum_reached(p: PendingAdd) -> bool:
        raise RuntimeError("complete failed")

    sink.quorum_reached = quorum_reached  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="complete failed"):
        acks(sink.pending[0], 0, "a", None)
    assert sink.pending[0].acks == 1


@pytest.mark.parametrize("kind", TWINS, ids=lambda k: k.__module__)
def test_the_counter_holds_none_of_the_writers_containers(kind):
    """What it refers to is the sink and its own state: no dict, set or deque of the writer's."""
    acks, sink = _setup(kind)
    acks(sink.pending[0], 0, "a", None)
    held = [r for r in gc.get_referents(acks) if isinstance(r, (dict, set, deque))]
    assert sink in gc.get_referents(acks)
    assert not any(r is sink.pending or r is vars(sink) for r in held)
    assert acks.sink is sink
