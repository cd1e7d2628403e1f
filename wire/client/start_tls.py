"""START_TLS on a new connection to a bookie (Java's ``PerChannelBookieClient.initiateTLS``).

The client sends START_TLS in the clear (a v3 exchange, for a v2 client
too); the bookie's EOK answer starts the TLS handshake; once it completes
the connection is ready for requests.  Any failure on the way (files that
do not load, a bookie that does not do TLS, a refused handshake) fails the
connection attempt with why.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from twisted.python.failure import Failure

from bkctl.wire.codecs import v3
from bkctl.wire.codecs.framing import frame
from bkctl.wire.codecs.protocol import RC, OperationType, rc_from_v3

from .errors import BookieUnavailable

if TYPE_CHECKING:
    from .client_protocol import BookieClientProtocol

__all__ = ["StartTLS"]


class StartTLS:
    """The START_TLS steps of :class:`~bkctl.wire.client.connection.BookieConnection`
    (mixed in: they drive its connection attempt).  The connection has
    ``tls`` (:class:`~bkctl.wire.tls.TLSFiles` or None), ``_tls_context``
    (built on first use), ``_tls_proto`` (the protocol while START_TLS or
    the handshake is under way) and calls :meth:`_start_tls` once connected."""

    def _start_tls(self, proto: "BookieClientProtocol") -> None:
        """Send START_TLS in the clear; the answer (:meth:`_tls_answered`) starts the handshake."""
        if self._tls_context is None:
            try:
                self._tls_context = self.tls.client_context()
            except Exception as exc:  # noqa: BLE001 - bad files: every request fails with why
                self._tls_failed(proto, f"TLS files unusable: {exc}")
                return
        self._tls_proto = proto
        proto.send_one(frame(v3.serialize(v3.start_tls_request(next(self._ids)))))

    def _tls_answered(self, proto: "BookieClientProtocol", msg) -> None:
        rc = rc_from_v3(msg.status)
        if msg.header.operation != OperationType.START_TLS or rc != RC.EOK:
            self._tls_failed(proto, f"the bookie does not do TLS (START_TLS answered {rc.name})")
            return
        if not self.use_v3:
            proto.use_v2_answers()
        proto.transport.startTLS(self._tls_context)

    def _tls_ready(self, proto: "BookieClientProtocol") -> None:
        if proto is not self._tls_proto:
            return
        self._tls_proto = None
        self._attempt = None
        self._proto = proto
        self._pump()

    def _tls_failed(self, proto: "BookieClientProtocol", why: str) -> None:
        if self._tls_proto is proto:
            self._tls_proto = None
        proto.detach()
        abort = getattr(proto.transport, "abortConnection", None) or proto.transport.loseConnection
        abort()
        attempt = self._attempt
        if attempt is not None:
            self._connect_failed(attempt, Failure(BookieUnavailable(f"TLS with bookie {self.bookie_id}: {why}",
                                                                    bookie=self.bookie_id)))

    def _tls_lost(self, proto: "BookieClientProtocol", reason: Failure) -> None:
        """The connection went away during START_TLS or the handshake."""
        from bkctl.wire.tls import describe_tls_failure

        self._tls_failed(proto, describe_tls_failure(reason))

    def _tls_refused_why(self, reason: Failure | None) -> str | None:
        """Why an established TLS connection was lost, when TLS refused it
        (TLS 1.3: the bookie refuses after the handshake); else None."""
        if self.tls is None or reason is None:
            return None
        if "SSL" not in type(reason.value).__module__ + str(reason.value):
            return None
        from bkctl.wire.tls import describe_tls_failure

        return f"TLS with bookie {self.bookie_id}: {describe_tls_failure(reason)}"
