"""The bk_server.conf schema: ``OPTIONS``, one :class:`Option` per key.

Parsing, validation, defaults, ``bookied --help`` and the bookied.conf(5)
man page all come from it.  Key names, defaults and meanings follow Apache
BookKeeper's Java bookie (``ServerConfiguration`` and the stock
``bk_server.conf``).  ``IGNORED_KEYS`` are the Java keys bookied accepts
without supporting them.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bkctl.wire.metadata.bookieid import bookie_id_problem
from bkctl.wire.text import NOT_A_BOOLEAN, parse_bool
from bkctl.wire.metadata.layout import (
    MetadataServiceURI,
    MetadataServiceURIError,
    root_path_problem,
    zk_server_problem,
)

from .errors import InvalidValue
from .properties import escape

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

_JAVA_INT_MAX = 2**31 - 1
_JAVA_LONG_MAX = 2**63 - 1


# --------------------------------------------------------------------------
# Value checks used by the schema

def _check_bookie_id(value: str) -> None:
    problem = bookie_id_problem(value)
    if problem:
        raise InvalidValue(problem)


def _check_advertised_address(value: str) -> None:
    # the address becomes the host part of the bookie id host:port
    if bookie_id_problem(f"{value}:3181"):
        raise InvalidValue("contains characters not allowed in a bookie id "
                       "(letters, digits, ASCII ':' to '_', '.' and '-')")


def _check_no_blanks(value: str) -> None:
    if any(ch.isspace() for ch in value):
        raise InvalidValue("must not contain blanks")


def _check_zk_path(value: str) -> None:
    problem = root_path_problem(value)
    if problem:
        raise InvalidValue(problem)


def _check_placement_policy(value: str) -> None:
    from bkctl.wire.metadata.racks import policy_name

    try:
        policy_name(value)
    except ValueError as exc:
        raise InvalidValue(str(exc).replace(f"unsupported ensemblePlacementPolicy {value!r} ", "is not supported ")) \
            from None


def _check_tls_factory(value: str) -> None:
    if not value.rsplit(".", 1)[-1] == "TLSContextFactory":
        raise InvalidValue("is not supported (only org.apache.bookkeeper.tls.TLSContextFactory)")


def _check_zk_server(value: str) -> None:
    problem = zk_server_problem(value)
    if problem:
        raise InvalidValue(problem)


def _check_metadata_uri(value: str) -> None:
    parse_metadata_uri(value)


def parse_metadata_uri(value: str) -> MetadataServiceURI:
    try:
        return MetadataServiceURI.parse(value)
    except MetadataServiceURIError as exc:
        raise InvalidValue(exc.problem) from None


# --------------------------------------------------------------------------
# The schema


def _snake(name: str) -> str:
    """``bookiePort`` -> ``bookie_port``, ``useHostNameAsBookieID`` -> ``use_host_name_as_bookie_id``."""
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    text = re.sub(r"(?<=[A-Z])(?=[A-Z][a-z])", "_", text)
    return re.sub(r"_+", "_", text).lower()


_TYPES = ("int", "float", "bool", "str", "list")
_INT_RE = re.compile(r"[+-]?\d+")
_FLOAT_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?")


@dataclass(frozen=True)
class Option:
    """One bk_server.conf key.

    ``name`` is the Java key; ``type`` is one of ``int``, ``float``, ``bool``,
    ``str`` or ``list`` (comma-separated strings, a tuple in Python);
    ``default`` is the typed default (None: unset); ``meaning`` is one
    sentence for --help and the man page.  ``min``/``max`` bound numbers
    (inclusive unless ``min_exclusive``/``max_exclusive``); ``choices`` limits
    strings; ``fallback`` names the key whose value an unset option takes;
    ``check`` raises ``InvalidValue`` for values the type alone cannot reject.
    """

    name: str
    type: str
    default: Any
    meaning: str
    section: str
    unit: str | None = None
    choices: tuple[str, ...] | None = None
    min: int | float | None = None
    max: int | float | None = None
    min_exclusive: bool = False
    max_exclusive: bool = False
    fallback: str | None = None
    deprecated: bool = False
    metavar_name: str | None = None
    attr_name: str | None = None
    check: Callable[[str], None] | None = field(default=None, repr=False, compare=False)

    # -- names -------------------------------------------------------------

    @property
    def attr(self) -> str:
        """snake_case attribute name on ``BookieConfig``."""
        return self.attr_name or _snake(self.name)

    @property
    def flag(self) -> str:
        """Long command-line flag, e.g. ``--bookie-port``."""
        return "--" + self.attr.replace("_", "-")

    @property
    def metavar(self) -> str:
        if self.metavar_name:
            return self.metavar_name
        if self.type == "bool":
            return "BOOL"
        if self.type == "list":
            return "LIST"
        if self.type == "float":
            return "FRACTION" if self.unit == "fraction" else "NUMBER"
        if self.type == "int":
            return {"ms": "MS", "bytes": "BYTES", "MB": "MB"}.get(self.unit or "", "N")
        return "STRING"

    # -- documentation -----------------------------------------------------

    @property
    def default_text(self) -> str:
        """The default as a person reads it (``3181``, ``/tmp/bk-data``, ``unset``)."""
        if self.default is None:
            return f"derived from {self.fallback}" if self.fallback else "unset"
        return self.format_value(self.default)

    @property
    def _shown_max(self) -> int | float | None:
        # Java's int/long limits are type limits, not worth showing to people.
        return None if self.max in (_JAVA_INT_MAX, _JAVA_LONG_MAX) else self.max

    @property
    def range_text(self) -> str | None:
        """Allowed values in words, or None when any value of the type goes."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        low, high = self.min, self._shown_max
        if low is None and high is None:
            return None
        low_op = "<" if self.min_exclusive else "<="
        high_op = "<" if self.max_exclusive else "<="
        if low is not None and high is not None:
            return f"{number_text(low)} {low_op} value {high_op} {number_text(high)}"
        if low is not None:
            return f"value {'>' if self.min_exclusive else '>='} {number_text(low)}"
        return f"value {high_op} {number_text(high)}"

    def help_text(self) -> str:
        """Meaning plus unit and default, for ``--help``."""
        extras = []
        if self.unit:
            extras.append(f"unit: {self.unit}")
        extras.append(f"default: {self.default_text}")
        return f"{self.meaning} ({'; '.join(extras)})"

    # -- values ------------------------------------------------------------

    def format_value(self, value: Any) -> str:
        """Plain text of a typed value (no .properties escaping)."""
        if value is None:
            return ""
        if self.type == "bool":
            return "true" if value else "false"
        if self.type == "list":
            return ",".join(value)
        if self.type == "float":
            return number_text(value)
        return str(value)

    def render(self, value: Any) -> str:
        """A typed value as .properties text, escaped so it reads back the same."""
        if value is None:
            return ""
        if self.type == "list":
            return ",".join(escape(item) for item in value)
        return escape(self.format_value(value))

    def convert(self, value: str | Sequence[str]) -> Any:
        """Typed value from text (a list of texts for list keys).

        Returns None for an empty string or list option ("not set").  Raises
        ``InvalidValue`` with a phrase such as ``is not an integer``.
        """
        if self.type == "list":
            items = [value] if isinstance(value, str) else list(value)
            items = [item.strip() for item in items if item.strip()]
            if not items:
                return None
            for item in items:
                if self.check:
                    try:
                        self.check(item)
                    except InvalidValue as exc:
                        raise InvalidValue(f"element {item!r} {exc}") from None
            return tuple(items)
        if not isinstance(value, str):
            items = list(value)
            if len(items) != 1:
                raise InvalidValue("is a list, but this key takes a single value")
            value = items[0]
        text = value.strip()
        if self.type == "str":
            if not text:
                return None
            if self.choices and text not in self.choices:
                raise InvalidValue("is not one of " + ", ".join(self.choices))
            if self.check:
                self.check(text)
            return text
        if not text:
            raise InvalidValue(f"is empty; {_TYPE_WORD[self.type]} is required")
        if self.type == "bool":
            try:
                return parse_bool(text, self.name)
            except ValueError:
                raise InvalidValue(NOT_A_BOOLEAN) from None
        if self.type == "int":
            if not _INT_RE.fullmatch(text):
                raise InvalidValue("is not an integer")
            number: int | float = int(text)
        else:
            if not _FLOAT_RE.fullmatch(text):
                raise InvalidValue("is not a number")
            number = float(text.rstrip("fFdD"))
        self._check_range(number)
        return number

    def _check_range(self, number: int | float) -> None:
        low, high = self.min, self.max
        too_low = low is not None and (number < low or (self.min_exclusive and number == low))
        too_high = high is not None and (number > high or (self.max_exclusive and number == high))
        if not (too_low or too_high):
            return
        shown_high = self._shown_max
        if low is not None and shown_high is not None:
            bounds = f"{number_text(low)}..{number_text(shown_high)}"
            if self.min_exclusive and self.max_exclusive:
                bounds += ", both ends excluded"
            raise InvalidValue(f"is out of range ({bounds})")
        if too_low and low is not None:
            if low == 0 and not self.min_exclusive:
                raise InvalidValue("must not be negative")
            word = "greater than" if self.min_exclusive else "at least"
            raise InvalidValue(f"must be {word} {number_text(low)}")
        raise InvalidValue(f"is too large (at most {number_text(high or 0)})")


