"""Bytes to decoded answers for one TCP connection to a bookie (Twisted's protocol and factory).

:class:`BookieClientProtocol` turns bytes into decoded answers (framing, v2
or v3 decoding) and knows nothing of requests: it hands them to its owner,
which it reaches only through :class:`ConnectionOwner` (as Twisted's DNS
protocols report to their controller).
:class:`BookieClientFactory` is one connection attempt, reporting to the
same owner.

Answers are handed out a whole chunk (one ``dataReceived``) at a time, and
the requests their callbacks issue are held (the connection's :mod:`.cork`)
and written once per connection after the chunk.
"""

from __future__ import annotations

from typing import Any, cast
from typing import Protocol as TypingProtocol

from twisted.internet import defer
from twisted.internet.interfaces import IAddress, IConnector, IHandshakeListener
from twisted.internet.protocol import ClientFactory, Protocol
from twisted.python.failure import Failure
from zope.interface import implementer

from bkctl.wire.clock import Clock
from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.answers import V2_ANSWER_HEAD
from bkctl.wire.codecs.framing import FrameDecoder
from bkctl.wire.codecs.protocol import DEFAULT_MAX_FRAME_SIZE, OpCode
from bkctl.wire.errors import CodecError
from bkctl.wire.fastpath import Twins
from bkctl.wire.send_now import Transport, send_now

from .cork import Cork

__all__ = [
    "BookieClientProtocol",
    "BookieClientFactory",
    "BookieTransport",
    "ConnectionOwner",
    "Connector",
    "CLOSE_GRACE",
]

#: Seconds a closing connection waits for the bookie to answer our TLS
#: close_notify (or to close) before it is aborted.  A Java bookie does
#: neither; Netty's own client does not wait for the answer at all.
CLOSE_GRACE = 1.0

_OPC_READ = int(OpCode.READ_ENTRY)
_OPC_ADD = int(OpCode.ADD_ENTRY)
_V2_ANSWER_HEAD_SIZE = V2_ANSWER_HEAD.size


class ConnectionOwner(TypingProtocol):
    """What the wire side (:class:`BookieClientProtocol`, :class:`BookieClientFactory`)
    may call on the connection that owns it, and nothing else: every call
    names the protocol (or attempt) it comes from, so the owner can ignore
    one it has given up on.
    :class:`~bkctl.wire.client.connection.BookieConnection` is the owner."""

    def connection_made(self, proto: BookieClientProtocol) -> None:
        """The TCP connection of one of the owner's attempts is up."""

    def connection_failed(self, attempt: BookieClientFactory, reason: Failure) -> None:
        """A connection attempt failed (refused, timed out...)."""

    def answer_received(self, proto: BookieClientProtocol, msg: Any) -> None:
        """A decoded answer: a v3 ``Response`` or a v2 response tuple."""

    def fast_answer(self, proto: BookieClientProtocol, payload: bytes) -> bool:
        """A v3 answer, undecoded (fast paths on): True when the owner took it
        as the EOK answer of a plain ADD or READ; False: decode it as usual."""

    def fast_answers(self, proto: BookieClientProtocol, payloads: list[bytes], start: int) -> int:
        """``fast_answer`` over ``payloads[start:]`` while it takes them: the index
        of the first it does not take, left as it was (fast paths on, v3)."""

    def v2_answer(self, proto: BookieClientProtocol, payload: bytes, opcode: int) -> bool:
        """A v2 READ or ADD answer (``opcode``), undecoded (fast paths on):
        True when the owner took it; False: decode it as usual."""

    def malformed(self, proto: BookieClientProtocol, exc: CodecError) -> None:
        """Bytes that do not decode; nothing after them is read."""

    def handshake_done(self, proto: BookieClientProtocol) -> None:
        """The TLS handshake after START_TLS completed."""

    def connection_lost(self, proto: BookieClientProtocol, reason: Failure | None) -> None:
        """The connection went away."""


class BookieTransport(Transport, TypingProtocol):
    """What :class:`BookieClientProtocol` calls on its transport (Twisted's ``ITransport`` and
    ``ITLSTransport``, zope interfaces a type checker without its plugin cannot read); a TCP
    connection's ``abortConnection`` and socket options are looked up, as not every transport has them."""

    def loseConnection(self) -> None:  # noqa: N802 - Twisted's name
        """Close once what was written is sent (over TLS: after a close_notify)."""

    def startTLS(self, contextFactory: Any) -> None:  # noqa: N802,N803 - Twisted's names
        """Start a TLS handshake over the connection (``ITLSTransport``)."""


