"""How a connection to a bookie gets the protocol that carries its requests: one attempt at a time.

A :class:`~.connection.BookieConnection` connects lazily (its first request) and again after a
failure; each attempt resolves the bookie id (``resolve(bookie_id)``, which may return a Deferred,
so a BookieServiceInfo lookup fits), connects over TCP within ``connect_timeout`` and, with TLS
configured, runs START_TLS and the handshake (:class:`~.start_tls.StartTLS`).  :class:`Dialer`
owns that attempt: the connection hears ``ready(proto)`` once the protocol may carry requests, and
``failed(why)`` when the attempt failed -- then every request waiting for it fails, and the
connection's :class:`~.backoff.Backoff` holds the next attempt back.  An attempt given up (the
connection closed, or it already has a protocol) is ignored from then on, whatever it reports.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from twisted.internet import defer
from twisted.internet.error import ConnectionDone
from twisted.python.failure import Failure

from bkctl.wire.errors import CodecError
from bkctl.wire.fastpath import Twins
from bkctl.wire.metadata.serviceinfo import parse_bookie_id_address

from .backoff import Backoff
from .client_protocol import BookieClientFactory, BookieClientProtocol, ConnectionOwner
from .cork import Cork
from .start_tls import StartTLS

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "Dialer", "default_resolve"]

log = logging.getLogger(__name__)

#: Java's clientConnectTimeoutMillis (ClientConfiguration)
DEFAULT_CONNECT_TIMEOUT = 10.0


def default_resolve(bookie_id: str) -> tuple[str, int]:
    """The address of a legacy bookie id, which *is* ``host:port``."""
    return parse_bookie_id_address(bookie_id)


class Dialer:
    """The connection attempts of one :class:`~.connection.BookieConnection` (``owner``: the
    protocols an attempt makes report to it).  ``ids``: the connection's txnId counter (START_TLS
    takes one); ``tls``: :class:`~bkctl.wire.tls.TLSFiles` or None; ``ready(proto)`` and
    ``failed(why)``: the outcome of an attempt (see the module documentation)."""

    def __init__(
        self,
        owner: ConnectionOwner,
        bookie_id: str,
        reactor: Any,
        clock: Any,
        resolve: Callable[[str], Any],
        ids: Iterator[int],
        backoff: Backoff,
        *,
        use_v3: bool,
        tls: Any,
        connect_timeout: float,
        max_frame_size: int,
        twins: Twins,
        cork: Cork,
        ready: Callable[[BookieClientProtocol], None],
        failed: Callable[[str], None],
    ):
        self.owner = owner
        self.bookie_id = bookie_id
        self.reactor = reactor
        self.clock = clock
        self.resolve = resolve
        self.backoff = backoff
        self.use_v3 = use_v3
        self.connect_timeout = connect_timeout
        self.max_frame_size = max_frame_size
        #: the connection's record of the fast paths (:mod:`bkctl.wire.fastpath`), its protocols'
        self.twins = twins
        #: the cork of the protocols an attempt makes (:mod:`.cork`: the connection's)
        self.cork = cork
        self._ready = ready
        self._failed = failed
        #: the attempt under way (None: none)
        self.attempt: BookieClientFactory | None = None
        #: the START_TLS steps of every attempt (None: plain text)
        self.tls = (
            None
            if tls is None
            else StartTLS(tls, bookie_id, ids, v2_answers=not use_v3, ready=self._connected, failed=self._tls_failed)
        )

    @property
    def dialing(self) -> bool:
        """An attempt is under way."""
        return self.attempt is not None

    def dial(self) -> None:
        """Start an attempt."""
        # START_TLS is a v3 exchange even for a v2 client (Java's too): its answer is decoded as v3
        attempt = BookieClientFactory(
            self.owner,
            use_v3=self.use_v3 or self.tls is not None,
            max_frame_size=self.max_frame_size,
            twins=self.twins,
            cork=self.cork,
        )
        self.attempt = attempt
        d = defer.maybeDeferred(self.resolve, self.bookie_id)
        d.addCallbacks(self._resolved, self.attempt_failed, callbackArgs=(attempt,), errbackArgs=(attempt, True))
        d.addErrback(lambda f: log.error("bookie %s: connect bookkeeping failed: %s", self.bookie_id, f.getTraceback()))

    def _drop(self) -> BookieClientFactory | None:
        """The attempt under way is over (connected, failed, given up): its
        later callbacks are ignored.  Returns it."""
        attempt, self.attempt = self.attempt, None
        if attempt is not None:
            attempt.give_up()
        return attempt

    def stop(self) -> BookieClientProtocol | None:
        """Give up the attempt under way (the connection closes): stop its TCP connect, and
        return its protocol if it is connected but still in START_TLS (to be let go)."""
        attempt = self._drop()
        if attempt is not None and attempt.connector is not None:
            try:
                attempt.connector.stopConnecting()
            except Exception:  # NotConnectingError: it already finished
                pass
        return self.tls.give_up() if self.tls is not None else None

    def _resolved(self, address: Any, attempt: BookieClientFactory) -> None:
        if attempt is not self.attempt:
            return
        try:
            host, port = address
            self.reactor.connectTCP(host, int(port), attempt, timeout=self.connect_timeout)
        except Exception:
            self.attempt_failed(Failure(), attempt)

    def attempt_failed(self, reason: Failure, attempt: BookieClientFactory, resolving: bool = False) -> None:
        """``attempt`` failed (resolving the id, the TCP connect, or START_TLS): if it is the one
        under way, the backoff records why and ``failed(why)`` is told."""
        if attempt is not self.attempt:
            return
        self._drop()
        step = "resolving" if resolving else "connecting to"
        why = f"{step} bookie {self.bookie_id} failed: {reason.getErrorMessage()}"
        self.backoff.failed(why, self.clock.seconds())
        log.info("%s", why)
        self._failed(why)

    def connection_made(self, proto: BookieClientProtocol, wanted: bool) -> None:
        """The TCP connection of an attempt is up: START_TLS, or ready -- unless the attempt was
        given up, or the connection no longer wants one (``wanted`` False): then let go of it."""
        if not wanted or getattr(proto, "factory", None) is not self.attempt:
            proto.detach()
            proto.let_go(self.clock)
            return
        if self.tls is not None:
            self.tls.begin(proto)
            return
        self._connected(proto)

    def _connected(self, proto: BookieClientProtocol) -> None:
        """The attempt is over: ``proto`` carries the requests (once TLS is up, with TLS)."""
        self._drop()
        self._ready(proto)

    def _tls_failed(self, reason: Failure) -> None:
        attempt = self.attempt
        if attempt is not None:
            self.attempt_failed(reason, attempt)

    # -- what a protocol still in START_TLS reports (the connection hands on what is not its own)

    def handshake_done(self, proto: BookieClientProtocol) -> None:
        if self.tls is not None:
            self.tls.handshake_done(proto)

    def answer_received(self, proto: BookieClientProtocol, msg: Any) -> None:
        if self.tls is not None and proto is self.tls.proto:
            self.tls.answered(proto, msg)

    def malformed(self, proto: BookieClientProtocol, exc: CodecError) -> None:
        if self.tls is not None and proto is self.tls.proto:
            self.tls.malformed(proto, exc)

    def connection_lost(self, proto: BookieClientProtocol, reason: Failure | None) -> None:
        if self.tls is not None and proto is self.tls.proto:
            self.tls.lost(proto, reason if reason is not None else Failure(ConnectionDone()))

    def refused_why(self, reason: Failure | None) -> str | None:
        """Why an established TLS connection was lost, when TLS refused it; else None."""
        return self.tls.refused_why(reason) if self.tls is not None else None
