"""What a consumer of a topic receives, by Pulsar's rules for markers and transactions (pure).

Pulsar 4.0's broker (``AbstractBaseDispatcher``, ``TopicTransactionBuffer``):

* an entry whose ``MessageMetadata`` has ``marker_type`` is a marker, never
  sent to a consumer: replicated-subscription snapshot request, response,
  snapshot and update (10-13), ``TXN_COMMIT`` (21), ``TXN_ABORT`` (22), and
  any other type;
* a message with ``txnid_most_bits``/``txnid_least_bits`` belongs to that
  transaction; a ``TXN_COMMIT`` or ``TXN_ABORT`` marker carrying the same id,
  later in the same topic, ends it.  Messages of an aborted transaction are
  never delivered, those of a committed one at their own positions;
* while a transaction is open, nothing at or after its first message is
  delivered, plain messages included (``maxReadPosition``).

Whether a message is delivered can depend on a marker far behind it (in a
later ledger), so :class:`TransactionScan` is fed a topic's entries in
storage order and reads only their metadata (an entry with neither field is
passed over without parsing: :func:`entry_marks`); its result,
:class:`TopicTransactions`, is what the readers of the topic's ranges need
(:meth:`TopicTransactions.for_range`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from ..proto import pulsar_api_pb2 as pb
from .entry import MAGIC_BROKER_ENTRY_METADATA, MAGIC_CRC32C

__all__ = [
    "MARKER_NAMES",
    "TXN_ABORT",
    "TXN_COMMIT",
    "Position",
    "TopicTransactions",
    "TransactionScan",
    "entry_marks",
    "marker_name",
    "txn_of",
]

Position = tuple[int, int]
Txn = tuple[int, int]

#: ``MarkerType`` of Pulsar's ``PulsarMarkers.proto``.
MARKER_NAMES = {
    10: "REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST",
    11: "REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE",
    12: "REPLICATED_SUBSCRIPTION_SNAPSHOT",
    13: "REPLICATED_SUBSCRIPTION_UPDATE",
    20: "TXN_COMMITTING",
    21: "TXN_COMMIT",
    22: "TXN_ABORT",
}
TXN_COMMIT = 21
TXN_ABORT = 22

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
#: The tags of MessageMetadata's marker_type (20), txnid_least_bits (22) and
#: txnid_most_bits (23), all varints: an entry whose metadata holds none of
#: these byte pairs is neither a marker nor a transaction's.
_TAGS = (b"\xa0\x01", b"\xb0\x01", b"\xb8\x01")


def marker_name(marker_type: int) -> str:
    return MARKER_NAMES.get(marker_type, f"marker type {marker_type}")


def txn_of(md: Any) -> Txn | None:
    """The transaction ``(most, least)`` of a message or marker; None outside one."""
    if md.HasField("txnid_most_bits") and md.HasField("txnid_least_bits"):
        return md.txnid_most_bits, md.txnid_least_bits
    return None


def _metadata_bytes(data: bytes) -> bytes | None:
    """The serialized MessageMetadata of a stored entry (None when it has none
    that fits: the entry's reader reports that)."""
    off = 0
    n = len(data)
    if n >= 6 and _U16.unpack_from(data, 0)[0] == MAGIC_BROKER_ENTRY_METADATA:
        off = 6 + _U32.unpack_from(data, 2)[0]
    if n - off >= 6 and _U16.unpack_from(data, off)[0] == MAGIC_CRC32C:
        off += 6
    if n - off < 4:
        return None
    size = _U32.unpack_from(data, off)[0]
    if size == 0 or off + 4 + size > n:
        return None
    return bytes(data[off + 4 : off + 4 + size])


def entry_marks(data: bytes) -> tuple[int | None, Txn | None]:
    """``(marker_type, transaction)`` of a stored entry, from its metadata
    alone; ``(None, None)`` for a plain message or bytes that do not decode."""
    raw = _metadata_bytes(data)
    if raw is None or not any(tag in raw for tag in _TAGS):
        return None, None
    md = pb.MessageMetadata()
    try:
        md.ParseFromString(raw)
    except Exception:  # noqa: BLE001 - the entry's reader says what is wrong with it
        return None, None
    return (md.marker_type if md.HasField("marker_type") else None), txn_of(md)


@dataclass(frozen=True)
class TopicTransactions:
    """The transactions of one topic (a partition's managed ledger), as its
    entries show them: ``ended`` maps an ended transaction to ``(first
    message, marker, aborted)``; ``open`` a transaction without a marker to
    its first message; ``markers`` counts the marker entries by name."""

    ended: dict[Txn, tuple[Position | None, Position, bool]] = field(default_factory=dict)
    open: dict[Txn, Position] = field(default_factory=dict)
    markers: dict[str, int] = field(default_factory=dict)

    @property
    def cutoff(self) -> Position | None:
        """Pulsar's ``maxReadPosition`` turned around: the first position a
        consumer cannot read yet (the oldest open transaction's first
        message); None when every transaction ended."""
        return min(self.open.values(), default=None)

    @property
    def aborted(self) -> frozenset[Txn]:
        return frozenset(t for t, (_, _, aborted) in self.ended.items() if aborted)

    def for_range(self, ledger_id: int, first: int, last: int) -> TopicTransactions:
        """What a reader of entries ``first..last`` of ``ledger_id`` needs:
        the aborted transactions that may have messages there, the open ones
        (the cutoff), no marker counts."""
        lo, hi = (ledger_id, first), (ledger_id, last)
        ended = {t: e for t, e in self.ended.items() if e[2] and (e[0] is None or e[0] <= hi) and e[1] >= lo}
        return TopicTransactions(ended, dict(self.open))

    @property
    def seen(self) -> frozenset[Txn]:
        """The transactions whose messages these entries hold."""
        return frozenset(self.open) | frozenset(t for t, e in self.ended.items() if e[0] is not None)

    @classmethod
    def merge(cls, parts: list[TopicTransactions]) -> TopicTransactions:
        """One topic's transactions from the scans of its ranges (any order):
        a transaction's first message is the earliest any range saw, its end
        the earliest marker."""
        first: dict[Txn, Position] = {}
        ended: dict[Txn, tuple[Position | None, Position, bool]] = {}
        markers: dict[str, int] = {}
        for part in parts:
            for t, p in part.open.items():
                first[t] = min(first.get(t, p), p)
            for t, (f, marker, aborted) in part.ended.items():
                if f is not None:
                    first[t] = min(first.get(t, f), f)
                if t not in ended or marker < ended[t][1]:
                    ended[t] = (None, marker, aborted)
            for name, n in part.markers.items():
                markers[name] = markers.get(name, 0) + n
        ended = {t: (first.get(t), marker, aborted) for t, (_, marker, aborted) in ended.items()}
        return cls(ended, {t: p for t, p in first.items() if t not in ended}, markers)

    def to_json(self) -> dict[str, Any]:
        cutoff = self.cutoff
        return {
            "committed": sum(1 for e in self.ended.values() if not e[2]),
            "aborted": sum(1 for e in self.ended.values() if e[2]),
            "open": {f"({t[0]},{t[1]})": f"{p[0]}:{p[1]}" for t, p in sorted(self.open.items(), key=lambda i: i[1])},
            "cutoff": None if cutoff is None else f"{cutoff[0]}:{cutoff[1]}",
            "markers": dict(sorted(self.markers.items())),
        }


class TransactionScan:
    """Feed a topic's entries in storage order (:meth:`add`); :meth:`result`
    says which transactions ended how and which are still open."""

    def __init__(self) -> None:
        self._first: dict[Txn, Position] = {}
        self._ended: dict[Txn, tuple[Position | None, Position, bool]] = {}
        self._markers: dict[str, int] = {}

    def add(self, position: Position, data: bytes) -> None:
        marker, txn = entry_marks(data)
        if marker is not None:
            name = marker_name(marker)
            self._markers[name] = self._markers.get(name, 0) + 1
            if txn is not None and marker in (TXN_COMMIT, TXN_ABORT) and txn not in self._ended:
                self._ended[txn] = (self._first.get(txn), position, marker == TXN_ABORT)
        elif txn is not None and txn not in self._ended:
            self._first.setdefault(txn, position)

    def result(self) -> TopicTransactions:
        return TopicTransactions(
            dict(self._ended), {t: p for t, p in self._first.items() if t not in self._ended}, dict(self._markers)
        )
