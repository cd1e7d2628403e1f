"""``bkctl pulsar``: Pulsar topics as the bookies and ZooKeeper hold them, read-only: the
documents its commands print, from the rules of :mod:`bkctl.wire.domain` (what a topic holds,
who owns a ledger).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bkctl.wire.domain.topic_state import (
    Backlog,
    BookKeeperFactory,
    CursorFallback,
    LedgerState,
    PositionKind,
    cursor_state,
    fallback_warning,
    ledger_states,
    resolve_topics,
    schema_registry,
    topic_reader,
)
from bkctl.wire.pulsar.managed_ledger import TopicName

if TYPE_CHECKING:
    from bkctl.wire.domain.ownership import LedgerOwnership
    from bkctl.wire.metadata.store import MetadataStore
    from bkctl.wire.proto.pulsar_ml_pb2 import ManagedCursorInfo

__all__ = [
    "CursorShown",
    "TopicPart",
    "TopicRow",
    "TopicSchemaState",
    "TopicShown",
    "ledger_owner",
    "list_topics",
    "show_topic",
    "topic_schema_state",
]


@dataclass(frozen=True, slots=True)
class TopicRow:
    """One topic of ``topic list`` (a partition its own): what its managed ledger records;
    ``uncounted_ledgers``, the ledgers not closed yet, whose entries it does not record."""

    topic: str
    managed_ledger: str
    partition: int
    ledgers: int
    entries: int
    size: int
    uncounted_ledgers: list[int]
    cursors: list[str]
    terminated: bool


@dataclass(frozen=True, slots=True)
class CursorShown:
    """One cursor of a topic: its acknowledgements, where they were read (``position_source``,
    ``fallback``: why the znode was read, or None) and its backlog (``backlog_messages`` None:
    not counted)."""

    name: str
    mark_delete: str
    individually_deleted: list[str]
    position_from: str
    position_source: PositionKind
    fallback: str | None
    cursor_ledger: int
    backlog_entries: int
    backlog_messages: int | None
    backlog_bytes: int
    backlog_bytes_exact: bool
    last_active: str | None
    properties: dict[str, str]


@dataclass(frozen=True, slots=True)
class TopicPart:
    """One partition of a topic (or the topic itself, ``partition`` -1): its ledgers and cursors;
    a partition no broker has loaded yet has no managed ledger (None) and nothing else."""

    topic: str
    managed_ledger: str | None
    path: str | None
    partition: int
    terminated_at: str | None
    properties: dict[str, str]
    ledgers: list[LedgerState]
    entries: int
    size: int
    beyond_lac: int
    cursors: list[CursorShown]


@dataclass(frozen=True, slots=True)
class TopicSchemaState:
    """A topic's schema as a broker loading it finds it: its newest version, the type (None: not
    read), and ``problem`` -- why that version does not read (the topic cannot load)."""

    newest: int | None
    versions: list[int]
    type: str | None
    problem: str | None


@dataclass(frozen=True, slots=True)
class TopicShown:
    """``topic show``: every partition of a topic, its schema, and the cursors' fallbacks."""

    topic: str
    partitioned: bool
    declared_partitions: int | None
    partitions: list[TopicPart]
    schema: TopicSchemaState | None
    warnings: list[str]


def _cursor_doc(
    name: str, info: ManagedCursorInfo, ledgers: list[LedgerState], bk: BookKeeperFactory | None
) -> CursorShown:
    from bkctl.wire.text import utc_iso

    state, source = cursor_state(info, bk)
    backlog = Backlog(state, ledgers, bk)
    mark = state.to_json()  # the positions as wire writes them
    return CursorShown(
        name=name,
        mark_delete=mark["mark_delete"],
        individually_deleted=mark["individually_deleted"],
        position_from=str(source),
        position_source=source.kind,
        fallback=source.fallback,
        cursor_ledger=info.cursorsLedgerId,
        backlog_entries=backlog.entries,
        backlog_messages=backlog.messages,
        backlog_bytes=backlog.bytes,
        backlog_bytes_exact=backlog.counted,
        last_active=utc_iso(info.lastActive) if info.lastActive else None,
        properties={p.name: p.value for p in info.cursorProperties},
    )


# ---------------------------------------------------------------- commands


