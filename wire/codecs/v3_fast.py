"""The v3 codec's fast twins: the requests and answers of the hot paths taken apart and
put together by hand (or by refilling one protobuf message), each giving exactly the
bytes of :mod:`.v3`'s general parsers and builders, and accepting only what the general
path reads the same way (anything else is left to it, which also says what is wrong).

* the client's: :class:`RequestEncoder` (its plain ADD and READ requests),
  :func:`add_header_fields` (an ADD's header for each copy of it), :func:`plain_read_body`
  (the body of an EOK READ answer);
* the bookie's: :func:`plain_add_request` and :func:`plain_read_request` (the two
  requests clients send most, as Java and bkctl clients write them),
  :func:`read_answer` and :class:`ReadAnswers` (their EOK answers),
  :class:`AddResponseEncoder` (an ADD's answer).  Their C twins are ``_plain.c``
  (:mod:`.plain`) and ``_fastcodec.c`` (``Twins.codec`` of :mod:`bkctl.wire.fastpath`).

Used only with fast paths on (:mod:`bkctl.wire.fastpath`).  Payloads never include the
4-byte frame length unless a name says framed.
"""

from __future__ import annotations

from bkctl.wire.codecs.framing import length_prefix
from bkctl.wire.codecs.protocol import (
    ADD_FLAG_RECOVERY_ADD,
    HIGH_PRIORITY_VALUE,
    OperationType,
    ProtocolVersion,
)
from bkctl.wire.codecs.v3 import add_request, read_request, serialize, v3_status
from bkctl.wire.codecs.varint import ONE_BYTE as _VARINT1
from bkctl.wire.codecs.varint import decode_at as _decode_at
from bkctl.wire.codecs.varint import encode as _varint
from bkctl.wire.proto import bookkeeper_pb2 as pb

__all__ = [
    "ADD_FIELD",
    "READ_FIELD",
    "ADD_HEADER_START",
    "READ_HEADER_START",
    "AddResponseEncoder",
    "ReadAnswers",
    "RequestEncoder",
    "add_header_fields",
    "plain_add_request",
    "plain_read_body",
    "plain_read_request",
    "read_answer",
]

_V3 = int(ProtocolVersion.VERSION_THREE)
_OP_READ = int(OperationType.READ_ENTRY)
_OP_ADD = int(OperationType.ADD_ENTRY)
_EOK = 0

# Protobuf bytes that the hand-made encoders and parsers here write and match,
# spelled out once.
#: Request.addRequest / Response.addResponse: field 101, length-delimited.
ADD_FIELD = b"\xaa\x06"
#: Request.readRequest / Response.readResponse: field 100, length-delimited.
READ_FIELD = b"\xa2\x06"
#: A BKPacketHeader's bytes up to its txnId varint: version 3, ADD_ENTRY, the txnId tag.
ADD_HEADER_START = bytes((0x08, _V3, 0x10, _OP_ADD, 0x18))
#: The same for READ_ENTRY.
READ_HEADER_START = bytes((0x08, _V3, 0x10, _OP_READ, 0x18))


_READ_EOK = b"\x10\x00\xa2\x06"  # Response.status EOK (2), then readResponse (100), length-delimited
_READ_EOK_INNER = b"\x08\x00\x10"  # ReadResponse.status EOK (1), then the ledgerId tag (2)
_U64_MASK = (1 << 64) - 1


def plain_read_body(payload: bytes, pos: int) -> bytes | None:
    """The body of an EOK READ_ENTRY answer whose header field ends at
    ``pos``, taken apart by hand (a client's hot path); None when the bytes
    after the header are anything else (another status, other or repeated
    fields...): then parse them with :func:`parse_response`.

    Accepted: the top-level status EOK, then the readResponse field holding
    exactly status EOK, ledgerId, entryId, body, and optionally maxLAC and
    lacUpdateTimestamp, in field order (as a Java or bkctl bookie writes
    them), up to the end of ``payload``. What is accepted is a complete,
    well-formed Response, and the result is what its readResponse.body reads
    as. As with the parser, the ids are not looked at: the entry's digest
    check covers them.
    """
    if payload[pos : pos + 4] != _READ_EOK:
        return None
    end = len(payload)
    try:
        size = payload[pos + 4]
        if size < 0x80:
            pos += 5
        else:
            size, pos = _decode_at(payload, pos + 4)
        if pos + size != end or payload[pos : pos + 3] != _READ_EOK_INNER:
            return None
        pos = _skip_varint(payload, pos + 3)  # ledgerId
        if payload[pos] != 0x18:  # entryId (3)
            return None
        pos = _skip_varint(payload, pos + 1)
        if payload[pos] != 0x22:  # body (4)
            return None
        size = payload[pos + 1]
        if size < 0x80:
            pos += 2
        else:
            size, pos = _decode_at(payload, pos + 1)
        stop = pos + size
        if stop > end:
            return None
        if stop < end and payload[stop] == 0x28:  # maxLAC (5)
            stop = _skip_varint(payload, stop + 1)
            if stop < end and payload[stop] == 0x30:  # lacUpdateTimestamp (6)
                stop = _skip_varint(payload, stop + 1)
        elif stop < end and payload[stop] == 0x30:
            stop = _skip_varint(payload, stop + 1)
    except IndexError:  # a varint or field running past the end
        return None
    return payload[pos : pos + size] if stop == end else None


