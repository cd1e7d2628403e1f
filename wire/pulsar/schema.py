"""Pulsar's schema registry as a broker stores it (``BookkeeperSchemaStorage``), pure codecs.

* The schema id of a topic (``TopicName.getSchemaName()``):
  ``tenant/namespace/<encoded local name>`` of the *partitioned* topic -- every
  partition shares its base topic's schema -- and, for a v1 topic
  (``tenant/cluster/namespace/x``), the namespace **without** the cluster.
* The locator: the znode ``/schemas/<schema id>`` in the broker's local
  metadata store holds a ``SchemaLocator``: ``info`` (the newest version:
  its number, ``(ledger, entry)`` and the SHA-256 of its schema data) and
  ``index`` (every version so).
* Each version is a ledger of its own with one entry (entry 0): a
  ``SchemaEntry`` whose ``schema_data`` is a ``SchemaInfo`` (schema id,
  user, type, the schema data the client sent, the broker's clock, deleted,
  properties) and whose ``index`` is the locator's before that version.
  The ledger's custom metadata: ``application=pulsar``, ``component=schema``,
  ``pulsar/schemaId=<schema id>``; digest CRC32C, password ``""``.
* The stored type is the client's ``SchemaType`` plus one (BYTES and the
  other negative types are stored as NONE); here types are named as the
  client names them (``AVRO``, ``KEY_VALUE``, ``PROTOBUF_NATIVE``, ...).
* A message names its version in ``MessageMetadata.schema_version``: an
  8-byte big-endian signed long.
* A KEY_VALUE schema's data is ``[int32 keyLen][key schema][int32
  valueLen][value schema]`` (-1: null), its properties name each side's
  type, name and properties and ``kv.encoding.type`` (INLINE or SEPARATED).
* A soft-deleted schema is a version of type NONE with ``deleted`` set;
  versions before the newest deletion do not count.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from typing import Any, NamedTuple, TypeVar

from google.protobuf.message import Message

from ..proto import pulsar_schema_pb2 as pb
from .errors import PulsarFormatError
from .managed_ledger import COMPONENT_SCHEMA, TopicName, encode_local_name

__all__ = [
    "COMPONENT_SCHEMA",
    "IndexEntry",
    "KeyValueSchema",
    "SCHEMAS",
    "SchemaEntry",
    "SchemaLocator",
    "StoredSchema",
    "TYPE_NAMES",
    "key_value_schema",
    "parse_locator",
    "parse_schema_entry",
    "pretty_definition",
    "protobuf_descriptor_text",
    "schema_hash",
    "schema_id",
    "split_key_value",
    "version_bytes",
    "version_of",
]

#: The folder of the locators, beside the managed ledgers (``/schemas``).
SCHEMAS = "schemas"

#: The client's ``SchemaType`` names by the number the registry stores (the client's value + 1).
TYPE_NAMES = {
    1: "NONE",
    2: "STRING",
    3: "JSON",
    4: "PROTOBUF",
    5: "AVRO",
    6: "BOOLEAN",
    7: "INT8",
    8: "INT16",
    9: "INT32",
    10: "INT64",
    11: "FLOAT",
    12: "DOUBLE",
    13: "DATE",
    14: "TIME",
    15: "TIMESTAMP",
    16: "KEY_VALUE",
    17: "INSTANT",
    18: "LOCAL_DATE",
    19: "LOCAL_TIME",
    20: "LOCAL_DATE_TIME",
    21: "PROTOBUF_NATIVE",
}
_VERSION = struct.Struct(">q")
_LEN = struct.Struct(">i")


def schema_id(topic: TopicName | str) -> str:
    """``TopicName.getSchemaName()``: ``tenant/namespace/<encoded local name>``
    of the partitioned topic (a partition's is its base topic's); a v1
    name's namespace without its cluster."""
    name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
    base = name.partitioned_topic
    return f"{base.tenant}/{base.namespace.split('/')[-1]}/{encode_local_name(base.local)}"


def schema_hash(data: bytes) -> bytes:
    """``IndexEntry.hash``: SHA-256 of the schema data alone."""
    return hashlib.sha256(bytes(data)).digest()


def version_of(raw: bytes | None) -> int | None:
    """A message's ``schema_version`` bytes as the version number (None: no version)."""
    if not raw:
        return None
    if len(raw) != 8:
        raise PulsarFormatError(f"a schema version is 8 bytes, not {len(raw)}")
    version: int = _VERSION.unpack(raw)[0]
    return version


def version_bytes(version: int) -> bytes:
    return _VERSION.pack(version)


