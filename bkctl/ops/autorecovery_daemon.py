"""``bkctl autorecovery run``: the autorecovery daemon in the foreground.

The daemon runs in the process's one reactor, in its background thread (the
thread every bkctl command that talks to bookies uses); the calling thread
only waits for Ctrl-C (KeyboardInterrupt) or SIGTERM, then for the daemon to
stop.  So it runs, stops and runs again in one process (``bkctl shell``),
beside the other commands, and leaves the process as it found it: the
signal handlers, the logging, no timer left to end the process later.  The
reactor cannot be run a second time in the calling thread, nor while the
background one runs, which the daemon used to do.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from bkctl.wire.autorecovery.config import AutoRecoveryConfig

if TYPE_CHECKING:
    from twisted.python.failure import Failure

    from bkctl.wire.fastpath import Twins
    from bkctl.wire.tls import TLSFiles

log = logging.getLogger("bkctl.autorecovery")


@contextmanager
def daemon_logging() -> Iterator[None]:
    """The daemon's log on stderr at INFO (vote, role, each repair), with times,
    while it runs; the root logger as it was afterwards (the shell's next
    commands stay quiet unless -v)."""
    root = logging.getLogger()
    kazoo, twisted = logging.getLogger("kazoo"), logging.getLogger("twisted")
    saved = root.level, kazoo.level, twisted.level
    handler = None
    if not any(type(h) is logging.StreamHandler for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)
    kazoo.setLevel(logging.WARNING)
    twisted.setLevel(logging.WARNING)  # not its "Log opened."
    try:
        yield
    finally:
        if handler is not None:
            root.removeHandler(handler)
        root.setLevel(saved[0])
        kazoo.setLevel(saved[1])
        twisted.setLevel(saved[2])


def run_daemon(
    uri: str,
    bookie_id: str,
    config: AutoRecoveryConfig,
    *,
    protocol: str = "v3",
    zk_timeout: float = 10.0,
    shutdown_timeout: float = 5.0,
    tls: TLSFiles | None = None,
    exit_when_stuck: bool = True,
    twins: Twins,
    metrics_port: int | None = None,
    metrics_host: str = "0.0.0.0",
) -> tuple[int, str | None]:
    """Run the autorecovery daemon until Ctrl-C or SIGTERM; (0, None) on a stop,
    (5, why) when it cannot start (ZooKeeper not answering within
    ``zk_timeout`` seconds...).  Under systemd (``Type=notify``) it sends
    READY=1 once started, STOPPING=1 on the way out, and watchdog pings.

    The stop is waited for ``shutdown_timeout`` seconds, ZooKeeper reachable or
    not; past that a thread stuck in ZooKeeper would hold the process's exit,
    so ``exit_when_stuck`` ends the process then (a daemon under systemd);
    without it (the shell) the daemon is left to finish alone, with a warning.

    ``metrics_port``: serve the auditor's and the worker's figures on
    ``metrics_host:metrics_port`` (:mod:`.autorecovery_metrics`) while it runs; a port
    that cannot be listened on is a start failure (5)."""
    from twisted.internet import defer, reactor
    from twisted.python.failure import Failure

    from bkctl.wire.autorecovery.service import AutoRecoveryDaemon
    from bkctl.wire.client.blocking import ensure_reactor
    from bkctl.wire.process.runtime import settle_garbage_collector
    from bkctl.wire.process.sdnotify import Notifier
    from bkctl.wire.process.shutdown import ExitDeadline

    settle_garbage_collector()  # a worker copies entries for hours: as bookied does
    ensure_reactor()
    notifier = Notifier.from_environment()
    daemon = AutoRecoveryDaemon(
        uri,
        bookie_id,
        config,
        reactor=reactor,
        zk_timeout=zk_timeout,
        client_options={"protocol": protocol, **({"tls": tls} if tls else {})},
        twins=twins,
    )
    outcome: dict = {"code": 0, "why": None}
    state: dict = {"stopping": False}
    wake = threading.Event()  # a stop was asked for, or the start failed
    stopped = threading.Event()

    def start() -> None:  # in the reactor thread
        if metrics_port is not None:
            from twisted.internet.error import CannotListenError

            from .autorecovery_metrics import MetricsListener

            listener = MetricsListener(reactor, daemon.stats, metrics_port, metrics_host)
            try:
                listener.start()
            except CannotListenError as exc:
                failed(Failure(exc))
                return
            state["metrics"] = listener
        state["watchdog"] = notifier.start_watchdog(reactor)
        starting = state["starting"] = daemon.startService()
        starting.addCallbacks(started, failed)

    def started(_: object) -> None:
        notifier.ready(f"autorecovery for {uri} as {bookie_id}")

    def failed(failure: Failure) -> None:
        if state["stopping"] and failure.check(defer.CancelledError):
            return  # stopped while starting
        outcome["why"] = failure.getErrorMessage() or failure.type.__name__
        log.error("autorecovery daemon could not start: %s", outcome["why"])
        outcome["code"] = 5
        wake.set()

    def stop() -> None:  # in the reactor thread
        state["stopping"] = True
        notifier.stopping()
        watchdog = state.get("watchdog")
        if watchdog is not None and watchdog.running:
            watchdog.stop()
        starting = state.get("starting")
        if starting is not None and not starting.called:
            starting.cancel()
        listener = state.pop("metrics", None)
        if listener is not None:
            listener.stop()
        d = defer.maybeDeferred(daemon.stopService) if daemon.running else defer.succeed(None)
        d.addErrback(lambda f: log.warning("while stopping: %s", f.getErrorMessage()))
        d.addBoth(lambda _: stopped.set())

    deadline = ExitDeadline("autorecovery daemon shutdown") if exit_when_stuck else None
    restore_sigterm = _on_sigterm(wake.set)
    try:
        reactor.callFromThread(start)
        try:
            while not wake.wait(1.0):
                pass
        except KeyboardInterrupt:  # Ctrl-C: the daemon stops, the command ends cleanly
            pass
    finally:
        if deadline is not None:
            deadline.arm(shutdown_timeout, lambda: outcome["code"])
        reactor.callFromThread(stop)
        in_time = _wait_through_interrupts(stopped, shutdown_timeout)
        restore_sigterm()
        if in_time and deadline is not None:
            deadline.cancel()
    if not in_time:
        log.warning(
            "the autorecovery daemon did not stop within %g s (ZooKeeper unreachable?); left to finish on its own",
            shutdown_timeout,
        )
    return outcome["code"], outcome["why"]


def _on_sigterm(callback: Callable[[], object]) -> Callable[[], object]:
    """SIGTERM calls ``callback`` until the returned function puts the previous handler back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.signal(signal.SIGTERM, lambda *_: callback())
    return lambda: signal.signal(signal.SIGTERM, previous)


def _wait_through_interrupts(event: threading.Event, timeout: float) -> bool:
    """Wait up to ``timeout`` s for ``event``; another Ctrl-C does not cut the wait short
    (the stop it would abandon is the one bounded by ``timeout``)."""
    import time

    end = time.monotonic() + timeout
    while True:
        try:
            return event.wait(max(0.0, end - time.monotonic()))
        except KeyboardInterrupt:
            continue