_TYPE_WORD = {"int": "an integer", "float": "a number", "bool": "a boolean"}


def number_text(value: int | float) -> str:
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    return str(value)


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
    # -- server -------------------------------------------------------------
    Option("bookiePort", "int", 3181,
           "TCP port the bookie listens on for client requests.",
           "server", min=0, max=65535, metavar_name="PORT"),
    Option("allowEphemeralPorts", "bool", False,
           "Whether bookiePort may be 0, letting the operating system pick a free port (meant for tests).",
           "server"),
    Option("bookieId", "str", None,
           "Identity the bookie registers under instead of its address-based id; letters, digits, "
           "ASCII ':' to '_', '.' and '-' only, and never 'readonly'.",
           "server", metavar_name="ID", check=_check_bookie_id),
    Option("advertisedAddress", "str", None,
           "Host name or IP address advertised to clients, taking precedence over listeningInterface "
           "and useHostNameAsBookieID.",
           "server", metavar_name="HOST", check=_check_advertised_address),
    Option("listeningInterface", "str", None,
           "Network interface (such as eth0) to listen on and take the bookie address from; "
           "when unset the bookie listens on all interfaces and uses the local host name's address.",
           "server", metavar_name="IFACE", check=_check_no_blanks),
    Option("allowLoopback", "bool", False,
           "Whether the bookie may identify itself by a loopback address, which would make every "
           "bookie on a misconfigured host claim 127.0.0.1.",
           "server"),
    Option("useHostNameAsBookieID", "bool", False,
           "Whether the bookie id uses the host name rather than the IP address.",
           "server"),
    Option("useShortHostName", "bool", False,
           "With useHostNameAsBookieID, whether to use the host name up to its first dot instead "
           "of the fully qualified name.",
           "server"),
    Option("maxAddsInProgressLimit", "int", 0,
           "Number of add requests in progress (read, not yet answered) at which the bookie stops "
           "reading a connection whose next request is an add until one is answered (back-pressure, "
           "as Java's bookie blocks; no error is answered); 0 means no limit.",
           "server", unit="requests", min=0, max=_JAVA_INT_MAX),
    Option("maxReadsInProgressLimit", "int", 0,
           "Number of read requests in progress (entry and batch reads, fencing reads and long polls "
           "included) at which the bookie stops reading a connection whose next request is a read "
           "until one is answered; 0 means no limit.",
           "server", unit="requests", min=0, max=_JAVA_INT_MAX),
    Option("nettyMaxFrameSizeBytes", "int", 5 * 1024 * 1024,
           "Largest request frame accepted from a client; larger frames are rejected.",
           "server", unit="bytes", min=1, max=_JAVA_INT_MAX),
    Option("shutdownTimeoutMs", "int", 5000,
           "Longest a shutdown (SIGTERM) may take: unregistering from ZooKeeper is tried once within "
           "at most half of it, and an unreachable ZooKeeper never holds the process past it "
           "(the journals are closed first, so acknowledged entries are durable either way).",
           "server", unit="ms", min=100, max=_JAVA_INT_MAX),
    # -- http ---------------------------------------------------------------
    Option("httpServerEnabled", "bool", False,
           "Whether to start the HTTP admin server.",
           "http"),
    Option("httpServerPort", "int", 8080,
           "TCP port of the HTTP admin server.",
           "http", min=0, max=65535, metavar_name="PORT"),
    Option("httpServerHost", "str", "0.0.0.0",
           "Address the HTTP admin server listens on.",
           "http", metavar_name="HOST", check=_check_no_blanks),
    # -- journal ------------------------------------------------------------
    Option("journalDirectories", "list", None,
           "Directories for the write-ahead journal, one journal per directory.",
           "journal", fallback="journalDirectory", metavar_name="DIR[,DIR...]"),
    Option("journalDirectory", "str", "/tmp/bk-txn",
           "Single journal directory, used only when journalDirectories is unset "
           "(deprecated since BookKeeper 4.5).",
           "journal", deprecated=True, metavar_name="DIR"),
    Option("journalSyncData", "bool", True,
           "Whether journal writes are fsynced before entries are acknowledged; when false an add is "
           "acknowledged once written to the operating system's page cache, the journal is fsynced "
           "only when a file rolls and at shutdown, a power failure can lose acknowledged entries, "
           "and the bookie logs a warning at start.",
           "journal"),
    Option("journalWriteData", "bool", True,
           "Whether entries are written to the journal before being acknowledged; when false an add "
           "is acknowledged as soon as the entry is in the write cache, only the next checkpoint "
           "(flushInterval) makes it durable, a crash loses what came since, and the bookie logs a "
           "warning at start (master keys and fences are still journaled).",
           "journal"),
    Option("journalAdaptiveGroupWrites", "bool", True,
           "Whether journal writes queued while an fsync runs share the next fsync (group commit), "
           "which bookied's journal, writing and fsyncing each group in one step, always does; "
           "false is not supported and is warned about at start.",
           "journal"),
    Option("journalMaxGroupWaitMSec", "int", 2,
           "Longest time a journal write waits to be grouped with others before being forced.",
           "journal", unit="ms", min=0, max=_JAVA_LONG_MAX,
           attr_name="journal_max_group_wait_msec"),
    Option("journalBufferedWritesThreshold", "int", 512 * 1024,
           "Amount of queued journal data that ends the wait for a group (journalMaxGroupWaitMSec, "
           "with journalFlushWhenQueueEmpty=false) and writes it at once.",
           "journal", unit="bytes", min=0, max=_JAVA_LONG_MAX),
    Option("journalBufferedEntriesThreshold", "int", 0,
           "Number of queued journal records which, once exceeded, ends the wait for a group "
           "(journalMaxGroupWaitMSec, with journalFlushWhenQueueEmpty=false) and writes it at once; "
           "0 disables this limit.",
           "journal", unit="entries", min=0, max=_JAVA_LONG_MAX),
    Option("journalFlushWhenQueueEmpty", "bool", True,
           "Write and fsync as soon as the journal writer is free instead of waiting up to "
           "journalMaxGroupWaitMSec for company; groups still form from what arrives during an fsync "
           "(bookied defaults to true, Java to false).",
           "journal"),
    Option("journalRecoveryAddGroupWaitMSec", "int", 5,
           "Longest time a journal group made only of recovery adds (the copies autorecovery and "
           "bkctl recover write, and a recovering client's re-adds) waits for company before being forced, with "
           "journalFlushWhenQueueEmpty too; an ordinary add ends the wait at once, so live writers "
           "never wait for it, and the copies cost the disk fewer fsyncs (bookied only; 0 = no wait).",
           "journal", unit="ms", min=0, max=1000,
           attr_name="journal_recovery_add_group_wait_msec"),
    Option("journalMaxSizeMB", "int", 2048,
           "Size at which the current journal file is closed and a new one started.",
           "journal", unit="MB", min=1, max=_JAVA_LONG_MAX),
    Option("journalMaxBackups", "int", 5,
           "Number of journal files a checkpoint keeps among those it no longer needs (the newest); "
           "they are not replayed.",
           "journal", unit="files", min=0, max=_JAVA_INT_MAX),
    Option("journalPreAllocSizeMB", "int", 16,
           "Space preallocated at a time as a journal file grows.",
           "journal", unit="MB", min=1, max=_JAVA_INT_MAX),
    Option("journalRemovePagesFromCache", "bool", True,
           "Whether the journal drops what it has fsynced, but for its last 8 MB, from the operating "
           "system's page cache, so that journal writes, which are never read back while the bookie "
           "runs, do not push out the entry logs' pages that reads are served from.",
           "journal"),
    # -- storage ------------------------------------------------------------
    Option("ledgerDirectories", "list", ("/tmp/bk-data",),
           "Directories holding ledger data (entry logs).",
           "storage", metavar_name="DIR[,DIR...]"),
    Option("indexDirectories", "list", None,
           "Directories holding ledger index files.",
           "storage", fallback="ledgerDirectories", metavar_name="DIR[,DIR...]"),
    Option("allowStorageExpansion", "bool", False,
           "Whether new, empty ledger or index directories may be added to an existing bookie.",
           "storage"),
    Option("flushInterval", "int", 10000,
           "Interval between checkpoints that flush ledger storage to disk so older journal "
           "files can be dropped; these periodic flushes are paced (after each piece of work the "
           "flush sleeps as long as the piece took, at most 2 ms: about half a core, which live adds "
           "barely notice), while a flush the write cache asks for (half full) runs at full speed, and so "
           "does the rest of a paced one once the cache asks.",
           "storage", unit="ms", min=1, max=_JAVA_INT_MAX),
    Option("dbStorage_writeCacheMaxSizeMb", "int", 512,
           "Memory for the write cache that holds added entries until a checkpoint flushes them "
           "to ledger storage.",
           "storage", unit="MB", min=1, max=_JAVA_LONG_MAX),
    Option("dbStorage_maxThrottleTimeMs", "int", 10000,
           "How long an add waits for room in a full write cache (while a checkpoint flushes it), "
           "or in a journal whose queue is full (while it writes), before the bookie refuses it "
           "with ETOOMANYREQUESTS; 0 refuses at once.",
           "storage", unit="ms", min=0, max=_JAVA_INT_MAX),
    # -- disk ---------------------------------------------------------------
    Option("diskUsageThreshold", "float", 0.95,
           "Fraction in use of the fullest journal or ledger filesystem at or above which the bookie "
           "turns read-only (or, with readOnlyModeEnabled=false, shuts down).",
           "disk", unit="fraction", min=0.0, max=1.0, min_exclusive=True, max_exclusive=True),
    Option("diskUsageWarnThreshold", "float", 0.90,
           "Fraction of disk in use at or above which a warning is logged and garbage collection "
           "runs at once; at most diskUsageThreshold.",
           "disk", unit="fraction", min=0.0, max=1.0, min_exclusive=True, max_exclusive=True),
    Option("diskUsageLwmThreshold", "float", None,
           "Fraction of disk in use below which a bookie that disk usage made read-only becomes "
           "writable again; at most diskUsageThreshold.",
           "disk", unit="fraction", min=0.0, max=1.0, min_exclusive=True, max_exclusive=True,
           fallback="diskUsageThreshold"),
    Option("diskCheckInterval", "int", 10000,
           "Interval between checks of ledger and index disk usage.",
           "disk", unit="ms", min=1, max=_JAVA_INT_MAX),
    Option("minUsableSizeForEntryLogCreation", "int", int(1.2 * 1024 ** 3),
           "Free bytes a ledger filesystem over diskUsageThreshold must keep, beyond what a checkpoint "
           "writes, for the checkpoint to write entry logs there (journal replay and recovery adds of a "
           "read-only bookie); otherwise the entries stay in the write cache and the journal until there "
           "is room.",
           "disk", unit="bytes", min=0, max=_JAVA_LONG_MAX),
    Option("minUsableSizeForHighPriorityWrites", "int", None,
           "Free bytes every journal and ledger filesystem must have for a read-only bookie to accept "
           "high-priority writes (recovery adds, high-priority explicit LAC writes; fences are always "
           "accepted).",
           "disk", unit="bytes", min=0, max=_JAVA_LONG_MAX, fallback="minUsableSizeForEntryLogCreation"),
    Option("readOnlyModeEnabled", "bool", True,
           "Whether the bookie may turn read-only (full disk, failed journal or entry-log write); "
           "when false it shuts down instead (exit status 1), refuses to start on a full disk, and "
           "forceReadOnlyBookie cannot be set.",
           "disk"),
    Option("forceReadOnlyBookie", "bool", False,
           "Whether the bookie starts, and stays, in read-only mode.",
           "disk"),
    # -- gc -----------------------------------------------------------------
    Option("gcWaitTime", "int", 600000,
           "Interval between garbage collection runs that reclaim the space of deleted ledgers "
           "(and compact entry logs when a compaction is due); a compaction running longer collects "
           "the deleted ledgers again every gcWaitTime, between two entry logs or two batches of one.",
           "gc", unit="ms", min=1, max=_JAVA_LONG_MAX),
    Option("minorCompactionThreshold", "float", 0.2,
           "Minor compaction rewrites the entry logs whose live fraction is below this (0: no minor "
           "compaction); below majorCompactionThreshold.",
           "gc", unit="fraction", min=0.0, max=1.0),
    Option("minorCompactionInterval", "int", 3600,
           "Interval between minor compactions (0: none); at least gcWaitTime, shorter than "
           "majorCompactionInterval.",
           "gc", unit="s", min=0, max=_JAVA_LONG_MAX // 1000),
    Option("minorCompactionMaxTimeMillis", "int", -1,
           "A minor compaction starts no new entry log after running this long (-1: no limit).",
           "gc", unit="ms", min=-1, max=_JAVA_LONG_MAX),
    Option("majorCompactionThreshold", "float", 0.8,
           "Major compaction rewrites the entry logs whose live fraction is below this (0: no major "
           "compaction).",
           "gc", unit="fraction", min=0.0, max=1.0),
    Option("majorCompactionInterval", "int", 86400,
           "Interval between major compactions (0: none); at least gcWaitTime.",
           "gc", unit="s", min=0, max=_JAVA_LONG_MAX // 1000),
    Option("majorCompactionMaxTimeMillis", "int", -1,
           "A major compaction starts no new entry log after running this long (-1: no limit).",
           "gc", unit="ms", min=-1, max=_JAVA_LONG_MAX),
    Option("compactionRate", "int", 1000,
           "Old name of compactionRateByEntries.",
           "gc", unit="entries/s", min=1, max=_JAVA_INT_MAX, deprecated=True),
    Option("compactionRateByEntries", "int", None,
           "Entries per second compaction copies at most (unless isThrottleByBytes).",
           "gc", unit="entries/s", min=1, max=_JAVA_INT_MAX, fallback="compactionRate"),
    Option("compactionRateByBytes", "int", 1000000,
           "Bytes per second compaction copies at most, with isThrottleByBytes.",
           "gc", unit="bytes/s", min=1, max=_JAVA_INT_MAX),
    Option("isThrottleByBytes", "bool", False,
           "Throttle compaction by compactionRateByBytes instead of compactionRateByEntries.",
           "gc"),
    Option("compactionMaxOutstandingRequests", "int", 100000,
           "Entries compaction copies before it switches their index rows in one transaction "
           "(bookied also switches every 16 MiB and every 1,024 entries, so that its index file "
           "need not hold a copy of every index page a switch rewrites).",
           "gc", min=1, max=_JAVA_INT_MAX),
    Option("forceAllowCompaction", "bool", False,
           "Let a forced garbage collection (PUT /api/v1/bookie/gc, bkctl bookie gc) compact even "
           "when the compaction intervals are 0.",
           "gc"),
    Option("isForceGCAllowWhenNoSpace", "bool", False,
           "Over diskUsageWarnThreshold, force garbage collection instead of suspending major "
           "compaction; over diskUsageThreshold, compact at once with the rate and time limits lifted, "
           "and again at every disk check that still finds the disk full, so that a full bookie can "
           "turn writable again by itself.",
           "gc"),
    Option("verifyMetadataOnGC", "bool", False,
           "Before garbage collection deletes a ledger missing from the metadata store's listing, "
           "read its metadata once more and delete it only if it is truly gone (one ZooKeeper "
           "request per deleted ledger).",
           "gc"),
    Option("logSizeLimit", "int", 1024 ** 3,
           "Size at which an entry log is closed and a new one started.",
           "storage", unit="bytes", min=64 * 1024, max=3 * 1024 ** 3),
    # -- metadata -----------------------------------------------------------
    Option("metadataServiceUri", "str", None,
           "Metadata store location, such as zk+hierarchical://zk1:2181;zk2:2181/ledgers.",
           "metadata", fallback="zkServers and zkLedgersRootPath", metavar_name="URI",
           check=_check_metadata_uri),
    Option("zkServers", "list", None,
           "ZooKeeper servers as host:port, comma-separated; superseded by metadataServiceUri.",
           "metadata", metavar_name="HOST:PORT[,...]", check=_check_zk_server),
    Option("zkLedgersRootPath", "str", "/ledgers",
           "ZooKeeper path under which the cluster's metadata lives; superseded by "
           "metadataServiceUri.",
           "metadata", metavar_name="PATH", check=_check_zk_path),
    Option("zkTimeout", "int", 10000,
           "ZooKeeper session timeout; the bookie exits if its session expires.",
           "metadata", unit="ms", min=1, max=_JAVA_INT_MAX),
    Option("zkEnableSecurity", "bool", False,
           "Create every znode with Java's creator-all ACL (only the identity that created a znode may "
           "read or change it); use with zkDigestAuthPath or SASL.",
           "metadata"),
    Option("zkDigestAuthPath", "str", None,
           "A file holding USER:PASSWORD, sent to ZooKeeper with the digest scheme "
           "(what a Java bookie's JAAS Client section or addAuthInfo gives).",
           "metadata", metavar_name="PATH"),
    Option("zkSaslMechanism", "str", None,
           "Authenticate to ZooKeeper with this SASL mechanism, such as DIGEST-MD5 (Java's DigestLoginModule) "
           "or GSSAPI (Kerberos; needs a ticket).",
           "metadata", metavar_name="MECHANISM"),
    Option("zkSaslUsername", "str", None,
           "The SASL user name for ZooKeeper.", "metadata", metavar_name="USER"),
    Option("zkSaslPasswordPath", "str", None,
           "A file holding the SASL password for ZooKeeper.", "metadata", metavar_name="PATH"),
    Option("zkTlsEnabled", "bool", False,
           "Connect to ZooKeeper over TLS (its secureClientPort; implied by zkTlsCaPath).",
           "metadata"),
    Option("zkTlsCaPath", "str", None,
           "PEM CA bundle the ZooKeeper server's certificate must chain to.",
           "metadata", metavar_name="PATH"),
    Option("zkTlsCertificatePath", "str", None,
           "PEM client certificate for ZooKeeper servers that ask for one.",
           "metadata", metavar_name="PATH"),
    Option("zkTlsKeyPath", "str", None,
           "PEM private key of zkTlsCertificatePath.", "metadata", metavar_name="PATH"),
    # -- autorecovery (bkctl.wire.autorecovery; the same keys as `bkctl autorecovery run --set`) --
    Option("autoRecoveryDaemonEnabled", "bool", False,
           "Whether the bookie also runs the autorecovery daemon: it votes in the auditor election "
           "(the elected daemon audits the cluster) and re-replicates under-replicated ledgers.",
           "autorecovery"),
    Option("autoRecoveryDaemonCpuPriority", "str", "idle",
           "CPU priority of the autorecovery daemon's process (the bookie runs it as a child process): "
           "idle (Linux SCHED_IDLE: it runs on CPU time nothing else wants, so a repair does not hold back "
           "the adds and reads the bookie serves; on a host kept fully busy the repair waits), low (nice 19) "
           "or normal (the bookie's); below normal, where the kernel shares the CPU by session (autogroup), "
           "the process also takes a session of its own whose group has the weight of nice 19; bookied only.",
           "autorecovery", choices=("idle", "low", "normal")),
    Option("lostBookieRecoveryDelay", "int", 0,
           "How long the auditor waits after a bookie disappears before marking its ledgers "
           "under-replicated; written to ZooKeeper by the first auditor, which then reads it from there.",
           "autorecovery", unit="s", min=0, max=_JAVA_INT_MAX),
    Option("auditorPeriodicCheckInterval", "int", 604800,
           "Interval between the auditor's checks of every ledger's fragments on their bookies (0: never).",
           "autorecovery", unit="s", min=0, max=_JAVA_LONG_MAX),
    Option("auditorPeriodicBookieCheckInterval", "int", 86400,
           "Interval between the auditor's audits of lost bookies, besides those on registration changes "
           "(0: only on changes).",
           "autorecovery", unit="s", min=0, max=_JAVA_LONG_MAX),
    Option("auditorReplicasCheckInterval", "int", 0,
           "Interval between the auditor's replicas checks, which count entries stored below their "
           "write and ack quorums and report them (0: never).",
           "autorecovery", unit="s", min=0, max=_JAVA_LONG_MAX),
    Option("auditorPeriodicPlacementPolicyCheckInterval", "int", 0,
           "Interval between the auditor's checks of every ledger's ensembles against the placement "
           "policy; ledgers that break it are counted and logged, not marked (0: never).",
           "autorecovery", unit="s", min=0, max=_JAVA_LONG_MAX),
    Option("ensemblePlacementPolicy", "str", "org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicy",
           "How replication workers choose replacement bookies: RackawareEnsemblePlacementPolicy, "
           "RegionAwareEnsemblePlacementPolicy (racks named /region/rack) or DefaultEnsemblePlacementPolicy "
           "(random); racks come from ZooKeeper's /bookies rack map (Pulsar's) and "
           "networkTopologyScriptFileName, bookies named by neither are in /default-rack.",
           "autorecovery", metavar_name="CLASS", check=_check_placement_policy),
    Option("networkTopologyScriptFileName", "str", None,
           "A script run with host names as arguments that prints their racks, one per argument.",
           "autorecovery", metavar_name="PATH"),
    Option("networkTopologyScriptNumberArgs", "int", 100,
           "Host names given to one run of networkTopologyScriptFileName.",
           "autorecovery", min=1, max=_JAVA_INT_MAX),
    Option("minNumRacksPerWriteQuorum", "int", 2,
           "Racks every write quorum of a replacement's ensemble should span (at most the write quorum).",
           "autorecovery", min=1, max=_JAVA_INT_MAX),
    Option("enforceMinNumRacksPerWriteQuorum", "bool", False,
           "Fail a replacement rather than break minNumRacksPerWriteQuorum; bookies in /default-rack are "
           "then never chosen.",
           "autorecovery"),
    Option("openLedgerRereplicationGracePeriod", "int", 30000,
           "How long a replication worker leaves an open ledger whose last ensemble lost a bookie to its "
           "writer before fencing and closing it.",
           "autorecovery", unit="ms", min=0, max=_JAVA_LONG_MAX),
    Option("lockReleaseOfFailedLedgerGracePeriod", "int", 300000,
           "How long a replication worker keeps the lock of a ledger it failed to re-replicate (doubling "
           "on repeated failures, up to 8 times) before another worker may try.",
           "autorecovery", unit="ms", min=0, max=_JAVA_LONG_MAX),
    Option("rereplicationEntryBatchSize", "int", 40,
           "Entries a replication worker adds to new bookies at a time (and reads as many ahead); its adds "
           "leave in batches every 10 ms, so this is also the most it adds in 10 ms, 4,000 a second by "
           "default (Java's default is 10).",
           "autorecovery", min=1, max=_JAVA_INT_MAX),
    Option("replicationRateByBytes", "int", -1,
           "Bytes per second a replication worker copies at most (-1: unlimited).",
           "autorecovery", unit="bytes/s", min=-1, max=_JAVA_INT_MAX),
    # -- tls (bkctl.wire.tls; Java's keys; the autorecovery daemon's client uses them too) --
    Option("tlsProviderFactoryClass", "str", None,
           "Set (to Java's org.apache.bookkeeper.tls.TLSContextFactory) to turn TLS on: clients must then "
           "send START_TLS (v3) before anything else, other requests are refused with EUA.",
           "tls", metavar_name="CLASS", check=_check_tls_factory),
    Option("tlsProvider", "str", "OpenSSL",
           "Java's choice of TLS engine; bookied always uses OpenSSL (through pyOpenSSL).",
           "tls", choices=("OpenSSL", "JDK")),
    Option("tlsKeyStoreType", "str", "PEM",
           "Format of tlsKeyStore: PEM (a private key file, with tlsCertificatePath) or PKCS12.",
           "tls", choices=("PEM", "PKCS12")),
    Option("tlsKeyStore", "str", None,
           "The bookie's private key (PEM) or key store (PKCS12).", "tls", metavar_name="PATH"),
    Option("tlsKeyStorePasswordPath", "str", None,
           "A file holding the password of tlsKeyStore (of the PEM key, or of the PKCS12 store).",
           "tls", metavar_name="PATH"),
    Option("tlsCertificatePath", "str", None,
           "The bookie's PEM certificate chain (with a PEM tlsKeyStore).", "tls", metavar_name="PATH"),
    Option("tlsTrustStoreType", "str", "PEM",
           "Format of tlsTrustStore (PEM CA certificates only).", "tls", choices=("PEM",)),
    Option("tlsTrustStore", "str", None,
           "PEM CA certificates that client certificates (and, for autorecovery, other bookies' "
           "certificates) must chain to.", "tls", metavar_name="PATH"),
    Option("tlsTrustStorePasswordPath", "str", None,
           "Accepted for Java's configurations; a PEM trust store has no password.", "tls",
           metavar_name="PATH"),
    Option("tlsClientAuthentication", "bool", False,
           "Mutual TLS: clients must present a certificate that chains to tlsTrustStore.", "tls"),
    Option("tlsCertFilesRefreshDurationSeconds", "int", 0,
           "How often the bookie checks its TLS files and reloads them when changed (0: never).",
           "tls", unit="s", min=0, max=_JAVA_INT_MAX),
)

OPTIONS_BY_NAME: Mapping[str, Option] = {opt.name: opt for opt in OPTIONS}

# Keys of the Java bookie that bookied accepts but does not support: each one a
# file sets is warned about, once, as having no effect.
IGNORED_KEYS: frozenset[str] = frozenset("""
    ledgerStorageClass sortedLedgerStorageEnabled entryLogFilePreallocationEnabled
    flushEntrylogBytes readBufferSizeBytes writeBufferSizeBytes entryLogPerLedgerEnabled
    numOfMemtableFlushThreads entrylogMapAccessExpiryTimeInSeconds maximumNumberOfActiveEntryLogs
    entryLogPerLedgerCounterLimitsMultFactor
    useTransactionalCompaction
    gcOverreplicatedLedgerWaitTime gcOverreplicatedLedgerMaxConcurrentRequests
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
    prometheusStatsHttpPort prometheusStatsHttpAddress prometheusStatsLatencyRolloverSeconds
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
""".split())

# Every spelling accepted for an override key: Java name, attribute, flag.
_LOOKUP: dict[str, Option] = {}
for _opt in OPTIONS:
    assert _opt.type in _TYPES, _opt.name
    for _alias in (_opt.name, _opt.attr, _opt.flag, _opt.flag[2:]):
        assert _LOOKUP.get(_alias, _opt) is _opt, f"name clash on {_alias}"
        _LOOKUP[_alias] = _opt
assert not IGNORED_KEYS & set(OPTIONS_BY_NAME)


def find_option(key: str) -> Option | None:
    """The option for a Java key, snake_case attribute or ``--flag`` (None if unknown)."""
    return _LOOKUP.get(key)