def list_topics(
    store: MetadataStore, tenant: str | None = None, namespace: str | None = None, base: str | None = None
) -> list[TopicRow]:
    """One row per topic (each partition its own): ledgers, entries and bytes
    the managed ledger records, cursors, terminated."""
    topics = topic_reader(store, base)
    rows = []
    for ml in topics.read_all(topics.topics(tenant, namespace)):  # one deleted meanwhile is left out
        topic = ml.topic
        assert topic is not None  # read by its topic name
        infos = list(ml.info.ledgerInfo)
        # the managed ledger records a ledger's entries and size when it closes it: the
        # ledger its broker writes has neither yet (topic show asks the bookies)
        unrecorded = [li.ledgerId for li in infos if not li.HasField("entries")]
        rows.append(
            TopicRow(
                topic=str(topic),
                managed_ledger=ml.name,
                partition=topic.partition,
                ledgers=len(infos),
                entries=sum(li.entries for li in infos),
                size=sum(li.size for li in infos),
                uncounted_ledgers=unrecorded,
                cursors=sorted(ml.cursors),
                terminated=ml.terminated is not None,
            )
        )
    return rows


def show_topic(
    store: MetadataStore, name: str, base: str | None = None, bk: BookKeeperFactory | None = None, strict: bool = False
) -> TopicShown:
    """A topic (every partition of a partitioned one): ledgers with entries,
    sizes, dates and bookies; cursors with their position, where it came from
    and their backlog.  ``warnings`` lists the cursors whose position fell
    back to the znode (:class:`CursorFallback` with ``strict``)."""
    topics = topic_reader(store, base)
    topic = TopicName.parse(name)
    parts: list[TopicPart] = []
    warnings = []
    for ml in resolve_topics(topics, name):
        ledgers = ledger_states(store, ml, bk)
        cursors = [_cursor_doc(c, info, ledgers, bk) for c, info in sorted(ml.cursors.items())]
        for c in cursors:
            if c.fallback:
                warnings.append(fallback_warning(str(ml.topic), c.name, c.fallback))
        if strict and warnings:
            raise CursorFallback(warnings[0])
        parts.append(
            TopicPart(
                topic=str(ml.topic),
                managed_ledger=ml.name,
                path=ml.path,
                partition=-1 if ml.topic is None else ml.topic.partition,
                terminated_at=None if ml.terminated is None else f"{ml.terminated[0]}:{ml.terminated[1]}",
                properties={p.key: p.value for p in ml.info.properties},
                ledgers=ledgers,
                entries=sum(ls.entries for ls in ledgers),
                size=sum(ls.size or 0 for ls in ledgers),
                beyond_lac=sum(ls.beyond_lac for ls in ledgers),
                cursors=cursors,
            )
        )
    partitioned = not parts or parts[0].topic != str(topic)
    declared = topics.declared_partitions(topic) if partitioned else None
    have = {part.partition for part in parts}
    for n in range(declared or 0):  # partitions no broker has loaded yet: no managed ledger, no data
        if n not in have:
            parts.append(TopicPart(f"{topic}-partition-{n}", None, None, n, None, {}, [], 0, 0, 0, []))
    parts.sort(key=lambda part: part.partition)
    return TopicShown(
        topic=str(topic),
        partitioned=partitioned,
        declared_partitions=declared,
        partitions=parts,
        schema=topic_schema_state(store, str(topic), base, bk),
        warnings=warnings,
    )


def topic_schema_state(
    store: MetadataStore, topic: str, base: str | None, bk: BookKeeperFactory | None
) -> TopicSchemaState | None:
    """The topic's schema as a broker loading it finds it (None: no schema)."""
    from bkctl.wire.pulsar.errors import PulsarFormatError, SchemaUnreadable
    from bkctl.wire.pulsar.schema import schema_id

    reg = schema_registry(store, base, bk)
    try:
        locator = reg.locator(schema_id(topic))
    except PulsarFormatError as exc:
        return TopicSchemaState(None, [], None, str(exc))
    if locator is None:
        return None
    versions = [e.version for e in sorted(locator.index)]
    try:
        kind = reg.version(schema_id(topic), None, locator)[1].type if bk is not None else None
    except SchemaUnreadable as exc:
        return TopicSchemaState(
            locator.info.version, versions, None, f"{exc}: the topic cannot load (`bkctl pulsar schema check`)"
        )
    return TopicSchemaState(locator.info.version, versions, kind, None)


def ledger_owner(
    store: MetadataStore, ledger_id: int, base: str | None = None, now_ms: int | None = None
) -> LedgerOwnership:
    """``pulsar ledger-owner``'s answer (:func:`bkctl.wire.domain.ownership.ledger_owner`)."""
    from bkctl.wire.domain.ownership import ledger_owner as owner

    return owner(store, ledger_id, base, now_ms)
