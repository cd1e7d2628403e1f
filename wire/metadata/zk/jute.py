"""ZooKeeper's client protocol (jute records), only what a read-only walk needs: the
connect handshake, digest authentication, getData, getChildren and ZooKeeper
3.6's multiRead (many reads answered in one reply).  Pure codecs, no I/O: the
scanner (:mod:`.scan`) owns the socket.

Layouts as ZooKeeper's ``zookeeper.jute`` declares them (big-endian; a ``buffer``
or ``ustring`` is an int length, -1 for null, then the bytes; a ``vector`` an int
count then its items; a ``boolean`` one byte); every frame on the socket is an
int length and then the record.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from bkctl.wire.errors import CodecError

__all__ = [
    "ConnectResponse",
    "ReadResult",
    "Reply",
    "Stat",
    "OP_GET_CHILDREN",
    "OP_GET_DATA",
    "OP_MULTI_READ",
    "auth_request",
    "close_request",
    "connect_request",
    "decode_connect_response",
    "decode_reply",
    "get_children_request",
    "get_data_request",
    "multi_read_request",
    "take_frame",
]

OP_GET_DATA = 4
OP_GET_CHILDREN = 8
OP_MULTI_READ = 22
OP_CLOSE = -11
OP_AUTH = 100
#: the xid ZooKeeper reserves for an auth packet
AUTH_XID = -4
#: error codes (KeeperException.Code) a walk tells apart
OK = 0
NO_NODE = -101
NO_AUTH = -102
AUTH_FAILED = -115
SESSION_CLOSED_REQUIRE_SASL = -124
UNIMPLEMENTED = -6

_INT = struct.Struct(">i")
_HEADER = struct.Struct(">iiq")  # length, xid, zxid (the err int follows)
_REQ_HEADER = struct.Struct(">iii")  # length, xid, type
_MULTI_HEADER = struct.Struct(">i?i")  # type, done, err
_STAT = struct.Struct(">qqqqiiiqiiq")
_CONNECT = struct.Struct(">iqiq")


class Stat(NamedTuple):
    """A znode's Stat, under the field names kazoo's ZnodeStat uses."""

    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeralOwner: int
    dataLength: int
    numChildren: int
    pzxid: int


class ReadResult(NamedTuple):
    """One read's answer: ``err`` 0 with ``data`` and ``stat`` (getData) or ``children``
    (getChildren); otherwise ZooKeeper's error code and nothing else."""

    err: int
    data: bytes | None = None
    stat: Stat | None = None
    children: list[str] | None = None


class Reply(NamedTuple):
    """A reply frame: its xid, the error of the whole request and the reads it answers
    (one for getData/getChildren, one per op for multiRead, none for auth)."""

    xid: int
    err: int
    results: list[ReadResult]


class ConnectResponse(NamedTuple):
    timeout_ms: int
    session_id: int


