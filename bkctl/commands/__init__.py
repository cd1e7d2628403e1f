"""bkctl's click command groups, one module per group (registered in bkctl.cli)."""

import click

from ..app import App

#: Passes the invocation's (or the shell session's) :class:`~bkctl.app.App`.
pass_app = click.make_pass_decorator(App)

#: A ledger id: BookKeeper's ids are non-negative signed 64-bit longs (larger: exit 2).
LEDGER_ID = click.IntRange(0, 2**63 - 1)
