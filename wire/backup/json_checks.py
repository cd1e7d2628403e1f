"""Decoded JSON held to the types its dataclass declares (:func:`checked`).

An archive's records, manifests, chunks and notes are JSON read back from disk or S3, and
records carry no hash: a field of another type (a count as a string, a password that is not
base64) read as JSON and then failed far from the read, inside a restore, as whatever Python
raised there (found by bench/fuzz.py).  Every field is checked against its type hint where the
document is decoded, and the first wrong one named in :class:`ArchiveDamaged`."""

from __future__ import annotations

import base64
import types
import typing
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from typing import Any, TypeVar

from ..errors import ArchiveDamaged

#: what is wrong with a decoded JSON value (None: nothing) -- :func:`_check_of` makes them
_Check = Callable[[Any], "str | None"]


def _fine(value: object) -> str | None:
    return None


def _check_of(hint: Any, b64_text: bool) -> _Check:
    """The check of a decoded JSON value of type ``hint``: ints (not bools), strings (base64
    where ``b64_text``), bools, lists, dicts with string keys, ``X | None`` and dataclasses
    (an archive's documents), field by field.  Made once a type (:func:`_fields_check`): a
    manifest's chunk holds thousands of lines."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return _fine
    if origin is types.UnionType:
        inner = _check_of(args[0], b64_text)
        return lambda v: None if v is None else inner(v)
    if origin is list:
        item = _check_of(args[0], b64_text)
        return lambda v: (
            f"{type(v).__name__}, not a list" if type(v) is not list else next(filter(None, map(item, v)), None)
        )
    if origin is dict:
        value = _check_of(args[1], b64_text)
        return lambda v: (
            f"{type(v).__name__}, not an object"
            if type(v) is not dict or not all(type(k) is str for k in v)
            else next(filter(None, map(value, v.values())), None)
        )
    if is_dataclass(hint):
        return lambda v: _fields_check(type(v))(v)
    if b64_text:
        return lambda v: f"{type(v).__name__}, not str" if type(v) is not str else _not_b64(v)
    name = f"not {hint.__name__}"
    return lambda v: None if type(v) is hint else f"{type(v).__name__}, {name}"


def _not_b64(text: str) -> str | None:
    try:
        base64.b64decode(text, validate=True)
    except ValueError:
        return "not base64"
    return None


#: :func:`_fields_check`'s, a dataclass at a time
_FIELD_CHECKS: dict[type, _Check] = {}


def _fields_check(cls: type) -> _Check:
    """The check of a dataclass made of decoded JSON: each field of its type (a field named
    ``*_b64`` holds base64), the first wrong one named."""
    known = _FIELD_CHECKS.get(cls)
    if known is not None:
        return known
    hints = typing.get_type_hints(cls)
    checks = [(f.name, _check_of(hints[f.name], f.name.endswith("_b64"))) for f in fields(cls)]

    def check(obj: Any) -> str | None:
        for name, wrong_in in checks:
            wrong = wrong_in(getattr(obj, name))
            if wrong:
                return f"{name}: {wrong}"
        return None

    _FIELD_CHECKS[cls] = check
    return check


_Decoded = TypeVar("_Decoded")


def checked(obj: _Decoded, what: str) -> _Decoded:
    """``obj`` (a dataclass decoded from JSON), or :class:`ArchiveDamaged` (``what``: not a
    ...) unless each of its fields is of the type it says."""
    wrong = _fields_check(type(obj))(obj)
    if wrong:
        raise ArchiveDamaged(f"{what} ({wrong})")
    return obj