def _skip_varint(b: bytes, pos: int) -> int:
    """The position after the varint at ``b[pos]`` (IndexError past the end
    of ``b`` or beyond ten bytes)."""
    start = pos
    while b[pos] >= 0x80:
        pos += 1
    if pos - start > 9:
        raise IndexError("varint too long")
    return pos + 1


# The bookie's fast twins of parse_request for the two requests clients send
# most, laid out as Java and bkctl clients write them; anything else is left to
# parse_request.  Used only with fast paths on (bkctl.wire.fastpath).

_U64 = 1 << 64
_I64_SIGN = 1 << 63


def _ids_at(b: bytes, pos: int, field: bytes) -> tuple[int, int, int] | None:
    """``(ledgerId, entryId, position after them)`` of the operation message
    at ``b[pos]`` (tag ``field``, running to the end of ``b``) when it starts
    with the two ids as fields 1 and 2; None otherwise.  IndexError past the end."""
    if b[pos : pos + 2] != field:
        return None
    size, pos = _decode_at(b, pos + 2)
    if pos + size != len(b) or b[pos] != 0x08:
        return None
    ledger_id, pos = _decode_at(b, pos + 1)
    if b[pos] != 0x10:
        return None
    entry_id, pos = _decode_at(b, pos + 1)
    if ledger_id >= _U64 or entry_id >= _U64:
        return None
    if ledger_id >= _I64_SIGN:
        ledger_id -= _U64
    if entry_id >= _I64_SIGN:
        entry_id -= _U64
    return ledger_id, entry_id, pos


def plain_add_request(b: bytes) -> tuple[int, int, int, bytes, bytes, bool, bool] | None:
    """``(txnId, ledgerId, entryId, masterKey, body, high_priority, recovery)``
    of a v3 ADD_ENTRY Request laid out the way clients write one (fields in
    number order, no writeFlags, nothing else but the RECOVERY_ADD flag after
    the body, as Java's and our re-replication write it), without building
    the message.

    For exactly these bytes :func:`parse_request` gives a complete Request with
    these values, so the outcome is the same as parsing it; anything else --
    other operations, DEFERRED_SYNC adds, other layouts, junk -- returns None
    and goes through the parser. Parsing every add with upb (and checking its
    required fields) costs about twice this.
    """
    try:
        if b[0] != 0x0A or b[2:7] != ADD_HEADER_START:
            return None
        end = 2 + b[1]  # b[1] < 0x80 as b[2] is 0x08: a one-byte header length
        txn, pos = _decode_at(b, 7)
        priority = 0
        if pos < end:
            if b[pos] != 0x20:
                return None
            priority, pos = _decode_at(b, pos + 1)
        if pos != end or txn >= _U64 or priority >= 1 << 32:
            return None
        ids = _ids_at(b, pos, ADD_FIELD)
        if ids is None:
            return None
        ledger_id, entry_id, pos = ids
        if b[pos] != 0x1A:
            return None
        key_len = b[pos + 1]
        pos += 2
        key = b[pos : pos + key_len]
        pos += key_len
        if key_len >= 0x80 or len(key) != key_len or b[pos] != 0x22:
            return None
        body_len, pos = _decode_at(b, pos + 1)
        end = pos + body_len
        if end == len(b):
            return txn, ledger_id, entry_id, key, b[pos:], priority > 0, False
        if end + len(_RECOVERY_FLAG_FIELD) != len(b) or b[end:] != _RECOVERY_FLAG_FIELD:
            return None
    except IndexError:
        return None
    return txn, ledger_id, entry_id, key, b[pos:end], priority > 0, True


