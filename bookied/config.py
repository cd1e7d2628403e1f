"""bookied's configuration: bk_server.conf keys, syntax and defaults.

``OPTIONS`` is the one schema.  Parsing, validation, defaults, the future
``bookied --help`` flags and the bookied.conf(5) man page all come from it.
Key names, defaults and meanings follow Apache BookKeeper's Java bookie
(``ServerConfiguration`` and the stock ``bk_server.conf``), so an existing
bk_server.conf can be handed to ``bookied --conf`` unchanged.

File syntax is that of Java .properties files as Apache Commons Configuration
(1.x) reads them:

* ``key=value``, ``key: value`` and ``key value`` all work; blanks around the
  separator and at both ends of the line are ignored;
* lines whose first non-blank character is ``#`` or ``!`` are comments;
* a line ending in an odd number of backslashes continues on the next line
  (comment and blank lines in between are skipped, as Commons does);
* escapes: ``\\t \\n \\r \\f \\uXXXX``, and a backslash before any other
  character keeps that character (``\\\\`` is a backslash, ``\\,`` a comma);
* an unescaped comma separates list elements; only list-typed keys take
  several values.  In a single-valued key an unescaped comma is an error
  (Java would silently use the part before it);
* a list key repeated on several lines accumulates its values; for a
  single-valued key repeated, the first value wins (as in Java) and a
  warning is logged.

Unknown keys are logged as warnings on the ``bookied.config`` logger with
their file and line; so are keys that Java bookies know but bookied does not
support (``IGNORED_KEYS``), once per key, as having no effect.  Settings that
weaken durability (``journalSyncData=false``, ``journalWriteData=false``) or
that bookied cannot honour (``journalAdaptiveGroupWrites=false``) are in
``startup_warnings``, which bookied logs when it starts.
"""
from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import logging
import os
import re
import socket
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bkctl.wire.metadata.bookieid import bookie_id_problem
from bkctl.wire.errors import BKError
from bkctl.wire.metadata.layout import (
    MetadataServiceURI,
    MetadataServiceURIError,
    root_path_problem,
    zk_server_problem,
)

__all__ = [
    "BookieConfig",
    "ConfigError",
    "IGNORED_KEYS",
    "OPTIONS",
    "OPTIONS_BY_NAME",
    "Option",
    "Resolver",
    "SECTIONS",
    "find_option",
    "load_config",
    "load_config_text",
    "read_properties",
    "render_config",
    "resolve_bookie_address",
    "resolve_bookie_id",
    "resolve_listen_host",
    "startup_warnings",
    "validate_bookie_id",
]

log = logging.getLogger("bookied.config")

_JAVA_INT_MAX = 2**31 - 1
_JAVA_LONG_MAX = 2**63 - 1


# --------------------------------------------------------------------------
# Errors


class ConfigError(BKError, ValueError):
    """A configuration the bookie cannot start with.

    ``str(err)`` is a complete message such as
    ``bk_server.conf:12: bookiePort: 'abc' is not an integer``; ``key``,
    ``value``, ``path`` and ``line`` are kept for callers that want them
    (each may be None).
    """

    def __init__(self, message: str, *, key: str | None = None,
                 value: str | None = None, path: str | None = None,
                 line: int | None = None):
        super().__init__(message)
        self.key = key
        self.value = value
        self.path = path
        self.line = line


class _Invalid(Exception):
    """Raised by value checks with the problem phrase; the loader adds context."""


@dataclass(frozen=True)
class _Origin:
    """Where a setting came from: a file line or the command line."""

    path: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        if self.path is None:
            return "command line"
        return f"{self.path}:{self.line}"


def _bad(key: str, value: str, problem: str, origin: _Origin | None = None) -> ConfigError:
    prefix = f"{origin.path}:{origin.line}: " if origin is not None and origin.path else ""
    return ConfigError(
        f"{prefix}{key}: {value!r} {problem}",
        key=key, value=value,
        path=origin.path if origin else None,
        line=origin.line if origin else None,
    )


# --------------------------------------------------------------------------
# Value checks used by the schema

def _check_bookie_id(value: str) -> None:
    problem = bookie_id_problem(value)
    if problem:
        raise _Invalid(problem)


def _check_advertised_address(value: str) -> None:
    # the address becomes the host part of the bookie id host:port
    if bookie_id_problem(f"{value}:3181"):
        raise _Invalid("contains characters not allowed in a bookie id "
                       "(letters, digits, ASCII ':' to '_', '.' and '-')")


def _check_no_blanks(value: str) -> None:
    if any(ch.isspace() for ch in value):
        raise _Invalid("must not contain blanks")


def _check_zk_path(value: str) -> None:
    problem = root_path_problem(value)
    if problem:
        raise _Invalid(problem)


def _check_placement_policy(value: str) -> None:
    from bkctl.wire.metadata.racks import policy_name

    try:
        policy_name(value)
    except ValueError as exc:
        raise _Invalid(str(exc).replace(f"unsupported ensemblePlacementPolicy {value!r} ", "is not supported ")) \
            from None


