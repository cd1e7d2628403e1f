"""Pulsar's schema registry as stored, and messages read as typed values, against the
``s_*`` vectors (tests/vectors/pulsar: the real client's entries, the registry's
locator and schema ledgers): every locator and ``SchemaEntry`` decodes to what
the case's manifest says, the registry reader finds versions (and names a gone
ledger), and every message's value decodes to what the client sent (``value``)
and to what a reader holding the newest schema sees (``reader_view``)."""

from __future__ import annotations

import base64
import datetime as dt
import json

import pytest

from bkctl.wire.errors import NotFound
from bkctl.wire.pulsar import schema as S
from bkctl.wire.pulsar.entry import decode_entry
from bkctl.wire.pulsar.errors import DecodeError, NoSuchSchema, PulsarFormatError, SchemaUnreadable, Untyped
from bkctl.wire.pulsar.managed_ledger import TopicName
from bkctl.wire.pulsar.registry import SchemaRegistry, schemas_base
from bkctl.wire.pulsar.rows import entry_messages
from bkctl.wire.pulsar.typed import TypedView
from tests.support import pulsar_entries as pe
from tests.support.fake_store import FakeMetadataStore

STORED = [c for c in pe.schema_cases() if pe.schema_case(c)["locator"] is not None]


def registry_of(case: str) -> tuple[SchemaRegistry, dict]:
    """The case's store on the fake: its locator znode and its schema ledgers (those the vectors keep)."""
    c = pe.schema_case(case)
    store = FakeMetadataStore().start()
    base = schemas_base(f"{store.root.rsplit('/', 1)[0]}/managed-ledgers")
    store.pulsar.put_schema_locator(c["expected"]["schema_id"], c["locator"], base=base)

    def read_entry(ledger_id, entry_id):
        if ledger_id not in c["ledgers"] or entry_id != 0:
            raise NotFound(f"no such ledger: {ledger_id}")
        return c["ledgers"][ledger_id]

    return SchemaRegistry.of(store, read_entry=read_entry), c


@pytest.mark.parametrize("case", STORED)
def test_locator_and_schema_entries_decode_as_the_manifest_says(case):
    c = pe.schema_case(case)
    manifest = c["manifest"]
    locator = S.parse_locator(c["locator"])
    want = manifest["locator"]
    assert locator.info == (
        want["info"]["version"],
        want["info"]["ledger_id"],
        want["info"]["entry_id"],
        bytes.fromhex(want["info"]["hash_sha256_hex"]),
    )
    assert [e.to_json() for e in locator.index] == [
        {"version": e["version"], "ledger_id": e["ledger_id"], "entry_id": e["entry_id"], "hash": e["hash_sha256_hex"]}
        for e in want["index"]
    ]
    for ledger in manifest["ledgers"] + manifest.get("orphan_ledgers", []):
        lid = ledger["ledger_id_in_vectors"]
        if ledger.get("missing"):
            assert lid not in c["ledgers"]
            continue
        entry = S.parse_schema_entry(c["ledgers"][lid])
        info = ledger["schema_info"]
        assert entry.schema.schema_id == info["schema_id"] == S.schema_id(c["expected"]["topic"])
        assert (entry.schema.type, entry.schema.timestamp, entry.schema.deleted, entry.schema.user) == (
            info["domain_type"].replace("KEYVALUE", "KEY_VALUE"),
            info["timestamp"],
            False,
            "",
        )
        assert entry.schema.data == base64.b64decode(info["schema_b64"])
        assert [list(p) for p in entry.schema.props] == info["props"]
        assert [(i.version, i.ledger_id, i.entry_id, i.hash.hex()) for i in entry.index] == [
            (i["version"], i["ledger_id"], i["entry_id"], i["hash_sha256_hex"]) for i in ledger["schema_entry"]["index"]
        ]
        if "version" in ledger:  # named by the locator: its hash is the data's SHA-256
            assert locator.entry(ledger["version"]).hash == S.schema_hash(entry.schema.data)