def _ustring(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _INT.pack(len(raw)) + raw


def _buffer(raw: bytes) -> bytes:
    return _INT.pack(len(raw)) + raw


def _frame(body: bytes) -> bytes:
    return _INT.pack(len(body)) + body


def connect_request(timeout_ms: int, read_only: bool = False) -> bytes:
    """A new session's ConnectRequest: protocol 0, no zxid seen, no session to resume."""
    return _frame(_CONNECT.pack(0, 0, timeout_ms, 0) + _buffer(bytes(16)) + (b"\x01" if read_only else b"\x00"))


def decode_connect_response(frame: bytes) -> ConnectResponse:
    """The server's ConnectResponse (a frame without its length); a timeout of 0 or
    less is ZooKeeper refusing the session."""
    if len(frame) < 16:
        raise CodecError(f"ZooKeeper connect response of {len(frame)} bytes is too short")
    _proto, timeout_ms, session_id = struct.unpack_from(">iiq", frame)
    return ConnectResponse(timeout_ms, session_id)


def auth_request(scheme: str, auth: bytes) -> bytes:
    return _frame(struct.pack(">iii", AUTH_XID, OP_AUTH, 0) + _ustring(scheme) + _buffer(auth))


def close_request(xid: int) -> bytes:
    return _frame(struct.pack(">ii", xid, OP_CLOSE))


def get_data_request(xid: int, path: str) -> bytes:
    raw = path.encode("utf-8")
    return _REQ_HEADER.pack(len(raw) + 13, xid, OP_GET_DATA) + _INT.pack(len(raw)) + raw + b"\x00"


def get_children_request(xid: int, path: str) -> bytes:
    raw = path.encode("utf-8")
    return _REQ_HEADER.pack(len(raw) + 13, xid, OP_GET_CHILDREN) + _INT.pack(len(raw)) + raw + b"\x00"


def multi_read_request(xid: int, ops: Sequence[tuple[int, str]]) -> bytes:
    """One multiRead of ``(OP_GET_DATA or OP_GET_CHILDREN, path)`` ops, each without a watch."""
    parts = [struct.pack(">ii", xid, OP_MULTI_READ)]
    headers = _OP_HEADERS
    pack_int = _INT.pack
    for op, path in ops:
        raw = path.encode("utf-8")
        parts.append(headers[op] + pack_int(len(raw)) + raw + b"\x00")
    parts.append(_MULTI_DONE)
    return _frame(b"".join(parts))


#: each op's header inside a multiRead, and the header that ends one (a walk sends a
#: million of them)
_OP_HEADERS = {op: _MULTI_HEADER.pack(op, False, -1) for op in (OP_GET_DATA, OP_GET_CHILDREN)}
_MULTI_DONE = _MULTI_HEADER.pack(-1, True, -1)


def take_frame(buf: bytearray) -> bytes | None:
    """Take the first whole frame off the front of *buf* (its body), or None while
    *buf* holds only the start of one."""
    if len(buf) < 4:
        return None
    (size,) = _INT.unpack_from(buf, 0)
    if size < 0:
        raise CodecError(f"ZooKeeper frame of negative length {size}")
    if len(buf) < 4 + size:
        return None
    frame = bytes(buf[4 : 4 + size])
    del buf[: 4 + size]
    return frame


def _read_data(frame: bytes, pos: int) -> tuple[ReadResult, int]:
    (size,) = _INT.unpack_from(frame, pos)
    pos += 4
    if size < 0:
        data = b""
    else:
        data = frame[pos : pos + size]
        pos += size
    # tuple.__new__ is what Stat._make and ReadResult() do, without their Python frames
    stat = _new_tuple(Stat, _STAT.unpack_from(frame, pos))
    return _new_tuple(ReadResult, (OK, data, stat, None)), pos + _STAT_SIZE


_new_tuple = tuple.__new__
_STAT_SIZE = _STAT.size


def _read_children(frame: bytes, pos: int) -> tuple[ReadResult, int]:
    (count,) = _INT.unpack_from(frame, pos)
    pos += 4
    names = []
    for _ in range(max(count, 0)):
        (size,) = _INT.unpack_from(frame, pos)
        pos += 4
        names.append(frame[pos : pos + size].decode("utf-8"))
        pos += size
    return ReadResult(OK, children=names), pos


def decode_reply(frame: bytes, op: int) -> Reply:
    """A reply frame (without its length) to a request of type *op*."""
    try:
        xid, _zxid = struct.unpack_from(">iq", frame)
        (err,) = _INT.unpack_from(frame, 12)
        pos = 16
        if err != OK or op not in (OP_GET_DATA, OP_GET_CHILDREN, OP_MULTI_READ):
            return Reply(xid, err, [ReadResult(err)] if err != OK and op != OP_MULTI_READ else [])
        if op == OP_GET_DATA:
            return Reply(xid, OK, [_read_data(frame, pos)[0]])
        if op == OP_GET_CHILDREN:
            return Reply(xid, OK, [_read_children(frame, pos)[0]])
        results: list[ReadResult] = []
        while True:
            kind, done, op_err = _MULTI_HEADER.unpack_from(frame, pos)
            pos += _MULTI_HEADER.size
            if done:
                return Reply(xid, OK, results)
            if kind == OP_GET_DATA:
                result, pos = _read_data(frame, pos)
            elif kind == OP_GET_CHILDREN:
                result, pos = _read_children(frame, pos)
            else:  # an ErrorResult: the op's error code
                (code,) = _INT.unpack_from(frame, pos)
                pos += 4
                result = ReadResult(code or op_err)
            results.append(result)
    except (struct.error, UnicodeDecodeError) as exc:
        raise CodecError(f"malformed ZooKeeper reply: {exc}") from None
