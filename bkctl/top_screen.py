"""``bkctl top``'s live view: a full screen drawn with rich's ``Live``, keys read from the terminal.

Why rich's ``Live`` and not Textual: rich is already bkctl's output library
(no new dependency, nothing to install for ``top``), ``Live`` in screen
mode draws on the alternate screen and rewrites it in place (no clearing,
no flicker), re-reads the terminal's size at each draw (a resize is one
redraw away: SIGWINCH wakes the loop), and leaves the alternate screen on
exit; what it lacks -- keys -- is a few lines of ``termios`` here: the
terminal's modes are saved first and put back on every way out (``q``,
Ctrl-C, SIGTERM, an error).  One refresh is one snapshot (a thread of its
own, :class:`~bkctl.ops.top.TopCollector`) and one draw, so the view costs
what its HTTP and ZooKeeper reads cost, nothing while it waits.

:func:`render` turns a snapshot and the view's state into one renderable,
so ``--once`` prints the same frame the live view draws.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Literal

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .ops.top import SORTS, TopRow, TopSnapshot, TopState, ZooKeeperState, filter_rows, repairs_of, sort_rows
from .render import human_size

KEYS = [
    ("q, Ctrl-C", "quit"),
    ("?, h", "this help (any key closes it)"),
    ("s / S", "next sort key / reverse the order"),
    ("/", "filter by bookie, state or rack (Enter: apply, Esc: clear)"),
    ("up, down, j, k", "select a bookie"),
    ("Enter, d", "details of the selected bookie"),
    ("Esc, Backspace", "back to the list"),
    ("r", "refresh now"),
]
_SORT_NAMES = list(SORTS)


@dataclass
class ViewState:
    sort: str = "bookie"
    reverse: bool = False
    filter: str = ""
    editing: str | None = None  # the filter being typed
    selected: int = 0
    detail: str | None = None  # the bookie drilled into
    help: bool = False
    interval: float = 1.0
    title: str = ""
    error: str | None = None  # the last snapshot's failure
    rows: list[TopRow] = field(default_factory=list)


def _num(value, fmt: str = "{:.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def _ms(value) -> str:
    """A latency in milliseconds, every one in the same format (one decimal)."""
    if value is None:
        return "-"
    return "inf" if value == float("inf") else f"{value:.1f}"


def _yes_no(value) -> str:
    return "-" if value is None else "yes" if value else "no"


_STATE_STYLE = {"writable": "green", "read-only": "yellow", "down": "red", "lost": "bold red", "unreachable": "magenta"}


def _note(row: TopRow) -> str:
    if row.state in (TopState.DOWN, TopState.LOST):
        return "not registered"
    if row.state is TopState.UNREACHABLE:
        return "HTTP admin not answering"
    notes = []
    if row.read_only_reason:
        notes.append(f"read-only: {row.read_only_reason}")
    if row.metrics is None:
        notes.append("no metrics")
    if row.kind == "java" and row.disk.entry_logs is None:
        notes.append("no entry-log figures (Java)")
    return ", ".join(notes)


def _gc_text(row: TopRow) -> str:
    gc = row.gc
    if gc.compacting:
        return f"{gc.compacting} compacting"
    if gc.gc_running:
        return "GC running"
    last = gc.last_compaction
    if last and last.get("reclaimedBytes"):
        return f"last {last.get('kind', '')} freed {human_size(last['reclaimedBytes'])}"
    return "idle" if gc.gc_running is not None else "-"


def _clock(epoch_ms: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(epoch_ms / 1000))


def late_after(interval: float) -> float:
    """Seconds after which a frame's figures are late (drawn red): a few refreshes missed."""
    return 3 * interval + 2.0