def plain_read_request(b: bytes) -> tuple[int, int, int, bytes] | None:
    """``(ledgerId, entryId, header length, b)`` of a plain v3 READ_ENTRY
    Request (normal priority, no flag, master key, previousLAC or timeOut:
    the header field then the readRequest holding only the two ids, as
    clients write it), without building the message; None for anything
    else, which goes through the parser.  For exactly these bytes
    :func:`parse_request` gives a complete Request with these values; the
    header length lets :func:`read_answer` reuse the header's bytes."""
    try:
        if b[0] != 0x0A or b[2:7] != READ_HEADER_START:
            return None
        end = 2 + b[1]  # b[1] < 0x80 as b[2] is 0x08: a one-byte header length
        txn, pos = _decode_at(b, 7)
        if pos != end or txn >= _U64:
            return None
        ids = _ids_at(b, pos, READ_FIELD)
        if ids is None or ids[2] != len(b):
            return None
    except IndexError:
        return None
    return ids[0], ids[1], end, b


def read_answer(header_field: bytes, ledger_id: int, entry_id: int, body: bytes, max_lac: int) -> bytes:
    """``serialize(read_response(request, EOK, body, max_lac=max_lac))`` for
    a READ_ENTRY request of these ids whose header field (field 1, tag
    included) is ``header_field`` and holds only version 3, READ_ENTRY and its
    txnId: the answer's header is the same bytes.  Built by hand (a bookie's
    hot path); the other answers go through :func:`read_response`."""
    return b"".join(ReadAnswers(ledger_id, max_lac).parts(header_field, entry_id, body)[1:])


class ReadAnswers:
    """:func:`read_answer` for many reads of one ledger answered with the same
    ``max_lac``: the fields that do not depend on the entry are encoded once."""

    __slots__ = ("_ledger", "_lac")

    def __init__(self, ledger_id: int, max_lac: int):
        self._ledger = b"".join((_READ_EOK_INNER, _varint(ledger_id & _U64_MASK), b"\x18"))
        self._lac = b"\x28" + _varint(max_lac & _U64_MASK)

    def parts(self, header_field: bytes, entry_id: int, body: bytes) -> tuple[bytes, ...]:
        """The frame of the answer in parts: its 4-byte length, then the pieces of
        :func:`read_answer`'s bytes."""
        ledger, lac = self._ledger, self._lac
        entry = _varint(entry_id & _U64_MASK)
        size = len(body)
        body_len = _varint(size)
        inner = len(ledger) + len(entry) + 1 + len(body_len) + size + len(lac)
        inner_len = _varint(inner)
        return (
            length_prefix(len(header_field) + 4 + len(inner_len) + inner),
            header_field,
            _READ_EOK,
            inner_len,
            ledger,
            entry,
            b"\x22",
            body_len,
            body,
            lac,
        )

    def framed(self, header_field: bytes, entry_id: int, body: bytes) -> bytes:
        """``frame(read_answer(header_field, ledger_id, entry_id, body, max_lac))``."""
        return b"".join(self.parts(header_field, entry_id, body))


# ------------------------------------------------- reused request messages