def _check_tls_factory(value: str) -> None:
    if not value.rsplit(".", 1)[-1] == "TLSContextFactory":
        raise _Invalid("is not supported (only org.apache.bookkeeper.tls.TLSContextFactory)")


def _check_zk_server(value: str) -> None:
    problem = zk_server_problem(value)
    if problem:
        raise _Invalid(problem)


def _check_metadata_uri(value: str) -> None:
    _parse_uri(value)


def _parse_uri(value: str) -> MetadataServiceURI:
    try:
        return MetadataServiceURI.parse(value)
    except MetadataServiceURIError as exc:
        raise _Invalid(exc.problem) from None


# --------------------------------------------------------------------------
# The schema


def _snake(name: str) -> str:
    """``bookiePort`` -> ``bookie_port``, ``useHostNameAsBookieID`` -> ``use_host_name_as_bookie_id``."""
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    text = re.sub(r"(?<=[A-Z])(?=[A-Z][a-z])", "_", text)
    return re.sub(r"_+", "_", text).lower()


_TYPES = ("int", "float", "bool", "str", "list")
_TRUE = frozenset({"true", "yes", "on"})
_FALSE = frozenset({"false", "no", "off"})
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
    ``check`` raises ``_Invalid`` for values the type alone cannot reject.
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
            return f"{_num(low)} {low_op} value {high_op} {_num(high)}"
        if low is not None:
            return f"value {'>' if self.min_exclusive else '>='} {_num(low)}"
        return f"value {high_op} {_num(high)}"

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
            return _num(value)
        return str(value)

    def render(self, value: Any) -> str:
        """A typed value as .properties text, escaped so it reads back the same."""
        if value is None:
            return ""
        if self.type == "list":
            return ",".join(_escape(item) for item in value)
        return _escape(self.format_value(value))

    def convert(self, value: str | Sequence[str]) -> Any:
        """Typed value from text (a list of texts for list keys).

        Returns None for an empty string or list option ("not set").  Raises
        ``_Invalid`` with a phrase such as ``is not an integer``.
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
                    except _Invalid as exc:
                        raise _Invalid(f"element {item!r} {exc}") from None
            return tuple(items)
        if not isinstance(value, str):
            items = list(value)
            if len(items) != 1:
                raise _Invalid("is a list, but this key takes a single value")
            value = items[0]
        text = value.strip()
        if self.type == "str":
            if not text:
                return None
            if self.choices and text not in self.choices:
                raise _Invalid("is not one of " + ", ".join(self.choices))
            if self.check:
                self.check(text)
            return text
        if not text:
            raise _Invalid(f"is empty; {_TYPE_WORD[self.type]} is required")
        if self.type == "bool":
            lowered = text.lower()
            if lowered in _TRUE:
                return True
            if lowered in _FALSE:
                return False
            raise _Invalid("is not a boolean (use true or false)")
        if self.type == "int":
            if not _INT_RE.fullmatch(text):
                raise _Invalid("is not an integer")
            number: int | float = int(text)
        else:
            if not _FLOAT_RE.fullmatch(text):
                raise _Invalid("is not a number")
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
            bounds = f"{_num(low)}..{_num(shown_high)}"
            if self.min_exclusive and self.max_exclusive:
                bounds += ", both ends excluded"
            raise _Invalid(f"is out of range ({bounds})")
        if too_low and low is not None:
            if low == 0 and not self.min_exclusive:
                raise _Invalid("must not be negative")
            word = "greater than" if self.min_exclusive else "at least"
            raise _Invalid(f"must be {word} {_num(low)}")
        raise _Invalid(f"is too large (at most {_num(high or 0)})")


_TYPE_WORD = {"int": "an integer", "float": "a number", "bool": "a boolean"}


def _num(value: int | float) -> str:
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
           "files can be dropped.",
           "storage", unit="ms", min=1, max=_JAVA_INT_MAX),
    Option("dbStorage_writeCacheMaxSizeMb", "int", 512,
           "Memory for the write cache that holds added entries until a checkpoint flushes them "
           "to ledger storage.",
           "storage", unit="MB", min=1, max=_JAVA_LONG_MAX),
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
           "(and compact entry logs when a compaction is due).",
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
           "(bookied also switches every 16 MiB).",
           "gc", min=1, max=_JAVA_INT_MAX),
    Option("forceAllowCompaction", "bool", False,
           "Let a forced garbage collection (PUT /api/v1/bookie/gc, bkctl bookie gc) compact even "
           "when the compaction intervals are 0.",
           "gc"),
    Option("isForceGCAllowWhenNoSpace", "bool", False,
           "Over diskUsageWarnThreshold, force garbage collection instead of suspending major "
           "compaction; over diskUsageThreshold, compact at once with the rate and time limits lifted, "
           "so that a full bookie can turn writable again by itself.",
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
    Option("rereplicationEntryBatchSize", "int", 10,
           "Entries a replication worker copies at a time.",
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
    verifyMetadataOnGC gcEntryLogMetadataCacheEnabled
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


# --------------------------------------------------------------------------
# .properties reading and writing

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_BLANKS = " \t\f"


def _is_comment_or_blank(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped[0] in "#!"


def _continues(line: str) -> bool:
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    lines = _LINE_BREAK.split(text)
    index = 0
    while index < len(lines):
        number = index + 1
        line = lines[index]
        index += 1
        if _is_comment_or_blank(line):
            continue
        line = line.strip()
        pieces = []
        while _continues(line):
            pieces.append(line[:-1])
            while index < len(lines) and _is_comment_or_blank(lines[index]):
                index += 1
            if index >= len(lines):
                line = ""
                break
            line = lines[index].strip()
            index += 1
        pieces.append(line)
        yield number, "".join(pieces)


def _split_key(line: str) -> tuple[str, str]:
    pos = 0
    while pos < len(line):
        char = line[pos]
        if char == "\\" and pos + 1 < len(line):
            pos += 2
            continue
        if char in "=:" or char in _BLANKS:
            break
        pos += 1
    key_raw = line[:pos]
    while pos < len(line) and line[pos] in _BLANKS:
        pos += 1
    if pos < len(line) and line[pos] in "=:":
        pos += 1
        while pos < len(line) and line[pos] in _BLANKS:
            pos += 1
    return key_raw, line[pos:]


def _unescape(raw: str, *, split: bool) -> list[str]:
    """Process escapes in a raw value; with ``split``, also cut it at
    unescaped commas (an escaped comma stays a plain comma in an element)."""
    parts: list[str] = []
    current: list[str] = []
    pos = 0
    while pos < len(raw):
        char = raw[pos]
        if char == "\\":
            if pos + 1 >= len(raw):
                pos += 1
                continue
            nxt = raw[pos + 1]
            pos += 2
            if nxt == "u":
                digits = raw[pos:pos + 4]
                if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                    raise _Invalid("has a malformed \\uXXXX escape")
                current.append(chr(int(digits, 16)))
                pos += 4
            else:
                current.append(_SIMPLE_ESCAPES.get(nxt, nxt))
        elif char == "," and split:
            parts.append("".join(current))
            current = []
            pos += 1
        else:
            current.append(char)
            pos += 1
    parts.append("".join(current))
    return [_join_surrogates(part) for part in parts]


def _join_surrogates(text: str) -> str:
    if not any("\ud800" <= ch <= "\udfff" for ch in text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _escape(text: str) -> str:
    out = []
    for char in text:
        code = ord(char)
        if char == "\\":
            out.append("\\\\")
        elif char == ",":
            out.append("\\,")
        elif char in "\t\n\r\f":
            out.append("\\" + "tnrf"["\t\n\r\f".index(char)])
        elif code < 0x20 or code >= 0x7F:
            if code > 0xFFFF:
                pair = char.encode("utf-16-be")
                out.append("\\u%04x\\u%04x" % struct.unpack(">HH", pair))
            else:
                out.append("\\u%04x" % code)
        else:
            out.append(char)
    return "".join(out)


def read_properties(text: str) -> list[tuple[int, str, str]]:
    """``(line, key, value)`` for each property in .properties text, in order.

    Values are fully unescaped, with list commas left as plain commas; this
    is for tools that want to look at a file generically (bkctl reading a
    client.conf, say).  ``load_config`` does its own list handling.
    """
    out = []
    for number, key_raw, raw in _raw_properties(text, "<text>"):
        out.append((number, key_raw, "".join(_unescape(raw, split=False))))
    return out


def _raw_properties(text: str, path: str) -> Iterator[tuple[int, str, str]]:
    if text.startswith("\ufeff"):
        text = text[1:]
    for number, line in _logical_lines(text):
        key_raw, raw = _split_key(line)
        try:
            key = "".join(_unescape(key_raw, split=False))
        except _Invalid as exc:
            raise ConfigError(f"{path}:{number}: key {key_raw!r} {exc}", path=path, line=number) from None
        yield number, key, raw


def _read_text(path: str | os.PathLike[str]) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise ConfigError(f"{os.fspath(path)}: cannot read configuration: {exc.strerror or exc}",
                          path=os.fspath(path)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        # Java reads .properties files as ISO-8859-1.
        return data.decode("latin-1")


# --------------------------------------------------------------------------
# The loaded configuration


@dataclass(frozen=True)
class _Setting:
    value: str | list[str]      # unescaped text, or elements for list keys
    shown: str                  # as written, for error messages
    origin: _Origin


@dataclass(frozen=True)
class BookieConfig:
    """A validated bookie configuration.

    Attributes are the snake_case forms of the Java keys (``bookie_port`` for
    ``bookiePort``) and hold effective values: options with a documented
    fallback (``journal_directories``, ``index_directories``,
    ``disk_usage_lwm_threshold``, the metadata trio) already carry it.
    ``cfg["bookiePort"]`` looks up by Java key.  Build instances with
    ``load_config`` or ``with_overrides``, not directly.
    """

    bookie_port: int
    allow_ephemeral_ports: bool
    bookie_id: str | None
    advertised_address: str | None
    listening_interface: str | None
    allow_loopback: bool
    use_host_name_as_bookie_id: bool
    use_short_host_name: bool
    max_adds_in_progress_limit: int
    max_reads_in_progress_limit: int
    netty_max_frame_size_bytes: int
    shutdown_timeout_ms: int
    http_server_enabled: bool
    http_server_port: int
    http_server_host: str
    journal_directories: tuple[str, ...]
    journal_directory: str
    journal_sync_data: bool
    journal_write_data: bool
    journal_adaptive_group_writes: bool
    journal_max_group_wait_msec: int
    journal_buffered_writes_threshold: int
    journal_buffered_entries_threshold: int
    journal_flush_when_queue_empty: bool
    journal_max_size_mb: int
    journal_max_backups: int
    journal_pre_alloc_size_mb: int
    ledger_directories: tuple[str, ...]
    index_directories: tuple[str, ...]
    allow_storage_expansion: bool
    flush_interval: int
    db_storage_write_cache_max_size_mb: int
    disk_usage_threshold: float
    disk_usage_warn_threshold: float
    disk_usage_lwm_threshold: float
    disk_check_interval: int
    min_usable_size_for_entry_log_creation: int
    min_usable_size_for_high_priority_writes: int
    read_only_mode_enabled: bool
    force_read_only_bookie: bool
    gc_wait_time: int
    minor_compaction_threshold: float
    minor_compaction_interval: int
    minor_compaction_max_time_millis: int
    major_compaction_threshold: float
    major_compaction_interval: int
    major_compaction_max_time_millis: int
    compaction_rate: int
    compaction_rate_by_entries: int
    compaction_rate_by_bytes: int
    is_throttle_by_bytes: bool
    compaction_max_outstanding_requests: int
    force_allow_compaction: bool
    is_force_gc_allow_when_no_space: bool
    log_size_limit: int
    metadata_service_uri: str | None
    zk_servers: tuple[str, ...] | None
    zk_ledgers_root_path: str
    zk_timeout: int
    zk_enable_security: bool
    zk_digest_auth_path: str | None
    zk_sasl_mechanism: str | None
    zk_sasl_username: str | None
    zk_sasl_password_path: str | None
    zk_tls_enabled: bool
    zk_tls_ca_path: str | None
    zk_tls_certificate_path: str | None
    zk_tls_key_path: str | None
    auto_recovery_daemon_enabled: bool
    lost_bookie_recovery_delay: int
    auditor_periodic_check_interval: int
    auditor_periodic_bookie_check_interval: int
    auditor_replicas_check_interval: int
    auditor_periodic_placement_policy_check_interval: int
    ensemble_placement_policy: str
    network_topology_script_file_name: str | None
    network_topology_script_number_args: int
    min_num_racks_per_write_quorum: int
    enforce_min_num_racks_per_write_quorum: bool
    open_ledger_rereplication_grace_period: int
    lock_release_of_failed_ledger_grace_period: int
    rereplication_entry_batch_size: int
    replication_rate_by_bytes: int
    tls_provider_factory_class: str | None
    tls_provider: str
    tls_key_store_type: str
    tls_key_store: str | None
    tls_key_store_password_path: str | None
    tls_certificate_path: str | None
    tls_trust_store_type: str
    tls_trust_store: str | None
    tls_trust_store_password_path: str | None
    tls_client_authentication: bool
    tls_cert_files_refresh_duration_seconds: int

    _settings: Mapping[str, _Setting] = field(default_factory=dict, compare=False, repr=False)
    _derived: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    # -- lookups -----------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        opt = find_option(key)
        if opt is None:
            raise KeyError(key)
        return getattr(self, opt.attr)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and find_option(key) is not None

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def zk_security(self):
        """The :class:`~bkctl.wire.metadata.zksecurity.ZKSecurity` these keys describe
        (secrets read from their files); ConfigError when a file is unreadable."""
        from bkctl.wire.metadata.zksecurity import ZKSecurity

        def secret(key: str, path: str | None) -> str | None:
            if path is None:
                return None
            try:
                with open(path, encoding="utf-8") as f:
                    return f.read().strip()
            except OSError as exc:
                raise ConfigError(f"{key}: cannot read {path}: {exc.strerror or exc}") from None

        try:
            return ZKSecurity(digest=secret("zkDigestAuthPath", self.zk_digest_auth_path),
                              sasl_mechanism=self.zk_sasl_mechanism, sasl_username=self.zk_sasl_username,
                              sasl_password=secret("zkSaslPasswordPath", self.zk_sasl_password_path),
                              tls=self.zk_tls_enabled, tls_ca=self.zk_tls_ca_path,
                              tls_cert=self.zk_tls_certificate_path, tls_key=self.zk_tls_key_path,
                              enable_security=self.zk_enable_security)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def tls_files(self):
        """The bookie's TLS files (:class:`~bkctl.wire.tls.TLSFiles`), or None when TLS is off."""
        if not self.tls_provider_factory_class:
            return None
        from bkctl.wire.tls import TLSConfigError, TLSFiles

        pkcs12 = self.tls_key_store_type == "PKCS12"
        try:
            return TLSFiles(ca=self.tls_trust_store,
                            cert=None if pkcs12 else self.tls_certificate_path,
                            key=None if pkcs12 else self.tls_key_store,
                            key_password_path=None if pkcs12 else self.tls_key_store_password_path,
                            pkcs12=self.tls_key_store if pkcs12 else None,
                            pkcs12_password_path=self.tls_key_store_password_path if pkcs12 else None,
                            require_client_cert=self.tls_client_authentication)
        except TLSConfigError as exc:
            raise ConfigError(str(exc)) from None

    def as_dict(self) -> dict[str, Any]:
        """``{java_key: value}`` for every option, in schema order."""
        return {opt.name: getattr(self, opt.attr) for opt in OPTIONS}

    def source_of(self, key: str) -> str | None:
        """``"path:line"``, ``"command line"``, or None for defaults and derived values."""
        opt = find_option(key)
        if opt is None:
            raise KeyError(key)
        setting = self._settings.get(opt.name)
        return str(setting.origin) if setting else None

    def is_derived(self, key: str) -> bool:
        """Whether the value was filled in from another key (a fallback)."""
        opt = find_option(key)
        if opt is None:
            raise KeyError(key)
        return opt.name in self._derived

    # -- derived views -----------------------------------------------------

    @property
    def metadata(self) -> MetadataServiceURI | None:
        """The parsed metadata service URI, or None when none is configured."""
        if self.metadata_service_uri is None:
            return None
        return MetadataServiceURI.parse(self.metadata_service_uri)

    @property
    def zk_connect_string(self) -> str | None:
        """ZooKeeper servers as ``host:port,host:port``, or None."""
        return ",".join(self.zk_servers) if self.zk_servers else None

    # -- changes -----------------------------------------------------------

    def with_overrides(self, overrides: Mapping[str, Any]) -> BookieConfig:
        """A new configuration with ``overrides`` applied on top, re-validated."""
        settings = dict(self._settings)
        settings.update(_settings_from_overrides(overrides))
        return _build(settings)

    # -- bookie identity ---------------------------------------------------

    def resolve_bookie_id(self, resolver: Resolver | None = None) -> str:
        """See ``resolve_bookie_id``."""
        return resolve_bookie_id(self, resolver)


