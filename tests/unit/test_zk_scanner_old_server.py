"""The multiRead scanner against a ZooKeeper older than 3.6, which has no multiRead.

The double below answers as such a server does (ZooKeeperServer.submitRequest hands an op
code it does not know to UnimplementedRequestProcessor: a reply header with UNIMPLEMENTED,
-6, and the session closed), and answers plain getData/getChildren from a dict.  Its
replies are packed here by hand from the jute layouts, apart from the codec under test.
The scanner must go on with plain pipelined reads and give every znode once, in order.
"""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from bkctl.wire.metadata.zk.scan import ZnodeScanner

UNIMPLEMENTED = -6
NO_NODE = -101
GET_DATA, GET_CHILDREN, MULTI_READ, CLOSE = 4, 8, 22, -11


def _stat(data: bytes, children: int) -> bytes:
    # czxid mzxid ctime mtime version cversion aversion ephemeralOwner dataLength numChildren pzxid
    return struct.pack(">qqqqiiiqiiq", 1, 2, 1700000000000, 1700000000001, 0, 0, 0, 0, len(data), children, 3)


class OldZooKeeper:
    """A server of ZooKeeper 3.5's protocol on 127.0.0.1 (one connection at a time)."""

    def __init__(self, znodes: dict[str, bytes], children: dict[str, list[str]]):
        self.znodes = znodes
        self.children = children
        self.ops: list[int] = []  # every request's op code, in order
        self.sessions = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def close(self) -> None:
        # shut down first: closing alone leaves the thread in accept(), and the join waited 5 s
        self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.thread.join(5)
        assert not self.thread.is_alive()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                self._session(conn)

    @staticmethod
    def _frame(conn: socket.socket) -> bytes | None:
        head = conn.recv(4, socket.MSG_WAITALL)
        if len(head) < 4:
            return None
        (size,) = struct.unpack(">i", head)
        return conn.recv(size, socket.MSG_WAITALL)

    @staticmethod
    def _send(conn: socket.socket, body: bytes) -> None:
        conn.sendall(struct.pack(">i", len(body)) + body)

    def _session(self, conn: socket.socket) -> None:
        if self._frame(conn) is None:  # the ConnectRequest
            return
        self.sessions += 1
        # ConnectResponse: protocolVersion, timeOut, sessionId, passwd, readOnly
        self._send(conn, struct.pack(">iiqi", 0, 10000, 0x1234 + self.sessions, 16) + bytes(16) + b"\x00")
        while (frame := self._frame(conn)) is not None:
            xid, op = struct.unpack_from(">ii", frame)
            self.ops.append(op)
            if op == CLOSE:
                self._send(conn, struct.pack(">iqi", xid, 9, 0))
                return
            if op not in (GET_DATA, GET_CHILDREN):  # 3.5: UnimplementedRequestProcessor
                self._send(conn, struct.pack(">iqi", xid, 9, UNIMPLEMENTED))
                return  # ... and the session closed
            (size,) = struct.unpack_from(">i", frame, 8)
            path = frame[12 : 12 + size].decode()
            if op == GET_DATA and path in self.znodes:
                data = self.znodes[path]
                body = struct.pack(">i", len(data)) + data + _stat(data, len(self.children.get(path, [])))
            elif op == GET_CHILDREN and path in self.children:
                names = [n.encode() for n in self.children[path]]
                body = struct.pack(">i", len(names)) + b"".join(struct.pack(">i", len(n)) + n for n in names)
            else:
                self._send(conn, struct.pack(">iqi", xid, 9, NO_NODE))
                continue
            self._send(conn, struct.pack(">iqi", xid, 9, 0) + body)


@pytest.fixture
def old_server():
    znodes = {f"/ledgers/L{i:04d}": f"ledger {i}".encode() for i in range(25) if i % 7 != 3}
    server = OldZooKeeper(znodes, {"/ledgers": sorted(p.rsplit("/", 1)[1] for p in znodes), "/empty": []})
    yield server
    server.close()


def test_without_multiread_the_walk_goes_on_with_plain_reads_each_znode_once_in_order(old_server):
    paths = [f"/ledgers/L{i:04d}" for i in range(25)]
    with ZnodeScanner(f"127.0.0.1:{old_server.port}", timeout=5, batch=4, window=3) as scanner:
        got = list(scanner.get_many(paths))
    assert [v.data if v else None for v in got] == [old_server.znodes.get(p) for p in paths]
    assert all(v.stat.dataLength == len(v.data) and v.stat.ctime == 1700000000000 for v in got if v)
    # one multiRead, refused with the session; a new session, and only plain reads after it
    assert old_server.ops.count(MULTI_READ) == 1 and old_server.ops[0] == MULTI_READ
    assert set(old_server.ops[1:]) <= {GET_DATA, CLOSE}
    assert old_server.sessions == 2


def test_children_are_listed_with_plain_reads_too(old_server):
    with ZnodeScanner(f"127.0.0.1:{old_server.port}", timeout=5, batch=2, window=2) as scanner:
        got = list(scanner.children_many(["/ledgers", "/missing", "/empty"]))
    assert got == [old_server.children["/ledgers"], None, []]
    assert old_server.ops.count(MULTI_READ) == 1
