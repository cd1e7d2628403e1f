"""The autorecovery daemon (Java's ``AutoRecoveryMain``): an election voter,
the auditor while elected, and a replication worker, on a ZooKeeper session
and a BookKeeper client of their own.

It runs on a Twisted reactor without blocking it (ZooKeeper calls go to the
reactor's thread pool), so ``bookied`` can host it beside its bookie
(``autoRecoveryDaemonEnabled=true``) and ``bkctl autorecovery run`` can run it
alone for hosts whose bookies are Java's.
"""
from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from twisted.application.service import Service
from twisted.internet import defer
from twisted.python.failure import Failure

from bkctl.wire.clock import Reactor

from .auditor import Auditor
from .election import AuditorElection
from .worker import ReplicationWorker

if TYPE_CHECKING:
    from bkctl.wire.client.bookkeeper import BookKeeperClient
    from bkctl.wire.client.placement import RandomPlacement
    from bkctl.wire.metadata.zk import ZKMetadataStore

log = logging.getLogger(__name__)

__all__ = ["AutoRecoveryConfig", "AutoRecoveryDaemon", "AutoRecoveryStats", "CONFIG_KEYS", "config_from_keys"]


@dataclass
class AutoRecoveryConfig:
    """The bk_server.conf keys of autorecovery (Java's names and defaults, in
    :data:`CONFIG_KEYS`), in seconds where Java has milliseconds."""

    #: lostBookieRecoveryDelay: s; written to B/lostBookieRecoveryDelay only when missing: the
    #: cluster's value there wins (as in Java), and the daemon says so at start when they differ
    lost_bookie_recovery_delay: int = 0
    #: auditorPeriodicCheckInterval: s between checks of every ledger's replicas (0: never)
    auditor_periodic_check_interval: float = 604800
    #: auditorPeriodicBookieCheckInterval: s between audits of lost bookies (0: only on changes)
    auditor_periodic_bookie_check_interval: float = 86400
    #: auditorReplicasCheckInterval: s between replicas checks (0: never, Java's default)
    auditor_replicas_check_interval: float = 0
    #: openLedgerRereplicationGracePeriod (ms in the file)
    open_ledger_rereplication_grace_period: float = 30.0
    #: lockReleaseOfFailedLedgerGracePeriod (ms in the file)
    lock_release_of_failed_ledger_grace_period: float = 300.0
    #: rereplicationEntryBatchSize: entries being added to new bookies at a time (as many more read ahead);
    #: also the most a worker adds in one 10 ms tick (Java's default is 10)
    rereplication_entry_batch_size: int = 40
    #: replicationRateByBytes: bytes/s a worker copies at most (<= 0: unlimited)
    replication_rate_by_bytes: int = -1
    #: ensemblePlacementPolicy: how replacements are chosen (a Java class name, or random/rack/region)
    ensemble_placement_policy: str = "org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicy"
    #: networkTopologyScriptFileName: a script printing hosts' racks (besides the /bookies rack map)
    network_topology_script: str | None = None
    #: networkTopologyScriptNumberArgs: hosts per script run
    network_topology_script_args: int = 100
    #: minNumRacksPerWriteQuorum
    min_racks_per_write_quorum: int = 2
    #: enforceMinNumRacksPerWriteQuorum
    enforce_min_racks_per_write_quorum: bool = False
    #: auditorPeriodicPlacementPolicyCheckInterval: s between checks of every ledger's ensembles
    #: against the placement policy (0: never, Java's default)
    auditor_placement_policy_check_interval: float = 0
    #: not a Java key: how often an idle worker looks for marked ledgers (s)
    worker_poll_interval: float = 1.0
    #: not a Java key: pause before an audit that failed is tried again (s)
    audit_retry_interval: float = 5.0


