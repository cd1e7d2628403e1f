"""A read-only ZooKeeper connection for walks over every ledger.

kazoo answers each read through its own thread, an AsyncResult and its Python jute
records: some 200 µs of CPU a znode, which caps a walk of a million ledgers at a few
thousand a second.  :class:`ZnodeScanner` is the fast twin of
:meth:`~.session.ZKSession.get_many` for those walks: a session of its own on a
blocking socket in the caller's thread, reads sent as ZooKeeper 3.6's ``multiRead``
(``batch`` reads a request, ``window`` requests in flight, so the walk never queues
more than ``batch * window`` reads in front of the cluster's brokers and bookies), the
replies cut up with :mod:`struct`.  Against a server without multiRead it sends plain
pipelined getData requests.

A connection lost mid-walk (a ZooKeeper restarted, a server gone) is survived: the
scanner connects again, to the next server if there are several, and sends again
every read not yet answered, so the caller sees each znode once, in order.  Only when
no server answers for ``timeout`` seconds does it give up, with
:class:`~bkctl.wire.metadata.errors.ZKUnavailable` saying how far it got.

It speaks the plain protocol, TLS and digest credentials; SASL is kazoo's alone, so a
store with SASL credentials walks through kazoo (:meth:`usable_with`).
"""

from __future__ import annotations

import itertools
import random
import socket
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from bkctl.wire.errors import CodecError
from bkctl.wire.metadata.errors import ZKAuthError, ZKUnavailable
from bkctl.wire.metadata.zk import jute
from bkctl.wire.metadata.zksecurity import ZKSecurity, tls_client_context

__all__ = ["ZnodeScanner", "ZnodeValue"]


class ZnodeValue(NamedTuple):
    data: bytes
    stat: jute.Stat


class _Request(NamedTuple):
    op: int  # jute.OP_GET_DATA or OP_GET_CHILDREN
    paths: list[str]


@dataclass
class _InFlight:
    """A request sent (``xid``: as last sent) and not answered yet."""

    request: _Request
    xid: int = 0


#: error codes of a session ZooKeeper closed for want of authentication
_SESSION_REFUSED = (jute.AUTH_FAILED, jute.SESSION_CLOSED_REQUIRE_SASL)


class _Lost(Exception):
    """The connection broke; the reads in flight are to be sent again."""


