"""The bookie process: start-up order, periodic work and a clean shutdown.

Start: check and prepare directories, connect to ZooKeeper, verify cookies,
open journals and entry stores, replay the journal, listen, register
(writable or read-only), then tell systemd READY=1.  Shutdown (SIGTERM):
STOPPING=1, stop accepting, let the journal fsync and answer everything in
flight, checkpoint, unregister, close ZooKeeper.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from twisted.internet import defer, task, threads

from bkctl.wire.bookie_disk import identity, layout
from bkctl.wire.errors import BKError
from bkctl.wire.fastpath import Twins
from bkctl.wire.metadata.errors import ZKUnavailable
from bkctl.wire.metadata.serviceinfo import BookieServiceInfo
from bkctl.wire.process import sdnotify
from bkctl.wire.process.runtime import settle_garbage_collector
from bkctl.wire.process.shutdown import ExitDeadline, call_with_timeout

from . import day2
from .bookie import Bookie
from .config import (
    BookieConfig,
    ConfigError,
    resolve_bookie_address,
    resolve_bookie_id,
    resolve_listen_host,
    startup_warnings,
)
from .config.render import render_config
from .garbage_collector import GarbageCollector
from .gc_listing import DeletedLedgerCollector, ListingProcess
from .gc_policy import GcPolicy
from .journal import Journal
from .metrics import Metrics
from .overreplicated import OverReplicatedCollector
from .server import BookieServerFactory
from .storage import EntryStore
from .upkeep import StorageUpkeep

log = logging.getLogger("bookied")

#: GIL switch interval of the bookie process, seconds (CPython's default: 0.005).
SWITCH_INTERVAL = 0.0001


if TYPE_CHECKING:
    from twisted.internet.address import IPv4Address, IPv6Address

    from bkctl.wire.metadata.zk import ZKMetadataStore

    from .autorecovery import AutoRecoveryProcess

_Part = TypeVar("_Part")


class ListeningPort(Protocol):
    """A listening port as the service uses it (Twisted's ``IListeningPort``, a zope
    interface a type checker without its plugin cannot read)."""

    def getHost(self) -> IPv4Address | IPv6Address: ...  # noqa: N802 - Twisted's names

    def stopListening(self) -> defer.Deferred[None] | None: ...  # noqa: N802


def _started(part: _Part | None) -> _Part:
    """A part :meth:`BookieService.start` sets up, used by what runs after it."""
    if part is None:
        raise RuntimeError("the bookie service has not started")
    return part


class ReadOnlyNotAllowed(BKError):
    """The bookie would start read-only, but readOnlyModeEnabled=false."""


class ClusterNotReady(BKError):
    """ZooKeeper answers but holds no initialised cluster at the configured root."""


#: seconds between attempts to register while ZooKeeper is away at start-up
_REGISTER_RETRY = 1.0


class PortInUse(BKError):
    """Another process listens on bookiePort."""


def check_port_free(host: str, port: int) -> None:
    """Bind ``host:port`` as the listener will (SO_REUSEADDR, as Twisted does) and
    let it go; raises :class:`PortInUse`.  Port 0 (allowEphemeralPorts) is always free."""
    import errno
    import socket

    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise PortInUse(
                    f"bookiePort {port} on {host} is in use by another process (another bookie on this host?)"
                ) from None
            raise


class BookieService:
    def __init__(self, cfg: BookieConfig, reactor, twins: Twins):
        self.cfg = cfg
        #: the implementations in use (:mod:`bkctl.wire.fastpath`: the process's, given by
        #: bookied's start), handed to every component
        self.twins = twins
        self.reactor = reactor
        self.metrics = Metrics()
        self.bookie_id = resolve_bookie_id(cfg)
        self.running = False
        self.stopping = False
        self.exit_code = 0
        self.zk: ZKMetadataStore | None = None
        self.journals: list[Journal] = []
        self.stores: list[EntryStore] = []
        self.bookie: Bookie | None = None
        self.gc: GarbageCollector | None = None
        self.gc_listing: ListingProcess | None = None
        self.factory: BookieServerFactory | None = None
        self.port: ListeningPort | None = None
        self.http_port: ListeningPort | None = None
        self.metrics_port: ListeningPort | None = None  # prometheusStatsHttpPort
        self.registry: Any = None  # prometheus_client's, made at the first scrape (.exposition)
        #: the autorecovery daemon's process (autoRecoveryDaemonEnabled=true), once started
        self.autorecovery: AutoRecoveryProcess | None = None
        self._loops: list[task.LoopingCall] = []
        #: checkpoints and disk checks (:mod:`.upkeep`)
        self.upkeep = StorageUpkeep(self)
        self.notifier = sdnotify.Notifier.from_environment()
        self._exit_deadline = ExitDeadline("bookie shutdown")
        self._signalled = False  # SIGTERM/SIGINT received

    # -- start-up --------------------------------------------------------------
    def start(self) -> None:
        """Everything up to READY=1; blocking (runs before the reactor does)."""
        cfg = self.cfg
        for warning in startup_warnings(cfg):
            log.warning("%s", warning)
        journal_dirs = list(cfg.journal_directories)
        ledger_dirs = list(cfg.ledger_directories)
        # bookied keeps its index beside its entry logs; configured index dirs only enter the cookie
        index_dirs = [] if cfg.is_derived("indexDirectories") else list(cfg.index_directories)
        # the port first: a bookie that cannot listen must not touch its directories or ZooKeeper
        check_port_free(resolve_listen_host(cfg), cfg.bookie_port)
        self._prepare_dirs(journal_dirs, ledger_dirs, index_dirs)

        from bkctl.wire.metadata.zk import ZKMetadataStore

        if not cfg.metadata_service_uri:
            raise ConfigError(
                "metadataServiceUri: not set (nor zkServers): the bookie needs its cluster", key="metadataServiceUri"
            )
        self.zk = zk = ZKMetadataStore(cfg.metadata_service_uri, timeout=cfg.zk_timeout / 1000.0, twins=self.twins)
        zk.start()
        instance_id = zk.cluster.instance_id()
        if instance_id is None:
            raise ClusterNotReady(
                f"no cluster at {cfg.metadata_service_uri} (no INSTANCEID); "
                f"initialise it first, e.g. 'bkctl metaformat'"
            )
        cookie = identity.expected_cookie(self.bookie_id, journal_dirs, ledger_dirs, index_dirs, instance_id)
        outcome = identity.check_and_stamp(zk, cookie, allow_expansion=cfg.allow_storage_expansion)
        log.info("bookie %s: cookie %s (instance %s)", self.bookie_id, outcome, instance_id)

        group_wait = 0 if cfg.journal_flush_when_queue_empty else cfg.journal_max_group_wait_msec
        # With journalFlushWhenQueueEmpty the reactor commits the adds it read in one
        # iteration itself when the disk is fast (see Journal's ``inline``).
        self._reactor_thread = threading.get_ident()  # start() runs in the thread that runs the reactor
        self.journals = [
            Journal(
                d,
                max_group_wait_ms=group_wait,
                buffered_writes_threshold=cfg.journal_buffered_writes_threshold,
                buffered_entries_threshold=cfg.journal_buffered_entries_threshold,
                sync_data=cfg.journal_sync_data,
                max_backups=cfg.journal_max_backups,
                max_size_mb=cfg.journal_max_size_mb,
                preallocate_mb=cfg.journal_pre_alloc_size_mb,
                zero_ahead_mb=cfg.journal_zero_ahead_mb,
                drop_synced_pages=cfg.journal_remove_pages_from_cache,
                dispatch=self._journal_dispatch,
                inline=self._at_end_of_iteration,
                inline_dispatch=self._journal_inline_dispatch,
                patient_wait_ms=cfg.journal_recovery_add_group_wait_msec,
                inline_later=self._later_in_reactor,
                on_fsync=self.metrics.fsync_latency.observe,
                on_group=self.metrics.entries_per_fsync.observe,
                on_grow=self.upkeep.disk_check_soon,
                twins=self.twins,
            )
            for d in journal_dirs
        ]
        cache = cfg.db_storage_write_cache_max_size_mb * 1024 * 1024 // len(ledger_dirs)
        self.stores = [
            EntryStore(
                d,
                write_cache_max_bytes=cache,
                log_size_limit=cfg.log_size_limit,
                on_flush_needed=self.upkeep.flush_needed,
                on_grow=self.upkeep.disk_check_soon,
                twins=self.twins,
            )
            for d in ledger_dirs
        ]
        self.bookie = bookie = Bookie(
            self.journals,
            self.stores,
            clock=self.reactor,
            max_frame_size=cfg.netty_max_frame_size_bytes,
            journal_write_data=cfg.journal_write_data,
            max_throttle_time=cfg.db_storage_max_throttle_time_ms / 1000.0,
        )
        started = time.monotonic()
        replayed = bookie.replay()
        log.info("journal replay: %d records in %.2f s", replayed, time.monotonic() - started)
        for j in self.journals:
            j.start()

        self._initial_state()

        self._register_metrics()
        self.factory = factory = BookieServerFactory(
            bookie,
            self.metrics,
            cfg.netty_max_frame_size_bytes,
            max_adds_in_progress=cfg.max_adds_in_progress_limit,
            max_reads_in_progress=cfg.max_reads_in_progress_limit,
            tls=self._server_tls(),
            twins=self.twins,
        )
        # the HTTP listeners first (Java starts its stats provider before the bookie server): once
        # the bookie port answers, so do /metrics and the admin API
        if cfg.http_server_enabled:
            from .http import listen_http

            self.http_port = http_port = listen_http(self.reactor, cfg.http_server_port, self, cfg.http_server_host)
            log.info("HTTP admin on %s:%d", cfg.http_server_host, http_port.getHost().port)
        elif cfg.prometheus_stats_http_enable and cfg.source_of("prometheusStatsHttpPort") is not None:
            from .http import listen_metrics  # Java's Prometheus provider serves /metrics alone then

            port_ = cfg.prometheus_stats_http_port
            self.metrics_port = listen_metrics(self.reactor, port_, self, cfg.prometheus_stats_http_address)
        host = resolve_listen_host(cfg)
        self.port = port = self.reactor.listenTCP(cfg.bookie_port, factory, interface=host)
        log.info("listening on %s:%d", host, port.getHost().port)

        bookie.on_readonly_change = self._readonly_changed
        self._every(cfg.flush_interval / 1000.0, self.upkeep.checkpoint)
        self._every(cfg.disk_check_interval / 1000.0, self.upkeep.check_disks, now=False)
        # the listing of the metadata runs in a process of its own (see gc_listing)
        self.gc_listing = ListingProcess(render_config(cfg, comments=False), verify=cfg.verify_metadata_on_gc)
        collect = DeletedLedgerCollector(zk.ledgers, cfg.verify_metadata_on_gc, listing=self.gc_listing.garbage)
        self.overreplicated = OverReplicatedCollector(zk, self.bookie_id, cfg.gc_overreplicated_ledger_wait_time)
        over = self.overreplicated
        self.gc = gc = GarbageCollector(
            GcPolicy.from_config(cfg),
            self.stores,
            lambda stores: collect(stores) + over(stores),
            self.reactor,
            self._in_pool,
            on_pass_done=self.upkeep.check_disks,
        )
        gc.register_metrics(self.metrics)
        self._every(cfg.prometheus_stats_latency_rollover_seconds, self.metrics.rotate, now=False)
        self._every(cfg.gc_wait_time / 1000.0, gc, now=False)
        self.running = True
        self.reactor.addSystemEventTrigger("before", "shutdown", self.stop)
        self.reactor.callWhenRunning(self._deadline_on_signals)
        self.reactor.callWhenRunning(self._register)
        self._tune_runtime()

    def _prepare_dirs(self, journal_dirs, ledger_dirs, index_dirs) -> None:
        """layout.prepare_dirs; a directory that cannot be created is a
        configuration error naming the directory and its key, and so is one
        under a private /tmp (systemd's PrivateTmp=yes deletes it at every stop:
        the default journal and ledger directories are under /tmp)."""
        if layout.private_tmp():
            for key, dirs in (
                ("journalDirectories", journal_dirs),
                ("ledgerDirectories", ledger_dirs),
                ("indexDirectories", index_dirs),
            ):
                for d in dirs:
                    if layout.under_tmp(d):
                        raise ConfigError(
                            f"{key}: {d} is under a private /tmp (systemd PrivateTmp=yes) that is "
                            f"deleted when the service stops; set {key} to a persistent "
                            f"directory such as /var/lib/bookkeeper/...",
                            key=key,
                            value=d,
                        )
        try:
            layout.prepare_dirs(list(dict.fromkeys(journal_dirs + ledger_dirs + index_dirs)))
        except OSError as e:
            where = e.filename or ""
            key = next(
                (
                    k
                    for k, dirs in (
                        ("journalDirectories", journal_dirs),
                        ("ledgerDirectories", ledger_dirs),
                        ("indexDirectories", index_dirs),
                    )
                    if any(where == d or where.startswith(d.rstrip("/") + "/") for d in dirs)
                ),
                "journalDirectories/ledgerDirectories",
            )
            raise ConfigError(
                f"{key}: cannot create {where or 'a directory'}: {e.strerror or e}", key=key, value=where
            ) from None

    def _initial_state(self) -> None:
        """Read-only from the start (forceReadOnlyBookie, a full disk), which
        readOnlyModeEnabled=false forbids: then the bookie does not start."""
        bookie = _started(self.bookie)
        if self.cfg.force_read_only_bookie:
            bookie.mark_readonly("config", "forceReadOnlyBookie")
        self.upkeep.check_disks()
        if bookie.readonly and not self.cfg.read_only_mode_enabled:
            raise ReadOnlyNotAllowed(
                f"the bookie would start read-only ({bookie.readonly_reason}), and readOnlyModeEnabled=false forbids it"
            )

    @staticmethod
    def _tune_runtime() -> None:
        """Interpreter settings for a latency-sensitive server, once everything is loaded.

        * GIL switch interval: a thread that wants the GIL waits up to this long
          for the running one to let go. While a checkpoint flush runs Python
          in its thread, the reactor pays that wait after every system call
          that released the GIL -- about seven per add (poll, recv, journal
          write, fsync, send...). Measured with bench_bookie: p999 add
          latency at 1,000 adds/s 7-11 ms with 0.5 ms, 4-5 ms with 0.1 ms
          (what remains is the flush's own fsyncs on the journal's disk);
          pipelined throughput unchanged.
        * Garbage collection: settled as in every process that moves many
          entries (:func:`~bkctl.wire.process.runtime.settle_garbage_collector`:
          what was loaded at start frozen, the youngest generation collected
          less often), so the adds in flight die young.
        """
        sys.setswitchinterval(SWITCH_INTERVAL)
        settle_garbage_collector()

    def _register(self, deadline: float | None = None):
        """Register in ZooKeeper (waiting out a stale node of our previous life), then READY=1.

        Runs once the reactor does, so clients that already know this bookie
        are served while a stale ephemeral node of a killed predecessor expires.
        ZooKeeper lost meanwhile (its session expired, the connection dropped) is
        tried again for zkTimeout, as Java's retrying ZooKeeper client would, before
        the start fails.
        """
        if self.stopping:  # a retry that comes round after SIGTERM: the ports may be closed
            return
        if deadline is None:
            deadline = self.reactor.seconds() + max(self.cfg.zk_timeout / 1000.0, 1.0)
        bookie = _started(self.bookie)
        readonly = bookie.readonly
        d = threads.deferToThreadPool(
            self.reactor,
            self.reactor.getThreadPool(),
            _started(self.zk).registration.register,
            self.bookie_id,
            self._service_info(),
            readonly=readonly,
        )

        def registered(_):
            log.info("registered %s as %s", self.bookie_id, "read-only" if readonly else "writable")
            if bookie.readonly != readonly:  # changed while we registered
                self._readonly_changed(bookie.readonly)
            self.notifier.ready(f"serving as {self.bookie_id}")
            sdnotify.start_watchdog(self.reactor, self.notifier)
            if self.cfg.auto_recovery_daemon_enabled:
                self._start_autorecovery()

        def failed(f):
            if self.stopping:  # SIGTERM before ZooKeeper answered: nothing to register for
                return
            if f.check(ZKUnavailable) and self.reactor.seconds() + _REGISTER_RETRY < deadline:
                log.warning(
                    "cannot register in ZooKeeper yet (%s): trying again for %.0f s more",
                    f.value,
                    deadline - self.reactor.seconds(),
                )
                self.reactor.callLater(_REGISTER_RETRY, self._register, deadline)
                return
            log.error("cannot register in ZooKeeper: %s", f.value)
            self.exit_code = 1
            self._stop_reactor()

        d.addCallbacks(registered, failed)
        return d

    def _server_tls(self):
        """The bookie's TLS (tlsProviderFactoryClass set), files checked now: ConfigError otherwise."""
        files = self.cfg.tls_files()
        if files is None:
            return None
        from bkctl.wire.tls import ReloadingServerTLS, TLSConfigError

        try:
            tls = ReloadingServerTLS(files, self.cfg.tls_cert_files_refresh_duration_seconds)
        except TLSConfigError as exc:
            raise ConfigError(f"TLS: {exc}") from None
        log.info(
            "TLS on: clients must send START_TLS%s", " and present a certificate" if files.require_client_cert else ""
        )
        return tls

    def _start_autorecovery(self) -> None:
        """The autorecovery daemon beside the bookie, voting with its bookie id, on a
        ZooKeeper session of its own (its expiry makes it step down; the bookie's
        registration does not depend on it), in a child process at a lower CPU
        priority (see :mod:`bookied.autorecovery`): a repair's copying does not
        run in the reactor that serves the live adds."""
        from .autorecovery import AutoRecoveryProcess

        self.autorecovery = autorecovery = AutoRecoveryProcess(self.cfg, self.bookie_id, self.reactor)
        try:
            autorecovery.start()
        except OSError as e:
            log.error("autorecovery daemon could not start: %s", e)

    def _service_info(self) -> BookieServiceInfo:
        host, port = resolve_bookie_address(self.cfg)
        if self.port is not None and self.cfg.bookie_port == 0:
            port = self.port.getHost().port
        http = self.http_port.getHost().port if self.http_port is not None else None
        return BookieServiceInfo.for_bookie(host, port, http_port=http, tls=bool(self.cfg.tls_provider_factory_class))

    def _every(self, seconds: float, fn, now: bool = True) -> None:
        loop = task.LoopingCall(fn)
        loop.clock = self.reactor
        loop.start(max(seconds, 0.05), now=now).addErrback(lambda f: log.error("%s failed: %s", fn.__name__, f.value))
        self._loops.append(loop)

    # -- journal completions -----------------------------------------------------
    def _journal_dispatch(self, callbacks, error) -> None:
        """Runs on the journal thread once per group: one reactor wake-up completes the group."""
        self.reactor.callFromThread(self._complete_group, callbacks, error)

    def _journal_inline_dispatch(self, callbacks, error) -> None:
        """A group committed by the reactor thread itself: complete it right here."""
        self._complete_group(callbacks, error)

    def _complete_group(self, callbacks, error) -> None:
        """In the reactor thread: run a group's callbacks and send their answers at once."""
        if self.factory is not None:
            self.factory.complete_group(callbacks, error, Journal.call_all)
        else:
            Journal.call_all(callbacks, error)
        if self.bookie is not None:
            self.bookie.journal_progressed()

    def _at_end_of_iteration(self, fn) -> None:
        """Run ``fn`` in the reactor thread once the events of the current
        iteration are handled (from another thread: as soon as possible)."""
        if threading.get_ident() == self._reactor_thread:
            self.reactor.callLater(0, fn)
        else:
            self.reactor.callFromThread(fn)

    def _later_in_reactor(self, seconds: float, fn) -> None:
        """Run ``fn`` in the reactor thread ``seconds`` from now."""
        if threading.get_ident() == self._reactor_thread:
            self.reactor.callLater(seconds, fn)
        else:
            self.reactor.callFromThread(self.reactor.callLater, seconds, fn)

    # -- periodic work -----------------------------------------------------------
    def _readonly_changed(self, readonly: bool) -> None:
        if self.stopping:
            return
        if readonly and not self.cfg.read_only_mode_enabled:
            # Java's bookie shuts down where it would go read-only
            log.error(
                "bookie would turn read-only (%s), but readOnlyModeEnabled=false: shutting down",
                _started(self.bookie).readonly_reason,
            )
            self.exit_code = 1
            self._stop_reactor()
            return
        d = threads.deferToThreadPool(
            self.reactor,
            self.reactor.getThreadPool(),
            _started(self.zk).registration.register,
            self.bookie_id,
            self._service_info(),
            readonly=readonly,
        )
        d.addCallback(lambda _: log.info("registration moved to %s", "available/readonly" if readonly else "available"))
        d.addErrback(lambda f: log.error("could not update the registration: %s", f.value))

    def _in_pool(self, fn):
        return threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), fn)

    # -- metrics and status (HTTP admin) -----------------------------------------
    def _register_metrics(self) -> None:
        m = self.metrics
        m.gauge(
            "bookie_journal_queue_bytes",
            "Journal bytes appended but not yet durable.",
            lambda: sum(j.pending_bytes for j in self.journals),
        )
        m.gauge(
            "bookie_journal_fsyncs_total",
            "Journal fsyncs since start.",
            lambda: sum(j.stats.fsyncs for j in self.journals),
        )
        m.gauge(
            "bookie_journal_records_total",
            "Journal records written since start.",
            lambda: sum(j.stats.records for j in self.journals),
        )
        m.gauge(
            "bookie_write_cache_bytes",
            "Entries held in the write cache.",
            lambda: sum(s.cached_bytes for s in self.stores),
        )
        m.gauge("bookie_disk_usage_ratio", "Fullest journal/ledger filesystem (0..1).", self.upkeep.disk_usage)
        m.counter(
            "bookie_disk_checks_total",
            "Disk checks done (each decides read-only or writable).",
            lambda: self.upkeep.disk_checks,
        )
        m.gauge("bookie_read_only", "1 when the bookie is read-only.", lambda: int(self.is_readonly()))
        m.gauge(
            "bookie_throttled_adds",
            "Adds waiting for room in a full write cache (dbStorage_maxThrottleTimeMs).",
            lambda: self.bookie.throttled_adds if self.bookie is not None else 0,
        )
        if self.cfg.auto_recovery_daemon_enabled:
            from .metrics import Refreshed, register_autorecovery

            count = Refreshed(
                lambda: _started(self.zk).underreplication.count(),
                clock=self.reactor,
                run_blocking=lambda fn: threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), fn),
            )
            register_autorecovery(m, lambda: self.autorecovery, count)

    def is_readonly(self) -> bool:
        return bool(self.bookie and self.bookie.readonly)

    def is_running(self) -> bool:
        return self.running and not self.stopping

    def metrics_page(self, accept: str | None = None) -> defer.Deferred:
        """bookied's names, Java's, the process's: collected now, on the reactor thread where
        every figure is kept (one instant); encoded in the thread pool (it reads only the
        collection)."""
        from bkctl.wire.process.exposition import encode

        return threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), encode, self._collect(), accept)

    def _collect(self):
        from bkctl.wire.process.exposition import daemon_registry, snapshot

        from .exposition import OwnCollector
        from .java_names import JavaCollector

        if self.registry is None:
            self.registry = daemon_registry(OwnCollector(self.metrics), JavaCollector(self))
        return snapshot(self.registry)

    def metrics_text(self) -> str:
        from bkctl.wire.process.exposition import encode

        return encode(self._collect()).body.decode("utf-8")

    def info(self) -> dict:
        """Java's freeSpace and totalSpace; then bookied's: what its journal and index directories
        hold (``bkctl disk`` counts them with the entry logs), the disk usage thresholds, and
        why it is read-only when it is."""
        from .storage.index import INDEX_DIR

        total, free = _started(self.bookie).disk_space()
        journals = [os.path.join(d, "current") for d in self.cfg.journal_directories]
        return {
            "freeSpace": free,
            "totalSpace": total,
            "journalBytes": day2.allocated_bytes(journals),
            "indexBytes": day2.allocated_bytes(os.path.join(s.directory, INDEX_DIR) for s in self.stores),
            "diskUsageThreshold": self.cfg.disk_usage_threshold,
            "diskUsageLwmThreshold": self.cfg.disk_usage_lwm_threshold,
            **self._readonly_doc(),
        }

    def state(self) -> dict:
        return {
            "running": self.is_running(),
            "readOnly": self.is_readonly(),
            "shuttingDown": self.stopping,
            "availableForHighPriorityWrites": bool(self.bookie and self.bookie.allow_high_priority_writes),
            **self._readonly_doc(),
        }

    def _readonly_doc(self) -> dict:
        """``readOnlyReasons``: cause -> why ("disk": usage over diskUsageThreshold, "journal", "ledger",
        "admin", "config"), while the bookie is read-only."""
        causes = dict(self.bookie.readonly_causes) if self.bookie is not None else {}
        return {"readOnlyReasons": causes} if causes else {}

    def set_readonly(self, readonly: bool, force: bool = False) -> None:
        """The HTTP admin switch.  Writable again clears what the admin set;
        with ``force`` also a full disk (until the next disk check finds it
        full again).  A failed journal or forceReadOnlyBookie cannot be
        switched off: ValueError (answered 400)."""
        bookie = _started(self.bookie)
        if readonly:
            if not self.cfg.read_only_mode_enabled:
                raise ValueError(
                    "readOnlyModeEnabled=false: this bookie cannot turn read-only (it would shut down instead)"
                )
            bookie.mark_readonly("admin", "set through the HTTP admin API")
            return
        if "config" in bookie.readonly_causes:
            raise ValueError("Bookie is in forceReadOnly mode, cannot transit to writable mode")
        if "journal" in bookie.readonly_causes:
            raise ValueError(f"cannot turn writable: {bookie.readonly_causes['journal']} (restart the bookie)")
        bookie.clear_readonly("admin")
        if force:
            bookie.clear_readonly("disk")
        elif "disk" in bookie.readonly_causes:
            raise ValueError(
                f"still read-only: {bookie.readonly_causes['disk']} "
                "(?force=true overrides it until the next disk check)"
            )
        if "ledger" in bookie.readonly_causes:
            raise ValueError(f"still read-only: {bookie.readonly_causes['ledger']} (until a checkpoint succeeds again)")

    # -- day-2 admin (HTTP: gc, gc_details, list_disk_file, last_log_mark, expand_storage) --
    def force_gc(self, force_major: bool | None = None, force_minor: bool | None = None) -> defer.Deferred:
        return _started(self.gc).trigger(force_major, force_minor)

    def gc_status(self) -> dict[str, Any]:
        return _started(self.gc).status()

    def gc_details(self) -> list[dict[str, Any]]:
        return _started(self.gc).details()

    def _dirs(self) -> tuple[list[str], list[str], list[str]]:
        cfg = self.cfg
        index = [] if cfg.is_derived("indexDirectories") else list(cfg.index_directories)
        return list(cfg.journal_directories), list(cfg.ledger_directories), index

    def list_disk_files(self, file_type: str | None) -> dict:
        return day2.list_disk_files(file_type, *self._dirs())

    def held_ledgers(self) -> defer.Deferred:
        """``/api/v1/bookie/list_ledgers``: every ledger of every store, ascending, sorted in
        the thread pool (a million ids would hold the reactor for a while)."""
        ids = [i for s in self.stores for i in s.ledger_ids(ordered=False)]
        return threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), sorted, ids)

    def last_log_marks(self) -> dict:
        return day2.last_log_marks(j.mark() for j in self.journals)

    def expand_storage(self):
        """Java's expand_storage: the configured directories checked against the cookie with
        expansion allowed (new empty ones stamped); ValueError on a mismatch."""
        journal, ledgers, index = self._dirs()

        def work():
            zk = _started(self.zk)
            cookie = identity.expected_cookie(self.bookie_id, journal, ledgers, index, zk.cluster.instance_id())
            try:
                return identity.check_and_stamp(zk, cookie, allow_expansion=True)
            except identity.IdentityError as e:
                raise ValueError(str(e)) from None

        return threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), work)

    # -- shutdown ---------------------------------------------------------------
    def _arm_exit_deadline(self) -> None:
        self._exit_deadline.arm(self.cfg.shutdown_timeout_ms / 1000.0, lambda: self.exit_code)

    def _deadline_on_signals(self) -> None:
        """Arm the exit deadline in the signal handler itself (wrapping the
        reactor's): a reactor blocked on a ZooKeeper call would never run stop()."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous = signal.getsignal(sig)
            if not callable(previous):
                continue

            def handler(signum, frame, previous=previous):
                self._arm_exit_deadline()
                if not self._signalled:  # a second reactor.stop() would raise ReactorNotRunning
                    self._signalled = True
                    previous(signum, frame)

            signal.signal(sig, handler)

    def _stop_reactor(self) -> None:
        """Stop the reactor unless a shutdown is under way (stopping it twice raises ReactorNotRunning)."""
        if not self.stopping:
            self.reactor.stop()

    @defer.inlineCallbacks
    def stop(self):
        """Bounded by shutdownTimeoutMs: the journals and entry stores are closed
        first; ZooKeeper (unregister, close) gets what is left, at most half the
        budget each, in threads that are abandoned if it does not answer; and
        an :class:`ExitDeadline` ends the process if anything else hangs."""
        if self.stopping:
            return
        self.stopping = True
        budget = self.cfg.shutdown_timeout_ms / 1000.0
        deadline = time.monotonic() + budget
        self._arm_exit_deadline()
        log.info("shutting down")
        self.notifier.stopping()
        if self.autorecovery is not None:
            self._exit_deadline.doing("stopping the autorecovery daemon")
            try:
                yield self.autorecovery.stop(budget / 4)
            except Exception as e:  # noqa: BLE001 - the bookie still stops cleanly
                log.warning("autorecovery daemon: %s", e or type(e).__name__)
        for loop in self._loops:
            if loop.running:
                loop.stop()
        if self.port is not None:
            yield self.port.stopListening()
        for listening in (self.http_port, self.metrics_port):
            if listening is not None:
                yield listening.stopListening()
        pool = self.reactor.getThreadPool()
        # close() writes and fsyncs whatever is queued; its callbacks answer the clients
        self._exit_deadline.doing("closing the journals (writing and syncing what is queued)")
        for j in self.journals:
            yield threads.deferToThreadPool(self.reactor, pool, j.close)
        yield task.deferLater(self.reactor, 0, lambda: None)  # let those answers be written
        for proto in list(self.bookie.connections) if self.bookie else []:
            proto.close()
        if self.gc is not None and self.gc_listing is not None:
            self._exit_deadline.doing("stopping garbage collection and compaction")
            self.gc_listing.stop()  # a listing of the metadata under way ends at once
            try:  # a compaction stops at its next entry; the stores close after it
                yield self.gc.shutdown().addTimeout(max(deadline - time.monotonic(), 0.05) / 2, self.reactor)
            except defer.TimeoutError:
                log.warning("garbage collection did not stop in time")
            yield threads.deferToThreadPool(self.reactor, pool, self.gc_listing.close)
        while self.upkeep.checkpointing:
            yield task.deferLater(self.reactor, 0.01, lambda: None)
        marks = [j.mark() for j in self.journals]
        self._exit_deadline.doing("closing the entry stores (flushing their write caches)")
        for s in self.stores:
            yield threads.deferToThreadPool(self.reactor, pool, s.close)  # flushes first
        for j, m in zip(self.journals, marks):
            j.checkpoint(m)
        if self.zk is not None:
            self._exit_deadline.doing("leaving ZooKeeper (unregister, close the session): is it unreachable?")
            yield self._leave_zookeeper(budget, deadline)
        log.info("stopped")

    @defer.inlineCallbacks
    def _leave_zookeeper(self, budget: float, deadline: float):
        """Unregister, then close the session. The close is tried even when the
        unregister could not be: it is what ends kazoo's reconnect loop, so that
        nothing is retried (or logged) after "stopped"."""
        zk = _started(self.zk)
        steps: list[tuple[str, Callable[..., object], tuple[object, ...]]] = [
            ("close the ZooKeeper session", zk.close, ())
        ]
        if zk.connected:
            steps.insert(0, ("unregister", zk.registration.unregister, (self.bookie_id,)))
        else:  # a request would only wait for a reconnect; the znode goes with the session
            log.warning(
                "could not unregister: not connected to ZooKeeper (the registration ends when the session expires)"
            )
        for what, fn, args in steps:
            left = max(min(budget / 2, deadline - time.monotonic() - 0.2), 0.05)
            try:
                yield call_with_timeout(self.reactor, fn, *args, timeout=left, what=what)
            except defer.TimeoutError:
                log.warning("could not %s: ZooKeeper did not answer within %.1f s", what, left)
            except Exception as e:  # noqa: BLE001 - the bookie still stops
                log.warning("could not %s: %s", what, e)
