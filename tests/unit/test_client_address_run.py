"""A run of a writer's entries addressed (write sets, encoded ADDs, copies by bookie), both twins:
:func:`bkctl.wire.client.pending_add.address_run` and ``_addentries.address_run`` (fast paths on)."""

from __future__ import annotations

import pytest

from bkctl.wire import fastpath
from bkctl.wire.client.pending_add import PendingAdd, address_run
from bkctl.wire.client.readable_ledger import StripeCursor
from tests.support.entries import MAKERS, maker_id

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
    run[1].encoded = "encoded 9"  # type: ignore[assignment]  # encoded before: kept
    run[0].acked, run[0].acks = 0b11, 2  # re-addressed: its acknowledgements start again
    encoded: list[int] = []

    def encode(p: PendingAdd):
        encoded.append(p.entry_id)
        p.encoded = f"encoded {p.entry_id}"  # type: ignore[assignment]
        return p.encoded

    copies = twin(run, cursor, encode)
    p8, p9, p10, p11 = run
    e8, e9, e10, e11 = (p.encoded for p in run)
    assert e9 == "encoded 9"
    assert copies == {
        "c": ([e8], [p8], [0]),
        "a": ([e8, e9], [p8, p9], [1, 0]),
        "b": ([e9], [p9], [1]),
        "x": ([e10, e11], [p10, p11], [0, 0]),
        "y": ([e10, e11], [p10, p11], [1, 1]),
    }
    assert list(copies) == ["c", "a", "b", "x", "y"]  # in run order
    if make is PendingAdd:
        assert encoded == [8, 10, 11] and e8 == "encoded 8"
    else:  # an Entry is its own encoded ADD
        assert encoded == [] and (e8, e10, e11) == (p8, p10, p11)
    assert [p.bookies for p in run] == [("c", "a"), ("a", "b"), ("x", "y"), ("x", "y")]
    assert [(p.acked, p.acks) for p in run] == [(0, 0)] * 4
    assert ledger.asked[-2:] == [10, 11]  # past the stripe: the ledger's own write sets


@pytest.mark.parametrize("twin", TWINS, ids=lambda t: type(t).__name__)
def test_an_empty_run_and_an_encoder_that_raises(twin):
    cursor = StripeCursor(Ledger())
    assert twin([], cursor, None) == {}

    def encode(p: PendingAdd):
        raise ValueError("cannot encode")

    with pytest.raises(ValueError, match="cannot encode"):
        twin([PendingAdd(0, b"", 0)], cursor, encode)


@pytest.mark.parametrize("twin, make", BOTH, ids=BOTH_IDS)
def test_an_entry_addressed_already_is_skipped(twin, make):
    """An entry an ensemble change sent already (it has its write set) is left as it is."""
    cursor = StripeCursor(Ledger())
    run = [make(e, b"body", e) for e in (0, 1)]
    run[0].bookies = ("z", "b")
    run[0].acks = 1
    copies = twin(run, cursor, lambda p: f"encoded {p.entry_id}")
    assert (run[0].bookies, run[0].acks) == (("z", "b"), 1)
    assert {bookie: entries for bookie, (_adds, entries, _slots) in copies.items()} == {"b": [run[1]], "c": [run[1]]}