def _check_fields() -> None:
    names = [f.name for f in dataclasses.fields(BookieConfig) if not f.name.startswith("_")]
    expected = [opt.attr for opt in OPTIONS]
    if names != expected:  # pragma: no cover - guards edits to the schema
        raise AssertionError(f"BookieConfig fields {names} do not match OPTIONS {expected}")


_check_fields()


# --------------------------------------------------------------------------
# Loading


def load_config(path: str | os.PathLike[str] | None = None,
                overrides: Mapping[str, Any] | None = None) -> BookieConfig:
    """Read ``path`` (a bk_server.conf; None for defaults only), apply
    ``overrides`` and validate.

    ``overrides`` maps Java keys (``bookiePort``), attribute names or flag
    names (``--bookie-port``) to strings; list keys take a comma-separated
    string or a sequence, and already-typed values (int, bool...) are
    accepted too.  None values are skipped, so click results can be passed
    as they are.  Overrides replace file values, lists included.  Raises
    ``ConfigError``.
    """
    settings: dict[str, _Setting] = {}
    if path is not None:
        settings.update(_settings_from_text(_read_text(path), os.fspath(path)))
    if overrides:
        settings.update(_settings_from_overrides(overrides))
    return _build(settings)


def load_config_text(text: str, overrides: Mapping[str, Any] | None = None, *,
                     source: str = "<config>") -> BookieConfig:
    """Like ``load_config`` for bk_server.conf text held in memory; ``source``
    stands for the file name in messages."""
    settings = _settings_from_text(text, source)
    if overrides:
        settings.update(_settings_from_overrides(overrides))
    return _build(settings)


