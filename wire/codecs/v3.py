"""v3 (protobuf) codec: parse, serialize and build bookie Requests/Responses.

The generated classes in :mod:`bkctl.wire.proto.bookkeeper_pb2` *are* the message
objects; this module only adds strict parsing, serialization and builders
that reproduce the exact bytes a Java 4.17 client or bookie puts on the wire.
The hot paths' hand-made twins of some of them are :mod:`.v3_fast`.

Payloads here never include the 4-byte frame length; :mod:`bkctl.wire.codecs.framing`
adds and strips it.

Conventions:

* ``status`` arguments take a v3 ``StatusCode`` number such as
  ``RC.EFENCED.v3``, or an :class:`bkctl.wire.codecs.protocol.RC` member (v2-valued). The
  v2 and v3 ranges only share 0 (EOK), so both forms are unambiguous; the
  Response always carries the v3 number. Anything else raises ValueError.
* Request builders take the client's transaction id first. Response builders
  take the parsed request they answer and copy its operation and txnId.
* Reading a ``bytes`` field of a parsed message (``req.addRequest.body``)
  returns a fresh copy on every access: read it once and keep the result.
* Trap: proto2 enums default to their *first* value, so an absent
  ``ReadRequest.flag`` reads as FENCE_LEDGER and an absent ``AddRequest.flag``
  as RECOVERY_ADD. Test flags with :func:`is_fence_read`,
  :func:`is_piggyback_read`, :func:`is_recovery_add` (or ``HasField("flag")``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bkctl.wire.codecs.protocol import (
    ADD_FLAG_RECOVERY_ADD,
    AUTH_DISABLED_PLUGIN,
    HIGH_PRIORITY_VALUE,
    RC,
    READ_FLAG_ENTRY_PIGGYBACK,
    READ_FLAG_FENCE_LEDGER,
    V3_STATUS,
    WRITE_FLAG_DEFERRED_SYNC,
    OperationType,
    ProtocolVersion,
)
from bkctl.wire.errors import CodecError
from bkctl.wire.proto import bookkeeper_pb2 as pb

if TYPE_CHECKING:
    from google.protobuf.message import Message

__all__ = [
    "Request",
    "Response",
    "BKPacketHeader",
    "REQUEST_FIELD",
    "RESPONSE_FIELD",
    "parse_request",
    "parse_response",
    "serialize",
    "v3_status",
    "is_high_priority",
    "is_fence_read",
    "is_piggyback_read",
    "is_long_poll_read",
    "is_recovery_add",
    "is_deferred_sync",
    # request builders (client side)
    "add_request",
    "read_request",
    "read_lac_request",
    "write_lac_request",
    "force_ledger_request",
    "get_bookie_info_request",
    "get_list_of_entries_request",
    "auth_request",
    "start_tls_request",
    # response builders (bookie side)
    "add_response",
    "read_response",
    "read_lac_response",
    "write_lac_response",
    "force_ledger_response",
    "get_bookie_info_response",
    "get_list_of_entries_response",
    "auth_response",
    "start_tls_response",
    "error_response",
    "status_response",
    "bad_version_response",
]

Request = pb.Request
Response = pb.Response
BKPacketHeader = pb.BKPacketHeader

# Plain ints, bound once: enum attribute lookups are measurable on the hot path.
_V3 = int(ProtocolVersion.VERSION_THREE)
_OP_READ = int(OperationType.READ_ENTRY)
_OP_ADD = int(OperationType.ADD_ENTRY)
_OP_AUTH = int(OperationType.AUTH)
_OP_WRITE_LAC = int(OperationType.WRITE_LAC)
_OP_READ_LAC = int(OperationType.READ_LAC)
_OP_BOOKIE_INFO = int(OperationType.GET_BOOKIE_INFO)
_OP_START_TLS = int(OperationType.START_TLS)
_OP_FORCE = int(OperationType.FORCE_LEDGER)
_OP_LIST_ENTRIES = int(OperationType.GET_LIST_OF_ENTRIES_OF_LEDGER)
_EOK = 0
_EBADVERSION = RC.EBADVERSION.v3

#: Name of the Request field that carries each operation's message.
REQUEST_FIELD: dict[int, str] = {
    _OP_READ: "readRequest",
    _OP_ADD: "addRequest",
    _OP_AUTH: "authRequest",
    _OP_WRITE_LAC: "writeLacRequest",
    _OP_READ_LAC: "readLacRequest",
    _OP_BOOKIE_INFO: "getBookieInfoRequest",
    _OP_START_TLS: "startTLSRequest",
    _OP_FORCE: "forceLedgerRequest",
    _OP_LIST_ENTRIES: "getListOfEntriesOfLedgerRequest",
}
#: Name of the Response field that carries each operation's message.
RESPONSE_FIELD: dict[int, str] = {
    _OP_READ: "readResponse",
    _OP_ADD: "addResponse",
    _OP_AUTH: "authResponse",
    _OP_WRITE_LAC: "writeLacResponse",
    _OP_READ_LAC: "readLacResponse",
    _OP_BOOKIE_INFO: "getBookieInfoResponse",
    _OP_START_TLS: "startTLSResponse",
    _OP_FORCE: "forceLedgerResponse",
    _OP_LIST_ENTRIES: "getListOfEntriesOfLedgerResponse",
}

# RC members hash like their v2 ints, so one table serves RC, v2 ints and v3 ints.
_STATUS: dict[int, int] = {}
for _rc, _num in V3_STATUS.items():
    _STATUS[int(_rc)] = _num
    _STATUS[_num] = _num
del _rc, _num


def v3_status(status: int) -> int:
    """The v3 ``StatusCode`` number for an :class:`RC` (or its v2 int) or a
    v3 number; ValueError for anything else."""
    try:
        return _STATUS[status]
    except (KeyError, TypeError):
        raise ValueError(f"not a bookie status code: {status!r}") from None


# ------------------------------------------------------------------ parsing


def parse_request(payload: bytes | bytearray | memoryview) -> pb.Request:
    """Decode a v3 Request payload (no length prefix).

    Raises :class:`CodecError`, and nothing else, when the bytes are not a
    complete Request (corrupt wire format or a missing required field, which
    is exactly when a Java bookie's parse fails too).
    """
    msg = pb.Request()
    try:
        msg.ParseFromString(payload)
        complete = msg.IsInitialized()
    except Exception as exc:  # DecodeError, TypeError for odd inputs, ...
        raise CodecError(f"malformed v3 Request: {exc}") from None
    if not complete:
        raise CodecError(
            "v3 Request lacks required fields: " + ", ".join(msg.FindInitializationErrors())  # type: ignore[attr-defined]
        )
    return msg


def parse_response(payload: bytes | bytearray | memoryview) -> pb.Response:
    """Decode a v3 Response payload (no length prefix); see :func:`parse_request`."""
    msg = pb.Response()
    try:
        msg.ParseFromString(payload)
        complete = msg.IsInitialized()
    except Exception as exc:
        raise CodecError(f"malformed v3 Response: {exc}") from None
    if not complete:
        raise CodecError(
            "v3 Response lacks required fields: " + ", ".join(msg.FindInitializationErrors())  # type: ignore[attr-defined]
        )
    return msg


def serialize(msg: Message) -> bytes:
    """Encode a message to its payload bytes (no length prefix).

    Raises :class:`CodecError` if a required field is unset (Java would
    refuse to parse such a message).
    """
    try:
        return msg.SerializeToString()
    except Exception as exc:  # EncodeError: missing required fields
        raise CodecError(f"cannot encode {type(msg).__name__}: {exc}") from None


# ------------------------------------------------------ request predicates


def is_high_priority(request: pb.Request) -> bool:
    """Header priority > 0 (Java sends 100 for recovery traffic)."""
    return request.header.priority > 0


def is_fence_read(request: pb.Request) -> bool:
    read = request.readRequest
    return read.HasField("flag") and read.flag == READ_FLAG_FENCE_LEDGER


def is_piggyback_read(request: pb.Request) -> bool:
    read = request.readRequest
    return read.HasField("flag") and read.flag == READ_FLAG_ENTRY_PIGGYBACK


def is_long_poll_read(request: pb.Request) -> bool:
    """A non-fencing read that carries previousLAC (bookie waits for the LAC
    to move past it, up to timeOut ms)."""
    return request.readRequest.HasField("previousLAC") and not is_fence_read(request)


def is_recovery_add(request: pb.Request) -> bool:
    add = request.addRequest
    return add.HasField("flag") and add.flag == ADD_FLAG_RECOVERY_ADD


def is_deferred_sync(request: pb.Request) -> bool:
    return bool(request.addRequest.writeFlags & WRITE_FLAG_DEFERRED_SYNC)


# --------------------------------------------------------- request builders
#
# Fields are assigned one by one on the new message: with upb that is faster
# than keyword/dict construction. proto2 serializes every field that was set,
# in field-number order, which is also what Java does.


def _bytes(value: bytes | bytearray | memoryview) -> bytes:
    return value if type(value) is bytes else bytes(value)


def _new_request(op: int, txn_id: int, high_priority: bool = False) -> pb.Request:
    msg = pb.Request()
    h = msg.header
    h.version = _V3
    h.operation = op
    h.txnId = txn_id
    if high_priority:
        h.priority = HIGH_PRIORITY_VALUE
    return msg


def add_request(
    txn_id: int,
    ledger_id: int,
    entry_id: int,
    master_key: bytes,
    body: bytes,
    *,
    recovery: bool = False,
    high_priority: bool = False,
    deferred_sync: bool = False,
) -> pb.Request:
    """ADD_ENTRY. ``body`` is the digest-packaged entry; ``recovery`` sets
    RECOVERY_ADD (accepted on a fenced ledger); ``high_priority`` sets header
    priority 100; ``deferred_sync`` sets the DEFERRED_SYNC write flag (ack
    before the journal fsync)."""
    msg = _new_request(_OP_ADD, txn_id, high_priority)
    add = msg.addRequest
    add.ledgerId = ledger_id
    add.entryId = entry_id
    add.masterKey = master_key if type(master_key) is bytes else bytes(master_key)
    add.body = body if type(body) is bytes else bytes(body)
    if recovery:
        add.flag = ADD_FLAG_RECOVERY_ADD
    if deferred_sync:
        add.writeFlags = WRITE_FLAG_DEFERRED_SYNC
    return msg


def read_request(
    txn_id: int,
    ledger_id: int,
    entry_id: int,
    *,
    fence_master_key: bytes | None = None,
    high_priority: bool = False,
    previous_lac: int | None = None,
    timeout_ms: int | None = None,
    piggyback: bool = False,
) -> pb.Request:
    """READ_ENTRY (``entry_id`` -1 = last add confirmed).

    ``fence_master_key`` makes it a fencing read (FENCE_LEDGER + masterKey).
    ``previous_lac``/``timeout_ms`` make it a long poll, and ``piggyback``
    additionally asks for entry previous_lac+1 (ENTRY_PIGGYBACK). The v3 flag
    is a single value, so fencing and piggyback cannot be combined.
    """
    msg = _new_request(_OP_READ, txn_id, high_priority)
    read = msg.readRequest
    read.ledgerId = ledger_id
    read.entryId = entry_id
    if fence_master_key is not None:
        if piggyback:
            raise ValueError("a v3 read carries one flag: fencing and piggyback exclude each other")
        read.flag = READ_FLAG_FENCE_LEDGER
        read.masterKey = _bytes(fence_master_key)
    elif piggyback:
        read.flag = READ_FLAG_ENTRY_PIGGYBACK
    if previous_lac is not None:
        read.previousLAC = previous_lac
    if timeout_ms is not None:
        read.timeOut = timeout_ms
    return msg


def read_lac_request(txn_id: int, ledger_id: int) -> pb.Request:
    msg = _new_request(_OP_READ_LAC, txn_id)
    msg.readLacRequest.ledgerId = ledger_id
    return msg


def write_lac_request(txn_id: int, ledger_id: int, lac: int, master_key: bytes, body: bytes) -> pb.Request:
    """WRITE_LAC; ``body`` is the digest-packaged LAC payload."""
    msg = _new_request(_OP_WRITE_LAC, txn_id)
    w = msg.writeLacRequest
    w.ledgerId = ledger_id
    w.lac = lac
    w.masterKey = _bytes(master_key)
    w.body = _bytes(body)
    return msg


def force_ledger_request(txn_id: int, ledger_id: int) -> pb.Request:
    msg = _new_request(_OP_FORCE, txn_id)
    msg.forceLedgerRequest.ledgerId = ledger_id
    return msg


def get_bookie_info_request(txn_id: int, requested: int) -> pb.Request:
    """GET_BOOKIE_INFO; ``requested`` is a mask of BOOKIE_INFO_* bits."""
    msg = _new_request(_OP_BOOKIE_INFO, txn_id)
    msg.getBookieInfoRequest.requested = requested
    return msg


def get_list_of_entries_request(txn_id: int, ledger_id: int) -> pb.Request:
    msg = _new_request(_OP_LIST_ENTRIES, txn_id)
    msg.getListOfEntriesOfLedgerRequest.ledgerId = ledger_id
    return msg


def auth_request(txn_id: int, plugin_name: str, payload: bytes = b"") -> pb.Request:
    msg = _new_request(_OP_AUTH, txn_id)
    auth = msg.authRequest
    auth.authPluginName = plugin_name
    auth.payload = _bytes(payload)
    return msg


def start_tls_request(txn_id: int) -> pb.Request:
    msg = _new_request(_OP_START_TLS, txn_id)
    msg.startTLSRequest.SetInParent()  # present but empty: tag + zero length
    return msg


# -------------------------------------------------------- response builders


def _new_response(request: pb.Request, status: int, echo_header: bool = False) -> pb.Response:
    """Response with the reply header and the top-level status set."""
    msg = pb.Response()
    if echo_header:
        msg.header.CopyFrom(request.header)
    else:
        src = request.header
        h = msg.header
        h.version = _V3
        h.operation = src.operation
        h.txnId = src.txnId
    msg.status = status
    return msg


def add_response(request: pb.Request, status: int) -> pb.Response:
    """ADD_ENTRY reply; ledgerId/entryId come from the request's AddRequest."""
    s = v3_status(status)
    msg = _new_response(request, s)
    src = request.addRequest
    add = msg.addResponse
    add.status = s
    add.ledgerId = src.ledgerId
    add.entryId = src.entryId
    return msg


def read_response(
    request: pb.Request,
    status: int,
    body: bytes | None = None,
    max_lac: int | None = None,
    entry_id: int | None = None,
    lac_update_ts: int | None = None,
) -> pb.Response:
    """READ_ENTRY reply. ``entry_id`` defaults to the requested id (-1 stays
    -1 for LAC reads); a piggyback long-poll reply sets it to the entry in
    ``body``. Java adds ``max_lac`` to plain reads and long polls, not to
    fencing reads or errors."""
    s = v3_status(status)
    msg = _new_response(request, s)
    src = request.readRequest
    read = msg.readResponse
    read.status = s
    read.ledgerId = src.ledgerId
    read.entryId = src.entryId if entry_id is None else entry_id
    if body is not None:
        read.body = body if type(body) is bytes else bytes(body)
    if max_lac is not None:
        read.maxLAC = max_lac
    if lac_update_ts is not None:
        read.lacUpdateTimestamp = lac_update_ts
    return msg


def read_lac_response(
    request: pb.Request,
    status: int,
    lac_body: bytes | None = None,
    last_entry_body: bytes | None = None,
) -> pb.Response:
    """READ_LAC reply: the last WRITE_LAC payload and the highest stored entry."""
    s = v3_status(status)
    msg = _new_response(request, s)
    inner = msg.readLacResponse
    inner.status = s
    inner.ledgerId = request.readLacRequest.ledgerId
    if lac_body is not None:
        inner.lacBody = _bytes(lac_body)
    if last_entry_body is not None:
        inner.lastEntryBody = _bytes(last_entry_body)
    return msg


def write_lac_response(request: pb.Request, status: int) -> pb.Response:
    s = v3_status(status)
    msg = _new_response(request, s)
    inner = msg.writeLacResponse
    inner.status = s
    inner.ledgerId = request.writeLacRequest.ledgerId
    return msg


def force_ledger_response(request: pb.Request, status: int) -> pb.Response:
    s = v3_status(status)
    msg = _new_response(request, s)
    inner = msg.forceLedgerResponse
    inner.status = s
    inner.ledgerId = request.forceLedgerRequest.ledgerId
    return msg


def get_bookie_info_response(
    request: pb.Request, status: int, total: int | None = None, free: int | None = None
) -> pb.Response:
    """GET_BOOKIE_INFO reply; pass only the fields the request asked for."""
    s = v3_status(status)
    msg = _new_response(request, s)
    inner = msg.getBookieInfoResponse
    inner.status = s
    if total is not None:
        inner.totalDiskCapacity = total
    if free is not None:
        inner.freeDiskSpace = free
    return msg


def get_list_of_entries_response(request: pb.Request, status: int, availability: bytes | None = None) -> pb.Response:
    """GET_LIST_OF_ENTRIES_OF_LEDGER reply; ``availability`` is the encoded
    entry-availability bitmap (64-byte header + groups)."""
    s = v3_status(status)
    msg = _new_response(request, s)
    inner = msg.getListOfEntriesOfLedgerResponse
    inner.status = s
    inner.ledgerId = request.getListOfEntriesOfLedgerRequest.ledgerId
    if availability is not None:
        inner.availabilityOfEntriesOfLedger = _bytes(availability)
    return msg


def auth_response(request: pb.Request, *, echo_header: bool = False) -> pb.Response:
    """The reply of a bookie without authentication: status EOK and
    ``AuthMessage{"AuthDisabledPlugin", b""}``.

    ``echo_header=True`` copies the request header verbatim (priority and
    version included), which is what the Java bookie does for this reply.
    """
    msg = _new_response(request, _EOK, echo_header)
    auth = msg.authResponse
    auth.authPluginName = AUTH_DISABLED_PLUGIN
    auth.payload = b""
    return msg


def start_tls_response(request: pb.Request, status: int = _EOK) -> pb.Response:
    """START_TLS reply: EOK with an empty StartTLSResponse, or (TLS not
    configured) EBADREQ with no inner message."""
    s = v3_status(status)
    msg = _new_response(request, s)
    if s == _EOK:
        msg.startTLSResponse.SetInParent()
    return msg


def error_response(request: pb.Request, status: int, *, echo_header: bool = False) -> pb.Response:
    """Header and status only, no operation message: the reply to an unknown
    or unsupported operation (EBADREQ) or to a request refused before
    authentication (EUA).

    ``echo_header=True`` copies the request header verbatim, as the Java
    bookie does in these two cases.
    """
    return _new_response(request, v3_status(status), echo_header)


_STATUS_ONLY = {
    _OP_ADD: add_response,
    _OP_READ: read_response,
    _OP_READ_LAC: read_lac_response,
    _OP_WRITE_LAC: write_lac_response,
    _OP_FORCE: force_ledger_response,
    _OP_BOOKIE_INFO: get_bookie_info_response,
    _OP_LIST_ENTRIES: get_list_of_entries_response,
}


def status_response(request: pb.Request, status: int) -> pb.Response:
    """A reply carrying only ``status`` and the request's ids, inside the
    operation's own message (how Java reports EBADVERSION, ETOOMANYREQUESTS,
    EREADONLY... for a known operation). Operations without such a message
    (AUTH, START_TLS, unknown ones) get :func:`error_response`."""
    build = _STATUS_ONLY.get(request.header.operation, error_response)
    return build(request, status)


def bad_version_response(request: pb.Request) -> pb.Response:
    """Reply to a request whose header version is not VERSION_THREE: the
    operation's message with EBADVERSION (header version is still THREE)."""
    return status_response(request, _EBADVERSION)
