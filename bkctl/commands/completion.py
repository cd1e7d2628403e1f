"""``bkctl completion show|install SHELL``: completion scripts for bash, zsh and fish."""

from __future__ import annotations

import os
import pathlib

import click

from ..completion_scripts import SHELLS

_SHELL_CHOICE = click.Choice(list(SHELLS))


@click.group()
def completion():
    """Tab completion for bash, zsh and fish (commands, options, ledger and bookie ids)."""


@completion.command("show")
@click.argument("shell_name", metavar="SHELL", type=_SHELL_CHOICE)
@click.pass_context
def completion_show(ctx: click.Context, shell_name: str):
    """Print the completion script for SHELL (to source, or to save where SHELL looks)."""
    from ..completion_scripts import completion_script

    click.echo(completion_script(shell_name, ctx.find_root().command), nl=False)


@completion.command("install")
@click.argument("shell_name", metavar="SHELL", type=_SHELL_CHOICE, required=False)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Write the script into DIR instead of the shell's usual place for user completions.",
)
@click.pass_context
def completion_install(ctx: click.Context, shell_name: str | None, directory: str | None):
    """Write the completion script for SHELL (default: from $SHELL) where SHELL finds it.

    \b
      bash  ~/.local/share/bash-completion/completions/bkctl  (needs the bash-completion package)
      zsh   ~/.zfunc/_bkctl                                    (the directory must be in $fpath)
      fish  ~/.config/fish/completions/bkctl.fish
    """
    from ..completion_scripts import completion_script

    shell_name = shell_name or _shell_from_environment()
    path = install_path(shell_name, directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(completion_script(shell_name, ctx.find_root().command))
    os.replace(tmp, path)
    hint = _next_step(shell_name, path)
    if getattr(ctx.obj, "json", False):
        import json

        click.echo(json.dumps({"shell": shell_name, "path": str(path), "next_step": hint}, sort_keys=True))
        return
    click.echo(f"installed the {shell_name} completion for bkctl in {path}")
    click.echo(hint)


def install_path(shell_name: str, directory: str | None = None) -> pathlib.Path:
    """Where ``bkctl completion install`` writes the script for ``shell_name``."""
    name = {"bash": "bkctl", "zsh": "_bkctl", "fish": "bkctl.fish"}[shell_name]
    if directory:
        return pathlib.Path(directory).expanduser() / name
    home = pathlib.Path.home()
    if shell_name == "bash":
        user_dir = os.environ.get("BASH_COMPLETION_USER_DIR")
        if user_dir:
            return pathlib.Path(user_dir) / "completions" / name
        data = os.environ.get("XDG_DATA_HOME") or str(home / ".local" / "share")
        return pathlib.Path(data) / "bash-completion" / "completions" / name
    if shell_name == "zsh":
        return home / ".zfunc" / name
    config = os.environ.get("XDG_CONFIG_HOME") or str(home / ".config")
    return pathlib.Path(config) / "fish" / "completions" / name


def _shell_from_environment() -> str:
    login_shell = os.path.basename(os.environ.get("SHELL", ""))
    if login_shell in SHELLS:
        return login_shell
    raise click.UsageError(
        f"cannot tell the shell from $SHELL ({login_shell or 'unset'}): name it, e.g. bkctl completion install bash"
    )


def _next_step(shell_name: str, path: pathlib.Path) -> str:
    if shell_name == "bash":
        return "New bash sessions load it (with the bash-completion package); now: source " + str(path)
    if shell_name == "zsh":
        directory = str(path.parent).replace(str(pathlib.Path.home()), "~", 1)
        zshrc = pathlib.Path(os.environ.get("ZDOTDIR") or pathlib.Path.home()) / ".zshrc"
        try:
            configured = directory in zshrc.read_text() or str(path.parent) in zshrc.read_text()
        except OSError:
            configured = False
        if configured:
            return "New zsh sessions load it (its directory is in ~/.zshrc's fpath)."
        return f"Add to {zshrc}, before compinit:  fpath=({directory} $fpath); autoload -Uz compinit && compinit"
    return "New fish sessions load it."