class RequestEncoder:
    """Encodes a client's ADD and plain READ requests by refilling one
    message of each kind instead of building a new one per request.

    Creating a message (and its header and operation sub-messages) costs
    upb about twice what assigning the fields and serializing do. An ADD
    goes to several bookies with only the txnId changing, so its AddRequest
    part is encoded once per encoder (the last one is remembered, by identity
    of its key and body) and each copy only adds its header: the Request is the header
    field (1) followed by the addRequest field (101), as proto2 writes them.
    The bytes are those of ``serialize(add_request(...))`` /
    ``serialize(read_request(...))``: every call assigns every field its
    request has, and the kinds of request it does not cover (recovery, high
    priority, DEFERRED_SYNC, fencing or long-poll reads) go through the
    builders. Not thread-safe: one per connection (or per thread).
    """

    __slots__ = (
        "_header",
        "_add_inner",
        "_recovery_inner",
        "_add_reply",
        "_read",
        "_read_header",
        "_read_inner",
        "_read_ledger",
        "_last_add",
    )

    def __init__(self) -> None:
        self._header = pb.BKPacketHeader(version=_V3, operation=_OP_ADD)
        self._add_inner = pb.AddRequest()
        self._recovery_inner = pb.AddRequest(flag=ADD_FLAG_RECOVERY_ADD)
        self._add_reply = pb.AddResponse(status=_EOK)
        self._read = read_request(0, 0, 0)
        self._read_header = self._read.header
        self._read_inner = self._read.readRequest
        self._read_ledger: tuple[int | None, bytes] = (None, b"")  # (ledgerId, its field) of the last read_frame
        #: the last ADD encoded: ((ledger, entry), key, body, its addRequest field,
        #: the status and addResponse fields of its EOK answer)
        self._last_add: tuple[tuple[int | None, int | None], bytes | None, bytes | None, bytes, bytes] = (
            (None, None),
            None,
            None,
            b"",
            b"",
        )

    def add(
        self,
        txn_id: int,
        ledger_id: int,
        entry_id: int,
        master_key: bytes,
        body: bytes,
        *,
        recovery: bool = False,
        high_priority: bool = False,
        deferred_sync: bool = False,
    ) -> bytes:
        """``serialize(add_request(...))`` with the same arguments."""
        if recovery or high_priority or deferred_sync:
            return serialize(
                add_request(
                    txn_id,
                    ledger_id,
                    entry_id,
                    master_key,
                    body,
                    recovery=recovery,
                    high_priority=high_priority,
                    deferred_sync=deferred_sync,
                )
            )
        return self.add_and_reply(txn_id, ledger_id, entry_id, master_key, body)[0]

    def add_and_reply(
        self, txn_id: int, ledger_id: int, entry_id: int, master_key: bytes, body: bytes
    ) -> tuple[bytes, bytes]:
        """A plain ADD (no flags, normal priority): its payload, as :meth:`add`,
        and the payload of the bookie's EOK answer to it,
        ``serialize(add_response(request, EOK))`` -- the bytes a client can
        recognize that answer by without parsing it."""
        last = self._last_add
        if last[2] is body and last[1] is master_key and last[0] == (ledger_id, entry_id):
            part, reply = last[3], last[4]
        else:
            part, reply = self.add_part(ledger_id, entry_id, master_key, body)
            self._last_add = ((ledger_id, entry_id), master_key, body, part, reply)
        heads = add_header_fields(txn_id)
        if heads is None:  # what upb says about such a txnId
            header = self._header
            header.txnId = txn_id
            head = header.SerializeToString()
            head = b"".join((_HEADER_FIELD, _VARINT1[len(head)], head))
        else:
            head = heads[0]
        return head + part, head + reply

    def add_part(
        self, ledger_id: int, entry_id: int, master_key: bytes, body: bytes, recovery: bool = False
    ) -> tuple[bytes, bytes]:
        """The addRequest field (101) of an ADD without DEFERRED_SYNC (with the
        RECOVERY_ADD flag when ``recovery``), and what the bookie's EOK answer
        to it holds after its header field (status EOK, addResponse): the
        part of an ADD that is the same for every bookie of the write set."""
        if (
            type(ledger_id) is int
            and type(entry_id) is int
            and 0 <= ledger_id < _I64_LIMIT
            and 0 <= entry_id < _I64_LIMIT
            and type(body) is bytes
            and len(master_key) < 0x80
        ):
            # by hand, as upb writes them (fields in number order): the writer's hot path
            # (the body is copied once: the field's length is counted, not measured)
            ledger, entry = _varint(ledger_id), _varint(entry_id)
            ids = b"".join((ledger, b"\x10", entry))
            body_len = _varint(len(body))
            flag = _RECOVERY_FLAG_FIELD if recovery else b""
            size = 4 + len(ids) + len(master_key) + len(body_len) + len(body) + len(flag)
            part = b"".join(
                (
                    ADD_FIELD,
                    _varint(size),
                    b"\x08",
                    ids,
                    b"\x1a",
                    _VARINT1[len(master_key)],
                    master_key,
                    b"\x22",
                    body_len,
                    body,
                    flag,
                )
            )
            answer = b"".join((_EOK_STATUS_FIELD, ledger, b"\x18", entry))  # status EOK (1), ids (2, 3)
            return part, b"".join((_STATUS_EOK_FIELD, ADD_FIELD, _VARINT1[len(answer)], answer))
        add = self._recovery_inner if recovery else self._add_inner
        add.ledgerId = ledger_id
        add.entryId = entry_id
        add.masterKey = master_key if type(master_key) is bytes else bytes(master_key)
        add.body = body if type(body) is bytes else bytes(body)
        inner = add.SerializeToString()
        part = b"".join((ADD_FIELD, _varint(len(inner)), inner))
        reply = self._add_reply
        reply.ledgerId = ledger_id
        reply.entryId = entry_id
        inner = reply.SerializeToString()
        # Response: header (1), status EOK (2), addResponse (101)
        return part, b"".join((_STATUS_EOK_FIELD, ADD_FIELD, _VARINT1[len(inner)], inner))

    def read(self, txn_id: int, ledger_id: int, entry_id: int) -> bytes:
        """``serialize(read_request(txn_id, ledger_id, entry_id))``: a plain read."""
        self._read_header.txnId = txn_id
        read = self._read_inner
        read.ledgerId = ledger_id
        read.entryId = entry_id
        return self._read.SerializeToString()

    def read_frame(self, txn_id: int, ledger_id: int, entry_id: int) -> tuple[bytes, bytes]:
        """A plain read, framed (``frame(self.read(...))``), and its header
        field (the bytes its EOK answer starts with). Written by hand, as upb
        writes it, for non-negative ids (a reader's hot path); through
        :meth:`read` otherwise."""
        if (
            type(txn_id) is int
            and type(ledger_id) is int
            and type(entry_id) is int
            and 0 <= txn_id < _U64_LIMIT
            and 0 <= ledger_id < _I64_LIMIT
            and 0 <= entry_id < _I64_LIMIT
        ):
            txn = _varint(txn_id)
            head = _READ_HEADER_FIELD[len(txn)] + txn
            known, part = self._read_ledger
            if known != ledger_id:  # a reader reads one ledger at a time: its field is kept
                part = b"\x08" + _varint(ledger_id)
                self._read_ledger = (ledger_id, part)
            inner = b"".join((part, b"\x10", _varint(entry_id)))
            # Request: header (1), readRequest (100) holding ledgerId (1), entryId (2)
            return b"".join(
                (length_prefix(len(head) + 3 + len(inner)), head, READ_FIELD, _VARINT1[len(inner)], inner)
            ), head
        payload = self.read(txn_id, ledger_id, entry_id)
        return length_prefix(len(payload)) + payload, payload[: 2 + payload[1]]