#: bk_server.conf key -> (field, scale from the file's unit to the field's)
CONFIG_KEYS: dict[str, tuple[str, float]] = {
    "lostBookieRecoveryDelay": ("lost_bookie_recovery_delay", 1),
    "auditorPeriodicCheckInterval": ("auditor_periodic_check_interval", 1),
    "auditorPeriodicBookieCheckInterval": ("auditor_periodic_bookie_check_interval", 1),
    "auditorReplicasCheckInterval": ("auditor_replicas_check_interval", 1),
    "openLedgerRereplicationGracePeriod": ("open_ledger_rereplication_grace_period", 0.001),
    "lockReleaseOfFailedLedgerGracePeriod": ("lock_release_of_failed_ledger_grace_period", 0.001),
    "rereplicationEntryBatchSize": ("rereplication_entry_batch_size", 1),
    "replicationRateByBytes": ("replication_rate_by_bytes", 1),
    "ensemblePlacementPolicy": ("ensemble_placement_policy", 1),
    "networkTopologyScriptFileName": ("network_topology_script", 1),
    "networkTopologyScriptNumberArgs": ("network_topology_script_args", 1),
    "minNumRacksPerWriteQuorum": ("min_racks_per_write_quorum", 1),
    "enforceMinNumRacksPerWriteQuorum": ("enforce_min_racks_per_write_quorum", 1),
    "auditorPeriodicPlacementPolicyCheckInterval": ("auditor_placement_policy_check_interval", 1),
}
assert {f for f, _ in CONFIG_KEYS.values()} <= {f.name for f in fields(AutoRecoveryConfig)}


def config_from_keys(values: Mapping[str, Any]) -> AutoRecoveryConfig:
    """An :class:`AutoRecoveryConfig` from typed bk_server.conf values
    (``values.get(java_key)``; missing keys keep their defaults)."""
    config = AutoRecoveryConfig()
    for key, (name, scale) in CONFIG_KEYS.items():
        value = values.get(key)
        if value is not None:
            setattr(config, name, value * scale if scale != 1 else value)
    return config


@dataclass
class AutoRecoveryStats:
    """What the daemon has done, for /metrics and the HTTP API."""

    audits: int = 0
    ledgers_marked: int = 0
    ledgers_rereplicated: int = 0
    entries_rereplicated: int = 0
    bytes_rereplicated: int = 0
    failures: int = 0
    elections_won: int = 0
    #: seconds from each re-replicated ledger's mark (its ctime) to the worker deleting it, summed
    recovery_seconds_sum: float = 0.0
    #: how many ledgers recovery_seconds_sum covers (marks without a ctime are not counted)
    recovery_seconds_count: int = 0
    #: the figures of the last replicas check (see Auditor.replicas_check)
    last_replicas_check: dict[str, Any] | None = None
    #: the figures of the last placement check (see Auditor.placement_check)
    last_placement_check: dict[str, Any] | None = None


