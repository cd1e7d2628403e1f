"""bkctl's command tree loads a command's module when the command is used
(:class:`bkctl.cli.LazyCommands`): a fresh process imports only what its command needs,
and anything that walks the tree (--help, the shell, completion, tools/gen_docs.py)
still sees every command, with its examples."""

from __future__ import annotations

import json
import subprocess
import sys

import click

from bkctl.cli import COMMANDS, cli
from tests.support.cli import REPO, env_for

_PROBE = (
    "import json, sys\n"
    "from bkctl.cli import run\n"
    "code = run(sys.argv[1:])\n"
    "sys.stdout.flush()\n"
    "sys.stderr.write('\\n' + json.dumps([code, sorted(sys.modules)]) + '\\n')\n"
)


def modules_after(*args: str) -> tuple[int, set[str]]:
    """The exit code of ``bkctl ARGS`` in a fresh process, and the modules it had imported by then."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        capture_output=True,
        text=True,
        env=env_for(None),
        cwd=REPO,
        timeout=60,
        input="",
    )
    code, modules = json.loads(done.stderr.strip().splitlines()[-1])
    return code, set(modules)


def command_modules(modules: set[str]) -> set[str]:
    return {m for m in modules if m.startswith("bkctl.commands.")}


def test_the_version_imports_no_command():
    code, modules = modules_after("--version")
    assert code == 0
    assert command_modules(modules) == set()


def test_a_command_imports_its_own_module_only():
    code, modules = modules_after("ledger", "list", "--help")
    assert code == 0
    assert command_modules(modules) == {
        "bkctl.commands.ledger",
        "bkctl.commands.ledger_client",
        "bkctl.commands.ledger_fsck",
        "bkctl.commands.ledger_metadata",
    }
    assert "bkctl.ops.bookie_reads" not in modules  # `disk`'s


def test_the_root_help_loads_every_command():
    code, modules = modules_after("--help")
    assert code == 0
    assert {f"bkctl.commands.{m}" for m in ("disk", "top", "sandbox", "shell", "cookie")} <= command_modules(modules)


def test_every_name_is_its_command_and_the_names_keep_their_order():
    assert list(cli.commands) == list(COMMANDS)
    for name in COMMANDS:
        command = cli.commands[name]
        assert isinstance(command, click.Command) and command.name == name
        assert cli.get_command(click.Context(cli), name) is command
    assert cli.list_commands(click.Context(cli)) == sorted(COMMANDS)


def test_subcommands_other_modules_hold_are_in_their_groups():
    assert {"metadata", "list", "show"} <= set(cli.commands["ledger"].commands)
    assert {"rack", "state", "gc", "check", "replace-id"} <= set(cli.commands["bookie"].commands)
    assert {"nuke", "backup", "restore"} <= set(cli.commands["cluster"].commands)


def test_an_unknown_name_is_not_a_command():
    assert "nosuch" not in cli.commands
    assert cli.commands.get("nosuch") is None
    assert cli.get_command(click.Context(cli), "nosuch") is None


def test_loaded_commands_have_their_examples_once():
    show = cli.commands["ledger"].commands["show"]
    assert cli.commands["ledger"].commands["show"] is show
    assert show.examples and show.epilog.count("Examples:") == 1
    assert cli.commands["bookieformat"].epilog.count("Examples:") == 1


def test_two_threads_asking_at_once_load_a_command_once():
    import threading
    import time

    from bkctl.cli import LazyCommands

    loads = []
    loading, second_asks = threading.Event(), threading.Event()

    def load(name):
        loads.append(name)
        loading.set()
        second_asks.wait(5)
        time.sleep(0.05)  # the other thread is inside commands[...] meanwhile
        return click.Command(name)

    def second():
        loading.wait(5)
        second_asks.set()
        got.append(commands["x"])

    commands = LazyCommands(["x"], load)
    got = []
    threads = [threading.Thread(target=lambda: got.append(commands["x"])), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert loads == ["x"] and len(got) == 2 and got[0] is got[1]
