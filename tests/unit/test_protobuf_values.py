"""PROTOBUF_NATIVE values keep each map's entries in the order the message was written in.

protobuf's own map container iterates by its hash table, which upb seeds differently in every
process: two exports of the same bytes listed ``notes`` of the ``s_protobuf_native`` vector with
``bell`` first in one and ``door`` in the other.  The bytes here are written by hand (protobuf's
wire format), so the order they hold is known, and a key order no hash table keeps (26 keys,
shuffled) is one a reading by the map container fails."""

from __future__ import annotations

import base64
import json
import random

from bkctl.wire.pulsar.entry import decode_entry
from bkctl.wire.pulsar.protobuf_values import message_reading, native_descriptor
from bkctl.wire.pulsar.rows import entry_messages
from tests.support import pulsar_entries as pe

# ---------------------------------------------------------------- protobuf's wire format, by hand


def varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def tag(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def ld(number: int, data: bytes) -> bytes:
    """A length-delimited field."""
    return tag(number, 2) + varint(len(data)) + data


def vi(number: int, value: int) -> bytes:
    return tag(number, 0) + varint(value)


def fields(data: bytes) -> list[tuple[int, bytes | int, bytes]]:
    """The top-level fields of a message in wire order: ``(number, value, the field's bytes)``."""
    out, i = [], 0

    def read_varint() -> int:
        nonlocal i
        shift = value = 0
        while True:
            b = data[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value

    while i < len(data):
        start = i
        key = read_varint()
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value: bytes | int = read_varint()
        elif wire_type in (1, 2, 5):
            n = read_varint() if wire_type == 2 else 8 if wire_type == 1 else 4
            value = data[i : i + n]
            i += n
        else:
            raise AssertionError(f"wire type {wire_type}")
        out.append((number, value, data[start:i]))
    return out


# ---------------------------------------------------------------- the vector


def _orders():
    """The s_protobuf_native case's Order reading and its messages' payloads."""
    c = pe.schema_case("s_protobuf_native")
    schema = json.loads(c["manifest"]["ledgers"][0]["schema_info"]["schema_text"])
    data = json.dumps(schema).encode()
    payloads = []
    for entries in c["entries"].values():
        for entry_id, raw in enumerate(entries):
            for m in entry_messages(decode_entry(raw), f"1:{entry_id}:-1"):
                payloads.append(m[8])
    return message_reading(native_descriptor(data)), payloads


def _note_keys(payload: bytes) -> list[str]:
    """The keys of ``notes`` (field 5) as written."""
    return [fields(entry)[0][1].decode() for number, entry, _ in fields(payload) if number == 5]


def test_the_vectors_notes_come_out_in_the_order_they_were_written():
    reading, payloads = _orders()
    with_notes = [p for p in payloads if _note_keys(p)]
    assert with_notes
    for payload in with_notes:
        assert [k for k, _ in reading.decode(payload)["notes"]] == _note_keys(payload)
        # the same entries written the other way round come out the other way round
        rest = b"".join(raw for n, _, raw in fields(payload) if n != 5)
        turned = rest + b"".join(reversed([raw for n, _, raw in fields(payload) if n == 5]))
        assert [k for k, _ in reading.decode(turned)["notes"]] == list(reversed(_note_keys(payload)))


# ---------------------------------------------------------------- maps anywhere in a message


def _schema() -> bytes:
    """ProtobufNativeSchemaData of ``t.Root``: ``map<string, Inner> inner = 1`` (``Inner``:
    ``map<int32, string> names = 1``), ``repeated Item items = 2`` (``Item``: ``map<bool, string>
    flags = 1``), ``Node node = 3`` (recursive: ``map<string, Node> kids = 1``, ``string label = 2``),
    ``map<string, string> plain = 4``."""
    from google.protobuf import descriptor_pb2

    T = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(name="t.proto", package="t", syntax="proto3")

    def map_field(message, name, number, key_type, value_type, value_name=None):
        entry = message.nested_type.add(name=name.title() + "Entry")
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=key_type, label=T.LABEL_OPTIONAL)
        value = entry.field.add(name="value", number=2, type=value_type, label=T.LABEL_OPTIONAL)
        if value_name:
            value.type_name = value_name
        message.field.add(
            name=name,
            number=number,
            type=T.TYPE_MESSAGE,
            label=T.LABEL_REPEATED,
            type_name=f".{f.package}.{message.name}.{entry.name}",
        )

    inner = f.message_type.add(name="Inner")
    map_field(inner, "names", 1, T.TYPE_INT32, T.TYPE_STRING)
    item = f.message_type.add(name="Item")
    map_field(item, "flags", 1, T.TYPE_BOOL, T.TYPE_STRING)
    node = f.message_type.add(name="Node")
    map_field(node, "kids", 1, T.TYPE_STRING, T.TYPE_MESSAGE, ".t.Node")
    node.field.add(name="label", number=2, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    root = f.message_type.add(name="Root")
    map_field(root, "inner", 1, T.TYPE_STRING, T.TYPE_MESSAGE, ".t.Inner")
    root.field.add(name="items", number=2, type=T.TYPE_MESSAGE, label=T.LABEL_REPEATED, type_name=".t.Item")
    root.field.add(name="node", number=3, type=T.TYPE_MESSAGE, label=T.LABEL_OPTIONAL, type_name=".t.Node")
    map_field(root, "plain", 4, T.TYPE_STRING, T.TYPE_STRING)
    files = descriptor_pb2.FileDescriptorSet(file=[f])
    return json.dumps(
        {
            "fileDescriptorSet": base64.b64encode(files.SerializeToString()).decode(),
            "rootMessageTypeName": "t.Root",
            "rootFileDescriptorName": "t.proto",
        }
    ).encode()


def test_every_map_keeps_its_written_order_nested_repeated_and_recursive():
    reading = message_reading(native_descriptor(_schema()))
    keys = [chr(ord("a") + i) * 2 for i in range(26)]
    random.Random(7).shuffle(keys)
    numbers = [int(k[0], 36) * 37 % 101 - 50 for k in keys]  # negatives too
    inner = b"".join(ld(1, vi(1, n) + ld(2, f"n{n}".encode())) for n in numbers)
    payload = b"".join(ld(1, ld(1, k.encode()) + ld(2, inner)) for k in keys)
    payload += ld(2, ld(1, vi(1, 1) + ld(2, b"yes")) + ld(1, vi(1, 0) + ld(2, b"no")))
    payload += ld(2, ld(1, vi(1, 0) + ld(2, b"off")) + ld(1, vi(1, 1) + ld(2, b"on")))
    leaf = ld(2, b"leaf")
    payload += ld(3, b"".join(ld(1, ld(1, k.encode()) + ld(2, leaf)) for k in keys) + ld(2, b"top"))
    # a key written again keeps its first place and takes its last value (Java's LinkedHashMap)
    plain = keys[:5] + [keys[1]]
    payload += b"".join(ld(4, ld(1, k.encode()) + ld(2, f"v{i}".encode())) for i, k in enumerate(plain))
    value = reading.decode(payload)
    assert [k for k, _ in value["inner"]] == keys
    for _k, v in value["inner"]:
        assert v["names"] == [(n, f"n{n}") for n in numbers]
    assert [v["flags"] for v in value["items"]] == [[(True, "yes"), (False, "no")], [(False, "off"), (True, "on")]]
    node = value["node"]
    assert [k for k, _ in node["kids"]] == keys
    assert node["label"] == "top"
    assert value["plain"] == [(keys[0], "v0"), (keys[1], "v5"), (keys[2], "v2"), (keys[3], "v3"), (keys[4], "v4")]
    # the recursive level (Node in Node) is JSON text, its map's keys as written too
    text = node["kids"][0][1]
    assert isinstance(text, str) and json.loads(text) == {"label": "leaf"}
    deep = reading.decode(
        ld(3, ld(1, ld(1, b"x") + ld(2, b"".join(ld(1, ld(1, k.encode()) + ld(2, leaf)) for k in keys))))
    )
    kids = json.loads(deep["node"]["kids"][0][1])["kids"]
    assert list(kids) == keys and all(v == {"label": "leaf"} for v in kids.values())


def test_the_recursive_levels_json_is_protobufs_own_printing():
    """One entry (an order no hash can change): the text is what protobuf's JSON printer writes."""
    from google.protobuf import message_factory
    from google.protobuf.json_format import MessageToJson

    descriptor = native_descriptor(_schema())
    reading = message_reading(descriptor)
    node = ld(1, ld(1, b"k") + ld(2, ld(2, "sörte".encode())))
    value = reading.decode(ld(3, ld(1, ld(1, b"x") + ld(2, node))))
    cls = message_factory.GetMessageClass(descriptor.fields_by_name["node"].message_type)
    want = MessageToJson(cls.FromString(node), preserving_proto_field_name=True, indent=None)
    assert value["node"]["kids"][0][1] == want
