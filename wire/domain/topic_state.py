"""What a Pulsar topic holds, as ZooKeeper and the bookies tell it: its managed ledgers'
ledgers (:class:`LedgerState`), where each cursor's position comes from
(:class:`PositionSource`, :func:`cursor_state`) and what it has not acknowledged
(:class:`Backlog`).

Everything is read from Pulsar's managed-ledger znodes (through the store's Pulsar manager)
and BookKeeper's ledger metadata; the bookies are asked only for what ZooKeeper does not say:
the last add confirmed of a topic's open ledger and the newest position in a cursor ledger.
Shared by ``bkctl pulsar``, ``bkctl export --topic``, backup and the offload checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from ..errors import NotFound
from ..pulsar.managed_ledger import CursorState, TopicName, parse_position_info
from ..pulsar.topics import ManagedLedger, TopicMetadataReader

if TYPE_CHECKING:
    from ..client.blocking import BlockingBookKeeper
    from ..client.unconfirmed_tail import Tail
    from ..metadata.ledger import LedgerMetadata
    from ..metadata.store import MetadataStore
    from ..proto.pulsar_ml_pb2 import ManagedCursorInfo, ManagedLedgerInfo
    from ..pulsar.registry import SchemaRegistry

__all__ = [
    "BACKLOG_READ_LIMIT",
    "READ_BATCH",
    "Backlog",
    "BookKeeperFactory",
    "CursorFallback",
    "LedgerState",
    "PositionKind",
    "PositionSource",
    "bookies_of",
    "cursor_state",
    "fallback_warning",
    "ledger_states",
    "metadata_in_batches",
    "read_schema_entry",
    "resolve_topics",
    "schema_registry",
    "topic_reader",
]

#: ``bk()``: a BlockingBookKeeper, made on first use (None where it is taken: never ask the bookies)
BookKeeperFactory = Callable[[], "BlockingBookKeeper"]


def topic_reader(store: MetadataStore, base: str | None = None) -> TopicMetadataReader:
    """A :class:`TopicMetadataReader` of the store's cluster; ``base``
    defaults to ``/managed-ledgers`` beside the store's ledger root."""
    return TopicMetadataReader.of(store, base)


def resolve_topics(topics: TopicMetadataReader, name: str) -> list[ManagedLedger]:
    """The managed ledgers of ``name``: the topic itself, or every partition
    of a partitioned topic that has one (a partition no broker has loaded
    yet has none, and no data); :class:`NoSuchTopic` (with suggestions) when
    there is neither a managed ledger nor partitioned-topic metadata."""
    from ..pulsar.errors import NoSuchTopic

    topic = TopicName.parse(name)  # ValueError: not a topic name
    try:
        return [topics.read(topic)]
    except NoSuchTopic:
        parts = topics.partitions(topic)
        if not parts and topics.declared_partitions(topic) is None:
            raise
    return [topics.read(p) for p in parts]


# ---------------------------------------------------------------- ledgers


class LedgerState:
    """One ledger of a managed ledger, as ZooKeeper and the bookies tell it;
    ``tail`` is the open ledger's :class:`~bkctl.wire.client.unconfirmed_tail.Tail`
    when the bookies were asked."""

    def __init__(
        self,
        ledger_id: int,
        info: ManagedLedgerInfo.LedgerInfo,
        metadata: LedgerMetadata | None,
        tail: Tail | None = None,
    ):
        self.ledger_id = ledger_id
        self.info = info
        self.metadata = metadata
        self.tail = tail

    @property
    def missing(self) -> bool:
        return self.metadata is None

    @property
    def is_open(self) -> bool:
        return self.metadata is not None and not self.metadata.is_closed

    @property
    def lac(self) -> int | None:
        return None if self.tail is None else self.tail.lac

    @property
    def last(self) -> int:
        """The last entry there is to read (-1: none): a closed ledger's last
        entry, the open one's newest entry an ack quorum holds (past its LAC,
        see :mod:`bkctl.wire.client.unconfirmed_tail`)."""
        if self.metadata is not None and self.metadata.is_closed:
            return self.metadata.last_entry_id
        if self.tail is not None:
            return self.tail.last
        return self.info.entries - 1 if self.info.HasField("entries") else -1

    @property
    def entries(self) -> int:
        """Entries there are: through :attr:`last` (0 when unknown)."""
        return self.last + 1

    @property
    def beyond_lac(self) -> int:
        """Entries of the open ledger past its LAC that an ack quorum holds."""
        return 0 if self.tail is None or not self.is_open else self.tail.beyond_lac

    @property
    def size(self) -> int | None:
        """Payload bytes through :attr:`last`: the managed ledger's or the
        closed ledger's length; the open ledger's from its last entry (a
        BookKeeper entry carries the ledger's length up to it)."""
        if self.metadata is not None and self.metadata.is_closed:
            return self.metadata.length
        if self.tail is not None and self.tail.length is not None:
            return self.tail.length
        if self.info.HasField("size"):
            return self.info.size
        return None

    def to_json(self) -> dict[str, Any]:
        from ..text import utc_iso

        md = self.metadata
        bookies = bookies_of(md) if md is not None else []
        offload = self.info.offloadContext if self.info.HasField("offloadContext") else None
        return {
            "ledger_id": self.ledger_id,
            "state": "MISSING" if md is None else md.state.name,
            "entries": self.entries,
            "size": self.size,
            "lac": self.lac if self.is_open else None,
            "beyond_lac": self.beyond_lac,
            "created": utc_iso(md.ctime) if md is not None and md.ctime else None,
            "closed": utc_iso(self.info.timestamp) if self.info.timestamp else None,
            "bookies": bookies,
            "offloaded": bool(offload and offload.complete),
        }


