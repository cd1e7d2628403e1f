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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from twisted.application.service import Service
from twisted.internet import defer
from twisted.python.failure import Failure

from bkctl.wire.clock import Reactor

from .auditor import Auditor
from .config import AutoRecoveryConfig, AutoRecoveryStats
from .election import AuditorElection
from .worker import ReplicationWorker

if TYPE_CHECKING:
    from bkctl.wire.client.bookkeeper import BookKeeperClient
    from bkctl.wire.client.placement import RandomPlacement
    from bkctl.wire.fastpath import Twins
    from bkctl.wire.metadata.zk import ZKMetadataStore

log = logging.getLogger(__name__)

__all__ = ["AutoRecoveryDaemon"]


class AutoRecoveryDaemon(Service):
    """Autorecovery for the cluster at ``metadata_uri``, voting as ``bookie_id``.

    ``client_options`` go to :class:`~bkctl.wire.client.bookkeeper.BookKeeperClient`
    (``protocol``, timeouts).  ``store``/``client`` may be given (tests).
    """

    name = "autorecovery"  # type: ignore[assignment]  # Twisted annotates Service.name as None, documents a str

    def __init__(
        self,
        metadata_uri: str,
        bookie_id: str,
        config: AutoRecoveryConfig | None = None,
        *,
        reactor: Reactor | None = None,
        zk_timeout: float = 10.0,
        hostname: str | None = None,
        client_options: dict[str, Any] | None = None,
        twins: Twins,
    ):
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
        #: the implementations in use (:mod:`bkctl.wire.fastpath`, its program's record): its
        #: store's and its client's
        self.twins = twins
        self.stats = AutoRecoveryStats()
        self.store: ZKMetadataStore | None = None
        self.client: BookKeeperClient | None = None
        #: the client's placement policy (:meth:`placement`), which watches the rack map from
        #: the client's first read of the bookie lists: built at the start, closed at the stop
        self.placement_policy: RandomPlacement | None = None
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

        store = self.store = ZKMetadataStore(
            self.metadata_uri, timeout=self.zk_timeout, store_ctime=True, twins=self.twins
        )
        placement = self.placement_policy = self.placement()
        client = self.client = BookKeeperClient(
            store, self.reactor, placement=placement, twins=self.twins, **self.client_options
        )
        await client.run_blocking(store.underreplication.ensure_layout)
        self._say_which_delay(await client.run_blocking(store.underreplication.lost_bookie_recovery_delay))
        self.worker = ReplicationWorker(
            client,
            self.config,
            self.reactor,
            self.stats,
            self.hostname,
            worker_id=self.bookie_id,
            cork=client.pool.cork,
        )
        self.worker.start()
        self.election = AuditorElection(
            store, self.bookie_id, self.reactor, client.run_blocking, self.elected, self.demoted
        )
        await self.election.start()
        log.info("autorecovery started for %s (voting as %s)", self.metadata_uri, self.bookie_id)

    def _say_which_delay(self, cluster: int | None) -> None:
        """lostBookieRecoveryDelay is the cluster's (``B/lostBookieRecoveryDelay``, read by
        every auditor, Java's and ours): this daemon's own value is written there only
        when the cluster has none.  Say so at start when they differ, rather than let
        a setting look used that is not."""
        own = int(self.config.lost_bookie_recovery_delay)
        if cluster is None:
            log.info(
                "lostBookieRecoveryDelay: the cluster has none; %ds (this daemon's) is written when "
                "it becomes the auditor",
                own,
            )
        elif cluster != own:
            log.warning(
                "lostBookieRecoveryDelay: the cluster's %ds (ZooKeeper, %s) is used, not this daemon's "
                "%ds: every auditor reads the cluster's, as Java's do; `bkctl autorecovery "
                "lost-bookie-delay %d` changes it",
                cluster,
                "underreplication/lostBookieRecoveryDelay",
                own,
                own,
            )

    def placement(self) -> RandomPlacement:
        """A new placement policy as the config names it, racks from the rack map znode and the
        script; its owner closes it (the start builds :attr:`placement_policy`, the stop closes it)."""
        from bkctl.wire.metadata.racks import build_placement, policy_name

        c = self.config
        return build_placement(
            policy_name(c.ensemble_placement_policy),
            store=self.store,
            script=c.network_topology_script,
            script_args=c.network_topology_script_args,
            min_racks=c.min_racks_per_write_quorum,
            enforce=c.enforce_min_racks_per_write_quorum,
        )

    def elected(self) -> None:
        """(From the election.)  This daemon won the vote: its auditor starts (:attr:`auditor`)."""
        client = self.client
        if client is None:  # (elected only after the start made it)
            return
        self.stats.elections_won += 1
        auditor = self.auditor = Auditor(client, self.config, self.reactor, self.stats, auditor_id=self.bookie_id)

        def failed(f: Failure) -> None:
            # a daemon stopped (or demoted) while its auditor started closes what the start
            # was using: that start's failure is the stop's doing, not news
            if auditor.running:
                log.error("auditor could not start: %s", f.getErrorMessage())
            else:
                log.debug("auditor stopped while it started: %s", f.getErrorMessage())

        auditor.start().addErrback(failed)

    def demoted(self) -> None:
        """(From the election, and the stop.)  This daemon is the auditor no more: its auditor
        stops; a start still under way ends quietly (its failure is the stop's doing)."""
        auditor, self.auditor = self.auditor, None
        if auditor is not None:
            auditor.stop()

    def stopService(self) -> defer.Deferred[None]:  # noqa: N802 - Twisted's name
        super().stopService()  # type: ignore[no-untyped-call]  # unannotated in Twisted
        return defer.ensureDeferred(self._stop())

    async def _stop(self) -> None:
        if self.election is not None:
            await self.election.stop()
        self.demoted()
        if self.worker is not None:
            await self.worker.stop()
        if self.client is not None:
            await self.client.close()
        if self.placement_policy is not None:
            # its rack map watch: the policy is this daemon's to close, before the store it watches
            policy, self.placement_policy = self.placement_policy, None
            policy.close()
        if self.store is not None:
            store, self.store = self.store, None
            await self._in_thread(store.close)
        log.info("autorecovery stopped")

    def _in_thread(self, fn: Callable[[], None]) -> defer.Deferred[None]:
        from twisted.internet import threads

        # zope's IReactorFromThreads, which the checker cannot match a Protocol to: ours has callFromThread
        return threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), fn)  # type: ignore[arg-type]