class IndexEntry(NamedTuple):
    """A version of a schema: where its ledger entry is and its data's SHA-256."""

    version: int
    ledger_id: int
    entry_id: int
    hash: bytes

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "ledger_id": self.ledger_id,
            "entry_id": self.entry_id,
            "hash": self.hash.hex(),
        }


class SchemaLocator(NamedTuple):
    """The value of ``/schemas/<schema id>``: the newest version and every version."""

    info: IndexEntry
    # a field named as tuple's index() method hides it (the name is Pulsar's)
    index: tuple[IndexEntry, ...]  # type: ignore[assignment]

    def entry(self, version: int) -> IndexEntry | None:
        """The index entry of ``version`` (None: not listed; above ``info`` there are none)."""
        if version > self.info.version:
            return None
        for e in self.index:
            if e.version == version:
                return e
        return self.info if self.info.version == version else None

    @property
    def ledger_ids(self) -> list[int]:
        """Every schema ledger the locator names (index and info), in version order."""
        return list(dict.fromkeys([e.ledger_id for e in sorted(self.index)] + [self.info.ledger_id]))


class StoredSchema(NamedTuple):
    """A ``SchemaInfo`` as the registry stores it; ``type`` by the client's name."""

    schema_id: str
    user: str
    type: str
    data: bytes
    timestamp: int
    deleted: bool
    props: tuple[tuple[str, str], ...] = ()

    @property
    def properties(self) -> dict[str, str]:
        return dict(self.props)


class SchemaEntry(NamedTuple):
    """The one entry of a schema version's ledger: the schema and the index before it."""

    schema: StoredSchema
    # a field named as tuple's index() method hides it (the name is Pulsar's)
    index: tuple[IndexEntry, ...]  # type: ignore[assignment]


def _index_entry(e: pb.IndexEntry) -> IndexEntry:
    return IndexEntry(e.version, e.position.ledgerId, e.position.entryId, bytes(e.hash))


M = TypeVar("M", bound=Message)


def _parse(data: bytes, message_class: type[M], what: str) -> M:
    msg = message_class()
    try:
        msg.ParseFromString(bytes(data))
    except Exception as exc:  # noqa: BLE001 - any parse failure is the value's
        raise PulsarFormatError(f"{what} does not parse: {exc}") from None
    if not msg.IsInitialized():
        # FindInitializationErrors: the C++ and pure-Python messages' method, not in the stubs' Message
        missing = msg.FindInitializationErrors()  # type: ignore[attr-defined]
        raise PulsarFormatError(f"{what} lacks required fields ({', '.join(missing)})")
    return msg


def parse_locator(data: bytes) -> SchemaLocator:
    """A ``SchemaLocator`` znode value."""
    msg = _parse(data, pb.SchemaLocator, "SchemaLocator")
    return SchemaLocator(_index_entry(msg.info), tuple(_index_entry(e) for e in msg.index))


def parse_schema_entry(data: bytes) -> SchemaEntry:
    """A schema ledger's entry: ``SchemaEntry`` wrapping a ``SchemaInfo``."""
    entry = _parse(data, pb.SchemaEntry, "SchemaEntry")
    info = _parse(entry.schema_data, pb.SchemaInfo, "SchemaEntry.schema_data (SchemaInfo)")
    schema = StoredSchema(
        info.schema_id,
        info.user,
        TYPE_NAMES.get(info.type, str(info.type)),
        bytes(info.schema),
        info.timestamp,
        info.deleted,
        tuple((p.key, p.value) for p in info.props),
    )
    return SchemaEntry(schema, tuple(_index_entry(e) for e in entry.index))


# ---------------------------------------------------------------- key/value schemas


def split_key_value(data: bytes) -> tuple[bytes | None, bytes | None]:
    """``[int32 keyLen][key][int32 valueLen][value]`` (-1: null) as ``(key, value)``:
    a KEY_VALUE schema's data and an INLINE key/value message's payload alike."""
    data = bytes(data)
    out: list[bytes | None] = []
    off = 0
    for side in ("key", "value"):
        if off + 4 > len(data):
            raise PulsarFormatError(f"key/value data ends before the {side}'s length")
        n = _LEN.unpack_from(data, off)[0]
        off += 4
        if n < 0:
            out.append(None)
            continue
        if off + n > len(data):
            raise PulsarFormatError(f"key/value data: the {side}'s {n} bytes overrun its {len(data)}")
        out.append(data[off : off + n])
        off += n
    if off != len(data):
        raise PulsarFormatError(f"key/value data leaves {len(data) - off} bytes after the value")
    return out[0], out[1]


