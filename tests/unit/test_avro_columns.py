"""The C twin of a typed export's AVRO values (wire/pulsar/_avrocols.c, planned by
wire/pulsar/avro_columns.py) gives the column the general path gives (fastavro, then pyarrow:
TypedView.value_column), or declines (value_columns.native_column None) where the general path must:
on generated schemas and values, on schema evolution (fields dropped, added with defaults,
promotions, aliases, enum symbols), on the shared vectors, and on every cut of a payload.  The
C twin's ``values`` (``Twins.avro_columns``) gives the general path's column and failures
either way: it hands the batches it declines to its Python twin itself.  With fast paths off the
record holds the Python twin alone."""

from __future__ import annotations

import decimal
import io
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bkctl.wire import fastpath
from bkctl.wire.pulsar import schema as S
from bkctl.wire.pulsar import value_columns
from bkctl.wire.pulsar.avro_types import as_numbers
from bkctl.wire.pulsar.typed import TypedView, ValueBatch
from tests.support import c_twins

fastavro = pytest.importorskip("fastavro")
pa = pytest.importorskip("pyarrow")

TWIN = fastpath.build(True).avro_columns
AVROCOLS = TWIN.c
pytestmark = c_twins.needs_c(AVROCOLS, "bkctl.wire.pulsar._avrocols")


def stored(doc, version=0, kind="AVRO"):
    return S.StoredSchema("t/ns/x", "", kind, json.dumps(doc).encode(), version, False)


def avro(doc, value) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(as_numbers(doc)), value)
    return buf.getvalue()


def both(view: TypedView, versions: list, payloads: list, skip=None):
    """The C decoder's column (None: it leaves the batch to the general path) and the general path's
    (column, failures); the C twin's ``values`` gives the general path's column and failures."""
    batch = ValueBatch(versions, pa.array(payloads, pa.binary()), skip)
    native = value_columns.native_column(AVROCOLS, view, batch)
    column, failures = view.value_column(batch)
    twin_column, twin_failures = TWIN.values(view, batch)
    # (fastavro's messages name the BytesIO they read: the rows, not the words, are compared)
    assert twin_column.equals(native if native is not None else column) and twin_failures.keys() == failures.keys()
    return native, column, failures


def decoded(view: TypedView, payloads: list) -> object:
    """The C decoder's column of ``payloads`` (of the reader's version), None where it declines."""
    return value_columns.native_column(AVROCOLS, view, ValueBatch([None], pa.array(payloads, pa.binary())))


def same(native, general) -> None:
    native.validate(full=True)
    assert native.type == general.type
    assert native.equals(general), (native, general)


# ---------------------------------------------------------------- generated schemas and values


