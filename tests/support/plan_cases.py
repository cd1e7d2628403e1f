"""Ledgers and ledger specs for the tests of ``plan_ledgers``' reads, on the fake store
(tests/unit/test_ledger_plan_reads.py) and on a real ZooKeeper
(tests/integration/test_ledger_plan_reads.py): one population, the plans and skipped ledgers
each case must give (what the plan gave when it read a ledger at a time: the same results, in
the same order), and the ledgers each must read -- every one of them once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from bkctl.wire.domain.ledger_plan import LedgerPlanning, OffloadedCopy, parse_ledger_spec, plan_ledgers
from bkctl.wire.metadata.ledger import LedgerMetadata
from bkctl.wire.metadata.store import MetadataStore

T0 = 1_795_219_200_000  #: every ledger's ctime but two (ms)
DAY = 86_400_000
#: ledgers 20..119: more than one multiRead batch and more than a short read (64) of ZooKeeper
BULK = range(20, 120)
WIDE = (50_000, 90_000)  #: found by a wide range's listing, not by probing
OFFLOADED = 600  #: BookKeeper no longer has it; a managed ledger offloaded it
OFFLOAD_LOCATION = "tiered:600"
LACS = {3: 12, 7: -1}  #: the open ledgers' last add confirmed
OPEN_SKIP = "open (use --include-open)"
RECOVERY_SKIP = "in_recovery (use --include-open)"
DELETED = "deleted while planning"

PlanRow = tuple[int, str, int]  #: (ledger_id, state, last)


def _md(
    state: str = "closed", last: int = -1, ctime: int = T0, custom: dict[str, bytes] | None = None
) -> LedgerMetadata:
    md = LedgerMetadata.new(["b1:1", "b2:1", "b3:1"], 2, 2, password=b"pw", custom_metadata=custom or {}, ctoken=1)
    md = replace(md, ctime=ctime)
    if state == "closed":
        return md.closed(last, 10 * (last + 1))
    return md.in_recovery() if state == "in_recovery" else md


def population() -> dict[int, LedgerMetadata]:
    ledgers = {
        1: _md(last=9, custom={"app": b"x"}),
        2: _md(),  # closed, empty
        3: _md(state="open"),
        4: _md(last=4, ctime=T0 - 10 * DAY),
        5: _md(last=4, ctime=T0 + DAY),
        7: _md(state="in_recovery"),
    }
    ledgers.update({i: _md(last=i % 7) for i in BULK})
    ledgers.update({i: _md(last=0) for i in WIDE})
    return ledgers


def offloaded(ids: list[int]) -> dict[int, OffloadedCopy]:
    """The plan's ``offloaded``: ledger 600 is in tiered storage, its last entry 41."""
    return {OFFLOADED: OffloadedCopy(OFFLOAD_LOCATION, 41)} if OFFLOADED in ids else {}


def _bulk() -> list[PlanRow]:
    return [(i, "CLOSED", i % 7) for i in BULK]


_FEW: list[PlanRow] = [(1, "CLOSED", 9), (2, "CLOSED", -1)]
_AGED: list[PlanRow] = [(4, "CLOSED", 4), (5, "CLOSED", 4)]
_WIDE: list[PlanRow] = [(i, "CLOSED", 0) for i in WIDE]


@dataclass(frozen=True)
class Case:
    """A spec and options, the ledger deleted between its listing and its read (``victim``),
    and what the plan must give: ``plans`` and ``skipped`` (``(ledger_id, reason)``), or the
    ``missing`` of its :class:`~bkctl.wire.domain.ledger_plan.NoSuchLedgers`."""

    name: str
    spec: str
    options: dict[str, Any] = field(default_factory=dict)
    victim: int | None = None
    plans: list[PlanRow] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)
    missing: list[str] | None = None

    def plan(self, store: MetadataStore) -> LedgerPlanning:
        return plan_ledgers(store, parse_ledger_spec(self.spec), **self.options)


_OPEN = {"include_open": True, "lac_of": LACS.__getitem__}
CASES = [
    Case(
        "named ids, an offloaded one and a narrow range",
        "1,2,3,600,20-119",
        {"offloaded": offloaded},
        plans=[*_FEW, *_bulk(), (OFFLOADED, "CLOSED", 41)],
        skipped=[(3, OPEN_SKIP)],
    ),
    Case(
        "all, the open ledgers read to their LAC",
        "all",
        _OPEN,
        plans=[*_FEW, (3, "OPEN", 12), *_AGED, (7, "IN_RECOVERY", -1), *_bulk(), *_WIDE],
    ),
    Case(
        "all, a ledger deleted while planning",
        "all",
        victim=20,
        plans=[*_FEW, *_AGED, *_bulk()[1:], *_WIDE],
        skipped=[(3, OPEN_SKIP), (7, RECOVERY_SKIP), (20, DELETED)],
    ),
    Case(
        "a named id and a wide range, one of it deleted while planning",
        "1,10-100000",
        victim=WIDE[0],
        plans=[_FEW[0], *_bulk(), _WIDE[1]],
        skipped=[(WIDE[0], DELETED)],
    ),
    Case(
        "--since and --until",
        "all",
        {"since_ms": T0 - DAY, "until_ms": T0 + DAY // 2},
        plans=[*_FEW, *_bulk(), *_WIDE],
        skipped=[
            (3, OPEN_SKIP),
            (4, "created before --since"),
            (5, "created at or after --until"),
            (7, RECOVERY_SKIP),
        ],
    ),
    Case(
        "an offloaded id with --since: not looked for",
        "1,600",
        {"offloaded": offloaded, "since_ms": 0},
        missing=["600"],
    ),
    Case(
        "a missing id and an empty narrow range",
        "1,8,30-40,200-300",
        missing=["8", "200-300 (no ledger in that range)"],
    ),
    Case(
        "a missing id and an empty wide range",
        "8,200000-300000",
        missing=["8", "200000-300000 (no ledger in that range)"],
    ),
]


def outcome(planning: LedgerPlanning) -> tuple[list[PlanRow], list[tuple[int, str]]]:
    """What a case compares: the plans and the skipped ledgers, in order."""
    plans = [(p.ledger_id, p.state, p.last) for p in planning.plans]
    return plans, [(s.ledger_id, s.reason) for s in planning.skipped]


def read_once(reads: Iterable[int], expected: Iterable[int]) -> None:
    """Every ledger of ``expected`` read, and each once."""
    counted = Counter(reads)
    assert set(counted) == set(expected), sorted(set(counted) ^ set(expected))
    assert {i: n for i, n in counted.items() if n > 1} == {}


def deleting_when_listed(store: MetadataStore, victim: int):
    """The store's ``ledgers.ids``, but ``victim`` deleted as soon as it is listed: a ledger
    deleted between the plan's listing and its read (for ``monkeypatch.setattr``)."""
    listed = store.ledgers.ids

    def ids():
        for ledger_id in listed():
            yield ledger_id
            if ledger_id == victim:
                store.ledgers.delete(ledger_id)

    return ids
