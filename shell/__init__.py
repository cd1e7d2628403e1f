"""``bkctl shell``: an interactive shell over bkctl's click command tree.

Every line is run by :func:`bkctl.cli.run` against one session
:class:`~bkctl.app.App`, so commands share its ZooKeeper session (and
whatever connections later commands keep on the App) until the shell ends.
The shell adds completion from the command tree and from a background
cache of the cluster's metadata, syntax highlighting, persistent history,
a status toolbar, a pager, and the few commands of its own listed in
:data:`BUILTINS`.

Modules: :mod:`bkctl.shell.repl` (the session and its loop), :mod:`bkctl.shell.cache`
(background metadata cache), :mod:`bkctl.shell.completer`, :mod:`bkctl.shell.lexer`,
:mod:`bkctl.shell.pager`.  This module stays import-free so that ``bkctl --help``
can describe the shell without loading any of them.
"""

from __future__ import annotations

#: The shell's own commands: (names, arguments, description).  The first
#: name is the one ``help`` and the man page show; the others are aliases.
BUILTINS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("help", "?"), "[COMMAND...]", "List the commands, or show a command's help."),
    (("use",), "CLUSTER|URI", "Switch to a cluster named in config.toml, or to a URI."),
    (("format",), "json|table", "Print JSON documents or tables."),
    (("\\j",), "", "Toggle between JSON and tables."),
    (("pager",), "on|off", "Page long output through $PAGER (default: less -FRX)."),
    (("clear",), "", "Clear the screen (also Ctrl-L)."),
    (("\\e",), "", "Edit the last command in $EDITOR, then run it."),
    (("exit", "quit", "\\q"), "", "Leave the shell (also Ctrl-D)."),
)

BUILTIN_NAMES: frozenset[str] = frozenset(name for names, _, _ in BUILTINS for name in names)


def builtins_help() -> str:
    """The builtins as aligned lines, for ``help`` and ``bkctl shell --help``."""
    rows = [(" ".join(filter(None, [names[0], args])), text) for names, args, text in BUILTINS]
    width = max(len(left) for left, _ in rows)
    return "\n".join(f"  {left.ljust(width)}  {text}" for left, text in rows)