class Connector(TypingProtocol):
    """What the dialer calls on a connection attempt's connector (Twisted's ``IConnector``)."""

    def stopConnecting(self) -> None:  # noqa: N802 - Twisted's name
        """Give up the attempt while it connects."""


@implementer(IHandshakeListener)
class BookieClientProtocol(Protocol):
    """Bytes to decoded answers for one TCP connection.

    Frames are cut by a :class:`FrameDecoder` limited to ``max_frame_size``
    (the client's nettyMaxFrameSizeBytes) and decoded as v3 ``Response``
    messages or v2 response tuples; what comes of them goes to the owner
    (:class:`ConnectionOwner`): each answer, bytes that do not decode (and
    nothing after them is read), the end of the TLS handshake, the loss of
    the connection.  :meth:`detach` cuts the protocol from its owner.

    Fast paths (``twins``, its connection's record of :mod:`bkctl.wire.fastpath`: frames cut by
    its C twin where it has one; with ``twins.enabled``): a v3 answer goes
    to the owner's ``fast_answer`` unparsed, a v2 READ or ADD answer to its
    ``v2_answer`` without the response tuple; either may decline it (then it
    is decoded as usual).
    """

    def __init__(
        self,
        owner: ConnectionOwner | None,
        *,
        use_v3: bool = True,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        twins: Twins,
        cork: Cork | None = None,
    ):
        self._owner = owner
        #: held during a chunk of answers: the writes of the connections it shares (:mod:`.cork`)
        self._cork = cork if cork is not None else Cork()
        self._decoder = FrameDecoder(max_frame_size, twins.codec.split_frames)
        self._decode = v3.parse_response if use_v3 else v2.decode_response
        self._v3 = use_v3
        self._fastpaths = twins.enabled
        self._lost = False
        self._lost_waiters: list[defer.Deferred[None]] = []

    def connectionMade(self) -> None:
        transport = self.transport
        #: the transport as this protocol uses it (Twisted types ``transport`` as zope's ``ITransport``)
        self._wire = cast(BookieTransport, transport)
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
            owner.connection_made(self)

    def dataReceived(self, data: bytes) -> None:
        owner = self._owner
        if owner is None:
            return
        try:
            payloads = self._decoder.feed(data)
        except CodecError as exc:
            owner.malformed(self, exc)
            return
        if len(payloads) < 2:
            self._answers(owner, payloads)
            return
        # Requests the answers' callbacks issue (a reader keeping its window
        # full, a writer its pipeline...) are held and written once per
        # connection at the end.
        cork = self._cork
        holding = cork.hold()
        try:
            self._answers(owner, payloads)
        finally:
            if holding:
                cork.release()

    def _answers(self, owner: ConnectionOwner, payloads: list[bytes]) -> None:
        decode = self._decode
        fastpaths = self._fastpaths
        # v3: the EOK answer to a plain ADD or READ starts with its request's
        # header field, byte for byte: the owner matches it by that and takes
        # it apart without the general parser, a run of them in one call
        v3_fast = fastpaths and self._v3
        take = owner.fast_answers if v3_fast else None
        # v2: EOK READ and ADD answers are matched and cut without the response tuple
        v2_fast = fastpaths and not self._v3
        i, n = 0, len(payloads)
        while i < n:
            if self._owner is None:  # a callback closed the connection
                return
            if take is not None:
                i = take(self, payloads, i)
                if i == n or self._owner is None:
                    break
            payload = payloads[i]
            i += 1
            if v3_fast:
                if len(payload) > 2 and owner.fast_answer(self, payload):
                    continue
            elif (
                v2_fast
                and len(payload) >= _V2_ANSWER_HEAD_SIZE
                and payload[0]
                and (payload[1] == _OPC_READ or payload[1] == _OPC_ADD)
                and owner.v2_answer(self, payload, payload[1])
            ):
                continue
            try:
                msg = decode(payload)
            except CodecError as exc:
                owner.malformed(self, exc)
                return
            owner.answer_received(self, msg)
        failed = self._decoder.failed
        if failed is not None and self._owner is not None:
            self._owner.malformed(self, failed)

    def use_v2_answers(self) -> None:
        """From now on answers are v2 (a v2 client after its v3 START_TLS exchange)."""
        self._decode = v2.decode_response
        self._v3 = False

    def handshakeCompleted(self) -> None:
        """The TLS handshake after START_TLS is done (Twisted's IHandshakeListener)."""
        owner = self._owner
        if owner is not None:
            owner.handshake_done(self)

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self._lost = True
        owner, self._owner = self._owner, None
        if owner is not None:
            owner.connection_lost(self, reason)
        waiters, self._lost_waiters = self._lost_waiters, []
        for d in waiters:
            d.callback(None)

    # -- used by the owner ----------------------------------------------------

    def send(self, frames: list[bytes]) -> None:
        """Write whole frames (length prefix included) in one go: joined here,
        as the transport would join them before its send anyway (its
        ``writeSequence`` checks and counts each one in Python: a burst of
        small reads paid that per frame)."""
        self._wire.write(frames[0] if len(frames) == 1 else b"".join(frames))

    def send_burst(self, frames: list[bytes]) -> None:
        """:meth:`send` of a burst's frames, held until its end (:mod:`.cork`):
        nothing more is coming this turn, so they are sent at once
        (:func:`~bkctl.wire.send_now.send_now`) rather than on the reactor's next."""
        send_now(self._wire, frames[0] if len(frames) == 1 else b"".join(frames), self._fastpaths)

    def send_one(self, data: bytes) -> None:
        """Write one whole frame."""
        self._wire.write(data)

    def start_tls(self, context: Any) -> None:
        """Start the TLS handshake on this connection (after START_TLS)."""
        self._wire.startTLS(context)

    def abort(self) -> None:
        """Drop the connection at once (no TLS close_notify, no waiting)."""
        abort = getattr(self.transport, "abortConnection", None) or self._wire.loseConnection
        abort()

    def detach(self) -> None:
        """Stop reporting to the owner: later bytes and the loss are ignored."""
        self._owner = None

    def when_lost(self) -> defer.Deferred[None]:
        """A Deferred that fires (with None) once the connection is lost."""
        if self._lost:
            return defer.succeed(None)
        d: defer.Deferred[None] = defer.Deferred()
        self._lost_waiters.append(d)
        return d

    def let_go(self, clock: Clock, grace: float = CLOSE_GRACE) -> defer.Deferred[None]:
        """Close, bounded whatever the peer does: ``loseConnection`` (over TLS
        it sends close_notify, then waits for the peer's), and after ``grace``
        seconds on ``clock`` ``abortConnection`` if the connection is still
        there.  Fires (with None) once it is gone."""
        done = self.when_lost()
        if self._lost:
            return done
        self._wire.loseConnection()
        if self._lost:
            return done
        timer = clock.callLater(grace, self._abort)

        def stop_timer(result: None) -> None:
            if timer.active():
                timer.cancel()
            return result

        return done.addBoth(stop_timer)

    def _abort(self) -> None:
        if not self._lost:
            abort = getattr(self.transport, "abortConnection", None)
            if abort is not None:
                abort()


