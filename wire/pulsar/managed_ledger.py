"""Pulsar's managed-ledger metadata: topic names, znode values, positions.

* Topic names: ``persistent://tenant/ns/local`` <-> the managed-ledger name
  ``tenant/ns/persistent/<URL-encoded local name>`` (Java's ``URLEncoder``:
  letters, digits and ``.-*_`` stay, a space becomes ``+``, the rest is
  ``%XX`` of UTF-8).  Partitions are topics named ``<topic>-partition-N``.
* Znode values (``ManagedLedgerInfo``, ``ManagedCursorInfo``) are accepted
  as a broker may have written them: binary protobuf (the default), the same
  behind a ``[0x4778][u32 size][...InfoMetadata]`` compression header, or
  protobuf text (brokers before 2.x); partitioned-topic metadata is JSON.
* Positions ``(ledger, entry)``; a cursor has acknowledged everything up to
  its mark-delete position and each ``(lower, upper]`` individually deleted
  range.
"""

from __future__ import annotations

import bisect
import re
import struct
from dataclasses import dataclass
from typing import Any, TypeVar

from google.protobuf.message import Message

from ..proto import pulsar_ml_pb2 as ml
from .errors import PulsarFormatError

__all__ = [
    "CursorState",
    "MAGIC_MANAGED_INFO_METADATA",
    "TopicName",
    "decode_local_name",
    "encode_local_name",
    "parse_cursor_info",
    "parse_managed_ledger_info",
    "parse_partitioned_topic_metadata",
    "parse_position_info",
]

#: Custom metadata Pulsar puts on a managed ledger's data and cursor ledgers.
APPLICATION_KEY, APPLICATION = "application", "pulsar"
COMPONENT_KEY, COMPONENT = "component", "managed-ledger"
MANAGED_LEDGER_KEY = "pulsar/managed-ledger"
CURSOR_KEY = "pulsar/cursor"
#: Pulsar's other ledgers: the schema registry's (listed under /schemas) and a topic
#: compaction's output (named by the __compaction cursor's CompactedTopicLedger property).
COMPONENT_SCHEMA, SCHEMA_ID_KEY = "schema", "pulsar/schemaId"
COMPONENT_COMPACTED, COMPACTED_TOPIC_KEY = "compacted-ledger", "pulsar/compactedTopic"
MAGIC_MANAGED_INFO_METADATA = 0x4778
#: Where a bare topic name lives (pulsar-admin's ``TopicName``: ``x`` is ``persistent://public/default/x``).
DEFAULT_TENANT, DEFAULT_NAMESPACE = "public", "default"
_PARTITION = re.compile(r"(.*)-partition-(\d+)")
_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-*_")


#: a name URLEncoder leaves as it is (most topics' names: checked in C, not byte by byte)
_UNCHANGED = re.compile(r"[a-zA-Z0-9.\-*_]*")


def encode_local_name(name: str) -> str:
    """``URLEncoder.encode(name, UTF-8)`` as Java does it."""
    if _UNCHANGED.fullmatch(name):
        return name
    out = []
    for byte in name.encode("utf-8"):
        if byte in _SAFE:
            out.append(chr(byte))
        elif byte == 0x20:
            out.append("+")
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def decode_local_name(encoded: str) -> str:
    """``URLDecoder.decode(encoded, UTF-8)``."""
    if "%" not in encoded and "+" not in encoded:
        return encoded
    from urllib.parse import unquote_plus

    return unquote_plus(encoded, encoding="utf-8", errors="strict")