def zookeeper_line(snapshot: TopSnapshot, now_ms: float) -> Text:
    """ZooKeeper's own row: ok, or unreachable since when, and how old what it told us is."""
    zk = snapshot.zookeeper
    if zk.state is ZooKeeperState.OK or zk.since is None:
        latency = zk.latency_ms
        return Text("zookeeper ok" + (f", answered in {latency:.0f} ms" if latency is not None else ""))
    since = zk.since
    text = Text(
        f"ZooKeeper unreachable since {_clock(since)} ({max(0, now_ms - since) / 1000:.0f} s): {zk.error}",
        style="bold red",
    )
    read_at = zk.read_at
    text.append(
        "; registrations as of "
        + (f"{_clock(read_at)} ({max(0, now_ms - read_at) / 1000:.0f} s old)" if read_at else "never (no bookie known)")
        + ", autorecovery with them; the bookies' HTTP figures as of "
        + f"{_clock(snapshot.time)} ({max(0, now_ms - snapshot.time) / 1000:.0f} s old)",
        style="red",
    )
    return text


def header(snapshot: TopSnapshot | None, state: ViewState, now_ms: float | None = None) -> Text:
    """``now_ms``: the time the frame is drawn (the live view: now, so the figures' age shows)."""
    text = Text()
    text.append(f"bkctl top  {state.title}", style="bold")
    if snapshot is None:
        text.append("  reading the cluster...")
        return text
    c = snapshot.cluster
    if now_ms is None:
        text.append(f"  {_clock(snapshot.time)}  every {state.interval:g}s\n")
        now_ms = snapshot.time
    else:
        age = max(0.0, (now_ms - snapshot.time) / 1000)
        text.append(f"  {_clock(now_ms)}  every {state.interval:g}s  ")
        text.append(
            f"bookies read {_clock(snapshot.time)} ({age:.0f} s ago)",
            style="bold red" if age > late_after(state.interval) else "dim",
        )
        text.append("\n")
    text.append_text(zookeeper_line(snapshot, now_ms))
    text.append("\n")
    text.append(f"bookies {c.bookies}: {c.writable} writable, {c.read_only} read-only")
    for trouble in (TopState.UNREACHABLE, TopState.DOWN, TopState.LOST):
        if c.count(trouble):
            text.append(f", {c.count(trouble)} {trouble.value}", style=_STATE_STYLE[trouble.value])
    report = snapshot.autorecovery
    if report is None:
        text.append(f"\nautorecovery: not read ({snapshot.autorecovery_error})", style="red")
    else:
        states: dict[str, int] = {}
        for r in report.ledgers:
            key = r.repair.state.value
            states[key] = states.get(key, 0) + 1
        text.append(
            f"\nautorecovery {'enabled' if report.enabled else 'disabled'}, auditor "
            f"{report.auditor or 'none'}; waits for: {report.auditor_waits_for}"
        )
        text.append(
            f"\nunder-replicated {report.underreplicated}", style="bold yellow" if report.underreplicated else ""
        )
        if states:
            text.append(" (" + ", ".join(f"{n} {s}" for s, n in sorted(states.items())) + ")")
        # the rows' word: a bookie with a cookie that no ledger names is "down" in the list, not lost
        lost = [r.bookie_id for r in snapshot.bookies if r.state is TopState.LOST]
        if lost:
            text.append(f"; lost: {', '.join(lost)}", style="red")
    if state.error:
        text.append(f"\nlast refresh failed: {state.error}", style="red")
    return text


#: the list's columns: (header, justify), in order; and the order they go in when the terminal is narrow
COLUMNS: list[tuple[str, Literal["left", "right"]]] = [
    ("bookie", "left"),
    ("state", "left"),
    ("rack", "left"),
    ("add/s", "right"),
    ("add p50/p99 ms", "right"),
    ("read/s", "right"),
    ("read p99", "right"),
    ("jsync p99", "right"),
    ("disk", "right"),
    ("reclaimable", "right"),
    ("gc", "left"),
    ("notes", "left"),
]
DROP_FIRST = ["notes", "gc", "rack", "jsync p99", "read p99", "reclaimable", "read/s"]
#: the column each sort key sorts by: never left out (a list sorted by a column it hides reads as unsorted)
SORT_COLUMN = {
    "bookie": "bookie",
    "state": "state",
    "rack": "rack",
    "adds": "add/s",
    "add-latency": "add p50/p99 ms",
    "reads": "read/s",
    "disk": "disk",
    "reclaimable": "reclaimable",
}


