"""What a bookie's answer to a client request says: ``(rc, value)`` out of a
decoded response (a v3 ``Response`` from :func:`.v3.parse_response`, a v2
tuple from :func:`.v2.decode_response`).

``rc`` is 0 (EOK) with the operation's value, or the v2-valued return code
of a refusal (v3 statuses mapped by :func:`.protocol.rc_from_v3`) with None;
the client turns a refusal into its error. An EOK v3 answer that lacks the
operation's message raises :class:`~bkctl.wire.errors.CodecError`.  No I/O,
no client state: the connection picks one decoder per request.

Also the fixed shapes the client writes and recognizes by hand (its fast
paths): framed v2 ADD and plain READ requests, and the head of a v2 READ
or ADD answer.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from bkctl.wire.errors import CodecError

from .protocol import MASTER_KEY_LENGTH, V2_CURRENT_VERSION, OpCode, rc_from_v3

if TYPE_CHECKING:
    from ..proto import bookkeeper_pb2 as pb
    from . import v2

__all__ = [
    "Decoder",
    "LongPoll",
    "LacBodies",
    "DiskSpace",
    "v3_add",
    "v3_expect",
    "v3_read",
    "v3_long_poll",
    "v3_read_lac",
    "v3_bookie_info",
    "v3_entry_list",
    "v2_add",
    "v2_read",
    "v2_batch_read",
    "v2_add_frame",
    "v2_plain_read_frame",
    "V2_ANSWER_HEAD",
]

#: ``decoder(response) -> (rc, value)``
Decoder = Callable[[Any], "tuple[int, Any]"]


class LongPoll(NamedTuple):
    """A long-poll READ's answer: the bookie's LAC, and the entry after it when it came."""

    max_lac: int | None
    entry_id: int | None
    body: bytes | None


class LacBodies(NamedTuple):
    """A READ_LAC answer: the explicit LAC body and the last entry's, each None when absent."""

    lac_body: bytes | None
    last_entry_body: bytes | None


class DiskSpace(NamedTuple):
    """A GET_BOOKIE_INFO answer, each None when absent."""

    total_disk_bytes: int | None
    free_disk_bytes: int | None


# ------------------------------------------------------------------- v3


def _v3_inner(msg: pb.Response, field: str) -> tuple[int, Any]:
    """(rc, the operation's message of an EOK answer)."""
    status = msg.status
    inner = getattr(msg, field) if msg.HasField(field) else None
    if status == 0 and inner is not None:
        status = inner.status
    if status != 0:
        return rc_from_v3(status), None
    if inner is None:
        raise CodecError(f"answered EOK without {field}")
    return 0, inner


def v3_add(msg: pb.Response) -> tuple[int, None]:
    """ADD_ENTRY: nothing but the status (an EOK answer may omit addResponse)."""
    status = msg.status
    if status == 0 and msg.HasField("addResponse"):
        status = msg.addResponse.status
    return (rc_from_v3(status) if status != 0 else 0), None


def v3_expect(field: str) -> Decoder:
    """A decoder for operations answered by ``field`` with nothing in it
    but a status (WRITE_LAC, FORCE_LEDGER)."""

    def decode(msg: pb.Response) -> tuple[int, None]:
        return _v3_inner(msg, field)[0], None

    return decode


def v3_read(msg: pb.Response) -> tuple[int, bytes | None]:
    """READ_ENTRY: the stored entry (b"" when the answer has no body)."""
    rc, inner = _v3_inner(msg, "readResponse")
    if rc:
        return rc, None
    return 0, inner.body if inner.HasField("body") else b""


def v3_long_poll(msg: pb.Response) -> tuple[int, LongPoll | None]:
    """Long-poll READ: ``(max_lac, entry_id, body)``, the last two None without an entry."""
    rc, inner = _v3_inner(msg, "readResponse")
    if rc:
        return rc, None
    max_lac = inner.maxLAC if inner.HasField("maxLAC") else None
    if inner.HasField("body"):
        return 0, LongPoll(max_lac, inner.entryId, inner.body)
    return 0, LongPoll(max_lac, None, None)


def v3_read_lac(msg: pb.Response) -> tuple[int, LacBodies | None]:
    """READ_LAC: ``(lac_body, last_entry_body)``, each None when absent."""
    rc, inner = _v3_inner(msg, "readLacResponse")
    if rc:
        return rc, None
    return 0, LacBodies(
        inner.lacBody if inner.HasField("lacBody") else None,
        inner.lastEntryBody if inner.HasField("lastEntryBody") else None,
    )


def v3_bookie_info(msg: pb.Response) -> tuple[int, DiskSpace | None]:
    """GET_BOOKIE_INFO: ``(total_disk_bytes, free_disk_bytes)``, each None when absent."""
    rc, inner = _v3_inner(msg, "getBookieInfoResponse")
    if rc:
        return rc, None
    return 0, DiskSpace(
        inner.totalDiskCapacity if inner.HasField("totalDiskCapacity") else None,
        inner.freeDiskSpace if inner.HasField("freeDiskSpace") else None,
    )


def v3_entry_list(msg: pb.Response) -> tuple[int, bytes | None]:
    """GET_LIST_OF_ENTRIES_OF_LEDGER: the encoded availability (see :mod:`.availability`)."""
    rc, inner = _v3_inner(msg, "getListOfEntriesOfLedgerResponse")
    if rc:
        return rc, None
    return 0, inner.availabilityOfEntriesOfLedger


# ------------------------------------------------------------------- v2


def v2_add(msg: v2.AddResponse) -> tuple[int, None]:
    return msg.rc, None


def v2_read(msg: v2.ReadResponse) -> tuple[int, bytes | None]:
    return (0, msg.body) if msg.rc == 0 else (msg.rc, None)


def v2_batch_read(msg: v2.BatchReadResponse) -> tuple[int, list[bytes] | None]:
    return (0, list(msg.entries)) if msg.rc == 0 else (msg.rc, None)


# ---------------------------------------------- v2 shapes written by hand

_OPC_ADD = int(OpCode.ADD_ENTRY)
_OPC_READ = int(OpCode.READ_ENTRY)
_V2_ADD_HEAD = struct.Struct(">ii")  # frame length, header (version, opcode, flags)
_V2_ADD_HEADER = (V2_CURRENT_VERSION << 24) | (_OPC_ADD << 16)
_V2_READ_FRAME = struct.Struct(">iiqq")  # frame length, header (no flags), ledger and entry ids
_V2_READ_LEN = _V2_READ_FRAME.size - 4
_V2_READ_HEADER = (V2_CURRENT_VERSION << 24) | (_OPC_READ << 16)
#: The head of a v2 READ or ADD answer: header, rc, ledger and entry ids (a read's entry follows).
V2_ANSWER_HEAD = struct.Struct(">iiqq")


def v2_add_frame(flags: int, master_key: bytes, body: bytes) -> bytes:
    """``frame(v2.AddRequest(V2_CURRENT_VERSION, flags, master_key, body, ...).encode())``;
    ``body`` (bytes) is the packaged entry, which starts with its ids."""
    return b"".join((_V2_ADD_HEAD.pack(4 + MASTER_KEY_LENGTH + len(body), _V2_ADD_HEADER | flags), master_key, body))


def v2_plain_read_frame(ledger_id: int, entry_id: int) -> bytes:
    """``frame(v2.ReadRequest(V2_CURRENT_VERSION, 0, ledger_id, entry_id).encode())``."""
    return _V2_READ_FRAME.pack(_V2_READ_LEN, _V2_READ_HEADER, ledger_id, entry_id)
