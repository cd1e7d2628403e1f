"""A writer's acknowledgement counter, both twins: :class:`bkctl.wire.client.acks.Acks` and its C
twin ``_addentries.Acks`` (fast paths on), checked alike."""

from __future__ import annotations

from collections import deque

import pytest

from bkctl.wire import fastpath
from bkctl.wire.client.acks import Acks
from bkctl.wire.client.cork import Cork
from bkctl.wire.client.pending_add import PendingAdd
from tests.support.entries import MAKERS, maker_id

_C = fastpath.build(True).entries.c
TWINS = [Acks] + ([_C.Acks] if _C is not None else [])
BOTH = [(kind, make) for kind in TWINS for make in MAKERS]
BOTH_IDS = [f"{kind.__module__}-{maker_id(make)}" for kind, make in BOTH]


class Writer:
    """What the counter calls back, recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def burst_ended(self) -> None:
        self.calls.append(("burst_ended",))

    def answered(self, bookie: str, n: int) -> None:
        self.calls.append(("answered", bookie, n))

    def add_error(self, exc: BaseException, p: PendingAdd, slot: int, bookie: str) -> None:
        self.calls.append(("error", exc, p.entry_id, slot, bookie))

    def complete(self) -> None:
        self.calls.append(("complete",))


def _setup(kind, qa=2, behind=(), make=PendingAdd):
    writer = Writer()
    cork = Cork()
    pending: deque[PendingAdd] = deque()
    unanswered = {"a": 3, "b": 3, "c": 3}
    acks = kind(unanswered, set(behind), pending, qa, cork, writer, writer.answered, writer.add_error, writer.complete)
    for e in range(3):
        p = make(e, b"body", 4 * (e + 1))
        p.bookies = ("a", "b", "c")[e % 3 :] + ("a", "b", "c")[: e % 3]
        pending.append(p)
    return acks, writer, cork, pending, unanswered


@pytest.mark.parametrize("kind, make", BOTH, ids=BOTH_IDS)
def test_the_head_completes_at_its_quorum_and_a_later_entry_waits(kind, make):
    acks, writer, _cork, pending, unanswered = _setup(kind, make=make)
    p0, p1, _p2 = pending
    acks(p1, 0, "b", None)
    acks(p1, 1, "c", None)
    assert (p1.acked, p1.acks) == (0b11, 2) and writer.calls == []  # not the head: it waits
    acks(p0, 0, "a", None)
    assert (p0.acked, p0.acks) == (0b01, 1) and writer.calls == []
    acks(p0, 1, "b", None)
    assert writer.calls == [("complete",)] and not acks.held
    assert unanswered == {"a": 2, "b": 1, "c": 2}


@pytest.mark.parametrize("kind, make", BOTH, ids=BOTH_IDS)
def test_duplicates_and_copies_from_a_replaced_bookie_do_not_count(kind, make):
    acks, writer, _cork, pending, unanswered = _setup(kind, make=make)
    p0 = pending[0]
    acks(p0, 0, "a", None)
    acks(p0, 0, "a", None)  # a duplicate
    acks(p0, 1, "z", None)  # slot 1 went to b
    assert (p0.acked, p0.acks) == (0b01, 1) and writer.calls == []
    assert unanswered == {"a": 1, "b": 3, "c": 3, "z": 0}  # every answer counts as answered
    p0.bookies = None
    acks(p0, 1, "b", None)
    assert (p0.acked, p0.acks) == (0b01, 1) and writer.calls == []


@pytest.mark.parametrize("kind", TWINS, ids=lambda k: k.__module__)
def test_during_a_burst_completion_is_due_at_its_end_once(kind):
    acks, writer, cork, pending, _unanswered = _setup(kind, qa=1)
    p0, p1, _p2 = pending
    assert cork.hold()
    acks(p0, 0, "a", None)
    assert acks.held and writer.calls == []
    pending.popleft()  # as if completed; the next head's ack during the same burst adds nothing
    acks(p1, 0, "b", None)
    assert p1.acks == 1 and writer.calls == []
    cork.release()
    assert writer.calls == [("burst_ended",)]
    acks.held = False
    assert not acks.held


@pytest.mark.parametrize("kind", TWINS, ids=lambda k: k.__module__)
def test_an_error_and_a_bookie_behind_go_to_the_writer(kind):
    acks, writer, _cork, pending, unanswered = _setup(kind, behind=("a",))
    p0 = pending[0]
    boom = ConnectionError("gone")
    acks(p0, 0, "a", boom)
    assert writer.calls == [("answered", "a", 2), ("error", boom, 0, 0, "a")]
    assert (p0.acked, p0.acks) == (0, 0) and unanswered["a"] == 2


@pytest.mark.parametrize("kind", TWINS, ids=lambda k: k.__module__)
def test_a_callback_raising_raises_through_the_counter(kind):
    acks, writer, _cork, pending, _unanswered = _setup(kind, qa=1)

    def complete() -> None:
        raise RuntimeError("complete failed")

    acks = kind({}, set(), pending, 1, Cork(), writer, writer.answered, writer.add_error, complete)
    with pytest.raises(RuntimeError, match="complete failed"):
        acks(pending[0], 0, "a", None)
    assert pending[0].acks == 1