def _warn_unsupported(origin: _Origin, key: str) -> None:
    log.warning("%s: %s is a Java bookie setting that bookied does not support; it has no effect",
                origin, key)


def _settings_from_text(text: str, where: str) -> dict[str, _Setting]:
    settings: dict[str, _Setting] = {}
    unsupported: set[str] = set()
    for number, key, raw in _raw_properties(text, where):
        origin = _Origin(where, number)
        opt = OPTIONS_BY_NAME.get(key)
        if opt is None:
            if key in IGNORED_KEYS:
                if key not in unsupported:
                    unsupported.add(key)
                    _warn_unsupported(origin, key)
            elif not key:
                log.warning("%s: line without a key ignored", origin)
            elif key == "include":
                log.warning("%s: 'include' directives are not supported; %r not read",
                            origin, "".join(_unescape(raw, split=False)))
            else:
                log.warning("%s: unknown key %r ignored%s", origin, key, _suggest(key))
            continue
        try:
            parts = _unescape(raw, split=True)
        except _Invalid as exc:
            raise _bad(key, raw, str(exc), origin) from None
        if opt.type != "list" and len(parts) > 1:
            raise _bad(key, raw, "contains an unescaped ',' (Java would read only "
                       f"{parts[0].strip()!r}); write '\\,' for a literal comma", origin)
        value: str | list[str] = parts if opt.type == "list" else parts[0]
        earlier = settings.get(key)
        if earlier is not None:
            if opt.type == "list":
                assert isinstance(earlier.value, list) and isinstance(value, list)
                settings[key] = _Setting(earlier.value + value, f"{earlier.shown},{raw}",
                                         earlier.origin)
            else:
                log.warning("%s: %s set again; the first value (%s) is used, as in Java",
                            origin, key, earlier.origin)
            continue
        settings[key] = _Setting(value, raw, origin)
    return settings


