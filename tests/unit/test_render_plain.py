"""Tables piped (``| grep``, ``| wc -l``): plain aligned lines written as they are, every
row, the control codes rich drops (carriage return, bell, backspace) dropped, however long the listing."""

from __future__ import annotations

import io

from rich.console import Console

from bkctl.app import App
from bkctl.render import stream_table, table


def piped_app() -> tuple[App, io.StringIO]:
    out = io.StringIO()
    app = App()
    app._console = Console(file=out, force_terminal=False, no_color=True, soft_wrap=True)
    return app, out


def test_a_piped_table_is_plain_lines_without_control_characters():
    app, out = piped_app()
    table(app, ["topic", "ledgers"], [("a\rb\x07e\x08l", 1), ("tab\there", None), ("b", 22)])
    lines = out.getvalue().split("\n")
    assert lines[-1] == ""
    assert [line.split() for line in lines[:-1]] == [["topic", "ledgers"], ["abel", "1"], ["tab", "here"], ["b", "22"]]
    assert lines[3].index("22") == lines[0].index("ledgers")  # aligned


def test_a_piped_stream_of_many_rows_writes_every_row_in_order():
    app, out = piped_app()
    stream_table(app, ["id"], ((i,) for i in range(2500)), chunk=1000)
    assert out.getvalue().splitlines() == ["id", *map(str, range(2500))]