@st.composite
def schema_and_values(draw, depth=0, names=None):
    """An Avro schema (JSON) of the types real Pulsar AVRO schemas use and a strategy of its values."""
    names = names if names is not None else [0]

    def name():
        names[0] += 1
        return f"N{names[0]}"

    leaves = [
        "boolean",
        "int",
        "long",
        "float",
        "double",
        "bytes",
        "string",
        "enum",
        "fixed",
        "date",
        "timestamp-millis",
        "timestamp-micros",
        "time-millis",
        "local-timestamp-millis",
        "decimal",
    ]
    kinds = leaves + (["record", "array", "map", "nullable"] if depth < 3 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "boolean":
        return kind, st.booleans()
    if kind == "int":
        return kind, st.integers(-(2**31), 2**31 - 1)
    if kind == "long":
        return kind, st.integers(-(2**63), 2**63 - 1)
    if kind == "float":
        return kind, st.floats(width=32, allow_nan=False)
    if kind == "double":
        return kind, st.floats(allow_nan=False)
    if kind == "bytes":
        return kind, st.binary(max_size=12)
    if kind == "string":
        return kind, st.text(max_size=8)
    if kind == "enum":
        symbols = draw(st.lists(st.sampled_from(["A", "B", "C", "D", "EE"]), min_size=1, max_size=5, unique=True))
        return {"type": "enum", "name": name(), "symbols": symbols}, st.sampled_from(symbols)
    if kind == "fixed":
        size = draw(st.integers(0, 6))
        return {"type": "fixed", "name": name(), "size": size}, st.binary(min_size=size, max_size=size)
    if kind == "date":
        return {"type": "int", "logicalType": "date"}, st.integers(-100_000, 100_000)
    if kind in ("timestamp-millis", "timestamp-micros", "local-timestamp-millis"):
        return {"type": "long", "logicalType": kind}, st.integers(-(2**50), 2**50)
    if kind == "time-millis":
        return {"type": "int", "logicalType": kind}, st.integers(0, 86_400_000 - 1)
    if kind == "decimal":
        precision = draw(st.integers(1, 38))
        scale = draw(st.integers(0, precision))
        digits = st.integers(-(10**precision) + 1, 10**precision - 1)
        values = digits.map(lambda u: decimal.Decimal(u).scaleb(-scale, decimal.Context(prec=80)))
        if draw(st.booleans()):
            return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}, values
        return {
            "type": "fixed",
            "name": name(),
            "size": 16,
            "logicalType": "decimal",
            "precision": precision,
            "scale": scale,
        }, values
    if kind == "array":
        items, values = draw(schema_and_values(depth + 1, names))
        return {"type": "array", "items": items}, st.lists(values, max_size=3)
    if kind == "map":
        items, values = draw(schema_and_values(depth + 1, names))
        return {"type": "map", "values": items}, st.dictionaries(st.text(max_size=4), values, max_size=3)
    if kind == "nullable":
        inner, values = draw(schema_and_values(depth + 1, names).filter(lambda s: not isinstance(s[0], list)))
        branches = ["null", inner] if draw(st.booleans()) else [inner, "null"]
        return branches, st.none() | values
    count = draw(st.integers(1, 4))
    fields, strategies = [], {}
    for i in range(count):
        t, values = draw(schema_and_values(depth + 1, names))
        fields.append({"name": f"f{i}", "type": t})
        strategies[f"f{i}"] = values
    return {"type": "record", "name": name(), "fields": fields}, st.fixed_dictionaries(strategies)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_generated_schemas_and_values_decode_as_the_general_path_does(data):
    doc, values = data.draw(schema_and_values())
    if not isinstance(doc, dict) or doc.get("type") != "record":
        doc = {"type": "record", "name": "Top", "fields": [{"name": "v", "type": doc}]}
        values = st.fixed_dictionaries({"v": values})
    rows = data.draw(st.lists(values, min_size=1, max_size=6))
    view = TypedView({0: stored(doc)})
    payloads = [avro(doc, r) for r in rows]
    native, general, failures = both(view, [S.version_bytes(0)] * len(rows), payloads)
    assert not failures
    # arrays and maps of zero-width items are the general path's by design (see below)
    assert native is not None or holds_zero_width_items(doc), doc
    if native is not None:
        same(native, general)
    # every cut of a payload: the twin reads it as the general path does, or leaves the batch to it
    for cut in range(len(payloads[0])):
        native, general, failures = both(view, [S.version_bytes(0)], [payloads[0][:cut]])
        if native is not None:
            assert not failures
            same(native, general)


# ---------------------------------------------------------------- evolution

_PROMOTIONS = {"int": ["long", "float", "double"], "long": ["double"], "float": ["double"], "string": ["bytes"]}
_ADDED = [
    ("null_long", ["null", "long"], None),
    ("int", "int", 3),
    ("text", "string", "d"),
    ("flag", "boolean", True),
    ("list", {"type": "array", "items": "int"}, []),
    ("dict", {"type": "map", "values": "string"}, {}),
    ("ratio", "double", 2),
]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_generated_evolutions_read_as_fastavro_resolves_them(data):
    """A generated writer record and a reader made from it as schemas evolve: fields dropped,
    promoted, made nullable, renamed with an alias, added with a default."""
    fields, values, names = [], {}, [0]
    for i in range(data.draw(st.integers(1, 5))):
        t, v = data.draw(schema_and_values(depth=1, names=names))
        fields.append({"name": f"f{i}", "type": t})
        values[f"f{i}"] = v
    writer = {"type": "record", "name": "R", "fields": fields}
    reader_fields = []
    for f in fields:
        how = data.draw(st.sampled_from(["keep", "drop", "promote", "nullable", "alias"]))
        if how == "drop":
            continue
        if how == "promote" and isinstance(f["type"], str) and f["type"] in _PROMOTIONS:
            reader_fields.append({"name": f["name"], "type": data.draw(st.sampled_from(_PROMOTIONS[f["type"]]))})
        elif how == "nullable" and not isinstance(f["type"], list):
            reader_fields.append({"name": f["name"], "type": ["null", f["type"]], "default": None})
        elif how == "alias":
            reader_fields.append({"name": f["name"] + "_new", "type": f["type"], "aliases": [f["name"]]})
        else:
            reader_fields.append(f)
    for name, t, default in data.draw(st.lists(st.sampled_from(_ADDED), max_size=3, unique_by=lambda a: a[0])):
        reader_fields.append({"name": f"added_{name}", "type": t, "default": default})
    reader = {"type": "record", "name": "R", "fields": reader_fields or [{"name": "z", "type": "int", "default": 1}]}
    rows = data.draw(st.lists(st.fixed_dictionaries(values), min_size=1, max_size=4))
    view = TypedView({0: stored(writer, 0), 1: stored(reader, 1)})
    versions = [S.version_bytes(0)] * len(rows) + [S.version_bytes(1)]
    payloads = [avro(writer, r) for r in rows] + [avro(reader, view.decode(S.version_bytes(0), avro(writer, rows[0])))]
    native, general, failures = both(view, versions, payloads)
    assert not failures
    # the C twin reads all of these but arrays and maps of items that take no bytes, which it
    # leaves to the general path by design (a corrupt count must not make it append 2**48 slots)
    assert native is not None or holds_zero_width_items(writer), (writer, reader)
    if native is not None:
        same(native, general)


