"""Progress over ledgers for the commands that move data (``recover``, ``decommission``,
``rebalance``, ``drain``): a bar with what is left, the rate and the ETA on a terminal,
progress lines or nothing on a pipe."""

from __future__ import annotations

import sys
import threading
from collections import deque
from collections.abc import Callable

from ..app import App, ProgressBar
from ..render import human_size


class Eta:
    """Ledgers and bytes left, the rate over the last ``window`` seconds, and when the
    rest should be done, as one line (:meth:`text`) for a progress bar or a log."""

    def __init__(self, clock: Callable[[], float] | None = None, window: float = 30.0):
        import time

        self.clock = clock or time.monotonic
        self.window = window
        self.start(None, None)

    def start(self, ledgers: int | None, nbytes: int | None) -> None:
        self.ledgers, self.bytes = ledgers, nbytes or 0
        self.done_ledgers = self.done_bytes = 0
        self._samples: deque[tuple[float, int, int]] = deque([(self.clock(), 0, 0)])

    def advance(self, ledgers: int = 1, nbytes: int = 0) -> None:
        self.done_ledgers += ledgers
        self.done_bytes += nbytes
        now = self.clock()
        self._samples.append((now, self.done_ledgers, self.done_bytes))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window:
            self._samples.popleft()

    def rates(self) -> tuple[float, float] | None:
        """(ledgers/s, bytes/s) over the window; None before a second has passed."""
        t0, l0, b0 = self._samples[0]
        elapsed = self.clock() - t0
        if elapsed < 1.0:
            return None
        return (self.done_ledgers - l0) / elapsed, (self.done_bytes - b0) / elapsed

    def seconds_left(self) -> float | None:
        rates = self.rates()
        if rates is None or self.ledgers is None:
            return None
        ledger_rate, byte_rate = rates
        if self.bytes and byte_rate > 0:
            return max(0.0, self.bytes - self.done_bytes) / byte_rate
        if ledger_rate > 0:
            return max(0, self.ledgers - self.done_ledgers) / ledger_rate
        return None

    def text(self) -> str:
        """``1,200 of 25,000 ledgers left, 1.2 MiB of 24.4 MiB; 412 ledgers/s, 405.1 KiB/s; ETA 0:00:03``."""
        if self.ledgers is None:
            return f"{self.done_ledgers:,} ledgers done"
        parts = [f"{max(0, self.ledgers - self.done_ledgers):,} of {self.ledgers:,} ledgers left"]
        if self.bytes:
            parts[0] += f", {human_size(max(0, self.bytes - self.done_bytes))} of {human_size(self.bytes)}"
        rates = self.rates()
        if rates is not None:
            parts.append(f"{rates[0]:,.0f} ledgers/s" + (f", {human_size(int(rates[1]))}/s" if self.bytes else ""))
        left = self.seconds_left()
        parts.append("ETA " + ("--:--:--" if left is None else _clock_time(left)))
        return "; ".join(parts)


def _clock_time(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class LedgerProgress:
    """Progress over ledgers: on a terminal a bar with ledgers and bytes left, the rate
    and the ETA (:class:`Eta`); with ``lines`` (a long wait) progress lines on stderr
    when it is not a terminal, and notes; nothing otherwise."""

    def __init__(self, app: App, label: str, lines: bool = False, clock: Callable[[], float] | None = None):
        self.app = app
        self.label = label
        self.lines = lines
        self.bar: ProgressBar | None = None
        self.eta = Eta(clock)
        #: the ETA line goes on a terminal's bar; progress lines (a pipe) keep their count
        self.on_terminal = not app.quiet and sys.stderr.isatty()
        self._lock = threading.Lock()
        self._shown_at = 0.0

    def start(self, count: int | None, nbytes: int | None = None) -> None:
        with self._lock:
            self.eta.start(count, nbytes)
            if self.bar is None:
                self.bar = self.app.progress(count, self.label, lines=self.lines).__enter__()
            else:
                self.bar.update(total=count, completed=0)
            self._describe(force=True)

    def note(self, text: str) -> None:
        if self.bar is None:
            self.start(None)
        assert self.bar is not None
        self.bar.note(text)

    def ledger(self, nbytes: int = 0) -> None:
        """A ledger done, with its ``nbytes`` (0: they were heard as copied, :meth:`copied`)."""
        with self._lock:
            self.eta.advance(1, nbytes)
            if self.bar is not None:
                self.bar.advance(1)
                self._describe()

    def entry(self, _entry_id: int) -> None:
        pass

    def copied(self, nbytes: int) -> None:
        """Bytes copied within a ledger not done yet: the ETA moves with them (the ledger's
        own :meth:`ledger` then counts none)."""
        with self._lock:
            self.eta.advance(0, nbytes)
            self._describe()

    def _describe(self, force: bool = False) -> None:
        now = self.eta.clock()
        if self.bar is not None and self.on_terminal and (force or now - self._shown_at >= 0.5):
            self._shown_at = now
            self.bar.update(description=f"{self.label}: {self.eta.text()}")

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None
