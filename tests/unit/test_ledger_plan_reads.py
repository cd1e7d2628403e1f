"""``plan_ledgers`` reads each ledger's metadata once, pipelined (the fake store's call log
counts the reads): the ids named and those of narrow ranges in the probe that finds them, those
listed (``all``, a wide range) a batch a read; no ``exists`` and no read one ledger at a time, and
the plans and skipped ledgers are what they were (tests/support/plan_cases.py)."""

from __future__ import annotations

import pytest

from bkctl.wire.domain import ledger_plan
from bkctl.wire.domain.ledger_plan import NoSuchLedgers, parse_ledger_spec
from tests.support import plan_cases
from tests.support.fake_store import FakeMetadataStore
from tests.support.plan_cases import CASES, Case


@pytest.fixture
def store():
    store = FakeMetadataStore().start()
    for ledger_id, md in plan_cases.population().items():
        store.ledgers.create(md, ledger_id)
    store.calls.clear()
    return store


def _read(store) -> list[int]:
    return [i for (ids, *_) in store.called("ledgers.read_many") for i in ids]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_each_ledger_read_once_and_the_plan_as_it_was(store, case: Case, monkeypatch):
    if case.victim is not None:
        monkeypatch.setattr(store.ledgers, "ids", plan_cases.deleting_when_listed(store, case.victim))
    if case.missing is not None:
        with pytest.raises(NoSuchLedgers) as info:
            case.plan(store)
        assert info.value.missing == case.missing
        assert len(store.called("ledgers.read_many")) == 1  # the probe, and nothing planned
    else:
        assert plan_cases.outcome(case.plan(store)) == (case.plans, case.skipped)
        planned = {i for i, *_ in case.plans} | {i for i, _ in case.skipped}
        plan_cases.read_once(_read(store), planned - {plan_cases.OFFLOADED} | set(parse_ledger_spec(case.spec).ids))
    assert store.called("ledgers.read") == [] and store.called("ledgers.exists") == []


def test_named_ids_and_a_narrow_range_are_one_pipelined_read(store):
    planning = CASES[0].plan(store)
    assert len(store.called("ledgers.read_many")) == 1
    assert planning.plans[-1].offload == plan_cases.OFFLOAD_LOCATION
    assert planning.plans[0].metadata == {"app": "x"} and planning.plans[0].length == 100


def test_all_is_read_a_bounded_batch_at_a_time(store, monkeypatch):
    monkeypatch.setattr(ledger_plan, "READ_BATCH", 32)
    plans, skipped = plan_cases.outcome(CASES[1].plan(store))
    assert (plans, skipped) == (CASES[1].plans, [])
    batches = [len(ids) for (ids, *_) in store.called("ledgers.read_many")]
    assert batches == [32, 32, 32, 12]  # 108 ledgers, listed as they are read
    assert len(store.called("ledgers.ids")) == 1


def test_the_skipped_are_the_manifests_documents(store):
    planning = CASES[2].plan(store)
    assert [s.to_json() for s in planning.skipped][:1] == [{"ledger_id": 3, "reason": plan_cases.OPEN_SKIP}]
