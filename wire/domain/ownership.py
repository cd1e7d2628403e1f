"""Who owns a ledger: the managed ledger that lists it (as a data ledger or as a cursor's
ledger), another Pulsar component its custom metadata names (a schema, a compacted topic...),
or nothing Pulsar lists -- an orphan, or a ledger that is not Pulsar's.

One rule for every command that asks: ``pulsar ledger-owner``, ``ledger delete``'s refusal,
the warning of ``ledger fence``/``recover``, ``bkctl disk``'s attribution and the orphan sweep
(:mod:`.orphans`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import NotFound
from ..pulsar.managed_ledger import (
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
    TopicName,
    decode_local_name,
)
from ..pulsar.topics import ManagedLedger, TopicMetadataReader
from .topic_state import topic_reader

if TYPE_CHECKING:
    from ..metadata.ledger import LedgerMetadata
    from ..metadata.store import MetadataStore

__all__ = [
    "YOUNG_LEDGER_SECONDS",
    "LedgerOwnership",
    "Owners",
    "SchemaLedgerOwner",
    "candidates",
    "ledger_owner",
    "pulsar_component",
    "schema_ledger_owner",
    "topic_of_schema_id",
]

#: A broker creates a ledger before its managed ledger lists it: a Pulsar
#: ledger younger than this that nothing lists may be about to be listed
#: (``pulsar orphans --older-than``'s default, ``ledger-owner``'s caution).
YOUNG_LEDGER_SECONDS = 3600.0


def pulsar_component(custom: dict[str, str]) -> str | None:
    """What Pulsar made a ledger for, by its custom metadata: ``managed-ledger``
    (a topic's data ledger or a cursor's ledger: what managed ledgers list),
    another component (``schema``, ``compacted-ledger``,
    ``delayed-index-bucket``, ...: listed elsewhere, by keys this tool does not
    read), or None (not Pulsar's)."""
    if custom.get(APPLICATION_KEY) != APPLICATION and MANAGED_LEDGER_KEY not in custom:
        return None
    return custom.get(COMPONENT_KEY) or COMPONENT


def topic_of_schema_id(schema_id: str) -> str:
    """The (partitioned) topic a schema id belongs to: ``persistent://tenant/namespace/topic``."""
    tenant, namespace, encoded = schema_id.split("/", 2)
    try:
        local = decode_local_name(encoded)
    except ValueError:
        local = encoded
    return str(TopicName(tenant, namespace, local))


@dataclass(frozen=True)
class SchemaLedgerOwner:
    """Which topic's schema a schema ledger holds (its ``pulsar/schemaId``) and whether that
    schema's locator names it: ``listed``, ``schema_version`` (None: no locator names it -- an
    orphan schema ledger); ``locator_unreadable``: whether a locator names it cannot be told."""

    topic: str | None
    listed: bool = False
    schema_version: int | None = None
    locator_unreadable: bool = False


def schema_ledger_owner(topics: TopicMetadataReader, ledger_id: int, schema_id: str) -> SchemaLedgerOwner:
    """The :class:`SchemaLedgerOwner` of schema ledger ``ledger_id`` of ``schema_id``."""
    from ..pulsar.errors import PulsarFormatError
    from ..pulsar.registry import SchemaRegistry, schemas_base

    topic = topic_of_schema_id(schema_id) if schema_id.count("/") >= 2 else None
    try:
        locator = SchemaRegistry(topics.pulsar, schemas_base(topics.base)).locator(schema_id)
    except PulsarFormatError:
        return SchemaLedgerOwner(topic, locator_unreadable=True)
    version = None
    for e in locator.index if locator is not None else ():
        if e.ledger_id == ledger_id:
            version = e.version
    return SchemaLedgerOwner(topic, version is not None, version)


@dataclass
class LedgerOwnership:
    """Who owns a ledger (:func:`ledger_owner`).  ``owner``: ``topic`` (a data ledger),
    ``cursor`` (a cursor's ledger), ``orphan`` (Pulsar's, listed by nothing), ``not-pulsar``,
    or another Pulsar component's name (``schema``, ``compacted-ledger``, ...).  ``listed``
    False: no list was found or checked that names it; ``caution``: why ``orphan`` may be early;
    ``locator_unreadable`` is told of schema ledgers only (None otherwise)."""

    ledger_id: int
    owner: str | None = None
    topic: str | None = None
    cursor: str | None = None
    managed_ledger: str | None = None
    custom_metadata: dict[str, str] = field(default_factory=dict)
    listed: bool = True
    created: str | None = None
    age_seconds: float | None = None
    caution: str | None = None
    schema_version: int | None = None
    locator_unreadable: bool | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "ledger_id": self.ledger_id,
            "owner": self.owner,
            "topic": self.topic,
            "cursor": self.cursor,
            "managed_ledger": self.managed_ledger,
            "custom_metadata": self.custom_metadata,
            "listed": self.listed,
            "created": self.created,
            "age_seconds": self.age_seconds,
            "caution": self.caution,
            "schema_version": self.schema_version,
        }
        if self.locator_unreadable is not None:
            doc["locator_unreadable"] = self.locator_unreadable
        return doc

    def refusal(self) -> str | None:
        """Why the ledger must not be deleted without ``--even-if-owned``; None when nothing
        Pulsar uses lists it (``ledger delete``'s rule)."""
        kind = self.owner
        if kind == "topic":
            return f"a data ledger of topic {self.topic or self.managed_ledger}"
        if kind == "cursor":
            return f"the ledger of cursor {self.cursor} of topic {self.topic or self.managed_ledger}"
        if kind == "orphan":
            return f"an orphan, but {self.caution}" if self.caution else None
        if kind == "not-pulsar":
            return None
        if kind == "schema" and self.locator_unreadable is False:
            # the schema registry says: a version the topic loads, or an orphan `pulsar schema check` names
            if self.listed:
                return (
                    f"version {self.schema_version} of the schema of topic {self.topic}: "
                    "the topic cannot load without it"
                )
            return f"an orphan schema ledger, but {self.caution}" if self.caution else None
        return f"a Pulsar {kind} ledger (by its custom metadata; Pulsar lists it where bkctl does not look)"

    def open_writer(self, any_writer: bool = False) -> str | None:
        """What fencing, closing or recovering the (open) ledger breaks when Pulsar is writing
        it: a sentence naming the owner, or None when no owner of Pulsar's could be writing it.
        ``any_writer`` (fence, recover): an open ledger that is not Pulsar's, or an old Pulsar
        orphan, gets its sentence too -- any application may write it."""
        kind = self.owner
        topic = self.topic or self.managed_ledger
        if kind == "topic":
            return f"the open ledger of topic {topic}: its broker's next add fails"
        if kind == "cursor":
            return (
                f"the open ledger of cursor {self.cursor} of topic {topic}: its broker's next mark-delete write fails"
            )
        anyone = (
            "an open ledger: whatever writes it (an application, DistributedLog, Pravega, HerdDB, ...) fails at its "
            "next add"
            if any_writer
            else None
        )
        if kind == "orphan":
            if not self.caution:
                return anyone  # old enough to be an orphan: no broker writes it
            return (
                f"a Pulsar ledger that no topic lists yet, created {_age_text(self.age_seconds)}"
                ": a broker creates a ledger before it lists it, so one may be writing it"
            )
        if kind == "not-pulsar":
            return anyone
        return f"an open Pulsar {kind} ledger{f' of topic {topic}' if topic else ''}: its writer's next add fails"


