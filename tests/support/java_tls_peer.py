"""A TLS bookie front that behaves as a Java 4.17 bookie does when a client closes: it completes
START_TLS (v3, answered EOK in the clear) and the TLS handshake, serves every request (relayed to a
real plain-text bookied behind it), and when the client sends its TLS ``close_notify`` it neither
answers it nor closes the socket -- Java's ``TLSContextFactory``/Netty ``SslHandler`` keeps the
channel open until the client goes.  A client that waits for the peer to close waits forever.

Point a registered bookie at it with :meth:`JavaTLSPeer.advertise`: the bookie's registration (its
``BookieServiceInfo``) then names this front's port, with the ``tls`` extension Java publishes.
Every socket is kept open until :meth:`stop` (the end of the test).
"""

from __future__ import annotations

import select
import socket
import ssl
import struct
import threading

from bkctl.wire.codecs import v3


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the client went away before START_TLS")
        data += chunk
    return data


class JavaTLSPeer:
    def __init__(self, backend_port: int, cert: str, key: str):
        self.backend_port = backend_port
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.kept: list[socket.socket] = []  # never closed before stop(): Java keeps them open
        self.close_notifies = 0  # close_notify alerts received (and never answered)
        self.served = 0  # connections that completed START_TLS and the handshake
        self._lock = threading.Lock()
        self._stopping = False
        self._thread = threading.Thread(target=self._accept, name="java-tls-peer", daemon=True)
        self._thread.start()

    def advertise(self, zk_client, root: str, bookie_id: str) -> None:
        """Make ``bookie_id``'s registration point at this front (port, ``tls`` extension)."""
        from bkctl.wire.metadata.serviceinfo import BookieServiceInfo

        info = BookieServiceInfo.for_bookie("127.0.0.1", self.port, tls=True)
        zk_client.set(f"{root}/available/{bookie_id}", info.serialize())

    def stop(self) -> None:
        self._stopping = True
        self.listener.close()
        with self._lock:
            kept, self.kept = self.kept, []
        for s in kept:
            try:
                s.close()
            except OSError:
                pass

    # -- one thread per connection -----------------------------------------------
    def _accept(self) -> None:
        while not self._stopping:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self.kept.append(conn)
            threading.Thread(target=self._serve, args=(conn,), name="java-tls-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            (length,) = struct.unpack(">i", _read_exactly(conn, 4))
            request = v3.parse_request(_read_exactly(conn, length))
            answer = v3.serialize(v3.start_tls_response(request))
            conn.sendall(struct.pack(">i", len(answer)) + answer)
            tls = self.context.wrap_socket(conn, server_side=True)
            backend = socket.create_connection(("127.0.0.1", self.backend_port))
        except (OSError, ConnectionError, ssl.SSLError):
            return  # a refused handshake: the client sees it; the socket stays as it is
        with self._lock:
            self.kept += [tls, backend]
            self.served += 1
        self._relay(tls, backend)

    def _relay(self, tls: ssl.SSLSocket, backend: socket.socket) -> None:
        reading = [tls, backend]
        while reading and not self._stopping:
            try:
                ready, _, _ = select.select(reading, [], [], 0.5)
                for s in ready:
                    if s is tls:
                        data = tls.recv(65536)
                        while tls.pending():
                            data += tls.recv(tls.pending())
                        if not data:  # close_notify (or EOF): no answer, no close -- as Java
                            with self._lock:
                                self.close_notifies += 1
                            reading.remove(tls)
                            continue
                        backend.sendall(data)
                    else:
                        data = backend.recv(65536)
                        if not data:
                            reading.remove(backend)
                            continue
                        tls.sendall(data)
            except (OSError, ValueError, ssl.SSLError):
                return