class AutoRecoveryDaemon(Service):
    """Autorecovery for the cluster at ``metadata_uri``, voting as ``bookie_id``.

    ``client_options`` go to :class:`~bkctl.wire.client.bookkeeper.BookKeeperClient`
    (``protocol``, timeouts).  ``store``/``client`` may be given (tests).
    """

    name = "autorecovery"  # type: ignore[assignment]  # Twisted annotates Service.name as None, documents a str

    def __init__(self, metadata_uri: str, bookie_id: str, config: AutoRecoveryConfig | None = None, *,
                 reactor: Reactor | None = None, zk_timeout: float = 10.0, hostname: str | None = None,
                 client_options: dict[str, Any] | None = None):
        if reactor is None:
            from twisted.internet import reactor as _reactor

            reactor = _reactor  # the global reactor: a module to the checker, a Reactor when it runs
        self.metadata_uri = metadata_uri
        self.bookie_id = bookie_id
        self.config = config or AutoRecoveryConfig()
        self.reactor = reactor
        self.zk_timeout = zk_timeout
        self.hostname = hostname or socket.gethostname()
        self.client_options = dict(client_options or {})
        self.stats = AutoRecoveryStats()
        self.store: ZKMetadataStore | None = None
        self.client: BookKeeperClient | None = None
        self.election: AuditorElection | None = None
        self.auditor: Auditor | None = None
        self.worker: ReplicationWorker | None = None

    @property
    def is_auditor(self) -> bool:
        return self.auditor is not None and self.auditor.running

    def startService(self) -> defer.Deferred[None]:  # noqa: N802 - Twisted's name
        super().startService()  # type: ignore[no-untyped-call]  # unannotated in Twisted
        return defer.ensureDeferred(self._start())

    async def _start(self) -> None:
        from bkctl.wire.client.bookkeeper import BookKeeperClient
        from bkctl.wire.metadata.zk import ZKMetadataStore

        store = self.store = ZKMetadataStore(self.metadata_uri, timeout=self.zk_timeout, store_ctime=True)
        client = self.client = BookKeeperClient(store, self.reactor, placement=self.placement(),
                                                **self.client_options)
        await client.run_blocking(store.underreplication.ensure_layout)
        self._say_which_delay(await client.run_blocking(store.underreplication.lost_bookie_recovery_delay))
        self.worker = ReplicationWorker(client, self.config, self.reactor, self.stats, self.hostname,
                                        worker_id=self.bookie_id, cork=client.pool.cork)
        self.worker.start()
        self.election = AuditorElection(store, self.bookie_id, self.reactor, client.run_blocking,
                                        self._elected, self._demoted)
        await self.election.start()
        log.info("autorecovery started for %s (voting as %s)", self.metadata_uri, self.bookie_id)

    def _say_which_delay(self, cluster: int | None) -> None:
        """lostBookieRecoveryDelay is the cluster's (``B/lostBookieRecoveryDelay``, read by
        every auditor, Java's and ours): this daemon's own value is written there only
        when the cluster has none.  Say so at start when they differ, rather than let
        a setting look used that is not."""
        own = int(self.config.lost_bookie_recovery_delay)
        if cluster is None:
            log.info("lostBookieRecoveryDelay: the cluster has none; %ds (this daemon's) is written when "
                     "it becomes the auditor", own)
        elif cluster != own:
            log.warning("lostBookieRecoveryDelay: the cluster's %ds (ZooKeeper, %s) is used, not this daemon's "
                        "%ds: every auditor reads the cluster's, as Java's do; `bkctl autorecovery "
                        "lost-bookie-delay %d` changes it", cluster, "underreplication/lostBookieRecoveryDelay",
                        own, own)

    def placement(self) -> RandomPlacement:
        """The placement policy the config names, racks from the rack map znode and the script."""
        from bkctl.wire.metadata.racks import build_placement, policy_name

        c = self.config
        return build_placement(policy_name(c.ensemble_placement_policy), store=self.store,
                               script=c.network_topology_script, script_args=c.network_topology_script_args,
                               min_racks=c.min_racks_per_write_quorum,
                               enforce=c.enforce_min_racks_per_write_quorum)

    def _elected(self) -> None:
        client = self.client
        if client is None:  # (elected only after the start made it)
            return
        self.stats.elections_won += 1
        auditor = self.auditor = Auditor(client, self.config, self.reactor, self.stats,
                                         auditor_id=self.bookie_id)

        def failed(f: Failure) -> None:
            # a daemon stopped (or demoted) while its auditor started closes what the start
            # was using: that start's failure is the stop's doing, not news
            if auditor.running:
                log.error("auditor could not start: %s", f.getErrorMessage())
            else:
                log.debug("auditor stopped while it started: %s", f.getErrorMessage())

        auditor.start().addErrback(failed)

    def _demoted(self) -> None:
        auditor, self.auditor = self.auditor, None
        if auditor is not None:
            auditor.stop()

    def stopService(self) -> defer.Deferred[None]:  # noqa: N802 - Twisted's name
        super().stopService()  # type: ignore[no-untyped-call]  # unannotated in Twisted
        return defer.ensureDeferred(self._stop())

    async def _stop(self) -> None:
        if self.election is not None:
            await self.election.stop()
        self._demoted()
        if self.worker is not None:
            await self.worker.stop()
        if self.client is not None:
            await self.client.close()
        if self.store is not None:
            store, self.store = self.store, None
            await self._in_thread(store.close)
        log.info("autorecovery stopped")

    def _in_thread(self, fn: Callable[[], None]) -> defer.Deferred[None]:
        from twisted.internet import threads

        # zope's IReactorFromThreads, which the checker cannot match a Protocol to: ours has callFromThread
        return threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), fn)  # type: ignore[arg-type]
