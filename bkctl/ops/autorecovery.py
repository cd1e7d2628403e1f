"""Autorecovery operations: run the daemon, ask who audits, trigger an audit,
and see which worker holds which ledger (Java's ``autorecovery``,
``whoisauditor``, ``triggeraudit`` and ``queryautorecoverystatus``)."""
from __future__ import annotations

import logging
import signal

from bkctl.wire.autorecovery.service import CONFIG_KEYS, AutoRecoveryConfig, config_from_keys


def config_from_settings(settings: dict[str, str]) -> AutoRecoveryConfig:
    """An :class:`AutoRecoveryConfig` from bk_server.conf keys (Java's names and
    units), each checked by bookied's schema as bookied checks it
    (:func:`bkctl.bookied.config.validate_setting`); ValueError (a ConfigError)
    with a one-line message names an unknown key or a bad value."""
    from bkctl.bookied.config import ConfigError, validate_setting

    values = {}
    for key, text in settings.items():
        if key not in CONFIG_KEYS:
            raise ConfigError(f"unknown autorecovery key {key!r} (one of {', '.join(sorted(CONFIG_KEYS))})",
                              key=key)
        values[key] = validate_setting(key, text)
    return config_from_keys(values)


def run_daemon(uri: str, bookie_id: str, config: AutoRecoveryConfig, *, protocol: str = "v3",
               zk_timeout: float = 10.0, shutdown_timeout: float = 5.0, tls=None) -> int:
    """Run the autorecovery daemon in the foreground until SIGTERM/SIGINT; 0 on a
    clean stop, 5 when it cannot start.  Under systemd (``Type=notify``) it sends
    READY=1 once started, STOPPING=1 on the way out, and watchdog pings.  The
    stop takes at most ``shutdown_timeout`` seconds, ZooKeeper reachable or not."""
    from twisted.internet import defer, reactor

    from bkctl.wire.autorecovery.service import AutoRecoveryDaemon
    from bkctl.wire.process.sdnotify import Notifier
    from bkctl.wire.process.shutdown import ExitDeadline

    log = logging.getLogger("bkctl.autorecovery")
    notifier = Notifier.from_environment()
    watchdog = notifier.start_watchdog(reactor)
    daemon = AutoRecoveryDaemon(uri, bookie_id, config, reactor=reactor, zk_timeout=zk_timeout,
                                client_options={"protocol": protocol, **({"tls": tls} if tls else {})})
    outcome = {"code": 0}

    def started(_):
        log.info("autorecovery daemon running for %s as %s", uri, bookie_id)
        notifier.ready(f"autorecovery for {uri} as {bookie_id}")

    def failed(failure):
        log.error("autorecovery daemon could not start: %s", failure.getErrorMessage())
        outcome["code"] = 5
        reactor.callLater(0, stop)

    def stop(*_):
        if getattr(stop, "done", False):
            return
        stop.done = True
        deadline.arm(shutdown_timeout, lambda: outcome["code"])
        notifier.stopping()
        if watchdog is not None and watchdog.running:
            watchdog.stop()
        d = daemon.stopService().addTimeout(shutdown_timeout / 2, reactor)
        d.addErrback(lambda f: log.warning("while stopping: %s", "ZooKeeper did not answer in time"
                                           if f.check(defer.TimeoutError) else f.getErrorMessage()))
        d.addBoth(lambda _: reactor.stop())

    # Armed by the signal itself: a thread stuck in ZooKeeper holds the reactor's
    # shutdown (it joins its threads), and a reactor blocked on one never runs stop().
    deadline = ExitDeadline("autorecovery daemon shutdown")

    def on_signal(*_):
        deadline.arm(shutdown_timeout, lambda: outcome["code"])
        reactor.callFromThread(stop)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    reactor.callWhenRunning(lambda: daemon.startService().addCallbacks(started, failed))
    reactor.run(installSignalHandlers=False)
    return outcome["code"]


def who_is_auditor(store) -> dict:
    return {"auditor": store.auditor.current()}


def trigger_audit(store) -> dict:
    """Rewrite ``lostBookieRecoveryDelay`` with its own value: the auditor audits at once."""
    from bkctl.wire.autorecovery.control import trigger_audit as rewrite_delay

    delay = rewrite_delay(store)
    return {"triggered": True, "auditor": store.auditor.current(), "lost_bookie_recovery_delay": delay}


def query_status(store) -> list[dict]:
    """Ledgers being re-replicated now: the lock holder (a host name, as Java writes it)."""
    return [{"ledger_id": ledger_id, "worker": holder}
            for ledger_id, holder in sorted(store.underreplication.locks().items())]
