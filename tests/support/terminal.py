"""A real pseudo-terminal for testing ``bkctl shell`` and completions (pexpect).

The terminal's output is read as plain text (escape sequences dropped) and
put on a small VT100 :class:`Screen`, answering cursor position requests as
a terminal would, so that prompt-toolkit draws its toolbar and menus.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pexpect

from tests.support.cli import REPO

_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][0-9A-Za-z]|\x1b[=>78DEHM]|[\x08\x07]")
_CSI = re.compile(r"\x1b\[([0-?]*)[ -/]*([@-~])")
_OTHER_ESCAPE = re.compile(r"\x1b(?:\][^\x07]*\x07|[()][0-9A-Za-z]|[=>78DEHMc])")


def plain(text: str) -> str:
    """Terminal output without escape sequences and carriage returns."""
    return _ESCAPES.sub("", text).replace("\r", "")


class Screen:
    """Just enough of a VT100 to see what prompt-toolkit draws.

    prompt-toolkit redraws by difference (it moves the cursor over what did
    not change), so the byte stream does not contain the toolbar or the
    completion menu as text: they have to be put on a screen.
    """

    def __init__(self, rows: int, cols: int):
        self.rows, self.cols = rows, cols
        self.cells = [[" "] * cols for _ in range(rows)]
        self.y = self.x = 0
        self.autowrap = True
        self._pending = ""

    def feed(self, data: str) -> list[str]:
        """Apply ``data``; returns the replies the terminal owes (cursor position reports)."""
        data, self._pending = self._pending + data, ""
        replies, i = [], 0
        while i < len(data):
            c = data[i]
            if c == "\x1b":
                m = _CSI.match(data, i) or _OTHER_ESCAPE.match(data, i)
                if m is None:
                    if len(data) - i < 32:  # cut in the middle: finish with the next read
                        self._pending = data[i:]
                        break
                    i += 1
                    continue
                if m.re is _CSI:
                    reply = self._csi(m.group(1), m.group(2))
                    if reply:
                        replies.append(reply)
                i = m.end()
                continue
            if c == "\r":
                self.x = 0
            elif c == "\n":
                self._line_feed()
            elif c == "\b":
                self.x = max(self.x - 1, 0)
            elif c >= " ":
                if self.x >= self.cols:
                    if not self.autowrap:
                        self.x = self.cols - 1
                    else:
                        self.x = 0
                        self._line_feed()
                self.cells[self.y][self.x] = c
                self.x += 1
            i += 1
        return replies

    def _line_feed(self) -> None:
        if self.y == self.rows - 1:
            self.cells.pop(0)
            self.cells.append([" "] * self.cols)
        else:
            self.y += 1

    def _csi(self, params: str, final: str) -> str | None:
        private = params.startswith("?")
        numbers = [int(p) if p.isdigit() else 0 for p in params.lstrip("?").split(";")] if params else []
        n = numbers[0] if numbers and numbers[0] else 1
        if private:
            if 7 in numbers and final in "hl":
                self.autowrap = final == "h"
            return None
        if final == "A":
            self.y = max(self.y - n, 0)
        elif final == "B":
            self.y = min(self.y + n, self.rows - 1)
        elif final == "C":
            self.x = min(self.x + n, self.cols - 1)
        elif final == "D":
            self.x = max(min(self.x, self.cols - 1) - n, 0)
        elif final == "G":
            self.x = min(n - 1, self.cols - 1)
        elif final in "Hf":
            row = numbers[0] if numbers and numbers[0] else 1
            col = numbers[1] if len(numbers) > 1 and numbers[1] else 1
            self.y, self.x = min(row, self.rows) - 1, min(col, self.cols) - 1
        elif final == "J":
            mode = numbers[0] if numbers else 0
            rows = range(self.rows) if mode == 2 else range(self.y + 1, self.rows) if mode == 0 else range(self.y)
            for r in rows:
                self.cells[r] = [" "] * self.cols
            if mode in (0, 1):
                self._erase_line(mode)
        elif final == "K":
            self._erase_line(numbers[0] if numbers else 0)
        elif final == "n" and numbers == [6]:
            return f"\x1b[{self.y + 1};{min(self.x, self.cols - 1) + 1}R"
        return None

    def _erase_line(self, mode: int) -> None:
        row = self.cells[self.y]
        x = min(self.x, self.cols)
        if mode == 0:
            row[x:] = [" "] * (self.cols - x)
        elif mode == 1:
            row[: x + 1] = [" "] * (x + 1)
        else:
            self.cells[self.y] = [" "] * self.cols

    def display(self) -> str:
        return "\n".join("".join(row).rstrip() for row in self.cells)


class Terminal:
    """A program running in a real pseudo-terminal.

    :meth:`expect` reads the output as a stream (what commands print);
    :meth:`expect_screen` looks at the screen (what prompt-toolkit draws).
    Wait with :meth:`settle`, never ``time.sleep``: output is only read, and
    cursor position requests only answered, while the terminal is pumped
    (prompt-toolkit waits for those answers, in raw mode, before it hands
    the terminal to a command: a Ctrl-C sent meanwhile would be a keystroke).
    """

    def __init__(self, argv: list[str], env: dict[str, str], rows: int = 40, cols: int = 160):
        self.child = pexpect.spawn(
            argv[0], argv[1:], env=env, dimensions=(rows, cols), encoding="utf-8", codec_errors="replace", timeout=30
        )
        self.screen = Screen(rows, cols)
        self.raw = ""
        self.mark = 0  # position in plain(self.raw) where the next expect starts looking

    def pump(self, timeout: float = 0.05) -> None:
        try:
            data = self.child.read_nonblocking(65536, timeout=timeout)
        except (pexpect.TIMEOUT, pexpect.EOF):
            return
        self.raw += data
        for reply in self.screen.feed(data):
            self.child.send(reply)

    @property
    def text(self) -> str:
        return plain(self.raw)

    def _wait(self, find, what: str, show, timeout: float):
        deadline = time.monotonic() + timeout
        while True:
            found = find()
            if found:
                return found
            if time.monotonic() > deadline or not self.child.isalive():
                self.pump(0.2)
                found = find()
                if found:
                    return found
                state = "still running" if self.child.isalive() else f"exited ({self.child.exitstatus})"
                raise AssertionError(f"{what} did not appear ({state}); the terminal shows:\n{show()}")
            self.pump()

    def wait_until(self, predicate, what: str, timeout: float = 60.0):
        """Pump the terminal until ``predicate()`` is true (something outside it, such as a
        connection the program makes, or a change on the screen) and return that; ``timeout`` is
        a hang guard."""
        return self._wait(predicate, what, self.screen.display, timeout)

    def expect(self, pattern: str, timeout: float = 60.0) -> re.Match:
        """Wait for ``pattern`` in the output that came after the last match."""
        rx = re.compile(pattern)

        def find():
            m = rx.search(self.text, self.mark)
            if m:
                self.mark = m.end()
            return m

        return self._wait(find, repr(pattern), lambda: self.text[self.mark :][-3000:], timeout)

    def expect_screen(self, pattern: str, timeout: float = 60.0) -> re.Match:
        """Wait for ``pattern`` on the screen as it is drawn now."""
        rx = re.compile(pattern)
        return self._wait(
            lambda: rx.search(self.screen.display()), f"{pattern!r} on the screen", self.screen.display, timeout
        )

    def settle(self, seconds: float) -> str:
        """Read for ``seconds``; the screen then."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.pump(0.05)
        return self.screen.display()

    def send(self, keys: str) -> None:
        self.child.send(keys)

    def line(self, text: str) -> None:
        """Type a line and press Enter."""
        self.child.send(text)
        self.settle(0.05)
        self.child.send("\r")

    def close(self) -> None:
        """Kill the process if it still runs; one that has reached its EOF is given time to exit
        first (:func:`ended`), so that a test can read how it ended."""
        if self.child.eof() and self.child.isalive():
            try:
                ended(self.child)
            except AssertionError:
                pass
        if self.child.isalive():
            self.child.terminate(force=True)


