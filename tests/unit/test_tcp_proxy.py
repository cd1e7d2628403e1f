"""The fault campaign's TCP proxy (tests/support/tcp_proxy.py): a cut is a partition -- connections
stall (blackhole) or are reset, new ones reach nothing -- and a restore heals it, a blackholed
connection going on intact with the bytes it sent meanwhile."""

from __future__ import annotations

import socket
import threading

import pytest

from tests.support.tcp_proxy import BLACKHOLE, RESET, TcpProxy


class EchoServer:
    """Echoes every byte back; counts the connections it accepted and keeps what each sent."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.received: list[bytearray] = []
        self.stopping = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopping:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            got = bytearray()
            self.received.append(got)
            threading.Thread(target=self._echo, args=(conn, got), daemon=True).start()

    @staticmethod
    def _echo(conn, got):
        with conn:
            try:
                while data := conn.recv(4096):
                    got.extend(data)
                    conn.sendall(data)
            except OSError:
                return

    def close(self):
        self.stopping = True
        self.listener.close()


@pytest.fixture
def echo():
    server = EchoServer()
    yield server
    server.close()


@pytest.fixture
def proxy(echo):
    with TcpProxy(("127.0.0.1", echo.port)) as p:
        yield p


def connect(proxy: TcpProxy, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=timeout)


def echoed(sock: socket.socket, data: bytes) -> bytes:
    sock.sendall(data)
    got = b""
    while len(got) < len(data):
        chunk = sock.recv(4096)
        if not chunk:
            break
        got += chunk
    return got


def test_forwards_both_ways_and_passes_the_end_on(proxy, echo):
    with connect(proxy) as s:
        assert echoed(s, b"hello") == b"hello"
        big = bytes(range(256)) * 4096  # 1 MiB: more than one read each way
        s.sendall(big)
        s.shutdown(socket.SHUT_WR)  # the echo server sees EOF through the proxy, and closes
        got = bytearray()
        while chunk := s.recv(1 << 16):
            got.extend(chunk)
        assert bytes(got) == big
    assert echo.received[0] == b"hello" + big


def test_a_blackhole_stalls_connections_and_the_restore_resumes_them_intact(proxy, echo):
    with connect(proxy) as s:
        assert echoed(s, b"before") == b"before"
        proxy.cut(BLACKHOLE)
        s.sendall(b"during")
        s.settimeout(0.5)
        with pytest.raises(TimeoutError):  # nothing comes back: stalled, not closed nor reset
            s.recv(4096)
        assert echo.received[0] == b"before"  # and nothing went through
        late = connect(proxy)  # a new connection reaches nothing
        late.sendall(b"late")
        late.settimeout(0.5)
        with pytest.raises(TimeoutError):
            late.recv(4096)
        assert len(echo.received) == 1
        proxy.restore()
        s.settimeout(5)
        late.settimeout(5)
        assert s.recv(4096) == b"during"  # the same connection, the held bytes delivered
        assert late.recv(4096) == b"late"  # the connection made during the cut, joined now
        assert echoed(s, b"after") == b"after"
        late.close()
    assert echo.received[0] == b"beforeduringafter"
    assert proxy.resets == 0


def test_a_reset_cut_resets_every_connection_and_each_new_one_until_restored(proxy, echo):
    with connect(proxy) as s:
        assert echoed(s, b"x") == b"x"
        proxy.cut(RESET)
        with pytest.raises(ConnectionResetError):
            s.recv(4096)
    with pytest.raises(ConnectionResetError), connect(proxy) as again:  # reset on arrival
        again.recv(4096)
    assert echo.received == [bytearray(b"x")]  # nothing after the cut reached the far end
    assert proxy.resets == 2
    proxy.restore()
    with connect(proxy) as fresh:
        assert echoed(fresh, b"healed") == b"healed"


def test_a_cut_mode_is_checked():
    with TcpProxy(("127.0.0.1", 9)) as p, pytest.raises(ValueError, match="cut mode"):
        p.cut("slow")
