"""``plan_ledgers`` over a real ZooKeeper reads each ledger's znode once (counted at the ZooKeeper
session: its single gets and exists, and the paths of its pipelined reads), and plans what it
planned when it read them one at a time (tests/support/plan_cases.py; the fake store's twin of
this test is tests/unit/test_ledger_plan_reads.py)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pytest

from bkctl.wire import fastpath
from bkctl.wire.domain.ledger_plan import NoSuchLedgers, parse_ledger_spec
from bkctl.wire.metadata.zk import ZKMetadataStore
from bkctl.wire.metadata.zk.session import ZKSession
from tests.support import plan_cases
from tests.support.plan_cases import CASES

pytestmark = pytest.mark.integration


class _Reads:
    """The znode paths the ZooKeeper sessions read, by a get each or pipelined."""

    def __init__(self, monkeypatch) -> None:
        self.paths: list[str] = []
        self.single = 0  # gets and exists: a round trip each
        get_many, get, exists = ZKSession.get_many, ZKSession.get, ZKSession.exists
        reads = self

        def counted_many(session: ZKSession, paths: Iterable[str], *args, **kwargs):
            if isinstance(paths, (list, tuple)):
                reads.paths.extend(paths)
                return get_many(session, paths, *args, **kwargs)
            return get_many(session, reads.noting(paths), *args, **kwargs)

        def counted_get(session: ZKSession, path: str):
            reads.paths.append(path)
            reads.single += 1
            return get(session, path)

        def counted_exists(session: ZKSession, path: str):
            reads.paths.append(path)
            reads.single += 1
            return exists(session, path)

        monkeypatch.setattr(ZKSession, "get_many", counted_many)
        monkeypatch.setattr(ZKSession, "get", counted_get)
        monkeypatch.setattr(ZKSession, "exists", counted_exists)

    def noting(self, paths: Iterable[str]) -> Iterator[str]:
        for path in paths:
            self.paths.append(path)
            yield path

    def clear(self) -> None:
        self.paths.clear()
        self.single = 0


def test_each_ledger_read_once_and_the_plan_as_it_was(metadata_uri, monkeypatch):
    ledgers = plan_cases.population()
    with ZKMetadataStore(metadata_uri, timeout=20, twins=fastpath.selected()) as store:
        for ledger_id, md in ledgers.items():
            store.ledgers.create(md, ledger_id)
        ids_of = {store.ledgers.path(i): i for i in [*ledgers, plan_cases.OFFLOADED, 8]}
        listed = store.ledgers.ids
        reads = _Reads(monkeypatch)
        for case in CASES:
            reads.clear()
            if case.victim is not None:
                monkeypatch.setattr(store.ledgers, "ids", plan_cases.deleting_when_listed(store, case.victim))
            if case.missing is not None:
                with pytest.raises(NoSuchLedgers) as info:
                    case.plan(store)
                assert info.value.missing == case.missing, case.name
            else:
                assert plan_cases.outcome(case.plan(store)) == (case.plans, case.skipped), case.name
                read = [ids_of[p] for p in reads.paths if p in ids_of]
                planned = {i for i, *_ in case.plans} | {i for i, _ in case.skipped}
                named = set(parse_ledger_spec(case.spec).ids)
                plan_cases.read_once(read, planned - {plan_cases.OFFLOADED} | named)
            assert reads.single == 0, case.name  # no ledger read a round trip at a time
            if case.victim is not None:
                store.ledgers.delete(case.victim)  # (deleted by the listing unless it failed)
                store.ledgers.create(ledgers[case.victim], case.victim)
                monkeypatch.setattr(store.ledgers, "ids", listed)