class BookieClientFactory(ClientFactory):
    """One connection attempt of an owner (:class:`ConnectionOwner`), making
    protocols of the given ``use_v3``, ``max_frame_size``, ``twins`` and ``cork``.

    A fresh factory is used for every attempt; once the owner has given up
    on it (:meth:`give_up`: closed, failed, superseded) its callbacks are
    ignored: :meth:`buildProtocol` then returns None, which makes the
    reactor drop the socket.
    """

    protocol = BookieClientProtocol

    def __init__(
        self, owner: ConnectionOwner, *, use_v3: bool, max_frame_size: int, twins: Twins, cork: Cork | None = None
    ):
        self.owner: ConnectionOwner | None = owner
        self.cork = cork
        self.use_v3 = use_v3
        self.max_frame_size = max_frame_size
        self.twins = twins
        self.connector: Connector | None = None

    def give_up(self) -> None:
        """The owner no longer wants this attempt."""
        self.owner = None

    def startedConnecting(self, connector: IConnector) -> None:
        self.connector = cast(Connector, connector)  # Twisted's IConnector, which the checker cannot read

    def buildProtocol(self, addr: IAddress | None) -> BookieClientProtocol | None:
        owner = self.owner
        if owner is None:
            return None
        proto = self.protocol(
            owner, use_v3=self.use_v3, max_frame_size=self.max_frame_size, twins=self.twins, cork=self.cork
        )
        proto.factory = self
        return proto

    def clientConnectionFailed(self, connector: IConnector, reason: Failure) -> None:
        owner = self.owner
        if owner is not None:
            owner.connection_failed(self, reason)

    def clientConnectionLost(self, connector: IConnector, reason: Failure) -> None:
        pass  # reported by the protocol's connectionLost
