"""A message's value decoded by its topic's schema: Pulsar SQL's typed rows, without a broker.

:class:`TypedView` is what a topic export needs: the stored versions of the
topic's schema (:class:`~.schema.StoredSchema` by version, or why one cannot
be read), the version read as -- the *reader*, by default the newest readable
one -- and from them the value's Arrow type (:attr:`TypedView.arrow_type`)
and :meth:`TypedView.decode`, which turns a message's payload (and, for a
SEPARATED key/value schema, its key) into Python values of that type or
raises :class:`DecodeError` saying why.  It pickles as its stored schemas
(decoders are made again where it is used).

How each schema type is read, as the Java client's schemas write:

* AVRO: Avro binary, read with fastavro; a message of another version is
  read by Avro's resolution rules with the reader's schema (added fields take
  their defaults, removed ones are dropped, promotions apply); a version
  that cannot be resolved is an error naming both versions;
* JSON: a JSON document, shaped by the version's Avro-style definition
  (fields the reader has and the message lacks take their defaults);
* PROTOBUF_NATIVE: protobuf binary, read with the version's
  ``FileDescriptorSet`` (``rootMessageTypeName``): messages as structs (an
  unset one null), repeated fields as arrays, maps as maps, enums by name,
  scalars with their proto3 defaults, uint64/fixed64 as decimal(20,0);
* KEY_VALUE: ``INLINE`` ``[int32 keyLen][key][int32 valueLen][value]`` (-1:
  null) or ``SEPARATED`` (the key base64 in the partition key), each side
  by its own type; a struct ``{key, value}``;
* STRING (UTF-8), BOOLEAN, INT8-64, FLOAT, DOUBLE big-endian; DATE and
  TIMESTAMP (8-byte epoch ms) as timestamps; TIME as its 8-byte ms (long);
  INSTANT (8-byte seconds, 4-byte nanos) as a timestamp; LOCAL_DATE
  (8-byte epoch day) as a date; LOCAL_TIME (8-byte nano of day) as a long;
  LOCAL_DATE_TIME (8-byte epoch day, 8-byte nano of day) as a timestamp
  without time zone; BYTES and NONE: the payload.
* PROTOBUF (the older one: an Avro schema derived from the message, which
  does not say the field numbers): by the ``__PARSING_INFO__`` property the
  Java client adds (the top-level fields' numbers, protobuf types and
  labels), a struct of those fields: scalars typed as PROTOBUF_NATIVE's, an
  enum field its number, a message field its encoded bytes (the numbers of
  enum symbols and of nested fields are not stored); without the property
  not typed (:class:`Untyped`, saying so).

Avro types become Arrow types so: records structs, arrays lists, maps maps
(string keys), enums strings, ``[null, T]`` T (nullable), other unions the
value as JSON text, fixed and bytes binary, decimal decimal128, date date32,
time-* longs, timestamp-* UTC timestamps (local-timestamp-* without zone),
uuid strings; a recursive record is JSON text.
"""
from __future__ import annotations

import base64
import datetime as _dt
import io
import json
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from .errors import PulsarFormatError
from .schema import StoredSchema, key_value_schema, split_key_value, version_of

__all__ = ["DecodeError", "TypedView", "Untyped", "avro_arrow"]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_EPOCH_NAIVE = _dt.datetime(1970, 1, 1)
_DAY0 = _dt.date(1970, 1, 1)


class DecodeError(Exception):
    """A message that does not decode by its schema (its row keeps it, with the reason)."""


class Untyped(Exception):
    """A schema this reader cannot type (the export stays raw, saying why)."""


# ---------------------------------------------------------------- one schema -> (arrow type, decode)


class _Side(NamedTuple):
    """One schema's reading: its Arrow type and ``decode(bytes) -> value``."""

    arrow_type: Any
    decode: Callable[[bytes], Any]
    #: AVRO/JSON: the parsed Avro schema (for resolution); else None
    avro: Any = None
    kind: str = ""


