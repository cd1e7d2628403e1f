"""The completion scripts in completions/, run by REAL bash, zsh and fish against a real cluster.

Each shell loads the committed script the way a user's would (bash:
sourced; zsh: autoloaded from $fpath by compinit; fish: sourced) and asks
``bkctl`` for candidates through click's protocol; ledger ids come from the
test's own cluster in ZooKeeper.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from bkctl.wire import fastpath
from tests.support.cli import REPO as ROOT
from tests.support.ledgers import make_ledgers
from tests.support.terminal import Terminal, bkctl_env

COMPLETIONS = ROOT / "completions"
SHELLS = ("bash", "zsh", "fish")
LEDGER_IDS = [7, 71, 712, 4000]


def _need(program: str) -> str:
    path = shutil.which(program)
    if path is None:
        pytest.fail(f"{program} is needed by these tests: apt-get install {program}", pytrace=False)
    return path


@pytest.fixture
def env(tmp_path, metadata_uri):
    """``bkctl`` on PATH (this source tree), the test's cluster in $BKCTL_METADATA_URI."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "bkctl"
    launcher.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m bkctl "$@"\n')
    launcher.chmod(0o755)
    e = bkctl_env(tmp_path, BKCTL_METADATA_URI=metadata_uri)
    e["PATH"] = f"{bin_dir}{os.pathsep}{e['PATH']}"
    return e


def bash_words(line: str) -> list[str]:
    """COMP_WORDS as bash fills it for ``line``: its default COMP_WORDBREAKS
    also makes each ``:`` a word of its own (``a:b`` -> ``a``, ``:``, ``b``)."""
    words = []
    for w in shlex.split(line):
        parts = w.split(":")
        for i, part in enumerate(parts):
            if i:
                words.append(":")
            if part:
                words.append(part)
    return words + ([""] if line.endswith(" ") or line.endswith(":") else [])