class KeyValueSchema(NamedTuple):
    """A KEY_VALUE schema's two sides and how its messages carry them
    (``INLINE``: both in the payload; ``SEPARATED``: the key in the
    partition key, base64)."""

    key: StoredSchema
    value: StoredSchema
    encoding: str


def key_value_schema(schema: StoredSchema) -> KeyValueSchema:
    """The sides of a KEY_VALUE schema, each a :class:`StoredSchema` of its own
    (type, data and properties from the outer schema's properties)."""
    props = schema.properties
    key, value = split_key_value(schema.data)
    sides = []
    for side, data in (("key", key), ("value", value)):
        kind = props.get(f"{side}.schema.type", "BYTES")
        try:
            sub = json.loads(props.get(f"{side}.schema.properties") or "{}")
        except ValueError:
            sub = {}
        sides.append(
            StoredSchema(
                schema.schema_id,
                schema.user,
                kind,
                data or b"",
                schema.timestamp,
                False,
                tuple(sorted((str(k), str(v)) for k, v in sub.items())),
            )
        )
    encoding = props.get("kv.encoding.type", "INLINE").upper()
    if encoding not in ("INLINE", "SEPARATED"):
        raise PulsarFormatError(f"kv.encoding.type {encoding!r}: INLINE or SEPARATED")
    return KeyValueSchema(sides[0], sides[1], encoding)


def pretty_definition(schema: StoredSchema) -> Any:
    """A version's definition for people: the Avro JSON of AVRO/JSON/PROTOBUF
    as a parsed document, PROTOBUF_NATIVE's ``ProtobufNativeSchemaData`` with
    its descriptor set's messages listed, KEY_VALUE's two sides, else the
    data as text (None: empty)."""
    if schema.type == "KEY_VALUE":
        kv = key_value_schema(schema)
        return {
            "encoding": kv.encoding,
            "key": {"type": kv.key.type, "definition": pretty_definition(kv.key)},
            "value": {"type": kv.value.type, "definition": pretty_definition(kv.value)},
        }
    if not schema.data:
        return None
    text = schema.data.decode("utf-8", "replace")
    if schema.type in ("AVRO", "JSON", "PROTOBUF", "PROTOBUF_NATIVE"):
        try:
            doc = json.loads(text)
        except ValueError:
            return text
        if schema.type == "PROTOBUF_NATIVE" and isinstance(doc, dict) and "fileDescriptorSet" in doc:
            try:
                doc = {**doc, "fileDescriptorSet": protobuf_descriptor_text(doc["fileDescriptorSet"])}
            except Exception:  # noqa: BLE001 - shown as stored then
                pass
        return doc
    return text


def protobuf_descriptor_text(descriptor_b64: str) -> list[str]:
    """A ``FileDescriptorSet`` (base64) for people: each file's messages and fields, one line each."""
    from google.protobuf import descriptor_pb2

    files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(descriptor_b64))
    lines: list[str] = []
    labels = {1: "optional ", 2: "required ", 3: "repeated "}

    maps: dict[str, str] = {}  # a map field's entry type -> map<key, value>

    def kind_of(f: descriptor_pb2.FieldDescriptorProto) -> str:
        return f.type_name.lstrip(".") or descriptor_pb2.FieldDescriptorProto.Type.Name(f.type)[5:].lower()

    def find_maps(m: descriptor_pb2.DescriptorProto, prefix: str) -> None:
        for nested in m.nested_type:
            if nested.options.map_entry:
                k, v = (kind_of(f) for f in nested.field)
                maps[f"{prefix}{m.name}.{nested.name}"] = f"map<{k}, {v}>"
            find_maps(nested, f"{prefix}{m.name}.")

    def message(m: descriptor_pb2.DescriptorProto, prefix: str) -> None:
        lines.append(f"message {prefix}{m.name} {{")
        for f in m.field:
            kind = kind_of(f)
            if kind in maps:
                lines.append(f"  {maps[kind]} {f.name} = {f.number};")
                continue
            lines.append(f"  {labels.get(f.label, '')}{kind} {f.name} = {f.number};")
        lines.append("}")
        for nested in m.nested_type:
            if not nested.options.map_entry:
                message(nested, f"{prefix}{m.name}.")

    for fd in files.file:
        for m in fd.message_type:
            find_maps(m, f"{fd.package}." if fd.package else "")
    for fd in files.file:
        lines.append(f"// {fd.name} (package {fd.package or '-'})")
        for m in fd.message_type:
            message(m, f"{fd.package}." if fd.package else "")
        for e in fd.enum_type:
            lines.append(f"enum {e.name} {{ {' '.join(f'{v.name} = {v.number};' for v in e.value)} }}")
    return lines
