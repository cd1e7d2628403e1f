"""A walk's progress (bkctl.app): nothing for a quick walk, a bar with an ETA once the
walk has taken two seconds on a terminal, nothing at all on a pipe."""

from __future__ import annotations

import io

from rich.console import Console

from bkctl.app import _DelayedProgress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_bar_shows_only_once_the_walk_has_taken_the_delay_and_then_counts_everything():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    clock = Clock()
    progress = _DelayedProgress(console, "reading ledger metadata", 2.0, clock=clock)
    with progress:
        progress.update(total=5000)
        progress.advance(1000)
        clock.now += 1.9
        progress.advance(1000)
        assert progress.shown is False
        clock.now += 0.2
        progress.advance(1000)
        assert progress.shown is True
        assert progress.completed == 3000 and progress.total == 5000
        progress.advance(2000)
        assert progress.completed == 5000
    assert "reading ledger metadata" in out.getvalue() and "ETA" in out.getvalue()


def test_a_quick_walk_leaves_nothing_on_the_terminal():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    clock = Clock()
    with _DelayedProgress(console, "reading ledger metadata", 2.0, clock=clock) as progress:
        progress.update(total=10)
        progress.advance(10)
    assert out.getvalue() == ""
