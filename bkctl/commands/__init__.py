"""bkctl's click command groups, one module per group (registered in bkctl.cli)."""
import click

from ..app import App

#: Passes the invocation's (or the shell session's) :class:`~bkctl.app.App`.
pass_app = click.make_pass_decorator(App)
