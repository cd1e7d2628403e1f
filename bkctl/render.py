"""Output for people (rich tables) and for scripts (one JSON document)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .app import App

# the commands print these beside tables and JSON; their home is humanize, which the operations
# import without this output layer
from .humanize import human_size, plural  # noqa: F401 - re-exported for the commands


def table(app: App, columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None) -> None:
    """A table: rich's on a terminal; piped, plain aligned columns that are
    never wrapped nor padded at the end of a line (for grep, awk, cut)."""
    cells = [["" if v is None else str(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    # on a terminal too narrow for the table, the same plain lines, wrapped by the terminal: rich would
    # squeeze the columns and cut or fold what is in them (a timestamp, a header)
    if not app.console.is_terminal or sum(widths) + 2 * (len(widths) - 1) > app.console.width:
        lines = [title] if title else []
        for row in [list(columns), *cells]:
            lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
        _plain(app, "\n".join(lines))
        return
    from rich.table import Table

    t = Table(title=title, box=None, header_style="bold", pad_edge=False)
    for c in columns:
        t.add_column(c)
    for row in cells:
        t.add_row(*row)
    app.console.print(t)


def stream_table(app: App, columns: Sequence[str], rows: Iterable[Sequence[Any]], chunk: int = 1000) -> None:
    """:func:`table` for a listing that may run to a million rows: printed as it
    comes, ``chunk`` rows at a time, holding no more.  A listing that fits in one
    chunk is :func:`table`'s; a longer one is plain aligned columns on a terminal
    too, their widths those of the first chunk (a wider cell later widens its line)."""
    import itertools

    it = iter(rows)
    first = [["" if v is None else str(v) for v in row] for row in itertools.islice(it, chunk)]
    if len(first) < chunk:
        table(app, columns, first)
        return
    widths = [max([len(c)] + [len(row[i]) for row in first]) for i, c in enumerate(columns)]

    def line(row: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip()

    _plain(app, "\n".join([line(list(columns)), *map(line, first)]))
    while cells := [["" if v is None else str(v) for v in row] for row in itertools.islice(it, chunk)]:
        _plain(app, "\n".join(map(line, cells)))


def _plain(app: App, text: str) -> None:
    """Lines as they are, without markup nor wrapping.  Piped, straight to the console's
    file: rich's rendering of them costs seconds at 10^5 lines (``pulsar topic list``),
    and the control codes rich drops (carriage return, bell...) go as well."""
    if app.console.is_terminal:
        app.console.out(text, highlight=False)
        return
    from rich.control import strip_control_codes

    app.console.file.write(strip_control_codes(text) + "\n")


def fields(app: App, pairs: Iterable[tuple[str, Any]]) -> None:
    """Aligned "key: value" lines."""
    pairs = list(pairs)
    width = max((len(k) for k, _ in pairs), default=0)
    for k, v in pairs:
        value = "" if v is None else str(v)
        if app.console.is_terminal:
            from rich.markup import escape

            app.console.print(f"[bold]{escape(k.ljust(width))}[/bold]  {escape(value)}", markup=True)
        else:
            app.console.out(f"{k.ljust(width)}  {value}".rstrip(), highlight=False)


def emit_rows(app: App, rows: Iterable[Any], human: Callable[[list], None]) -> None:
    """A list: under --json one JSON line per row (as every list and stream
    of bkctl; an operation's result is written by :func:`bkctl.ops.results.to_json`),
    else ``human(rows)``."""
    if app.json:
        for row in rows:
            app.emit_json(row)
    else:
        human(list(rows))


def emit(app: App, doc: Any, human: Callable[[], None]) -> None:
    """``doc`` as JSON under --json (an operation's result as :func:`bkctl.ops.results.to_json`
    writes it), else whatever ``human`` prints."""
    if app.json:
        app.emit_json(doc, pretty=app.interactive and app.console.is_terminal)
    else:
        human()


def human_time(epoch_ms: int | None) -> str:
    """A time in epoch milliseconds as every command writes one: ISO 8601 in
    UTC with milliseconds (``2026-11-23T06:04:05.123Z``, :func:`bkctl.wire.text.utc_iso`,
    what ``pulsar`` output and the exports' JSON use too); "" when unset."""
    if not epoch_ms:
        return ""
    from bkctl.wire.text import utc_iso

    return utc_iso(epoch_ms) or ""
