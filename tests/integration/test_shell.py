"""``bkctl shell`` in a real pseudo-terminal (pexpect) against a real ZooKeeper.

The shell is the real program (``python -m bkctl shell``); the terminal is a
pty whose output is read as plain text: escape sequences are dropped, and
cursor position requests are answered as a terminal would, so that
prompt-toolkit draws its bottom toolbar.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from bkctl.wire import fastpath
from bkctl.wire.metadata.ledger import LedgerMetadata
from tests.support.cli import REPO
from tests.support.ledgers import ENSEMBLE, make_ledgers
from tests.support.ports import Silent
from tests.support.terminal import Terminal, bkctl_env, complete, ended

pytestmark = pytest.mark.integration


def require_shell_command() -> None:
    from bkctl.cli import cli

    if "shell" not in cli.commands:
        pytest.fail(
            "bkctl shell is not registered: add `from .commands import shell as shell_cmd` and "
            "`cli.add_command(shell_cmd.shell)` to bkctl/cli.py::_register",
            pytrace=False,
        )


@pytest.fixture
def start_shell(tmp_path):
    require_shell_command()
    started: list[Terminal] = []

    def start(
        uri: str | None, *args: str, env: dict[str, str] | None = None, rows: int = 40, cols: int = 160
    ) -> Terminal:
        argv = [sys.executable, "-m", "bkctl", "shell", *(["-m", uri] if uri else []), *args]
        term = Terminal(argv, env or bkctl_env(tmp_path), rows=rows, cols=cols)
        started.append(term)
        term.expect(r"bkctl(:\S+)?>")
        return term

    yield start
    for term in started:
        term.close()


def make_many_ledgers(zkstore, count: int, closed: bool = False) -> None:
    """``count`` ledgers with ids 0..count-1 (one znode each, written in parallel); ``closed``:
    empty and closed (nothing to ask the bookies)."""
    from bkctl.wire.metadata.ledger import serialize_ledger_metadata

    md = LedgerMetadata.new(ENSEMBLE)
    md = md.closed(-1, 0) if closed else md
    data = serialize_ledger_metadata(md)
    zkstore.ledgers.create(md, ledger_id=0)  # creates the parent znodes
    pending = [zkstore.client.create_async(zkstore.ledgers.path(i), data) for i in range(1, count)]
    for result in pending:
        result.get(timeout=30)


# -- the tests -----------------------------------------------------------------


def test_completion_menu_offers_subcommands(start_shell, metadata_uri):
    from bkctl.cli import cli

    term = start_shell(metadata_uri)
    ledger = cli.commands["ledger"]
    if {"read", "recover"} <= set(ledger.commands):
        seen = complete(term, "ledger re", r"recover")
        assert "read" in seen and "recover" in seen
    else:
        seen = complete(term, "autorecovery ", r"underreplicated")
        for sub in cli.commands["autorecovery"].commands:
            assert sub in seen, sub
    term.send("\x03")  # Ctrl-C at the prompt: clears the line, keeps the shell
    term.line("autorecovery status")
    term.expect(r"autorecovery\s+enabled")


def test_choice_values_and_options_complete(start_shell, metadata_uri):
    term = start_shell(metadata_uri)
    seen = complete(term, "ledger list --state ", r"in_recovery")
    assert "open" in seen and "closed" in seen
    term.send("\x03")
    seen = complete(term, "ledger list --", r"--bookie")
    assert "--state" in seen


def test_ledger_id_completes_and_command_prints_a_table(start_shell, metadata_uri, zkstore):
    make_ledgers(zkstore, [4711, 4712, 90001])
    zkstore.registration.register("127.0.0.1:3181")
    term = start_shell(metadata_uri)
    term.expect_screen(r"bookies 1 writable, 0 read-only  autorecovery enabled")
    term.settle(0.5)  # ledger ids come right after the bookies
    seen = complete(term, "ledger show 47", r"4712")
    assert "4711" in seen
    term.send("\x03")
    complete(term, "ledger show 900", r"show 90001")  # the only one: Tab until it is in the line
    term.send("\r")
    term.expect(r"ledger\s+90001")
    term.expect(r"state\s+OPEN")
    term.line("ledger list --state open")
    term.expect(r"ledger\s+state\s+E/Qw/Qa")
    term.expect(r"4711\s+OPEN\s+2/2/2")
    term.expect(r"90001\s+OPEN")


def test_ctrl_c_cancels_a_long_command_and_keeps_the_session(start_shell, metadata_uri, zkstore):
    make_ledgers(zkstore, [4999])
    term = start_shell(metadata_uri)
    term.line("ledger show 4999")  # the session's ZooKeeper session is open...
    term.expect(r"ledger\s+4999")
    # ...and a command waits for a ZooKeeper that does not answer (up to its 10 s connection
    # timeout); Ctrl-C once it is connecting, not while the shell may still be taking the line
    with Silent() as silent:
        term.line(f"-m zk+hierarchical://{silent.address}/ledgers ledger list")
        term.wait_until(silent.called, "the command connecting to ZooKeeper")
        before = term.mark
        term.send("\x03")
        term.expect("bkctl: aborted")
        term.expect(r"bkctl>")
    assert "error" not in term.text[before : term.mark]  # Ctrl-C ended it, not the connection timeout
    term.line("ledger show 4999")  # the session goes on, on the same cluster
    term.expect(r"ledger\s+4999")
    assert term.child.isalive()


def test_failing_commands_leave_the_shell_running(start_shell, metadata_uri):
    term = start_shell(metadata_uri)
    term.line("ledger show 123456")
    term.expect(r"bkctl: error: .*123456")
    term.line("no-such-command")
    term.expect(r"No such command")
    term.line('ledger show "unclosed')
    term.expect(r"bkctl: error: cannot parse the line")
    term.line("--json autorecovery status")  # options given on one line last for that line only
    term.expect(r'"enabled": true')
    term.line("autorecovery status")
    term.expect(r"autorecovery\s+enabled")
    term.line("shell")
    term.expect("already in the shell")
    assert term.child.isalive()
    term.send("\x04")  # Ctrl-D leaves
    term.child.expect(pexpect.EOF, timeout=10)
    assert ended(term.child).exitstatus == 0


def test_json_format_switch(start_shell, metadata_uri):
    term = start_shell(metadata_uri)
    term.line("\\j")
    term.expect("output: json")
    term.line("autorecovery status")
    term.expect(
        r'\{\n  "auditor": null,\n  "auditor_keeps_status": false,\n  "auditor_waits_for": "no auditor'
    )  # indented on a terminal
    term.line("format table")
    term.expect("output: table")
    term.line("autorecovery status")
    term.expect(r"autorecovery\s+enabled")


def test_destructive_command_asks_first(start_shell, metadata_uri, zkstore):
    make_ledgers(zkstore, [7])
    term = start_shell(metadata_uri)
    term.line("ledger delete 7")
    term.expect(r"Delete ledger 7\? \[y/N\]")
    term.line("n")
    term.expect("declined")
    assert zkstore.ledgers.exists(7)
    term.line("ledger delete 7")
    term.expect(r"Delete ledger 7\? \[y/N\]")
    term.line("y")
    term.expect("ledger 7 deleted")
    assert not zkstore.ledgers.exists(7)


def test_history_survives_a_restart(start_shell, metadata_uri, zkstore, tmp_path):
    make_ledgers(zkstore, [31337])
    env = bkctl_env(tmp_path)
    term = start_shell(metadata_uri, env=env)
    term.line("autorecovery status")
    term.expect(r"autorecovery\s+enabled")
    term.line("ledger list")
    term.expect("31337")
    term.send("\x04")
    term.child.expect(pexpect.EOF, timeout=10)
    history = Path(env["XDG_DATA_HOME"]) / "bkctl" / "history"
    assert "autorecovery status" in history.read_text()
    assert history.stat().st_mode & 0o077 == 0

    term = start_shell(metadata_uri, env=env)
    term.send("\x1b[A")  # Up: the last line of the previous session
    term.settle(0.3)
    term.send("\r")
    term.expect("31337")
    term.send("\x12")  # Ctrl-R: search the history
    term.settle(0.2)
    term.send("autorec")
    term.settle(0.3)
    term.send("\r")  # accept the match
    term.settle(0.2)
    term.send("\r")  # run it
    term.expect(r"autorecovery\s+enabled")


def test_long_output_goes_through_the_pager(start_shell, metadata_uri, zkstore, tmp_path):
    make_many_ledgers(zkstore, 100)
    paged = tmp_path / "paged.txt"
    env = bkctl_env(tmp_path, PAGER=f"cat > {paged}")
    term = start_shell(metadata_uri, env=env, rows=20)
    term.line("ledger list")
    term.expect(r"bkctl>")
    term.wait_until(lambda: paged.exists() and len(paged.read_text().split()) == 100, f"100 lines in {paged}")
    assert paged.read_text().split() == [str(i) for i in range(100)]
    term.line("ledger show 5")  # short: straight to the terminal
    term.expect(r"ledger\s+5\b")
    assert "ledger" not in paged.read_text()


def test_use_switches_cluster(start_shell, metadata_uri, zkstore):
    from bkctl.wire.metadata.zk import ZKMetadataStore

    other = metadata_uri.rsplit("/", 1)[0] + "/other"
    with ZKMetadataStore(other, timeout=20, twins=fastpath.selected()) as store:
        store.cluster.init()
        make_ledgers(store, [4242])
    make_ledgers(zkstore, [1111])
    term = start_shell(metadata_uri)
    term.line("ledger list")
    term.expect(r"\b1111\b")
    term.line(f"use {other}")
    term.expect(re.escape(f"cluster {other}"))
    term.line("ledger list")
    term.expect(r"\b4242\b")
    assert "1111" not in term.text[term.mark :]
    term.line(f"-m {metadata_uri} ledger list")  # one line on another cluster...
    term.expect(r"\b1111\b")
    term.line("ledger list")  # ...and back on the session's
    term.expect(r"\b4242\b")


def test_use_a_named_cluster(start_shell, metadata_uri, tmp_path):
    env = bkctl_env(tmp_path)
    config = Path(env["XDG_CONFIG_HOME"]) / "bkctl" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[clusters.prod]\nmetadata_uri = "{metadata_uri}"\n')
    term = start_shell(None, env=env)
    assert "no cluster: use CLUSTER or use URI" in term.text
    complete(term, "use pr", r"use prod")  # Tab until it is in the line, not only in the menu
    term.send("\r")
    term.expect(r"cluster prod:")
    term.expect(r"bkctl:prod>")
    term.line("autorecovery status")
    term.expect(r"autorecovery\s+enabled")


# -- without a terminal ------------------------------------------------------------


def run_script(tmp_path, uri: str, script: str) -> subprocess.CompletedProcess:
    require_shell_command()
    return subprocess.run(
        [sys.executable, "-m", "bkctl", "shell", "-m", uri],
        input=script,
        text=True,
        capture_output=True,
        env=bkctl_env(tmp_path),
        timeout=120,
    )


def test_script_mode_runs_every_line_and_returns_the_last_failure(tmp_path, metadata_uri, zkstore):
    make_ledgers(zkstore, [5])
    result = run_script(
        tmp_path,
        metadata_uri,
        "\n".join(
            [
                "# a comment, then a blank line",
                "",
                "ledger show 5",
                "ledger show 6          # not found: 3",
                "no-such-command        # usage: 2",
                "format json",
                "ledger show 5",
                "ledger delete 5        # no terminal: refuses without --force (2)",
                "ledger show 999        # the last failure: 3",
                "autorecovery status",
            ]
        )
        + "\n",
    )
    assert result.returncode == 3, result.stderr
    assert re.search(r"ledger\s+5", result.stdout)
    assert '"ledger_id":5' in result.stdout
    assert "refusing to delete ledger 5 without --force" in result.stderr
    assert result.stdout.rstrip().endswith("}")  # json stayed on for the last line
    assert zkstore.ledgers.exists(5)


def test_script_mode_all_good_exits_0(tmp_path, metadata_uri):
    result = run_script(tmp_path, metadata_uri, "autorecovery status\n\\j\nautorecovery status\n")
    assert result.returncode == 0, result.stderr
    assert '"enabled":true' in result.stdout


def test_script_mode_stops_on_ctrl_c(tmp_path, metadata_uri):
    import signal

    require_shell_command()
    with Silent() as silent:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bkctl", "shell", "-m", metadata_uri],
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=bkctl_env(tmp_path),
        )
        proc.stdin.write(f"-m zk+hierarchical://{silent.address}/ledgers ledger list\nautorecovery status\n")
        proc.stdin.close()
        proc.stdin = None  # (communicate() would flush it)
        # waiting for a ZooKeeper that does not answer: the script is running its first line
        silent.wait_for_caller()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "aborted" in err and "autorecovery" not in out


def test_importing_the_shell_loads_neither_kazoo_nor_twisted():
    code = (
        "import sys, bkctl.shell.repl, bkctl.shell.completer, bkctl.shell.lexer, bkctl.shell.cache, "
        "bkctl.shell.pager, bkctl.commands.shell\n"
        "heavy = [m for m in ('kazoo', 'twisted') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))


def test_less_answers_every_key_after_g_and_a_search(start_shell, metadata_uri, zkstore, tmp_path):
    """Issue 54, item 6: after `G` or a search the shell's pager stopped answering (keys echoed
    as `(END)q` and leaked into the shell as "No such command 'q'").  Output larger than a pipe
    holds keeps the command writing until less reads it all -- at `G` -- and the shell then put
    its own terminal modes back while less was still on the screen.  The real less, as $PAGER is
    by default."""
    make_many_ledgers(zkstore, 1000, closed=True)
    # wide enough that less does not wrap a JSON line (its wrap marks would cut a key in two)
    term = start_shell(metadata_uri, env=bkctl_env(tmp_path, PAGER="less -FRX"), rows=20, cols=1000)
    term.line("ledger list --json")  # some 200 KiB: more than the pipe to less holds
    term.expect(r'"ledger_id": ?3\b')  # less shows the first screen
    term.send("G")  # less reads everything: the command ends
    term.expect(r'"ledger_id": ?999\b')
    term.expect(r"\(END\)")
    term.settle(1.0)
    term.send("g")  # keys still reach less: back to the top
    term.expect(r'"ledger_id": ?3\b')
    term.send("/ledger_id..420\r")
    term.expect(r'"ledger_id": ?420\b')
    term.send("q")
    term.expect(r"bkctl>")
    term.line("ledger show 5")
    term.expect(r"ledger\s+5\b")
    assert "No such command" not in term.text and "(END)g" not in term.text, term.text[-2000:]


def test_top_runs_full_screen_from_the_shell_and_q_or_ctrl_c_comes_back(start_shell, metadata_uri, tmp_path):
    """Issue 54, item 7: `top` in the shell went into the pager (one frozen frame, Ctrl-C ignored,
    two q's).  It draws on the whole screen, and one q (or Ctrl-C) brings the prompt back."""
    term = start_shell(metadata_uri, env=bkctl_env(tmp_path, PAGER="less -FRX"), rows=30)
    for leave in ("q", "\x03"):
        term.line("top --interval 0.3")
        term.expect_screen(r"bkctl top ")
        term.expect_screen(r"sort bookie \(ascending\).*q quit")  # the live view's footer: not a pager
        term.expect_screen(r"zookeeper ok")
        clock = re.compile(r"bkctl top .*?(\d\d:\d\d:\d\d)")
        first = clock.search(term.screen.display())
        assert first, term.screen.display()
        first = first.group(1)
        # redrawn: its clock moves (a frozen frame in a pager would not)
        term.wait_until(
            lambda clock=clock, first=first: (
                (moved := clock.search(term.screen.display())) is not None and moved.group(1) != first
            ),
            f"the view's clock past {first}",
        )
        term.send(leave)
        term.expect(r"bkctl>")
    term.line("ledger list")
    term.expect(r"bkctl>")
    assert "No such command" not in term.text and "(END)" not in term.text, term.text[-2000:]