def test_definitions_for_people():
    c = pe.schema_case("s_protobuf_native")
    doc = S.pretty_definition(S.parse_schema_entry(c["ledgers"][2000]).schema)
    assert doc["rootMessageTypeName"] == "vec.shop.Order"
    assert "  map<string, string> notes = 5;" in doc["fileDescriptorSet"]
    assert "  optional fixed64 checksum = 12;" in doc["fileDescriptorSet"]
    c = pe.schema_case("s_keyvalue_inline")
    doc = S.pretty_definition(S.parse_schema_entry(c["ledgers"][2000]).schema)
    assert (doc["encoding"], doc["key"]["type"], doc["value"]["type"]) == ("INLINE", "JSON", "AVRO")
    assert doc["value"]["definition"]["name"] == "Measurement"


def test_schema_ids_strip_the_partition_and_a_v1_names_cluster():
    assert (
        S.schema_id("persistent://public/default/vec-s-partitioned-partition-1") == "public/default/vec-s-partitioned"
    )
    assert S.schema_id("persistent://t/ns/a b:c") == "t/ns/a+b%3Ac"
    # TopicName.getSchemaName(): tenant + getNamespacePortion() (the cluster left out) + encoded local name
    assert S.schema_id(TopicName.parse("persistent://legacy/cluster-a/ns/old")) == "legacy/ns/old"


def test_version_bytes_are_a_big_endian_long():
    assert S.version_of(base64.b64decode("AAAAAAAAAAE=")) == 1
    assert S.version_of(b"") is None and S.version_of(None) is None
    assert S.version_bytes(258) == b"\0\0\0\0\0\0\1\2"
    with pytest.raises(PulsarFormatError, match="8 bytes, not 3"):
        S.version_of(b"abc")


def test_key_value_data_splits_and_refuses_what_overruns():
    assert S.split_key_value(b"\0\0\0\1k\xff\xff\xff\xff") == (b"k", None)
    with pytest.raises(PulsarFormatError, match="overrun"):
        S.split_key_value(b"\0\0\0\5k")
    with pytest.raises(PulsarFormatError, match="leaves 1 bytes"):
        S.split_key_value(b"\xff\xff\xff\xff\0\0\0\0x")


def test_a_locator_that_is_not_one_names_its_znode():
    store = FakeMetadataStore().start()
    registry = SchemaRegistry(store.pulsar, "/schemas")
    store.pulsar.put_schema_locator("t/ns/x", b"\x0a\x02\x08", base="/schemas")
    with pytest.raises(PulsarFormatError, match="^/schemas/t/ns/x: SchemaLocator"):
        registry.locator("t/ns/x")
    assert registry.locator("t/ns/y") is None and registry.schema_ids() == ["t/ns/x"]


def test_the_registry_finds_each_version_and_names_the_ledger_that_is_gone():
    registry, c = registry_of("s_schema_ledger_missing")
    sid = c["expected"]["schema_id"]
    assert registry.schema_ids() == [sid]
    version, schema = registry.version(sid, 0)
    assert (version, schema.type) == (0, "AVRO")
    with pytest.raises(SchemaUnreadable) as got:
        registry.version(sid)  # the newest, version 1: its ledger is gone
    assert got.value.missing and got.value.ledger_id == 2001
    with pytest.raises(NoSuchSchema, match="no schema version 5"):
        registry.version(sid, 5)
    with pytest.raises(NoSuchSchema, match="has no schema"):
        registry.version("public/default/none")


# ---------------------------------------------------------------- typed values


def _stored_messages(c):
    """Every stored message of a case, in storage order: (schema_version bytes, payload, key, key_b64, id)."""
    out = []
    for entries in c["entries"].values():
        for entry_id, data in enumerate(entries):
            entry = decode_entry(data)
            md = entry.metadata
            version = md.schema_version if md.HasField("schema_version") else None
            for m in entry_messages(entry, f"1000:{entry_id}:-1"):
                out.append((version, m[8], m[4], m[5], (entry_id, m[0])))
    return out


def _expected_in_storage_order(c):
    doc, ids = c["expected"], c["ids"]
    return [doc["messages"][i] for i in ids["storage_order_of_send_indexes"]]