def bash_candidates(env: dict[str, str], line: str, script: Path = COMPLETIONS / "bkctl.bash") -> list[str]:
    """What bash's completion function puts in COMPREPLY for ``line`` (cursor at
    its end), called with the variables bash sets for it."""
    words = bash_words(line)
    program = "\n".join(
        [
            f"source {shlex.quote(str(script))}",
            f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})",
            f"COMP_CWORD={len(words) - 1}",
            f"COMP_LINE={shlex.quote(line)}",
            f"COMP_POINT={len(line)}",
            "_bkctl_completion bkctl",
            'printf "%s\\n" "${COMPREPLY[@]}"',
        ]
    )
    result = subprocess.run(
        [_need("bash"), "--norc", "--noprofile", "-c", program], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr
    return [w for w in result.stdout.splitlines() if w]


def fish_lines(env: dict[str, str], line: str) -> list[str]:
    """What fish offers for ``line``: ``candidate<TAB>description`` lines."""
    program = f"source {shlex.quote(str(COMPLETIONS / 'bkctl.fish'))}; complete -C {shlex.quote(line)}"
    result = subprocess.run(
        [_need("fish"), "--no-config", "-c", program], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr
    return [w for w in result.stdout.splitlines() if w]


def fish_candidates(env: dict[str, str], line: str) -> list[str]:
    return [w.split("\t")[0] for w in fish_lines(env, line)]


def test_fish_keeps_descriptions_whole(env):
    assert "--down\tBookies with a cookie, not registered: stopped or lost." in fish_lines(env, "bkctl bookie list --d")


class Zsh:
    """An interactive zsh in a pty, with compinit and completions/_bkctl on $fpath.

    ``compadd`` is wrapped to also write every candidate it adds to a file:
    that file is what zsh offers for a TAB.
    """

    def __init__(self, env: dict[str, str], tmp: Path):
        fpath = tmp / "zfunc"
        fpath.mkdir()
        shutil.copy(COMPLETIONS / "_bkctl", fpath / "_bkctl")
        self.capture = tmp / "zsh-candidates"
        rc = tmp / "zshrc"
        rc.write_text(
            "\n".join(
                [
                    f"fpath=({fpath} $fpath)",
                    "autoload -Uz compinit && compinit -u -D",
                    "compadd() {",
                    "  # calls that only query or fill arrays go straight through",
                    '  if (( ${@[(I)-[OADE]*]} )); then builtin compadd "$@"; return; fi',
                    "  local -a added",
                    '  builtin compadd -A added "$@"',
                    f'  print -rl -- "${{added[@]}}" >> {self.capture}',
                    '  builtin compadd "$@"',
                    "}",
                    "PS1='ZSH-READY%# '",
                    "",
                ]
            )
        )
        self.term = Terminal([_need("zsh"), "-f", "-i"], dict(env, ZDOTDIR=str(tmp)), rows=50, cols=200)
        self.term.line(f"source {rc}")
        self.term.expect("ZSH-READY")

    def candidates(self, line: str, timeout: float = 20.0) -> list[str]:
        self.capture.unlink(missing_ok=True)
        self.term.send(line + "\t")
        deadline = time.monotonic() + timeout
        while not self.capture.exists() and time.monotonic() < deadline:
            self.term.pump(0.05)
        self.term.settle(0.3)  # the rest of the same TAB
        found = self.capture.read_text().split() if self.capture.exists() else []
        self.term.send("\x03")  # abandon the line
        self.term.expect("ZSH-READY")
        return found

    def close(self) -> None:
        self.term.close()


@pytest.fixture
def zsh(env, tmp_path):
    shell = Zsh(env, tmp_path)
    yield shell
    shell.close()


def candidates(shell: str, request, line: str) -> list[str]:
    env = request.getfixturevalue("env")
    if shell == "bash":
        return bash_candidates(env, line)
    if shell == "fish":
        return fish_candidates(env, line)
    return request.getfixturevalue("zsh").candidates(line)


def ledger_id_commands() -> list[str]:
    """``ledger`` subcommands whose first argument is a ledger id (show now; read, close... later)."""
    from bkctl.cli import cli

    group = cli.commands["ledger"]
    names = []
    for name, cmd in sorted(group.commands.items()):
        arguments = [p for p in cmd.params if isinstance(p, click.Argument)]
        if arguments and arguments[0].name == "ledger_id" and name in ("show", "read"):
            names.append(name)
    return names


# -- the three shells --------------------------------------------------------------


@pytest.mark.parametrize("shell", SHELLS)
def test_command_names_complete(shell, request):
    assert candidates(shell, request, "bkctl led") == ["ledger"]


@pytest.mark.parametrize("shell", SHELLS)
def test_subcommands_complete(shell, request):
    from bkctl.cli import cli

    assert set(candidates(shell, request, "bkctl autorecovery ")) == set(cli.commands["autorecovery"].commands)


@pytest.mark.parametrize("command", ledger_id_commands())
@pytest.mark.parametrize("shell", SHELLS)
def test_ledger_ids_come_from_the_cluster(shell, command, request, zkstore):
    make_ledgers(zkstore, LEDGER_IDS)
    assert candidates(shell, request, f"bkctl ledger {command} 7") == ["7", "71", "712"]
    assert candidates(shell, request, f"bkctl ledger {command} ") == [str(i) for i in LEDGER_IDS]


@pytest.mark.parametrize("shell", SHELLS)
def test_close_offers_open_ledgers_and_decommission_stopped_bookies(shell, request, zkstore):
    from bkctl.wire.metadata.ledger import LedgerMetadata

    md = LedgerMetadata.new(["127.0.0.1:3181", "127.0.0.1:3182"])
    zkstore.ledgers.create(md, ledger_id=81)
    zkstore.ledgers.create(md.closed(4, 50), ledger_id=82)
    assert candidates(shell, request, "bkctl ledger close 8") == ["81"]
    assert candidates(shell, request, "bkctl ledger show 8") == ["81", "82"]
    zkstore.registration.register("10.0.0.5:3181")
    zkstore.cookies.put("10.0.0.6:3181", b'5\nbookieHost: "10.0.0.6:3181"\n')  # a cookie, not running
    assert candidates(shell, request, "bkctl decommission 10.0.0.") in (["10.0.0.6:3181"], ["6:3181"])


@pytest.mark.parametrize("shell", SHELLS)
def test_global_options_complete_after_the_command(shell, request, zkstore):
    make_ledgers(zkstore, LEDGER_IDS)
    assert candidates(shell, request, "bkctl ledger show --json 7") == ["7", "71", "712"]
    assert candidates(shell, request, "bkctl ledger show 7 --js") == ["--json"]
    assert candidates(shell, request, "bkctl ledger read 7 --fo") == ["--format"]


def test_the_shell_completes_global_options_after_the_command(metadata_uri):
    from bkctl.app import App
    from bkctl.cli import cli
    from bkctl.shell.completer import ShellCompleter

    completer = ShellCompleter(cli, App(metadata_uri=metadata_uri, twins=fastpath.selected()))
    assert completer.completions("ledger show 7 --js") == ["--json"]
    assert set(completer.completions("ledger list --json --state ")) == {"open", "in_recovery", "closed"}


@pytest.mark.parametrize("shell", SHELLS)
def test_topic_and_subscription_names_come_from_the_cluster(shell, request, zkstore, tmp_path):
    from bkctl.wire.metadata import paths as P
    from bkctl.wire.proto import pulsar_ml_pb2 as ml

    base = P.managed_ledgers_base(zkstore.root)
    cursor = ml.ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=1, markDeleteEntryId=0)
    for topic in ("orders", "ordinal"):
        zkstore.client.create(
            f"{base}/public/default/persistent/{topic}", ml.ManagedLedgerInfo().SerializeToString(), makepath=True
        )
    zkstore.client.create(f"{base}/public/default/persistent/orders/billing", cursor.SerializeToString())
    assert candidates(shell, request, "bkctl pulsar topic show orde") == ["orders"]
    assert candidates(shell, request, "bkctl pulsar topic show public/default/ordi") == ["public/default/ordinal"]
    assert candidates(shell, request, f"bkctl export --out {tmp_path}/x --topic orders --subscription b") == ["billing"]


def test_the_shell_completes_topics_and_subscriptions(metadata_uri, zkstore):
    from bkctl.app import App
    from bkctl.cli import cli
    from bkctl.shell.cache import MetadataCache
    from bkctl.shell.completer import ShellCompleter
    from bkctl.wire.metadata import paths as P
    from bkctl.wire.proto import pulsar_ml_pb2 as ml

    base = P.managed_ledgers_base(zkstore.root)
    cursor = ml.ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=1, markDeleteEntryId=0)
    zkstore.client.create(
        f"{base}/public/default/persistent/orders", ml.ManagedLedgerInfo().SerializeToString(), makepath=True
    )
    zkstore.client.create(f"{base}/public/default/persistent/orders/billing", cursor.SerializeToString())
    from bkctl import completers

    cache = MetadataCache(metadata_uri, interval=0.2, twins=fastpath.selected()).start()
    try:
        assert cache.refreshed.wait(20)
        completers.set_session_source(cache)
        completer = ShellCompleter(cli, App(metadata_uri=metadata_uri, twins=fastpath.selected()))
        assert completer.completions("pulsar topic show ord") == ["orders"]
        assert completer.completions("export --out x --topic orders --subscription ") == ["billing"]
    finally:
        completers.set_session_source(None)
        cache.close()


