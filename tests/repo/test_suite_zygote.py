"""The suite's fork server (tests/support/zygote.py): a process forked from it is what an exec'd
``python -m`` would be - its own pid, streams, environment, working directory and exit status,
killed by pid - and a request it cannot serve faithfully is refused, for the caller to exec."""

from __future__ import annotations

import os
import signal
import socket
import subprocess

from tests.support import zygote
from tests.support.cli import BKCTL, REPO


def test_a_forked_bkctl_answers_as_an_execd_one(tmp_path):
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(REPO))
    dead = "zk+hierarchical://127.0.0.1:1/ledgers"  # nothing listens there
    for args, stdin in (
        (["--version"], b""),
        (["ledger", "show", "notanumber"], b""),
        (["-m", dead, "--timeout", "0.5", "--json", "ledger", "show", "7"], b""),
    ):
        forked = zygote.run("bkctl", args, env=env, cwd=str(tmp_path), input=stdin, timeout=60)
        assert forked is not None
        execd = subprocess.run([*BKCTL, *args], input=stdin, capture_output=True, env=env, cwd=tmp_path, timeout=60)
        assert (forked.returncode, forked.stdout, forked.stderr) == (execd.returncode, execd.stdout, execd.stderr)


def test_the_child_has_the_asked_environment_directory_and_session(tmp_path):
    out = tmp_path / "out"
    script = (
        "import os, sys; print(os.getcwd(), os.environ['ZYGOTE_PROBE'], os.getsid(0) == os.getpid(), "
        "os.getppid() != int(sys.argv[1]))"
    )
    with open(out, "wb") as f, open(os.devnull, "rb") as devnull:
        proc = zygote.spawn(
            "tests.support.run_code",
            [str(os.getpid()), script],
            env=dict(os.environ, ZYGOTE_PROBE="here"),
            cwd=str(tmp_path),
            stdin=devnull.fileno(),
            stdout=f.fileno(),
            stderr=f.fileno(),
        )
        assert proc is not None
        assert proc.wait(timeout=60) == 0
    assert out.read_text().split() == [str(tmp_path), "here", "True", "True"]


def test_standard_input_reaches_the_child_and_both_outputs_come_back():
    done = zygote.run(
        "tests.support.run_code",
        [
            "import sys; data = sys.stdin.buffer.read(); "
            "sys.stdout.buffer.write(data[::-1]); sys.stderr.write('e' * len(data)); "
            "sys.exit(len(data) % 7)"
        ],
        env=dict(os.environ),
        cwd=None,
        input=b"x" * 200_000 + b"yz",
        timeout=60,
    )
    assert done is not None
    assert done.stdout == b"zy" + b"x" * 200_000 and done.stderr == b"e" * 200_002
    assert done.returncode == 200_002 % 7


def test_a_killed_child_reports_the_signal_and_poll_waits_for_nothing(tmp_path):
    with open(os.devnull, "rb") as devnull, open(os.devnull, "wb") as sink:
        proc = zygote.spawn(
            "tests.support.run_code",
            ["0", "import time; time.sleep(600)"],
            env=dict(os.environ),
            stdin=devnull.fileno(),
            stdout=sink.fileno(),
            stderr=sink.fileno(),
        )
    assert proc is not None
    assert proc.poll() is None
    try:
        proc.wait(timeout=0.2)
        raise AssertionError("a sleeping child was waited for")
    except subprocess.TimeoutExpired:
        pass
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL and proc.poll() == -signal.SIGKILL


def test_what_imports_read_must_match_or_the_caller_execs():
    with open(os.devnull, "rb") as devnull:
        fd = devnull.fileno()
        other = "1" if os.environ.get("BKCTL_FASTPATHS") == "0" else "0"
        assert (
            zygote.spawn(
                "bkctl", ["--version"], env=dict(os.environ, BKCTL_FASTPATHS=other), stdin=fd, stdout=fd, stderr=fd
            )
            is None
        )
        assert (
            zygote.spawn(
                "bkctl", ["--version"], env=dict(os.environ, PYTHONHASHSEED="7"), stdin=fd, stdout=fd, stderr=fd
            )
            is None
        )
        assert (
            zygote.spawn(
                "bkctl", ["--version"], env=dict(os.environ, BKCTL_TEST_EXEC="1"), stdin=fd, stdout=fd, stderr=fd
            )
            is None
        )


def test_a_status_that_comes_with_the_pid_is_not_lost():
    """A child that exits at once: the zygote's pid line and status line can arrive in one read
    (under load, ``int(b'26987\\n2\\n')`` failed a CLI test); the status is the process's all the same."""
    ours, zygotes = socket.socketpair()
    with zygotes:
        zygotes.sendall(b"4242\n2\n")
    pid, rest = zygote.read_pid(ours)
    assert (pid, rest) == (4242, b"2\n")
    assert zygote.ForkedProcess(["x"], pid, ours, rest).wait(timeout=5) == 2
