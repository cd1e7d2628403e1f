"""A TCP proxy on 127.0.0.1 whose link can be cut and restored: a network partition between two
processes that both stay alive (``bench/faults.py --movers`` puts one between bkctl and ZooKeeper
and one between each bookie and ZooKeeper).

``cut("blackhole")`` stops moving bytes both ways: the connections stay open and stall, as behind
a dropped route, and a new connection is accepted but joined to nothing; the peers' own timeouts
decide what happens.  ``restore()`` moves on what was held, the connections intact (a partition
healed before TCP gave up), and joins the connections that arrived meanwhile.  ``cut("reset")``
resets (RST) every connection, and every new one on arrival, until ``restore()``: a link whose
firewall rejects.  One thread moves every byte (poll), so a cut is one flag; ``cut`` and
``restore`` return once that thread has applied them.
"""

from __future__ import annotations

import contextlib
import errno
import select
import socket
import struct
import threading

__all__ = ["BLACKHOLE", "RESET", "TcpProxy"]

BLACKHOLE = "blackhole"
RESET = "reset"
#: bytes held per direction before the proxy stops reading that side (the sender then stalls)
_HOLD = 1 << 20
_CHUNK = 1 << 16


def _reset(sock: socket.socket) -> None:
    """Close with an RST (linger 0), not a FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class _Link:
    """One proxied connection: the accepted socket, the upstream one, the bytes held each way."""

    def __init__(self, client: socket.socket, upstream: socket.socket):
        self.ends = (client, upstream)
        self.held = (bytearray(), bytearray())  # held[i]: read from ends[i], to write to ends[1 - i]
        self.eof = [False, False]  # ends[i] said it sends no more
        self.shut = [False, False]  # ends[i] was told (shutdown SHUT_WR) that no more comes
        self.closed = False

    def reset(self) -> None:
        self.closed = True
        for s in self.ends:
            _reset(s)

    def done(self) -> bool:
        return all(self.eof) and not any(self.held)


class TcpProxy:
    """Listen on 127.0.0.1:``port`` (0: any free port), forward each connection to ``upstream``."""

    def __init__(self, upstream: tuple[str, int], port: int = 0, host: str = "127.0.0.1"):
        self.upstream = upstream
        self._listener = socket.create_server((host, port))
        self._listener.setblocking(False)
        self.host, self.port = self._listener.getsockname()[:2]
        self._links: list[_Link] = []
        self._waiting: list[socket.socket] = []  # accepted during a blackhole: joined on restore
        self._mode: str | None = None  # None (forwarding), BLACKHOLE or RESET
        self._wanted: str | None = None
        self._changes = threading.Condition()
        self._applied = 0
        self._requested = 0
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name=f"tcp-proxy-{self.port}", daemon=True)
        #: connections accepted, and reset by a cut, since the start
        self.accepted = 0
        self.resets = 0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def mode(self) -> str | None:
        return self._mode

    @property
    def open_links(self) -> int:
        return sum(not link.closed for link in self._links) + len(self._waiting)

    def start(self) -> TcpProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping = True
        self._thread.join(10)
        for link in self._links:
            link.reset()
        for s in self._waiting:
            _reset(s)
        self._listener.close()

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def cut(self, mode: str = BLACKHOLE) -> None:
        if mode not in (BLACKHOLE, RESET):
            raise ValueError(f"cut mode {mode!r}: want {BLACKHOLE!r} or {RESET!r}")
        self._change(mode)

    def restore(self) -> None:
        self._change(None)

    def _change(self, mode: str | None) -> None:
        with self._changes:
            self._wanted = mode
            self._requested += 1
            wanted = self._requested
            if not self._changes.wait_for(lambda: self._applied >= wanted or not self._thread.is_alive(), 10):
                raise RuntimeError(f"tcp proxy {self.address}: the change to {mode or 'forwarding'} was not applied")

    # -- the thread ------------------------------------------------------------------------
    def _apply(self) -> None:
        with self._changes:
            if self._applied == self._requested:
                return
            mode = self._wanted
            if mode == RESET:
                for link in self._links:
                    if not link.closed:
                        self.resets += 1
                        link.reset()
                for s in self._waiting:
                    self.resets += 1
                    _reset(s)
                self._waiting.clear()
            self._mode = mode
            if mode is None:
                waiting, self._waiting = self._waiting, []
                for s in waiting:
                    self._join(s)
            self._applied = self._requested
            self._changes.notify_all()

    def _join(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            _reset(client)
            return
        for s in (client, upstream):
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._links.append(_Link(client, upstream))

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            self.accepted += 1
            if self._mode == RESET:
                self.resets += 1  # counted first: the peer may look as soon as the RST lands
                _reset(client)
            elif self._mode == BLACKHOLE:
                self._waiting.append(client)
            else:
                self._join(client)

    def _loop(self) -> None:
        try:
            while not self._stopping:
                self._apply()
                self._links = [link for link in self._links if not link.closed]
                poller = select.poll()
                poller.register(self._listener, select.POLLIN)
                owners: dict[int, tuple[_Link, int]] = {}
                if self._mode is None:
                    for link in self._links:
                        for i, s in enumerate(link.ends):
                            events = 0
                            if not link.eof[i] and len(link.held[i]) < _HOLD:
                                events |= select.POLLIN
                            if link.held[1 - i]:
                                events |= select.POLLOUT
                            if events:
                                poller.register(s, events)
                                owners[s.fileno()] = (link, i)
                for fd, events in poller.poll(50):
                    if fd == self._listener.fileno():
                        self._accept()
                        continue
                    link, i = owners[fd]
                    if not link.closed:
                        self._move(link, i, events)
                for link in self._links:
                    if not link.closed and link.done():
                        link.closed = True
                        for s in link.ends:
                            with contextlib.suppress(OSError):
                                s.close()
        finally:
            with self._changes:
                self._changes.notify_all()

    def _move(self, link: _Link, i: int, events: int) -> None:
        """Read what end ``i`` sent, write what it is owed; an error resets the link (as the
        kernel resets a connection whose peer vanished)."""
        s = link.ends[i]
        try:
            if events & (select.POLLIN | select.POLLHUP | select.POLLERR) and not link.eof[i]:
                data = s.recv(_CHUNK)
                if data:
                    link.held[i].extend(data)
                else:
                    link.eof[i] = True
            owed = link.held[1 - i]
            if events & select.POLLOUT and owed:
                sent = s.send(owed)
                del owed[:sent]
            for j in (0, 1):  # an end done sending, its bytes all delivered: the other end hears EOF
                if link.eof[j] and not link.held[j] and not link.shut[1 - j]:
                    link.shut[1 - j] = True
                    link.ends[1 - j].shutdown(socket.SHUT_WR)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                return
            link.reset()
