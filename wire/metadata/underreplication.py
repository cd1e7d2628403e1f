"""Values of the autorecovery znodes under ``<root>/underreplication`` (BookKeeper's
meta/ZkLedgerUnderreplicationManager.java, DataFormats.proto).

Pure codecs, no I/O.  Text-format values (protobuf text, as protobuf-java prints it):

* ``LAYOUT``: ``type: "BASIC"\\nversion: 1\\n`` (anything else is rejected);
* ``ledgers/.../urL<id>``: ``UnderreplicatedLedgerFormat`` - missing replicas and an optional ctime;
* ``locks/urL<id>``: ``LockDataFormat`` - ``bookieId: "<hostname>"``;
* ``auditorelection`` and its ``V_`` votes: ``AuditorVoteFormat`` - ``bookieId: "<id>"``.

Binary values: ``checkallledgersctime``, ``placementpolicycheckctime`` and
``replicascheckctime`` hold a message with a single int64 field 1 (ms).
``lostBookieRecoveryDelay`` is a decimal ASCII integer (seconds).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from bkctl.wire.errors import CodecError
from bkctl.wire.metadata.protobuf_text import message_to_text, parse_text_message
from bkctl.wire.proto import formats_pb2

__all__ = [
    "LAYOUT_TYPE",
    "LAYOUT_VERSION",
    "UnderreplicatedLedger",
    "parse_auditor_vote",
    "parse_last_run_time",
    "parse_lock_data",
    "parse_lost_bookie_recovery_delay",
    "parse_underreplicated_ledger",
    "parse_underreplication_layout",
    "serialize_auditor_vote",
    "serialize_last_run_time",
    "serialize_lock_data",
    "serialize_lost_bookie_recovery_delay",
    "serialize_underreplicated_ledger",
    "serialize_underreplication_layout",
]

LAYOUT_TYPE = "BASIC"
LAYOUT_VERSION = 1
_INT_TEXT = re.compile(r"-?[0-9]+")


# -- urL markers ---------------------------------------------------------------
@dataclass(frozen=True)
class UnderreplicatedLedger:
    """An under-replication marker: the bookies missing replicas, and when it was marked (ms)."""

    replicas: tuple[str, ...]
    ctime: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.replicas, str):
            object.__setattr__(self, "replicas", (self.replicas,))
        else:
            object.__setattr__(self, "replicas", tuple(self.replicas))

    def merged(self, replicas: Iterable[str]) -> UnderreplicatedLedger:
        """Add newly missing replicas (the auditor's re-mark), keeping order and ctime."""
        return UnderreplicatedLedger(tuple(dict.fromkeys((*self.replicas, *replicas))), self.ctime)

    def serialize(self) -> bytes:
        return serialize_underreplicated_ledger(self)


def serialize_underreplicated_ledger(marker: UnderreplicatedLedger) -> bytes:
    pb = formats_pb2.UnderreplicatedLedgerFormat()
    pb.replica.extend(marker.replicas)
    if marker.ctime is not None:
        pb.ctime = marker.ctime
    return message_to_text(pb).encode("utf-8")


#: a marker as Java's TextFormat and ours print it (replicas, then perhaps a ctime): read
#: without protobuf's text parser, which costs 250 us a marker (``underreplicated`` of 10^4)
_PLAIN_MARKER = re.compile(rb'((?:replica: "[^"\\\n]*"\n)*)(?:ctime: (-?[0-9]{1,18})\n)?')
_PLAIN_REPLICA = re.compile(rb'replica: "([^"\\\n]*)"\n')


def parse_underreplicated_ledger(data: bytes) -> UnderreplicatedLedger:
    plain = _PLAIN_MARKER.fullmatch(data)
    if plain is not None:
        try:
            replicas = tuple(r.decode("ascii") for r in _PLAIN_REPLICA.findall(plain.group(1)))
        except UnicodeDecodeError:
            pass  # protobuf's parser says what is wrong with it
        else:
            ctime = plain.group(2)
            return UnderreplicatedLedger(replicas, int(ctime) if ctime is not None else None)
    pb = parse_text_message(data, formats_pb2.UnderreplicatedLedgerFormat, "under-replicated ledger marker")
    return UnderreplicatedLedger(tuple(pb.replica), pb.ctime if pb.HasField("ctime") else None)


# -- locks and votes -------------------------------------------------------------
def serialize_lock_data(hostname: str) -> bytes:
    """``bookieId: "<hostname>"\\n`` - Java stores the local *hostname* in the lock."""
    return message_to_text(formats_pb2.LockDataFormat(bookieId=hostname)).encode("utf-8")


def parse_lock_data(data: bytes) -> str | None:
    """The hostname in a replication lock (``None`` if the field is absent)."""
    pb = parse_text_message(data, formats_pb2.LockDataFormat, "replication lock data")
    return pb.bookieId if pb.HasField("bookieId") else None


def serialize_auditor_vote(bookie_id: str) -> bytes:
    return message_to_text(formats_pb2.AuditorVoteFormat(bookieId=bookie_id)).encode("utf-8")


def parse_auditor_vote(data: bytes) -> str | None:
    """The bookie id in an auditor vote or in ``auditorelection`` (``None`` if absent)."""
    pb = parse_text_message(data, formats_pb2.AuditorVoteFormat, "auditor vote")
    return pb.bookieId if pb.HasField("bookieId") else None


# -- LAYOUT ------------------------------------------------------------------------
def serialize_underreplication_layout() -> bytes:
    """``type: "BASIC"\\nversion: 1\\n``."""
    pb = formats_pb2.LedgerRereplicationLayoutFormat(type=LAYOUT_TYPE, version=LAYOUT_VERSION)
    return message_to_text(pb).encode("utf-8")


def parse_underreplication_layout(data: bytes) -> tuple[str, int]:
    """``(type, version)``; :class:`CodecError` unless it is ``BASIC`` version 1."""
    pb = parse_text_message(data, formats_pb2.LedgerRereplicationLayoutFormat, "under-replication LAYOUT")
    if pb.type != LAYOUT_TYPE or pb.version != LAYOUT_VERSION:
        raise CodecError(
            f"unsupported under-replication layout type {pb.type!r} version {pb.version}"
            f" (expected {LAYOUT_TYPE!r} version {LAYOUT_VERSION})"
        )
    return pb.type, pb.version


# -- binary last-run times ----------------------------------------------------------
def serialize_last_run_time(ctime_ms: int) -> bytes:
    """Binary message with int64 field 1 (``checkallledgersctime`` and friends)."""
    return formats_pb2.LastRunTimeFormat(ctime=ctime_ms).SerializeToString()


def parse_last_run_time(data: bytes) -> int | None:
    """The last run time in ms, ``None`` when the field is absent (e.g. empty data)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CodecError(f"last run time must be bytes, not {type(data).__name__}")
    pb = formats_pb2.LastRunTimeFormat()
    try:
        pb.ParseFromString(bytes(data))
    except Exception as exc:
        raise CodecError(f"malformed last run time: {exc}") from None
    return pb.ctime if pb.HasField("ctime") else None


# -- lostBookieRecoveryDelay ------------------------------------------------------------
def serialize_lost_bookie_recovery_delay(seconds: int) -> bytes:
    """The delay as Java writes it; a ValueError unless it is a 32-bit integer (Java's int)."""
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not -(2**31) <= seconds < 2**31:
        raise ValueError(f"lostBookieRecoveryDelay must be a 32-bit integer, got {seconds!r}")
    return str(seconds).encode("ascii")


def parse_lost_bookie_recovery_delay(data: bytes) -> int:
    try:
        text = bytes(data).decode("ascii").strip()
    except (UnicodeDecodeError, TypeError):
        raise CodecError(f"lostBookieRecoveryDelay is not ASCII: {data!r}") from None
    if not _INT_TEXT.fullmatch(text):
        raise CodecError(f"lostBookieRecoveryDelay is not an integer: {text!r}")
    return int(text)