def _primitive(kind: str) -> _Side:
    import pyarrow as pa

    def fixed(fmt: str, convert=None):
        s = struct.Struct(fmt)

        def decode(data: bytes):
            if len(data) != s.size:
                raise DecodeError(f"{kind} is {s.size} bytes, not {len(data)}")
            value = s.unpack(data)
            return convert(*value) if convert else value[0]
        return decode

    def text(data: bytes):
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"STRING is not UTF-8: {exc}") from None

    table = {
        "STRING": (pa.string(), text),
        "BOOLEAN": (pa.bool_(), fixed(">B", lambda b: b != 0)),
        "INT8": (pa.int8(), fixed(">b")),
        "INT16": (pa.int16(), fixed(">h")),
        "INT32": (pa.int32(), fixed(">i")),
        "INT64": (pa.int64(), fixed(">q")),
        "FLOAT": (pa.float32(), fixed(">f")),
        "DOUBLE": (pa.float64(), fixed(">d")),
        "DATE": (pa.timestamp("ms", tz="UTC"), fixed(">q")),
        "TIMESTAMP": (pa.timestamp("ms", tz="UTC"), fixed(">q")),
        "TIME": (pa.int64(), fixed(">q")),
        "INSTANT": (pa.timestamp("us", tz="UTC"),
                    fixed(">qi", lambda s, n: _EPOCH + _dt.timedelta(seconds=s, microseconds=n // 1000))),
        "LOCAL_DATE": (pa.date32(), fixed(">q", lambda d: _DAY0 + _dt.timedelta(days=d))),
        "LOCAL_TIME": (pa.int64(), fixed(">q")),
        "LOCAL_DATE_TIME": (pa.timestamp("us"), fixed(">qq", lambda d, n: _EPOCH_NAIVE + _dt.timedelta(
            days=d, microseconds=n // 1000))),
        "BYTES": (pa.binary(), bytes),
        "NONE": (pa.binary(), bytes),
    }
    arrow, decode = table[kind]
    return _Side(arrow, decode, kind=kind)


def _avro_schema(schema: StoredSchema) -> tuple[Any, Any]:
    """The version's Avro schema parsed: as defined (for its Arrow type) and as
    read (the integer-backed logical types as numbers)."""
    try:
        import fastavro
    except ImportError:
        raise Untyped("fastavro is not installed (pip install 'bkctl[spark]')") from None

    try:
        doc = json.loads(schema.data)
    except ValueError as exc:
        raise Untyped(f"{schema.type} definition is not JSON: {exc}") from None
    try:
        return fastavro.parse_schema(doc), fastavro.parse_schema(_as_numbers(doc))
    except Exception as exc:  # noqa: BLE001 - fastavro's SchemaParseException and friends
        raise Untyped(f"{schema.type} definition is not an Avro schema: {exc}") from None


def _avro_side(schema: StoredSchema) -> _Side:
    defined, parsed = _avro_schema(schema)  # Untyped without fastavro
    from fastavro import schemaless_reader

    arrow, fix = avro_arrow(defined)

    if schema.type == "AVRO":
        def decode(data: bytes, _read=schemaless_reader, _fix=fix):
            value = _read(io.BytesIO(data), parsed, None)
            return value if _fix is None else _fix(value)
    else:  # JSON
        shape = _json_shaper(defined)

        def decode(data: bytes, _fix=fix):
            try:
                doc = json.loads(data)
            except ValueError as exc:
                raise DecodeError(f"not a JSON document: {exc}") from None
            value = shape(doc)
            return value if _fix is None else _fix(value)
    return _Side(arrow, decode, parsed, schema.type)


def _side(schema: StoredSchema) -> _Side:
    kind = schema.type
    if kind in ("AVRO", "JSON"):
        return _avro_side(schema)
    if kind == "PROTOBUF_NATIVE":
        return _protobuf_side(schema)
    if kind == "KEY_VALUE":
        return _key_value_side(schema)
    if kind == "PROTOBUF":
        return _protobuf_avro_side(schema)
    try:
        return _primitive(kind)
    except KeyError:
        raise Untyped(f"schema type {kind} is not known") from None


# ---------------------------------------------------------------- Avro -> Arrow


#: Logical types over int and long whose values are read as those numbers: Arrow
#: takes them so (days, milliseconds, microseconds), and fastavro's conversion
#: to datetime objects would cost as much as the rest of the decoding.
_NUMBER_LOGICAL = frozenset({"date", "time-millis", "time-micros", "timestamp-millis", "timestamp-micros",
                             "local-timestamp-millis", "local-timestamp-micros"})
_UNIT = {"timestamp-millis": "ms", "timestamp-micros": "us", "local-timestamp-millis": "ms",
         "local-timestamp-micros": "us"}


def _as_numbers(doc: Any) -> Any:
    """An Avro schema (JSON) with the :data:`_NUMBER_LOGICAL` types left as their int or long."""
    if isinstance(doc, list):
        return [_as_numbers(d) for d in doc]
    if not isinstance(doc, dict):
        return doc
    if doc.get("logicalType") in _NUMBER_LOGICAL and doc.get("type") in ("int", "long"):
        return doc["type"]
    out = dict(doc)
    for key in ("type", "items", "values"):
        if key in out and not isinstance(out[key], str):
            out[key] = _as_numbers(out[key])
    if "fields" in out:
        out["fields"] = [{**f, "type": _as_numbers(f["type"])} for f in out["fields"]]
    return out


def avro_arrow(schema: Any) -> tuple[Any, Callable[[Any], Any] | None]:
    """The Arrow type of a parsed Avro schema and the function that makes
    fastavro's values fit it (None: they fit as they are)."""
    names: dict[str, Any] = {}
    return _avro_arrow(schema, names, ())


def _json_text(value: Any) -> str:
    def default(o):
        if isinstance(o, (bytes, bytearray)):
            return base64.b64encode(o).decode()
        return str(o)
    return json.dumps(value, default=default, sort_keys=True)


def _avro_arrow(s: Any, names: dict[str, Any], stack: tuple[str, ...]):
    import pyarrow as pa

    if isinstance(s, str):
        simple = {"null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
                  "float": pa.float32(), "double": pa.float64(), "bytes": pa.binary(), "string": pa.string()}
        if s in simple:
            return simple[s], None
        if s in stack:  # a recursive record: its values as JSON text
            return pa.string(), _json_text
        if s in names:
            return _avro_arrow(names[s], names, stack)
        raise Untyped(f"Avro type {s!r} is not defined")
    if isinstance(s, list):
        branches = [b for b in s if b != "null"]
        if len(branches) == 1:
            return _avro_arrow(branches[0], names, stack)
        return pa.string(), lambda v: None if v is None else _json_text(v)
    kind = s.get("type")
    logical = s.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed") and int(s.get("precision", 0)) <= 38:
        if kind == "fixed":
            names[s["name"]] = s
        return pa.decimal128(int(s["precision"]), int(s.get("scale", 0))), None
    # the integer-backed logical types are read as their numbers (:data:`_NUMBER_LOGICAL`), which these take
    if logical == "date" and kind == "int":
        return pa.date32(), None
    if logical in ("time-millis", "time-micros") and kind in ("int", "long"):
        return pa.int64(), None
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return pa.timestamp(_UNIT[logical], tz="UTC"), None
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
        return pa.timestamp(_UNIT[logical]), None
    if logical == "uuid":
        return pa.string(), lambda v: None if v is None else str(v)
    if kind == "record" or kind == "error":
        name = s.get("name", "")
        names[name] = s
        inner = stack + (name,)
        fields, fixes = [], []
        for f in s["fields"]:
            t, fix = _avro_arrow(f["type"], names, inner)
            fields.append(pa.field(f["name"], t))
            if fix is not None:
                fixes.append((f["name"], fix))
        if not fixes:
            return pa.struct(fields), None

        def fix_record(v):
            if v is None:
                return None
            v = dict(v)
            for key, fix in fixes:
                v[key] = fix(v.get(key))
            return v
        return pa.struct(fields), fix_record
    if kind == "enum":
        names[s["name"]] = s
        return pa.string(), None
    if kind == "fixed":
        names[s["name"]] = s
        return pa.binary(), None
    if kind == "array":
        t, fix = _avro_arrow(s["items"], names, stack)
        return pa.list_(t), None if fix is None else (lambda v: None if v is None else [fix(x) for x in v])
    if kind == "map":
        t, fix = _avro_arrow(s["values"], names, stack)
        return pa.map_(pa.string(), t), None if fix is None else (
            lambda v: None if v is None else {k: fix(x) for k, x in v.items()})
    return _avro_arrow(kind, names, stack)


def _field_value(doc: dict, field: dict) -> Any:
    """A record field's value in a JSON object: by its name, else by one of its
    aliases (a field renamed since), else its default."""
    if field["name"] in doc:
        return doc[field["name"]]
    for alias in field.get("aliases", ()):
        if alias in doc:
            return doc[alias]
    return field.get("default")


def _json_shaper(schema: Any) -> Callable[[Any], Any]:
    """A JSON document shaped by an Avro-style definition: a record's fields
    by name (missing ones: their default, else null), numbers as the field's
    type, bytes from base64 (Jackson writes them so), timestamps and dates as their numbers."""
    names: dict[str, Any] = {}

    def shape(s: Any, v: Any) -> Any:
        if v is None:
            return None
        if isinstance(s, list):
            branches = [b for b in s if b != "null"]
            return shape(branches[0], v) if len(branches) == 1 else v
        if isinstance(s, str):
            if s in names:
                return shape(names[s], v)
            if s in ("int", "long"):
                return int(v)
            if s in ("float", "double"):
                return float(v)
            if s == "bytes":
                return base64.b64decode(v) if isinstance(v, str) else bytes(v)
            if s == "string":
                return v if isinstance(v, str) else json.dumps(v)
            return v
        kind = s.get("type")
        if s.get("logicalType") in _NUMBER_LOGICAL and isinstance(v, (int, float)):
            return int(v)
        if kind in ("record", "error"):
            names[s.get("name", "")] = s
            if not isinstance(v, dict):
                raise DecodeError(f"record {s.get('name')}: a JSON {type(v).__name__}, not an object")
            return {f["name"]: shape(f["type"], _field_value(v, f)) for f in s["fields"]}
        if kind in ("enum", "fixed"):
            names[s["name"]] = s
            return v
        if kind == "array":
            return [shape(s["items"], x) for x in v]
        if kind == "map":
            return {k: shape(s["values"], x) for k, x in v.items()}
        return shape(kind, v)

    def top(doc: Any) -> Any:
        try:
            return shape(schema, doc)
        except DecodeError:
            raise
        except (TypeError, ValueError, AttributeError) as exc:
            raise DecodeError(f"JSON does not fit the schema: {exc}") from None
    return top


# ---------------------------------------------------------------- protobuf native


def _protobuf_files(schema_data: bytes) -> tuple[Any, str]:
    """The ``FileDescriptorSet`` and root message name of ``ProtobufNativeSchemaData`` JSON."""
    from google.protobuf import descriptor_pb2

    try:
        doc = json.loads(schema_data)
        files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(doc["fileDescriptorSet"]))
        return files, doc["rootMessageTypeName"]
    except Exception as exc:  # noqa: BLE001 - any of JSON, base64, protobuf or a missing key
        raise Untyped(f"PROTOBUF_NATIVE data is not ProtobufNativeSchemaData: {exc}") from None


def _protobuf_side(schema: StoredSchema) -> _Side:
    from google.protobuf import descriptor_pool

    files, root = _protobuf_files(schema.data)
    pool = descriptor_pool.DescriptorPool()
    pending = list(files.file)
    while pending:  # add each file after its dependencies
        added = False
        for fd in list(pending):
            try:
                pool.Add(fd)
            except Exception:  # noqa: BLE001 - a dependency not added yet
                continue
            pending.remove(fd)
            added = True
        if not added:
            raise Untyped(f"PROTOBUF_NATIVE descriptors do not resolve: {', '.join(f.name for f in pending)}")
    try:
        descriptor = pool.FindMessageTypeByName(root)
    except KeyError:
        raise Untyped(f"PROTOBUF_NATIVE root message {root!r} is not in its descriptors") from None
    return _message_side(descriptor, "PROTOBUF_NATIVE")


#: ``__PARSING_INFO__``'s protobuf type names that keep their type here; ENUM is read as
#: its number (int32) and MESSAGE/GROUP as the nested message's bytes (see _protobuf_avro_side)
_PROTO_SCALARS = ("DOUBLE", "FLOAT", "INT64", "UINT64", "INT32", "FIXED64", "FIXED32", "BOOL", "STRING", "BYTES",
                  "UINT32", "SFIXED32", "SFIXED64", "SINT32", "SINT64")
#: the property the Java client's ``ProtobufSchema`` stores the top-level fields' numbers in
PARSING_INFO = "__PARSING_INFO__"


def _protobuf_avro_side(schema: StoredSchema) -> _Side:
    """The older PROTOBUF schema: its data is the Avro schema avro-protobuf's
    ``ProtobufData`` derives from the message (fields in declaration order, every
    int32 kind an ``int``, enums by their names only), which does not say how the
    bytes are laid out; the Java client's ``ProtobufSchema`` adds the property
    ``__PARSING_INFO__``: each *top-level* field's number, name, protobuf type and
    label.  From it a message descriptor is made (proto2, each scalar's default the
    Avro field's): scalars, strings and bytes (repeated too) typed exactly; an
    ENUM field its number (the symbols' numbers are not stored); a MESSAGE field
    the nested message's encoded bytes (nested fields' numbers are not stored)."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    info = schema.properties.get(PARSING_INFO)
    if not info:
        raise Untyped(f"PROTOBUF (the Avro-described protobuf schema) without the {PARSING_INFO} property: its "
                      "Avro definition does not say the protobuf field numbers to read the bytes with")
    try:
        parsing = json.loads(info)
        avro = json.loads(schema.data) if schema.data else {}
        fields = [(int(f["number"]), str(f["name"]), str(f["type"]).upper(), str(f.get("label") or ""))
                  for f in parsing]
    except (ValueError, TypeError, KeyError) as exc:
        raise Untyped(f"PROTOBUF {PARSING_INFO} is not a list of fields: {exc}") from None
    T = descriptor_pb2.FieldDescriptorProto
    defaults = {f.get("name"): f.get("default") for f in avro.get("fields", []) if isinstance(f, dict)} \
        if isinstance(avro, dict) else {}
    fdp = descriptor_pb2.FileDescriptorProto(name="bkctl_pulsar_protobuf.proto", package="bkctl.pulsar.protobuf",
                                             syntax="proto2")
    name = avro.get("name") if isinstance(avro, dict) and isinstance(avro.get("name"), str) else "Message"
    message = fdp.message_type.add(name=name)
    for number, field_name, kind, label in fields:
        if kind in _PROTO_SCALARS:
            t = getattr(T, f"TYPE_{kind}")
        elif kind == "ENUM":
            t = T.TYPE_INT32
        elif kind in ("MESSAGE", "GROUP"):
            t = T.TYPE_BYTES
        else:
            raise Untyped(f"PROTOBUF field {field_name} has protobuf type {kind!r}")
        repeated = label == "LABEL_REPEATED"
        field = message.field.add(name=field_name, number=number, type=t,
                                  label=T.LABEL_REPEATED if repeated else T.LABEL_REQUIRED
                                  if label == "LABEL_REQUIRED" else T.LABEL_OPTIONAL)
        default = defaults.get(field_name)
        if not repeated and kind in _PROTO_SCALARS and kind != "BYTES" and default is not None:
            field.default_value = ("true" if default else "false") if isinstance(default, bool) else str(default)
    pool = descriptor_pool.DescriptorPool()
    try:
        pool.Add(fdp)
        descriptor = pool.FindMessageTypeByName(f"bkctl.pulsar.protobuf.{name}")
    except Exception as exc:  # noqa: BLE001 - protobuf's TypeError and friends: a field it will not build
        raise Untyped(f"PROTOBUF {PARSING_INFO} does not make a message: {exc}") from None
    return _message_side(descriptor, "PROTOBUF")


def _message_side(descriptor: Any, kind: str) -> _Side:
    """A protobuf message descriptor's reading: its Arrow struct, its bytes' decoding."""
    from google.protobuf import message_factory

    root = descriptor.full_name
    cls = message_factory.GetMessageClass(descriptor)
    arrow, convert = _protobuf_arrow(descriptor, ())

    def decode(data: bytes):
        msg = cls()
        try:
            msg.ParseFromString(bytes(data))
        except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError
            raise DecodeError(f"protobuf {root} does not parse: {exc}") from None
        return convert(msg)
    return _Side(arrow, decode, kind=kind)


def _repeated(field) -> bool:
    """A repeated field (protobuf 6+ says ``is_repeated``; older ones only the label)."""
    repeated = getattr(field, "is_repeated", None)
    return repeated if repeated is not None else field.label == field.LABEL_REPEATED


def _protobuf_arrow(descriptor, stack: tuple[str, ...]):
    """A message descriptor's Arrow struct and the function from a message to its value."""
    import pyarrow as pa
    from google.protobuf.descriptor import FieldDescriptor as F

    if descriptor.full_name in stack:  # recursive: as JSON text
        from google.protobuf.json_format import MessageToJson

        return pa.string(), lambda m: MessageToJson(m, preserving_proto_field_name=True, indent=None)
    inner = stack + (descriptor.full_name,)
    scalar = {F.TYPE_DOUBLE: pa.float64(), F.TYPE_FLOAT: pa.float32(), F.TYPE_INT64: pa.int64(),
              F.TYPE_UINT64: pa.decimal128(20, 0), F.TYPE_INT32: pa.int32(), F.TYPE_FIXED64: pa.decimal128(20, 0),
              F.TYPE_FIXED32: pa.int64(), F.TYPE_BOOL: pa.bool_(), F.TYPE_STRING: pa.string(),
              F.TYPE_BYTES: pa.binary(), F.TYPE_UINT32: pa.int64(), F.TYPE_SFIXED32: pa.int32(),
              F.TYPE_SFIXED64: pa.int64(), F.TYPE_SINT32: pa.int32(), F.TYPE_SINT64: pa.int64()}

    def one(field):
        """The Arrow type of one value of ``field`` and its converter."""
        if field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
            return _protobuf_arrow(field.message_type, inner)
        if field.type == F.TYPE_ENUM:
            enum = field.enum_type

            def name(number, _values=enum.values_by_number):
                v = _values.get(number)
                return v.name if v is not None else str(number)
            return pa.string(), name
        return scalar[field.type], None

    fields, plan = [], []
    for field in descriptor.fields:
        is_map = (field.type == F.TYPE_MESSAGE and field.message_type.GetOptions().map_entry)
        if is_map:
            kf, vf = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
            kt, kc = one(kf)
            vt, vc = one(vf)
            fields.append(pa.field(field.name, pa.map_(kt, vt)))
            is_message = vf.type == F.TYPE_MESSAGE
            plan.append((field.name, "map", (kc, vc, is_message)))
            continue
        t, conv = one(field)
        if _repeated(field):
            fields.append(pa.field(field.name, pa.list_(t)))
            plan.append((field.name, "list", conv))
        elif field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
            fields.append(pa.field(field.name, t))
            plan.append((field.name, "message", conv))
        else:
            fields.append(pa.field(field.name, t))
            plan.append((field.name, "scalar", conv))

    def convert(msg):
        out = {}
        for name, how, conv in plan:
            value = getattr(msg, name)
            if how == "scalar":
                out[name] = value if conv is None else conv(value)
            elif how == "message":
                out[name] = conv(value) if msg.HasField(name) else None
            elif how == "list":
                out[name] = list(value) if conv is None else [conv(x) for x in value]
            else:
                kc, vc, _ = conv
                out[name] = [(k if kc is None else kc(k), v if vc is None else vc(v)) for k, v in value.items()]
        return out
    return pa.struct(fields), convert


# ---------------------------------------------------------------- key/value


def _key_value_side(schema: StoredSchema) -> _Side:
    import pyarrow as pa

    kv = key_value_schema(schema)
    key, value = _side(kv.key), _side(kv.value)
    arrow = pa.struct([pa.field("key", key.arrow_type), pa.field("value", value.arrow_type)])

    def decode(data: bytes):
        try:
            k, v = split_key_value(data)
        except PulsarFormatError as exc:
            raise DecodeError(str(exc)) from None
        return {"key": None if k is None else key.decode(k), "value": None if v is None else value.decode(v)}
    return _Side(arrow, decode, kind="KEY_VALUE")


# ---------------------------------------------------------------- the topic's view


class TypedView:
    """A topic's schema versions and the reading of its messages (see the
    module documentation).  ``versions``: version -> :class:`StoredSchema`;
    ``unreadable``: version -> why it cannot be read (its ledger gone, ...);
    ``reader``: the version read as (None: the newest readable one)."""

    def __init__(self, versions: dict[int, StoredSchema], unreadable: dict[int, str] | None = None,
                 reader: int | None = None):
        self.versions = dict(sorted(versions.items()))
        self.unreadable = dict(unreadable or {})
        if reader is None:
            usable = [v for v, s in self.versions.items() if not s.deleted]
            if not usable:
                raise Untyped("no readable schema version")
            reader = usable[-1]
        if reader not in self.versions:
            why = self.unreadable.get(reader, "no such version")
            raise Untyped(f"schema version {reader} cannot be read: {why}")
        self.reader = reader
        self._sides: dict[int, _Side] = {}
        self._resolved: dict[int, Callable[[bytes], Any] | str] = {}
        self._kv = None
        #: the C twin's decoder of this view's AVRO values (:meth:`arrow_values`): None
        #: not made yet, False unusable, else (decoder, columns, slots by version bytes)
        self._native: Any = None
        main = self.versions[reader]
        if main.type in ("NONE", "BYTES") or main.deleted:
            raise Untyped(f"schema version {reader} is {'deleted' if main.deleted else main.type}: the payload is "
                          "the value")
        self._reader_side = self._side_of(reader)
        if main.type == "KEY_VALUE":
            self._kv = key_value_schema(main)

    def __getstate__(self):
        return {"versions": self.versions, "unreadable": self.unreadable, "reader": self.reader}

    def __setstate__(self, state):
        self.__init__(state["versions"], state["unreadable"], state["reader"])

    @property
    def arrow_type(self) -> Any:
        return self._reader_side.arrow_type

    @property
    def type(self) -> str:
        return self.versions[self.reader].type

    @property
    def separated(self) -> bool:
        """A SEPARATED key/value schema: the key is the message's partition key."""
        return self._kv is not None and self._kv.encoding == "SEPARATED"

    def _side_of(self, version: int) -> _Side:
        if version not in self._sides:
            self._sides[version] = _side(self.versions[version])
        return self._sides[version]

    def _reading(self, version: int | None) -> Callable[[bytes], Any]:
        """How a message of ``version`` is read as the reader (cached); a
        string: why it cannot be."""
        key = self.reader if version is None else version
        if key in self._resolved:
            return self._resolved[key]
        out: Callable[[bytes], Any] | str
        if key == self.reader:
            out = self._reader_side.decode
        elif key in self.unreadable:
            out = f"schema version {key} cannot be read: {self.unreadable[key]}"
        elif key not in self.versions:
            out = f"schema version {key} is not in the topic's schema registry"
        else:
            out = self._resolve(key)
        self._resolved[key] = out
        return out

    def _resolve(self, version: int) -> Callable[[bytes], Any] | str:
        """A reading of ``version``'s messages as the reader's type."""
        writer, reader = self.versions[version], self.versions[self.reader]
        if writer.deleted:
            return f"schema version {version} is a deletion marker"
        if writer.type != reader.type:
            return f"schema version {version} ({writer.type}) cannot be read as version {self.reader} ({reader.type})"
        try:
            if writer.type == "AVRO":
                return self._avro_resolved(version)
            if writer.type == "JSON":
                shape = _json_shaper(self._reader_side.avro)
                fix = avro_arrow(self._reader_side.avro)[1]

                def decode_json(data: bytes):
                    doc = json.loads(data)
                    value = shape(doc)
                    return value if fix is None else fix(value)
                return decode_json
            if writer.type == "KEY_VALUE":
                return self._key_value_resolved(version)
        except Untyped as exc:
            return f"schema version {version} cannot be read: {exc}"
        if writer.data == reader.data:
            return self._reader_side.decode
        return self._side_of(version).decode  # primitives, PROTOBUF_NATIVE: by their own definition

    def _avro_resolved(self, version: int) -> Callable[[bytes], Any] | str:
        from fastavro import schemaless_reader

        writer = self._side_of(version).avro
        reader = self._reader_side.avro
        fix = avro_arrow(reader)[1]
        problem = _avro_incompatible(writer, reader)
        if problem:
            return f"schema version {version} cannot be read as version {self.reader}: {problem}"

        def decode(data: bytes):
            try:
                value = schemaless_reader(io.BytesIO(data), writer, reader)
            except DecodeError:
                raise
            except Exception as exc:  # noqa: BLE001 - fastavro's resolution errors
                raise DecodeError(f"version {version} read as version {self.reader}: {exc}") from None
            return value if fix is None else fix(value)
        return decode

    def _key_value_resolved(self, version: int) -> Callable[[bytes], Any] | str:
        kv_w, kv_r = key_value_schema(self.versions[version]), self._kv
        sides = []
        for w, r in ((kv_w.key, kv_r.key), (kv_w.value, kv_r.value)):
            view = TypedView({0: w, 1: r}, reader=1) if r.type not in ("NONE", "BYTES") else None
            sides.append(view)

        def side(view, data):
            if data is None:
                return None
            if view is None:
                return data
            return view.decode_version(0, data)

        def decode(data: bytes):
            try:
                k, v = split_key_value(data)
            except PulsarFormatError as exc:
                raise DecodeError(str(exc)) from None
            return {"key": side(sides[0], k), "value": side(sides[1], v)}
        return decode

    def decode_version(self, version: int | None, payload: bytes) -> Any:
        """``payload`` of a message of ``version`` as the reader's type; :class:`DecodeError`."""
        reading = self._reading(version)
        if isinstance(reading, str):
            raise DecodeError(reading)
        try:
            return reading(payload)
        except DecodeError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the payload made a decoder raise
            raise DecodeError(f"{type(exc).__name__}: {exc}") from None

    def decode(self, schema_version: bytes | None, payload: bytes | None, key: str | None = None,
               key_b64: bool = False) -> Any:
        """A message's value (None for a null value): ``schema_version`` as
        stamped (none: the reader's), the payload, and for a SEPARATED
        key/value schema the message's key (base64 when ``key_b64``)."""
        try:
            version = version_of(schema_version)
        except PulsarFormatError as exc:
            raise DecodeError(str(exc)) from None
        if self._kv is not None and self._kv.encoding == "SEPARATED":
            return self._separated(version, payload, key, key_b64)
        if payload is None:
            return None
        return self.decode_version(version, payload)

    def _separated(self, version: int | None, payload: bytes | None, key: str | None, key_b64: bool) -> Any:
        if version is not None and version != self.reader and version not in self.versions:
            raise DecodeError(self._reading(version))
        key_bytes = None
        if key is not None:
            key_bytes = base64.b64decode(key) if key_b64 else key.encode("utf-8")
        inline = bytearray()
        for part in (key_bytes, payload):
            inline += struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part
        return self.decode_version(version, bytes(inline))

    def decode_many(self, versions: list, payloads: list, keys: list | None = None, key_b64: list | None = None,
                    skip: list | None = None) -> tuple[list, dict[int, str]]:
        """The values of many messages (columns of a batch: version bytes,
        payloads, keys and their base64 flags for a SEPARATED key/value
        schema; ``skip[i]`` true: not a message to decode, value None) and
        ``{row: why}`` for those that do not decode (value None)."""
        values: list = []
        failures: dict[int, str] = {}
        n = len(payloads)
        keys = keys if keys is not None else [None] * n
        key_b64 = key_b64 if key_b64 is not None else [False] * n
        skip = skip if skip is not None else [None] * n
        separated = self.separated
        readings: dict[bytes | None, Callable[[bytes], Any] | str] = {}
        append = values.append
        for i, (raw, payload, key, b64, no) in enumerate(zip(versions, payloads, keys, key_b64, skip)):
            if no or (payload is None and not separated):
                append(None)
                continue
            try:
                if separated:
                    append(self.decode(raw, payload, key, bool(b64)))
                    continue
                reading = readings.get(raw)
                if reading is None:
                    try:
                        reading = readings[raw] = self._reading(version_of(raw))
                    except PulsarFormatError as exc:
                        reading = readings[raw] = str(exc)
                if isinstance(reading, str):
                    raise DecodeError(reading)
                append(reading(payload))
            except DecodeError as exc:
                append(None)
                failures[i] = str(exc)
            except Exception as exc:  # noqa: BLE001 - whatever the payload made a decoder raise
                append(None)
                failures[i] = f"{type(exc).__name__}: {exc}"
        return values, failures

    def arrow_values(self, versions: list, payloads: Any, skip: list | None, avrocols: Any) -> Any:
        """The values of a batch's messages as an Arrow array of :attr:`arrow_type`,
        decoded by the C twin (``avrocols``: ``Twins.avro_columns`` of
        :mod:`bkctl.wire.fastpath`), or None where :meth:`decode_many` must read
        the batch: the twin is off or not built, the schema not AVRO or a reading
        it does not make (:mod:`.avro_columns`), or a payload it does not decode
        (the general path then says why).  ``versions``: each row's version bytes;
        ``payloads``: the Arrow binary column; ``skip[i]`` true: no value (null)."""
        if avrocols is None or self.type != "AVRO":
            return None
        if self._native is None:
            self._native = self._native_decoder(avrocols)
        if self._native is False:
            return None
        decoder, root, slots_by = self._native
        n = len(payloads)
        nulls = payloads.null_count
        if skip is None and not nulls and n and versions[0] == versions[-1] and len(set(versions)) == 1:
            slot = slots_by.get(versions[0])
            if slot is None:
                return None
            slots = bytes((slot,)) * n
        else:
            absent = payloads.is_null().to_pylist() if nulls else [False] * n
            skip = skip if skip is not None else [None] * n
            row_slots = bytearray(n)
            for i, (raw, no, gone) in enumerate(zip(versions, skip, absent)):
                if no or gone:
                    row_slots[i] = 255
                    continue
                slot = slots_by.get(raw)
                if slot is None:
                    return None
                row_slots[i] = slot
            slots = bytes(row_slots)
        from .avro_columns import wrap

        _validity, offsets, data = payloads.buffers()
        out = decoder.decode(slots, offsets, b"" if data is None else data, payloads.offset)
        if isinstance(out, int):
            return None
        return wrap(root, out)

    def _native_decoder(self, avrocols: Any) -> Any:
        """``(decoder, columns, slots by version bytes)`` for :meth:`arrow_values`, or
        False where the C twin reads none of this view's versions."""
        from .avro_columns import Unsupported, columns_of, plan
        from .schema import version_bytes

        try:
            root, table = columns_of(self.arrow_type)
        except Unsupported:
            return False
        plans: list = []
        slots_by: dict[bytes | None, int] = {}
        reader = self._reader_side.avro
        for version, stored in self.versions.items():
            if len(plans) >= 255 or stored.type != "AVRO" or stored.deleted or isinstance(self._reading(version), str):
                continue
            try:
                made = plan(self._side_of(version).avro, reader, root, decimals=bool(avrocols.DECIMALS))
            except (Unsupported, Untyped):
                continue
            slots_by[version_bytes(version)] = len(plans)
            if version == self.reader:
                slots_by[None] = slots_by[b""] = len(plans)
            plans.append(made)
        if not plans:
            return False
        return avrocols.Decoder(table, tuple(plans)), root, slots_by

    def describe(self) -> dict[str, Any]:
        """For a manifest: the reader version, its type and the versions."""
        return {"reader_version": self.reader, "type": self.type, "versions": sorted(self.versions),
                "unreadable": {str(v): why for v, why in sorted(self.unreadable.items())}}


def _avro_incompatible(writer: Any, reader: Any) -> str | None:
    """Why data of ``writer`` cannot be read with ``reader`` by Avro's rules,
    checked on the schemas (None: it can); fastavro checks the rest as it reads."""
    def check(w, r, path):
        if isinstance(w, dict) and isinstance(r, dict) and w.get("type") == "record" and r.get("type") == "record":
            wf = {f["name"]: f for f in w["fields"]}
            for f in r["fields"]:
                if f["name"] not in wf and "default" not in f and not any(a in wf for a in f.get("aliases", ())):
                    return f"{path}{f['name']} is not in the writer's schema and has no default"
            for f in r["fields"]:
                if f["name"] in wf:
                    why = check(wf[f["name"]]["type"], f["type"], f"{path}{f['name']}.")
                    if why:
                        return why
        return None
    return check(writer, reader, "")