def view_of(case, reader=None, per_version=False):
    registry, c = registry_of(case)
    sid = c["expected"]["schema_id"]
    locator = registry.locator(sid)
    versions, unreadable = {}, {}
    for e in locator.index:
        try:
            versions[e.version] = registry.version(sid, e.version, locator)[1]
        except SchemaUnreadable as exc:
            unreadable[e.version] = str(exc)
    return TypedView(versions, unreadable, reader), c


def _decoded(view, c):
    import pyarrow as pa

    values, errors = [], []
    messages = _stored_messages(c)
    for version, payload, key, key_b64, _ident in messages:
        try:
            values.append(view.decode(version, payload, key, key_b64))
            errors.append(None)
        except DecodeError as exc:
            values.append(None)
            errors.append(str(exc))
    # a batch's columns at once, as the export decodes them: the same values and reasons
    many, failures = view.decode_many(*[list(column) for column in zip(*messages)][:4])
    assert many == values and failures == {i: e for i, e in enumerate(errors) if e is not None}
    return [pe.typed_json(v, view.arrow_type) for v in pa.array(values, view.arrow_type).to_pylist()], errors


TYPED = [c for c in STORED if c != "s_schema_ledger_missing"]


@pytest.mark.parametrize("case", TYPED)
def test_every_message_reads_as_the_newest_schema_sees_it(case):
    view, c = view_of(case)
    assert view.reader == c["expected"]["newest_version"]
    values, errors = _decoded(view, c)
    want = _expected_in_storage_order(c)
    assert errors == [None] * len(want)
    assert values == [m["reader_view"] for m in want]


@pytest.mark.parametrize("case", TYPED)
def test_every_message_reads_by_its_own_version_as_the_client_sent_it(case):
    c = pe.schema_case(case)
    want = _expected_in_storage_order(c)
    for version in sorted({m["schema_version"] for m in want}):
        view, c = view_of(case, reader=version)
        values, errors = _decoded(view, c)
        mine = [(v, m["value"]) for v, m in zip(values, want) if m["schema_version"] == version]
        assert [v for v, _ in mine] == [w for _, w in mine], version


def test_messages_of_a_version_whose_ledger_is_gone_are_errors_naming_it():
    view, c = view_of("s_schema_ledger_missing")
    assert view.reader == 0  # the newest readable version
    values, errors = _decoded(view, c)
    want = _expected_in_storage_order(c)
    assert [m["decodable"] for m in want] == [e is None for e in errors]
    assert [v for v, m in zip(values, want) if m["decodable"]] == [m["value"] for m in want if m["decodable"]]
    assert all(e.startswith("schema version 1 cannot be read: schema ledger 2001: gone") for e in errors if e)
    assert view.describe()["unreadable"] == {"1": "schema ledger 2001: gone (no such ledger: 2001)"}


def test_a_version_that_cannot_be_resolved_is_an_error_naming_both_versions():
    old = S.StoredSchema(
        "t/ns/x",
        "",
        "AVRO",
        json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}).encode(),
        1,
        False,
    )
    new = old._replace(
        data=json.dumps(
            {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "string"}]}
        ).encode()
    )
    view = TypedView({0: old, 1: new})
    with pytest.raises(DecodeError, match="schema version 0 cannot be read as version 1: b is not in the writer's"):
        view.decode(S.version_bytes(0), b"\x02")
    assert view.decode(S.version_bytes(1), b"\x02\x02z") == {"a": 1, "b": "z"}
    with pytest.raises(DecodeError, match="schema version 7 is not in the topic's schema registry"):
        view.decode(S.version_bytes(7), b"\x02")
    with pytest.raises(DecodeError, match="EOF|Error"):
        view.decode(S.version_bytes(1), b"\x02")  # truncated: the string is missing