def _cells(r: TopRow) -> list:
    d, m = r.disk, r.rates
    disk = "-" if d.used_percent is None else f"{d.used_percent:.0f}% of {human_size(d.total_bytes)}"
    return [
        r.bookie_id,
        Text(r.state.value, style=_STATE_STYLE.get(r.state.value, "")),
        r.rack or "",
        _num(m.add_rate),
        f"{_ms(m.add_p50_ms)}/{_ms(m.add_p99_ms)}",
        _num(m.read_rate),
        _ms(m.read_p99_ms),
        _ms(m.journal_sync_p99_ms),
        disk,
        "-" if d.reclaimable_bytes is None else human_size(d.reclaimable_bytes),
        _gc_text(r),
        _note(r),
    ]


def bookie_table(rows: list[TopRow], state: ViewState, live: bool, width: int | None = None) -> Table:
    """The bookies, one a line; on a terminal narrower than all the columns need, the least
    telling columns are left out (:data:`DROP_FIRST`) rather than every one cut short."""
    cells = [_cells(r) for r in rows]
    need = {name: max([len(name)] + [len(str(c[i])) for c in cells]) + 2 for i, (name, _j) in enumerate(COLUMNS)}
    shown = [name for name, _j in COLUMNS]
    for name in DROP_FIRST:
        if width is None or sum(need[n] for n in shown) <= width:
            break
        if name != SORT_COLUMN.get(state.sort):
            shown.remove(name)
    table = Table(box=None, header_style="bold reverse", pad_edge=False, expand=live)
    for name, justify in COLUMNS:
        if name in shown:
            table.add_column(
                name,
                justify=justify,
                no_wrap=True,
                overflow="ellipsis",
                min_width=need[name] - 2 if name in ("bookie", "state") else None,
            )
    for i, row in enumerate(cells):
        table.add_row(
            *(c for c, (name, _j) in zip(row, COLUMNS) if name in shown),
            style="reverse" if live and i == state.selected else "",
        )
    return table


def detail(snapshot: TopSnapshot, bookie_id: str) -> Panel:
    rows = [r for r in snapshot.bookies if r.bookie_id == bookie_id]
    if not rows:
        return Panel(f"{bookie_id} is gone from the cluster's bookies", title=bookie_id)
    r = rows[0]
    d, gc, m = r.disk, r.gc, r.rates
    lines = [
        f"state {r.state.value} (registration: {r.registration}), rack {r.rack or '-'}, "
        f"HTTP admin {r.http or '-'} ({r.kind or 'no answer'})"
        + (f"; read-only: {r.read_only_reason}" if r.read_only_reason else ""),
        f"disk: {human_size(d.used_bytes)} used of {human_size(d.total_bytes)}; entry logs "
        f"{_num(d.entry_logs)} ({human_size(d.entry_log_bytes)}), reclaimable "
        f"{human_size(d.reclaimable_bytes)}, lowest live ratio {_num(d.lowest_live_ratio, '{:.2f}')}",
        f"gc: {_gc_text(r)}; runs {_num(gc.gc_runs)}, forced {_yes_no(gc.forced_gc)}, reclaimed since start "
        f"{human_size(gc.reclaimed_bytes)}",
        f"metrics ({r.metrics or 'none'}): adds {_num(m.add_rate)}/s p50 {_ms(m.add_p50_ms)} ms "
        f"p99 {_ms(m.add_p99_ms)} ms; reads {_num(m.read_rate)}/s p50 {_ms(m.read_p50_ms)} ms "
        f"p99 {_ms(m.read_p99_ms)} ms; journal sync p99 {_ms(m.journal_sync_p99_ms)} ms",
    ]
    for what, why in r.unread.items():
        lines.append(f"not read: {what}: {why}")
    repairs = repairs_of(snapshot, bookie_id)
    lines.append(f"under-replicated ledgers missing a copy here: {len(repairs)}")
    for ledger in repairs[:10]:
        lines.append(
            f"  ledger {ledger.repair.ledger_id}: {ledger.text or ledger.repair.state.value}"
            + (f" (worker {ledger.repair.worker})" if ledger.repair.worker else "")
        )
    return Panel("\n".join(lines), title=f"bookie {bookie_id}", title_align="left")


