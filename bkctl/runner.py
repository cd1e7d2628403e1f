"""Running one bkctl command line against a command tree: exit codes, errors as one
line on stderr, a reader that went away (``| head``).  :func:`bkctl.cli.run` runs a
line against bkctl's tree; the shell runs each of its lines here against the tree it
was given, so neither it nor the command that starts it imports :mod:`bkctl.cli`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from . import exitcodes
from .global_options import hoist_global_options

if TYPE_CHECKING:
    from .app import App

__all__ = ["ReaderGone", "run_line", "state"]

#: process-wide: the verbosity in use, whether logging is set up for it, whether
#: stdout's reader went away (then the interpreter's last flush must stay quiet), and
#: whether the process runs one command line and ends (``one_shot``: bkctl's main)
state: dict = {"verbose": 0}


class ReaderGone(Exception):
    """stdout's reader went away (``| head``)."""


def run_line(root: click.Group, args: list[str], obj: App | None = None) -> int:
    """Run one command line of ``root``'s tree and return its exit code; errors become
    one line on stderr."""
    args = hoist_global_options(root, list(args))
    try:
        rv = root.main(args=args, prog_name="bkctl", standalone_mode=False, obj=obj)
        # without standalone mode click returns the code of ctx.exit(n) instead of raising
        return rv if isinstance(rv, int) and not isinstance(rv, bool) else exitcodes.OK
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.UsageError as e:
        if obj is not None and obj.interactive:  # the shell: one line, pointing at its own help
            path = e.ctx.command_path.partition(" ")[2] if e.ctx is not None else ""
            click.echo(f"bkctl: error: {e.format_message()} (see: help{' ' + path if path else ''})", err=True)
        else:
            e.show()
        return exitcodes.USAGE
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except (BrokenPipeError, ReaderGone):  # the reader left (| head): done, as for any Unix filter
        state["broken_pipe"] = True
        return exitcodes.OK
    except (click.Abort, KeyboardInterrupt):
        click.echo("bkctl: aborted", err=True)
        return exitcodes.INTERRUPTED
    except Exception as e:  # one line, a traceback only with -v
        if state["verbose"]:
            import traceback

            traceback.print_exc()
        click.echo(f"bkctl: error: {exitcodes.describe(e)}", err=True)
        return exitcodes.exit_code_for(e)
