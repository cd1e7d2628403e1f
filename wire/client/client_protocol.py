"""Bytes to decoded answers for one TCP connection to a bookie (Twisted's protocol and factory).

:class:`BookieClientProtocol` turns bytes into decoded responses (framing,
v2 or v3 decoding) and knows nothing of requests: it hands them to its
owner (a :class:`~bkctl.wire.client.connection.BookieConnection`).
:class:`BookieClientFactory` is one connection attempt.

Answers are handed out a whole chunk (one ``dataReceived``) at a time, and
the requests their callbacks issue are *held* (:data:`CORK`) and written
once per connection after the chunk.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from twisted.internet import defer
from twisted.internet.interfaces import IHandshakeListener
from twisted.internet.protocol import ClientFactory, Protocol
from twisted.python.failure import Failure
from zope.interface import implementer

from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.answers import V2_ANSWER_HEAD
from bkctl.wire.codecs.framing import FrameDecoder
from bkctl.wire.codecs.protocol import DEFAULT_MAX_FRAME_SIZE, OpCode
from bkctl.wire.errors import CodecError

if TYPE_CHECKING:
    from .connection import BookieConnection

__all__ = ["BookieClientProtocol", "BookieClientFactory", "CORK", "hold_writes", "release_writes"]

_OPC_READ = int(OpCode.READ_ENTRY)
_OPC_ADD = int(OpCode.ADD_ENTRY)
_V2_ANSWER_HEAD_SIZE = V2_ANSWER_HEAD.size


class _Cork:
    """While a protocol hands out a chunk of answers, ``holders`` lists the
    connections holding frames to write once it is done (each one's
    ``_uncork``); None otherwise.  One per process: the reactor's thread."""

    __slots__ = ("holders",)

    def __init__(self):
        self.holders: list | None = None


CORK = _Cork()


def hold_writes() -> bool:
    """Hold the frames connections write from now on until
    :func:`release_writes` (a writer's burst of adds: one write per bookie).
    False when they are held already (by a chunk of answers being handed
    out, or an outer burst): then the caller must not release them."""
    if CORK.holders is not None:
        return False
    CORK.holders = []
    return True


def release_writes() -> None:
    """Write what :func:`hold_writes` held, once per connection."""
    holders, CORK.holders = CORK.holders, None
    for conn in holders or ():
        conn._uncork()


