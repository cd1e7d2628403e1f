"""Syntax highlighting of the command line, by walking the click command tree.

Words are classed as the shell's own commands, bkctl commands and
subcommands (unknown ones where a subcommand is expected are marked as
errors), options, option values, numbers, quoted strings and comments.
"""

from __future__ import annotations

import re

import click
from prompt_toolkit.document import Document
from prompt_toolkit.lexers import Lexer

from . import BUILTIN_NAMES

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<comment>\#.*)
  | (?P<quoted>"(?:[^"\\]|\\.)*"?|'[^']*'?)
  | (?P<word>[^\s"']+(?:"(?:[^"\\]|\\.)*"?|'[^']*'?|[^\s"']+)*)
""",
    re.VERBOSE,
)

_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")

#: Style classes used by :class:`CommandLexer` (see :data:`bkctl.shell.repl.STYLE`).
CLASSES = ("builtin", "command", "option", "value", "number", "string", "comment", "error", "argument")


def classify(root: click.Group, line: str) -> list[tuple[str, str]]:
    """``[(class, text), ...]`` covering ``line`` exactly."""
    ctx = click.Context(root, info_name="bkctl")
    out: list[tuple[str, str]] = []
    command: click.Command | None = root
    expect_value = False
    first = True
    for m in _TOKEN.finditer(line):
        kind, text = m.lastgroup, m.group()
        if kind == "space":
            out.append(("", text))
            continue
        if kind == "comment":
            out.append(("comment", text))
            continue
        if first:
            first = False
            if text in BUILTIN_NAMES:
                out.append(("builtin", text))
                command = None  # the rest are the builtin's arguments
                continue
            if text == "bkctl":
                out.append(("command", text))
                continue
        if kind == "quoted":
            out.append(("string", text))
            expect_value = False
            continue
        if expect_value:
            out.append(("number" if _NUMBER.fullmatch(text) else "value", text))
            expect_value = False
            continue
        if text.startswith("-") and not _NUMBER.fullmatch(text) and text != "-":
            name, eq, _ = text.partition("=")
            param = _find_option(ctx, command, name)
            if param is None and command is not None:
                out.append(("error" if text != "--" else "option", text))
                continue
            out.append(("option", text))
            expect_value = bool(param is not None and not eq and not param.is_flag and not param.count)
            continue
        if isinstance(command, click.Group):
            sub = command.get_command(ctx, text)
            if sub is not None:
                out.append(("command", text))
                command = sub
                continue
            out.append(("error", text))
            command = None
            continue
        out.append(("number" if _NUMBER.fullmatch(text) else "argument", text))
    return out


def _find_option(ctx: click.Context, command: click.Command | None, name: str) -> click.Option | None:
    if command is None:
        return None
    for param in command.get_params(ctx):
        if isinstance(param, click.Option) and (name in param.opts or name in param.secondary_opts):
            return param
    return None


class CommandLexer(Lexer):
    """prompt-toolkit lexer over :func:`classify`."""

    def __init__(self, root: click.Group):
        self.root = root

    def lex_document(self, document: Document):
        lines = document.lines

        def get_line(lineno: int):
            try:
                line = lines[lineno]
            except IndexError:
                return []
            return [(f"class:{cls}" if cls else "", text) for cls, text in classify(self.root, line)]

        return get_line
