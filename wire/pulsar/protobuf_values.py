"""Protobuf messages as Arrow structs: the typed export's reading of PROTOBUF_NATIVE values (by the
``FileDescriptorSet`` the schema stores) and of the older PROTOBUF schema's (by the message
descriptor made from its ``__PARSING_INFO__`` property), apart from the other schema types because
only they need protobuf's descriptor pools and message classes.

A message becomes a struct (an unset one null), repeated fields arrays, maps maps, enums their
names, scalars keep their proto3 defaults, uint64/fixed64 decimal(20,0), uint32/fixed32 int64; a
recursive message is JSON text.

A map keeps its entries in the order the message was written in (a key written twice where it was
first, with its last value, as Java's ``LinkedHashMap`` of a parsed map has it): protobuf's own map
container iterates in the order of its hash table, which upb seeds differently in every process, so
two exports of the same bytes listed a map's entries in different orders.  The bytes are parsed by
a twin of the message type in which each map field is what it is on the wire, a repeated field of
entry messages (:func:`_wire_order_class`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any, NamedTuple

from .errors import DecodeError, Untyped

__all__ = ["PARSING_INFO", "MessageReading", "message_reading", "native_descriptor", "parsing_info_descriptor"]

#: ``__PARSING_INFO__``'s protobuf type names that keep their type here; ENUM is read as
#: its number (int32) and MESSAGE/GROUP as the nested message's bytes (see parsing_info_descriptor)
_PROTO_SCALARS = (
    "DOUBLE",
    "FLOAT",
    "INT64",
    "UINT64",
    "INT32",
    "FIXED64",
    "FIXED32",
    "BOOL",
    "STRING",
    "BYTES",
    "UINT32",
    "SFIXED32",
    "SFIXED64",
    "SINT32",
    "SINT64",
)
#: the property the Java client's ``ProtobufSchema`` stores the top-level fields' numbers in
PARSING_INFO = "__PARSING_INFO__"


class MessageReading(NamedTuple):
    """A message type's reading: its Arrow struct, and ``decode(bytes) -> value``
    (:class:`~.errors.DecodeError` for bytes that do not parse)."""

    arrow_type: Any
    decode: Callable[[bytes], Any]


def _protobuf_files(schema_data: bytes) -> tuple[Any, str]:
    """The ``FileDescriptorSet`` and root message name of ``ProtobufNativeSchemaData`` JSON."""
    from google.protobuf import descriptor_pb2

    try:
        doc = json.loads(schema_data)
        files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(doc["fileDescriptorSet"]))
        return files, doc["rootMessageTypeName"]
    except Exception as exc:  # noqa: BLE001 - any of JSON, base64, protobuf or a missing key
        raise Untyped(f"PROTOBUF_NATIVE data is not ProtobufNativeSchemaData: {exc}") from None


def native_descriptor(schema_data: bytes) -> Any:
    """The root message descriptor of a PROTOBUF_NATIVE schema's data; :class:`~.errors.Untyped`."""
    from google.protobuf import descriptor_pool

    files, root = _protobuf_files(schema_data)
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
        return pool.FindMessageTypeByName(root)
    except KeyError:
        raise Untyped(f"PROTOBUF_NATIVE root message {root!r} is not in its descriptors") from None