_HEADER_FIELD = b"\x0a"  # Request.header: field 1, length-delimited
_PRIORITY_FIELD = b"\x20" + _varint(HIGH_PRIORITY_VALUE)  # BKPacketHeader.priority (4): 100
_RECOVERY_FLAG_FIELD = b"\xa0\x06" + _varint(ADD_FLAG_RECOVERY_ADD)  # AddRequest.flag (100): RECOVERY_ADD
_EOK_STATUS_FIELD = b"\x08\x00\x10"  # AddResponse.status (1) EOK, then the ledgerId tag (2)
_STATUS_EOK_FIELD = b"\x10\x00"  # Response.status: field 2, varint EOK
_U64_LIMIT = 1 << 64
_I64_LIMIT = 1 << 63
# BKPacketHeader{version: 3, operation: ADD_ENTRY, txnId: <n-byte varint>}, field 1 of a
# Request/Response, up to the txnId's bytes; indexed by the length of the txnId varint
_ADD_HEADER_FIELD = [_HEADER_FIELD + bytes((5 + n,)) + ADD_HEADER_START for n in range(11)]
# the same with the priority field after the txnId (a high-priority ADD)
_ADD_PRIORITY_HEADER_FIELD = [
    _HEADER_FIELD + bytes((5 + n + len(_PRIORITY_FIELD),)) + ADD_HEADER_START for n in range(11)
]
# the same for READ_ENTRY
_READ_HEADER_FIELD = [_HEADER_FIELD + bytes((5 + n,)) + READ_HEADER_START for n in range(11)]


def add_header_fields(txn_id: int, high_priority: bool = False) -> tuple[bytes, bytes] | None:
    """The header field (1) of an ADD request with ``txn_id`` (priority 100
    with ``high_priority``), and that of the bookie's answer to it (no
    priority), as upb writes them; None for a txnId that is not a uint64."""
    if type(txn_id) is not int or not 0 <= txn_id < _U64_LIMIT:
        return None
    txn = _varint(txn_id)
    head = _ADD_HEADER_FIELD[len(txn)] + txn
    if high_priority:
        return b"".join((_ADD_PRIORITY_HEADER_FIELD[len(txn)], txn, _PRIORITY_FIELD)), head
    return head, head


class AddResponseEncoder:
    """``serialize(add_response(request, status))`` for an ADD_ENTRY request
    with the given txnId and ids, by refilling one message (a bookie's hot
    path; see :class:`RequestEncoder`). Not thread-safe."""

    __slots__ = ("_msg", "_header", "_inner")

    def __init__(self) -> None:
        msg = self._msg = pb.Response()
        h = self._header = msg.header
        h.version = _V3
        h.operation = _OP_ADD
        self._inner = msg.addResponse

    def encode(self, txn_id: int, status: int, ledger_id: int, entry_id: int) -> bytes:
        s = v3_status(status)
        self._header.txnId = txn_id
        msg = self._msg
        msg.status = s
        inner = self._inner
        inner.status = s
        inner.ledgerId = ledger_id
        inner.entryId = entry_id
        return msg.SerializeToString()
