"""Completion for the shell: click's own completion over the live command tree.

Commands, subcommands, options and option values (``click.Choice`` values,
paths) come from click's ``shell_complete`` protocol, the same one bash,
zsh and fish use, so the shell offers exactly what they offer.  Ledger and
bookie ids come from the ``shell_complete=`` callbacks of
:mod:`bkctl.completers`, which in the shell answer from the background
cache (:mod:`bkctl.shell.cache`) and never wait for ZooKeeper.  The shell's own
commands (``use``, ``format``, ``pager``, ``help``...) are completed here.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable

import click
from click.shell_completion import CompletionItem, ShellComplete, split_arg_string
from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document

from . import BUILTINS

_LAST_WORD = re.compile(r"""(?:[^\s"']|"[^"]*"?|'[^']*'?)*$""")


class ShellCompleter(Completer):
    """``root``: the click group; ``obj``: the session App handed to click as ``ctx.obj``."""

    def __init__(self, root: click.Group, obj=None, cluster_names: Callable[[], Iterable[str]] | None = None):
        self.root = root
        self.obj = obj
        self.cluster_names = cluster_names or (lambda: [])
        self._paths = PathCompleter(expanduser=True)
        self._click = ShellComplete(root, {"obj": obj}, "bkctl", "_BKCTL_COMPLETE")

    # -- entry point -----------------------------------------------------------
    def get_completions(self, document: Document, complete_event: CompleteEvent):
        text = document.text_before_cursor
        if text.lstrip().startswith("#"):
            return
        last = _LAST_WORD.search(text)  # matches every text (at its end, if nothing else)
        raw = last.group() if last is not None else ""
        words = split_arg_string(text[: len(text) - len(raw)])
        incomplete = split_arg_string(raw)[0] if raw else ""
        if not words:
            yield from self._builtin_names(incomplete)
        elif words[0] in _BUILTIN_ARGS:
            yield from self._builtin_args(words, incomplete)
            return
        if words and words[0] == "bkctl":
            words = words[1:]
        yield from self._from_click(words, incomplete, raw)

    def completions(self, line: str) -> list[str]:
        """The candidates' texts for the end of ``line`` (tests, benchmarks)."""
        doc = Document(line, len(line))
        return [c.text for c in self.get_completions(doc, CompleteEvent(completion_requested=True))]

    # -- click's side ----------------------------------------------------------
    def click_items(self, words: list[str], incomplete: str) -> list[CompletionItem]:
        from bkctl.global_options import completion_args, root_option_items

        try:
            args = completion_args(self.root, list(words))  # global options may follow the command
            items = self._click.get_completions(args, incomplete)
            if not items and not incomplete:  # a command without arguments left: offer its options
                items = self._click.get_completions(args, "-")
            if incomplete.startswith("-") and any(w in self.root.commands for w in words):
                items += root_option_items(self.root, incomplete, {str(i.value) for i in items})
        except Exception:  # a half-typed line click cannot make sense of
            return []
        return items

    def _from_click(self, words: list[str], incomplete: str, raw: str):
        items = self.click_items(words, incomplete)
        # click completes the value of "--opt=val" as "val": replace only that part
        value_part = raw.partition("=")[2] if raw.startswith("-") and "=" in raw else raw
        start = -len(value_part)
        group = self._group_of(words)
        for item in items:
            if item.type == "plain":
                sub = group.commands.get(str(item.value)) if group is not None else None
                # click cuts a command's description at 45 characters: the menu has room for it whole
                meta = sub.get_short_help_str(limit=120) if sub is not None else item.help or ""
                yield Completion(
                    _quote(str(item.value)), start_position=start, display=str(item.value), display_meta=meta
                )
            elif item.type in ("file", "dir"):
                yield from self._path_completions(incomplete, dirs_only=item.type == "dir")

    def _group_of(self, words: list[str]) -> click.Group | None:
        """The group whose subcommands come after ``words`` (None when a command was reached)."""
        group: click.Command = self.root
        for word in words:
            if word.startswith("-"):
                continue
            if not isinstance(group, click.Group):
                return None
            nxt = group.commands.get(word)
            if nxt is None:
                continue  # a root option's value (-m URI)
            group = nxt
        return group if isinstance(group, click.Group) else None

    def _path_completions(self, incomplete: str, dirs_only: bool):
        completer = PathCompleter(only_directories=dirs_only, expanduser=True) if dirs_only else self._paths
        doc = Document(incomplete, len(incomplete))
        yield from completer.get_completions(doc, CompleteEvent(completion_requested=True))

    # -- the shell's own commands --------------------------------------------
    def _builtin_names(self, incomplete: str):
        for names, _args, text in BUILTINS:
            for name in names:
                if name.startswith(incomplete) and (incomplete or name == names[0]):
                    yield Completion(name, start_position=-len(incomplete), display_meta=text)

    def _builtin_args(self, words: list[str], incomplete: str):
        name = words[0]
        position = len(words) - 1
        if name in ("help", "?"):
            for item in self.click_items(words[1:], incomplete):
                if item.type == "plain" and not str(item.value).startswith("-"):
                    yield Completion(str(item.value), start_position=-len(incomplete), display_meta=item.help or "")
            return
        if position > 0:
            return
        if name == "use":
            values = [(n, "cluster") for n in self.cluster_names()]
        else:
            values = [(v, "") for v in _BUILTIN_ARGS[name]]
        for value, meta in values:
            if value.startswith(incomplete):
                yield Completion(_quote(value), start_position=-len(incomplete), display_meta=meta)


_BUILTIN_ARGS = {"use": (), "format": ("json", "table"), "pager": ("on", "off"), "help": (), "?": ()}


def _quote(value: str) -> str:
    return shlex.quote(value) if value and any(c.isspace() or c in "'\"\\$;&|<>()" for c in value) else value