def test_fish_completes_directories_for_export_out(env, tmp_path):
    (tmp_path / "exports-here").mkdir()
    (tmp_path / "exports-file").write_text("")
    assert fish_candidates(env, f"bkctl export --out {tmp_path}/exports-") == [f"{tmp_path}/exports-here/"]


BOOKIES = ["10.0.0.7:3181", "10.0.0.8:3181"]


@pytest.mark.parametrize("shell", SHELLS)
def test_bookie_ids_complete_across_their_colon(shell, request, zkstore):
    for b in BOOKIES:
        zkstore.registration.register(b)
    assert sorted(candidates(shell, request, "bkctl bookie info 10.0.0.")) == BOOKIES
    # bash replaces only what follows the colon, so that is what its COMPREPLY holds
    expected = ["3181"] if shell == "bash" else ["10.0.0.7:3181"]
    assert candidates(shell, request, "bkctl bookie info 10.0.0.7:31") == expected
    assert candidates(shell, request, "bkctl ledger list --bookie 10.0.0.8:") == (
        ["3181"] if shell == "bash" else ["10.0.0.8:3181"]
    )


def test_bash_completes_a_bookie_id_on_the_command_line(env, zkstore, tmp_path):
    """A real interactive bash, TAB after the colon of host:port."""
    for b in BOOKIES:
        zkstore.registration.register(b)
    term = Terminal([_need("bash"), "--norc", "--noprofile", "-i"], dict(env, PS1="BASH-READY$ "), rows=20, cols=200)
    try:
        term.line(f"source {shlex.quote(str(COMPLETIONS / 'bkctl.bash'))}")
        term.expect("BASH-READY")
        term.send("bkctl bookie info 10.0.0.7:31\t")
        term.expect_screen(r"(?m)bkctl bookie info 10\.0\.0\.7:3181$")
        term.send("\x03")
    finally:
        term.close()