def ledger_owner(
    store: MetadataStore, ledger_id: int, base: str | None = None, now_ms: int | None = None
) -> LedgerOwnership:
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
    from ..metadata.errors import NoSuchLedger

    try:
        md, _version = store.ledgers.read(ledger_id)
    except NoSuchLedger:
        raise NotFound(f"no such ledger: {ledger_id}") from None
    return Owners(store, base).owner_of(ledger_id, md, now_ms)


def _age_text(age: float | None) -> str:
    return "at an unknown time" if age is None else f"{age:.0f} s ago"


class Owners:
    """Answers "who owns this ledger" for one ledger or many: the managed
    ledgers a ledger's custom metadata names are read once each, and the
    whole topic list (for ledgers that name none, as older brokers made
    them) at most once."""

    def __init__(self, store: MetadataStore, base: str | None = None, young_seconds: float = YOUNG_LEDGER_SECONDS):
        self.topics = topic_reader(store, base)
        self.young_seconds = young_seconds  # an orphan younger than this carries a caution
        self._named: dict[str, list[ManagedLedger]] = {}
        self._every: list[ManagedLedger] | None = None
        #: every managed ledger's data and cursor ledgers -> (managed ledger, cursor or None),
        #: built once for the ledgers that name no managed ledger (a scan of every topic a
        #: ledger: 2.6 s each at 10^4 topics, hours for an fsck's findings)
        self._index: dict[int, tuple[ManagedLedger, str | None]] | None = None

    def candidates(self, custom: dict[str, str]) -> list[ManagedLedger]:
        named = custom.get(MANAGED_LEDGER_KEY)
        if named:
            if named not in self._named:
                self._named[named] = list(candidates(self.topics, custom))
            return self._named[named]
        if self._every is None:
            self._every = list(candidates(self.topics, {}))
        return self._every

    def _listing(self, ledger_id: int, custom: dict[str, str]) -> tuple[ManagedLedger, str | None] | None:
        """The first of :meth:`candidates` listing ``ledger_id``, and the cursor whose ledger
        it is (None: a data ledger); every managed ledger's listings indexed once."""
        if not custom.get(MANAGED_LEDGER_KEY):
            if self._index is None:
                index: dict[int, tuple[ManagedLedger, str | None]] = {}
                for ml in self.candidates(custom):
                    for listed in ml.ledger_ids:
                        index.setdefault(listed, (ml, None))
                    for cursor, info in ml.cursors.items():
                        index.setdefault(info.cursorsLedgerId, (ml, cursor))
                self._index = index
            return self._index.get(ledger_id)
        for ml in self.candidates(custom):
            if ledger_id in ml.ledger_ids:
                return ml, None
            for cursor, info in ml.cursors.items():
                if info.cursorsLedgerId == ledger_id:
                    return ml, cursor
        return None

    def owner_of(self, ledger_id: int, md: LedgerMetadata, now_ms: int | None = None) -> LedgerOwnership:
        """:func:`ledger_owner`'s answer for a ledger whose metadata ``md`` was read."""
        from ..text import custom_metadata_text, utc_iso

        custom = custom_metadata_text(md.custom_metadata)
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        age = None if md.ctime is None else max(0.0, (now_ms - md.ctime) / 1000)
        out = LedgerOwnership(
            ledger_id,
            managed_ledger=custom.get(MANAGED_LEDGER_KEY),
            custom_metadata=custom,
            created=utc_iso(md.ctime),
            age_seconds=age,
        )
        component = pulsar_component(custom)
        if component not in (None, COMPONENT):
            out.owner, out.listed = component, False
            if component == COMPONENT_COMPACTED and custom.get(COMPACTED_TOPIC_KEY):
                out.topic = custom[COMPACTED_TOPIC_KEY]
            elif component == COMPONENT_SCHEMA and custom.get(SCHEMA_ID_KEY):
                schema = schema_ledger_owner(self.topics, ledger_id, custom[SCHEMA_ID_KEY])
                out.topic, out.listed = schema.topic, schema.listed
                out.schema_version, out.locator_unreadable = schema.schema_version, schema.locator_unreadable
                if not out.listed and (age is None or age < self.young_seconds):
                    out.caution = (
                        f"created {_age_text(age)}: a broker writes "
                        "a schema ledger before its locator names it, so it may be named soon"
                    )
            return out
        found = self._listing(ledger_id, custom)
        if found is not None:
            ml, cursor = found
            topic = None if ml.topic is None else str(ml.topic)
            if cursor is None:
                out.owner, out.topic, out.managed_ledger = "topic", topic, ml.name
            else:
                out.owner, out.topic, out.cursor, out.managed_ledger = "cursor", topic, cursor, ml.name
            return out
        out.owner = "orphan" if component else "not-pulsar"
        out.listed = False
        if component and CURSOR_KEY in custom:
            out.cursor = custom[CURSOR_KEY]
        if component and (age is None or age < self.young_seconds):
            young = self.young_seconds
            out.caution = (
                f"created {_age_text(age)}: a broker "
                "creates a ledger before its managed ledger lists it, so it may be listed soon "
                f"(`pulsar orphans` leaves out ledgers younger than "
                f"{f'{young / 3600:g} h' if young >= 3600 else f'{young:g} s'})"
            )
        return out


def candidates(topics: TopicMetadataReader, custom: dict[str, str]) -> Iterator[ManagedLedger]:
    """The managed ledger a ledger's custom metadata names (v2 or v1 name),
    else every one :meth:`TopicMetadataReader.topics` lists."""
    named = custom.get(MANAGED_LEDGER_KEY)
    if named:
        ml = topics.read_named(named)
        if ml is not None:
            yield ml
        return
    yield from topics.read_all(topics.topics())  # a topic deleted meanwhile is left out
