"""Per-ledger state the bookie keeps beside the entries: master key, fenced flag,
explicit LAC and the highest entry id (Java's LedgerInfo in DbLedgerStorage's
LedgerMetadataIndex). Its row format in the index's ``ledgers`` database::

    u8 version (1) | u8 flags (1 fenced, 2 has key, 4 has LAC) |
    i64 last entry id (-1: none) | u16 key length | key | u32 LAC length | LAC body
"""

from __future__ import annotations

import struct

_STATE_HEAD = struct.Struct(">BBqH")
_U32 = struct.Struct(">I")

_F_FENCED = 1
_F_KEY = 2
_F_LAC = 4


class LedgerState:
    __slots__ = ("master_key", "fenced", "lac", "last_entry", "persisted_last", "dirty")

    def __init__(self):
        self.master_key: bytes | None = None
        self.fenced = False
        self.lac: bytes | None = None
        self.last_entry = -1  # highest entry id put (cached or flushed)
        self.persisted_last = -1  # highest entry id with an index row
        self.dirty = True  # changed since its row was last written

    def encode(self, last_entry: int) -> bytes:
        flags = (
            (_F_FENCED if self.fenced else 0)
            | (_F_KEY if self.master_key is not None else 0)
            | (_F_LAC if self.lac is not None else 0)
        )
        key = self.master_key or b""
        lac = self.lac or b""
        return b"".join((_STATE_HEAD.pack(1, flags, last_entry, len(key)), key, _U32.pack(len(lac)), lac))

    @classmethod
    def decode(cls, raw: bytes) -> LedgerState:
        version, flags, last, klen = _STATE_HEAD.unpack_from(raw, 0)
        if version != 1:
            raise ValueError(f"unknown ledger state version {version}")
        pos = _STATE_HEAD.size
        led = cls()
        led.master_key = bytes(raw[pos : pos + klen]) if flags & _F_KEY else None
        pos += klen
        (llen,) = _U32.unpack_from(raw, pos)
        pos += 4
        led.lac = bytes(raw[pos : pos + llen]) if flags & _F_LAC else None
        led.fenced = bool(flags & _F_FENCED)
        led.last_entry = led.persisted_last = last
        led.dirty = False
        return led

    def as_dict(self) -> dict:
        return {
            "fenced": self.fenced,
            "master_key": self.master_key,
            "explicit_lac": self.lac,
            "last_entry_id": self.last_entry,
        }
