"""bookied's autorecovery daemon (``autoRecoveryDaemonEnabled=true``), in a child process.

One child per bookie, as Java runs its daemon beside each bookie: wire's
:class:`~bkctl.wire.autorecovery.service.AutoRecoveryDaemon` with the bookie's
configuration, bookie id, TLS files and ZooKeeper timeout.  Why a process of
its own: in the bookie's reactor the daemon's replication reads and adds were
handled on the same thread, under the same GIL, as the bookie's live adds,
which waited behind them (``bench/bench_autorecovery.py --modes inside``: a
live writer's add p99 during a repair at 2.46x its idle p99).  In a child
the two share only the machine's CPUs.  Measured on the 2-CPU development
machine while other work kept it busy (load 3.4-4.7, CPU pressure 68-88%),
that did not lower the ratio: 2.05-6.48x (4 runs) against 2.26-3.65x (3 runs)
with the daemon in the bookie's reactor, and the surviving bookies with their
children spent 136-142 us of CPU per entry copied against 109-120 us; a lower
CPU priority for the child (nice 10 or 19, SCHED_IDLE) made no difference
that the noise let through.

The bookie's side is :class:`AutoRecoveryChild`: it starts the child once the
bookie is registered, starts it again when it dies (after a pause that grows
while it keeps dying), and stops it at shutdown: SIGTERM, then SIGKILL after
the share of shutdownTimeoutMs given to it.  The child's side is :func:`main`
(``python -m bkctl.bookied.autorecovery --bookie-id ID``).  Between them:

* the child's stdin: one JSON line first, the brief (:func:`brief_line`: the
  bookie's settings, its pid, the log level, the stop budget); then the pipe
  stays open and its end (the bookie gone, even by SIGKILL) stops the child;
  so does PR_SET_PDEATHSIG (Linux), which sends it SIGTERM at once;
* the child's stdout: its figures as JSON lines (:func:`report_line`), each
  time they changed, looked at every :data:`REPORT_INTERVAL` seconds; the
  bookie's /metrics exports the last one (:func:`read_report`);
* the child's stderr is the bookie's: its log lines say ``autorecovery[PID]``.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import sys

from twisted.internet import defer
from twisted.internet.error import ProcessExitedAlready
from twisted.internet.protocol import ProcessProtocol

log = logging.getLogger("bookied.autorecovery")

#: seconds between the child's looks at its figures (sent when they changed): how old
#: the autorecovery figures of the bookie's /metrics may be
REPORT_INTERVAL = 1.0
#: seconds the bookie waits before starting a child that died: the next one each time
#: it dies again, the first again once a child lived :data:`STEADY_AFTER` seconds
RESTART_DELAYS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
STEADY_AFTER = 60.0
#: what systemd gives the bookie, not its child (NotifyAccess=main: READY=1 is the bookie's)
_SYSTEMD_ONLY = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")
_PR_SET_PDEATHSIG = 1


# -- the channel -----------------------------------------------------------------
def brief_line(cfg, parent_pid: int, log_level: str, shutdown_timeout: float) -> bytes:
    """What the bookie tells its child on its first line of stdin."""
    return json.dumps({"settings": cfg.as_overrides(), "parent_pid": parent_pid, "log_level": log_level,
                       "shutdown_timeout": shutdown_timeout}).encode() + b"\n"


def report_line(daemon) -> bytes:
    """The daemon's figures as the child sends them (one JSON line)."""
    return json.dumps({"is_auditor": bool(daemon.is_auditor), "stats": dataclasses.asdict(daemon.stats)},
                      sort_keys=True).encode() + b"\n"


def read_report(line: bytes):
    """``(is_auditor, AutoRecoveryStats)`` from a :func:`report_line`; fields this
    bookie does not know are left out, those missing keep their defaults.
    ValueError when the line is not a report."""
    from bkctl.wire.autorecovery.service import AutoRecoveryStats

    try:
        doc = json.loads(line)
        known = {f.name for f in dataclasses.fields(AutoRecoveryStats)}
        stats = AutoRecoveryStats(**{k: v for k, v in doc["stats"].items() if k in known})
        return bool(doc["is_auditor"]), stats
    except (TypeError, KeyError, AttributeError, json.JSONDecodeError) as e:
        raise ValueError(f"not a report of the autorecovery child: {line[:200]!r} ({e})") from None


# -- the bookie's side -------------------------------------------------------------
class _ChildProtocol(ProcessProtocol):
    """One child process: its reports go to ``owner``; ``ended`` once it is gone."""

    def __init__(self, owner: AutoRecoveryChild):
        self.owner = owner
        self.ended = False
        self.on_end: list = []
        self._pending = b""

    def childDataReceived(self, fd: int, data: bytes) -> None:
        if fd != 1:
            return
        *lines, self._pending = (self._pending + data).split(b"\n")
        for line in lines:
            if line.strip():
                self.owner._report(line)

    def processEnded(self, reason) -> None:
        self.ended = True
        for fn in self.on_end:
            fn()
        self.owner._child_ended(self, reason)


