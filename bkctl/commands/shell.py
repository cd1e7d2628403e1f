"""``bkctl shell``: the interactive shell (the work is done by the top-level ``shell`` package)."""

from __future__ import annotations

import click

from bkctl.shell import builtins_help

from ..completers import complete_cluster

_HELP = f"""An interactive shell over the bkctl commands.

Type commands without the leading "bkctl" (ledger list, autorecovery
status...).  One ZooKeeper session serves the whole session.  Tab completes
commands, options, choices, ledger and bookie ids (from a cache refreshed in
the background); the history is kept in $XDG_DATA_HOME/bkctl/history
(Ctrl-R searches it); the toolbar shows the cluster, its bookies and
autorecovery as `autorecovery status` reports it: disabled, enabled with
the elected auditor, or enabled but no auditor running (no daemon acts on
the switch).  Output longer than the screen goes through $PAGER;
JSON documents are indented.  A line ending with a backslash goes on on the
next one; Ctrl-X Ctrl-E edits the line in $EDITOR, \\e the last command.
Ctrl-C stops the running command (the autorecovery daemon, an export, a
tail, a bench...) and releases what it holds, then the prompt comes back;
Ctrl-D leaves.

With stdin not a terminal, runs one command per line (blank lines and #
comments are skipped; a trailing backslash joins lines; errors name their
line) and exits with the status of the last failing line, 0 if none.

\b
Shell commands:
{builtins_help()}
"""


@click.command("shell", help=_HELP)
@click.option(
    "-m", "--metadata-uri", metavar="URI", help="Metadata service URI for the session (instead of bkctl's -m)."
)
@click.option(
    "--cluster", metavar="NAME", shell_complete=complete_cluster, help="A cluster named in ~/.config/bkctl/config.toml."
)
@click.pass_context
def shell(ctx: click.Context, metadata_uri: str | None, cluster: str | None):
    from bkctl.shell.repl import Shell

    from ..app import App
    from ..clusters import resolve_cluster

    app = ctx.find_object(App)
    if app is None:  # run on its own rather than under the bkctl group
        app = ctx.ensure_object(App)
        ctx.call_on_close(app.close)
    if metadata_uri or cluster:
        app.close()
        app.metadata_uri, app.cluster_name = resolve_cluster(metadata_uri, cluster)
    root = ctx.find_root().command
    if not isinstance(root, click.Group):
        raise click.UsageError("bkctl shell runs under bkctl's command tree (bkctl shell)")
    code = Shell(app, root=root).run()
    if code:
        raise _ScriptStatus(code)


class _ScriptStatus(click.ClickException):
    """Ends ``bkctl shell`` with a script's status; the failing line has already said why.

    (Not ``ctx.exit(code)``: under ``standalone_mode=False``, as in
    :func:`bkctl.cli.run`, click returns that code instead of raising it.)
    """

    def __init__(self, code: int):
        super().__init__("")
        # click types exit_code as a class variable; an error of its own code is what click reads
        self.exit_code = code  # type: ignore[misc]

    def show(self, file=None) -> None:
        pass
