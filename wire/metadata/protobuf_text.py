"""Protobuf's text format as protobuf-java writes it: the values of format-2 ledger metadata,
cookies (layouts 4 and 5) and the under-replication znodes are text-format messages, and a
rewrite must give Java's bytes.  :func:`message_to_text` reproduces protobuf-java's
``TextFormat.printToString`` exactly, including its escapes (``\\a \\b \\f \\v`` where
Python's printer would use octal); :func:`parse_text_message` reads any of them, every failure
a :class:`~bkctl.wire.errors.CodecError`."""

from __future__ import annotations

from typing import Any, TypeVar

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from bkctl.wire.errors import CodecError

__all__ = ["message_to_text", "parse_text_message"]

_JAVA_ESCAPES = {
    0x07: "\\a",
    0x08: "\\b",
    0x0C: "\\f",
    0x0A: "\\n",
    0x0D: "\\r",
    0x09: "\\t",
    0x0B: "\\v",
    0x5C: "\\\\",
    0x27: "\\'",
    0x22: '\\"',
}


def _escape_bytes(raw: bytes) -> str:
    """Escape like protobuf-java's TextFormat: printable ASCII as is, else named or octal escapes."""
    out = []
    for b in raw:
        special = _JAVA_ESCAPES.get(b)
        if special is not None:
            out.append(special)
        elif 0x20 <= b < 0x7F:
            out.append(chr(b))
        else:
            out.append("\\%03o" % b)
    return "".join(out)


def _scalar_text(fd: FieldDescriptor, value: Any) -> str:
    if fd.type == FieldDescriptor.TYPE_STRING:
        return '"' + _escape_bytes(value.encode("utf-8")) + '"'
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return '"' + _escape_bytes(value) + '"'
    if fd.type == FieldDescriptor.TYPE_ENUM:
        ev = fd.enum_type.values_by_number.get(value) if fd.enum_type is not None else None
        return ev.name if ev is not None else str(value)
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return "true" if value else "false"
    return str(value)


def _print_message(msg: Message, indent: str, out: list[str]) -> None:
    # ListFields() yields the set fields in field-number order, as Java prints them.
    for fd, value in msg.ListFields():
        values = value if fd.is_repeated else (value,)
        for v in values:
            if fd.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
                out.append(f"{indent}{fd.name} {{\n")
                _print_message(v, indent + "  ", out)
                out.append(f"{indent}}}\n")
            else:
                out.append(f"{indent}{fd.name}: {_scalar_text(fd, v)}\n")


def message_to_text(msg: Message) -> str:
    """The protobuf text format of ``msg`` exactly as protobuf-java's ``TextFormat.printToString``."""
    out: list[str] = []
    _print_message(msg, "", out)
    return "".join(out)


_M = TypeVar("_M", bound=Message)


def parse_text_message(data: bytes | str, message_type: type[_M], what: str) -> _M:
    """Parse protobuf text format into ``message_type``; every failure is a CodecError."""
    from google.protobuf import text_format  # ~12 ms of imports, for old (text) metadata only

    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
        msg = message_type()
        text_format.Parse(text, msg)
    except Exception as exc:  # the text parser raises a zoo of exception types
        raise CodecError(f"malformed {what}: {exc}") from None
    if not msg.IsInitialized():
        missing = ", ".join(msg.FindInitializationErrors())  # type: ignore[attr-defined]
        raise CodecError(f"malformed {what}: missing required field(s) {missing}")
    return msg