class AutoRecoveryChild:
    """The bookie's autorecovery child: started by :meth:`start`, started again when
    it dies, ended by :meth:`stop`.  ``stats`` and ``is_auditor`` are its last report
    (at most :data:`REPORT_INTERVAL` seconds old; is_auditor False while no child runs;
    a new child's figures count from zero again, as a restarted daemon's would)."""

    def __init__(self, reactor, cfg, bookie_id: str, *, shutdown_timeout: float,
                 log_level: str | None = None):
        from bkctl.wire.autorecovery.service import AutoRecoveryStats

        self.reactor = reactor
        self.cfg = cfg
        self.bookie_id = bookie_id
        self.shutdown_timeout = shutdown_timeout
        self.log_level = log_level or logging.getLevelName(logging.getLogger().getEffectiveLevel())
        self.stats = AutoRecoveryStats()
        self.is_auditor = False
        #: the running child's pid (None between children)
        self.pid: int | None = None
        #: children started so far (the first one included)
        self.starts = 0
        self._child: _ChildProtocol | None = None
        self._started_at = 0.0
        self._deaths = 0  # children in a row that died before STEADY_AFTER
        self._restart = None
        self._stopping = False

    def start(self) -> None:
        self._restart = None
        if self._stopping:
            return
        child = _ChildProtocol(self)
        env = {k: v for k, v in os.environ.items() if k not in _SYSTEMD_ONLY}
        argv = [sys.executable, "-m", __name__, "--bookie-id", self.bookie_id]
        try:
            self.reactor.spawnProcess(child, sys.executable, argv, env=env,
                                      childFDs={0: "w", 1: "r", 2: 2})
        except OSError as e:
            log.error("cannot start the autorecovery child: %s", e)
            self._schedule_restart()
            return
        self._child = child
        self.pid = child.transport.pid
        self.starts += 1
        self._started_at = self.reactor.seconds()
        child.transport.write(brief_line(self.cfg, os.getpid(), self.log_level, self.shutdown_timeout))
        log.info("autorecovery daemon started in child process %d", self.pid)

    def _report(self, line: bytes) -> None:
        try:
            self.is_auditor, self.stats = read_report(line)
        except ValueError as e:
            log.warning("%s", e)

    def _child_ended(self, child: _ChildProtocol, reason) -> None:
        if child is not self._child:
            return
        pid, self._child, self.pid = self.pid, None, None
        self.is_auditor = False
        how = _how_it_ended(reason)
        if self._stopping:
            log.info("autorecovery child %d %s", pid, how)
            return
        if self.reactor.seconds() - self._started_at >= STEADY_AFTER:
            self._deaths = 0
        delay = RESTART_DELAYS[min(self._deaths, len(RESTART_DELAYS) - 1)]
        self._deaths += 1
        log.error("autorecovery child %d %s: starting another in %g s", pid, how, delay)
        self._schedule_restart(delay)

    def _schedule_restart(self, delay: float = RESTART_DELAYS[0]) -> None:
        if not self._stopping:
            self._restart = self.reactor.callLater(delay, self.start)

    def stop(self, timeout: float):
        """SIGTERM to the child, SIGKILL if it is still there ``timeout`` s later
        (then at most a second more to see it go); a Deferred."""
        self._stopping = True
        if self._restart is not None and self._restart.active():
            self._restart.cancel()
        self._restart = None
        child = self._child
        if child is None:
            return defer.succeed(None)
        return defer.ensureDeferred(self._end(child, timeout))

    async def _end(self, child: _ChildProtocol, timeout: float) -> None:
        self._signal(child, "TERM")
        if await self._ended_within(child, timeout):
            return
        log.warning("autorecovery child %s did not stop within %g s of SIGTERM: SIGKILL", child.transport.pid,
                    timeout)
        self._signal(child, "KILL")
        await self._ended_within(child, 1.0)

    @staticmethod
    def _signal(child: _ChildProtocol, name: str) -> None:
        try:
            child.transport.signalProcess(name)
        except ProcessExitedAlready:
            pass

    def _ended_within(self, child: _ChildProtocol, seconds: float):
        """A Deferred: True once ``child`` has ended, False if it has not ``seconds`` from now."""
        if child.ended:
            return defer.succeed(True)
        d = defer.Deferred()
        timer = self.reactor.callLater(seconds, lambda: d.called or d.callback(False))

        def ended():
            if timer.active():
                timer.cancel()
            if not d.called:
                d.callback(True)

        child.on_end.append(ended)
        return d


def _how_it_ended(reason) -> str:
    value = reason.value
    sig = getattr(value, "signal", None)
    if sig:
        return f"was killed by {signal.Signals(sig).name}"
    return f"exited with status {getattr(value, 'exitCode', None)}"


