"""Avro schemas as Arrow types, and JSON documents shaped by them: the typed export reads AVRO and
JSON values (and their versions) by Avro definitions, and its ``value`` column takes the Arrow type
this module gives.

Avro types become Arrow types so: records structs, arrays lists, maps maps (string keys), enums
strings, ``[null, T]`` T (nullable), other unions the value as JSON text, fixed and bytes binary,
decimal decimal128, date date32, time-* longs, timestamp-* UTC timestamps (local-timestamp-*
without zone), uuid strings; a recursive record is JSON text.  The integer-backed logical types are
read as their numbers (:func:`as_numbers`), which those Arrow types take.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

from .errors import DecodeError, Untyped

__all__ = ["as_numbers", "avro_arrow", "avro_incompatible", "json_shaper"]

#: a function that makes fastavro's (or a shaped JSON document's) values fit their Arrow type
Fix = Callable[[Any], Any]

#: Logical types over int and long whose values are read as those numbers: Arrow
#: takes them so (days, milliseconds, microseconds), and fastavro's conversion
#: to datetime objects would cost as much as the rest of the decoding.
NUMBER_LOGICAL = frozenset(
    {
        "date",
        "time-millis",
        "time-micros",
        "timestamp-millis",
        "timestamp-micros",
        "local-timestamp-millis",
        "local-timestamp-micros",
    }
)
_UNIT = {
    "timestamp-millis": "ms",
    "timestamp-micros": "us",
    "local-timestamp-millis": "ms",
    "local-timestamp-micros": "us",
}


def as_numbers(doc: Any) -> Any:
    """An Avro schema (JSON) with the :data:`NUMBER_LOGICAL` types left as their int or long."""
    if isinstance(doc, list):
        return [as_numbers(d) for d in doc]
    if not isinstance(doc, dict):
        return doc
    if doc.get("logicalType") in NUMBER_LOGICAL and doc.get("type") in ("int", "long"):
        return doc["type"]
    out = dict(doc)
    for key in ("type", "items", "values"):
        if key in out and not isinstance(out[key], str):
            out[key] = as_numbers(out[key])
    if "fields" in out:
        out["fields"] = [{**f, "type": as_numbers(f["type"])} for f in out["fields"]]
    return out


def avro_arrow(schema: Any) -> tuple[Any, Fix | None]:
    """The Arrow type of a parsed Avro schema and the function that makes
    fastavro's values fit it (None: they fit as they are)."""
    names: dict[str, Any] = {}
    return _avro_arrow(schema, names, ())


def _json_text(value: Any) -> str:
    def default(o: Any) -> str:
        if isinstance(o, (bytes, bytearray)):
            return base64.b64encode(o).decode()
        return str(o)

    return json.dumps(value, default=default, sort_keys=True)


def _optional_json_text(value: Any) -> str | None:
    return None if value is None else _json_text(value)


def _avro_arrow(s: Any, names: dict[str, Any], stack: tuple[str, ...]) -> tuple[Any, Fix | None]:
    import pyarrow as pa

    if isinstance(s, str):
        simple = {
            "null": pa.null(),
            "boolean": pa.bool_(),
            "int": pa.int32(),
            "long": pa.int64(),
            "float": pa.float32(),
            "double": pa.float64(),
            "bytes": pa.binary(),
            "string": pa.string(),
        }
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
        return pa.string(), _optional_json_text
    kind = s.get("type")
    logical = s.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed") and int(s.get("precision", 0)) <= 38:
        if kind == "fixed":
            names[s["name"]] = s
        return pa.decimal128(int(s["precision"]), int(s.get("scale", 0))), None
    # the integer-backed logical types are read as their numbers (:data:`NUMBER_LOGICAL`), which these take
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

        def fix_record(v: Any) -> Any:
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
        return pa.list_(t), None if fix is None else _each_item(fix)
    if kind == "map":
        t, fix = _avro_arrow(s["values"], names, stack)
        return pa.map_(pa.string(), t), None if fix is None else _each_value(fix)
    return _avro_arrow(kind, names, stack)


def _each_item(fix: Fix) -> Fix:
    return lambda v: None if v is None else [fix(x) for x in v]


def _each_value(fix: Fix) -> Fix:
    return lambda v: None if v is None else {k: fix(x) for k, x in v.items()}


def _field_value(doc: dict[str, Any], field: dict[str, Any]) -> Any:
    """A record field's value in a JSON object: by its name, else by one of its
    aliases (a field renamed since), else its default."""
    if field["name"] in doc:
        return doc[field["name"]]
    for alias in field.get("aliases", ()):
        if alias in doc:
            return doc[alias]
    return field.get("default")


def json_shaper(schema: Any) -> Fix:
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
        if s.get("logicalType") in NUMBER_LOGICAL and isinstance(v, (int, float)):
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


def avro_incompatible(writer: Any, reader: Any) -> str | None:
    """Why data of ``writer`` cannot be read with ``reader`` by Avro's rules,
    checked on the schemas (None: it can); fastavro checks the rest as it reads."""

    def check(w: Any, r: Any, path: str) -> str | None:
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
