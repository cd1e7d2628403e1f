"""Tables piped (``| grep``, ``| wc -l``): plain aligned lines written as they are, every
row, the control codes rich drops (carriage return, bell, backspace) dropped, however long the listing.

The App's own console writes them, to a standard output that is not a terminal (pytest's
capture): what ``bkctl ... | grep`` meets."""

from __future__ import annotations

from bkctl.app import App
from bkctl.render import stream_table, table


def test_a_piped_table_is_plain_lines_without_control_characters(capsys):
    table(App(color=False), ["topic", "ledgers"], [("a\rb\x07e\x08l", 1), ("tab\there", None), ("b", 22)])
    lines = capsys.readouterr().out.split("\n")
    assert lines[-1] == ""
    assert [line.split() for line in lines[:-1]] == [["topic", "ledgers"], ["abel", "1"], ["tab", "here"], ["b", "22"]]
    assert lines[3].index("22") == lines[0].index("ledgers")  # aligned
    assert "\x1b" not in "".join(lines)  # no colour or cursor codes either


def test_a_piped_stream_of_many_rows_writes_every_row_in_order(capsys):
    stream_table(App(color=False), ["id"], ((i,) for i in range(2500)), chunk=1000)
    assert capsys.readouterr().out.splitlines() == ["id", *map(str, range(2500))]