@dataclass(frozen=True)
class TopicName:
    """A persistent topic: ``persistent://tenant/namespace/local`` (v2), or a
    v1 name ``persistent://tenant/cluster/namespace/local`` -- brokers before
    Pulsar 2 made them, and clusters upgraded since keep them -- whose
    ``namespace`` is then ``cluster/namespace``, as Pulsar's NamespaceName
    has it (so the managed ledger is ``tenant/cluster/namespace/persistent/local``)."""

    tenant: str
    namespace: str
    local: str
    domain: str = "persistent"

    @classmethod
    def parse(cls, text: str) -> TopicName:
        """``persistent://t/ns/x`` (or ``persistent://t/cluster/ns/x``), the short
        names pulsar-admin takes -- ``t/ns/x``, and ``x`` for
        ``persistent://public/default/x`` -- or a managed-ledger name
        ``t/ns/persistent/x`` (``t/cluster/ns/persistent/x``).  As Pulsar's
        TopicName: after the domain, three parts are a v2 name and four a v1
        name, the fourth taking any further slashes."""
        value = text.strip()
        usage = (
            f"{text!r} is not a topic name (want persistent://tenant/namespace/topic, tenant/namespace/topic or topic)"
        )
        if "://" in value:
            domain, _, value = value.partition("://")
            if domain != "persistent":
                raise ValueError(f"{text!r}: only persistent topics are stored in BookKeeper")
            parts = value.split("/", 3)
            if len(parts) < 3 or not all(parts):
                raise ValueError(usage)
            return cls(parts[0], "/".join(parts[1:-1]), parts[-1], domain)
        parts = value.split("/")
        if len(parts) in (4, 5) and parts[-2] == "persistent" and all(parts):
            return cls.from_managed_ledger(value)
        if len(parts) == 1 and parts[0]:
            return cls(DEFAULT_TENANT, DEFAULT_NAMESPACE, parts[0])
        if len(parts) != 3 or not all(parts):
            raise ValueError(usage)
        return cls(*parts)

    @classmethod
    def from_managed_ledger(cls, name: str) -> TopicName:
        """The topic of a managed-ledger name, v2 (``t/ns/persistent/x``) or v1
        (``t/cluster/ns/persistent/x``)."""
        parts = name.split("/")
        if len(parts) not in (4, 5) or parts[-2] != "persistent" or not all(parts):
            raise ValueError(
                f"{name!r} is not a managed-ledger name (tenant/namespace/persistent/topic, "
                "or tenant/cluster/namespace/persistent/topic)"
            )
        return cls(parts[0], "/".join(parts[1:-2]), decode_local_name(parts[-1]))

    @property
    def is_v1(self) -> bool:
        """A v1 name (its namespace names the cluster)."""
        return "/" in self.namespace

    @property
    def managed_ledger(self) -> str:
        return f"{self.tenant}/{self.namespace}/{self.domain}/{encode_local_name(self.local)}"

    @property
    def partition(self) -> int:
        """The partition index, -1 for a topic that is not a partition."""
        m = _PARTITION.fullmatch(self.local)
        return int(m.group(2)) if m else -1

    @property
    def partitioned_topic(self) -> TopicName:
        """The topic a partition belongs to (itself when it is none)."""
        m = _PARTITION.fullmatch(self.local)
        return TopicName(self.tenant, self.namespace, m.group(1), self.domain) if m else self

    def __str__(self) -> str:
        return f"{self.domain}://{self.tenant}/{self.namespace}/{self.local}"


# ---------------------------------------------------------------- znode values

_CODECS: dict[int, str] = {ml.NONE: "NONE", ml.LZ4: "LZ4", ml.ZLIB: "ZLIB", ml.ZSTD: "ZSTD", ml.SNAPPY: "SNAPPY"}


M = TypeVar("M", bound=Message)


def _parse(
    data: bytes,
    message_class: type[M],
    header_class: type[ml.ManagedLedgerInfoMetadata] | type[ml.ManagedCursorInfoMetadata],
    what: str,
) -> M:
    """One znode value: compressed, binary or text, as MetaStoreImpl reads it."""
    data = bytes(data)
    if len(data) >= 6 and struct.unpack_from(">H", data)[0] == MAGIC_MANAGED_INFO_METADATA:
        size = struct.unpack_from(">I", data, 2)[0]
        if 6 + size <= len(data):
            header = header_class()
            try:
                header.ParseFromString(data[6 : 6 + size])
                from .entry import decompress

                inner = decompress(header.compressionType, data[6 + size :], header.uncompressedSize)
                msg = message_class()
                msg.ParseFromString(inner)
                if msg.IsInitialized():
                    return msg
            except Exception:  # noqa: BLE001 - Pulsar falls back to the plain parse too
                pass
    msg = message_class()
    try:
        msg.ParseFromString(data)
        if msg.IsInitialized():
            return msg
    except Exception:  # noqa: BLE001 - maybe text format
        pass
    from google.protobuf import text_format

    try:
        return text_format.Parse(data.decode("utf-8"), message_class())
    except Exception as exc:  # noqa: BLE001
        raise PulsarFormatError(f"{what} is neither binary, compressed nor text protobuf: {exc}") from None


def parse_managed_ledger_info(data: bytes) -> ml.ManagedLedgerInfo:
    """A ``ManagedLedgerInfo`` znode value."""
    return _parse(data, ml.ManagedLedgerInfo, ml.ManagedLedgerInfoMetadata, "ManagedLedgerInfo")


def parse_cursor_info(data: bytes) -> ml.ManagedCursorInfo:
    """A ``ManagedCursorInfo`` znode value."""
    return _parse(data, ml.ManagedCursorInfo, ml.ManagedCursorInfoMetadata, "ManagedCursorInfo")


