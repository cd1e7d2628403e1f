"""The bookie's handle on its autorecovery daemon's process (bookied.autorecovery.AutoRecoveryProcess),
with a reactor that records the processes it is asked to spawn and a task.Clock for time."""

from __future__ import annotations

import json

import pytest
from twisted.internet import task
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.python.failure import Failure

from bkctl.bookied.autorecovery import AutoRecoveryProcess
from bkctl.bookied.config import load_config_text

CONF = (
    "metadataServiceUri=zk+hierarchical://127.0.0.1:2181/ledgers\nautoRecoveryDaemonEnabled=true\n"
    "rereplicationEntryBatchSize=7\nautoRecoveryDaemonCpuPriority=low\n"
)


class ChildTransport:
    """What spawnProcess returns: the calls a child's transport gets."""

    def __init__(self, pid: int):
        self.pid = pid
        self.written = b""
        self.stdin_closed = False
        self.signals: list[str] = []

    def write(self, data: bytes) -> None:
        self.written += data

    def closeStdin(self) -> None:
        self.stdin_closed = True

    def signalProcess(self, name: str) -> None:
        self.signals.append(name)


class SpawningReactor(task.Clock):
    def __init__(self):
        super().__init__()
        self.spawned: list[tuple] = []  # (protocol, executable, args, env, childFDs)

    def spawnProcess(self, proto, executable, args, env=None, childFDs=None, **_):
        transport = ChildTransport(1000 + len(self.spawned))
        self.spawned.append((proto, executable, args, env, childFDs))
        proto.makeConnection(transport)
        return transport


def figures(**counts) -> bytes:
    auditor = counts.pop("auditor", False)
    return json.dumps({"stats": counts, "auditor": auditor}).encode() + b"\n"


def ended(proto, code: int = 0) -> None:
    proto.transport.pid = None  # as Twisted's process transport does before it tells the protocol
    proto.processEnded(Failure(ProcessDone(0) if code == 0 else ProcessTerminated(code)))


@pytest.fixture
def started(monkeypatch):
    monkeypatch.setenv("NOTIFY_SOCKET", "/run/systemd/notify")
    monkeypatch.setenv("WATCHDOG_USEC", "30000000")
    reactor = SpawningReactor()
    handle = AutoRecoveryProcess(load_config_text(CONF), "10.0.0.1:3181", reactor, log_level="DEBUG")
    handle.start()
    return reactor, handle


def test_the_child_gets_the_bookies_configuration_and_none_of_systemds_notifications(started):
    reactor, handle = started
    [(proto, executable, args, env, fds)] = reactor.spawned
    assert args[1:] == ["-m", "bkctl.bookied.autorecovery"]
    assert fds == {0: "w", 1: "r", 2: 2}  # its log on the bookie's stderr
    assert "NOTIFY_SOCKET" not in env and "WATCHDOG_USEC" not in env
    assert handle.pid == proto.transport.pid
    line = proto.transport.written
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    settings = json.loads(line)
    assert (settings["bookie_id"], settings["log_level"]) == ("10.0.0.1:3181", "DEBUG")
    cfg = load_config_text(settings["config"])
    assert cfg.as_dict() == handle.cfg.as_dict()
    assert (cfg.rereplication_entry_batch_size, cfg.auto_recovery_daemon_cpu_priority) == (7, "low")


def test_figures_arrive_in_pieces_and_only_the_latest_line_counts(started):
    reactor, handle = started
    proto = reactor.spawned[0][0]
    whole = figures(elections_won=1, auditor=True) + figures(elections_won=1, entries_rereplicated=40, auditor=True)
    proto.outReceived(whole[:30])
    assert handle.stats.elections_won == 0  # no whole line yet
    proto.outReceived(whole[30:-5])
    assert (handle.stats.elections_won, handle.stats.entries_rereplicated, handle.is_auditor) == (1, 0, True)
    proto.outReceived(whole[-5:])
    assert handle.stats.entries_rereplicated == 40
    proto.outReceived(b"not json\n")  # said in the log, the figures kept
    assert handle.stats.entries_rereplicated == 40


def test_a_child_that_dies_is_started_again_and_its_counts_carry_over(started, caplog):
    reactor, handle = started
    first = reactor.spawned[0][0]
    first_pid = first.transport.pid
    first.outReceived(
        figures(
            elections_won=1,
            entries_rereplicated=40,
            bytes_rereplicated=4000,
            recovery_seconds_sum=1.5,
            last_replicas_check={"ledgers": 3},
            auditor=True,
        )
    )
    ended(first, code=9)
    assert (handle.pid, handle.is_auditor) == (None, False)
    assert f"(process {first_pid}) ended" in caplog.text  # the pid it had, though its transport forgot it
    assert handle.stats.entries_rereplicated == 40  # counters do not go back
    reactor.advance(handle.restart_delay - 0.1)
    assert len(reactor.spawned) == 1
    reactor.advance(0.1)
    assert len(reactor.spawned) == 2 and handle.restarts == 1
    second = reactor.spawned[1][0]
    assert handle.pid == second.transport.pid != first_pid
    second.outReceived(
        figures(
            elections_won=1,
            entries_rereplicated=2,
            bytes_rereplicated=200,
            recovery_seconds_sum=0.25,
            last_replicas_check={"ledgers": 5},
        )
    )
    s = handle.stats
    assert (s.elections_won, s.entries_rereplicated, s.bytes_rereplicated) == (2, 42, 4200)
    assert s.recovery_seconds_sum == pytest.approx(1.75)
    assert s.last_replicas_check == {"ledgers": 5}  # the latest, not a sum
    assert handle.is_auditor is False


