"""``bkctl pulsar``: Pulsar topics as the bookies and ZooKeeper hold them, read-only.

Everything is read from Pulsar's managed-ledger znodes (through the store's
Pulsar manager) and BookKeeper's ledger metadata; the bookies are asked only
for what ZooKeeper does not say: the last add confirmed of a topic's open
ledger and the newest position in a cursor ledger.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass
from typing import Any

from bkctl.wire.errors import NotFound
from bkctl.wire.pulsar.managed_ledger import (
    APPLICATION,
    APPLICATION_KEY,
    COMPACTED_TOPIC_KEY,
    COMPONENT,
    COMPONENT_COMPACTED,
    COMPONENT_KEY,
    COMPONENT_SCHEMA,
    CURSOR_KEY,
    MANAGED_LEDGER_KEY,
    SCHEMA_ID_KEY,
    CursorState,
    TopicName,
    parse_position_info,
)
from bkctl.wire.pulsar.topics import ManagedLedger, TopicMetadataReader

__all__ = [
    "BACKLOG_READ_LIMIT",
    "YOUNG_LEDGER_SECONDS",
    "Backlog",
    "CursorFallback",
    "LedgerState",
    "OrphanSweep",
    "Owners",
    "PositionSource",
    "cursor_state",
    "fallback_warning",
    "ledger_owner",
    "ledger_states",
    "list_topics",
    "pulsar_component",
    "reader",
    "resolve_topics",
    "show_topic",
]

#: ``bk()``: a BlockingBookKeeper, made on first use (None: never ask the bookies)
BookKeeperFactory = Callable[[], Any]


def reader(store, base: str | None = None) -> TopicMetadataReader:
    """A :class:`TopicMetadataReader` of the store's cluster; ``base``
    defaults to ``/managed-ledgers`` beside the store's ledger root."""
    return TopicMetadataReader.of(store, base)


def resolve_topics(topics: TopicMetadataReader, name: str) -> list[ManagedLedger]:
    """The managed ledgers of ``name``: the topic itself, or every partition
    of a partitioned topic that has one (a partition no broker has loaded
    yet has none, and no data); :class:`NoSuchTopic` (with suggestions) when
    there is neither a managed ledger nor partitioned-topic metadata."""
    from bkctl.wire.pulsar.errors import NoSuchTopic

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

    def __init__(self, ledger_id: int, info: Any, metadata: Any | None, tail: Any = None):
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
        from bkctl.wire.text import utc_iso

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


def bookies_of(md: Any) -> list[str]:
    """Every bookie of a ledger's ensembles, in order of first appearance."""
    return list(dict.fromkeys(str(b) for _first, ensemble in md.ensembles for b in ensemble))


#: how many of a managed ledger's ledgers are read at a time (:func:`metadata_in_batches`)
READ_BATCH = 1000


def metadata_in_batches(store, ledger_ids: list[int]) -> Iterator[Any]:
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


def ledger_states(store, ml: ManagedLedger, bk: BookKeeperFactory | None = None) -> list[LedgerState]:
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


@dataclass(frozen=True)
class PositionSource:
    """Where a cursor's position was read: ``kind`` is ``cursor-ledger`` (its
    ledger's last confirmed entry), ``beyond-lac`` (an entry of its open
    ledger past the LAC, see :mod:`bkctl.wire.client.unconfirmed_tail`) or
    ``znode``; ``fallback`` says why the znode was read although the cursor
    keeps a ledger (its position is then older than the broker's)."""

    kind: str
    ledger: int | None = None
    entry: int | None = None
    lac: int | None = None
    fallback: str | None = None

    def __str__(self) -> str:
        if self.kind == "znode":
            return "znode" + (f" ({self.fallback})" if self.fallback else "")
        where = f"cursor ledger {self.ledger} entry {self.entry}"
        return where + (f" (beyond the LAC {self.lac})" if self.kind == "beyond-lac" else "")

    def to_json(self) -> dict[str, Any]:
        return {"position_from": str(self), "position_source": self.kind, "fallback": self.fallback}


