"""``bookied --salvage DIR``: serve a stopped or dead bookie's directories read-only under
that bookie's old id, so that the cluster's re-replication (Java's autorecovery or
bookied's, ``bkctl recover``) copies what only it held.

The directories (:class:`~.storage.salvage.SalvageStore`: Java's Interleaved and
DbLedgerStorage, bookied's own, and their journals' entries) are read where they are;
nothing is written to them, no journal is replayed into them, no cookie is checked or
stamped (a bookie that will not start is what this is for: a damaged journal, a
RocksDB or a cookie it refuses).  The bookie id is the one its directories' cookie
(``current/VERSION``) names, else the configuration's.  It registers read-only (no add
is taken: clients and re-replication never pick it as a target) with its address as
this process listens (``bookiePort``, ``advertisedAddress``: the old bookie's host
and port need not be free or reachable), after waiting out the old process's
registration; a bookie still registered under that id for twice the ZooKeeper
session timeout is refused (it is running).  Its registration says it is a salvage
(:data:`~bkctl.wire.metadata.serviceinfo.SALVAGE_PROPERTY`): to bookied's auditor and
replication workers and to ``bkctl`` the bookie stays lost, so its ledgers are marked
and copied off, reading from here (Java's auditor counts it alive: run
``bkctl recover ID --force`` there).  Reads, fencing reads (the ledger
counts as fenced), entry lists and LAC reads are answered as a bookie answers them.
A damaged record is skipped and logged (a WARNING naming it), never fatal.
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Any

from twisted.internet import defer, threads

from bkctl.wire.metadata.serviceinfo import SALVAGE_PROPERTY, BookieServiceInfo

from .errors import JournalUnavailable

if TYPE_CHECKING:
    from bkctl.wire.fastpath import Twins

log = logging.getLogger("bookied.salvage")

__all__ = ["SalvageService", "salvaged_bookie_id"]


class _NoJournal:
    """What the bookie writes to a journal: refused (a salvaged bookie takes no write)."""

    def append(self, record, callback) -> None:
        raise JournalUnavailable("a salvaged bookie has no journal: it is read-only")

    def force(self, callback) -> None:
        raise JournalUnavailable("a salvaged bookie has no journal: it is read-only")


def salvaged_bookie_id(currents: list[str]) -> str | None:
    """The bookie id the directories' cookies name (the first readable one), None if none does."""
    from bkctl.wire.metadata.cookie import parse_cookie

    for current in currents:
        path = os.path.join(current, "VERSION")
        try:
            with open(path, "rb") as f:
                return parse_cookie(f.read()).bookie_id
        except Exception as exc:  # noqa: BLE001 - a damaged cookie: the next one may do
            if os.path.exists(path):
                log.warning("salvage: %s: unreadable cookie: %s", path, exc)
    return None


class SalvageService:
    """Started by :meth:`start` (blocking, before the reactor runs); :meth:`stop` on SIGTERM."""

    def __init__(self, cfg, reactor, roots: list[str], twins: Twins):
        self.cfg = cfg
        #: the implementations in use (:mod:`bkctl.wire.fastpath`: given by bookied's start)
        self.twins = twins
        self.reactor = reactor
        self.roots = roots
        self.store: Any = None
        self.bookie: Any = None
        self.zk: Any = None
        self.port: Any = None
        self.bookie_id: str | None = None
        self.exit_code = 0
        self.stopping = False

    # what main's clean-up closes
    @property
    def journals(self) -> list:
        return []

    @property
    def stores(self) -> list:
        return [self.store] if self.store is not None else []

    def start(self) -> None:
        from bkctl.wire.metadata.zk import ZKMetadataStore

        from .bookie import Bookie
        from .config import ConfigError, resolve_bookie_id, resolve_listen_host
        from .metrics import Metrics
        from .server import BookieServerFactory
        from .storage.salvage import SalvageStore

        cfg = self.cfg
        started = time.monotonic()
        self.store = store = SalvageStore(self.roots)
        summary = store.summary()
        log.info(
            "salvage: %d ledgers, %d entries (%d only in journals) in %s; %d damaged records left out (%.1f s)",
            summary["ledgers"],
            summary["entries"],
            summary["from_journals"],
            ", ".join(summary["directories"]),
            summary["damaged"],
            time.monotonic() - started,
        )
        self.bookie_id = salvaged_bookie_id(store.currents) or resolve_bookie_id(cfg)
        if not cfg.metadata_service_uri:
            raise ConfigError("metadataServiceUri: not set: salvage registers in the cluster", key="metadataServiceUri")
        self.bookie = bookie = Bookie(
            [_NoJournal()],
            [store],
            clock=self.reactor,
            max_frame_size=cfg.netty_max_frame_size_bytes,
            allow_high_priority_writes_when_readonly=False,
        )
        bookie.mark_readonly("salvage", "serving a salvaged bookie's directories, read-only")
        metrics = Metrics()
        factory = BookieServerFactory(bookie, metrics, cfg.netty_max_frame_size_bytes, twins=self.twins)
        host = resolve_listen_host(cfg)
        self.port = self.reactor.listenTCP(cfg.bookie_port, factory, interface=host)
        log.info("salvage: serving %s read-only on %s:%d", self.bookie_id, host, self.port.getHost().port)
        self.zk = ZKMetadataStore(cfg.metadata_service_uri, timeout=cfg.zk_timeout / 1000.0, twins=self.twins)
        self.zk.start()
        self.reactor.addSystemEventTrigger("before", "shutdown", self.stop)
        self.reactor.callWhenRunning(self._register)

    def _service_info(self) -> BookieServiceInfo:
        from .config import resolve_bookie_address

        host, port = resolve_bookie_address(self.cfg)
        if self.port is not None:
            port = self.port.getHost().port
        return BookieServiceInfo.for_bookie(host, port, properties={SALVAGE_PROPERTY: "true"})

    def _register_blocking(self) -> None:
        registration = self.zk.registration
        deadline = time.monotonic() + 2 * self.cfg.zk_timeout / 1000.0
        while registration.is_registered(self.bookie_id):
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"bookie {self.bookie_id} is registered: it is running (salvage serves only a stopped bookie)"
                )
            time.sleep(0.2)
        registration.register(self.bookie_id, self._service_info(), readonly=True)

    def _register(self):
        d = threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), self._register_blocking)

        def registered(_):
            log.info("salvage: registered %s read-only", self.bookie_id)

        def failed(f):
            if self.stopping:
                return
            log.error("salvage: cannot register: %s", f.getErrorMessage())
            self.exit_code = 1
            self.reactor.stop()

        return d.addCallbacks(registered, failed)

    @defer.inlineCallbacks
    def stop(self):
        if self.stopping:
            return
        self.stopping = True
        if self.port is not None:
            yield self.port.stopListening()
        for proto in list(self.bookie.connections) if self.bookie else []:
            proto.close()
        pool = self.reactor.getThreadPool()
        if self.zk is not None:
            try:
                yield threads.deferToThreadPool(self.reactor, pool, self.zk.registration.unregister, self.bookie_id)
            except Exception as exc:  # noqa: BLE001
                log.warning("salvage: could not unregister: %s", exc)
            yield threads.deferToThreadPool(self.reactor, pool, self.zk.close)
        if self.store is not None:
            self.store.close()
        log.info("salvage: stopped")
