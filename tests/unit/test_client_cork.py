"""The cork (wire/client/cork.py): frames held during a burst go out once per
connection at its end, after the work put off until then; outside a burst
nothing is held or put off."""
import logging

from bkctl.wire.client.cork import CORK, finish_at_release, hold_writes, release_writes


class Conn:
    def __init__(self, log):
        self.log = log

    def write_held(self):
        self.log.append("write")


class Finisher:
    def __init__(self, log, conn=None, fail=False):
        self.log, self.conn, self.fail = log, conn, fail

    def burst_ended(self):
        self.log.append("finish")
        if self.conn is not None:
            CORK.holders.append(self.conn)  # what it writes is held with the rest
        if self.fail:
            raise RuntimeError("finisher bug")


def test_outside_a_burst_nothing_is_put_off():
    log = []
    assert CORK.holders is None
    assert finish_at_release(Finisher(log)) is False and log == [] and CORK.finishers == []


def test_the_finishers_run_before_the_held_frames_go_out_and_a_failing_one_stops_nothing(caplog):
    log = []
    assert hold_writes()
    assert hold_writes() is False  # nested: the outer burst releases
    CORK.holders.append(Conn(log))
    assert finish_at_release(Finisher(log, fail=True))
    assert finish_at_release(Finisher(log, conn=Conn(log)))
    with caplog.at_level(logging.ERROR):
        release_writes()
    assert log == ["finish", "finish", "write", "write"]
    assert "the end of a burst failed" in caplog.text
    assert CORK.holders is None and CORK.finishers == []


def test_a_finisher_may_put_more_off_to_the_same_end():
    log = []

    class Again(Finisher):
        def burst_ended(self):
            super().burst_ended()
            if len(log) == 1:
                assert finish_at_release(self)

    assert hold_writes()
    finish_at_release(Again(log))
    release_writes()
    assert log == ["finish", "finish"]