class ZnodeScanner:
    """See the module docstring.  Not thread-safe: one walk at a time."""

    def __init__(
        self,
        hosts: str,
        security: ZKSecurity | None = None,
        *,
        timeout: float = 10.0,
        batch: int = 200,
        window: int = 4,
    ):
        self.hosts = hosts
        self.security = security if security is not None else ZKSecurity()
        self.timeout = float(timeout)
        self.batch = max(1, batch)
        self.window = max(1, window)
        self._servers = _servers(hosts)
        self._next_server = random.randrange(len(self._servers))
        self._sock: socket.socket | None = None
        self._buf = bytearray()
        self._xids = itertools.count(1)
        #: whether the server answers multiRead: None until its first answer to one (see
        #: :meth:`_answers`), False for a server before 3.6
        self._multi_read: bool | None = None
        #: how many times a lost connection was replaced during this scanner's walks
        self.reconnects = 0
        #: requests sent (a multiRead counts once)
        self.requests = 0

    @staticmethod
    def usable_with(hosts: str, security: ZKSecurity) -> bool:
        """Whether the scanner can reach *hosts* with *security*: not with SASL (kazoo's
        alone) nor a chroot in the connect string."""
        return not security.sasl_mechanism and "/" not in hosts

    # -- the walk -------------------------------------------------------------------
    def get_many(self, paths: Iterable[str]) -> Iterator[ZnodeValue | None]:
        """``(data, stat)`` of each path in order; None for a znode that is not there."""
        new, ok = tuple.__new__, jute.OK
        for result in self._read(jute.OP_GET_DATA, paths):
            # ZnodeValue(...) without its Python frame: a walk yields a million of them
            yield new(ZnodeValue, (result.data or b"", result.stat)) if result.err == ok else None

    def children_many(self, paths: Iterable[str]) -> Iterator[list[str] | None]:
        """The children of each path in order; None for a znode that is not there."""
        for result in self._read(jute.OP_GET_CHILDREN, paths):
            yield result.children if result.err == jute.OK else None

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.sendall(jute.close_request(next(self._xids)))
            except OSError:
                pass
            sock.close()

    def __enter__(self) -> ZnodeScanner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self, op: int, paths: Iterable[str]) -> Iterator[jute.ReadResult]:
        it = iter(paths)
        # every request not answered yet, in the order sent; one the connection broke
        # under stays here, to be sent again on the next connection
        pending: deque[_InFlight] = deque()
        try:
            yield from self._answers(op, it, pending)
        finally:
            if pending:  # left before the end: replies still on the way would answer the next walk
                self._drop()

    def _answers(self, op: int, it: Iterator[str], pending: deque[_InFlight]) -> Iterator[jute.ReadResult]:
        done = 0
        exhausted = False
        lost_since: float | None = None
        while True:
            try:
                if self._sock is None:
                    self._connect(done, lost_since)
                    for item in pending:
                        item.xid = self._send(item.request)
                    lost_since = None
                # Until the server has answered a multiRead, one request at a time: a server
                # before 3.6 answers UNIMPLEMENTED and closes the session, and requests sent
                # behind the first make its close a reset that can drop that answer unread.
                window = self.window if self._multi_read is not None else 1
                while not exhausted and len(pending) < window:
                    chunk = list(itertools.islice(it, self.batch))
                    if not chunk:
                        exhausted = True
                        break
                    item = _InFlight(_Request(op, chunk))
                    pending.append(item)
                    item.xid = self._send(item.request)
                if not pending:
                    return
                results = self._answer(pending[0].xid, pending[0].request)
                pending.popleft()
                for result in results:
                    yield result
                    done += 1
            except _Lost:
                self._drop()
                if lost_since is None:
                    lost_since = time.monotonic()
                    self.reconnects += 1

    # -- requests and replies ----------------------------------------------------
    def _send(self, request: _Request) -> int:
        xid = next(self._xids) & 0x7FFFFFFF or next(self._xids)
        if self._multi_read is not False and len(request.paths) > 1:
            frame = jute.multi_read_request(xid, [(request.op, p) for p in request.paths])
        else:
            encode = jute.get_data_request if request.op == jute.OP_GET_DATA else jute.get_children_request
            first = xid
            frames = []
            for path in request.paths:
                frames.append(encode(xid, path))
                xid = next(self._xids) & 0x7FFFFFFF or next(self._xids)
            xid = first
            frame = b"".join(frames)
        self._write(frame)
        self.requests += 1
        return xid

    def _answer(self, xid: int, request: _Request) -> list[jute.ReadResult]:
        if self._multi_read is not False and len(request.paths) > 1:
            reply = self._reply(jute.OP_MULTI_READ)
            if reply.xid != xid:
                raise self._failed(f"an answer to request {reply.xid} where {xid} was due")
            if reply.err == jute.UNIMPLEMENTED:  # a server before 3.6: plain reads from now on
                self._multi_read = False
                raise _Lost("no multiRead on this server")
            if reply.err in _SESSION_REFUSED:
                raise self._refused()
            if reply.err != jute.OK or len(reply.results) != len(request.paths):
                raise self._failed(
                    f"multiRead answered error {reply.err} with {len(reply.results)} of {len(request.paths)} results"
                )
            self._multi_read = True
            return self._judged(request, reply.results)
        results = []
        for _path in request.paths:
            reply = self._reply(request.op)
            results.append(reply.results[0] if reply.results else jute.ReadResult(reply.err))
        return self._judged(request, results)

    def _judged(self, request: _Request, results: list[jute.ReadResult]) -> list[jute.ReadResult]:
        """*results*, each a znode's value or its absence, else an error: a znode the
        credentials may not read is not a missing one (a walk would call it deleted)."""
        for path, r in zip(request.paths, results):
            if r.err in _SESSION_REFUSED:
                raise self._refused()
            if r.err == jute.NO_AUTH:
                self._drop()
                raise ZKAuthError(
                    f"ZooKeeper at {self.hosts} denied access (NoAuth) to {path} with "
                    f"{self.security.describe()}: wrong or missing credentials"
                )
            if r.err not in (jute.OK, jute.NO_NODE):
                raise self._failed(f"a read of {path} answered error {r.err}")
        return results

    def _reply(self, op: int) -> jute.Reply:
        try:
            return jute.decode_reply(self._frame(), op)
        except CodecError as exc:
            raise self._failed(str(exc)) from None

    def _refused(self) -> ZKAuthError:
        """The session closed for want of authentication (the answer to a whole multiRead, or
        to one read)."""
        self._drop()
        return ZKAuthError(
            f"ZooKeeper at {self.hosts} requires authentication and closed the session ({self.security.describe()})"
        )

    def _failed(self, what: str) -> ZKUnavailable:
        self._drop()
        return ZKUnavailable(f"ZooKeeper at {self.hosts} broke off a walk: {what}")

    # -- the socket ------------------------------------------------------------------
    def _write(self, frame: bytes) -> None:
        assert self._sock is not None
        try:
            self._sock.sendall(frame)
        except OSError as exc:
            raise _Lost(str(exc) or type(exc).__name__) from None

    def _frame(self) -> bytes:
        """The next whole frame from the server.  No pings: a caller that dawdles past
        the session timeout finds the connection closed, and the walk connects again."""
        sock = self._sock
        assert sock is not None
        while True:
            try:
                frame = jute.take_frame(self._buf)
            except CodecError as exc:
                raise self._failed(str(exc)) from None
            if frame is not None:
                return frame
            try:
                chunk = sock.recv(1 << 20)
            except TimeoutError:
                raise _Lost(f"no answer within {self.timeout:g}s") from None
            except OSError as exc:
                raise _Lost(str(exc) or type(exc).__name__) from None
            if not chunk:
                raise _Lost("the server closed the connection")
            self._buf += chunk

    def _drop(self) -> None:
        sock, self._sock = self._sock, None
        self._buf.clear()
        if sock is not None:
            sock.close()

    def _connect(self, done: int, lost_since: float | None) -> None:
        """A new session with the next server that answers, trying for ``timeout``
        seconds from when the connection was lost (or from now)."""
        started = lost_since if lost_since is not None else time.monotonic()
        deadline = started + self.timeout
        delay = 0.05
        last_error = "no server answered"
        while True:
            host, port = self._servers[self._next_server]
            self._next_server = (self._next_server + 1) % len(self._servers)
            try:
                self._sock = self._open(host, port, max(0.1, min(self.timeout, deadline - time.monotonic())))
                return
            except ZKAuthError:
                raise
            except (OSError, _Lost, CodecError) as exc:
                self._drop()
                last_error = str(exc) or type(exc).__name__
            if time.monotonic() + delay >= deadline:
                where = f" after {done:,} znodes" if done else ""
                raise ZKUnavailable(
                    f"ZooKeeper at {self.hosts} unavailable{where}: {last_error} "
                    f"(no server answered for {self.timeout:g}s)"
                )
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def _open(self, host: str, port: int, timeout: float) -> socket.socket:
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.security.uses_tls:
            sock = tls_client_context(self.security).wrap_socket(sock, server_hostname=host)
        self._sock = sock
        self._buf.clear()
        sock.sendall(jute.connect_request(int(self.timeout * 1000)))
        session = jute.decode_connect_response(self._frame())
        if session.timeout_ms <= 0:
            raise _Lost("the server refused a session")
        if self.security.digest:
            sock.sendall(jute.auth_request("digest", self.security.digest.encode("utf-8")))
            reply = jute.decode_reply(self._frame(), jute.OP_AUTH)
            if reply.err != jute.OK:
                raise ZKAuthError(f"ZooKeeper at {self.hosts} rejected the credentials ({self.security.describe()})")
        sock.settimeout(self.timeout)
        return sock


def _servers(hosts: str) -> Sequence[tuple[str, int]]:
    from bkctl.wire.text import split_host_port

    servers = []
    for item in hosts.split("/", 1)[0].split(","):
        if item.strip():
            host, port = split_host_port(item.strip(), default_port=2181)
            servers.append((host, int(port)))
    if not servers:
        raise ValueError(f"no ZooKeeper server in {hosts!r}")
    return servers