def _suggest(key: str) -> str:
    names = list(OPTIONS_BY_NAME) + sorted(IGNORED_KEYS)
    for name in names:
        if name.lower() == key.lower():
            return f" (did you mean {name!r}? keys are case-sensitive)"
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.8)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _settings_from_overrides(overrides: Mapping[str, Any]) -> dict[str, _Setting]:
    settings: dict[str, _Setting] = {}
    origin = _Origin()
    for key, value in overrides.items():
        if value is None:
            continue
        opt = find_option(key)
        if opt is None:
            if key in IGNORED_KEYS:
                _warn_unsupported(origin, key)
                continue
            raise ConfigError(f"unknown configuration key {key!r}{_suggest(key)}", key=key)
        if isinstance(value, bool):
            text: str | list[str] = "true" if value else "false"
            shown = text
        elif isinstance(value, (list, tuple)):
            text = [str(item) for item in value]
            shown = ",".join(text)
        else:
            shown = str(value)
            text = shown.split(",") if opt.type == "list" else shown
        settings[opt.name] = _Setting(text, shown, origin)
    return settings


def _build(settings: Mapping[str, _Setting]) -> BookieConfig:
    values: dict[str, Any] = {}
    explicit: set[str] = set()
    for opt in OPTIONS:
        setting = settings.get(opt.name)
        value = opt.default
        if setting is not None:
            try:
                converted = opt.convert(setting.value)
            except _Invalid as exc:
                raise _bad(opt.name, setting.shown, str(exc), setting.origin) from None
            if converted is not None:
                value = converted
                explicit.add(opt.name)
        values[opt.name] = value

    def origin(key: str) -> _Origin | None:
        setting = settings.get(key)
        return setting.origin if setting is not None and key in explicit else None

    def shown(key: str) -> str:
        setting = settings.get(key)
        if setting is not None and key in explicit:
            return setting.shown
        return OPTIONS_BY_NAME[key].format_value(values[key])

    derived: set[str] = set()

    # Fallbacks Java applies when a key is unset.
    if "journalDirectories" not in explicit:
        values["journalDirectories"] = (values["journalDirectory"],)
        derived.add("journalDirectories")
    if "indexDirectories" not in explicit:
        values["indexDirectories"] = values["ledgerDirectories"]
        derived.add("indexDirectories")
    if "diskUsageLwmThreshold" not in explicit:
        values["diskUsageLwmThreshold"] = values["diskUsageThreshold"]
        derived.add("diskUsageLwmThreshold")
    if "compactionRateByEntries" not in explicit:
        values["compactionRateByEntries"] = values["compactionRate"]
        derived.add("compactionRateByEntries")
    if "minUsableSizeForHighPriorityWrites" not in explicit:
        values["minUsableSizeForHighPriorityWrites"] = values["minUsableSizeForEntryLogCreation"]
        derived.add("minUsableSizeForHighPriorityWrites")

    # Metadata service: the URI wins; otherwise derive it from the ZooKeeper keys.
    uri = values["metadataServiceUri"]
    if uri is not None:
        parsed = _parse_uri(uri)  # already checked by the option
        for key, from_uri in (("zkServers", parsed.servers),
                              ("zkLedgersRootPath", parsed.root)):
            if key in explicit and values[key] != from_uri:
                log.warning("%s: %s %r ignored: metadataServiceUri (%s) takes precedence",
                            origin(key), key, OPTIONS_BY_NAME[key].format_value(values[key]),
                            origin("metadataServiceUri"))
            if key not in explicit or values[key] != from_uri:
                derived.add(key)
            values[key] = from_uri
    elif values["zkServers"] is not None:
        values["metadataServiceUri"] = str(MetadataServiceURI.for_servers(
            values["zkServers"], values["zkLedgersRootPath"]))
        derived.add("metadataServiceUri")

    # Checks across keys.
    if values["bookiePort"] == 0 and not values["allowEphemeralPorts"]:
        raise _bad("bookiePort", shown("bookiePort"),
                   "asks for an ephemeral port; set allowEphemeralPorts=true if that is intended",
                   origin("bookiePort"))
    threshold = values["diskUsageThreshold"]
    for key in ("diskUsageWarnThreshold", "diskUsageLwmThreshold"):
        if values[key] <= threshold:
            continue
        if key in explicit:
            raise _bad(key, shown(key), f"is above diskUsageThreshold ({_num(threshold)})",
                       origin(key))
        raise _bad("diskUsageThreshold", shown("diskUsageThreshold"),
                   f"is below {key} ({_num(values[key])}, its default)",
                   origin("diskUsageThreshold"))
    _check_compaction(values, shown, origin)
    if values["forceReadOnlyBookie"] and not values["readOnlyModeEnabled"]:
        raise _bad("forceReadOnlyBookie", shown("forceReadOnlyBookie"),
                   "contradicts readOnlyModeEnabled=false: a forced read-only bookie needs read-only "
                   "mode (Java refuses to start too)", origin("forceReadOnlyBookie"))
    if (values["httpServerEnabled"] and values["httpServerPort"] != 0
            and values["httpServerPort"] == values["bookiePort"]):
        raise _bad("httpServerPort", shown("httpServerPort"),
                   "is the same port as bookiePort", origin("httpServerPort"))

    return BookieConfig(
        **{opt.attr: values[opt.name] for opt in OPTIONS},
        _settings={key: settings[key] for key in explicit},
        _derived=frozenset(derived),
    )


