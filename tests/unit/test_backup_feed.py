"""A restored ledger's adds fed chunk after chunk (:class:`bkctl.backup.feed.ChunkFeed`): a
chunk is handed over once started, not once acknowledged, in order, and a failed add is
raised by the next call."""

from __future__ import annotations

import pytest
from twisted.internet import defer

from bkctl.backup.feed import ChunkFeed
from bkctl.wire.client.blocking import run_in_reactor


class FakeHandle:
    """A ledger handle that starts every entry at once and acknowledges when told."""

    def __init__(self):
        self.started: list[bytes] = []
        self.runs: list[defer.Deferred] = []

    def add_entries(self, payloads):
        for payload in payloads:
            self.started.append(payload)
        done: defer.Deferred = defer.Deferred()
        self.runs.append(done)
        return done


class FakeLedger:
    def __init__(self):
        self.handle = FakeHandle()


def test_a_chunk_is_handed_over_once_started_and_finish_waits_for_every_ack():
    ledger = FakeLedger()
    feed = ChunkFeed(ledger, timeout=30)
    feed.add([b"a", b"b"])
    feed.add([b"c"])  # the first chunk is not acknowledged yet: add_many would still be waiting
    assert ledger.handle.started == [b"a", b"b", b"c"]
    assert not any(d.called for d in ledger.handle.runs)

    def ack() -> None:
        for i, d in enumerate(ledger.handle.runs):
            d.callback(i)

    run_in_reactor(ack, timeout=30)
    feed.finish()


def test_a_failed_add_is_raised_by_the_next_add_and_by_finish():
    ledger = FakeLedger()
    feed = ChunkFeed(ledger, timeout=30)
    feed.add([b"a"])
    run_in_reactor(lambda: ledger.handle.runs[0].errback(RuntimeError("bookies gone")), timeout=30)
    with pytest.raises(RuntimeError, match="bookies gone"):
        feed.add([b"b"])
    assert ledger.handle.started == [b"a"]  # nothing more was started
    with pytest.raises(RuntimeError, match="bookies gone"):
        feed.finish()


def test_nothing_added_finishes_at_once():
    ChunkFeed(FakeLedger(), timeout=30).finish()