def bookies_of(md: LedgerMetadata) -> list[str]:
    """Every bookie of a ledger's ensembles, in order of first appearance."""
    return list(dict.fromkeys(str(b) for _first, ensemble in md.ensembles for b in ensemble))


#: how many of a managed ledger's ledgers are read at a time (:func:`metadata_in_batches`)
READ_BATCH = 1000


def metadata_in_batches(store: MetadataStore, ledger_ids: list[int]) -> Iterator[LedgerMetadata | None]:
    """The metadata of each of ``ledger_ids`` in order (None: deleted), read a batch at a
    time (``ledgers.read_many``: a round trip per batch, not per ledger; a managed ledger
    lists up to tens of thousands, apache/pulsar#11490), each batch whole so that no walk
    stays open while the caller asks the bookies; metadata that does not decode raises as
    ``ledgers.read`` does."""
    for lo in range(0, len(ledger_ids), READ_BATCH):
        for got in list(store.ledgers.read_many(ledger_ids[lo : lo + READ_BATCH])):
            if isinstance(got.metadata, Exception):
                raise got.metadata
            yield got.metadata


def ledger_states(store: MetadataStore, ml: ManagedLedger, bk: BookKeeperFactory | None = None) -> list[LedgerState]:
    """Every ledger the managed ledger lists; the open one's tail from the
    bookies (read without fencing) when ``bk`` is given."""
    out = []
    infos = list(ml.info.ledgerInfo)
    for li, md in zip(infos, metadata_in_batches(store, [li.ledgerId for li in infos])):
        tail = None
        if md is not None and not md.is_closed and bk is not None:
            tail = bk().open(li.ledgerId).read_tail()
        out.append(LedgerState(li.ledgerId, li, md, tail))
    return out


# ---------------------------------------------------------------- cursors


class PositionKind(str, Enum):
    """Where a cursor's position was read."""

    #: its ledger's last confirmed entry
    CURSOR_LEDGER = "cursor-ledger"
    #: an entry of its open ledger past the LAC (see :mod:`bkctl.wire.client.unconfirmed_tail`)
    BEYOND_LAC = "beyond-lac"
    #: the cursor's znode
    ZNODE = "znode"


@dataclass(frozen=True)
class PositionSource:
    """Where a cursor's position was read (:class:`PositionKind`); ``fallback`` says why the
    znode was read although the cursor keeps a ledger (its position is then older than the
    broker's)."""

    kind: PositionKind
    ledger: int | None = None
    entry: int | None = None
    lac: int | None = None
    fallback: str | None = None

    def __str__(self) -> str:
        if self.kind is PositionKind.ZNODE:
            return "znode" + (f" ({self.fallback})" if self.fallback else "")
        where = f"cursor ledger {self.ledger} entry {self.entry}"
        return where + (f" (beyond the LAC {self.lac})" if self.kind is PositionKind.BEYOND_LAC else "")

    def to_json(self) -> dict[str, Any]:
        return {"position_from": str(self), "position_source": self.kind.value, "fallback": self.fallback}


class CursorFallback(Exception):
    """A cursor's position fell back to its znode (``--strict``)."""


def cursor_state(info: ManagedCursorInfo, bk: BookKeeperFactory | None = None) -> tuple[CursorState, PositionSource]:
    """A cursor's acknowledgements as the broker would recover them, and
    where they came from: the newest entry of its cursor ledger -- past the
    LAC of an open one when an ack quorum holds it, read without fencing --
    else the znode (a :class:`PositionSource` with ``fallback`` set when the
    cursor has a ledger that could not give it)."""
    from ..errors import BKError
    from ..pulsar.errors import PulsarFormatError

    ledger_id = info.cursorsLedgerId
    if ledger_id == -1:
        return CursorState.of(info), PositionSource(PositionKind.ZNODE)

    def fallback(why: str) -> tuple[CursorState, PositionSource]:
        return CursorState.of(info), PositionSource(PositionKind.ZNODE, ledger_id, fallback=why)

    if bk is None:
        return fallback(f"cursor ledger {ledger_id} not read")
    last = -1
    try:
        handle = bk().open(ledger_id)
        tail = handle.read_tail()
        last = tail.last
        if tail.last < 0:
            return fallback(f"cursor ledger {ledger_id} is empty")
        if tail.newest is not None:
            data = tail.newest
        else:
            data = handle.read_entry(tail.last)
        position = parse_position_info(data)
    except NotFound:
        return fallback(f"cursor ledger {ledger_id} is gone")
    except PulsarFormatError as exc:
        return fallback(f"cursor ledger {ledger_id} entry {last}: {exc}")
    except (BKError, OSError, TimeoutError) as exc:
        return fallback(f"cursor ledger {ledger_id} could not be read: {exc}")
    kind = PositionKind.BEYOND_LAC if tail.last > tail.lac else PositionKind.CURSOR_LEDGER
    return CursorState.of(info, position), PositionSource(
        kind, ledger_id, tail.last, None if handle.is_closed else tail.lac
    )


