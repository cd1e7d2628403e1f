"""The :class:`Option` type, one bk_server.conf key: its names, documentation and value checks.

The schema's sections (one module each) list their keys as ``Option`` values; this module is what every
key shares, apart from which keys there are.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bkctl.wire.text import NOT_A_BOOLEAN, parse_bool

from ..errors import InvalidValue
from ..properties import escape

__all__ = ["JAVA_INT_MAX", "JAVA_LONG_MAX", "TYPES", "Option", "number_text"]

JAVA_INT_MAX = 2**31 - 1
JAVA_LONG_MAX = 2**63 - 1


def _snake(name: str) -> str:
    """``bookiePort`` -> ``bookie_port``, ``useHostNameAsBookieID`` -> ``use_host_name_as_bookie_id``."""
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    text = re.sub(r"(?<=[A-Z])(?=[A-Z][a-z])", "_", text)
    return re.sub(r"_+", "_", text).lower()


TYPES = ("int", "float", "bool", "str", "list")
_INT_RE = re.compile(r"[+-]?\d+")
_FLOAT_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?")


@dataclass(frozen=True)
class Option:
    """One bk_server.conf key.

    ``name`` is the Java key; ``type`` is one of ``int``, ``float``, ``bool``,
    ``str`` or ``list`` (comma-separated strings, a tuple in Python);
    ``default`` is the typed default (None: unset); ``meaning`` is one
    sentence for --help and the man page.  ``min``/``max`` bound numbers
    (inclusive unless ``min_exclusive``/``max_exclusive``); ``choices`` limits
    strings; ``fallback`` names the key whose value an unset option takes;
    ``check`` raises ``InvalidValue`` for values the type alone cannot reject.
    """

    name: str
    type: str
    default: Any
    meaning: str
    section: str
    unit: str | None = None
    choices: tuple[str, ...] | None = None
    min: int | float | None = None
    max: int | float | None = None
    min_exclusive: bool = False
    max_exclusive: bool = False
    fallback: str | None = None
    deprecated: bool = False
    metavar_name: str | None = None
    attr_name: str | None = None
    check: Callable[[str], None] | None = field(default=None, repr=False, compare=False)

    # -- names -------------------------------------------------------------

    @property
    def attr(self) -> str:
        """snake_case attribute name on ``BookieConfig``."""
        return self.attr_name or _snake(self.name)

    @property
    def flag(self) -> str:
        """Long command-line flag, e.g. ``--bookie-port``."""
        return "--" + self.attr.replace("_", "-")

    @property
    def metavar(self) -> str:
        if self.metavar_name:
            return self.metavar_name
        if self.type == "bool":
            return "BOOL"
        if self.type == "list":
            return "LIST"
        if self.type == "float":
            return "FRACTION" if self.unit == "fraction" else "NUMBER"
        if self.type == "int":
            return {"ms": "MS", "bytes": "BYTES", "MB": "MB"}.get(self.unit or "", "N")
        return "STRING"

    # -- documentation -----------------------------------------------------

    @property
    def default_text(self) -> str:
        """The default as a person reads it (``3181``, ``/tmp/bk-data``, ``unset``)."""
        if self.default is None:
            return f"derived from {self.fallback}" if self.fallback else "unset"
        return self.format_value(self.default)

    @property
    def _shown_max(self) -> int | float | None:
        # Java's int/long limits are type limits, not worth showing to people.
        return None if self.max in (JAVA_INT_MAX, JAVA_LONG_MAX) else self.max

    @property
    def range_text(self) -> str | None:
        """Allowed values in words, or None when any value of the type goes."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        low, high = self.min, self._shown_max
        low_op = "<" if self.min_exclusive else "<="
        high_op = "<" if self.max_exclusive else "<="
        if low is None:
            return None if high is None else f"value {high_op} {number_text(high)}"
        if high is None:
            return f"value {'>' if self.min_exclusive else '>='} {number_text(low)}"
        return f"{number_text(low)} {low_op} value {high_op} {number_text(high)}"

    def help_text(self) -> str:
        """Meaning plus unit and default, for ``--help``."""
        extras = []
        if self.unit:
            extras.append(f"unit: {self.unit}")
        extras.append(f"default: {self.default_text}")
        return f"{self.meaning} ({'; '.join(extras)})"

    # -- values ------------------------------------------------------------

    def format_value(self, value: Any) -> str:
        """Plain text of a typed value (no .properties escaping)."""
        if value is None:
            return ""
        if self.type == "bool":
            return "true" if value else "false"
        if self.type == "list":
            return ",".join(value)
        if self.type == "float":
            return number_text(value)
        return str(value)

    def render(self, value: Any) -> str:
        """A typed value as .properties text, escaped so it reads back the same."""
        if value is None:
            return ""
        if self.type == "list":
            return ",".join(escape(item) for item in value)
        return escape(self.format_value(value))

    def convert(self, value: str | Sequence[str]) -> Any:
        """Typed value from text (a list of texts for list keys).

        Returns None for an empty string or list option ("not set").  Raises
        ``InvalidValue`` with a phrase such as ``is not an integer``.
        """
        if self.type == "list":
            items = [value] if isinstance(value, str) else list(value)
            items = [item.strip() for item in items if item.strip()]
            if not items:
                return None
            for item in items:
                if self.check:
                    try:
                        self.check(item)
                    except InvalidValue as exc:
                        raise InvalidValue(f"element {item!r} {exc}") from None
            return tuple(items)
        if not isinstance(value, str):
            items = list(value)
            if len(items) != 1:
                raise InvalidValue("is a list, but this key takes a single value")
            value = items[0]
        text = value.strip()
        if self.type == "str":
            if not text:
                return None
            if self.choices and text not in self.choices:
                raise InvalidValue("is not one of " + ", ".join(self.choices))
            if self.check:
                self.check(text)
            return text
        if not text:
            raise InvalidValue(f"is empty; {_TYPE_WORD[self.type]} is required")
        if self.type == "bool":
            try:
                return parse_bool(text, self.name)
            except ValueError:
                raise InvalidValue(NOT_A_BOOLEAN) from None
        if self.type == "int":
            if not _INT_RE.fullmatch(text):
                raise InvalidValue("is not an integer")
            number: int | float = int(text)
        else:
            if not _FLOAT_RE.fullmatch(text):
                raise InvalidValue("is not a number")
            number = float(text.rstrip("fFdD"))
        self._check_range(number)
        return number

    def _check_range(self, number: int | float) -> None:
        low, high = self.min, self.max
        too_low = low is not None and (number < low or (self.min_exclusive and number == low))
        too_high = high is not None and (number > high or (self.max_exclusive and number == high))
        if not (too_low or too_high):
            return
        shown_high = self._shown_max
        if low is not None and shown_high is not None:
            bounds = f"{number_text(low)}..{number_text(shown_high)}"
            if self.min_exclusive and self.max_exclusive:
                bounds += ", both ends excluded"
            raise InvalidValue(f"is out of range ({bounds})")
        if too_low and low is not None:
            if low == 0 and not self.min_exclusive:
                raise InvalidValue("must not be negative")
            word = "greater than" if self.min_exclusive else "at least"
            raise InvalidValue(f"must be {word} {number_text(low)}")
        raise InvalidValue(f"is too large (at most {number_text(high or 0)})")


_TYPE_WORD = {"int": "an integer", "float": "a number", "bool": "a boolean"}


def number_text(value: int | float) -> str:
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    return str(value)