class CursorFallback(Exception):
    """A cursor's position fell back to its znode (``--strict``)."""


def cursor_state(info: Any, bk: BookKeeperFactory | None = None) -> tuple[CursorState, PositionSource]:
    """A cursor's acknowledgements as the broker would recover them, and
    where they came from: the newest entry of its cursor ledger -- past the
    LAC of an open one when an ack quorum holds it, read without fencing --
    else the znode (a :class:`PositionSource` with ``fallback`` set when the
    cursor has a ledger that could not give it)."""
    from bkctl.wire.errors import BKError
    from bkctl.wire.pulsar.errors import PulsarFormatError

    ledger_id = info.cursorsLedgerId
    if ledger_id == -1:
        return CursorState.of(info), PositionSource("znode")

    def fallback(why: str):
        return CursorState.of(info), PositionSource("znode", ledger_id, fallback=why)

    if bk is None:
        return fallback(f"cursor ledger {ledger_id} not read")
    try:
        handle = bk().open(ledger_id)
        tail = handle.read_tail()
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
        return fallback(f"cursor ledger {ledger_id} entry {tail.last}: {exc}")
    except (BKError, OSError, TimeoutError) as exc:
        return fallback(f"cursor ledger {ledger_id} could not be read: {exc}")
    kind = "beyond-lac" if tail.last > tail.lac else "cursor-ledger"
    return CursorState.of(info, position), PositionSource(
        kind, ledger_id, tail.last, None if handle.is_closed else tail.lac
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
    known = [(ls.size, ls.entries) for ls in ledgers if ls.size and ls.entries]
    mean = sum(s for s, _ in known) / sum(e for _, e in known) if known else 0.0
    nbytes = 0.0
    for ls in ledgers:
        if ls.missing:
            continue
        n = state.unacked_entries(ls.ledger_id, ls.entries)
        nbytes += n * (ls.size / ls.entries if ls.size and ls.entries else mean)
    return int(round(nbytes))


def _read_backlog(state: CursorState, ledgers: list[LedgerState], bk: BookKeeperFactory) -> tuple[int, int]:
    """Messages and bytes of the unacknowledged entries, read: a batch's
    messages less those its cursor acknowledged one by one, a chunked message
    once (at its last chunk), a marker none."""
    from bkctl.wire.pulsar.entry import decode_entry

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


def _cursor_doc(name: str, info: Any, ledgers: list[LedgerState], bk) -> dict[str, Any]:
    from bkctl.wire.text import utc_iso

    state, source = cursor_state(info, bk)
    return {
        "name": name,
        **state.to_json(),
        **source.to_json(),
        "cursor_ledger": info.cursorsLedgerId,
        **Backlog(state, ledgers, bk).to_json(),
        "last_active": utc_iso(info.lastActive) if info.lastActive else None,
        "properties": {p.name: p.value for p in info.cursorProperties},
    }


# ---------------------------------------------------------------- commands


def list_topics(
    store, tenant: str | None = None, namespace: str | None = None, base: str | None = None
) -> list[dict[str, Any]]:
    """One row per topic (each partition its own): ledgers, entries and bytes
    the managed ledger records, cursors, terminated."""
    topics = reader(store, base)
    rows = []
    for ml in topics.read_all(topics.topics(tenant, namespace)):  # one deleted meanwhile is left out
        topic = ml.topic
        infos = list(ml.info.ledgerInfo)
        # the managed ledger records a ledger's entries and size when it closes it: the
        # ledger its broker writes has neither yet (topic show asks the bookies)
        unrecorded = [li.ledgerId for li in infos if not li.HasField("entries")]
        rows.append(
            {
                "topic": str(topic),
                "managed_ledger": ml.name,
                "partition": topic.partition,
                "ledgers": len(infos),
                "entries": sum(li.entries for li in infos),
                "size": sum(li.size for li in infos),
                "uncounted_ledgers": unrecorded,
                "cursors": sorted(ml.cursors),
                "terminated": ml.terminated is not None,
            }
        )
    return rows


def show_topic(
    store, name: str, base: str | None = None, bk: BookKeeperFactory | None = None, strict: bool = False
) -> dict[str, Any]:
    """A topic (every partition of a partitioned one): ledgers with entries,
    sizes, dates and bookies; cursors with their position, where it came from
    and their backlog.  ``warnings`` lists the cursors whose position fell
    back to the znode (:class:`CursorFallback` with ``strict``)."""
    topics = reader(store, base)
    topic = TopicName.parse(name)
    parts = []
    warnings = []
    for ml in resolve_topics(topics, name):
        ledgers = ledger_states(store, ml, bk)
        cursors = [_cursor_doc(c, info, ledgers, bk) for c, info in sorted(ml.cursors.items())]
        for c in cursors:
            if c["fallback"]:
                warnings.append(fallback_warning(str(ml.topic), c["name"], c["fallback"]))
        if strict and warnings:
            raise CursorFallback(warnings[0])
        parts.append(
            {
                "topic": str(ml.topic),
                "managed_ledger": ml.name,
                "path": ml.path,
                "partition": ml.topic.partition,
                "terminated_at": None if ml.terminated is None else f"{ml.terminated[0]}:{ml.terminated[1]}",
                "properties": {p.key: p.value for p in ml.info.properties},
                "ledgers": [ls.to_json() for ls in ledgers],
                "entries": sum(ls.entries for ls in ledgers),
                "size": sum(ls.size or 0 for ls in ledgers),
                "beyond_lac": sum(ls.beyond_lac for ls in ledgers),
                "cursors": cursors,
            }
        )
    partitioned = not parts or parts[0]["topic"] != str(topic)
    declared = topics.declared_partitions(topic) if partitioned else None
    have = {part["partition"] for part in parts}
    for n in range(declared or 0):  # partitions no broker has loaded yet: no managed ledger, no data
        if n not in have:
            parts.append(
                {
                    "topic": f"{topic}-partition-{n}",
                    "managed_ledger": None,
                    "path": None,
                    "partition": n,
                    "terminated_at": None,
                    "properties": {},
                    "ledgers": [],
                    "entries": 0,
                    "size": 0,
                    "beyond_lac": 0,
                    "cursors": [],
                }
            )
    parts.sort(key=lambda part: part["partition"])
    return {
        "topic": str(topic),
        "partitioned": partitioned,
        "declared_partitions": declared,
        "partitions": parts,
        "schema": topic_schema_state(store, str(topic), base, bk),
        "warnings": warnings,
    }


def topic_schema_state(store, topic: str, base: str | None, bk: BookKeeperFactory | None) -> dict[str, Any] | None:
    """The topic's schema as a broker loading it finds it (None: no schema): its newest
    version, the type, and ``problem`` -- why that version does not read (the topic cannot load)."""
    from bkctl.wire.pulsar.errors import PulsarFormatError, SchemaUnreadable
    from bkctl.wire.pulsar.schema import schema_id

    from .pulsar_schema import registry

    reg = registry(store, base, bk)
    try:
        locator = reg.locator(schema_id(topic))
    except PulsarFormatError as exc:
        return {"newest": None, "versions": [], "type": None, "problem": str(exc)}
    if locator is None:
        return None
    doc = {"newest": locator.info.version, "versions": [e.version for e in sorted(locator.index)], "type": None}
    try:
        doc["type"] = reg.version(schema_id(topic), None, locator)[1].type if bk is not None else None
        doc["problem"] = None
    except SchemaUnreadable as exc:
        doc["problem"] = f"{exc}: the topic cannot load (`bkctl pulsar schema check`)"
    return doc


def fallback_warning(topic: str, cursor: str, why: str) -> str:
    """The warning for a cursor whose position was read from its znode although it keeps a ledger."""
    return (
        f"{topic} cursor {cursor}: position from its znode ({why}), which is older than the position its broker holds"
    )


def pulsar_component(custom: dict[str, str]) -> str | None:
    """What Pulsar made a ledger for, by its custom metadata: ``managed-ledger``
    (a topic's data ledger or a cursor's ledger: what managed ledgers list),
    another component (``schema``, ``compacted-ledger``,
    ``delayed-index-bucket``, ...: listed elsewhere, by keys this tool does not
    read), or None (not Pulsar's)."""
    if custom.get(APPLICATION_KEY) != APPLICATION and MANAGED_LEDGER_KEY not in custom:
        return None
    return custom.get(COMPONENT_KEY) or COMPONENT


#: A broker creates a ledger before its managed ledger lists it: a Pulsar
#: ledger younger than this that nothing lists may be about to be listed
#: (``pulsar orphans --older-than``'s default, ``ledger-owner``'s caution).
YOUNG_LEDGER_SECONDS = 3600.0


def ledger_owner(store, ledger_id: int, base: str | None = None, now_ms: int | None = None) -> dict[str, Any]:
    """Which managed ledger (as a data ledger) or cursor (as its cursor
    ledger) owns ``ledger_id``; ``orphan`` for a ledger with Pulsar's custom
    metadata that nothing lists, ``not-pulsar`` for one without it.

    A ledger of another Pulsar component -- the schema registry's
    (``schema``), a topic compaction's output (``compacted-ledger``), a
    delayed-delivery index bucket (``delayed-index-bucket``), any other --
    is reported as its component, never as an orphan: Pulsar lists those
    elsewhere (the ``__compaction`` cursor's and other cursors' properties),
    which this does not read -- ``listed`` is False then, meaning "not
    checked" -- except a schema ledger's: its ``topic`` is the one its
    schema id names, and ``listed`` and ``schema_version`` say whether and
    as which version that schema's locator (``/schemas``) names it.  An orphan younger than
    :data:`YOUNG_LEDGER_SECONDS` carries a ``caution``: its broker may be
    about to list it."""
    from bkctl.wire.metadata.errors import NoSuchLedger

    try:
        md, _version = store.ledgers.read(ledger_id)
    except NoSuchLedger:
        raise NotFound(f"no such ledger: {ledger_id}") from None
    return Owners(store, base).owner_of(ledger_id, md, now_ms)


class Owners:
    """Answers "who owns this ledger" for one ledger or many: the managed
    ledgers a ledger's custom metadata names are read once each, and the
    whole topic list (for ledgers that name none, as older brokers made
    them) at most once."""

    def __init__(self, store, base: str | None = None, young_seconds: float = YOUNG_LEDGER_SECONDS):
        self.topics = reader(store, base)
        self.young_seconds = young_seconds  # an orphan younger than this carries a caution
        self._named: dict[str, list[ManagedLedger]] = {}
        self._every: list[ManagedLedger] | None = None

    def candidates(self, custom: dict[str, str]) -> list[ManagedLedger]:
        named = custom.get(MANAGED_LEDGER_KEY)
        if named:
            if named not in self._named:
                self._named[named] = list(_candidates(self.topics, custom))
            return self._named[named]
        if self._every is None:
            self._every = list(_candidates(self.topics, {}))
        return self._every

    def owner_of(self, ledger_id: int, md: Any, now_ms: int | None = None) -> dict[str, Any]:
        """:func:`ledger_owner`'s document for a ledger whose metadata ``md`` was read."""
        import time

        from bkctl.wire.text import custom_metadata_text as decode_custom_metadata
        from bkctl.wire.text import utc_iso as format_ctime

        custom = decode_custom_metadata(md.custom_metadata)
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        age = None if md.ctime is None else max(0.0, (now_ms - md.ctime) / 1000)
        doc: dict[str, Any] = {
            "ledger_id": ledger_id,
            "owner": None,
            "topic": None,
            "cursor": None,
            "managed_ledger": custom.get(MANAGED_LEDGER_KEY),
            "custom_metadata": custom,
            "listed": True,
            "created": format_ctime(md.ctime),
            "age_seconds": age,
            "caution": None,
            "schema_version": None,
        }
        component = pulsar_component(custom)
        if component not in (None, COMPONENT):
            doc.update(owner=component, listed=False)
            if component == COMPONENT_COMPACTED and custom.get(COMPACTED_TOPIC_KEY):
                doc["topic"] = custom[COMPACTED_TOPIC_KEY]
            elif component == COMPONENT_SCHEMA and custom.get(SCHEMA_ID_KEY):
                from .pulsar_schema import schema_ledger_owner

                doc.update(schema_ledger_owner(self.topics, ledger_id, custom[SCHEMA_ID_KEY]))
                if not doc["listed"] and (age is None or age < self.young_seconds):
                    doc["caution"] = (
                        f"created {'at an unknown time' if age is None else f'{age:.0f} s ago'}: a broker writes "
                        "a schema ledger before its locator names it, so it may be named soon"
                    )
            return doc
        for ml in self.candidates(custom):
            topic = None if ml.topic is None else str(ml.topic)
            if ledger_id in ml.ledger_ids:
                doc.update(owner="topic", topic=topic, managed_ledger=ml.name)
                return doc
            for cursor, info in ml.cursors.items():
                if info.cursorsLedgerId == ledger_id:
                    doc.update(owner="cursor", topic=topic, cursor=cursor, managed_ledger=ml.name)
                    return doc
        doc["owner"] = "orphan" if component else "not-pulsar"
        doc["listed"] = False
        if component and CURSOR_KEY in custom:
            doc["cursor"] = custom[CURSOR_KEY]
        if component and (age is None or age < self.young_seconds):
            young = self.young_seconds
            doc["caution"] = (
                f"created {'at an unknown time' if age is None else f'{age:.0f} s ago'}: a broker "
                "creates a ledger before its managed ledger lists it, so it may be listed soon "
                f"(`pulsar orphans` leaves out ledgers younger than "
                f"{f'{young / 3600:g} h' if young >= 3600 else f'{young:g} s'})"
            )
        return doc


def _candidates(topics: TopicMetadataReader, custom: dict[str, str]) -> Iterator[ManagedLedger]:
    """The managed ledger a ledger's custom metadata names (v2 or v1 name),
    else every one :meth:`TopicMetadataReader.topics` lists."""
    named = custom.get(MANAGED_LEDGER_KEY)
    if named:
        ml = topics.read_named(named)
        if ml is not None:
            yield ml
        return
    yield from topics.read_all(topics.topics())  # a topic deleted meanwhile is left out


class OrphanSweep:
    """Every ledger Pulsar made for a managed ledger (its custom metadata says
    so) that no managed ledger lists as a data ledger and no cursor as its
    ledger: what :func:`ledger_owner` calls an orphan, over the whole cluster.

    Iterating yields one document per orphan, in ledger id order.  A broker
    creates a ledger before its managed ledger lists it, and trims the list
    before it deletes the ledger: ledgers younger than ``older_than`` seconds
    are left out (counted in ``young``), and each candidate is checked again
    (its managed ledger re-read, the ledger still there) before it is
    reported.  Ledgers of Pulsar's other components are counted in
    ``unchecked``, ledgers whose metadata does not decode in ``unreadable``;
    neither is reported.  Ledger metadata is read in one walk
    (``store.ledgers.walk``), which tells ``progress``."""

    def __init__(
        self,
        store,
        base: str | None = None,
        older_than: float = YOUNG_LEDGER_SECONDS,
        now_ms: int | None = None,
        progress=None,
        recheck_batch: int = 1000,
        listed: Container[int] | None = None,
    ):
        self.store = store
        #: the ledgers the managed ledgers list, when the caller read them already (None: read here)
        self.listed = listed
        #: how many unlisted ledgers are read again at once: each after the walk found it
        #: unlisted and before it is reported (1: each just before its own report)
        self.recheck_batch = max(1, recheck_batch)
        self.progress = progress  # the walk's (WalkProgress), or None
        self.topics = reader(store, base)
        self.older_than = older_than
        self.now_ms = now_ms
        self.checked = self.pulsar = self.young = self.unchecked = self.unreadable = 0
        self.orphans = self.orphan_bytes = 0

    def __iter__(self):
        import time

        from bkctl.wire.text import custom_metadata_text as decode_custom_metadata

        listed = self.listed
        if listed is None:
            found: set[int] = set()
            for ml in _candidates(self.topics, {}):
                found |= ml.listed
            listed = found
        now_ms = self.now_ms if self.now_ms is not None else int(time.time() * 1000)
        cutoff = now_ms - self.older_than * 1000
        candidates: list[tuple[int, Any, dict[str, str]]] = []
        for ledger_id, md, _version in self.store.ledgers.walk(progress=self.progress):
            self.checked += 1
            if md is None:
                continue  # deleted meanwhile
            if isinstance(md, Exception):  # metadata that does not decode: not judged, counted
                self.unreadable += 1
                continue
            custom = decode_custom_metadata(md.custom_metadata)
            component = pulsar_component(custom)
            if component is None:
                continue
            self.pulsar += 1
            if component != COMPONENT:
                self.unchecked += 1
                continue
            if ledger_id in listed:
                continue
            candidates.append((ledger_id, md, custom))
            if len(candidates) >= self.recheck_batch:
                yield from self._judged(candidates, cutoff)
                candidates = []
        yield from self._judged(candidates, cutoff)

    def _judged(self, candidates: list[tuple[int, Any, dict[str, str]]], cutoff: float) -> Iterator[dict[str, Any]]:
        """The orphans among *candidates* (unlisted when the walk began), each read again
        now -- gone, or listed after all, it is none -- a batch at a time: their ledgers and
        the managed ledgers they name each read pipelined, not four round trips a ledger."""
        if not candidates:
            return
        there = {r.ledger_id for r in self.store.ledgers.read_many([c[0] for c in candidates]) if r.metadata}
        named = sorted({custom[MANAGED_LEDGER_KEY] for _, _, custom in candidates if custom.get(MANAGED_LEDGER_KEY)})
        listed_now: set[int] = set()
        for ml in self.topics.read_all_named(named):
            listed_now |= ml.listed
        for ledger_id, md, custom in candidates:
            if ledger_id not in there or ledger_id in listed_now:
                continue
            if not custom.get(MANAGED_LEDGER_KEY) and any(
                ledger_id in ml.listed for ml in _candidates(self.topics, custom)
            ):
                continue  # names no managed ledger: every one read again
            if md.ctime is None or md.ctime > cutoff:
                self.young += 1
                continue
            self.orphans += 1
            self.orphan_bytes += md.length if md.is_closed else 0
            yield self._doc(ledger_id, md, custom)

    @staticmethod
    def _doc(ledger_id: int, md: Any, custom: dict[str, str]) -> dict[str, Any]:
        from bkctl.wire.text import utc_iso as format_ctime

        return {
            "ledger_id": ledger_id,
            "managed_ledger": custom.get(MANAGED_LEDGER_KEY),
            "cursor": custom.get(CURSOR_KEY),
            "state": md.state.name,
            "entries": md.last_entry_id + 1 if md.is_closed else None,
            "size": md.length if md.is_closed else None,
            "created": format_ctime(md.ctime),
            "bookies": bookies_of(md),
        }
