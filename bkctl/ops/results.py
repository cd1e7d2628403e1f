"""An operation's result as the JSON document ``--json`` prints: the one conversion.

An operation returns a named type -- a frozen dataclass, its states Enums -- and the commands,
the shell and scripts read its attributes; this module is the only place that turns one into
the document users' cron jobs parse: :func:`fields_of` gives a result's keys and values (what
``bkctl.app.encode_json`` calls for any dataclass it meets, so a command hands the result itself
to ``emit``; orjson writes the values and comes back for a nested result), :func:`to_json` the
whole document as Python values (for tests and callers that read it): each field a key, named as
the field, its value converted the same way (a nested result, a list of them, an Enum's value); a
field
declared with :func:`omitted_when_none` is left out of the document while it is None (a key the
document has only sometimes, ``lac_error``), one with :func:`omitted_unless` while another field is
false, one declared with :func:`not_in_json` never appears
(what the human output needs beside the document), one declared with :func:`json_key` is written
under that key rather than its name (``from``, a word Python keeps), and one declared with
:func:`inlined` -- a part of the result that is a result of its own (``bkctl top``'s row: its disk,
its gc, its rates) -- gives its keys to the document in its place.  Keys are sorted on output, so the fields'
order is free.  A type of wire's with its own ``to_json`` method (an owner, a topic's state) is
written by that method."""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from enum import Enum
from typing import Any, NamedTuple

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


def json_key(key: str) -> Any:
    """A field (no default) written under ``key`` in the document, not under its own name: a key
    that is no Python name (``from``)."""
    return dataclasses.field(metadata={"key": key})


def not_in_json(default: Any = None) -> Any:
    """A field the human output reads that is not part of the JSON document."""
    return dataclasses.field(default=default, metadata=_HIDDEN, compare=False)


def inlined() -> Any:
    """A field holding a part of the result, a result of its own, whose keys the document has
    beside the result's other keys (not under the field's name)."""
    return dataclasses.field(metadata=_INLINE)


#: a field's metadata: its value's keys in the document, in its place
_INLINE = {"json": "inline"}


class _Shape(NamedTuple):
    """How a result class is written: its keys, read at once, and the keys with a rule."""

    names: tuple[str, ...]  #: the document's keys, in the fields' order
    read: Callable[[Any], Any]  #: the values of ``names``, as a tuple
    rules: tuple[tuple[str, str, str | None], ...]  #: (key, omit-none/omit-unless/inline, the field it depends on)


#: result class -> its shape, read once per class (a listing writes a million rows)
_SHAPES: dict[type, _Shape] = {}


def _shape(cls: type) -> _Shape:
    shown = [f for f in dataclasses.fields(cls) if f.metadata.get("json") != "hidden"]
    attrs = tuple(f.name for f in shown)
    getter = operator.attrgetter(*attrs) if attrs else (lambda _v: ())
    read = getter if len(attrs) != 1 else (lambda v: (getter(v),))
    keys = tuple(f.metadata.get("key", f.name) for f in shown)
    rules = tuple(
        (f.metadata.get("key", f.name), f.metadata["json"], f.metadata.get("unless"))
        for f in shown
        if f.metadata.get("json")
    )
    shape = _SHAPES[cls] = _Shape(keys, read, rules)
    return shape


def fields_of(value: Any) -> dict[str, Any]:
    """A result's own keys and values, not converted further: what the CLI's encoder takes
    (``bkctl.app.encode_json``), which comes back here for a nested result and writes Enums,
    lists and tuples itself.  A type of wire's with its own ``to_json`` method gives that."""
    cls = type(value)
    shape = _SHAPES.get(cls)
    if shape is None:
        if hasattr(cls, "to_json"):
            return value.to_json()
        shape = _shape(cls)
    doc = dict(zip(shape.names, shape.read(value)))
    for name, rule, unless in shape.rules:
        if rule == "inline":
            doc.update(fields_of(doc.pop(name)))
        elif doc[name] is None if rule == "omit-none" else not getattr(value, unless or ""):
            del doc[name]
    return doc


def to_json(value: Any) -> Any:
    """``value`` as its JSON document, all the way down: a result a dict of :func:`fields_of`,
    an Enum its value, a list or tuple a list, a dict's values converted; anything else as it is."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type) or hasattr(type(value), "to_json"):
        return {k: to_json(v) for k, v in fields_of(value).items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_asdict"):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    return value


#: the values a document holds as they are
_PLAIN = frozenset({str, int, float, bool, type(None)})
