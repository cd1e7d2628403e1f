"""Output for people (rich tables) and for scripts (one JSON document)."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from .app import App


def table(app: App, columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None) -> None:
    from rich.table import Table

    t = Table(title=title, box=None, header_style="bold", pad_edge=False)
    for c in columns:
        t.add_column(c)
    for row in rows:
        t.add_row(*("" if v is None else str(v) for v in row))
    app.console.print(t)


def fields(app: App, pairs: Iterable[tuple[str, Any]]) -> None:
    """Aligned "key: value" lines."""
    pairs = list(pairs)
    width = max((len(k) for k, _ in pairs), default=0)
    for k, v in pairs:
        app.console.print(f"[bold]{k.ljust(width)}[/bold]  {'' if v is None else v}", markup=True)


def emit(app: App, doc: Any, human: Callable[[], None]) -> None:
    """``doc`` as JSON under --json, else whatever ``human`` prints."""
    if app.json:
        app.emit_json(doc)
    else:
        human()