def zero_width(t) -> bool:
    """An Avro type whose values take no bytes: null, fixed(0), a record of such fields."""
    if t == "null":
        return True
    if isinstance(t, dict) and t.get("type") == "fixed":
        return t["size"] == 0
    if isinstance(t, dict) and t.get("type") == "record":
        return all(zero_width(f["type"]) for f in t["fields"])
    return False


def holds_zero_width_items(t) -> bool:
    """Whether ``t`` has, anywhere inside, an array or map of zero-width items."""
    if isinstance(t, list):
        return any(holds_zero_width_items(b) for b in t)
    if not isinstance(t, dict):
        return False
    kind = t.get("type")
    if kind == "array":
        return zero_width(t["items"]) or holds_zero_width_items(t["items"])
    if kind == "map":
        return zero_width(t["values"]) or holds_zero_width_items(t["values"])
    if kind == "record":
        return any(holds_zero_width_items(f["type"]) for f in t["fields"])
    return holds_zero_width_items(kind)


def test_zero_width_items_are_told_apart():
    fixed0 = {"type": "fixed", "name": "F0", "size": 0}
    assert holds_zero_width_items({"type": "array", "items": fixed0})
    assert holds_zero_width_items(
        {"type": "record", "name": "R", "fields": [{"name": "m", "type": {"type": "map", "values": "null"}}]}
    )
    assert not holds_zero_width_items({"type": "array", "items": {"type": "fixed", "name": "F1", "size": 1}})
    assert not holds_zero_width_items({"type": "array", "items": "int"})


ORDER_V0 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "amount", "type": "float"},
        {
            "name": "gone",
            "type": {
                "type": "map",
                "values": {
                    "type": "record",
                    "name": "G",
                    "fields": [
                        {"name": "x", "type": ["null", "string"]},
                        {"name": "y", "type": {"type": "array", "items": "long"}},
                    ],
                },
            },
        },
        {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID", "LOST"]}},
        {
            "name": "customer",
            "type": {
                "type": "record",
                "name": "Customer",
                "fields": [{"name": "name", "type": "string"}, {"name": "tier", "type": "int"}],
            },
        },
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "old_name", "type": "string"},
    ],
}
ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": "double"},
        {
            "name": "state",
            "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID", "SHIPPED"], "default": "NEW"},
        },
        {
            "name": "customer",
            "type": {
                "type": "record",
                "name": "Customer",
                "fields": [
                    {"name": "name", "type": "string"},
                    {"name": "tier", "type": "long"},
                    {"name": "vip", "type": "boolean", "default": False},
                ],
            },
        },
        {"name": "note", "type": ["string", "null"], "default": "none"},
        {"name": "new_name", "type": "string", "aliases": ["old_name"]},
        {"name": "added", "type": ["null", "long"], "default": None},
        {"name": "count", "type": "int", "default": 7},
        {"name": "ratio", "type": "float", "default": 1},
        {"name": "label", "type": "string", "default": "x"},
        {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
        {"name": "attrs", "type": {"type": "map", "values": "int"}, "default": {}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}, "default": 0},
    ],
}


def order_v0(i):
    return {
        "id": i,
        "amount": i / 4,
        "gone": {"k": {"x": None if i % 2 else "a", "y": [i, -i]}},
        "state": ("NEW", "PAID", "LOST")[i % 3],
        "customer": {"name": f"c{i}", "tier": i % 5},
        "note": None if i % 3 else f"n{i}",
        "old_name": f"o{i}",
    }


