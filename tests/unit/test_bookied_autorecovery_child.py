"""The channel between bookied and its autorecovery child process, and the bookie's
side of the child's life (restarts, stop), with a fake reactor: no process is started."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from twisted.internet import task
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.python.failure import Failure

from bkctl.bookied import autorecovery as ar
from bkctl.bookied.config import load_config, load_config_text
from bkctl.wire.autorecovery.service import AutoRecoveryStats

CONF = ("metadataServiceUri=zk+hierarchical://127.0.0.1:2181/ledgers\nautoRecoveryDaemonEnabled=true\n"
        "openLedgerRereplicationGracePeriod=3000\nzkTimeout=4000\nledgerDirectories=/a,/b\n")


def test_a_report_carries_the_daemons_figures_back():
    stats = AutoRecoveryStats(audits=3, ledgers_rereplicated=7, bytes_rereplicated=12345, recovery_seconds_sum=1.5,
                              recovery_seconds_count=2, last_replicas_check={"ledgers": 4, "ledger_ids": [1, 9]})
    line = ar.report_line(SimpleNamespace(is_auditor=True, stats=stats))
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert ar.read_report(line) == (True, stats)


def test_a_report_from_another_version_keeps_what_both_know():
    line = json.dumps({"is_auditor": False, "stats": {"audits": 2, "invented_later": 5}}).encode()
    assert ar.read_report(line) == (False, AutoRecoveryStats(audits=2))


@pytest.mark.parametrize("line", [b"Traceback (most recent call last):", b"{}", b'{"is_auditor": true}', b"[1]"])
def test_what_is_not_a_report_is_refused(line):
    with pytest.raises(ValueError, match="not a report"):
        ar.read_report(line)


def test_the_brief_gives_the_child_the_bookies_configuration():
    cfg = load_config_text(CONF)
    brief = json.loads(ar.brief_line(cfg, 1234, "INFO", 1.0))
    assert load_config(None, brief["settings"]) == cfg
    assert (brief["parent_pid"], brief["log_level"], brief["shutdown_timeout"]) == (1234, "INFO", 1.0)


class FakeTransport:
    def __init__(self, pid):
        self.pid = pid
        self.written = b""
        self.signals = []

    def write(self, data):
        self.written += data

    def signalProcess(self, name):
        self.signals.append(name)


class FakeReactor(task.Clock):
    """A clock that 'spawns' children: each gets a FakeTransport with the next pid."""

    def __init__(self):
        super().__init__()
        self.children = []

    def spawnProcess(self, proto, executable, args, env=None, childFDs=None):
        assert childFDs == {0: "w", 1: "r", 2: 2} and "NOTIFY_SOCKET" not in env
        assert args[-2:] == ["--bookie-id", "bk1:3181"]
        proto.makeConnection(FakeTransport(100 + len(self.children)))
        self.children.append(proto)


def child_of(monkeypatch):
    monkeypatch.setenv("NOTIFY_SOCKET", "/run/systemd/notify")  # the bookie's, not the child's
    reactor = FakeReactor()
    owner = ar.AutoRecoveryChild(reactor, load_config_text(CONF), "bk1:3181", shutdown_timeout=1.0)
    owner.start()
    return reactor, owner


def test_reports_in_pieces_reach_the_metrics_whole(monkeypatch):
    reactor, owner = child_of(monkeypatch)
    proto = reactor.children[0]
    assert b'"parent_pid"' in proto.transport.written  # the brief went first
    line = ar.report_line(SimpleNamespace(is_auditor=True, stats=AutoRecoveryStats(audits=4, elections_won=1)))
    proto.childDataReceived(1, line[:10])
    assert owner.is_auditor is False and owner.stats.audits == 0  # half a line is nothing yet
    proto.childDataReceived(1, line[10:] + b"garbage without its end")
    assert owner.is_auditor is True and (owner.stats.audits, owner.stats.elections_won) == (4, 1)
    proto.childDataReceived(1, b"\n")  # the garbage, completed, is logged and ignored
    assert owner.stats.audits == 4


def test_a_child_that_dies_is_started_again_after_longer_and_longer_pauses(monkeypatch):
    reactor, owner = child_of(monkeypatch)
    reactor.children[0].childDataReceived(1, ar.report_line(SimpleNamespace(is_auditor=True,
                                                                            stats=AutoRecoveryStats())))
    waits = []
    for n in range(len(ar.RESTART_DELAYS) + 1):
        assert owner.pid == 100 + n
        reactor.children[-1].processEnded(Failure(ProcessTerminated(signal=9)))
        assert owner.pid is None and owner.is_auditor is False  # no child: not the auditor
        before = len(reactor.children)
        waited = 0.0
        while len(reactor.children) == before:
            reactor.advance(0.5)
            waited += 0.5
        waits.append(waited)
    assert waits == [*ar.RESTART_DELAYS, ar.RESTART_DELAYS[-1]]
    reactor.advance(ar.STEADY_AFTER)  # this one lives long: the next death waits the shortest pause again
    reactor.children[-1].processEnded(Failure(ProcessDone(0)))
    reactor.advance(ar.RESTART_DELAYS[0])
    assert owner.starts == len(ar.RESTART_DELAYS) + 3


def test_stop_terms_then_kills_a_child_that_does_not_go(monkeypatch):
    reactor, owner = child_of(monkeypatch)
    proto = reactor.children[0]
    stopped = owner.stop(2.0)
    assert proto.transport.signals == ["TERM"]
    reactor.advance(2.0)
    assert proto.transport.signals == ["TERM", "KILL"] and not stopped.called
    proto.processEnded(Failure(ProcessTerminated(signal=9)))
    assert stopped.called
    reactor.advance(60)
    assert len(reactor.children) == 1  # not started again: the bookie is stopping


def test_stop_while_a_restart_waits_cancels_it(monkeypatch):
    reactor, owner = child_of(monkeypatch)
    reactor.children[0].processEnded(Failure(ProcessTerminated(signal=9)))
    assert owner.stop(2.0).called
    reactor.advance(60)
    assert len(reactor.children) == 1
