"""The autorecovery daemon's keys (bkctl.wire.autorecovery; the same keys as
``bkctl autorecovery run --set``): auditor intervals, placement policy, replication pace (section
``autorecovery``).
"""

from __future__ import annotations

from ..errors import InvalidValue
from .option import JAVA_INT_MAX, JAVA_LONG_MAX, Option

__all__ = ["OPTIONS"]


def _check_placement_policy(value: str) -> None:
    from bkctl.wire.metadata.racks import policy_name

    try:
        policy_name(value)
    except ValueError as exc:
        raise InvalidValue(
            str(exc).replace(f"unsupported ensemblePlacementPolicy {value!r} ", "is not supported ")
        ) from None


OPTIONS: tuple[Option, ...] = (
    # -- autorecovery (bkctl.wire.autorecovery; the same keys as `bkctl autorecovery run --set`) --
    Option(
        "autoRecoveryDaemonEnabled",
        "bool",
        False,
        "Whether the bookie also runs the autorecovery daemon: it votes in the auditor election "
        "(the elected daemon audits the cluster) and re-replicates under-replicated ledgers.",
        "autorecovery",
    ),
    Option(
        "autoRecoveryDaemonCpuPriority",
        "str",
        "normal",
        "CPU priority of the autorecovery daemon's process (the bookie runs it as a child process): "
        "normal (the bookie's, as Java runs its replication workers: a repair competes for the CPU, "
        "so ledgers a copy short are re-protected in time on a busy host), idle (Linux SCHED_IDLE: it "
        "runs only on CPU time nothing else wants, so a repair never holds back the adds and reads the "
        "bookie serves, but on a host kept busy it waits, the ledgers a copy short meanwhile) or low "
        "(nice 19); below normal, where the kernel shares the CPU by session (autogroup), the process "
        "also takes a session of its own whose group has the weight of nice 19; bookied only.",
        "autorecovery",
        choices=("idle", "low", "normal"),
    ),
    Option(
        "lostBookieRecoveryDelay",
        "int",
        0,
        "How long the auditor waits after a bookie disappears before marking its ledgers "
        "under-replicated; written to ZooKeeper by the first auditor, which then reads it from there.",
        "autorecovery",
        unit="s",
        min=0,
        max=JAVA_INT_MAX,
    ),
    Option(
        "auditorPeriodicCheckInterval",
        "int",
        604800,
        "Interval between the auditor's checks of every ledger's fragments on their bookies (0: never).",
        "autorecovery",
        unit="s",
        min=0,
        max=JAVA_LONG_MAX,
    ),
    Option(
        "auditorPeriodicBookieCheckInterval",
        "int",
        86400,
        "Interval between the auditor's audits of lost bookies, besides those on registration changes "
        "(0: only on changes).",
        "autorecovery",
        unit="s",
        min=0,
        max=JAVA_LONG_MAX,
    ),
    Option(
        "auditorReplicasCheckInterval",
        "int",
        0,
        "Interval between the auditor's replicas checks, which count entries stored below their "
        "write and ack quorums and report them (0: never).",
        "autorecovery",
        unit="s",
        min=0,
        max=JAVA_LONG_MAX,
    ),
    Option(
        "auditorPeriodicPlacementPolicyCheckInterval",
        "int",
        0,
        "Interval between the auditor's checks of every ledger's ensembles against the placement "
        "policy; ledgers that break it are counted and logged, not marked (0: never).",
        "autorecovery",
        unit="s",
        min=0,
        max=JAVA_LONG_MAX,
    ),
    Option(
        "ensemblePlacementPolicy",
        "str",
        "org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicy",
        "How replication workers choose replacement bookies: RackawareEnsemblePlacementPolicy, "
        "RegionAwareEnsemblePlacementPolicy (racks named /region/rack) or DefaultEnsemblePlacementPolicy "
        "(random); racks come from ZooKeeper's /bookies rack map (Pulsar's) and "
        "networkTopologyScriptFileName, bookies named by neither are in /default-rack.",
        "autorecovery",
        metavar_name="CLASS",
        check=_check_placement_policy,
    ),
    Option(
        "networkTopologyScriptFileName",
        "str",
        None,
        "A script run with host names as arguments that prints their racks, one per argument.",
        "autorecovery",
        metavar_name="PATH",
    ),
    Option(
        "networkTopologyScriptNumberArgs",
        "int",
        100,
        "Host names given to one run of networkTopologyScriptFileName.",
        "autorecovery",
        min=1,
        max=JAVA_INT_MAX,
    ),
    Option(
        "minNumRacksPerWriteQuorum",
        "int",
        2,
        "Racks every write quorum of a replacement's ensemble should span (at most the write quorum).",
        "autorecovery",
        min=1,
        max=JAVA_INT_MAX,
    ),
    Option(
        "enforceMinNumRacksPerWriteQuorum",
        "bool",
        False,
        "Fail a replacement rather than break minNumRacksPerWriteQuorum; bookies in /default-rack are "
        "then never chosen.",
        "autorecovery",
    ),
    Option(
        "openLedgerRereplicationGracePeriod",
        "int",
        30000,
        "How long a replication worker leaves an open ledger whose last ensemble lost a bookie to its "
        "writer before fencing and closing it.",
        "autorecovery",
        unit="ms",
        min=0,
        max=JAVA_LONG_MAX,
    ),
    Option(
        "lockReleaseOfFailedLedgerGracePeriod",
        "int",
        300000,
        "How long a replication worker keeps the lock of a ledger it failed to re-replicate (doubling "
        "on repeated failures, up to 8 times) before another worker may try.",
        "autorecovery",
        unit="ms",
        min=0,
        max=JAVA_LONG_MAX,
    ),
    Option(
        "rereplicationEntryBatchSize",
        "int",
        40,
        "Entries a replication worker adds to new bookies at a time (and reads as many ahead); its adds "
        "leave in batches every 10 ms, so this is also the most it adds in 10 ms, 4,000 a second by "
        "default (Java's default is 10).",
        "autorecovery",
        min=1,
        max=JAVA_INT_MAX,
    ),
    Option(
        "replicationRateByBytes",
        "int",
        -1,
        "Bytes per second a replication worker copies at most (-1: unlimited).",
        "autorecovery",
        unit="bytes/s",
        min=-1,
        max=JAVA_INT_MAX,
    ),
)
