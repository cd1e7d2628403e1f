"""A run of a writer's entries addressed (write sets, encoded ADDs, copies by bookie), both twins:
:func:`bkctl.wire.client.pending_add.address_run` and ``_addentries.address_run`` (fast paths on)."""

from __future__ import annotations

import pytest

from bkctl.wire import fastpath
from bkctl.wire.client.pending_add import address_run
from bkctl.wire.client.readable_ledger import StripeCursor
from tests.support.entries import MAKERS, maker_id, python_entry

_C = fastpath.build(True).entries.c
TWINS = [address_run] + ([_C.address_run] if _C is not None else [])
BOTH = [(twin, make) for twin in TWINS for make in MAKERS]
BOTH_IDS = [f"{type(twin).__name__}-{maker_id(make)}" for twin, make in BOTH]
SETS = [("a", "b"), ("b", "c"), ("c", "a")]


class Ledger:
    """Entries 0..9 stripe over SETS; later ones (past the stripe) go to x and y."""

    def __init__(self) -> None:
        self.metadata = object()
        self.schedule = type("Schedule", (), {"striped_until": 9})()
        self.asked: list[int] = []

    def stripe(self, entry_id: int) -> tuple[int, int, list[tuple[str, ...]]]:
        return 0, 9, SETS

    def write_set(self, entry_id: int) -> tuple[str, ...]:
        self.asked.append(entry_id)
        return ("x", "y") if entry_id > 9 else SETS[entry_id % 3]


@pytest.mark.parametrize("twin, make", BOTH, ids=BOTH_IDS)
def test_a_run_across_the_end_of_its_stripe_is_addressed_and_grouped_by_bookie(twin, make):
    ledger = Ledger()
    cursor = StripeCursor(ledger)
    run = [make(e, b"body%d" % e, e) for e in (8, 9, 10, 11)]
    run[0].acked, run[0].acks = 0b11, 2  # re-addressed: its acknowledgements start again
    copies = twin(run, cursor)
    p8, p9, p10, p11 = run
    assert copies == {  # each entry is its own encoded ADD
        "c": ([p8], [0]),
        "a": ([p8, p9], [1, 0]),
        "b": ([p9], [1]),
        "x": ([p10, p11], [0, 0]),
        "y": ([p10, p11], [1, 1]),
    }
    assert list(copies) == ["c", "a", "b", "x", "y"]  # in run order
    assert [p.bookies for p in run] == [("c", "a"), ("a", "b"), ("x", "y"), ("x", "y")]
    assert [(p.acked, p.acks) for p in run] == [(0, 0)] * 4
    assert ledger.asked[-2:] == [10, 11]  # past the stripe: the ledger's own write sets


@pytest.mark.parametrize("twin", TWINS, ids=lambda t: type(t).__name__)
def test_an_empty_run_and_a_cursor_that_raises(twin):
    assert twin([], StripeCursor(Ledger())) == {}

    class Refusing:
        def write_set(self, entry_id: int) -> tuple[str, ...]:
            raise ValueError("no write set")

    with pytest.raises(ValueError, match="no write set"):
        twin([python_entry(0, b"", 0)], Refusing())


@pytest.mark.parametrize("twin, make", BOTH, ids=BOTH_IDS)
def test_an_entry_addressed_already_is_skipped(twin, make):
    """An entry an ensemble change sent already (it has its write set) is left as it is."""
    cursor = StripeCursor(Ledger())
    run = [make(e, b"body", e) for e in (0, 1)]
    run[0].bookies = ("z", "b")
    run[0].acks = 1
    copies = twin(run, cursor)
    assert (run[0].bookies, run[0].acks) == (("z", "b"), 1)
    assert {bookie: entries for bookie, (entries, _slots) in copies.items()} == {"b": [run[1]], "c": [run[1]]}