def fallback_warning(topic: str, cursor: str, why: str) -> str:
    """The warning for a cursor whose position was read from its znode although it keeps a ledger."""
    return (
        f"{topic} cursor {cursor}: position from its znode ({why}), which is older than the position its broker holds"
    )


#: The backlog's messages are counted (and its bytes summed) by reading the
#: unacknowledged entries when there are at most this many; beyond, bytes are
#: at each ledger's mean entry size and messages are not counted.
BACKLOG_READ_LIMIT = 1000


class Backlog:
    """What a cursor has not acknowledged: ``entries`` (interval arithmetic
    over every ledger, the open one through its newest acknowledgeable
    entry), ``bytes`` and ``messages`` (read entry by entry when at most
    :data:`BACKLOG_READ_LIMIT`; else bytes at each ledger's mean entry size,
    messages None), ``counted`` True when read."""

    def __init__(
        self,
        state: CursorState,
        ledgers: list[LedgerState],
        bk: BookKeeperFactory | None = None,
        limit: int = BACKLOG_READ_LIMIT,
    ):
        self.entries = sum(state.unacked_entries(ls.ledger_id, ls.entries) for ls in ledgers if not ls.missing)
        self.messages: int | None = None
        self.counted = False
        if bk is not None and self.entries <= limit:
            try:
                self.messages, self.bytes = _read_backlog(state, ledgers, bk)
                self.counted = True
                return
            except Exception:  # noqa: BLE001 - an entry that does not read or decode: estimated then
                self.messages = None
        self.bytes = _estimated_bytes(state, ledgers)

    def to_json(self) -> dict[str, Any]:
        return {
            "backlog_entries": self.entries,
            "backlog_messages": self.messages,
            "backlog_bytes": self.bytes,
            "backlog_bytes_exact": self.counted,
        }


def _estimated_bytes(state: CursorState, ledgers: list[LedgerState]) -> int:
    known = [(size, ls.entries) for ls in ledgers if (size := ls.size) and ls.entries]
    mean = sum(s for s, _ in known) / sum(e for _, e in known) if known else 0.0
    nbytes = 0.0
    for ls in ledgers:
        if ls.missing:
            continue
        n = state.unacked_entries(ls.ledger_id, ls.entries)
        size = ls.size
        nbytes += n * (size / ls.entries if size and ls.entries else mean)
    return int(round(nbytes))


def _read_backlog(state: CursorState, ledgers: list[LedgerState], bk: BookKeeperFactory) -> tuple[int, int]:
    """Messages and bytes of the unacknowledged entries, read: a batch's
    messages less those its cursor acknowledged one by one, a chunked message
    once (at its last chunk), a marker none."""
    from ..pulsar.entry import decode_entry

    messages = nbytes = 0
    for ls in ledgers:
        start = state.first_unacked(ls.ledger_id)
        if ls.missing or start > ls.last:
            continue
        wanted = [e for e in range(start, ls.last + 1) if not state.acked((ls.ledger_id, e))]
        if not wanted:
            continue
        handle = bk().open(ls.ledger_id)
        for entry_id, data in handle.read(wanted[0], wanted[-1], allow_unconfirmed=True):
            position = (ls.ledger_id, entry_id)
            if state.acked(position):
                continue
            nbytes += len(data)
            md = decode_entry(data, verify=False).metadata
            if md.HasField("marker_type"):
                continue
            if (
                md.HasField("num_chunks_from_msg")
                and md.num_chunks_from_msg > 1
                and md.chunk_id != md.num_chunks_from_msg - 1
            ):
                continue
            if md.HasField("num_messages_in_batch"):
                messages += sum(not state.message_acked(position, i) for i in range(md.num_messages_in_batch))
            else:
                messages += 1
    return messages, nbytes


# ---------------------------------------------------------------- the schema registry


def schema_registry(
    store: MetadataStore, base: str | None = None, bk: BookKeeperFactory | None = None
) -> SchemaRegistry:
    """The :class:`~bkctl.wire.pulsar.registry.SchemaRegistry` beside the
    managed ledgers (``base``), reading schema ledgers through ``bk()``."""
    from ..pulsar.registry import SchemaRegistry

    return SchemaRegistry.of(store, base, None if bk is None else read_schema_entry(bk))


def read_schema_entry(bk: BookKeeperFactory) -> Callable[[int, int], bytes]:
    """``read_entry(ledger, entry)`` of a schema ledger, opened as a broker
    opens it (password ``""``, its digest from its metadata), without fencing."""

    def read(ledger_id: int, entry_id: int) -> bytes:
        return bk().open(ledger_id, b"").read_entry(entry_id)

    return read
