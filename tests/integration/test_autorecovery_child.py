"""bookied's autorecovery daemon runs in a child process of the bookie's (autoRecoveryDaemonEnabled=true):
real ZooKeeper, real bookieds, real signals."""
from __future__ import annotations

import os
import signal

import pytest

from tests.support.bookieproc import pid_running
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

DAEMON = dict(autoRecoveryDaemonEnabled="true", zkTimeout=4000, auditorPeriodicBookieCheckInterval=0,
              auditorPeriodicCheckInterval=0)


def one_child(bookie) -> int:
    """The bookie's one autorecovery child, once it runs."""
    return wait_for(what=f"the autorecovery child of {bookie.bookie_id}",
                    predicate=lambda: (lambda pids: pids[0] if len(pids) == 1 else None)(bookie.autorecovery_children()),
                    timeout=60)


def auditor_gauge(bookie) -> float:
    return bookie.metrics()["autorecovery_is_auditor"]


def test_the_child_reports_to_metrics_and_is_started_again_when_killed_alone(bookies, metadata_uri, zkstore):
    first, second = (bookies(f"b{i}", **DAEMON).serve_http() for i in range(2))
    for b in (first, second):
        b.start()
    by_id = {b.bookie_id: b for b in (first, second)}
    auditor_id = wait_for(what="an auditor", predicate=lambda: zkstore.auditor.current(), timeout=60)
    auditor = by_id[auditor_id]
    other = second if auditor is first else first
    child = one_child(auditor)
    one_child(other)
    # /metrics says what the children report: the elected one's is the auditor, the other's is not
    wait_for(what="the auditor's gauge", predicate=lambda: auditor_gauge(auditor) == 1 and auditor_gauge(other) == 0,
             timeout=30)
    assert auditor.metrics()["autorecovery_elections_won_total"] == 1
    assert f"autorecovery[{child}]" in auditor.log_path.read_text()  # its log lines are tagged in the bookie's log

    os.kill(child, signal.SIGKILL)  # the daemon alone dies: the bookie serves on and starts another
    restarted = wait_for(what="another child", predicate=lambda: (lambda pids: pids[0] if pids and pids != [child]
                                                                  else None)(auditor.autorecovery_children()),
                         timeout=60)
    assert restarted != child
    assert f"autorecovery child {child} was killed by SIGKILL: starting another" in auditor.log_path.read_text()
    # the dead child's session expires: the other bookie's daemon is elected, and both gauges follow
    wait_for(what="the other bookie's daemon elected", predicate=lambda: zkstore.auditor.current() == other.bookie_id,
             timeout=60)
    wait_for(what="the gauges to follow", predicate=lambda: auditor_gauge(other) == 1 and auditor_gauge(auditor) == 0,
             timeout=30)
    assert zkstore.registration.is_registered(auditor.bookie_id)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_the_child_ends_with_its_bookie(bookies, zkstore, sig):
    bookie = bookies("b0", **DAEMON).start()
    child = one_child(bookie)
    wait_for(what="the child's vote", predicate=lambda: zkstore.auditor.current() == bookie.bookie_id, timeout=60)
    code = bookie.kill(sig)
    if sig == signal.SIGTERM:
        assert code == 0
        assert not pid_running(child)  # stopped by the bookie before it exited
        log = bookie.log_path.read_text()
        assert f"autorecovery child {child} exited with status 0" in log, log
        assert "Traceback" not in log
        assert zkstore.auditor.current() is None  # it left the election on the way out
    else:
        wait_for(what="the child to die with its bookie", predicate=lambda: not pid_running(child), timeout=30)