def test_an_evolved_topic_reads_each_version_as_the_newest_one_as_the_general_path_does():
    view = TypedView({0: stored(ORDER_V0, 0), 1: stored(ORDER_V1, 1)})
    v1 = {
        "id": 10,
        "amount": 2.5,
        "state": "SHIPPED",
        "customer": {"name": "z", "tier": 3, "vip": True},
        "note": "yes",
        "new_name": "q",
        "added": 5,
        "count": 1,
        "ratio": 0.5,
        "label": "l",
        "tags": ["a"],
        "attrs": {"k": 1},
        "at": 99,
    }
    versions = [S.version_bytes(0)] * 6 + [S.version_bytes(1), None]
    payloads = [avro(ORDER_V0, order_v0(i)) for i in range(6)] + [avro(ORDER_V1, v1)] * 2
    skip = [None] * 7 + ["an error row"]
    native, general, failures = both(view, versions, payloads, skip)
    assert not failures and native is not None
    same(native, general)
    got = native.to_pylist()
    assert got[2]["state"] == "NEW" and got[1]["state"] == "PAID"  # LOST is not the reader's: its default
    assert got[0]["customer"] == {"name": "c0", "tier": 0, "vip": False} and got[0]["new_name"] == "o0"
    assert (got[0]["count"], got[0]["ratio"], got[0]["tags"], got[0]["attrs"]) == (7, 1.0, [], [])
    assert got[6]["added"] == 5 and got[7] is None
    # by the older version instead: its own messages as they are; the newer ones cannot be (no
    # default for "gone"), and a batch holding one is the general path's, which says so
    old = TypedView({0: stored(ORDER_V0, 0), 1: stored(ORDER_V1, 1)}, reader=0)
    native, general, failures = both(old, versions[:6], payloads[:6])
    assert not failures and native is not None
    same(native, general)
    native, general, failures = both(old, versions[5:7], payloads[5:7])
    assert native is None and failures[1].startswith("schema version 1 cannot be read as version 0: gone")


def test_what_the_twin_does_not_read_is_left_to_the_general_path_and_its_error_rows():
    view = TypedView({0: stored(ORDER_V0, 0), 1: stored(ORDER_V1, 1)})
    good = avro(ORDER_V0, order_v0(1))
    # a truncated payload, a version not in the registry: the batch is the general path's
    for versions, payloads in (
        ([S.version_bytes(0)] * 2, [good, good[:-3]]),
        ([S.version_bytes(0), S.version_bytes(9)], [good, good]),
    ):
        native, general, failures = both(view, versions, payloads)
        assert native is None and list(failures) == [1]
    # an enum symbol neither the reader has nor its default covers: fastavro's error
    no_default = {"type": "enum", "name": "State", "symbols": ["NEW", "PAID", "SHIPPED"]}
    strict = dict(
        ORDER_V1, fields=[dict(f, type=no_default) if f["name"] == "state" else f for f in ORDER_V1["fields"]]
    )
    view = TypedView({0: stored(ORDER_V0, 0), 1: stored(strict, 1)})
    native, general, failures = both(view, [S.version_bytes(0)], [avro(ORDER_V0, order_v0(2))])
    assert native is None and "LOST not found in reader symbol list" in failures[0]
    # a union of several types, a uuid: read as JSON text and str by the general path alone
    for t in (["null", "int", "string"], {"type": "string", "logicalType": "uuid"}):
        doc = {"type": "record", "name": "R", "fields": [{"name": "u", "type": t}]}
        view = TypedView({0: stored(doc)})
        value = {"u": "3e6c1f5e-55a4-4b8e-9d54-0a2b7a6f8f10"}
        assert decoded(view, [avro(doc, value)]) is None


def test_an_array_claiming_more_items_than_bytes_is_left_to_the_general_path():
    empty = {"type": "record", "name": "E", "fields": []}
    doc = {"type": "record", "name": "R", "fields": [{"name": "n", "type": {"type": "array", "items": empty}}]}
    view = TypedView({0: stored(doc)})
    assert decoded(view, [avro(doc, {"n": [{}] * 3})]) is None
    huge = b"\x80\x80\x80\x80\x80\x80\x80\x01\x00"  # 2**48 empty records: no memory spent on them here
    assert decoded(view, [huge]) is None
    assert decoded(view, [b"\x00"]).to_pylist() == [{"n": []}]
    three = avro(doc, {"n": [{}] * 3})  # declined by the C decoder: the C twin hands it to the general path
    column, failures = TWIN.values(view, ValueBatch([None, None], pa.array([three, b"\x00"], pa.binary())))
    assert column.to_pylist() == [{"n": [{}] * 3}, {"n": []}] and not failures


def test_with_fast_paths_off_the_general_path_alone_decodes():
    general = fastpath.build(False).avro_columns
    assert general is value_columns.PYTHON and general.c is None and TWIN.c is not None
    view = TypedView({0: stored(ORDER_V0)})
    batch = ValueBatch([None], pa.array([avro(ORDER_V0, order_v0(0))], pa.binary()))
    column, failures = general.values(view, batch)
    assert not failures and column.equals(value_columns.native_column(AVROCOLS, view, batch))


@pytest.mark.parametrize("case", ["s_avro", "s_avro_evolved"])
def test_the_shared_vectors_read_as_the_general_path_reads_them(case):
    from tests.unit.test_pulsar_schema import _stored_messages, view_of

    for reader in (None, 0):
        view, c = view_of(case, reader=reader)
        messages = _stored_messages(c)
        versions, payloads = [m[0] for m in messages], [m[1] for m in messages]
        native, general, failures = both(view, versions, payloads)
        assert not failures and native is not None
        same(native, general)
