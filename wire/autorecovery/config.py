"""What configures an autorecovery daemon and what it counts: the bk_server.conf keys
it reads (:class:`AutoRecoveryConfig`, :data:`CONFIG_KEYS`) and its figures
(:class:`AutoRecoveryStats`).  Apart from :mod:`.service`, so that the auditor and
the worker the daemon runs can name them without importing the daemon.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["AutoRecoveryConfig", "AutoRecoveryStats", "CONFIG_KEYS", "config_from_keys"]


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

    def __post_init__(self) -> None:
        #: called with each audit's count of ledgers marked (``bkctl autorecovery run``'s
        #: auditor_NUM_UNDER_REPLICATED_LEDGERS); not a field: bookied's child sends the fields
        self.on_audit: Callable[[int], None] | None = None

    def audited(self, marked: int) -> None:
        """An audit ended, having marked ``marked`` ledgers under-replicated."""
        self.audits += 1
        if self.on_audit is not None:
            self.on_audit(marked)
