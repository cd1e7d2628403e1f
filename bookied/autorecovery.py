"""The bookie's autorecovery daemon (``autoRecoveryDaemonEnabled=true``), in a
process of its own at a lower CPU priority.

A repair is background work: copying a lost bookie's entries reads and
verifies every one of them and adds it again.  In the bookie's own reactor
that work held back the live writers' adds the bookie serves; on the host's
CPUs beside the bookie it competes with them.  So the daemon
(:class:`~bkctl.wire.autorecovery.service.AutoRecoveryDaemon`, the same one
``bkctl autorecovery run`` runs) lives in a child process whose scheduling
the kernel ranks below the bookie's (``autoRecoveryDaemonCpuPriority``).

* The parent (:class:`AutoRecoveryProcess`) sends the child one line, its
  settings (the bookie's effective configuration as bk_server.conf text, the
  bookie id, the log level, the CPU priority), and keeps the child's standard input open: its
  end -- the bookie stopping, or killed -- stops the daemon.
* The child (:func:`main`, ``python -m bkctl.bookied.autorecovery``) writes
  its figures as one JSON line a second; the parent serves them in the
  bookie's ``/metrics``, summed over the children it restarted.  Its log goes
  to the bookie's standard error.
* A child that ends while the bookie runs is started again after
  :data:`RESTART_DELAY` seconds, as systemd restarts a failed service.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from dataclasses import asdict, fields
from typing import Protocol, cast

from twisted.internet import defer, protocol

from .child_process import (
    CPU_PRIORITIES,
    autogroup_enabled,
    child_environment,
    leave_session_group,
    lower_cpu_priority,
    read_settings,
)

log = logging.getLogger("bookied.autorecovery")

__all__ = [
    "AutoRecoveryProcess",
    "CPU_PRIORITIES",
    "RESTART_DELAY",
    "autogroup_enabled",
    "leave_session_group",
    "lower_cpu_priority",
    "main",
]

#: seconds before a child that ended while the bookie runs is started again
RESTART_DELAY = 5.0

#: seconds between the child's figures
FIGURES_INTERVAL = 1.0

#: the child's exit status when its daemon cannot start (ZooKeeper away...)
EXIT_CANNOT_START = 5


class AutoRecoveryProcess:
    """The bookie's handle on its autorecovery daemon's process.

    ``stats`` (an :class:`~bkctl.wire.autorecovery.config.AutoRecoveryStats`,
    counts summed over every child so far) and ``is_auditor`` are as of the
    running child's last figures; what :func:`bookied.metrics.register_autorecovery`
    reads."""

    def __init__(
        self, cfg, bookie_id: str, reactor, *, log_level: str | None = None, restart_delay: float = RESTART_DELAY
    ):
        from bkctl.wire.autorecovery.config import AutoRecoveryStats

        self.cfg = cfg
        self.bookie_id = bookie_id
        self.reactor = reactor
        self.log_level = log_level or logging.getLevelName(logging.getLogger().getEffectiveLevel())
        self.restart_delay = restart_delay
        self.stats = AutoRecoveryStats()
        self.is_auditor = False
        #: the running child's pid (None between children)
        self.pid: int | None = None
        #: children started again after they ended
        self.restarts = 0
        self._ended_counts: dict[str, float] = {}  # the counts of children that ended
        self._child: _ChildProtocol | None = None
        self._restart = None
        self._stopping = False

    def start(self) -> None:
        self._restart = None
        settings = {
            "config": self._config_text(),
            "bookie_id": self.bookie_id,
            "log_level": self.log_level,
            "cpu_priority": self.cfg.auto_recovery_daemon_cpu_priority,
        }
        child = self._child = _ChildProtocol(self, json.dumps(settings).encode("utf-8") + b"\n", defer.Deferred())
        env = child_environment()
        self.reactor.spawnProcess(
            child, sys.executable, [sys.executable, "-m", __name__], env=env, childFDs={0: "w", 1: "r", 2: 2}
        )
        self.pid = child.pid
        log.info("autorecovery daemon started as process %d", self.pid)

    def _config_text(self) -> str:
        from .config.render import render_config

        return render_config(self.cfg, comments=False)

    def stop(self, timeout: float):
        """Close the child's input (it stops its daemon and exits); SIGKILL it if it
        is still there after ``timeout`` seconds.  A Deferred, fired once it is gone."""
        self._stopping = True
        if self._restart is not None and self._restart.active():
            self._restart.cancel()
        child = self._child
        if child is None or child.ended.called:
            return defer.succeed(None)
        child.wire.closeStdin()
        kill = self.reactor.callLater(timeout, self._kill, child)
        return child.ended.addBoth(lambda _: kill.cancel() if kill.active() else None)

    @staticmethod
    def _kill(child) -> None:
        log.warning("autorecovery daemon (process %s) did not stop in time: SIGKILL", child.pid)
        try:
            child.wire.signalProcess("KILL")
        except Exception:  # noqa: BLE001 - gone meanwhile
            pass

    def take_figures(self, figures: dict) -> None:
        counts = figures.get("stats", {})
        for f in fields(self.stats):
            value = counts.get(f.name)
            if _is_count(value):
                setattr(self.stats, f.name, type(value)(self._ended_counts.get(f.name, 0) + value))
            elif value is not None:
                setattr(self.stats, f.name, value)
        self.is_auditor = bool(figures.get("auditor"))

    def child_ended(self, child, status) -> None:
        self._ended_counts = {
            f.name: getattr(self.stats, f.name) for f in fields(self.stats) if _is_count(getattr(self.stats, f.name))
        }
        self.is_auditor = False
        self.pid = None
        if self._stopping:
            log.info("autorecovery daemon stopped")
            return
        log.error(
            "autorecovery daemon (process %s) ended: %s; starting it again in %g s",
            child.pid,
            status,
            self.restart_delay,
        )
        self.restarts += 1
        self._restart = self.reactor.callLater(self.restart_delay, self.start)


def _is_count(value) -> bool:
    """A figure summed over children (a number), not a latest value (a check's dict)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class ChildTransport(Protocol):
    """What the parent calls on its child's process transport (Twisted's ``IProcessTransport``,
    a zope interface a type checker without its plugin cannot read)."""

    pid: int | None

    def write(self, data: bytes) -> None: ...

    def closeStdin(self) -> None: ...  # noqa: N802 - Twisted's names

    def signalProcess(self, signal_id: str | int) -> None: ...  # noqa: N802


class _ChildProtocol(protocol.ProcessProtocol):
    """The parent's end of one child: its settings in, its figures out."""

    def __init__(self, owner: AutoRecoveryProcess, settings: bytes, ended):
        self.owner = owner
        self.settings = settings
        self.ended = ended
        self._buffer = b""

    @property
    def wire(self) -> ChildTransport:
        """The transport as the parent uses it (Twisted types it as zope's ``IProcessTransport``)."""
        return cast(ChildTransport, self.transport)

    def connectionMade(self) -> None:
        #: kept: Twisted's transport forgets its pid once the process has ended
        self.pid = self.wire.pid
        self.wire.write(self.settings)

    def outReceived(self, data: bytes) -> None:
        lines = (self._buffer + data).split(b"\n")
        self._buffer = lines.pop()
        for line in lines[-1:]:  # only the latest figures matter
            try:
                figures = json.loads(line)
            except ValueError:
                log.warning("autorecovery daemon: unreadable figures %r", line[:80])
                continue
            self.owner.take_figures(figures)

    def processEnded(self, reason) -> None:
        self.owner.child_ended(self, reason.getErrorMessage())
        self.ended.callback(None)


# -- the child --------------------------------------------------------------------------------------


def main() -> int:
    """The child: the daemon until its input ends or SIGTERM."""
    # Ctrl-C in a terminal reaches the bookie's whole process group: the bookie stops
    # this process itself, by closing its input (Twisted leaves an ignored SIGINT alone)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    settings = read_settings()
    if settings is None:
        return 0
    from bkctl.wire.process.runtime import twisted_without_tls

    from .startup import configure_logging, main_reactor

    configure_logging(settings["log_level"])
    # before any thread starts, and the imports
    grouped = settings["cpu_priority"] != "normal" and leave_session_group("autorecovery")
    priority = lower_cpu_priority(settings["cpu_priority"], "autorecovery")
    from .config import load_config_text

    cfg = load_config_text(settings["config"])

    with twisted_without_tls(unless=bool(cfg.tls_provider_factory_class)):
        reactor = main_reactor()
    from twisted.internet import defer, stdio, task

    from bkctl.wire import fastpath
    from bkctl.wire.autorecovery.config import CONFIG_KEYS, config_from_keys
    from bkctl.wire.autorecovery.service import AutoRecoveryDaemon
    from bkctl.wire.metadata import zksecurity
    from bkctl.wire.process.runtime import settle_garbage_collector
    from bkctl.wire.process.shutdown import ExitDeadline

    settle_garbage_collector()  # a worker copies entries for hours: as the bookie does
    zksecurity.set_default(cfg.zk_security())
    uri = cfg.metadata_service_uri
    if not uri:  # the bookie does not start without it; a child started by hand might
        log.error("autorecovery daemon could not start: metadataServiceUri is not set")
        return EXIT_CANNOT_START
    daemon = AutoRecoveryDaemon(
        uri,
        settings["bookie_id"],
        config_from_keys({key: cfg.get(key) for key in CONFIG_KEYS}),
        reactor=reactor,
        zk_timeout=cfg.zk_timeout / 1000.0,
        client_options=client_tls_options(cfg),
        twins=fastpath.selected(),  # this process's start: its record (the bookie's environment)
    )
    outcome = {"code": 0}
    parent = _Parent(daemon)
    stdio.StandardIO(parent, reactor=reactor)
    figures = task.LoopingCall(parent.send_figures)

    def started(_) -> None:
        log.info(
            "autorecovery daemon running as process %d (CPU priority %s%s)",
            os.getpid(),
            priority,
            ", in a CPU group of its own at nice 19" if grouped else "",
        )
        figures.start(FIGURES_INTERVAL)

    def failed(f) -> None:
        if not parent.gone:
            log.error("autorecovery daemon could not start: %s", f.getErrorMessage())
            outcome["code"] = EXIT_CANNOT_START
            _stop_reactor()

    def stop():
        deadline = ExitDeadline("autorecovery daemon shutdown")
        deadline.doing("stopping the auditor and the replication worker (their ZooKeeper locks and watches)")
        deadline.arm(cfg.shutdown_timeout_ms / 1000.0 / 5, lambda: outcome["code"])
        if figures.running:
            figures.stop()
        d = defer.maybeDeferred(daemon.stopService) if daemon.running else defer.succeed(None)
        return d.addErrback(lambda f: log.warning("while stopping: %s", f.getErrorMessage()))

    reactor.addSystemEventTrigger("before", "shutdown", stop)
    reactor.callWhenRunning(lambda: daemon.startService().addCallbacks(started, failed))
    reactor.run()
    return outcome["code"]


def client_tls_options(cfg) -> dict:
    """The daemon's client talks to other bookies with the bookie's TLS files, as Java's client keys."""
    files = cfg.tls_files()
    if files is None:
        return {}
    from dataclasses import replace

    return {"tls": replace(files, require_client_cert=False)}


def _stop_reactor() -> None:
    from twisted.internet.error import ReactorNotRunning

    from .startup import main_reactor

    try:
        main_reactor().stop()
    except ReactorNotRunning:  # already stopping (SIGTERM)
        pass


class _Parent:
    """The child's end of the pipes: figures out; the input's end stops the process."""

    def __init__(self, daemon):
        self.daemon = daemon
        self.gone = False
        self.transport = None

    def makeConnection(self, transport) -> None:
        self.transport = transport

    def dataReceived(self, data: bytes) -> None:
        pass  # the parent sends nothing after its settings

    def connectionLost(self, reason) -> None:
        self.gone = True
        _stop_reactor()

    def send_figures(self) -> None:
        if self.transport is not None and not self.gone:
            doc = {"stats": asdict(self.daemon.stats), "auditor": self.daemon.is_auditor}
            self.transport.write(json.dumps(doc).encode("utf-8") + b"\n")


if __name__ == "__main__":
    sys.exit(main())
