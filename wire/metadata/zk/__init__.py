"""The metadata store on ZooKeeper: one session, one manager per job (BookKeeper's
meta/zk/ZKMetadataDriverBase.java and meta/AbstractZkLedgerManager.java), reading and writing exactly the znodes a Java BookKeeper
cluster uses, so Java clients, bookies and tools can share a cluster with us.

:class:`ZKMetadataStore` is the session (:mod:`.session`: kazoo client,
start/close, error translation, restoring registrations after an expiry) and
exposes the managers, as Java's metadata driver does:

==========================  =====================================  ====================================
attribute                   module                                 Java
==========================  =====================================  ====================================
``store.cluster``           :mod:`.cluster` (init/format/nuke,     ZKRegistrationManager's cluster
                            INSTANCEID, LAYOUT)                    operations, LayoutManager
``store.ledger_ids``        :mod:`.ledger_ids`                     ZkLedgerIdGenerator, LongZk...
``store.ledgers``           :mod:`.ledgers`                        HierarchicalLedgerManager & co.
``store.registration``      :mod:`.registration`                   ZKRegistrationManager/-Client
``store.cookies``           :mod:`.cookies`                        ZKRegistrationManager's cookies
``store.racks``             :mod:`.racks`                          Pulsar's BookieRackAffinityMapping
``store.underreplication``  :mod:`.underreplication`               ZkLedgerUnderreplicationManager
``store.auditor``           :mod:`.auditor`                        ZkLedgerAuditorManager
``store.pulsar``            :mod:`.pulsar` (read-only)             Pulsar's MetaStoreImpl, partitioned-
                                                                   topic resources
==========================  =====================================  ====================================

Every manager method is synchronous (kazoo runs its own I/O thread) and
thread-safe; expected failures surface as :mod:`bkctl.wire.metadata.errors`,
never as raw kazoo exceptions.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from bkctl.wire.metadata.layout import MetadataServiceURI
from bkctl.wire.metadata.zk.auditor import ZKAuditorElection
from bkctl.wire.metadata.zk.cluster import ZKClusterManager
from bkctl.wire.metadata.zk.cookies import ZKCookieManager
from bkctl.wire.metadata.zk.ledger_ids import ZKLedgerIdGenerator
from bkctl.wire.metadata.zk.ledgers import ZKLedgerManager
from bkctl.wire.metadata.zk.lost_entries import ZKLostEntryRecords
from bkctl.wire.metadata.zk.pulsar import ZKPulsarMetadata
from bkctl.wire.metadata.zk.racks import ZKRackMap
from bkctl.wire.metadata.zk.rebalance import ZKSavedRebalance
from bkctl.wire.metadata.zk.registration import ZKRegistrationManager
from bkctl.wire.metadata.zk.restores import ZKRestoreJournals
from bkctl.wire.metadata.zk.session import ZKSession
from bkctl.wire.metadata.zk.underreplication import ZKUnderreplicationManager

if TYPE_CHECKING:
    from bkctl.wire.fastpath import Twins
    from bkctl.wire.metadata.zksecurity import ZKSecurity

__all__ = ["ZKMetadataStore"]


class ZKMetadataStore(ZKSession):
    """BookKeeper metadata on ZooKeeper, addressed by a metadata service URI.

    ``ZKMetadataStore("zk+hierarchical://127.0.0.1:2181/ledgers", timeout=10, twins=twins)``.
    ``zk://`` (or ``zk+null://``) takes the ledger manager from the cluster's
    LAYOUT (hierarchical when there is none); an explicit manager must match
    an existing LAYOUT.  *timeout* bounds the initial connection; the session
    timeout defaults to it as well.  *store_ctime* and *wall_clock*: see
    :class:`~.underreplication.ZKUnderreplicationManager`.  *twins*: the implementations in
    use (:mod:`bkctl.wire.fastpath`, the program's record): the walks' scanner and the
    ledger metadata decoder.
    """

    def __init__(
        self,
        uri: str,
        timeout: float = 10.0,
        *,
        session_timeout: float | None = None,
        store_ctime: bool = False,
        security: ZKSecurity | None = None,
        wall_clock: Callable[[], float] = time.time,
        twins: Twins,
    ):
        parsed = MetadataServiceURI.parse(uri)
        super().__init__(
            parsed.hosts, parsed.root, timeout, session_timeout=session_timeout, security=security, twins=twins
        )
        self.uri = uri
        self.registration = ZKRegistrationManager(self)
        self.underreplication = ZKUnderreplicationManager(self, store_ctime, wall_clock)
        self.cluster = ZKClusterManager(self, parsed.layout_manager, self.registration)
        self.ledger_ids = ZKLedgerIdGenerator(self, self.cluster)
        self.cluster.forget_also(self.ledger_ids.forget_cached, self.underreplication.forget_cached)
        self.ledgers = ZKLedgerManager(self, self.cluster, self.ledger_ids)
        self.cookies = ZKCookieManager(self)
        self.racks = ZKRackMap(self)
        self.auditor = ZKAuditorElection(self, self.underreplication)
        self.pulsar = ZKPulsarMetadata(self)
        self.rebalance = ZKSavedRebalance(self)
        self.restores = ZKRestoreJournals(self)
        self.lost_entries = ZKLostEntryRecords(self)

    def close(self) -> None:
        """Close the session: every ephemeral node of this store disappears."""
        super().close()
        self.registration.forget_registrations()
