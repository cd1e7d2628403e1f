"""A bookie's recovery adds (a ledger recovery's re-adds, re-replication's
copies) have a latency histogram of their own beside every add's: during a
repair the copies, which the journal may hold for company, made the adds'
figures say nothing of a live writer's wait in the bookie."""

from __future__ import annotations

import pytest

from bkctl.bookied.exposition import own_text
from bkctl.bookied.metrics import Metrics
from bkctl.wire import fastpath
from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.framing import frame
from bkctl.wire.codecs.protocol import Flag
from tests.support.bookie_server import KEY, add, bookie_env, entry


@pytest.fixture
def env(tmp_path):
    with bookie_env(tmp_path / "ledgers") as e:
        yield e


def v3_adds(first_txn: int, ledger: int, entry_ids, recovery: bool) -> bytes:
    """One chunk of pipelined v3 adds (a run: served together on the fast path)."""
    return b"".join(
        frame(v3.serialize(v3.add_request(first_txn + n, ledger, e, KEY, entry(e, ledger=ledger), recovery=recovery)))
        for n, e in enumerate(entry_ids)
    )


def v2_adds(ledger: int, entry_ids, flags: int) -> bytes:
    return b"".join(frame(v2.AddRequest(2, flags, KEY, entry(e, ledger=ledger), ledger, e).encode()) for e in entry_ids)


@pytest.mark.parametrize("fastpaths", [True, False])
def test_recovery_adds_are_counted_apart_and_among_all_adds(env, fastpaths):
    env.factory.twins = fastpath.build(fastpaths)
    env.factory.metrics = metrics = Metrics()
    c2, c3 = env.connect(), env.connect()
    add(c2, 0)  # a writer's v2 add
    add(c2, 0, flags=Flag.RECOVERY_ADD, ledger=2)  # a recovery add, v2
    c2.proto.dataReceived(v2_adds(3, range(3), Flag.RECOVERY_ADD))  # a run of them
    c3.proto.dataReceived(v3_adds(10, 4, range(4), recovery=True))  # v3, a run
    c3.proto.dataReceived(v3_adds(20, 5, [0], recovery=True))  # v3, one
    c3.proto.dataReceived(v3_adds(30, 6, range(2), recovery=False))  # a writer's v3 run
    env.journal.sync()
    assert len(c2.replies()) == 1 + 1 + 3 and len(c3.replies()) == 4 + 1 + 2
    assert metrics.latency_count("add") == 12
    assert metrics.recovery_add_latency.count == 9
    text = own_text(metrics)
    assert "bookie_recovery_add_latency_seconds_count 9.0" in text
    assert 'bookie_request_latency_seconds_count{op="add"} 12.0' in text
