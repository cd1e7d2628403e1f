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


class PullingHandle:
    """A ledger handle whose pipeline is full: it takes entries only when told (:meth:`pull`,
    in the reactor thread), from the runs of entries in the order they were handed over."""

    def __init__(self):
        self.started: list[bytes] = []
        self.feeds: list = []
        self.runs: list[defer.Deferred] = []

    def add_entries(self, payloads):
        self.feeds.append(iter(payloads))
        done: defer.Deferred = defer.Deferred()
        self.runs.append(done)
        return done

    def pull(self, n: int) -> None:
        while n and self.feeds:
            try:
                self.started.append(next(self.feeds[0]))
                n -= 1
            except StopIteration:
                self.feeds.pop(0)


def _in_thread(fn):
    import threading

    done = threading.Event()
    errors: list[BaseException] = []

    def run():
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - told to the test
            errors.append(exc)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done, errors


def test_the_next_chunk_is_read_while_one_is_started_and_at_most_one_waits_behind_it():
    import time

    ledger = FakeLedger()
    ledger.handle = PullingHandle()
    feed = ChunkFeed(ledger, timeout=30)
    feed.add([b"a", b"b"])  # nothing of the ledger waits: queued at once, none started yet
    assert ledger.handle.started == []
    second, errors = _in_thread(lambda: feed.add([b"c"]))
    time.sleep(0.2)
    assert not second.is_set()  # "a", "b" not wholly started: "c" waits behind them
    run_in_reactor(ledger.handle.pull, 1, timeout=30)
    assert not second.wait(0.2)
    run_in_reactor(ledger.handle.pull, 2, timeout=30)  # "b", then the end of the first chunk
    assert second.wait(10) and not errors
    run_in_reactor(ledger.handle.pull, 5, timeout=30)
    assert ledger.handle.started == [b"a", b"b", b"c"]  # in order
    run_in_reactor(lambda: [d.callback(i) for i, d in enumerate(ledger.handle.runs)], timeout=30)
    feed.finish()


def test_a_chunk_queued_behind_a_failed_one_is_never_started_and_its_add_raises():
    import time

    ledger = FakeLedger()
    ledger.handle = PullingHandle()
    feed = ChunkFeed(ledger, timeout=30)
    feed.add([b"a", b"b"])
    second, errors = _in_thread(lambda: feed.add([b"c"]))
    time.sleep(0.2)
    run_in_reactor(lambda: ledger.handle.runs[0].errback(RuntimeError("bookies gone")), timeout=30)
    assert second.wait(10)
    assert [str(e) for e in errors] == ["bookies gone"]
    run_in_reactor(ledger.handle.pull, 5, timeout=30)
    assert ledger.handle.started == [b"a", b"b"]  # "c" never handed over
    with pytest.raises(RuntimeError, match="bookies gone"):
        feed.finish()