def test_stop_closes_the_childs_input_and_waits_for_it(started):
    reactor, handle = started
    proto = reactor.spawned[0][0]
    done = handle.stop(10.0)
    assert proto.transport.stdin_closed and not done.called
    reactor.advance(9.0)
    ended(proto)
    assert done.called and proto.transport.signals == []
    reactor.advance(60.0)
    assert len(reactor.spawned) == 1 and proto.transport.signals == []  # neither restarted nor killed
    assert handle.stop(10.0).called  # a second stop has nothing to wait for


def test_a_child_that_does_not_stop_in_time_is_killed(started):
    reactor, handle = started
    proto = reactor.spawned[0][0]
    done = handle.stop(10.0)
    reactor.advance(10.0)
    assert proto.transport.signals == ["KILL"] and not done.called
    ended(proto, code=9)
    assert done.called
    reactor.advance(60.0)
    assert len(reactor.spawned) == 1


def test_a_stop_while_waiting_to_restart_cancels_the_restart(started):
    reactor, handle = started
    ended(reactor.spawned[0][0], code=1)
    assert handle.stop(10.0).called
    reactor.advance(60.0)
    assert len(reactor.spawned) == 1


def _settings_line(conf: str) -> bytes:
    """The line a bookie with ``conf`` writes to its daemon's process (its real start())."""
    reactor = SpawningReactor()
    AutoRecoveryProcess(load_config_text(conf), "10.0.0.1:3181", reactor, log_level="INFO").start()
    return reactor.spawned[0][0].transport.written


def test_a_child_whose_daemon_cannot_start_says_why_and_exits_with_its_status():
    """The real child process, its ZooKeeper away (a port nothing listens on): exit
    EXIT_CANNOT_START, which the bookie answers by starting it again, and one log line why."""
    import subprocess
    import sys

    from bkctl.bookied.autorecovery import EXIT_CANNOT_START
    from bkctl.sandbox.zookeeper import free_port

    line = _settings_line(
        f"metadataServiceUri=zk+hierarchical://127.0.0.1:{free_port()}/ledgers\n"
        "autoRecoveryDaemonEnabled=true\nzkTimeout=1000\nautoRecoveryDaemonCpuPriority=normal\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-m", "bkctl.bookied.autorecovery"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        child.stdin.write(line)
        child.stdin.flush()  # and kept open, as the bookie keeps it: the end of its input would stop the child
        code = child.wait(60)
        err = child.stderr.read().decode()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdin.close()
    assert code == EXIT_CANNOT_START, err
    assert err.count("autorecovery daemon could not start") == 1, err
    assert child.stdout.read() == b""  # no figures from a daemon that never ran


def test_a_child_whose_input_ends_before_its_settings_exits_quietly():
    """A bookie gone before it wrote the settings line: nothing to start, status 0."""
    import subprocess
    import sys

    child = subprocess.run(
        [sys.executable, "-m", "bkctl.bookied.autorecovery"], input=b'{"config": "', capture_output=True, timeout=60
    )
    assert (child.returncode, child.stdout, child.stderr) == (0, b"", b"")


@pytest.fixture()
def session_calls(monkeypatch):
    """bookied.child_process's os.setsid, recorded instead of called (this is the test runner)."""
    from bkctl.bookied import child_process

    calls: list[str] = []
    monkeypatch.setattr(child_process.os, "setsid", lambda: calls.append("setsid"))
    return calls


def test_a_child_leaves_its_session_only_where_the_kernel_groups_by_session(tmp_path, monkeypatch, session_calls):
    from bkctl.bookied import child_process

    switch, group = tmp_path / "sched_autogroup_enabled", tmp_path / "autogroup"
    monkeypatch.setattr(child_process, "AUTOGROUP_SWITCH", str(switch))
    monkeypatch.setattr(child_process, "AUTOGROUP", str(group))
    switch.write_text("0\n")
    assert child_process.leave_session_group("autorecovery") is False and session_calls == [] and not group.exists()
    switch.unlink()  # a kernel without autogroup
    assert child_process.leave_session_group("autorecovery") is False and session_calls == []
    switch.write_text("1\n")
    assert child_process.leave_session_group("autorecovery") is True
    assert session_calls == ["setsid"] and group.read_text() == "19"


def test_a_child_whose_group_cannot_be_set_says_so_once_and_goes_on(tmp_path, monkeypatch, session_calls, caplog):
    from bkctl.bookied import child_process

    switch = tmp_path / "sched_autogroup_enabled"
    switch.write_text("1\n")
    monkeypatch.setattr(child_process, "AUTOGROUP_SWITCH", str(switch))
    monkeypatch.setattr(child_process, "AUTOGROUP", str(tmp_path))  # a directory: the write is refused
    with caplog.at_level("WARNING", logger="bookied.child"):
        assert child_process.leave_session_group("autorecovery") is False
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "cannot take a CPU group of its own" in caplog.records[0].getMessage()


def test_the_daemon_competes_for_the_cpu_unless_told_otherwise():
    # at SCHED_IDLE a repair on a busy host hardly ran (159 s a ledger against Java's 27 s):
    # the ledgers a copy short wait for it, so the default is the bookie's own priority
    assert load_config_text("").auto_recovery_daemon_cpu_priority == "normal"
    assert load_config_text("autoRecoveryDaemonCpuPriority=idle\n").auto_recovery_daemon_cpu_priority == "idle"
