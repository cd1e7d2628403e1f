"""The ZooKeeper records a walk's scanner speaks (wire/metadata/zk/jute.py), byte for byte
as zookeeper.jute lays them out."""

from __future__ import annotations

import struct

import pytest

from bkctl.wire.errors import CodecError
from bkctl.wire.metadata.zk import jute

STAT = (1, 2, 1700000000000, 1700000000001, 3, 4, 5, 0, 7, 0, 9)


def _data(value: bytes) -> bytes:
    return struct.pack(">i", len(value)) + value + struct.pack(">qqqqiiiqiiq", *STAT)


def _children(names: list[str]) -> bytes:
    out = struct.pack(">i", len(names))
    for n in names:
        out += struct.pack(">i", len(n)) + n.encode()
    return out


def test_a_get_data_request_is_header_path_and_no_watch():
    frame = jute.get_data_request(7, "/ledgers/00/0000/L0001")
    path = b"/ledgers/00/0000/L0001"
    assert frame == struct.pack(">iiii", 4 + 4 + 4 + len(path) + 1, 7, 4, len(path)) + path + b"\x00"
    assert jute.get_children_request(8, "/a")[8:12] == struct.pack(">i", 8)


def test_a_multi_read_lists_each_op_then_the_done_header():
    frame = jute.multi_read_request(5, [(jute.OP_GET_DATA, "/a"), (jute.OP_GET_CHILDREN, "/b")])
    body = frame[4:]
    assert struct.unpack(">i", frame[:4])[0] == len(body)
    assert struct.unpack_from(">ii", body) == (5, jute.OP_MULTI_READ)
    expected = (
        struct.pack(">i?i", 4, False, -1)
        + struct.pack(">i", 2)
        + b"/a\x00"
        + struct.pack(">i?i", 8, False, -1)
        + struct.pack(">i", 2)
        + b"/b\x00"
        + struct.pack(">i?i", -1, True, -1)
    )
    assert body[8:] == expected


def test_connect_request_asks_for_a_new_session():
    frame = jute.connect_request(10_000)
    assert struct.unpack(">iiqiq", frame[:28]) == (len(frame) - 4, 0, 0, 10_000, 0)
    assert frame[28:] == struct.pack(">i", 16) + bytes(16) + b"\x00"
    answer = struct.pack(">iiq", 0, 6000, 0x1234) + struct.pack(">i", 16) + bytes(16) + b"\x00"
    assert jute.decode_connect_response(answer) == jute.ConnectResponse(6000, 0x1234)
    with pytest.raises(CodecError):
        jute.decode_connect_response(b"\x00" * 8)


def test_replies_decode_data_children_errors_and_multi_reads():
    header = struct.pack(">iqi", 9, 100, 0)
    got = jute.decode_reply(header + _data(b"value"), jute.OP_GET_DATA)
    assert got.xid == 9 and got.err == 0
    assert got.results == [jute.ReadResult(0, b"value", jute.Stat(*STAT))]
    assert got.results[0].stat.ctime == 1700000000000 and got.results[0].stat.version == 3
    assert jute.decode_reply(header + _children(["L0001", "L0002"]), jute.OP_GET_CHILDREN).results[0].children == [
        "L0001",
        "L0002",
    ]
    missing = jute.decode_reply(struct.pack(">iqi", 9, 100, jute.NO_NODE), jute.OP_GET_DATA)
    assert missing.err == jute.NO_NODE and missing.results == [jute.ReadResult(jute.NO_NODE)]
    multi = (
        header
        + struct.pack(">i?i", 4, False, 0)
        + _data(b"x")
        + struct.pack(">i?i", -1, False, jute.NO_NODE)
        + struct.pack(">i", jute.NO_NODE)
        + struct.pack(">i?i", 8, False, 0)
        + _children(["c"])
        + struct.pack(">i?i", -1, True, -1)
    )
    results = jute.decode_reply(multi, jute.OP_MULTI_READ).results
    assert [r.err for r in results] == [0, jute.NO_NODE, 0]
    assert results[0].data == b"x" and results[2].children == ["c"]


def test_a_cut_reply_is_a_codec_error_not_a_struct_error():
    header = struct.pack(">iqi", 9, 100, 0)
    with pytest.raises(CodecError, match="malformed ZooKeeper reply"):
        jute.decode_reply(header + _data(b"value")[:-10], jute.OP_GET_DATA)
    with pytest.raises(CodecError):
        jute.decode_reply(header + struct.pack(">i?i", 4, False, 0), jute.OP_MULTI_READ)


def test_frames_are_taken_off_the_stream_one_at_a_time_and_a_partial_one_waits():
    buf = bytearray(struct.pack(">i", 3) + b"abc" + struct.pack(">i", 2) + b"de" + struct.pack(">i", 5) + b"fg")
    assert jute.take_frame(buf) == b"abc"
    assert jute.take_frame(buf) == b"de"
    assert jute.take_frame(buf) is None and bytes(buf) == struct.pack(">i", 5) + b"fg"
    buf += b"hij"
    assert jute.take_frame(buf) == b"fghij" and not buf
    assert jute.take_frame(bytearray(b"\x00\x00")) is None
    with pytest.raises(CodecError, match="negative"):
        jute.take_frame(bytearray(struct.pack(">i", -5)))
