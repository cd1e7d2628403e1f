"""Patient journal records (a bookie's recovery adds): a group of them alone waits for company up
to ``patient_wait_ms``; the first record that is not patient ends the wait, in the writer thread
and in the inline mode alike."""

import pytest

from bkctl.bookied.journal import EntryRecord, Journal
from bkctl.wire import fastpath
from tests.support.clocks import ManualClock
from tests.unit.test_journal import Acks


def tags(acks, n):
    return [tag for tag, error in acks.wait(n) if error is None]


def rec(i):
    return EntryRecord(1, i, b"x" * 100)


@pytest.mark.parametrize("group_wait_ms", [0, 2])
def test_writer_thread_holds_patient_groups_until_an_ordinary_record(tmp_path, group_wait_ms):
    clock = ManualClock()
    acks = Acks()
    with Journal(
        str(tmp_path),
        max_group_wait_ms=group_wait_ms,
        patient_wait_ms=10,
        monotonic=clock.monotonic,
        wait_on=clock.wait_on,
        twins=fastpath.selected(),
    ) as j:
        j.start()
        j.append(rec(0), acks.cb(0), patient=True)
        clock.wait_for_sleepers(1)
        j.append_entries(1, [1, 2], [b"a", b"b"], acks.cb(1), patient=True)  # joins, wakes no one
        clock.advance(0.009)
        clock.wait_for_sleepers(2)
        assert acks.results == []  # past the ordinary group wait, within the patient one
        clock.advance(0.001)  # 10 ms after the oldest: written, one group
        assert tags(acks, 2) == [0, 1]
        assert j.stats.groups == 1 and j.stats.records == 3

        slept = clock.sleeps
        j.append(rec(3), acks.cb(3), patient=True)
        clock.wait_for_sleepers(slept + 1)
        j.append(rec(4), acks.cb(4))  # an ordinary add: no longer than the ordinary group wait
        if group_wait_ms:
            clock.wait_for_sleepers(slept + 2)
            assert len(acks.results) == 2
            clock.advance(group_wait_ms / 1000)
        assert tags(acks, 4) == [0, 1, 3, 4]
        assert j.stats.groups == 2

        slept = clock.sleeps
        j.append(rec(5), acks.cb(5), patient=True)
        clock.wait_for_sleepers(slept + 1)
        j.force(acks.cb("force"))  # so does a FORCE_LEDGER
        if group_wait_ms:
            clock.wait_for_sleepers(slept + 2)
            clock.advance(group_wait_ms / 1000)
        assert tags(acks, 6)[-2:] == [5, "force"]


def test_inline_commits_of_patient_groups_are_scheduled_later(tmp_path):
    clock = ManualClock()
    acks = Acks()
    soon, later = [], []
    j = Journal(
        str(tmp_path),
        max_group_wait_ms=0,
        patient_wait_ms=4,
        twins=fastpath.build(True),
        inline=soon.append,
        inline_later=lambda seconds, fn: later.append((seconds, fn)),
        monotonic=clock.monotonic,
        wait_on=clock.wait_on,
    )
    j.start()
    j.append(rec(0), acks.cb(0), patient=True)
    j.append_entries(1, [1, 2], [b"a", b"b"], acks.cb(1), patient=True)
    assert soon == [] and [s for s, _fn in later] == [0.004]  # one timer for the group
    later.pop()[1]()  # its wait is over: committed here (in this thread), one group
    assert acks.results == [(0, None), (1, None)] and j.stats.groups == 1

    j.append(rec(3), acks.cb(3), patient=True)
    assert len(later) == 1 and soon == []
    j.append(rec(4), acks.cb(4))  # an ordinary add: committed at the end of this turn, with the copy
    assert len(soon) == 1 and len(later) == 1
    soon.pop()()
    assert [t for t, _e in acks.results] == [0, 1, 3, 4] and j.stats.groups == 2
    j.append(rec(5), acks.cb(5), patient=True)
    assert later and soon == []  # the pending timer covers it: no second one
    later.pop()[1]()
    assert acks.results[-1] == (5, None) and j.stats.groups == 3
    j.close()
    assert [r.entry_id for r in Journal(str(tmp_path), twins=fastpath.selected()).replay()] == [0, 1, 2, 3, 4, 5]


def test_without_a_patient_wait_nothing_waits(tmp_path):
    soon, later = [], []
    j = Journal(
        str(tmp_path),
        max_group_wait_ms=0,
        twins=fastpath.build(True),
        inline=soon.append,
        inline_later=lambda seconds, fn: later.append(fn),
    )
    j.start()
    acks = Acks()
    j.append(rec(0), acks.cb(0), patient=True)
    assert len(soon) == 1 and later == []
    soon.pop()()
    assert acks.results == [(0, None)]
    j.close()
