"""START_TLS on a new connection to a bookie (Java's ``PerChannelBookieClient.initiateTLS``).

The client sends START_TLS in the clear (a v3 exchange, for a v2 client
too); the bookie's EOK answer starts the TLS handshake; once it completes
the connection is ready for requests.  Any failure on the way (files that
do not load, a bookie that does not do TLS, a refused handshake) fails the
connection attempt with why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from twisted.python.failure import Failure

from bkctl.wire.codecs import v3
from bkctl.wire.codecs.framing import frame
from bkctl.wire.codecs.protocol import RC, OperationType, rc_from_v3
from bkctl.wire.errors import CodecError

from .errors import BookieUnavailable

if TYPE_CHECKING:
    from .client_protocol import BookieClientProtocol

__all__ = ["StartTLS"]


class StartTLS:
    """The START_TLS exchange and handshake of one connection's attempts.

    ``files`` (:class:`~bkctl.wire.tls.TLSFiles`) give the client context,
    built on first use and kept for later attempts; ``txn_ids`` is the
    connection's txnId counter.  :meth:`begin` starts on a connected
    protocol, which is then :attr:`proto` until the outcome:
    ``ready(proto)`` once the handshake completed, ``failed(reason)``
    (a :class:`~bkctl.wire.client.errors.BookieUnavailable` that says why)
    after the protocol was dropped.  A v2 connection (``v2_answers``) reads
    v2 answers once START_TLS is answered.
    """

    def __init__(
        self,
        files: Any,
        bookie_id: str,
        txn_ids: Iterator[int],
        *,
        v2_answers: bool,
        ready: Callable[[BookieClientProtocol], Any],
        failed: Callable[[Failure], Any],
    ):
        self.files = files
        self.bookie_id = bookie_id
        self._ids = txn_ids
        self._v2_answers = v2_answers
        self._ready = ready
        self._failed = failed
        self._context = None
        #: the protocol while START_TLS or the handshake is under way
        self.proto: BookieClientProtocol | None = None

    def begin(self, proto: BookieClientProtocol) -> None:
        """Send START_TLS in the clear; the answer (:meth:`answered`) starts the handshake."""
        if self._context is None:
            try:
                self._context = self.files.client_context()
            except Exception as exc:  # noqa: BLE001 - bad files: every request fails with why
                self._fail(proto, f"TLS files unusable: {exc}")
                return
        self.proto = proto
        proto.send_one(frame(v3.serialize(v3.start_tls_request(next(self._ids)))))

    def answered(self, proto: BookieClientProtocol, msg: Any) -> None:
        """The bookie's answer to START_TLS: EOK starts the handshake."""
        rc = rc_from_v3(msg.status)
        if msg.header.operation != OperationType.START_TLS or rc != RC.EOK:
            self._fail(proto, f"the bookie does not do TLS (START_TLS answered {rc.name})")
            return
        if self._v2_answers:
            proto.use_v2_answers()
        proto.start_tls(self._context)

    def handshake_done(self, proto: BookieClientProtocol) -> None:
        if proto is not self.proto:
            return
        self.proto = None
        self._ready(proto)

    def malformed(self, proto: BookieClientProtocol, exc: CodecError) -> None:
        self._fail(proto, f"malformed answer to START_TLS: {exc}")

    def lost(self, proto: BookieClientProtocol, reason: Failure) -> None:
        """The connection went away during START_TLS or the handshake."""
        from bkctl.wire.tls import describe_tls_failure

        self._fail(proto, describe_tls_failure(reason))

    def give_up(self) -> BookieClientProtocol | None:
        """Forget the protocol under way (the connection closes): it is returned."""
        proto, self.proto = self.proto, None
        return proto

    def refused_why(self, reason: Failure | None) -> str | None:
        """Why an established TLS connection was lost, when TLS refused it
        (TLS 1.3: the bookie refuses after the handshake); else None."""
        if reason is None:
            return None
        if "SSL" not in type(reason.value).__module__ + str(reason.value):
            return None
        from bkctl.wire.tls import describe_tls_failure

        return f"TLS with bookie {self.bookie_id}: {describe_tls_failure(reason)}"

    def _fail(self, proto: BookieClientProtocol, why: str) -> None:
        if self.proto is proto:
            self.proto = None
        proto.detach()
        proto.abort()
        self._failed(Failure(BookieUnavailable(f"TLS with bookie {self.bookie_id}: {why}", bookie=self.bookie_id)))