def test_zsh_completes_every_time_after_autoloading(zsh):
    # click's script, autoloaded, would offer nothing on the second TAB of a session
    assert zsh.candidates("bkctl led") == ["ledger"]
    assert zsh.candidates("bkctl led") == ["ledger"]
    assert zsh.candidates("bkctl ledger li") == ["list"]


def test_choice_values_and_options(env):
    assert bash_candidates(env, "bkctl ledger list --state ") == ["open", "in_recovery", "closed"]
    assert "--bookie" in bash_candidates(env, "bkctl ledger list --")


def test_cluster_names_from_the_config(env):
    config = Path(env["XDG_CONFIG_HOME"]) / "bkctl" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        '[clusters.prod]\nmetadata_uri = "zk://a:2181/l"\n[clusters.staging]\nmetadata_uri = "zk://b:2181/l"\n'
    )
    assert bash_candidates(env, "bkctl shell --cluster ") == ["prod", "staging"]
    assert fish_candidates(env, "bkctl shell --cluster st") == ["staging"]


def test_unreachable_cluster_offers_nothing_and_prints_nothing(env):
    from bkctl.sandbox.zookeeper import free_port

    env = dict(env, BKCTL_METADATA_URI=f"zk+hierarchical://127.0.0.1:{free_port()}/ledgers")
    assert bash_candidates(env, "bkctl ledger show ") == []  # (and bash_candidates checks stderr)


# -- the scripts and their installation ---------------------------------------------------


def test_completion_show_prints_the_committed_scripts(env):
    for shell, name in (("bash", "bkctl.bash"), ("zsh", "_bkctl"), ("fish", "bkctl.fish")):
        shown = subprocess.run(
            ["bkctl", "completion", "show", shell], env=env, capture_output=True, text=True, check=True
        ).stdout
        assert shown == (COMPLETIONS / name).read_text(), shell


@pytest.mark.parametrize(
    "shell,where,committed",
    [
        ("bash", ".local/share/bash-completion/completions/bkctl", "bkctl.bash"),
        ("zsh", ".zfunc/_bkctl", "_bkctl"),
        ("fish", ".config/fish/completions/bkctl.fish", "bkctl.fish"),
    ],
)
def test_completion_install_writes_the_standard_place(shell, where, committed, env):
    env = {k: v for k, v in env.items() if k not in ("XDG_DATA_HOME", "XDG_CONFIG_HOME")}
    result = subprocess.run(["bkctl", "completion", "install", shell], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    path = Path(env["HOME"]) / where
    assert path.read_text() == (COMPLETIONS / committed).read_text()
    assert str(path) in result.stdout
    if shell == "zsh":
        assert "fpath=(~/.zfunc $fpath)" in result.stdout
    if shell == "bash":  # and what was installed works
        assert bash_candidates(env, "bkctl led", script=path) == ["ledger"]


def test_completion_install_guesses_the_shell_and_honours_dir(env, tmp_path):
    result = subprocess.run(
        ["bkctl", "completion", "install", "--dir", str(tmp_path / "d")],
        env=dict(env, SHELL="/usr/bin/fish"),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "d" / "bkctl.fish").exists()
    result = subprocess.run(
        ["bkctl", "completion", "install"], env=dict(env, SHELL="/bin/tcsh"), capture_output=True, text=True
    )
    assert result.returncode == 2 and "bkctl completion install bash" in result.stderr
