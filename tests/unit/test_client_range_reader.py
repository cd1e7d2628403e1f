"""RangeReader: batches in order, ``ahead`` of them read ahead, and a
failure that ends the stream without leaving the batches behind it unhandled."""

from __future__ import annotations

import gc

import pytest
from twisted.internet import defer
from twisted.python import failure

from bkctl.wire.client.range_reader import RangeReader
from tests.support.deferreds import failureResultOf, successResultOf
from tests.support.ledger_client import filled_ledger, settled


class Spans:
    """A read_span whose batches are answered by the test."""

    def __init__(self):
        self.asked: list[tuple[int, int]] = []
        self.pending: dict[tuple[int, int], defer.Deferred] = {}

    def __call__(self, first: int, last: int) -> defer.Deferred:
        d = defer.Deferred()
        self.asked.append((first, last))
        self.pending[(first, last)] = d
        return d

    def answer(self, span: tuple[int, int]) -> None:
        self.pending.pop(span).callback([(e, b"x%d" % e) for e in range(span[0], span[1] + 1)])

    def fail(self, span: tuple[int, int], error: Exception) -> None:
        self.pending.pop(span).errback(failure.Failure(error))


def test_batches_are_read_ahead_while_one_is_waited_for():
    spans = Spans()
    reader = RangeReader(spans, 0, 99, batch=10, ahead=2)
    first = reader.next_batch()
    assert spans.asked == [(0, 9), (10, 19), (20, 29)]  # not (30, 39): two ahead
    spans.answer((10, 19))  # out of order: still handed out in order
    assert not first.called
    spans.answer((0, 9))
    assert [e for e, _ in successResultOf(first)] == list(range(10))
    second = reader.next_batch()
    assert spans.asked[-1] == (30, 39) and len(spans.pending) == 2  # 20-29 and 30-39
    assert [e for e, _ in successResultOf(second)] == list(range(10, 20))


def test_every_entry_once_and_then_none():
    spans = Spans()
    reader = RangeReader(spans, 5, 27, batch=10, ahead=1)
    got = []
    while True:
        d = reader.next_batch()
        for span in list(spans.pending):
            spans.answer(span)
        batch = successResultOf(d)
        if batch is None:
            break
        got.extend(e for e, _ in batch)
    assert got == list(range(5, 28))
    assert spans.asked == [(5, 14), (15, 24), (25, 27)]
    assert successResultOf(reader.next_batch()) is None


def test_a_failed_batch_ends_the_stream_and_the_batches_behind_it_are_let_go():
    spans = Spans()
    reader = RangeReader(spans, 0, 49, batch=10, ahead=2)
    d = reader.next_batch()
    spans.fail((0, 9), ValueError("bookies gone"))
    failureResultOf(d, ValueError)
    # the batches read ahead fail too, and nobody is left to be told: no unhandled error
    spans.fail((10, 19), ValueError("bookies gone"))
    spans.fail((20, 29), ValueError("bookies gone"))
    gc.collect()
    assert successResultOf(reader.next_batch()) is None
    assert spans.asked == [(0, 9), (10, 19), (20, 29)]


def test_ahead_must_be_positive():
    with pytest.raises(ValueError):
        RangeReader(Spans(), 0, 9, batch=1, ahead=0)


@pytest.mark.parametrize("window, batch, ahead", [(12, 4, 2), (256, 100, 1), (1000, 100, 9), (8, 100, 1)])
def test_read_range_reads_ahead_as_far_as_the_read_window_allows(window, batch, ahead):
    client, store, pool, lh = filled_ledger(n=10, close=True, read_window=window)
    rh = successResultOf(settled(client.open_ledger(lh.ledger_id)))
    reader = rh.read_range(0, 9, batch=batch)
    assert reader.ahead == ahead

    async def collect():
        return [[e for e, _ in b] async for b in reader]

    entries = successResultOf(settled(defer.ensureDeferred(collect())))
    assert sum(entries, []) == list(range(10))