def help_panel() -> Panel:
    table = Table(box=None, show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for keys, what in KEYS:
        table.add_row(keys, what)
    table.add_row("", "")
    table.add_row("sort keys", ", ".join(_SORT_NAMES))
    return Panel(table, title="bkctl top: keys", title_align="left")


def footer(state: ViewState) -> Text:
    if state.editing is not None:
        return Text(f"filter: {state.editing}_", style="bold")
    order = "descending" if SORTS[state.sort].largest_first != state.reverse else "ascending"
    text = f"sort {state.sort} ({order})" + (f"  filter '{state.filter}'" if state.filter else "")
    return Text(text + "   q quit  ? help  s sort  / filter  Enter details", style="dim")


def render(snapshot: TopSnapshot | None, state: ViewState, live: bool = True, width: int | None = None):
    """One frame: header, the bookies (or one bookie's details, or the help), footer; ``width``:
    the terminal's, to leave columns out that do not fit."""
    parts: list[RenderableType] = [header(snapshot, state, time.time() * 1000 if live else None), Text("")]
    if snapshot is not None:
        state.rows = filter_rows(sort_rows(snapshot.bookies, state.sort, state.reverse), state.filter)
        state.selected = max(0, min(state.selected, len(state.rows) - 1))
    if state.help:
        parts.append(help_panel())
    elif snapshot is not None and state.detail is not None:
        parts.append(detail(snapshot, state.detail))
    elif snapshot is not None:
        parts.append(bookie_table(state.rows, state, live, width))
        if not state.rows:
            parts.append(Text(f"no bookie matches '{state.filter}'" if state.filter else "no bookies"))
    if live:
        parts += [Text(""), footer(state)]
    return Group(*parts)


# ---------------------------------------------------------------- keys


def apply_key(state: ViewState, key: str) -> bool:
    """Change the view for one key; False to quit."""
    if state.editing is not None:
        if key in ("\r", "\n"):
            state.filter, state.editing = state.editing, None
        elif key == "\x1b":
            state.filter, state.editing = "", None
        elif key in ("\x7f", "\x08"):
            state.editing = state.editing[:-1]
        elif key.isprintable():
            state.editing += key
        return True
    if state.help:
        state.help = False
        return key != "q"
    if key in ("q", "Q", "\x03"):
        return False
    if key in ("?", "h"):
        state.help = True
    elif key == "s":
        state.sort = _SORT_NAMES[(_SORT_NAMES.index(state.sort) + 1) % len(_SORT_NAMES)]
    elif key == "S":
        state.reverse = not state.reverse
    elif key == "/":
        state.editing = state.filter
    elif key in ("\x1b[A", "k", "\x1bOA"):
        state.selected = max(0, state.selected - 1)
    elif key in ("\x1b[B", "j", "\x1bOB"):
        state.selected = min(len(state.rows) - 1, state.selected + 1) if state.rows else 0
    elif key in ("\r", "\n", "d") and state.detail is None and state.rows:
        state.detail = state.rows[state.selected].bookie_id
    elif key in ("\x1b", "\x7f", "\x08"):
        if state.detail is not None:
            state.detail = None
        else:
            state.filter = ""
    return True


def split_keys(data: str) -> list[str]:
    """Keys in what one read gave: escape sequences (arrows) whole, a lone Esc as itself."""
    keys, i = [], 0
    while i < len(data):
        if data[i] == "\x1b" and i + 2 < len(data) and data[i + 1] in "[O":
            j = i + 2
            while j < len(data) and not ("@" <= data[j] <= "~"):
                j += 1
            keys.append(data[i : j + 1])
            i = j + 1
        else:
            keys.append(data[i])
            i += 1
    return keys


# ---------------------------------------------------------------- the loop


class _Refresher(threading.Thread):
    """Takes a snapshot every ``interval`` seconds (or when asked) and wakes the view."""

    def __init__(self, collector, interval: float, wake_fd: int):
        super().__init__(name="bkctl-top-refresh", daemon=True)
        self.collector = collector
        self.interval = interval
        self.wake_fd = wake_fd
        self.stop = threading.Event()
        self.now = threading.Event()
        self.latest: tuple[TopSnapshot | None, str | None] = (None, None)

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                self.latest = (self.collector.snapshot(), None)
            except Exception as e:  # noqa: BLE001 - shown in the view, which goes on with the last snapshot
                self.latest = (self.latest[0], str(e) or type(e).__name__)
            try:
                os.write(self.wake_fd, b"s")
            except OSError:
                return
            self.now.wait(max(0.0, self.interval - (time.monotonic() - started)))
            self.now.clear()


class TerminationFlag:
    """SIGTERM noted, not raised: the view's loop sees the flag (its wait woken through
    ``wake_fd``) and ends as on ``q``, the terminal put back.  An exception raised from the
    handler would land wherever the main thread is, and a library's bare ``except:`` there
    (kazoo's, around waking its connection) may swallow it: the view would go on."""

    def __init__(self, wake_fd: int):
        self.wake_fd = wake_fd
        self._set = threading.Event()

    def on_sigterm(self, _signum: int, _frame: object) -> None:
        self._set.set()
        try:
            os.write(self.wake_fd, b"t")
        except OSError:
            pass  # the pipe is full: the loop wakes anyway

    def is_set(self) -> bool:
        return self._set.is_set()


def run_live(collector, console, interval: float, title: str, state: ViewState | None = None) -> bool:
    """The full-screen view until ``q``, Ctrl-C or SIGTERM; the terminal as it was afterwards,
    however it ends.  True when SIGTERM ended it."""
    import termios

    from rich.live import Live

    state = state or ViewState()
    state.interval, state.title = interval, title
    fd = os.open("/dev/tty", os.O_RDONLY | os.O_NONBLOCK) if not os.isatty(0) else 0
    saved = termios.tcgetattr(fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    refresher = _Refresher(collector, interval, wake_w)
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGWINCH, signal.SIGTERM)}

    def on_winch(_sig, _frame):
        try:
            os.write(wake_w, b"w")
        except OSError:
            pass

    terminated = TerminationFlag(wake_w)

    try:
        mode = termios.tcgetattr(fd)
        mode[3] &= ~(termios.ECHO | termios.ICANON)  # keys one by one, not echoed; Ctrl-C still interrupts
        mode[6][termios.VMIN], mode[6][termios.VTIME] = 1, 0
        termios.tcsetattr(fd, termios.TCSANOW, mode)
        signal.signal(signal.SIGWINCH, on_winch)
        signal.signal(signal.SIGTERM, terminated.on_sigterm)
        refresher.start()
        console.size = os.get_terminal_size(fd)
        with Live(
            render(None, state),
            console=console,
            screen=True,
            auto_refresh=False,
            redirect_stdout=False,
            redirect_stderr=False,
        ) as live:
            running = True
            while running and not terminated.is_set():
                # a redraw at least every interval: the clock and the figures' age move on even while
                # a refresh waits (the header says how late they are)
                ready, _, _ = select.select([fd, wake_r], [], [], interval)
                if wake_r in ready:
                    os.read(wake_r, 4096)
                if fd in ready:
                    data = os.read(fd, 1024).decode("utf-8", "replace")
                    if not data:
                        break  # the terminal went away
                    for key in split_keys(data):
                        if key == "r":
                            refresher.now.set()
                        elif not apply_key(state, key):
                            running = False
                            break
                snapshot, state.error = refresher.latest
                if running and not terminated.is_set():
                    # the terminal's size now (not $COLUMNS/$LINES, which rich would otherwise keep)
                    console.size = os.get_terminal_size(fd)
                    live.update(render(snapshot, state, width=console.size.width), refresh=True)
    except KeyboardInterrupt:
        pass  # Ctrl-C quits, as q does
    finally:
        refresher.stop.set()
        refresher.now.set()
        if refresher.is_alive():
            refresher.join(timeout=5)  # its snapshot's reads are bounded by the collector's timeouts
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        os.close(wake_r)
        os.close(wake_w)
        if fd != 0:
            os.close(fd)
        collector.close()
    return terminated.is_set()
