"""AVRO values straight into the typed export's ``value`` column: the plan the C twin reads by.

The general path of a typed export reads each message with fastavro into
Python values and has pyarrow convert them (:meth:`~.typed.TypedView.value_column`).
Its C twin, ``_avrocols.Decoder`` (``Twins.avro_columns`` of
:mod:`bkctl.wire.fastpath`: :mod:`.value_columns`), decodes a batch's payloads
into Arrow buffers in one pass; this module says how: :func:`columns_of` lays
out the reader's columns from the value's Arrow type, :func:`plan` says how
one writer version's bytes land in them (Avro's resolution rules, as fastavro
applies them: fields matched by name or alias, the writer's others skipped,
the reader's others their defaults, promotions, enum symbols by name, unions
with null), and :func:`wrap` makes the decoder's buffers an Arrow array.

A plan is only made where the C twin reads exactly as fastavro and pyarrow
do; :class:`Unsupported` says where it would not (a union of several types, a
recursive record, uuid, a long promoted to float, a default that is not a
plain value, names that do not match, ...), and that version's messages then
take the general path -- as does any batch holding a payload the decoder will
not read (``Decoder.decode`` returns its row), so that the general path's
error rows say what is wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

__all__ = ["AvroDecoder", "AvrocolsModule", "ColumnNode", "Plan", "Unsupported", "columns_of", "plan", "wrap"]

#: a plan as the C twin takes it: ``(kind, column, arg)`` (wire/pulsar/_avrocols.c)
Plan = tuple[Any, ...]


class AvroDecoder(Protocol):
    """A view's decoder of AVRO values (``_avrocols.Decoder``, made by :meth:`TypedView.native_decoder
    <.typed.TypedView.native_decoder>`): ``decode(slots, offsets, data, first)`` -> each
    column's buffers (what :func:`wrap` takes), or the index of a row it does not
    decode."""

    def decode(self, slots: bytes, offsets: bytes, data: bytes, first: int, /) -> tuple[Any, ...] | int: ...


class AvrocolsModule(Protocol):
    """The slot ``_avrocols`` (C) fills: what :func:`.value_columns.twins_of` takes; the twin
    selector holds the C module's stub to it (:mod:`bkctl.wire.fastpath`, under TYPE_CHECKING: mypy fails when the
    stub does not fit)."""

    @property
    def DECIMALS(self) -> int: ...  # noqa: N802 - the C module's constant

    @property
    def Decoder(self) -> Callable[[tuple[Any, ...], tuple[Any, ...]], AvroDecoder]: ...  # noqa: N802 - its class


# the C twin's plan kinds and column kinds (wire/pulsar/_avrocols.c)
(
    NUL,
    FAIL,
    BOOL,
    INT,
    LONG,
    FLOAT,
    DOUBLE,
    BYTES,
    STRING,
    FIXED,
    ENUM,
    DEC_BYTES,
    DEC_FIXED,
    RECORD,
    ARRAY,
    MAP,
    UNION,
) = range(17)
C_BOOL, C_I32, C_I64, C_F32, C_F64, C_BIN, C_DEC, C_STRUCT, C_LIST, C_MAP = range(10)
_NUMERIC = {C_I32, C_I64, C_F32, C_F64}
_PRIMITIVE_OPS = {
    "boolean": BOOL,
    "int": INT,
    "long": LONG,
    "float": FLOAT,
    "double": DOUBLE,
    "bytes": BYTES,
    "string": STRING,
}
#: the column kinds each writer primitive may land in (Avro's promotions, where the
#: C twin's conversion is the one pyarrow makes of fastavro's value)
_LANDS = {
    "boolean": {C_BOOL},
    "int": _NUMERIC,
    "long": {C_I64, C_F64},
    "float": {C_F32, C_F64},
    "double": {C_F64},
    "bytes": {C_BIN},
    "string": {C_BIN},
}
_NAMED = ("record", "error", "enum", "fixed")


class Unsupported(Exception):
    """Not read by the C twin: the general path reads it."""


class ColumnNode(NamedTuple):
    """One column of the reader's layout: its index in the decoder (``at``), kind, Arrow type, children."""

    at: int
    kind: int
    arrow_type: Any
    children: tuple[ColumnNode, ...]


def columns_of(arrow_type: Any) -> tuple[ColumnNode, tuple[tuple[int, tuple[int, ...]], ...]]:
    """The column tree of a value of ``arrow_type`` and the decoder's column
    table (``(kind, child indexes)``, parents before children)."""
    import pyarrow as pa

    table: list[list[Any]] = []

    def node(t: Any) -> ColumnNode:
        index = len(table)
        table.append([None, ()])
        children: tuple[ColumnNode, ...] = ()
        flat = [
            kind
            for is_kind, kind in (
                (pa.types.is_boolean, C_BOOL),
                (pa.types.is_int32, C_I32),
                (pa.types.is_date32, C_I32),
                (pa.types.is_int64, C_I64),
                (pa.types.is_timestamp, C_I64),
                (pa.types.is_float32, C_F32),
                (pa.types.is_float64, C_F64),
                (pa.types.is_string, C_BIN),
                (pa.types.is_binary, C_BIN),
                (pa.types.is_decimal128, C_DEC),
            )
            if is_kind(t)
        ]
        if flat:
            kind = flat[0]
        elif pa.types.is_struct(t):
            kind = C_STRUCT
            children = tuple(node(t.field(i).type) for i in range(t.num_fields))
        elif pa.types.is_map(t):
            kind = C_MAP
            children = (node(t.key_type), node(t.item_type))
        elif pa.types.is_list(t):
            kind = C_LIST
            children = (node(t.value_type),)
        else:
            raise Unsupported(f"an Arrow {t} column")
        table[index] = [kind, tuple(c.at for c in children)]
        return ColumnNode(index, kind, t, children)

    root = node(arrow_type)
    return root, tuple((k, c) for k, c in table)


class _Names:
    """The named types of one side's schema, by full name."""

    def __init__(self) -> None:
        self.names: dict[str, Any] = {}

    def resolve(self, s: Any) -> Any:
        if isinstance(s, dict):
            if s.get("type") in _NAMED and "name" in s:
                self.names.setdefault(s["name"], s)
            return s
        if isinstance(s, str) and s in self.names:
            return self.names[s]
        return s


def _kind(s: Any) -> str:
    if isinstance(s, list):
        return "union"
    if isinstance(s, dict):
        t = s["type"]
        return t if isinstance(t, str) else _kind(t)
    return str(s)


def _same_name(w: dict[str, Any], r: dict[str, Any]) -> bool:
    """fastavro's rule for a named type's match: the unqualified names equal, or
    the writer's name among the reader's aliases."""
    wn, rn = w["name"], r["name"]
    aliases = r.get("aliases", [])
    return wn.split(".")[-1] == rn.split(".")[-1] or wn in aliases or wn.split(".")[-1] in aliases


def plan(writer: Any, reader: Any, root: ColumnNode, decimals: bool = True) -> Plan:
    """The plan of a writer version's values read as the reader's into the
    columns under ``root`` (parsed Avro schemas, the integer-backed logical
    types as numbers: :func:`~.avro_types.as_numbers`); :class:`Unsupported`."""
    wn, rn = _Names(), _Names()
    stack: list[str] = []

    def skip(w: Any) -> Plan:
        w = wn.resolve(w)
        k = _kind(w)
        if k == "union":
            return (UNION, -1, tuple(skip(b) for b in w))
        if k == "null":
            return (NUL, -1, 0)
        if k in _PRIMITIVE_OPS:
            return (_PRIMITIVE_OPS[k], -1, 0) if k != "string" else (STRING, -1, 1)
        if k in ("record", "error"):
            if w["name"] in stack:
                raise Unsupported("a recursive record")
            stack.append(w["name"])
            try:
                return (RECORD, -1, (tuple(skip(f["type"]) for f in w["fields"]), ()))
            finally:
                stack.pop()
        if k == "enum":
            return (ENUM, -1, (None,) * len(w["symbols"]))
        if k == "fixed":
            return (FIXED, -1, w["size"])
        if k == "array":
            return (ARRAY, -1, skip(w["items"]))
        if k == "map":
            return (MAP, -1, (0, skip(w["values"])))
        raise Unsupported(f"Avro type {k}")

    def one(w: Any, r: Any, col: ColumnNode) -> Plan:
        w, r = wn.resolve(w), rn.resolve(r)
        wk, rk = _kind(w), _kind(r)
        if wk == "union":
            if rk == "union":
                targets = [b for b in r if b != "null"]
                if len(targets) != 1:
                    raise Unsupported("a union of several types")
                branches = []
                for b in w:
                    if _kind(wn.resolve(b)) == "null":
                        branches.append((NUL, col.at, 0) if "null" in r else (FAIL, -1, 0))
                    else:
                        branches.append(one(b, targets[0], col))
                return (UNION, col.at, tuple(branches))
            branches = [(FAIL, -1, 0) if _kind(wn.resolve(b)) == "null" else one(b, r, col) for b in w]
            return (UNION, col.at, tuple(branches))
        if rk == "union":
            targets = [b for b in r if b != "null"]
            if wk == "null":
                if "null" not in r:
                    raise Unsupported("null read as a union without null")
                return (NUL, col.at, 0)
            if len(targets) != 1:
                raise Unsupported("a union of several types")
            return one(w, targets[0], col)
        if wk == "null" or rk == "null":
            raise Unsupported("a null type")
        logical_w = w.get("logicalType") if isinstance(w, dict) else None
        logical_r = r.get("logicalType") if isinstance(r, dict) else None
        if logical_w == "decimal" or logical_r == "decimal":
            if col.kind != C_DEC or not decimals or logical_w != logical_r or wk != rk:
                raise Unsupported("a decimal read as another type")
            if (w.get("precision"), w.get("scale", 0)) != (r.get("precision"), r.get("scale", 0)):
                raise Unsupported("decimals of another precision or scale")
            if wk == "fixed":
                if w["size"] != r["size"] or not _same_name(w, r):
                    raise Unsupported("fixed decimals of another size or name")
                return (DEC_FIXED, col.at, (w["size"], int(r["precision"])))
            return (DEC_BYTES, col.at, int(r["precision"]))
        if logical_w or logical_r:  # the integer-backed ones are numbers by now (avro_types.as_numbers)
            raise Unsupported(f"logical type {logical_w or logical_r}")
        if wk in _PRIMITIVE_OPS:
            if rk not in _PRIMITIVE_OPS or col.kind not in _LANDS[wk]:
                raise Unsupported(f"{wk} read as {rk}")
            if wk == "bytes" and rk == "string":
                raise Unsupported("bytes read as a string")
            if wk != rk and not _promotes(wk, rk):
                raise Unsupported(f"{wk} read as {rk}")
            if wk == "string":
                return (STRING, col.at, 1)
            return (_PRIMITIVE_OPS[wk], col.at, 0)
        if wk != rk:
            raise Unsupported(f"{wk} read as {rk}")
        if wk in ("record", "error"):
            if col.kind != C_STRUCT or not _same_name(w, r):
                raise Unsupported("records of other names")
            if w["name"] in stack:
                raise Unsupported("a recursive record")
            stack.append(w["name"])
            try:
                by_name = {f["name"]: i for i, f in enumerate(r["fields"])}
                by_alias = {a: i for i, f in enumerate(r["fields"]) for a in f.get("aliases", [])}
                read, fields = set(), []
                for f in w["fields"]:
                    i = by_name.get(f["name"], by_alias.get(f["name"]))
                    if i is not None and i in read:
                        raise Unsupported(f"two of the writer's fields are the reader's {r['fields'][i]['name']}")
                    if i is None:
                        fields.append(skip(f["type"]))
                        continue
                    read.add(i)
                    fields.append(one(f["type"], r["fields"][i]["type"], col.children[i]))
                defaults = []
                for i, f in enumerate(r["fields"]):
                    if i not in read:
                        if "default" not in f:
                            raise Unsupported(f"field {f['name']} has no default")
                        defaults.append((col.children[i].at, _default(f["default"], col.children[i])))
                return (RECORD, col.at, (tuple(fields), tuple(defaults)))
            finally:
                stack.pop()
        if wk == "enum":
            if col.kind != C_BIN or not _same_name(w, r):
                raise Unsupported("enums of other names")
            symbols = set(r["symbols"])
            default = r.get("default")
            return (
                ENUM,
                col.at,
                tuple(s.encode() if s in symbols else (default.encode() if default else None) for s in w["symbols"]),
            )
        if wk == "fixed":
            if col.kind != C_BIN or w["size"] != r["size"] or not _same_name(w, r):
                raise Unsupported("fixed of another size or name")
            return (FIXED, col.at, w["size"])
        if wk == "array":
            if col.kind != C_LIST:
                raise Unsupported("an array read as another column")
            return (ARRAY, col.at, one(w["items"], r["items"], col.children[0]))
        if wk == "map":
            if col.kind != C_MAP:
                raise Unsupported("a map read as another column")
            return (MAP, col.at, (col.children[0].at, one(w["values"], r["values"], col.children[1])))
        raise Unsupported(f"Avro type {wk}")

    return one(writer, reader, root)


def _promotes(w: str, r: str) -> bool:
    return (w, r) in {
        ("int", "long"),
        ("int", "float"),
        ("int", "double"),
        ("long", "double"),
        ("float", "double"),
        ("string", "bytes"),
    }


def _default(value: Any, col: ColumnNode) -> Any:
    """A reader field's default as the C twin stores it in ``col``; :class:`Unsupported`."""
    if value is None:
        return None
    kind = col.kind
    if kind == C_BOOL and isinstance(value, bool):
        return value
    if kind in (C_I32, C_I64) and isinstance(value, int) and not isinstance(value, bool):
        bits = 31 if kind == C_I32 else 63
        if -(1 << bits) <= value < (1 << bits):
            return value
    if kind in (C_F32, C_F64) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if kind == C_BIN and isinstance(value, str):
        import pyarrow as pa

        if pa.types.is_string(col.arrow_type):  # a string or an enum symbol (bytes' defaults are not read here)
            return value.encode()
    if kind in (C_LIST, C_MAP) and value in ([], {}):
        return ()
    raise Unsupported(f"a default {value!r}")


def wrap(root: ColumnNode, columns: tuple[Any, ...]) -> Any:
    """The decoder's buffers (``(length, null_count, validity | None, buffers)``
    by column index) as an Arrow array of ``root``'s type."""
    import pyarrow as pa

    def array(node: ColumnNode) -> Any:
        length, nulls, validity, buffers = columns[node.at]
        bitmap = None if validity is None else pa.py_buffer(validity)
        bufs = [bitmap] + [pa.py_buffer(b) for b in buffers]
        if node.kind == C_STRUCT:
            return pa.Array.from_buffers(
                node.arrow_type, length, bufs, null_count=nulls, children=[array(c) for c in node.children]
            )
        if node.kind == C_LIST:
            return pa.Array.from_buffers(
                node.arrow_type, length, bufs, null_count=nulls, children=[array(node.children[0])]
            )
        if node.kind == C_MAP:
            keys, values = (array(c) for c in node.children)
            entries = pa.StructArray.from_arrays(
                [keys, values], fields=[node.arrow_type.key_field, node.arrow_type.item_field]
            )
            return pa.Array.from_buffers(node.arrow_type, length, bufs, null_count=nulls, children=[entries])
        return pa.Array.from_buffers(node.arrow_type, length, bufs, null_count=nulls)

    return array(root)
