"""Global options anywhere on the line: the root group's options (``--json``,
``-m``, ``--cluster``, ``--timeout``, ``-q``...) may follow the command.

``bkctl ledger show 7 --json`` is ``bkctl --json ledger show 7``.  The rule
lives here, derived from the command tree, and serves the three readers of
a command line: :func:`bkctl.cli.run` (:func:`hoist_global_options`), shell
completion for bash, zsh and fish and the completions of ``bkctl shell``
(:func:`completion_args`, :func:`root_option_items`), and ``bkctl shell``'s
own line handling.
"""

from __future__ import annotations

import click
from click.shell_completion import CompletionItem

__all__ = [
    "completion_args",
    "hoist_global_options",
    "leading_global_options",
    "option_strings",
    "option_table",
    "option_width",
    "root_option_items",
]


def hoist_global_options(group: click.Group, args: list[str]) -> list[str]:
    """``args`` with the root group's options moved in front of the command.

    This is what makes every root option (``--json``, ``-q``, ``-m``...) a
    global one: ``ledger show 7 --json`` becomes ``--json ledger show 7``.
    It is derived from ``group.params`` and the command tree, so a new root
    option or a new command needs nothing here.  A command's own option of
    the same name wins (``decommission --timeout``); nothing after ``--``
    moves.
    """
    root_opts = option_table(group.params, lambda p: not p.is_eager)
    head: list[str] = []
    i = 0
    while i < len(args):  # root options already in front stay
        width = option_width(root_opts, args, i)
        if not width:
            break
        head += args[i : i + width]
        i += width
    if i >= len(args) or args[i] == "--":
        return list(args)
    hoisted: list[str] = []
    tail: list[str] = []
    command: click.Command | None = group
    while i < len(args):
        word = args[i]
        if word == "--":
            tail += args[i:]
            break
        own = option_table(command.params, lambda p: True) if command is not None else {}
        width = option_width(own, args, i)
        if width:
            tail += args[i : i + width]
            i += width
            continue
        width = option_width(root_opts, args, i)
        if width:
            hoisted += args[i : i + width]
            i += width
            continue
        if isinstance(command, click.Group) and not word.startswith("-"):
            command = command.commands.get(word)
        tail.append(word)
        i += 1
    return head + hoisted + tail


def option_table(params, keep) -> dict[str, bool]:
    """Option string -> whether it takes a value, for the click options ``keep`` accepts."""
    table: dict[str, bool] = {}
    for p in params:
        if isinstance(p, click.Option) and keep(p):
            takes = not (p.is_flag or p.count)
            for opt in (*p.opts, *p.secondary_opts):
                table[opt] = takes
    return table


def option_width(options: dict[str, bool], args: list[str], i: int) -> int:
    """How many words the option at ``args[i]`` spans (0: not one of ``options``)."""
    word = args[i]
    if not word.startswith("-") or word in ("-", "--"):
        return 0
    if word in options:
        return 2 if options[word] and i + 1 < len(args) else 1
    name, eq, _ = word.partition("=")
    if word.startswith("--"):
        return 1 if eq and options.get(name) else 0
    if options.get(word[:2]):  # -mURI
        return 1
    letters = [f"-{c}" for c in word[1:]]  # -vq
    return 1 if all(options.get(opt) is False for opt in letters) else 0


def leading_global_options(group: click.Group, args: list[str]) -> tuple[list[str], str | None]:
    """The root options in front of the command (option strings: ``-mURI`` is
    ``-m``, ``--cluster=x`` is ``--cluster``) and the command word (None when
    the line has none).  Words that look like options but are not the root's
    count as options, one word each."""
    table = option_table(group.params, lambda p: True)
    options: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            return options, args[i + 1] if i + 1 < len(args) else None
        if not word.startswith("-") or word == "-":
            return options, word
        name = word.partition("=")[0]
        if not word.startswith("--") and len(word) > 2 and table.get(word[:2]):
            name = word[:2]  # -mURI: a short option with its value attached
        options.append(name)
        i += option_width(table, args, i) or 1
    return options, None


def option_strings(group: click.Group, names) -> set[str]:
    """Every option string (``-m``, ``--metadata-uri``) of the root options whose parameter names are ``names``."""
    return {
        opt
        for p in group.params
        if isinstance(p, click.Option) and p.name in names
        for opt in (*p.opts, *p.secondary_opts)
    }


def completion_args(root, args: list[str]) -> list[str]:
    """The words before the one being completed, as click must see them:
    root options typed after the command moved in front of it.  A root
    option still waiting for its value keeps only the root options (its
    value is completed as the root's)."""
    takes_value = option_table(root.params, lambda p: not p.is_eager)
    if args and takes_value.get(args[-1]):
        hoisted = hoist_global_options(root, args[:-1])
        command_at = next((i for i, w in enumerate(hoisted) if w in root.commands), len(hoisted))
        return hoisted[:command_at] + [args[-1]]
    return hoist_global_options(root, args)


def root_option_items(root, incomplete: str, have: set[str]) -> list[CompletionItem]:
    """The root's options that start with ``incomplete`` (offered after any command too)."""
    items = []
    for param in root.params:
        if isinstance(param, click.Option) and not param.is_eager and not param.hidden:
            for opt in (*param.opts, *param.secondary_opts):
                if opt.startswith(incomplete) and opt not in have:
                    items.append(CompletionItem(opt, help=param.help))
    return items
