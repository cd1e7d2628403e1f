"""``bkctl pulsar schema``: Pulsar's schema registry as stored, and its doctor (read-only).

The locators come from ``/schemas`` beside the managed ledgers (through the
store's Pulsar manager), each version's ``SchemaEntry`` from its ledger,
opened with Pulsar's empty password (:mod:`bkctl.wire.pulsar.registry`).
``check`` looks for what stops a broker loading a topic -- a locator naming a
schema ledger that is gone or does not read, a version whose data does not
hash to what the locator says -- and for what leaks or is at risk: schema
ledgers no locator names (orphans, with the age caution of ``pulsar
orphans``) and schema ledgers with fewer live copies than their write quorum.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, Any

from bkctl.wire.domain.ownership import topic_of_schema_id
from bkctl.wire.domain.topic_state import BookKeeperFactory
from bkctl.wire.domain.topic_state import schema_registry as registry
from bkctl.wire.pulsar.managed_ledger import (
    APPLICATION,
    APPLICATION_KEY,
    COMPONENT_KEY,
    COMPONENT_SCHEMA,
    SCHEMA_ID_KEY,
)

from .results import omitted_when_none

if TYPE_CHECKING:
    from bkctl.wire.metadata.ledger import LedgerMetadata
    from bkctl.wire.metadata.store import MetadataStore
    from bkctl.wire.pulsar.registry import SchemaRegistry
    from bkctl.wire.pulsar.schema import IndexEntry

__all__ = [
    "FINDINGS",
    "SchemaCheck",
    "SchemaFinding",
    "SchemaProblem",
    "SchemaRow",
    "SchemaShown",
    "SchemaVersion",
    "check_schemas",
    "list_schemas",
    "show_schema",
]


class SchemaProblem(Enum):
    """What ``check`` finds, one cause each; in the order its findings are grouped."""

    LOCATOR_UNREADABLE = "locator-unreadable"
    MISSING_LEDGER = "missing-ledger"
    UNREADABLE_LEDGER = "unreadable-ledger"
    HASH_MISMATCH = "hash-mismatch"
    ORPHAN = "orphan"
    UNDER_REPLICATED = "under-replicated"
    NO_LIVE_COPY = "no-live-copy"


#: What each finding of ``check`` means for the topic, in one line.
FINDINGS: dict[SchemaProblem, str] = {
    SchemaProblem.LOCATOR_UNREADABLE: "the locator znode does not decode: the broker cannot load the topic's schema",
    SchemaProblem.MISSING_LEDGER: "the topic cannot load: a broker treats a missing schema ledger as non-recoverable "
    "(schemaLedgerForceRecovery=false) and a new producer's schema makes it delete the whole schema",
    SchemaProblem.UNREADABLE_LEDGER: "the topic cannot load while this version's ledger does not read or decode",
    SchemaProblem.HASH_MISMATCH: "the version's data does not hash to the locator's SHA-256: the registry finds a stored "
    "version by that hash, so a producer with this schema may get a new version instead",
    SchemaProblem.ORPHAN: "no locator names it: space leaked by a broker that stopped between writing the ledger and the "
    "locator, or lost the locator race; once no broker is writing this schema it can go "
    "(`bkctl ledger delete ID --even-if-owned`)",
    SchemaProblem.UNDER_REPLICATED: "fewer live copies than its write quorum: losing another bookie loses the version and "
    "the topic cannot load",
    SchemaProblem.NO_LIVE_COPY: "the topic cannot load while no bookie holding this version runs: bring one back (if none "
    "can return, the version is lost)",
}


def _copies_down(store: MetadataStore, live: set[str], ledger_id: int) -> str | None:
    """Why a schema ledger cannot be read now, in the operator's words -- every
    bookie holding entry 0 is down (``0 of 2 copies live: 10.0.0.1:3181, ... down``)
    -- or None: it has a live copy (or no metadata: the read says what is wrong)."""
    from bkctl.wire.metadata.errors import NoSuchLedger
    from bkctl.wire.metadata.ledger import write_set_indices

    try:
        md, _version = store.ledgers.read(ledger_id)
    except NoSuchLedger:
        return None
    if not md.ensembles or _live_copies(md, live):
        return None
    ensemble = md.ensembles[0][1]
    holders = [str(ensemble[i]) for i in write_set_indices(0, len(ensemble), md.write_quorum)]
    return f"0 of {md.write_quorum} copies live: {', '.join(holders)} down"


def _live_set(store: MetadataStore) -> set[str]:
    from bkctl.wire.metadata.registration_state import Registrations

    return set(Registrations.read(store.registration).registered)


@dataclass(frozen=True, slots=True)
class SchemaVersion:
    """One version of a schema as ``schema list`` shows it: its locator's entry, and what its
    ledger says (``type``, ``timestamp``, ``deleted``, ``user``: None when it was not read);
    ``problem``, why it cannot be read."""

    version: int
    ledger_id: int
    entry_id: int
    hash: str
    type: str | None = None
    timestamp: str | None = None
    deleted: bool | None = None
    problem: str | None = None
    #: in the document only once the version's ledger was read
    user: str | None = omitted_when_none()


@dataclass(frozen=True, slots=True)
class SchemaRow:
    """One schema id of ``schema list``: its topic, newest version and every version."""

    schema_id: str
    topic: str
    newest: int | None = None
    versions: list[SchemaVersion] = field(default_factory=list)
    problem: str | None = None


def _version_doc(registry: SchemaRegistry, entry: IndexEntry, down: str | None = None) -> SchemaVersion:
    from bkctl.wire.pulsar.errors import SchemaUnreadable
    from bkctl.wire.text import utc_iso

    base = SchemaVersion(entry.version, entry.ledger_id, entry.entry_id, entry.hash.hex())
    if down is not None:
        return replace(base, problem=f"schema ledger {entry.ledger_id}: {down}")
    try:
        schema = registry.entry(entry.ledger_id, entry.entry_id).schema
    except SchemaUnreadable as exc:
        return replace(base, problem=str(exc))
    return replace(
        base,
        type=schema.type,
        timestamp=utc_iso(schema.timestamp) if schema.timestamp else None,
        deleted=schema.deleted,
        user=schema.user,
        problem=None
        if registry.hash_matches(entry.hash, schema)
        else "its data does not hash to the locator's SHA-256",
    )


def list_schemas(store: MetadataStore, base: str | None = None, bk: BookKeeperFactory | None = None) -> list[SchemaRow]:
    """One row per schema id: its topic, newest version and every version with
    its type, time and ledger (read from the version's ledger when ``bk`` is given)."""
    from bkctl.wire.pulsar.errors import PulsarFormatError

    reg = registry(store, base, bk)
    rows = []
    for sid in reg.schema_ids():
        try:
            locator = reg.locator(sid)
        except PulsarFormatError as exc:
            rows.append(SchemaRow(sid, topic_of_schema_id(sid), problem=str(exc)))
            continue
        if locator is None:
            continue  # deleted meanwhile
        live = _live_set(store) if bk is not None else set()
        versions = [
            _version_doc(reg, e, _copies_down(store, live, e.ledger_id) if bk is not None else None)
            for e in sorted(locator.index)
        ]
        rows.append(SchemaRow(sid, topic_of_schema_id(sid), locator.info.version, versions))
    return rows


@dataclass(frozen=True, slots=True)
class SchemaShown:
    """One version of a topic's schema (``schema show``); ``problem``: why the newest version
    is not the one shown, or None."""

    problem: str | None
    topic: str
    schema_id: str
    version: int
    newest: int
    versions: list[int]
    type: str
    timestamp: str | None
    user: str
    deleted: bool
    properties: dict[str, str]
    ledger_id: int
    hash: str
    hash_ok: bool
    definition: Any  #: pretty JSON's value (AVRO, JSON, KEY_VALUE, PROTOBUF_NATIVE's descriptor) or text


def show_schema(
    store: MetadataStore,
    topic: str,
    version: int | None = None,
    base: str | None = None,
    bk: BookKeeperFactory | None = None,
) -> SchemaShown:
    """One version of a topic's schema (the newest by default): its type,
    time, properties, hash, ledger and definition (pretty JSON for AVRO and
    JSON, the descriptor for PROTOBUF_NATIVE, both sides of a KEY_VALUE)."""
    from difflib import get_close_matches

    from bkctl.wire.pulsar.errors import NoSuchSchema, SchemaUnreadable
    from bkctl.wire.pulsar.schema import pretty_definition, schema_hash, schema_id
    from bkctl.wire.text import utc_iso

    reg = registry(store, base, bk)
    sid = schema_id(topic)
    locator = reg.locator(sid)
    if locator is None:
        near = get_close_matches(topic_of_schema_id(sid), [topic_of_schema_id(s) for s in reg.schema_ids()], n=3)
        raise NoSuchSchema(f"{topic} has no schema" + (f" (did you mean {', '.join(near)}?)" if near else ""))
    problem = None
    try:
        got, schema = reg.version(sid, version, locator)
    except SchemaUnreadable as exc:
        if version is not None:
            raise
        # the newest does not read: the newest that does, said first (as the typed export reads them)
        for older in sorted((e.version for e in locator.index if e.version < locator.info.version), reverse=True):
            try:
                got, schema = reg.version(sid, older, locator)
            except SchemaUnreadable:
                continue
            problem = f"the newest version, {locator.info.version}, does not read ({exc}): shown is version {got}"
            break
        else:
            raise
    entry = locator.entry(got)
    assert entry is not None  # the registry read a version its locator lists
    return SchemaShown(
        problem=problem,
        topic=topic_of_schema_id(sid),
        schema_id=sid,
        version=got,
        newest=locator.info.version,
        versions=[e.version for e in sorted(locator.index)],
        type=schema.type,
        timestamp=utc_iso(schema.timestamp) if schema.timestamp else None,
        user=schema.user,
        deleted=schema.deleted,
        properties=schema.properties,
        ledger_id=entry.ledger_id,
        hash=entry.hash.hex(),
        hash_ok=schema_hash(schema.data) == entry.hash or schema.deleted,
        definition=pretty_definition(schema),
    )


def _live_copies(md: LedgerMetadata, live: set[str]) -> int:
    """How many of entry 0's write set are on registered bookies."""
    from bkctl.wire.metadata.ledger import write_set_indices

    ensemble = md.ensembles[0][1]
    return sum(str(ensemble[i]) in live for i in write_set_indices(0, len(ensemble), md.write_quorum))


@dataclass(frozen=True, slots=True)
class SchemaFinding:
    """One finding of ``schema check``: its ``kind`` and what it means (:data:`FINDINGS`)."""

    kind: SchemaProblem
    schema_id: str | None
    topic: str | None
    version: int | None
    ledger_id: int | None
    detail: str
    consequence: str


@dataclass(frozen=True, slots=True)
class SchemaCheck:
    """``schema check``: its findings, grouped by kind, and what was looked at; ``young_ledgers``:
    the schema ledgers nothing names that were too young to judge."""

    findings: list[SchemaFinding]
    schemas: int
    schema_ledgers: int
    young: int
    young_ledgers: list[int]


def check_schemas(
    store: MetadataStore,
    base: str | None = None,
    bk: BookKeeperFactory | None = None,
    older_than: float = 3600.0,
    now_ms: int | None = None,
) -> SchemaCheck:
    """Every finding of the registry's doctor (:data:`FINDINGS`), and what
    was looked at: ``findings`` (kind, schema_id, topic, version, ledger_id,
    detail, consequence), ``schemas``, ``schema_ledgers``, ``young`` (schema
    ledgers nothing names, younger than ``older_than`` seconds: a broker
    writes the ledger before the locator, so not judged)."""
    import time

    from bkctl.wire.metadata.errors import NoSuchLedger
    from bkctl.wire.pulsar.errors import PulsarFormatError, SchemaUnreadable
    from bkctl.wire.pulsar.schema import schema_hash
    from bkctl.wire.text import custom_metadata_text, utc_iso

    reg = registry(store, base, bk)
    live = _live_set(store)
    findings: list[SchemaFinding] = []

    def find(kind: SchemaProblem, sid: str | None, version: int | None, ledger_id: int | None, detail: str) -> None:
        topic = None if sid is None else topic_of_schema_id(sid)
        findings.append(SchemaFinding(kind, sid, topic, version, ledger_id, detail, FINDINGS[kind]))

    named: set[int] = set()
    ids = reg.schema_ids()
    for sid in ids:
        try:
            locator = reg.locator(sid)
        except PulsarFormatError as exc:
            find(SchemaProblem.LOCATOR_UNREADABLE, sid, None, None, str(exc))
            continue
        if locator is None:
            continue
        entries = {e.ledger_id: e for e in sorted(locator.index)}
        entries.setdefault(locator.info.ledger_id, locator.info)
        for ledger_id, entry in entries.items():
            named.add(ledger_id)
            try:
                md, _version = store.ledgers.read(ledger_id)
            except NoSuchLedger:
                find(
                    SchemaProblem.MISSING_LEDGER,
                    sid,
                    entry.version,
                    ledger_id,
                    f"version {entry.version}'s ledger {ledger_id} does not exist",
                )
                continue
            down = _copies_down(store, live, ledger_id)
            if down is not None:  # one finding for one cause: not also under-replicated, nor a read's error
                find(
                    SchemaProblem.NO_LIVE_COPY,
                    sid,
                    entry.version,
                    ledger_id,
                    f"version {entry.version}'s ledger: {down}",
                )
                continue
            if md.ensembles and _live_copies(md, live) < md.write_quorum:
                find(
                    SchemaProblem.UNDER_REPLICATED,
                    sid,
                    entry.version,
                    ledger_id,
                    f"{_live_copies(md, live)} of {md.write_quorum} copies on live bookies",
                )
            if bk is None:
                continue
            try:
                schema = reg.entry(ledger_id, entry.entry_id).schema
            except SchemaUnreadable as exc:
                find(
                    SchemaProblem.MISSING_LEDGER if exc.missing else SchemaProblem.UNREADABLE_LEDGER,
                    sid,
                    entry.version,
                    ledger_id,
                    str(exc),
                )
                continue
            if not reg.hash_matches(entry.hash, schema):
                find(
                    SchemaProblem.HASH_MISMATCH,
                    sid,
                    entry.version,
                    ledger_id,
                    f"locator {entry.hash.hex()[:16]}..., data {schema_hash(schema.data).hex()[:16]}...",
                )
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    cutoff = now_ms - older_than * 1000
    schema_ledgers = young = 0
    young_ids: list[int] = []
    for ledger_id, stored, _version in store.ledgers.read_many(store.ledgers.ids()):
        if stored is None or isinstance(stored, Exception):
            continue
        custom = custom_metadata_text(stored.custom_metadata)
        if custom.get(APPLICATION_KEY) != APPLICATION or custom.get(COMPONENT_KEY) != COMPONENT_SCHEMA:
            continue
        schema_ledgers += 1
        if ledger_id in named:
            continue
        orphan_sid = custom.get(SCHEMA_ID_KEY)
        if stored.ctime is None or stored.ctime > cutoff:
            young += 1
            young_ids.append(ledger_id)
            continue
        located = orphan_sid is not None and orphan_sid in ids
        find(
            SchemaProblem.ORPHAN,
            orphan_sid,
            None,
            ledger_id,
            f"created {utc_iso(stored.ctime)}, {stored.length if stored.is_closed else '?'} B; "
            + ("its schema has a locator that does not name it" if located else "its schema has no locator"),
        )
    order = {kind: i for i, kind in enumerate(SchemaProblem)}
    findings.sort(key=lambda f: order[f.kind])  # grouped by cause (stable: in the walk's order within one)
    return SchemaCheck(findings, len(ids), schema_ledgers, young, young_ids)
