"""bookied's autorecovery daemon (autoRecoveryDaemonEnabled=true) in a child process: at the CPU
priority autoRecoveryDaemonCpuPriority names, started again when it dies, gone with its bookie
(SIGTERM or SIGKILL), its figures in the bookie's /metrics.  Real ZooKeeper, real bookieds."""

from __future__ import annotations

import os
import signal
import urllib.request

import pytest

from bkctl.bookied.child_process import autogroup_enabled
from bkctl.sandbox.zookeeper import pid_alive
from tests.support.waiting import wait_for

SETTINGS = dict(autoRecoveryDaemonEnabled="true", auditorPeriodicBookieCheckInterval=0, auditorPeriodicCheckInterval=0)


def daemon_of(bookie) -> int:
    """The pid of the bookie's one child, once it runs."""
    return wait_for(
        lambda: (lambda c: c[0] if len(c) == 1 else None)(bookie.children()),
        timeout=60,
        what=lambda: f"one child of bookied {bookie.proc.pid}, saw {bookie.children()}",
    )


def figures(bookie) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{bookie.http_port}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    return {
        line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines() if line.startswith("autorecovery_")
    }


@pytest.mark.parametrize("priority", ["idle", "low", "normal"])
def test_the_daemons_process_runs_at_the_configured_priority(bookies, priority):
    bookie = bookies("b0", autoRecoveryDaemonCpuPriority=priority, **SETTINGS).start()
    child = daemon_of(bookie)
    own_nice = os.getpriority(os.PRIO_PROCESS, bookie.proc.pid)
    wanted = {"idle": (os.SCHED_IDLE, own_nice), "low": (os.SCHED_OTHER, 19), "normal": (os.SCHED_OTHER, own_nice)}

    def seen():
        return os.sched_getscheduler(child), os.getpriority(os.PRIO_PROCESS, child)

    # the child sets it as it starts: its log says so once the daemon runs (a daemon at nice 19 on
    # a machine whose every core is busy -- a whole suite's workers -- starts slowly, by design)
    wait_for(lambda: "CPU priority" in bookie.log_tail(200), timeout=240, what="the daemon running")
    assert seen() == wanted[priority]
    assert os.sched_getscheduler(bookie.proc.pid) == os.SCHED_OTHER  # the bookie keeps its own
    # below normal, a session of its own: with autogroup on, its CPU group ranked at nice 19 too
    assert (os.getsid(child) == child) is (priority != "normal")
    if priority != "normal" and autogroup_enabled():
        assert autogroup_nice(child) == 19 and autogroup_nice(bookie.proc.pid) != 19
        assert "in a CPU group of its own at nice 19" in bookie.log_tail(200)


def autogroup_nice(pid: int) -> int:
    with open(f"/proc/{pid}/autogroup") as f:  # "/autogroup-123 nice 19"
        return int(f.read().split()[-1])


def test_a_killed_daemon_is_started_again_and_its_figures_carry_over(bookies):
    bookie = bookies("b0", **SETTINGS).serve_http().start()
    first = daemon_of(bookie)
    wait_for(
        lambda: figures(bookie).get("autorecovery_is_auditor") == 1,
        timeout=60,
        what="the daemon elected, in the bookie's /metrics",
    )
    before = figures(bookie)
    assert (
        before["autorecovery_elections_won_total"],
        before["autorecovery_daemon_running"],
        before["autorecovery_daemon_restarts_total"],
    ) == (1, 1, 0)

    os.kill(first, signal.SIGKILL)
    wait_for(
        lambda: figures(bookie)["autorecovery_daemon_running"] == 0,
        timeout=30,
        what="the bookie's /metrics to say its daemon is gone",
    )  # during the restart delay
    wait_for(lambda: bookie.children() not in ([], [first]), timeout=60, what="a new daemon process")
    second = daemon_of(bookie)
    assert second != first and bookie.proc.poll() is None
    wait_for(
        lambda: figures(bookie).get("autorecovery_elections_won_total") == 2,
        timeout=60,
        what=lambda: f"the second election counted beside the first, saw {figures(bookie)}",
    )
    after = figures(bookie)
    assert (
        after["autorecovery_is_auditor"],
        after["autorecovery_daemon_running"],
        after["autorecovery_daemon_restarts_total"],
    ) == (1, 1, 1)
    assert "autorecovery daemon" in bookie.log_tail(200) and "starting it again" in bookie.log_tail(200)


def test_the_daemon_goes_with_its_bookie_stopped_or_killed(bookies, zkstore):
    stopped = bookies("b0", **SETTINGS).start()
    killed = bookies("b1", **SETTINGS).start()
    stopped_daemon, killed_daemon = daemon_of(stopped), daemon_of(killed)
    wait_for(lambda: len(zkstore.auditor.votes()) == 2, timeout=60, what="both daemons voting")

    os.kill(stopped.proc.pid, signal.SIGTERM)
    assert stopped.proc.wait(timeout=60) == 0
    assert not pid_alive(stopped_daemon)  # stopped by the bookie before it exited

    os.kill(killed.proc.pid, signal.SIGKILL)
    killed.proc.wait(timeout=60)
    wait_for(lambda: not pid_alive(killed_daemon), timeout=30, what="the killed bookie's daemon to end")
    wait_for(
        lambda: zkstore.auditor.votes() == [],
        timeout=30,
        what=lambda: f"the daemons' votes to go, saw {zkstore.auditor.votes()}",
    )