def parsing_info_descriptor(schema_data: bytes, properties: dict[str, str]) -> Any:
    """The message descriptor of the older PROTOBUF schema: its data is the Avro schema
    avro-protobuf's ``ProtobufData`` derives from the message (fields in declaration order,
    every int32 kind an ``int``, enums by their names only), which does not say how the
    bytes are laid out; the Java client's ``ProtobufSchema`` adds the property
    ``__PARSING_INFO__``: each *top-level* field's number, name, protobuf type and
    label.  From it a message descriptor is made (proto2, each scalar's default the
    Avro field's): scalars, strings and bytes (repeated too) typed exactly; an
    ENUM field its number (the symbols' numbers are not stored); a MESSAGE field
    the nested message's encoded bytes (nested fields' numbers are not stored).
    :class:`~.errors.Untyped` without the property, or where it makes no message."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    info = properties.get(PARSING_INFO)
    if not info:
        raise Untyped(
            f"PROTOBUF (the Avro-described protobuf schema) without the {PARSING_INFO} property: its "
            "Avro definition does not say the protobuf field numbers to read the bytes with"
        )
    try:
        parsing = json.loads(info)
        avro = json.loads(schema_data) if schema_data else {}
        fields = [
            (int(f["number"]), str(f["name"]), str(f["type"]).upper(), str(f.get("label") or "")) for f in parsing
        ]
    except (ValueError, TypeError, KeyError) as exc:
        raise Untyped(f"PROTOBUF {PARSING_INFO} is not a list of fields: {exc}") from None
    T = descriptor_pb2.FieldDescriptorProto
    defaults = (
        {f.get("name"): f.get("default") for f in avro.get("fields", []) if isinstance(f, dict)}
        if isinstance(avro, dict)
        else {}
    )
    fdp = descriptor_pb2.FileDescriptorProto(
        name="bkctl_pulsar_protobuf.proto", package="bkctl.pulsar.protobuf", syntax="proto2"
    )
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
        field = message.field.add(
            name=field_name,
            number=number,
            type=t,
            label=T.LABEL_REPEATED if repeated else T.LABEL_REQUIRED if label == "LABEL_REQUIRED" else T.LABEL_OPTIONAL,
        )
        default = defaults.get(field_name)
        if not repeated and kind in _PROTO_SCALARS and kind != "BYTES" and default is not None:
            field.default_value = ("true" if default else "false") if isinstance(default, bool) else str(default)
    pool = descriptor_pool.DescriptorPool()
    try:
        pool.Add(fdp)
        return pool.FindMessageTypeByName(f"bkctl.pulsar.protobuf.{name}")
    except Exception as exc:  # noqa: BLE001 - protobuf's TypeError and friends: a field it will not build
        raise Untyped(f"PROTOBUF {PARSING_INFO} does not make a message: {exc}") from None


def message_reading(descriptor: Any) -> MessageReading:
    """A protobuf message descriptor's reading: its Arrow struct, its bytes' decoding."""
    root = descriptor.full_name
    cls = _wire_order_class(descriptor)
    arrow, convert = _protobuf_arrow(descriptor, ())

    def decode(data: bytes) -> Any:
        msg = cls()
        try:
            msg.ParseFromString(bytes(data))
        except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError
            raise DecodeError(f"protobuf {root} does not parse: {exc}") from None
        return convert(msg)

    return MessageReading(arrow, decode)


def _wire_order_class(descriptor: Any) -> Any:
    """The class of ``descriptor``'s messages with every map field read as a repeated field of its
    entry messages -- the same bytes on the wire (protobuf's encoding of maps), the entries kept in
    the order they were written.  Made from copies of the descriptor's file and the files it
    imports, with ``map_entry`` cleared, in a pool of their own; the class itself without maps."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    files: dict[str, Any] = {}

    def collect(file: Any) -> None:  # each file after the files it imports
        if file.name in files:
            return
        for dependency in file.dependencies:
            collect(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        files[file.name] = proto

    def unmap(messages: Any) -> bool:
        changed = False
        for message in messages:
            if message.options.map_entry:
                message.options.ClearField("map_entry")
                changed = True
            changed = unmap(message.nested_type) or changed
        return changed

    collect(descriptor.file)
    if not any([unmap(proto.message_type) for proto in files.values()]):
        return message_factory.GetMessageClass(descriptor)
    pool = descriptor_pool.DescriptorPool()
    for proto in files.values():
        pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(descriptor.full_name))


def _map_entries(entries: Any) -> dict[Any, Any]:
    """A map field's entry messages (as :func:`_wire_order_class` reads them) as ``{key: value}``
    in the order they were written, a key written again keeping its place and taking its last value."""
    out: dict[Any, Any] = {}
    for entry in entries:
        out[entry.key] = entry.value
    return out


def _is_map(field: Any) -> bool:
    from google.protobuf.descriptor import FieldDescriptor as F

    return bool(field.type == F.TYPE_MESSAGE and field.message_type.GetOptions().map_entry)


def _json_key(key: Any) -> str:
    """A map key as protobuf's JSON printer writes it."""
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def _recursive_json(descriptor: Any) -> Callable[[Any], str]:
    """A recursive message's JSON text (protobuf's JSON printer, proto field names, one line), its
    maps' entries in the order they were written: the message is parsed again by the class of
    ``descriptor``, printed, and each map's keys put back in the order of the entries read."""
    from google.protobuf import message_factory
    from google.protobuf.descriptor import FieldDescriptor as F
    from google.protobuf.json_format import MessageToDict

    cls = message_factory.GetMessageClass(descriptor)

    def reorder(desc: Any, doc: dict[str, Any], msg: Any) -> None:
        for field in desc.fields:
            if field.name not in doc or field.type not in (F.TYPE_MESSAGE, F.TYPE_GROUP):
                continue
            value = getattr(msg, field.name)
            if _is_map(field):
                printed, entries = doc[field.name], _map_entries(value)
                nested = field.message_type.fields_by_name["value"]
                doc[field.name] = {_json_key(k): printed[_json_key(k)] for k in entries}
                if nested.type == F.TYPE_MESSAGE:
                    for k, v in entries.items():
                        reorder(nested.message_type, doc[field.name][_json_key(k)], v)
            elif _repeated(field):
                for item_doc, item in zip(doc[field.name], value):
                    reorder(field.message_type, item_doc, item)
            else:
                reorder(field.message_type, doc[field.name], value)

    def to_json(msg: Any) -> str:
        doc = MessageToDict(cls.FromString(msg.SerializeToString()), preserving_proto_field_name=True)
        reorder(descriptor, doc, msg)
        return json.dumps(doc)  # as MessageToJson(indent=None) prints it

    return to_json


def _repeated(field: Any) -> bool:
    """A repeated field (protobuf 6+ says ``is_repeated``; older ones only the label)."""
    repeated = getattr(field, "is_repeated", None)
    return bool(repeated) if repeated is not None else bool(field.label == field.LABEL_REPEATED)


def _protobuf_arrow(descriptor: Any, stack: tuple[str, ...]) -> tuple[Any, Callable[[Any], Any]]:
    """A message descriptor's Arrow struct and the function from a message to its value."""
    import pyarrow as pa
    from google.protobuf.descriptor import FieldDescriptor as F

    if descriptor.full_name in stack:  # recursive: as JSON text
        return pa.string(), _recursive_json(descriptor)
    inner = stack + (descriptor.full_name,)
    scalar = {
        F.TYPE_DOUBLE: pa.float64(),
        F.TYPE_FLOAT: pa.float32(),
        F.TYPE_INT64: pa.int64(),
        F.TYPE_UINT64: pa.decimal128(20, 0),
        F.TYPE_INT32: pa.int32(),
        F.TYPE_FIXED64: pa.decimal128(20, 0),
        F.TYPE_FIXED32: pa.int64(),
        F.TYPE_BOOL: pa.bool_(),
        F.TYPE_STRING: pa.string(),
        F.TYPE_BYTES: pa.binary(),
        F.TYPE_UINT32: pa.int64(),
        F.TYPE_SFIXED32: pa.int32(),
        F.TYPE_SFIXED64: pa.int64(),
        F.TYPE_SINT32: pa.int32(),
        F.TYPE_SINT64: pa.int64(),
    }

    def one(field: Any) -> tuple[Any, Callable[[Any], Any] | None]:
        """The Arrow type of one value of ``field`` and its converter."""
        if field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
            return _protobuf_arrow(field.message_type, inner)
        if field.type == F.TYPE_ENUM:
            values = field.enum_type.values_by_number

            def name(number: int) -> str:
                v = values.get(number)
                return str(v.name) if v is not None else str(number)

            return pa.string(), name
        return scalar[field.type], None

    fields: list[Any] = []
    plan: list[tuple[str, str, Any]] = []
    for field in descriptor.fields:
        if _is_map(field):
            kf, vf = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
            kt, kc = one(kf)
            vt, vc = one(vf)
            fields.append(pa.field(field.name, pa.map_(kt, vt)))
            plan.append((field.name, "map", (kc, vc)))
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

    def convert(msg: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, how, conv in plan:
            value = getattr(msg, name)
            if how == "scalar":
                out[name] = value if conv is None else conv(value)
            elif how == "message":
                out[name] = conv(value) if msg.HasField(name) else None
            elif how == "list":
                out[name] = list(value) if conv is None else [conv(x) for x in value]
            else:  # the entries as written (_wire_order_class)
                kc, vc = conv
                out[name] = [
                    (k if kc is None else kc(k), v if vc is None else vc(v)) for k, v in _map_entries(value).items()
                ]
        return out

    return pa.struct(fields), convert
