"""Ctrl-C in ``bkctl shell``, in a real pseudo-terminal (pexpect), against a real ZooKeeper.

Ctrl-C on a long-running command stops it and gives the prompt back: the
shell lives on, the terminal's modes are those it had, what the command held
is let go (the daemon's vote and session, Spark's JVM), and the same command
runs again.  Before: `autorecovery run` could not run twice in a shell (the
reactor is not restartable), a 5 s exit timer it armed ended the shell
(terminal left raw), its SIGINT handler stayed; an export interrupted while
Spark started broke every later export of the shell.
"""

from __future__ import annotations

import glob
import sys
import termios

import pexpect
import pytest

from tests.support.ledgers import ENSEMBLE, make_ledgers
from tests.support.terminal import Terminal, bkctl_env, ended
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def start_shell(tmp_path):
    started: list[Terminal] = []

    def start(uri: str, **env: str) -> Terminal:
        term = Terminal([sys.executable, "-m", "bkctl", "shell", "-m", uri], bkctl_env(tmp_path, **env), cols=240)
        started.append(term)
        term.expect(r"bkctl>")
        return term

    yield start
    for term in started:
        term.close()


def modes(term: Terminal) -> list:
    """The terminal's termios modes (the pty's master reports its slave's)."""
    return termios.tcgetattr(term.child.child_fd)


def answers(term: Terminal) -> None:
    """The shell reads and runs the next line."""
    term.line("format table")
    term.expect("output: table")


def ctrl_c(term: Terminal) -> None:
    term.send("\x03")


def test_ctrl_c_stops_autorecovery_run_and_the_shell_goes_on(start_shell, metadata_uri, zkstore):
    term = start_shell(metadata_uri)
    term.line("autorecovery run --bookie-id shell-daemon:3181")
    term.expect(r"autorecovery started for")
    assert zkstore.auditor.current() == "shell-daemon:3181"
    cooked = modes(term)  # as a command runs: what the shell must leave
    ctrl_c(term)
    term.expect(r"autorecovery stopped")
    wait_for(lambda: zkstore.auditor.current() is None, what="the daemon's vote gone")
    answers(term)
    # again in the same shell (the reactor could not run twice), past the 5 s the old exit timer waited
    term.line("autorecovery run --bookie-id shell-daemon:3181")
    term.expect(r"autorecovery started for")
    assert modes(term) == cooked
    ctrl_c(term)
    term.expect(r"autorecovery stopped")
    answers(term)
    assert "error" not in term.text and "did not finish" not in term.text
    starts = term.text.count("shell-daemon:3181 is the auditor")
    assert starts == 2 and term.text.count("autorecovery started for") == 2  # once per run, not twice
    # Ctrl-C is Ctrl-C again for the next command (the daemon's SIGINT handler is gone)
    make_ledgers(zkstore, [7])  # on ENSEMBLE's bookies, none of them running
    # its other copy's bookie registered, so the ledger is not lost and the decommission waits
    # for the daemons (with both gone it would say so and end at once)
    zkstore.registration.register(ENSEMBLE[0])
    zkstore.auditor.cast_vote("elsewhere:3181")  # an auditor that never moves anything
    zkstore.underreplication.set_lost_bookie_recovery_delay(0)  # (written by an auditor that starts)
    term.line(f"decommission {ENSEMBLE[1]} --force --wait 600")
    term.expect(r"audit triggered")
    ctrl_c(term)
    term.expect("bkctl: aborted")
    answers(term)
    term.send("\x04")
    term.child.expect(pexpect.EOF, timeout=30)
    assert modes(term) == cooked  # the shell gone, the terminal as it was
    assert ended(term.child).exitstatus == 0


def test_status_line_says_whether_an_auditor_runs(start_shell, metadata_uri, zkstore):
    term = start_shell(metadata_uri)
    term.expect_screen(r"autorecovery enabled but no auditor running  ")  # the switch alone said "enabled"
    zkstore.auditor.cast_vote("auditor-one:3181")
    term.line("autorecovery whoisauditor")  # a command: the toolbar is read again after it
    term.expect_screen(r"autorecovery enabled, auditor auditor-one:3181  ")
    zkstore.underreplication.disable()
    term.line("autorecovery whoisauditor")
    term.expect_screen(r"autorecovery disabled  ")


def test_ctrl_c_on_tail_bench_and_export_while_spark_starts(
    start_shell, bookie_cluster, metadata_uri, zkstore, writer, tmp_path
):
    bookie_cluster(3)
    ledger = writer.create(3, 2, 2)
    for payload in (b"one", b"two", b"three", b"four"):  # one at a time: each carries the LAC of the one before
        ledger.add(payload)  # left open: a tail follows it until Ctrl-C
    local_dirs = tmp_path / "spark-local"
    local_dirs.mkdir()
    term = start_shell(metadata_uri, SPARK_LOCAL_DIRS=str(local_dirs))

    term.line(f"ledger tail {ledger.ledger_id} --from 0")
    term.expect(r"\bthree\b")
    cooked = modes(term)
    ctrl_c(term)
    answers(term)

    term.line("bench --entries 10000000 --inflight 64")
    wait_for(lambda: len(list(zkstore.ledgers.ids())) == 2, what="the bench's ledger")
    ctrl_c(term)
    term.expect("bkctl: aborted")
    answers(term)
    wait_for(lambda: list(zkstore.ledgers.ids()) == [ledger.ledger_id], what="the bench's ledger deleted")

    # Spark's context being built in the JVM (its block manager's folder made): Ctrl-C
    term.line(f"export -l {ledger.ledger_id} --include-open -o {tmp_path / 'first'}")
    wait_for(lambda: glob.glob(str(local_dirs / "blockmgr-*")), timeout=300, what="Spark starting")
    ctrl_c(term)
    term.expect("bkctl: aborted", timeout=300)
    answers(term)
    term.line(f"export -l {ledger.ledger_id} --include-open -o {tmp_path / 'second'}")
    m = term.expect(r"exported 3 entries|bkctl: error: .*", timeout=300)
    assert m.group(0).startswith("exported"), m.group(0)
    assert "SparkContext" not in term.text
    answers(term)
    term.line(f"ledger tail {ledger.ledger_id} --from 0")  # cooked again for a command
    term.expect(r"\bthree\b")
    assert modes(term) == cooked, (modes(term), cooked)
    ctrl_c(term)
    answers(term)