def bkctl_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment with its own HOME, config and history, running this source tree."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BKCTL_", "XDG_", "_BKCTL"))}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local/share"),
        TERM="xterm",
        PAGER="cat",
        LANG="C.UTF-8",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    )
    env.pop("NO_COLOR", None)
    env.update(extra)
    return env


def complete(term: Terminal, typed: str, want: str, tries: int = 6) -> str:
    """Type ``typed``, press Tab until ``want`` (a regex) is on the screen; the screen then."""
    term.send(typed)
    for _ in range(tries):
        term.send("\t")
        seen = term.settle(0.7)
        if re.search(want, seen):
            return seen
    raise AssertionError(f"Tab after {typed!r} did not offer {want!r}; the terminal shows:\n{seen[-2000:]}")


def ended(child: pexpect.spawn, timeout: float = 30.0) -> pexpect.spawn:
    """``child`` once its process has exited (after its EOF), closed: its ``exitstatus`` or
    ``signalstatus`` then say how it ended.

    ``child.close()`` alone gives a process a tenth of a second past its EOF before it kills it
    (and reports no exit status): on a loaded machine an interpreter still finishing -- its
    threads joined, its reactor stopped -- is killed there, and a test of its exit code fails
    for the machine's load."""
    from tests.support.waiting import wait_for

    wait_for(lambda: not child.isalive(), timeout=timeout, what=f"pid {child.pid} to exit")
    child.close()
    return child
