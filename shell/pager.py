"""Long command output through a pager, short output straight to the terminal.

While a command runs, :class:`PagedOutput` stands in for ``sys.stdout``.
It holds the output back until it knows which case it is:

* more lines than the screen has: start the pager (``$PAGER``, default
  ``less -FRX``) and feed it everything, held back and still to come;
* the command ends first: print what was held back;
* output trickles (nothing new for :data:`HOLD_SECONDS`, as with a ``tail``
  that follows a ledger): print it as it comes and stop holding back.

When the pager is quit before the command has finished writing, the next
write raises :class:`PagerQuit`, which ends the command quietly.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import threading
from typing import IO

DEFAULT_PAGER = "less -FRX"
#: Output that has not filled the screen after this long is shown unpaged.
HOLD_SECONDS = 0.5


class PagerQuit(BaseException):
    """The pager was quit while the command was still writing.

    A BaseException so that neither the command nor :func:`bkctl.cli.run`
    reports it as an error (and rich does not mistake it for a broken pipe).
    """


def pager_command() -> str:
    return os.environ.get("PAGER", "").strip() or DEFAULT_PAGER


class PagedOutput(io.TextIOBase):
    """A text stream for one command's stdout; call :meth:`finish` when it is done."""

    def __init__(
        self,
        real,
        command: str | None = None,
        lines: int | None = None,
        columns: int | None = None,
        hold: float = HOLD_SECONDS,
    ):
        super().__init__()
        size = shutil.get_terminal_size()
        self.real = real
        self.command = command or pager_command()
        self.limit = max((lines or size.lines) - 1, 1)  # keep a line for the next prompt
        self.columns = max(columns or size.columns, 1)
        self.hold = hold
        self._held: list[str] = []
        self._rows = 0
        self._mode = "hold"  # -> "direct" | "pager" | "quit"
        self._proc: subprocess.Popen | None = None
        self._lock = threading.RLock()
        self._timer: threading.Timer | None = None

    # -- the stream interface ------------------------------------------------
    # TextIOBase declares encoding and errors as attributes; the pager's are the real stream's
    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.real, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str:  # type: ignore[override]
        return getattr(self.real, "errors", None) or "strict"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.real.isatty()

    def write(self, text) -> int:
        if not isinstance(text, str):  # click probes with b"" to find binary streams
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        with self._lock:
            mode = self._mode
            if mode == "direct":
                self.real.write(text)
            elif mode == "pager":
                self._feed(text)
            elif mode == "hold":
                self._held.append(text)
                self._rows += self._count_rows(text)
                if self._rows > self.limit:
                    self._start_pager()
                elif self._timer is None:
                    self._timer = threading.Timer(self.hold, self._release)
                    self._timer.daemon = True
                    self._timer.start()
            # "quit": the reader is gone, drop it
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._mode == "direct":
                self.real.flush()
            elif self._mode == "pager":
                try:
                    self._pipe().flush()
                except (BrokenPipeError, ValueError):
                    self._quit()

    # -- the end ---------------------------------------------------------------
    def finish(self) -> None:
        """Show what is held back, or wait until the pager is quit."""
        self._cancel_timer()
        with self._lock:
            mode, self._mode = self._mode, "quit"
            if mode == "hold":
                self.real.write("".join(self._held))
                self._held = []
            if mode in ("hold", "direct"):
                try:
                    self.real.flush()
                except OSError:
                    pass
                return
            proc = self._proc
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass
        while True:  # Ctrl-C belongs to the pager now (less just stops what it is doing)
            try:
                proc.wait()
                return
            except KeyboardInterrupt:
                continue

    @property
    def paged(self) -> bool:
        """Whether a pager was started."""
        return self._proc is not None

    # -- internals -------------------------------------------------------------
    def _count_rows(self, text: str) -> int:
        lines = text.split("\n")
        rows = len(lines) - 1
        for line in lines:
            rows += len(line) // self.columns  # wrapped lines (escape codes over-count: fine)
        return rows

    def _cancel_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _release(self) -> None:
        """Timer thread: the output trickles, so show it as it comes."""
        with self._lock:
            if self._mode != "hold":
                return
            self._mode = "direct"
            self.real.write("".join(self._held))
            self._held = []
            try:
                self.real.flush()
            except OSError:
                pass

    def _start_pager(self) -> None:
        self._cancel_timer()
        env = dict(os.environ)
        env.setdefault("LESS", "FRX")  # for PAGER=less: raw colors, no screen clearing
        try:
            self._proc = subprocess.Popen(
                self.command, shell=True, stdin=subprocess.PIPE, env=env, encoding=self.encoding, errors="replace"
            )
        except OSError:
            self._mode = "direct"
            self.real.write("".join(self._held))
            self._held = []
            return
        self._mode = "pager"
        held, self._held = "".join(self._held), []
        self._feed(held)

    def _feed(self, text: str) -> None:
        try:
            self._pipe().write(text)
        except (BrokenPipeError, ValueError):
            self._quit()

    def _pipe(self) -> IO[str]:
        """The pager's input; ValueError (what a closed one raises) when there is none."""
        stdin = self._proc.stdin if self._proc is not None else None
        if stdin is None:
            raise ValueError("no pager")
        return stdin

    def _quit(self) -> None:
        self._mode = "quit"
        raise PagerQuit()
