"""Java ``.properties`` text as Apache Commons Configuration (1.x) reads it.

Generic: nothing here knows bk_server.conf's keys.  The syntax:

* ``key=value``, ``key: value`` and ``key value`` all work; blanks around the
  separator and at both ends of the line are ignored;
* lines whose first non-blank character is ``#`` or ``!`` are comments;
* a line ending in an odd number of backslashes continues on the next line
  (comment and blank lines in between are skipped, as Commons does);
* escapes: ``\\t \\n \\r \\f \\uXXXX``, and a backslash before any other
  character keeps that character (``\\\\`` is a backslash, ``\\,`` a comma);
* an unescaped comma separates list elements (:func:`unescape` with
  ``split=True``).
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator

from .errors import ConfigError, InvalidValue

__all__ = ["escape", "raw_properties", "read_properties", "read_text", "unescape"]

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_BLANKS = " \t\f"


def _is_comment_or_blank(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped[0] in "#!"


def _continues(line: str) -> bool:
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    lines = _LINE_BREAK.split(text)
    index = 0
    while index < len(lines):
        number = index + 1
        line = lines[index]
        index += 1
        if _is_comment_or_blank(line):
            continue
        line = line.strip()
        pieces = []
        while _continues(line):
            pieces.append(line[:-1])
            while index < len(lines) and _is_comment_or_blank(lines[index]):
                index += 1
            if index >= len(lines):
                line = ""
                break
            line = lines[index].strip()
            index += 1
        pieces.append(line)
        yield number, "".join(pieces)


def _split_key(line: str) -> tuple[str, str]:
    pos = 0
    while pos < len(line):
        char = line[pos]
        if char == "\\" and pos + 1 < len(line):
            pos += 2
            continue
        if char in "=:" or char in _BLANKS:
            break
        pos += 1
    key_raw = line[:pos]
    while pos < len(line) and line[pos] in _BLANKS:
        pos += 1
    if pos < len(line) and line[pos] in "=:":
        pos += 1
        while pos < len(line) and line[pos] in _BLANKS:
            pos += 1
    return key_raw, line[pos:]


def unescape(raw: str, *, split: bool) -> list[str]:
    """Process escapes in a raw value; with ``split``, also cut it at
    unescaped commas (an escaped comma stays a plain comma in an element)."""
    parts: list[str] = []
    current: list[str] = []
    pos = 0
    while pos < len(raw):
        char = raw[pos]
        if char == "\\":
            if pos + 1 >= len(raw):
                pos += 1
                continue
            nxt = raw[pos + 1]
            pos += 2
            if nxt == "u":
                digits = raw[pos : pos + 4]
                if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                    raise InvalidValue("has a malformed \\uXXXX escape")
                current.append(chr(int(digits, 16)))
                pos += 4
            else:
                current.append(_SIMPLE_ESCAPES.get(nxt, nxt))
        elif char == "," and split:
            parts.append("".join(current))
            current = []
            pos += 1
        else:
            current.append(char)
            pos += 1
    parts.append("".join(current))
    return [_join_surrogates(part) for part in parts]


def _join_surrogates(text: str) -> str:
    if not any("\ud800" <= ch <= "\udfff" for ch in text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def escape(text: str) -> str:
    out = []
    for char in text:
        code = ord(char)
        if char == "\\":
            out.append("\\\\")
        elif char == ",":
            out.append("\\,")
        elif char in "\t\n\r\f":
            out.append("\\" + "tnrf"["\t\n\r\f".index(char)])
        elif code < 0x20 or code >= 0x7F:
            if code > 0xFFFF:
                pair = char.encode("utf-16-be")
                out.append("\\u%04x\\u%04x" % struct.unpack(">HH", pair))
            else:
                out.append("\\u%04x" % code)
        else:
            out.append(char)
    return "".join(out)


def read_properties(text: str) -> list[tuple[int, str, str]]:
    """``(line, key, value)`` for each property in .properties text, in order.

    Values are fully unescaped, with list commas left as plain commas; this
    is for tools that want to look at a file generically (bkctl reading a
    client.conf, say).  ``load_config`` does its own list handling.
    """
    out = []
    for number, key_raw, raw in raw_properties(text, "<text>"):
        out.append((number, key_raw, "".join(unescape(raw, split=False))))
    return out


def raw_properties(text: str, path: str) -> Iterator[tuple[int, str, str]]:
    if text.startswith("\ufeff"):
        text = text[1:]
    for number, line in _logical_lines(text):
        key_raw, raw = _split_key(line)
        try:
            key = "".join(unescape(key_raw, split=False))
        except InvalidValue as exc:
            raise ConfigError(f"{path}:{number}: key {key_raw!r} {exc}", path=path, line=number) from None
        yield number, key, raw


def read_text(path: str | os.PathLike[str]) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise ConfigError(
            f"{os.fspath(path)}: cannot read configuration: {exc.strerror or exc}", path=os.fspath(path)
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        # Java reads .properties files as ISO-8859-1.
        return data.decode("latin-1")