def _check_compaction(values: dict, shown, origin) -> None:
    """The compaction settings Java's GarbageCollectorThread refuses at start."""
    wait = values["gcWaitTime"]
    enabled = {}
    for kind in ("minor", "major"):
        interval, threshold = values[f"{kind}CompactionInterval"], values[f"{kind}CompactionThreshold"]
        enabled[kind] = interval > 0 and threshold > 0
        if enabled[kind] and interval * 1000 < wait:
            key = f"{kind}CompactionInterval"
            raise _bad(key, shown(key), f"seconds is shorter than gcWaitTime ({wait} ms)", origin(key))
    if enabled["minor"] and enabled["major"]:
        for key, other in (("minorCompactionInterval", "majorCompactionInterval"),
                           ("minorCompactionThreshold", "majorCompactionThreshold")):
            if values[key] >= values[other]:
                raise _bad(key, shown(key), f"is not below {other} ({shown(other)})", origin(key))


def startup_warnings(cfg: BookieConfig) -> list[str]:
    """What bookied warns about when it starts with ``cfg``: settings that
    weaken durability, and values it cannot honour."""
    out = []
    if not cfg.journal_sync_data:
        out.append("journalSyncData=false: journal writes are NOT fsynced; adds are acknowledged once "
                   "in the page cache, and a power failure or kernel crash can lose acknowledged entries")
    if not cfg.journal_write_data:
        out.append("journalWriteData=false: entries are NOT journaled; adds are acknowledged from the "
                   f"write cache and are durable only after the next checkpoint (flushInterval "
                   f"{cfg.flush_interval} ms): a crash loses acknowledged entries")
    if not cfg.journal_adaptive_group_writes:
        out.append("journalAdaptiveGroupWrites=false is not supported by bookied and has no effect: "
                   "its journal writes and fsyncs each group in one step, so what arrives during an "
                   "fsync always shares the next one")
    return out