# -- the child's side ----------------------------------------------------------------
def _die_with_parent() -> None:
    """SIGTERM to this process when the thread that started it ends (Linux; the
    closed stdin does the same everywhere, when the reactor next runs)."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _configure_logging(level: str) -> None:
    """As bookied's own lines, tagged ``autorecovery[PID]`` where bookied's say their logger."""
    under_journald = "JOURNAL_STREAM" in os.environ
    fmt = "%(levelname)s autorecovery[%(process)d] %(name)s: %(message)s"
    logging.basicConfig(level=getattr(logging, level, logging.INFO), stream=sys.stderr,
                        format=fmt if under_journald else "%(asctime)s " + fmt)
    logging.getLogger("kazoo").setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import threading

    parser = argparse.ArgumentParser(prog="python -m bkctl.bookied.autorecovery",
                                     description="bookied's autorecovery child (started by bookied itself).")
    parser.add_argument("--bookie-id", required=True)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C on bookied's terminal: the bookie stops us
    _die_with_parent()
    line = b""
    while not line.endswith(b"\n"):  # byte by byte: nothing after the brief is read ahead
        byte = os.read(0, 1)
        if not byte:
            return 1  # the bookie went before it said everything
        line += byte
    brief = json.loads(line)
    _configure_logging(brief["log_level"])
    if os.getppid() != brief["parent_pid"]:
        log.error("the bookie (pid %d) is gone: not starting", brief["parent_pid"])
        return 1

    from .config import load_config
    from .module_loading import frozen_when_loaded, twisted_without_tls

    cfg = load_config(None, brief["settings"])
    with frozen_when_loaded():
        with twisted_without_tls(unless=bool(cfg.tls_provider_factory_class)):
            from twisted.internet import reactor
        from twisted.internet import task

        from bkctl.wire.autorecovery.service import AutoRecoveryDaemon, config_from_keys
        from bkctl.wire.metadata import zksecurity
        from bkctl.wire.process.runtime import settle_garbage_collector
        from bkctl.wire.process.shutdown import ExitDeadline

    zksecurity.set_default(cfg.zk_security())
    daemon = AutoRecoveryDaemon(cfg.metadata_service_uri, args.bookie_id, config_from_keys(cfg), reactor=reactor,
                                zk_timeout=cfg.zk_timeout / 1000.0, client_options=client_tls_options(cfg))
    outcome = {"code": 0, "stopping": False, "sent": b""}
    deadline = ExitDeadline("autorecovery child shutdown")
    budget = float(brief["shutdown_timeout"])

    def stop(why: str, code: int = 0) -> None:  # in the reactor thread
        if outcome["stopping"]:
            return
        outcome["stopping"] = True
        outcome["code"] = code
        deadline.arm(budget, lambda: outcome["code"])
        log.info("stopping: %s", why)
        reactor.stop()

    def report() -> None:
        line = report_line(daemon)
        if line != outcome["sent"]:
            try:
                os.write(1, line)
            except OSError:  # the bookie is gone
                stop("the bookie closed its end of the pipe")
                return
            outcome["sent"] = line

    def on_signal(signum, _frame) -> None:
        deadline.arm(budget, lambda: outcome["code"])
        reactor.callFromThread(stop, signal.Signals(signum).name)

    def watch_stdin() -> None:  # the bookie's end closes when it exits, however it does
        while os.read(0, 4096):  # the raw fd: a buffered read would hold a lock at the interpreter's exit
            pass
        reactor.callFromThread(stop, "the bookie closed its end of the pipe")

    def started(_) -> None:
        loop = task.LoopingCall(report)
        loop.clock = reactor
        loop.start(REPORT_INTERVAL)

    def failed(f) -> None:
        log.error("autorecovery daemon could not start: %s", f.getErrorMessage())
        stop("it could not start", 1)

    def run() -> None:
        signal.signal(signal.SIGTERM, on_signal)
        threading.Thread(target=watch_stdin, name="bookie pipe", daemon=True).start()
        daemon.startService().addCallbacks(started, failed)

    def stop_daemon():
        d = daemon.stopService() if daemon.running else None
        if d is not None:
            d.addTimeout(max(budget - 0.5, 0.1), reactor)
            d.addErrback(lambda f: log.warning("while stopping: %s", f.getErrorMessage() or f.type.__name__))
        return d

    reactor.addSystemEventTrigger("before", "shutdown", stop_daemon)
    reactor.callWhenRunning(run)
    settle_garbage_collector()
    reactor.run()
    deadline.cancel()
    return outcome["code"]


def client_tls_options(cfg) -> dict:
    """The daemon talks to the other bookies with the bookie's TLS files, as Java's client keys."""
    files = cfg.tls_files()
    if files is None:
        return {}
    return {"tls": dataclasses.replace(files, require_client_cert=False)}


if __name__ == "__main__":
    sys.exit(main())
