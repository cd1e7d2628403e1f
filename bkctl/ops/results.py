"""An operation's result as the JSON document ``--json`` prints: the one conversion.

An operation returns a named type -- a frozen dataclass, its states Enums -- and the commands,
the shell and scripts read its attributes; :func:`to_json` is the only place that turns one into
the document users' cron jobs parse (``bkctl.app.encode_json`` calls it for any dataclass it
meets, so a command hands the result itself to ``emit``): each field a key, named as the field,
its value converted the same way (a nested result, a list of them, an Enum's value); a field
declared with :func:`omitted_when_none` is left out of the document while it is None (a key the
document has only sometimes, ``lac_error``), one with :func:`omitted_unless` while another field is
false, one declared with :func:`not_in_json` never appears
(what the human output needs beside the document).  Keys are sorted on output, so the fields'
order is free.  A type of wire's with its own ``to_json`` method (an owner, a topic's state) is
written by that method."""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any

#: a field's metadata: left out of the document while None
_OMIT_NONE = {"json": "omit-none"}
#: a field's metadata: never in the document
_HIDDEN = {"json": "hidden"}


def omitted_when_none() -> Any:
    """A field (default None) whose key the document has only when it is set."""
    return dataclasses.field(default=None, metadata=_OMIT_NONE)


def omitted_unless(flag: str) -> Any:
    """A field (default None) whose key the document has only while the field ``flag`` is true
    (``lac_note``, null or not, once the LAC was read)."""
    return dataclasses.field(default=None, metadata={"json": "omit-unless", "unless": flag})


def not_in_json(default: Any = None) -> Any:
    """A field the human output reads that is not part of the JSON document."""
    return dataclasses.field(default=default, metadata=_HIDDEN, compare=False)


#: result class -> [(field name, rule, the field it depends on)], read once per class (a listing
#: converts a million rows)
_SHAPES: dict[type, list[tuple[str, str | None, str | None]]] = {}
#: the values a document holds as they are
_PLAIN = frozenset({str, int, float, bool, type(None)})


def _shape(cls: type) -> list[tuple[str, str | None, str | None]]:
    shape = _SHAPES[cls] = [
        (f.name, f.metadata.get("json"), f.metadata.get("unless"))
        for f in dataclasses.fields(cls)
        if f.metadata.get("json") != "hidden"
    ]
    return shape


def to_json(value: Any) -> Any:
    """``value`` as its JSON document: a dataclass a dict of its fields, an Enum its value, a list
    or tuple a list, a dict's values converted; anything else as it is."""
    cls = type(value)
    if cls in _PLAIN:
        return value
    shape = _SHAPES.get(cls)
    if shape is None:
        if hasattr(cls, "to_json"):  # a type of wire's that writes its own document
            return to_json(value.to_json())
        if isinstance(value, Enum):
            return value.value
        if not dataclasses.is_dataclass(value) or isinstance(value, type):
            if isinstance(value, (list, tuple)) and not hasattr(value, "_asdict"):
                return [v if type(v) in _PLAIN else to_json(v) for v in value]
            if isinstance(value, dict):
                return {k: v if type(v) in _PLAIN else to_json(v) for k, v in value.items()}
            return value
        shape = _shape(cls)
    doc = {}
    for name, rule, unless in shape:
        item = getattr(value, name)
        if rule is not None and (item is None if rule == "omit-none" else not getattr(value, unless or "")):
            continue
        doc[name] = item if type(item) in _PLAIN else to_json(item)
    return doc