# --------------------------------------------------------------------------
# Writing


def render_config(cfg: BookieConfig, *, comments: bool = True,
                  only_changed: bool = False) -> str:
    """A bk_server.conf that loads back into an equal configuration.

    Values filled in from a fallback are written commented out, so that the
    fallback still applies when the file is read again.  ``only_changed``
    leaves out options at their defaults; ``comments`` adds each option's
    meaning above it.
    """
    out = ["# Bookie configuration (bk_server.conf syntax), written by bookied."]
    for section, title in SECTIONS:
        block: list[str] = []
        for opt in OPTIONS:
            if opt.section != section:
                continue
            value = getattr(cfg, opt.attr)
            derived = opt.name in cfg._derived
            if only_changed and (derived or value == opt.default):
                continue
            if comments:
                note = opt.meaning
                if opt.unit:
                    note += f" [{opt.unit}]"
                block.append(f"# {note}")
                if derived:
                    block.append(f"# (follows {opt.fallback or 'metadataServiceUri'} "
                                 "while unset)")
            if value is None or derived:
                block.append(f"#{opt.name}={opt.render(value)}")
            else:
                block.append(f"{opt.name}={opt.render(value)}")
            if comments:
                block.append("")
        if block:
            out.append("")
            out.append(f"## {title}")
            if comments:
                out.append("")
            out.extend(block)
    return "\n".join(out).rstrip("\n") + "\n"


# --------------------------------------------------------------------------
# Bookie identity