# -- the blocking facade's hand-off of batches to the iterating thread ------------------------

from bkctl.wire.client.blocking import OperationTimedOut, _BatchHandoff  # noqa: E402


def test_handoff_reads_on_until_two_batches_wait_and_resumes_when_one_is_taken():
    spans = Spans()
    woken = []
    handoff = _BatchHandoff(RangeReader(spans, 0, 49, batch=10, ahead=1), woken.append)
    handoff.pump()
    assert spans.asked == [(0, 9), (10, 19)]
    spans.answer((0, 9))
    spans.answer((10, 19))
    assert handoff.stalled  # two wait, one is read ahead...
    spans.answer((20, 29))
    assert spans.asked == [(0, 9), (10, 19), (20, 29)]  # ...and no more is asked for
    assert [e for e, _ in handoff.take(1)] == list(range(10))
    assert woken == [handoff.resume]  # the taker wakes the reactor side...
    woken.pop()()
    assert spans.asked[-1] == (30, 39)  # ...which reads on
    assert [e for e, _ in handoff.take(1)] == list(range(10, 20))


def test_handoff_ends_with_none_and_passes_a_failure_on():
    spans = Spans()
    handoff = _BatchHandoff(RangeReader(spans, 0, 9, batch=10, ahead=1), lambda f: f())
    handoff.pump()
    spans.answer((0, 9))
    assert len(handoff.take(1)) == 10
    assert handoff.take(1) is None

    spans = Spans()
    handoff = _BatchHandoff(RangeReader(spans, 0, 99, batch=10, ahead=3), lambda f: f())
    handoff.pump()
    spans.fail((0, 9), ValueError("bookies gone"))
    with pytest.raises(ValueError, match="bookies gone"):
        handoff.take(1)
    assert spans.asked == [(0, 9), (10, 19), (20, 29), (30, 39)]  # nothing asked after the failure


def test_handoff_begun_makes_its_reader_and_a_failure_to_make_it_is_the_first_take():
    spans = Spans()
    handoff = _BatchHandoff(None, lambda f: f())
    handoff.pump()  # no reader yet: nothing asked, nothing failed
    handoff.begin(lambda: RangeReader(spans, 0, 19, batch=10, ahead=1))
    assert spans.asked == [(0, 9), (10, 19)]  # made and pumped in the one call
    spans.answer((0, 9))
    spans.answer((10, 19))
    assert len(handoff.take(1)) == 10 and not handoff.ended
    assert len(handoff.take(1)) == 10 and not handoff.ended
    assert handoff.take(1) is None and handoff.ended  # the end taken: nothing left to stop

    def gone() -> RangeReader:
        raise ValueError("ledger 7 is not closed")

    handoff = _BatchHandoff(None, lambda f: f())
    handoff.begin(gone)
    with pytest.raises(ValueError, match="not closed"):
        handoff.take(1)
    assert handoff.ended and handoff.stopped
    handoff.stop()  # (stopping one with no reader is harmless)


def test_handoff_of_batches_already_read_does_not_recurse():
    """Thousands of one-entry batches answered at once: taken one by one, each
    taking resuming the reactor side, with no recursion per batch."""

    def read_span(first, last):
        return defer.succeed([(e, b"") for e in range(first, last + 1)])

    handoff = _BatchHandoff(RangeReader(read_span, 0, 4999, batch=1, ahead=4000), lambda f: f())
    handoff.pump()
    got = []
    while (batch := handoff.take(1)) is not None:
        got.extend(e for e, _ in batch)
    assert got == list(range(5000))


def test_handoff_take_times_out():
    handoff = _BatchHandoff(RangeReader(Spans(), 0, 9, batch=10, ahead=1), lambda f: f())
    handoff.pump()
    with pytest.raises(OperationTimedOut):
        handoff.take(0.01)
