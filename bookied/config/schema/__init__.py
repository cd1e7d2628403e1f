"""The bk_server.conf schema: ``OPTIONS``, one :class:`Option` per key.

Parsing, validation, defaults, ``bookied --help`` and the bookied.conf(5)
man page all come from it.  Key names, defaults and meanings follow Apache
BookKeeper's Java bookie (``ServerConfiguration`` and the stock
``bk_server.conf``).  ``IGNORED_KEYS`` are the Java keys bookied accepts
without supporting them.

Each owner's keys live in their own module (:mod:`.server`, :mod:`.journal`,
:mod:`.storage`, :mod:`.metadata`, :mod:`.autorecovery`, :mod:`.tls`), the
``Option`` type they share in :mod:`.option`; this module puts them in the
one order ``BookieConfig``'s fields, ``--help`` and the man page follow.
"""

from __future__ import annotations

from collections.abc import Mapping

from . import autorecovery, journal, metadata, server, storage, tls
from .metadata import parse_metadata_uri
from .option import TYPES, Option, number_text

__all__ = [
    "IGNORED_KEYS",
    "OPTIONS",
    "OPTIONS_BY_NAME",
    "Option",
    "SECTIONS",
    "find_option",
    "number_text",
    "parse_metadata_uri",
]

# Man page / config file sections, in order.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("server", "Bookie server"),
    ("http", "HTTP admin server"),
    ("journal", "Journal"),
    ("storage", "Ledger storage"),
    ("disk", "Disk usage"),
    ("gc", "Garbage collection"),
    ("metadata", "Metadata service"),
    ("autorecovery", "Autorecovery"),
    ("tls", "TLS"),
)

OPTIONS: tuple[Option, ...] = (
    server.OPTIONS + journal.OPTIONS + storage.OPTIONS + metadata.OPTIONS + autorecovery.OPTIONS + tls.OPTIONS
)

OPTIONS_BY_NAME: Mapping[str, Option] = {opt.name: opt for opt in OPTIONS}

# Keys of the Java bookie that bookied accepts but does not support: each one a
# file sets is warned about, once, as having no effect.
IGNORED_KEYS: frozenset[str] = frozenset(
    """
    ledgerStorageClass sortedLedgerStorageEnabled entryLogFilePreallocationEnabled
    flushEntrylogBytes readBufferSizeBytes writeBufferSizeBytes entryLogPerLedgerEnabled
    numOfMemtableFlushThreads entrylogMapAccessExpiryTimeInSeconds maximumNumberOfActiveEntryLogs
    entryLogPerLedgerCounterLimitsMultFactor
    useTransactionalCompaction
    gcOverreplicatedLedgerMaxConcurrentRequests
    gcEntryLogMetadataCacheEnabled
    gcEntryLogMetadataCachePath localScrubInterval localScrubRateLimit
    numAddWorkerThreads numReadWorkerThreads numLongPollWorkerThreads numJournalCallbackThreads
    numHighPriorityWorkerThreads maxPendingReadRequestsPerThread maxPendingAddRequestsPerThread
    readWorkerThreadsThrottlingEnabled serverNumIOThreads serverNumAcceptorThreads
    requestTimerTickDurationMs requestTimerNumTicks
    serverTcpNoDelay serverSockKeepalive serverTcpLinger serverWriteBufferLowWaterMark
    serverWriteBufferHighWaterMark byteBufAllocatorSizeInitial byteBufAllocatorSizeMin
    byteBufAllocatorSizeMax closeChannelOnResponseTimeout waitTimeoutOnResponseBackpressureMs
    journalFormatVersionToWrite journalWriteBufferSizeKB journalRemoveFromPageCache
    journalAlignmentSize journalQueueSize journalMaxMemorySizeMb journalPageCacheFlushIntervalMSec
    journalChannelProvider journalReuseFiles
    skipListSizeLimit skipListArenaChunkSize skipListArenaMaxAllocSize openFileLimit pageSize
    pageLimit fileInfoCacheInitialCapacity fileInfoMaxIdleTime fileInfoFormatVersionToWrite
    dbStorage_readAheadCacheMaxSizeMb dbStorage_readAheadCacheBatchSize
    dbStorage_rocksDB_blockCacheSize dbStorage_rocksDB_writeBufferSizeMB
    dbStorage_rocksDB_sstSizeInMB dbStorage_rocksDB_blockSize dbStorage_rocksDB_bloomFilterBitsPerKey
    dbStorage_rocksDB_numLevels dbStorage_rocksDB_numFilesInLevel0 dbStorage_rocksDB_maxSizeInLevel1MB
    minUsableSizeForIndexFileCreation allowMultipleDirsUnderSameDiskPartition
    readOnlyModeOnAnyDiskFullEnabled persistBookieStatusEnabled
    enableLocalTransport disableServerSocketBind bookieDeathWatchInterval
    extraServerComponents ignoreExtraServerComponentsStartupFailures
    httpServerClass httpServerTlsEnable httpServerKeyStorePath httpServerKeyStorePassword
    httpServerTrustStorePath httpServerTrustStorePassword
    bookieAuthProviderFactoryClass permittedStartupUsers authorizedRoles
    tlsEnabledCipherSuites tlsEnabledProtocols
    zkRetryBackoffStartMs zkRetryBackoffMaxMs zkRetryBackoffMaxRetries zkRequestRateLimit
    ledgerManagerFactoryClass ledgerManagerType
    allowShadedLedgerManagerFactoryClass shadedLedgerManagerFactoryClassPrefix
    registrationManagerClass
    enableStatistics statsProviderClass enableTaskExecutionStats limitStatsLogging
    codahaleStatsPrefix codahaleStatsOutputFrequencySeconds codahaleStatsGraphiteEndpoint
    codahaleStatsCSVEndpoint codahaleStatsSlf4jEndpoint codahaleStatsJmxEndpoint
    statsExport statsHttpPort
    digestType passwd enableDigestTypeAutodetection
    reppDnsResolverClass
    auditorLedgerVerificationPercentage rwRereplicateBackoffMs
    underreplicatedLedgerRecoveryGracePeriod
    localConsistencyCheckOnStartup dataIntegrityChecking dataIntegrityStampMissingCookies
    allocatorPoolingPolicy allocatorPoolingConcurrency allocatorOutOfMemoryPolicy
    allocatorLeakDetectionPolicy
""".split()
)

# Every spelling accepted for an override key: Java name, attribute, flag.
_LOOKUP: dict[str, Option] = {}
for _opt in OPTIONS:
    assert _opt.type in TYPES, _opt.name
    for _alias in (_opt.name, _opt.attr, _opt.flag, _opt.flag[2:]):
        assert _LOOKUP.get(_alias, _opt) is _opt, f"name clash on {_alias}"
        _LOOKUP[_alias] = _opt
assert not IGNORED_KEYS & set(OPTIONS_BY_NAME)


def find_option(key: str) -> Option | None:
    """The option for a Java key, snake_case attribute or ``--flag`` (None if unknown)."""
    return _LOOKUP.get(key)
