"""Progress as lines for a long wait nobody watches on a terminal (cron, a pipe): said at
the start, on a change at most every few seconds, at the end, and notes at once."""

from __future__ import annotations

from bkctl.app import _Lines


def test_lines_say_changes_at_most_every_interval_and_the_end(capsys):
    now = [0.0]
    with _Lines(20, "decommissioning b:3181", every=10.0, clock=lambda: now[0]) as bar:
        bar.advance(1)  # within the interval: kept for later
        now[0] = 11.0
        bar.advance(1)
        bar.note("audit triggered")
        bar.update(description="decommissioning b:3181 (100 entries copied)")  # within it again
        now[0] = 30.0
        bar.update(completed=5)
    assert capsys.readouterr().err.splitlines() == [
        "decommissioning b:3181: 0/20",
        "decommissioning b:3181: 2/20",
        "audit triggered",
        "decommissioning b:3181 (100 entries copied): 5/20",
    ]


def test_nothing_repeats_and_without_a_total_the_description_is_the_line(capsys):
    with _Lines(None, "gc of b:3181: triggered", clock=lambda: 0.0) as bar:
        bar.update(description="gc of b:3181: major compaction")
    with _Lines(None, "copying", clock=lambda: 0.0) as bar:
        bar.advance(3)
    assert capsys.readouterr().err.splitlines() == [
        "gc of b:3181: triggered",
        "gc of b:3181: major compaction",
        "copying",
        "copying: 3",
    ]
