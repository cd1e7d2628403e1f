"""The v2 ("pre-v3") bookie protocol: requests and responses as plain tuples.

Payloads here exclude the 4-byte frame length (see :mod:`bkctl.wire.codecs.framing`).
Decoders accept any version byte and leave the version check to the bookie,
which must answer an unsupported version with EBADVERSION rather than
drop the connection.  Decoding raises :class:`~bkctl.wire.errors.CodecError` and
nothing else; an opcode without a v2 layout raises :class:`UnknownOpcode`
(the Java bookie closes the connection on those).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from bkctl.wire.codecs.protocol import MASTER_KEY_LENGTH, RC, V2_CURRENT_VERSION, Flag, OpCode
from bkctl.wire.errors import CodecError

_I32 = struct.Struct(">i")
_ADD_IDS = struct.Struct(">qq")
_READ = struct.Struct(">iqq")  # header, ledger, entry
_BATCH = struct.Struct(">iqqqiq")  # header, ledger, start, requestId, maxCount, maxSize
_ADD_RESP = struct.Struct(">iiqq")  # header, rc, ledger, entry
_BATCH_RESP = struct.Struct(">iiqqq")  # header, rc, ledger, start, requestId
#: An ADD or READ answer framed, for a bookie's hot paths: frame length | header | rc |
#: ledgerId | entryId (an EOK READ answer's body follows); the frame length of an ADD
#: answer, or of a READ answer without a body, is 24.
FRAMED_ANSWER = struct.Struct(">iiiqq")
#: A BATCH_READ_ENTRY answer framed: frame length | header | rc | ledgerId | startEntryId |
#: requestId, then each entry as its length (i32) and its bytes.
FRAMED_BATCH_ANSWER = struct.Struct(">iiiqqq")

_V2_OPS = frozenset({OpCode.ADD_ENTRY, OpCode.READ_ENTRY, OpCode.AUTH, OpCode.BATCH_READ_ENTRY})


class UnknownOpcode(CodecError):
    """A v2 opcode with no v2 layout (4, 5, 6 or anything unknown)."""

    def __init__(self, opcode: int):
        super().__init__(f"opcode {opcode} has no v2 encoding")
        self.opcode = opcode


def pack_header(version: int, opcode: int, flags: int = 0) -> int:
    """The signed i32 header (version is a signed byte); version 0 is the bare opcode, as Java writes it."""
    if version == 0:
        return opcode
    return (version << 24) | (opcode << 16) | (flags & 0xFFFF)


#: The headers of version-2 ADD and READ answers (no flags).
ADD_ANSWER_HEADER = pack_header(V2_CURRENT_VERSION, OpCode.ADD_ENTRY)
READ_ANSWER_HEADER = pack_header(V2_CURRENT_VERSION, OpCode.READ_ENTRY)


def unpack_header(h: int) -> tuple[int, int, int]:
    """(version, opcode, flags) of a signed i32 header."""
    version = h >> 24
    if version == 0:
        return 0, h & 0xFF, 0
    return version, (h >> 16) & 0xFF, h & 0xFFFF


# -- requests ---------------------------------------------------------------


class AddRequest(NamedTuple):
    version: int
    flags: int
    master_key: bytes
    body: bytes  # the packaged entry, stored verbatim
    ledger_id: int
    entry_id: int

    @property
    def is_recovery(self) -> bool:
        return bool(self.flags & Flag.RECOVERY_ADD)

    @property
    def is_high_priority(self) -> bool:
        return bool(self.flags & Flag.HIGH_PRIORITY)

    def encode(self) -> bytes:
        return b"".join(
            (_I32.pack(pack_header(self.version, OpCode.ADD_ENTRY, self.flags)), self.master_key, self.body)
        )


class ReadRequest(NamedTuple):
    version: int
    flags: int
    ledger_id: int
    entry_id: int  # -1 = the highest stored entry
    master_key: bytes | None = None  # only on fencing reads

    @property
    def is_fencing(self) -> bool:
        return bool(self.flags & Flag.DO_FENCING)

    def encode(self) -> bytes:
        head = _READ.pack(pack_header(self.version, OpCode.READ_ENTRY, self.flags), self.ledger_id, self.entry_id)
        if self.master_key is not None and self.is_fencing and self.version >= 2:
            return head + self.master_key
        return head


class BatchReadRequest(NamedTuple):
    version: int
    flags: int
    ledger_id: int
    start_entry_id: int
    request_id: int
    max_count: int  # <= 0: unlimited
    max_size: int
    master_key: bytes | None = None

    @property
    def is_fencing(self) -> bool:
        return bool(self.flags & Flag.DO_FENCING)

    def encode(self) -> bytes:
        head = _BATCH.pack(
            pack_header(self.version, OpCode.BATCH_READ_ENTRY, self.flags),
            self.ledger_id,
            self.start_entry_id,
            self.request_id,
            self.max_count,
            self.max_size,
        )
        if self.master_key is not None and self.is_fencing and self.version >= 2:
            return head + self.master_key
        return head


class AuthRequest(NamedTuple):
    version: int
    message: bytes  # serialized AuthMessage protobuf

    def encode(self) -> bytes:
        return _I32.pack(pack_header(self.version, OpCode.AUTH)) + self.message


def decode_request(payload: bytes) -> AddRequest | ReadRequest | BatchReadRequest | AuthRequest:
    n = len(payload)
    if n < 4:
        raise CodecError(f"v2 request of {n} bytes has no header")
    version, op, flags = unpack_header(_I32.unpack_from(payload)[0])
    if op == OpCode.ADD_ENTRY:
        if n < 4 + MASTER_KEY_LENGTH + 16:
            raise CodecError(f"v2 ADD of {n} bytes is too short for a key and entry ids")
        body = payload[4 + MASTER_KEY_LENGTH :]
        ledger_id, entry_id = _ADD_IDS.unpack_from(body)
        return AddRequest(version, flags, payload[4 : 4 + MASTER_KEY_LENGTH], body, ledger_id, entry_id)
    if op == OpCode.READ_ENTRY:
        if n < _READ.size:
            raise CodecError(f"v2 READ of {n} bytes is too short")
        _, ledger_id, entry_id = _READ.unpack_from(payload)
        return ReadRequest(version, flags, ledger_id, entry_id, _fence_key(payload, _READ.size, flags, version))
    if op == OpCode.BATCH_READ_ENTRY:
        if n < _BATCH.size:
            raise CodecError(f"v2 BATCH_READ of {n} bytes is too short")
        _, ledger_id, start, request_id, max_count, max_size = _BATCH.unpack_from(payload)
        return BatchReadRequest(
            version,
            flags,
            ledger_id,
            start,
            request_id,
            max_count,
            max_size,
            _fence_key(payload, _BATCH.size, flags, version),
        )
    if op == OpCode.AUTH:
        return AuthRequest(version, payload[4:])
    raise UnknownOpcode(op)


_V2_ADD_TOP = (V2_CURRENT_VERSION << 8) | OpCode.ADD_ENTRY  # a v2 ADD header's top 16 bits
_V2_ADD_MIN = 4 + MASTER_KEY_LENGTH + 16


def plain_add_request(payload: bytes) -> tuple[int, int, int, bytes, bytes] | None:
    """``(flags, ledgerId, entryId, masterKey, body)`` of a version-2 ADD_ENTRY
    (any flags) -- what :func:`decode_request` gives for it, without the tuple
    class -- or None for any other request, which goes through it (a bookie's
    hot path; the C twin is :mod:`.plain`'s)."""
    if len(payload) < _V2_ADD_MIN:
        return None
    header = _I32.unpack_from(payload)[0]
    if header >> 16 != _V2_ADD_TOP:
        return None
    ledger_id, entry_id = _ADD_IDS.unpack_from(payload, 4 + MASTER_KEY_LENGTH)
    return header & 0xFFFF, ledger_id, entry_id, payload[4 : 4 + MASTER_KEY_LENGTH], payload[4 + MASTER_KEY_LENGTH :]


_V2_READ_TOP = pack_header(V2_CURRENT_VERSION, OpCode.READ_ENTRY) >> 16  # a v2 READ header's top 16 bits
_READ_SIZE = _READ.size
_DO_FENCING = int(Flag.DO_FENCING)  # an int: an IntFlag's & costs microseconds


def plain_read_request(payload: bytes) -> tuple[int, int] | None:
    """``(ledgerId, entryId)`` of a version-2 READ_ENTRY that is no fencing read
    (any other flags; no master key follows) -- what :func:`decode_request` gives
    for it, the tuple class aside -- or None for any other request, which goes
    through it (a bookie's hot path: a Pulsar broker reads over v2)."""
    if len(payload) != _READ_SIZE:
        return None
    header, ledger_id, entry_id = _READ.unpack(payload)
    if header >> 16 != _V2_READ_TOP or header & _DO_FENCING:
        return None
    return ledger_id, entry_id


_V2_BATCH_TOP = pack_header(V2_CURRENT_VERSION, OpCode.BATCH_READ_ENTRY) >> 16  # its header's top 16 bits
_BATCH_SIZE = _BATCH.size


class PlainBatchRead(NamedTuple):
    """A version-2 BATCH_READ_ENTRY that is no fencing read (:func:`plain_batch_read_request`)."""

    ledger_id: int
    start_entry_id: int
    request_id: int
    max_count: int
    max_size: int


def plain_batch_read_request(payload: bytes) -> PlainBatchRead | None:
    """A version-2 BATCH_READ_ENTRY that is no fencing read (any other flags; no master
    key follows) -- what :func:`decode_request` gives for it, version, flags and key
    aside -- or None for any other request, which goes through it (a bookie's hot path:
    ``bkctl ledger fsck`` asks for a small ledger's copies with one each)."""
    if len(payload) != _BATCH_SIZE:
        return None
    header, ledger_id, start, request_id, max_count, max_size = _BATCH.unpack(payload)
    if header >> 16 != _V2_BATCH_TOP or header & _DO_FENCING:
        return None
    return PlainBatchRead(ledger_id, start, request_id, max_count, max_size)


def _fence_key(payload: bytes, offset: int, flags: int, version: int) -> bytes | None:
    """The master key that follows a fencing read; None when absent (the bookie answers EUA)."""
    if flags & Flag.DO_FENCING and version >= 2 and len(payload) >= offset + MASTER_KEY_LENGTH:
        return payload[offset : offset + MASTER_KEY_LENGTH]
    return None


# -- responses --------------------------------------------------------------


class AddResponse(NamedTuple):
    version: int
    rc: int
    ledger_id: int
    entry_id: int

    def encode(self) -> bytes:
        return _ADD_RESP.pack(pack_header(self.version, OpCode.ADD_ENTRY), self.rc, self.ledger_id, self.entry_id)


class ReadResponse(NamedTuple):
    version: int
    rc: int
    ledger_id: int
    entry_id: int  # echo of the request, -1 for LAC reads
    body: bytes = b""  # the stored entry, only with EOK

    def encode(self) -> bytes:
        head = _ADD_RESP.pack(pack_header(self.version, OpCode.READ_ENTRY), self.rc, self.ledger_id, self.entry_id)
        return head + self.body if self.rc == RC.EOK else head


class BatchReadResponse(NamedTuple):
    version: int
    rc: int
    ledger_id: int
    start_entry_id: int
    request_id: int
    entries: tuple[bytes, ...] = ()

    def encode(self) -> bytes:
        parts = [
            _BATCH_RESP.pack(
                pack_header(self.version, OpCode.BATCH_READ_ENTRY),
                self.rc,
                self.ledger_id,
                self.start_entry_id,
                self.request_id,
            )
        ]
        for entry in self.entries:
            parts.append(_I32.pack(len(entry)))
            parts.append(entry)
        return b"".join(parts)


class AuthResponse(NamedTuple):
    version: int
    message: bytes  # serialized AuthMessage; v2 AUTH responses have no rc

    def encode(self) -> bytes:
        return _I32.pack(pack_header(self.version, OpCode.AUTH)) + self.message


_BATCH_ANSWER_HEADER = pack_header(V2_CURRENT_VERSION, OpCode.BATCH_READ_ENTRY)


def batch_read_answer(rc: int, ledger_id: int, start_entry_id: int, request_id: int, entries: list[bytes]) -> bytes:
    """``frame(BatchReadResponse(2, rc, ledger_id, start_entry_id, request_id, entries).encode())``
    in one join (a bookie's hot path)."""
    pack = _I32.pack
    parts = [b""]
    size = 32
    for entry in entries:
        parts.append(pack(len(entry)))
        parts.append(entry)
        size += 4 + len(entry)
    parts[0] = FRAMED_BATCH_ANSWER.pack(size, _BATCH_ANSWER_HEADER, rc, ledger_id, start_entry_id, request_id)
    return b"".join(parts)


#: Bytes a batch response spends before its entries, and per entry, for the size budget.
BATCH_RESPONSE_OVERHEAD = 24 + 8 + 4
BATCH_ENTRY_OVERHEAD = 4


def decode_response(payload: bytes) -> AddResponse | ReadResponse | BatchReadResponse | AuthResponse:
    n = len(payload)
    if n < 4:
        raise CodecError(f"v2 response of {n} bytes has no header")
    version, op, _flags = unpack_header(_I32.unpack_from(payload)[0])
    if op == OpCode.ADD_ENTRY or op == OpCode.READ_ENTRY:
        if n < _ADD_RESP.size:
            raise CodecError(f"v2 response of {n} bytes is too short")
        _, rc, ledger_id, entry_id = _ADD_RESP.unpack_from(payload)
        if op == OpCode.ADD_ENTRY:
            return AddResponse(version, rc, ledger_id, entry_id)
        return ReadResponse(version, rc, ledger_id, entry_id, payload[_ADD_RESP.size :])
    if op == OpCode.BATCH_READ_ENTRY:
        if n < _BATCH_RESP.size:
            raise CodecError(f"v2 BATCH_READ response of {n} bytes is too short")
        _, rc, ledger_id, start, request_id = _BATCH_RESP.unpack_from(payload)
        entries = []
        pos = _BATCH_RESP.size
        while pos < n:
            if n - pos < 4:
                raise CodecError("truncated entry length in BATCH_READ response")
            (size,) = _I32.unpack_from(payload, pos)
            pos += 4
            if size < 0 or pos + size > n:
                raise CodecError(f"BATCH_READ entry of {size} bytes overruns the frame")
            entries.append(payload[pos : pos + size])
            pos += size
        return BatchReadResponse(version, rc, ledger_id, start, request_id, tuple(entries))
    if op == OpCode.AUTH:
        return AuthResponse(version, payload[4:])
    raise UnknownOpcode(op)


def is_supported_version(version: int) -> bool:
    return 0 <= version <= V2_CURRENT_VERSION


def add_response_for(req: AddRequest, rc: int) -> bytes:
    """Encoded ADD response echoing ``req`` (the bookie's hot path)."""
    return _ADD_RESP.pack(pack_header(req.version, OpCode.ADD_ENTRY), rc, req.ledger_id, req.entry_id)
