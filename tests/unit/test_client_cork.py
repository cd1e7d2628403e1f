"""The cork (wire/client/cork.py): frames held during a burst go out once per
connection at its end, after the work put off until then; outside a burst
nothing is held or put off; one client's cork holds nothing of another's."""

import logging

from twisted.internet.testing import MemoryReactorClock

from bkctl.wire import fastpath
from bkctl.wire.client.cork import Cork, Writer
from bkctl.wire.client.pool import BookiePool


class Sink:
    """A protocol's three ways of writing frames, logged."""

    def __init__(self, log, name="sink"):
        self.log, self.name = log, name

    def send(self, frames):
        self.log.append((self.name, "send", list(frames)))

    def send_one(self, data):
        self.log.append((self.name, "send_one", data))

    def send_burst(self, frames):
        self.log.append((self.name, "burst", list(frames)))


class Finisher:
    def __init__(self, log, writer=None, sink=None, fail=False):
        self.log, self.writer, self.sink, self.fail = log, writer, sink, fail

    def burst_ended(self):
        self.log.append("finish")
        if self.writer is not None:
            self.writer.write(self.sink, b"late")  # what it writes is held with the rest
        if self.fail:
            raise RuntimeError("finisher bug")


def test_outside_a_burst_writes_go_at_once_and_nothing_is_put_off():
    log = []
    cork = Cork()
    writer = Writer(cork)
    writer.write(Sink(log), b"a")
    writer.write_frames(Sink(log), [b"b", b"c"])
    assert cork.finish_at_release(Finisher(log)) is False
    assert log == [("sink", "send_one", b"a"), ("sink", "send", [b"b", b"c"])]


def test_the_finishers_run_before_the_held_frames_go_out_and_a_failing_one_stops_nothing(caplog):
    log = []
    cork = Cork()
    one, two = Writer(cork), Writer(cork)
    sink1, sink2 = Sink(log, "one"), Sink(log, "two")
    assert cork.hold()
    assert cork.hold() is False  # nested: the outer burst releases
    one.write(sink1, b"a")
    one.write_frames(sink1, [b"b", b"c"])
    assert cork.finish_at_release(Finisher(log, fail=True))
    assert cork.finish_at_release(Finisher(log, two, sink2))
    assert log == []
    with caplog.at_level(logging.ERROR):
        cork.release()
    assert log == ["finish", "finish", ("one", "burst", [b"a", b"b", b"c"]), ("two", "burst", [b"late"])]
    assert "the end of a burst failed" in caplog.text
    assert cork.holders is None and cork.finish_at_release(Finisher(log)) is False


def test_a_finisher_may_put_more_off_to_the_same_end():
    log = []
    cork = Cork()

    class Again(Finisher):
        def burst_ended(self):
            super().burst_ended()
            if len(log) == 1:
                assert cork.finish_at_release(self)

    assert cork.hold()
    cork.finish_at_release(Again(log))
    cork.release()
    assert log == ["finish", "finish"]


def test_a_dropped_connections_held_frames_are_not_sent():
    """A connection lost during a burst: its requests failed, their frames are
    forgotten, and what it writes afterwards (a new connection) goes out alone."""
    log = []
    cork = Cork()
    writer = Writer(cork)
    assert cork.hold()
    writer.write(Sink(log, "old"), b"a")
    writer.drop()
    writer.write(Sink(log, "new"), b"b")
    cork.release()
    assert log == [("new", "burst", [b"b"])]


def test_two_clients_corks_hold_nothing_for_each_other():
    """Each pool has its own cork, shared by its connections: a burst on one
    client (another reactor, another test) leaves the other's writes alone."""
    first = BookiePool(MemoryReactorClock(), twins=fastpath.selected())
    second = BookiePool(MemoryReactorClock(), twins=fastpath.selected())
    assert first.cork is not second.cork
    assert first.get("127.0.0.1:3181").writer.cork is first.cork
    assert first.get("127.0.0.1:3182").writer.cork is first.cork
    log = []
    assert first.cork.hold()
    second.get("127.0.0.1:3181").writer.write(Sink(log), b"x")
    assert log == [("sink", "send_one", b"x")]
    first.get("127.0.0.1:3181").writer.write(Sink(log, "held"), b"y")
    assert log == [("sink", "send_one", b"x")]
    first.cork.release()
    assert log[-1] == ("held", "burst", [b"y"])