def test_resolution_promotes_renames_by_alias_and_fills_defaults_in_avro_and_json():
    import io

    import fastavro

    old = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "n", "type": "int"},
            {"name": "amount", "type": "float"},
            {"name": "s", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        ],
    }
    new = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "n", "type": "long"},
            {"name": "amount_d", "type": "double", "aliases": ["amount"]},
            {"name": "s", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"], "default": "A"}},
            {"name": "extra", "type": {"type": "array", "items": "string"}, "default": []},
        ],
    }
    want = {"n": 5, "amount_d": 1.5, "s": "B", "extra": []}
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(old), {"n": 5, "amount": 1.5, "s": "B"})
    for kind, payload in (("AVRO", buf.getvalue()), ("JSON", b'{"n": 5, "amount": 1.5, "s": "B"}')):
        view = TypedView(
            {
                0: S.StoredSchema("t/ns/x", "", kind, json.dumps(old).encode(), 1, False),
                1: S.StoredSchema("t/ns/x", "", kind, json.dumps(new).encode(), 2, False),
            }
        )
        assert view.decode(S.version_bytes(0), payload) == want, kind


def test_primitives_and_their_sizes():
    import pyarrow as pa

    def view(kind):
        return TypedView({0: S.StoredSchema("t/ns/x", "", kind, b"", 1, False)})

    assert view("INT64").decode(None, (-2).to_bytes(8, "big", signed=True)) == -2
    assert view("BOOLEAN").decode(None, b"\1") is True
    assert view("DOUBLE").decode(None, b"\x3f\xf0" + b"\0" * 6) == 1.0
    assert view("LOCAL_DATE").decode(None, (1).to_bytes(8, "big")) == dt.date(1970, 1, 2)
    timestamp = view("TIMESTAMP")  # epoch milliseconds, which Arrow takes as they are
    assert pa.array([timestamp.decode(None, (1500).to_bytes(8, "big"))], timestamp.arrow_type).to_pylist() == [
        dt.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=dt.UTC)
    ]
    with pytest.raises(DecodeError, match="INT32 is 4 bytes, not 3"):
        view("INT32").decode(None, b"abc")
    with pytest.raises(DecodeError, match="STRING is not UTF-8"):
        view("STRING").decode(None, b"\xff")
    with pytest.raises(Untyped, match="payload is the value"):
        view("BYTES")


def test_a_separated_key_value_reads_its_key_from_the_partition_key():
    kv = S.StoredSchema(
        "t/ns/x",
        "",
        "KEY_VALUE",
        b"\0\0\0\0\0\0\0\0",
        1,
        False,
        (("key.schema.type", "STRING"), ("value.schema.type", "INT32"), ("kv.encoding.type", "SEPARATED")),
    )
    view = TypedView({0: kv})
    assert view.separated
    assert view.decode(S.version_bytes(0), b"\0\0\0\7", base64.b64encode(b"k1").decode(), True) == {
        "key": "k1",
        "value": 7,
    }
    assert view.decode(S.version_bytes(0), None, None, False) == {"key": None, "value": None}
    # a batch's columns at once, as the export reads them: keys from the key column, a null value kept
    values, failures = view.decode_many(
        [S.version_bytes(0)] * 3,
        [b"\0\0\0\7", None, b"\0"],
        [base64.b64encode(b"k1").decode(), "plain", None],
        [True, False, False],
    )
    assert values == [{"key": "k1", "value": 7}, {"key": "plain", "value": None}, None]
    assert list(failures) == [2] and "INT32 is 4 bytes, not 1" in failures[2]


