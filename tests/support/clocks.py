"""A manual clock for code that takes a monotonic source and a sleeper (``bookied.journal.Journal``).

Time moves only when the test calls :meth:`ManualClock.advance`; a thread
that sleeps on it (``wait_on(condition, seconds)``) wakes when a record
arrives (the condition is notified) or when the clock is advanced, and then
reads the time again.  :meth:`ManualClock.wait_for_sleepers` tells the test
that the other thread has reached its sleep, so what it asserts next cannot
race with it.  (Twisted code uses ``twisted.internet.task.Clock`` instead.)
"""

from __future__ import annotations

import threading

#: Real seconds a sleeper waits for a notification before it looks again (a hang
#: guard; it only re-reads the manual time, which has not moved).
_GUARD = 60.0


class ManualClock:
    def __init__(self, start: float = 1000.0):
        self.now = start
        self._lock = threading.Condition()
        self._conditions: set[threading.Condition] = set()
        #: How many times a thread went to sleep on this clock.
        self.sleeps = 0

    def monotonic(self) -> float:
        return self.now

    def wait_on(self, condition: threading.Condition, seconds: float) -> None:
        """Sleep (``condition`` held) until notified or the clock is advanced."""
        with self._lock:
            self._conditions.add(condition)
            self.sleeps += 1
            self._lock.notify_all()
        condition.wait(_GUARD)

    def wait_for_sleepers(self, count: int, timeout: float = 30.0) -> None:
        """Until threads went to sleep on this clock ``count`` times in all."""
        with self._lock:
            assert self._lock.wait_for(lambda: self.sleeps >= count, timeout), (
                f"{self.sleeps} sleeps on the clock, expected {count}"
            )

    def advance(self, seconds: float) -> None:
        """Move time on and wake every sleeper, which then reads the new time."""
        with self._lock:
            self.now += seconds
            conditions = list(self._conditions)
        for condition in conditions:
            with condition:
                condition.notify_all()