@implementer(IHandshakeListener)
class BookieClientProtocol(Protocol):
    """Bytes to decoded responses for one TCP connection.

    Frames are cut by a :class:`FrameDecoder` limited to ``max_frame_size``
    (the client's nettyMaxFrameSizeBytes) and decoded as v3 ``Response``
    messages or v2 response tuples. Each response goes to
    ``owner._response_received(self, msg)``; bytes that do not decode go to
    ``owner._malformed(self, exc)`` and nothing after them is read. The loss
    of the connection goes to ``owner._connection_lost(self, reason)``.
    :meth:`detach` cuts the protocol from its owner.

    Fast paths (the owner's ``fastpaths``): a v3 answer that starts with the
    header field of a plain ADD or READ on the wire goes to
    ``owner._fast_answer`` unparsed, a v2 READ or ADD answer to
    ``owner._v2_answer`` without the response tuple; either may decline
    it (then it is decoded as usual).
    """

    def __init__(self, owner: "BookieConnection | None", *, use_v3: bool = True,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE):
        self._owner = owner
        self._decoder = FrameDecoder(max_frame_size)
        self._decode = v3.parse_response if use_v3 else v2.decode_response
        self._v3 = use_v3
        self._lost = False
        self._lost_waiters: list[defer.Deferred] = []

    def connectionMade(self) -> None:
        transport = self.transport
        # The Java client's defaults: clientTcpNoDelay and clientSockKeepalive on.
        for option in ("setTcpNoDelay", "setTcpKeepAlive"):
            setter = getattr(transport, option, None)
            if setter is not None:
                try:
                    setter(True)
                except Exception:  # not a socket (test transports, unix pipes...)
                    pass
        owner = self._owner
        if owner is not None:
            owner._connection_made(self)

    def dataReceived(self, data: bytes) -> None:
        owner = self._owner
        if owner is None:
            return
        try:
            payloads = self._decoder.feed(data)
        except CodecError as exc:
            owner._malformed(self, exc)
            return
        if len(payloads) < 2:
            self._answers(owner, payloads)
            return
        # Requests the answers' callbacks issue (a reader keeping its window
        # full, a writer its pipeline...) are held and written once per
        # connection at the end.
        holding = hold_writes()
        try:
            self._answers(owner, payloads)
        finally:
            if holding:
                release_writes()

    def _answers(self, owner: "BookieConnection", payloads: list[bytes]) -> None:
        decode = self._decode
        fastpaths = getattr(owner, "fastpaths", False)
        # v3: the EOK answer to a plain ADD or READ starts with its request's
        # header field, byte for byte: such answers are matched by it and
        # taken apart without the general parser
        fast = owner.requests.v3_fast if fastpaths and self._v3 else None
        # v2: EOK READ and ADD answers are matched and cut without the response tuple
        v2_fast = fastpaths and not self._v3
        for payload in payloads:
            if self._owner is None:  # a callback closed the connection
                return
            if fast and len(payload) > 2:
                req = fast.pop(payload[:2 + payload[1]], None)
                if req is not None and owner._fast_answer(self, req, payload):
                    continue
            elif (v2_fast and len(payload) >= _V2_ANSWER_HEAD_SIZE and payload[0]
                  and (payload[1] == _OPC_READ or payload[1] == _OPC_ADD)
                  and owner._v2_answer(self, payload, payload[1])):
                continue
            try:
                msg = decode(payload)
            except CodecError as exc:
                owner._malformed(self, exc)
                return
            owner._response_received(self, msg)
        failed = self._decoder.failed
        if failed is not None and self._owner is not None:
            self._owner._malformed(self, failed)

    def use_v2_answers(self) -> None:
        """From now on answers are v2 (a v2 client after its v3 START_TLS exchange)."""
        self._decode = v2.decode_response
        self._v3 = False

    def handshakeCompleted(self) -> None:
        """The TLS handshake after START_TLS is done (Twisted's IHandshakeListener)."""
        owner = self._owner
        if owner is not None:
            owner._tls_ready(self)

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self._lost = True
        owner, self._owner = self._owner, None
        if owner is not None:
            owner._connection_lost(self, reason)
        waiters, self._lost_waiters = self._lost_waiters, []
        for d in waiters:
            d.callback(None)

    # -- used by the connection ---------------------------------------------

    def send(self, frames: list[bytes]) -> None:
        """Write whole frames (length prefix included) in one go."""
        if len(frames) == 1:
            self.transport.write(frames[0])
        else:
            self.transport.writeSequence(frames)

    def send_one(self, data: bytes) -> None:
        """Write one whole frame."""
        self.transport.write(data)

    def detach(self) -> None:
        """Stop reporting to the owner: later bytes and the loss are ignored."""
        self._owner = None

    def when_lost(self) -> defer.Deferred:
        """A Deferred that fires (with None) once the connection is lost."""
        if self._lost:
            return defer.succeed(None)
        d = defer.Deferred()
        self._lost_waiters.append(d)
        return d


class BookieClientFactory(ClientFactory):
    """One connection attempt of a :class:`~bkctl.wire.client.connection.BookieConnection`.

    A fresh factory is used for every attempt, so callbacks of an attempt
    the connection has given up on (closed, superseded) are ignored:
    :meth:`buildProtocol` then returns None, which makes the reactor drop
    the socket.
    """

    protocol = BookieClientProtocol

    def __init__(self, owner: "BookieConnection"):
        self.owner = owner
        self.connector = None

    def startedConnecting(self, connector) -> None:
        self.connector = connector

    def buildProtocol(self, addr):
        owner = self.owner
        if owner._attempt is not self:
            return None
        # START_TLS is a v3 exchange even for a v2 client (Java's too): its answer is decoded as v3
        proto = self.protocol(owner, use_v3=owner.use_v3 or owner.tls is not None,
                              max_frame_size=owner.max_frame_size)
        proto.factory = self
        return proto

    def clientConnectionFailed(self, connector, reason: Failure) -> None:
        self.owner._connect_failed(self, reason)

    def clientConnectionLost(self, connector, reason: Failure) -> None:
        pass  # reported by the protocol's connectionLost