def validate_bookie_id(value: str) -> str:
    """Return ``value`` if it is a valid bookie id (:mod:`bkctl.wire.metadata.bookieid`'s
    rule), else raise ``ConfigError``."""
    problem = bookie_id_problem(value)
    if problem:
        raise ConfigError(f"bookieId: {value!r} {problem}", key="bookieId", value=value)
    return value


def _host_address(name: str) -> str:
    infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    if not infos:
        raise OSError(f"no address for {name}")
    for family, _type, _proto, _canon, sockaddr in infos:
        if family == socket.AF_INET:  # Java prefers IPv4 by default
            return str(sockaddr[0])
    return str(infos[0][4][0])


def _canonical_name(address: str) -> str:
    try:
        return socket.gethostbyaddr(address)[0]
    except OSError:
        return address  # as Java's getCanonicalHostName does on failure


def _interface_address(name: str) -> str:
    try:
        socket.if_nametoindex(name)
    except OSError:
        raise OSError(f"no such network interface {name!r}") from None
    import fcntl  # POSIX only; only needed when listeningInterface is set
    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            packed = fcntl.ioctl(sock.fileno(), siocgifaddr,
                                 struct.pack("256s", name.encode()[:15]))
        except OSError:
            raise OSError(f"network interface {name!r} has no IPv4 address") from None
    return socket.inet_ntoa(packed[20:24])


@dataclass(frozen=True)
class Resolver:
    """Network lookups used to work out the bookie address; replace them in tests.

    Each function raises ``OSError`` when the lookup fails.
    """

    local_hostname: Callable[[], str] = socket.gethostname
    host_address: Callable[[str], str] = _host_address          # name -> IP
    interface_address: Callable[[str], str] = _interface_address  # interface -> IP
    canonical_name: Callable[[str], str] = _canonical_name      # IP -> host name


_DEFAULT_RESOLVER = Resolver()


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def resolve_bookie_address(cfg: BookieConfig, resolver: Resolver | None = None) -> tuple[str, int]:
    """``(host, port)`` the bookie advertises, following Java's rules.

    advertisedAddress if set; otherwise the address of listeningInterface
    (or of the local host name when unset), as an IP, or as a host name with
    useHostNameAsBookieID (cut at the first dot with useShortHostName).  A
    loopback result is refused unless allowLoopback is true; an explicit
    advertisedAddress is taken as given, as in Java.
    """
    res = resolver or _DEFAULT_RESOLVER
    port = cfg.bookie_port
    if cfg.advertised_address:
        return cfg.advertised_address, port
    iface = cfg.listening_interface
    try:
        if iface is None:
            hostname = res.local_hostname()
            try:
                address = res.host_address(hostname)
            except OSError as exc:
                raise ConfigError(
                    f"cannot resolve the local host name {hostname!r} ({exc}); set "
                    "listeningInterface or advertisedAddress", key="listeningInterface") from None
        else:
            address = res.interface_address(iface)
    except OSError as exc:
        raise _bad("listeningInterface", iface or "", f"cannot be used: {exc}",
                   _origin_of(cfg, "listeningInterface")) from None
    host = address
    checked = address
    if cfg.use_host_name_as_bookie_id:
        host = res.canonical_name(address)
        if cfg.use_short_host_name:
            host = host.split(".", 1)[0]
        try:
            checked = res.host_address(host)
        except OSError:
            checked = address
    if _is_loopback(checked) and not cfg.allow_loopback:
        raise ConfigError(
            f"bookie address {host}:{port} is the loopback address {checked}, which is refused "
            "while allowLoopback is false; set listeningInterface (e.g. eth0) or "
            "advertisedAddress, or allowLoopback=true",
            key="allowLoopback", value=f"{host}:{port}")
    return host, port


def _origin_of(cfg: BookieConfig, key: str) -> _Origin | None:
    setting = cfg._settings.get(key)
    return setting.origin if setting else None


def resolve_bookie_id(cfg: BookieConfig, resolver: Resolver | None = None) -> str:
    """The id this bookie registers under: bookieId if set, else ``host:port``
    from ``resolve_bookie_address``.  Raises ``ConfigError``."""
    if cfg.bookie_id is not None:
        return validate_bookie_id(cfg.bookie_id)
    host, port = resolve_bookie_address(cfg, resolver)
    ident = f"{host}:{port}"
    problem = bookie_id_problem(ident)
    if problem:
        raise ConfigError(f"derived bookie id {ident!r} {problem}; set bookieId",
                          key="bookieId", value=ident)
    return ident


def resolve_listen_host(cfg: BookieConfig, resolver: Resolver | None = None) -> str:
    """Address to bind the bookie port to: the listeningInterface address, or
    ``0.0.0.0`` (all interfaces) when it is unset."""
    if cfg.listening_interface is None:
        return "0.0.0.0"
    res = resolver or _DEFAULT_RESOLVER
    try:
        return res.interface_address(cfg.listening_interface)
    except OSError as exc:
        raise _bad("listeningInterface", cfg.listening_interface, f"cannot be used: {exc}",
                   _origin_of(cfg, "listeningInterface")) from None