def _legacy_protobuf_message():
    """A message class as a ``.proto`` would make it (field numbers out of declaration order, a
    sint64, a fixed32 list, a nested message, an enum numbered 0, 5) and the PROTOBUF schema the
    Java client's ``ProtobufSchema`` stores for it: avro-protobuf's Avro schema and ``__PARSING_INFO__``."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    T = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="legacy.proto", package="shop", syntax="proto2")
    inner = fdp.message_type.add(name="Inner")
    inner.field.add(name="x", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    color = fdp.enum_type.add(name="Color")
    color.value.add(name="RED", number=0)
    color.value.add(name="BLUE", number=5)
    order = fdp.message_type.add(name="Order")
    layout = [
        ("id", 1, "INT32", "LABEL_OPTIONAL"),
        ("name", 2, "STRING", "LABEL_OPTIONAL"),
        ("delta", 9, "SINT64", "LABEL_OPTIONAL"),
        ("codes", 3, "FIXED32", "LABEL_REPEATED"),
        ("inner", 4, "MESSAGE", "LABEL_OPTIONAL"),
        ("color", 6, "ENUM", "LABEL_OPTIONAL"),
        ("big", 8, "UINT64", "LABEL_OPTIONAL"),
        ("blob", 7, "BYTES", "LABEL_OPTIONAL"),
    ]
    for name, number, kind, label in layout:
        f = order.field.add(
            name=name,
            number=number,
            label=getattr(T, label),
            type=T.TYPE_ENUM if kind == "ENUM" else T.TYPE_MESSAGE if kind == "MESSAGE" else getattr(T, f"TYPE_{kind}"),
        )
        if kind in ("ENUM", "MESSAGE"):
            f.type_name = ".shop.Color" if kind == "ENUM" else ".shop.Inner"
    order.field[0].default_value = "42"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    avro = {
        "type": "record",
        "name": "Order",
        "namespace": "shop.Legacy",
        "fields": [
            {"name": "id", "type": "int", "default": 42},
            {"name": "name", "type": "string", "default": ""},
            {"name": "delta", "type": "long", "default": 0},
            {"name": "codes", "type": {"type": "array", "items": "int"}},
            {
                "name": "inner",
                "type": [
                    "null",
                    {"type": "record", "name": "Inner", "fields": [{"name": "x", "type": "string", "default": ""}]},
                ],
                "default": None,
            },
            {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "BLUE"]}, "default": "RED"},
            {"name": "big", "type": "long", "default": 0},
            {"name": "blob", "type": "bytes", "default": ""},
        ],
    }
    info = [
        {"number": n, "name": name, "type": kind, "label": label, "definition": None} for name, n, kind, label in layout
    ]
    schema = S.StoredSchema(
        "t/ns/x", "", "PROTOBUF", json.dumps(avro).encode(), 1, False, (("__PARSING_INFO__", json.dumps(info)),)
    )
    return cls, schema


def test_the_older_protobuf_schema_is_typed_by_its_parsing_info():
    import pyarrow as pa

    cls, schema = _legacy_protobuf_message()
    view = TypedView({0: schema})
    inner = cls.DESCRIPTOR.fields_by_name["inner"].message_type
    msg = cls(name="n", delta=-7, codes=[1, 2**32 - 1], color=5, big=2**64 - 1, blob=b"\0\1")
    msg.inner.x = "deep"
    value = view.decode(S.version_bytes(0), msg.SerializeToString())
    assert {k: v for k, v in value.items() if k != "inner"} == {
        "id": 42,
        "name": "n",
        "delta": -7,
        "codes": [1, 2**32 - 1],
        "color": 5,
        "big": 2**64 - 1,
        "blob": b"\0\1",
    }
    # the nested message's own bytes: its field numbers are not stored
    from google.protobuf import message_factory

    assert message_factory.GetMessageClass(inner).FromString(value["inner"]).x == "deep"
    assert pa.array([value], view.arrow_type).type.field("big").type == pa.decimal128(20, 0)
    assert view.decode(S.version_bytes(0), b"")["id"] == 42  # unset: the .proto's default, as Java's getter
    with pytest.raises(DecodeError, match="does not parse"):
        view.decode(S.version_bytes(0), b"\x0a\x05ab")
    without = schema._replace(props=())
    with pytest.raises(Untyped, match="without the __PARSING_INFO__ property: its Avro definition does not say"):
        TypedView({0: without})


def test_a_view_pickles_as_its_schemas():
    import pickle

    view, c = view_of("s_avro_evolved")
    again = pickle.loads(pickle.dumps(view))
    assert again.reader == view.reader and _decoded(again, c) == _decoded(view, c)


# ---------------------------------------------------------------- bkctl pulsar schema (ops, on the fake)


class _Ledgers:
    """A fake bk(): opens ledgers of a dict ``{ledger_id: entry 0's bytes}``."""

    def __init__(self, entries):
        self.entries = entries

    def open(self, ledger_id, password=None):
        assert password == b""  # a broker opens schema ledgers with the empty password
        if ledger_id not in self.entries:
            raise NotFound(f"no such ledger: {ledger_id}")
        entries = self.entries

        class Handle:
            @staticmethod
            def read_entry(entry_id):
                return entries[ledger_id]

        return Handle()


def doctor_store(case="s_schema_ledger_missing", bookies=("10.0.0.1:3181", "10.0.0.2:3181")):
    """A case's store on the fake: its locator, its schema ledgers' metadata on
    ``bookies`` (2/2), an hour old; the bookies registered."""
    from bkctl.wire.metadata.ledger import LedgerMetadata

    c = pe.schema_case(case)
    store = FakeMetadataStore().start()
    base = schemas_base(f"{store.root.rsplit('/', 1)[0]}/managed-ledgers")
    store.pulsar.put_schema_locator(c["expected"]["schema_id"], c["locator"], base=base)
    custom = {"application": b"pulsar", "component": b"schema", "pulsar/schemaId": c["expected"]["schema_id"].encode()}
    for ledger_id, data in c["ledgers"].items():
        store.ledgers.create(
            LedgerMetadata.new(bookies, 2, 2, ctime=1_000, custom_metadata=custom).closed(0, len(data)), ledger_id
        )
    for b in ("10.0.0.1:3181", "10.0.0.2:3181"):
        store.registration.register(b)
    return store, c


def test_check_names_the_missing_schema_ledger_and_the_orphan():
    from bkctl.ops.pulsar_schema import FINDINGS, SchemaProblem, check_schemas

    store, c = doctor_store()
    doc = check_schemas(store, bk=lambda: _Ledgers(c["ledgers"]), now_ms=10_000_000)
    sid = c["expected"]["schema_id"]
    assert [(f.kind.value, f.schema_id, f.version, f.ledger_id) for f in doc.findings] == [
        ("missing-ledger", sid, 1, 2001),
        ("orphan", sid, None, 2002),
    ]
    assert doc.findings[0].topic == "persistent://public/default/vec-s-schema-ledger-missing"
    assert doc.findings[0].consequence == FINDINGS[SchemaProblem.MISSING_LEDGER]
    assert "its schema has a locator that does not name it" in doc.findings[1].detail
    assert (doc.schemas, doc.schema_ledgers, doc.young) == (1, 2, 0)
    # an orphan younger than the caution is not judged, but counted
    doc = check_schemas(store, bk=lambda: _Ledgers(c["ledgers"]), now_ms=2_000)
    assert [f.kind.value for f in doc.findings] == ["missing-ledger"] and doc.young == 1


def test_check_finds_a_hash_mismatch_an_unreadable_and_an_under_replicated_ledger():
    from bkctl.ops.pulsar_schema import SchemaProblem, check_schemas

    store, c = doctor_store("s_avro_evolved", bookies=("10.0.0.1:3181", "10.0.0.9:3181"))  # .9 is not live
    entries = dict(c["ledgers"])
    entry = S.parse_schema_entry(entries[2000])
    from bkctl.wire.proto import pulsar_schema_pb2 as spb

    raw = spb.SchemaEntry.FromString(entries[2000])
    info = spb.SchemaInfo.FromString(raw.schema_data)
    info.schema = entry.schema.data.replace(b"owner", b"holder")  # not what the locator hashed
    raw.schema_data = info.SerializeToString()
    entries[2000] = raw.SerializeToString()
    entries[2001] = b"\xff\xff"  # does not decode
    doc = check_schemas(store, bk=lambda: _Ledgers(entries), now_ms=10_000_000)
    assert sorted((f.kind.value, f.version) for f in doc.findings) == [
        ("hash-mismatch", 0),
        ("under-replicated", 0),
        ("under-replicated", 1),
        ("unreadable-ledger", 1),
    ]
    under = [f for f in doc.findings if f.kind is SchemaProblem.UNDER_REPLICATED][0]
    assert under.detail == "1 of 2 copies on live bookies"


class _NoAnswer:
    """A client whose every read fails, as the real one's does with a ledger's bookies down
    (its error names retries: what an operator should not have to read)."""

    def open(self, ledger_id, password):
        return self

    def read_entry(self, entry_id):
        from bkctl.wire.client.errors import BookieUnavailable

        raise BookieUnavailable("10.0.0.9:3181: connection refused; retrying in 1.6 s")


def test_a_version_whose_bookies_are_all_down_is_one_finding_in_the_operators_words():
    from bkctl.ops.pulsar_schema import FINDINGS, SchemaProblem, check_schemas, list_schemas

    store, c = doctor_store("s_avro_evolved", bookies=("10.0.0.8:3181", "10.0.0.9:3181"))  # neither is live
    doc = check_schemas(store, bk=_NoAnswer, now_ms=10_000_000)
    assert [(f.kind.value, f.version) for f in doc.findings] == [("no-live-copy", 0), ("no-live-copy", 1)]
    assert doc.findings[0].detail == "version 0's ledger: 0 of 2 copies live: 10.0.0.8:3181, 10.0.0.9:3181 down"
    assert doc.findings[0].consequence == FINDINGS[SchemaProblem.NO_LIVE_COPY]
    assert "losing another bookie" not in doc.findings[0].consequence
    [row] = list_schemas(store, bk=_NoAnswer)
    assert [v.problem for v in row.versions] == [
        "schema ledger 2000: 0 of 2 copies live: 10.0.0.8:3181, 10.0.0.9:3181 down",
        "schema ledger 2001: 0 of 2 copies live: 10.0.0.8:3181, 10.0.0.9:3181 down",
    ]


def test_check_groups_its_findings_by_kind_and_names_the_ledgers_it_did_not_judge():
    from bkctl.ops.pulsar_schema import check_schemas

    store, c = doctor_store()
    doc = check_schemas(store, bk=lambda: _Ledgers(c["ledgers"]), now_ms=2_000)
    assert doc.young == 1 and doc.young_ledgers == [2002]


def test_show_of_a_topic_whose_newest_version_is_lost_shows_the_newest_that_reads_and_says_so():
    from bkctl.ops.pulsar_schema import show_schema

    store, c = doctor_store()  # s_schema_ledger_missing: version 1's ledger is gone
    topic = c["expected"]["topic"]
    doc = show_schema(store, topic, bk=lambda: _Ledgers(c["ledgers"]))
    assert doc.version == 0 and doc.newest == 1
    assert doc.problem.startswith("the newest version, 1, does not read (schema ledger 2001: gone")
    with pytest.raises(SchemaUnreadable):  # asked for by number: no stand-in
        show_schema(store, topic, 1, bk=lambda: _Ledgers(c["ledgers"]))
    with pytest.raises(NoSuchSchema, match=f"has no schema \\(did you mean {topic}\\?\\)"):
        show_schema(store, topic[:-3], bk=lambda: _Ledgers(c["ledgers"]))


def test_list_and_show_read_each_version_from_its_ledger():
    from bkctl.ops.pulsar_schema import list_schemas, show_schema

    store, c = doctor_store("s_avro_evolved")
    bk = lambda: _Ledgers(c["ledgers"])  # noqa: E731
    [row] = list_schemas(store, bk=bk)
    assert (row.topic, row.newest) == ("persistent://public/default/vec-s-avro-evolved", 1)
    assert [(v.version, v.type, v.ledger_id, v.problem) for v in row.versions] == [
        (0, "AVRO", 2000, None),
        (1, "AVRO", 2001, None),
    ]
    doc = show_schema(store, "persistent://public/default/vec-s-avro-evolved", 0, bk=bk)
    assert [f["name"] for f in doc.definition["fields"]] == ["id", "owner", "balance", "legacy_code"]
    assert (doc.version, doc.newest, doc.hash_ok, doc.ledger_id) == (0, 1, True, 2000)
    with pytest.raises(NoSuchSchema):
        show_schema(store, "persistent://public/default/nothing", bk=bk)