def parse_partitioned_topic_metadata(data: bytes) -> int:
    """The partition count of a partitioned-topic metadata value (``{"partitions": 3, ...}``)."""
    import json

    try:
        count = json.loads(data)["partitions"]
    except (ValueError, TypeError, KeyError) as exc:
        raise PulsarFormatError(f"not partitioned-topic metadata ({type(exc).__name__}: {exc})") from None
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise PulsarFormatError(f"partitions is {count!r}, not a count")
    return count


def parse_position_info(data: bytes) -> ml.PositionInfo:
    """A ``PositionInfo`` (an entry of a cursor ledger)."""
    msg = ml.PositionInfo()
    try:
        msg.ParseFromString(bytes(data))
    except Exception as exc:  # noqa: BLE001
        raise PulsarFormatError(f"PositionInfo does not parse: {exc}") from None
    if not msg.IsInitialized():
        raise PulsarFormatError("PositionInfo lacks its ledger or entry id")
    return msg


# ---------------------------------------------------------------- cursors

Position = tuple[int, int]


class CursorState:
    """What a cursor has acknowledged: everything up to ``mark_delete`` and
    the ``(lower, upper]`` ranges; inside a partly acknowledged batch, its
    ``deleteSet`` (a Java ``BitSet`` as 64-bit words) has the bits of the
    messages *not yet* acknowledged set."""

    def __init__(
        self,
        mark_delete: Position,
        ranges: list[tuple[Position, Position]],
        batch_deletes: dict[Position, tuple[int, ...]] | None = None,
    ):
        self.mark_delete = mark_delete
        self.ranges = sorted(ranges)
        self._lows = [r[0] for r in self.ranges]
        #: position -> the words of the batch's still-unacknowledged bit set
        self.batch_deletes = dict(batch_deletes or {})

    @classmethod
    def of(cls, info: Any, position: Any = None) -> CursorState:
        """From a ``ManagedCursorInfo``, or from the newer ``PositionInfo`` of
        its cursor ledger when given."""
        src = position if position is not None else info
        if position is not None:
            mark = (position.ledgerId, position.entryId)
        else:
            mark = (info.markDeleteLedgerId, info.markDeleteEntryId)
        ranges = [
            ((r.lowerEndpoint.ledgerId, r.lowerEndpoint.entryId), (r.upperEndpoint.ledgerId, r.upperEndpoint.entryId))
            for r in src.individualDeletedMessages
        ]
        deletes = {
            (b.position.ledgerId, b.position.entryId): tuple(b.deleteSet) for b in src.batchedEntryDeletionIndexInfo
        }
        return cls(mark, ranges, deletes)

    def acked(self, position: Position) -> bool:
        """Whether the whole entry at ``position`` is acknowledged."""
        if position <= self.mark_delete:
            return True
        i = bisect.bisect_left(self._lows, position) - 1
        return i >= 0 and self._lows[i] < position <= self.ranges[i][1]

    def message_acked(self, position: Position, batch_index: int) -> bool:
        """Whether one message (``batch_index`` -1 outside a batch) is acknowledged."""
        if self.acked(position):
            return True
        words = self.batch_deletes.get(position)
        if words is None or batch_index < 0:
            return False
        word = batch_index // 64
        return word >= len(words) or not (words[word] >> (batch_index % 64)) & 1

    def first_unacked(self, ledger_id: int) -> int:
        """The first entry of ``ledger_id`` after the mark-delete position (0 past it)."""
        md_ledger, md_entry = self.mark_delete
        if ledger_id < md_ledger:
            return 1 << 62  # the whole ledger is acknowledged
        return md_entry + 1 if ledger_id == md_ledger else 0

    def unacked_entries(self, ledger_id: int, entries: int) -> int:
        """How many of the entries ``0..entries-1`` of ``ledger_id`` are not
        (wholly) acknowledged: interval arithmetic, no walk over the entries."""
        start = self.first_unacked(ledger_id)
        if start >= entries:
            return 0
        count = entries - start
        for (lo_l, lo_e), (hi_l, hi_e) in self.ranges:
            if hi_l < ledger_id or lo_l > ledger_id:
                continue
            first = lo_e + 1 if lo_l == ledger_id else 0
            last = hi_e if hi_l == ledger_id else entries - 1
            first, last = max(first, start), min(last, entries - 1)
            if last >= first:
                count -= last - first + 1
        return count

    def to_json(self) -> dict[str, Any]:
        return {
            "mark_delete": f"{self.mark_delete[0]}:{self.mark_delete[1]}",
            "individually_deleted": [f"({lo[0]}:{lo[1]}..{hi[0]}:{hi[1]}]" for lo, hi in self.ranges],
        }


def codec_name(codec: int) -> str:
    return _CODECS.get(codec, str(codec))
