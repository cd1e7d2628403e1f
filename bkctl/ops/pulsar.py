"""``bkctl pulsar``: Pulsar topics as the bookies and ZooKeeper hold them, read-only: the
documents its commands print, from the rules of :mod:`bkctl.wire.domain` (what a topic holds,
who owns a ledger).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bkctl.wire.domain.topic_state import (
    Backlog,
    BookKeeperFactory,
    CursorFallback,
    LedgerState,
    cursor_state,
    fallback_warning,
    ledger_states,
    resolve_topics,
    schema_registry,
    topic_reader,
)
from bkctl.wire.pulsar.managed_ledger import TopicName

if TYPE_CHECKING:
    from bkctl.wire.metadata.store import MetadataStore
    from bkctl.wire.proto.pulsar_ml_pb2 import ManagedCursorInfo

__all__ = ["ledger_owner", "list_topics", "show_topic", "topic_schema_state"]


def _cursor_doc(
    name: str, info: ManagedCursorInfo, ledgers: list[LedgerState], bk: BookKeeperFactory | None
) -> dict[str, Any]:
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
    store: MetadataStore, tenant: str | None = None, namespace: str | None = None, base: str | None = None
) -> list[dict[str, Any]]:
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
    store: MetadataStore, name: str, base: str | None = None, bk: BookKeeperFactory | None = None, strict: bool = False
) -> dict[str, Any]:
    """A topic (every partition of a partitioned one): ledgers with entries,
    sizes, dates and bookies; cursors with their position, where it came from
    and their backlog.  ``warnings`` lists the cursors whose position fell
    back to the znode (:class:`CursorFallback` with ``strict``)."""
    topics = topic_reader(store, base)
    topic = TopicName.parse(name)
    parts: list[dict[str, Any]] = []
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
                "partition": -1 if ml.topic is None else ml.topic.partition,
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


def topic_schema_state(
    store: MetadataStore, topic: str, base: str | None, bk: BookKeeperFactory | None
) -> dict[str, Any] | None:
    """The topic's schema as a broker loading it finds it (None: no schema): its newest
    version, the type, and ``problem`` -- why that version does not read (the topic cannot load)."""
    from bkctl.wire.pulsar.errors import PulsarFormatError, SchemaUnreadable
    from bkctl.wire.pulsar.schema import schema_id

    reg = schema_registry(store, base, bk)
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


def ledger_owner(
    store: MetadataStore, ledger_id: int, base: str | None = None, now_ms: int | None = None
) -> dict[str, Any]:
    """``pulsar ledger-owner``'s document (:func:`bkctl.wire.domain.ownership.ledger_owner`)."""
    from bkctl.wire.domain.ownership import ledger_owner as owner

    return owner(store, ledger_id, base, now_ms).to_json()
