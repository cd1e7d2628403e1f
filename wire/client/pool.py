"""One shared :class:`~bkctl.wire.client.connection.BookieConnection` per bookie.

    pool = BookiePool(reactor, resolve, protocol="v3", add_timeout=5, read_timeout=5, twins=twins)
    d = pool.get("10.0.0.1:3181").read(ledger_id, entry_id)
    ...
    yield pool.close()

Connections are created on first use and kept; each one connects lazily,
reconnects with backoff after a failure and bounds its own queue, so the
pool only has to map bookie ids to connections.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from .connection import DEFAULT_ADD_TIMEOUT, DEFAULT_READ_TIMEOUT, BookieConnection
from .cork import Cork
from .dialer import default_resolve

if TYPE_CHECKING:
    from bkctl.wire.fastpath import Twins

__all__ = ["BookiePool"]


class BookiePool:
    """Lazily created, reused connections, one per bookie id.

    ``reactor`` provides ``connectTCP`` and, unless ``clock`` is given in
    ``options``, ``callLater``/``seconds``. ``resolve(bookie_id)`` returns
    ``(host, port)`` or a Deferred of it; by default the bookie id itself is
    parsed as ``host:port``. ``protocol`` (``"v3"`` or ``"v2"``), the
    timeouts and every other keyword of :class:`BookieConnection`
    (``bookie_info_timeout``, ``connect_timeout``, ``max_outstanding``,
    ``max_queued``, ``backoff_initial``, ``backoff_max``, ``max_frame_size``,
    ``clock``, ...) apply to every connection the pool creates.  Its
    connections share one :class:`~bkctl.wire.client.cork.Cork` (:attr:`cork`):
    during a burst (a chunk of answers on one of them, a writer's run of
    adds) the frames written to each are held and written once at its end.
    """

    def __init__(
        self,
        reactor: Any,
        resolve: Callable[[str], Any] | None = None,
        *,
        protocol: str = "v3",
        add_timeout: float = DEFAULT_ADD_TIMEOUT,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        twins: Twins,
        **options: Any,
    ):
        if protocol not in ("v2", "v3"):
            raise ValueError(f"protocol must be 'v2' or 'v3', not {protocol!r}")
        if "txn_ids" in options:
            raise TypeError("txn_ids is per connection; the pool gives each its own counter")
        if "cork" in options:
            raise TypeError("cork is the pool's own: its connections share it")
        self.reactor = reactor
        self.resolve = resolve if resolve is not None else default_resolve
        self.protocol = protocol
        self.add_timeout = add_timeout
        self.read_timeout = read_timeout
        #: the record its connections use (:mod:`bkctl.wire.fastpath`: its builder's, the client's)
        self.twins = twins
        self._options = options
        #: the bursts of this pool's connections (:mod:`.cork`): what holds their writes
        self.cork = Cork()
        self._connections: dict[str, BookieConnection] = {}
        self._closed = False
        # Fail on a bad option now rather than on the first get().
        BookieConnection("pool-option-check:1", reactor, self.resolve, **self._connection_kwargs())

    def _connection_kwargs(self) -> dict[str, Any]:
        return dict(
            self._options,
            protocol=self.protocol,
            add_timeout=self.add_timeout,
            read_timeout=self.read_timeout,
            cork=self.cork,
            twins=self.twins,
        )

    def with_protocol(self, protocol: str) -> BookiePool:
        """A pool of its own (its own connections and cork) to the same bookies, resolved the same
        way, with every option of this one but ``protocol``: e.g. v2 connections for
        BATCH_READ_ENTRY beside a v3 pool."""
        return BookiePool(
            self.reactor,
            self.resolve,
            protocol=protocol,
            add_timeout=self.add_timeout,
            read_timeout=self.read_timeout,
            twins=self.twins,
            **self._options,
        )

    def get(self, bookie_id: str) -> BookieConnection:
        """The connection to ``bookie_id``, created (not yet connected) on first use."""
        conn = self._connections.get(bookie_id)  # the common case: a str id, already known
        if conn is not None:
            return conn
        if self._closed:
            raise RuntimeError("the bookie pool is closed")
        key = str(bookie_id)
        conn = self._connections.get(key)
        if conn is None:
            conn = BookieConnection(key, self.reactor, self.resolve, **self._connection_kwargs())
            self._connections[key] = conn
        return conn

    __getitem__ = get

    def __contains__(self, bookie_id: object) -> bool:
        return str(bookie_id) in self._connections

    def __len__(self) -> int:
        return len(self._connections)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._connections))

    @property
    def closed(self) -> bool:
        return self._closed

    def remove(self, bookie_id: str) -> defer.Deferred[Any]:
        """Close and forget one bookie's connection (a later get() makes a
        new one). Fires once it is closed."""
        conn = self._connections.pop(str(bookie_id), None)
        return conn.close() if conn is not None else defer.succeed(None)

    def close(self) -> defer.Deferred[Any]:
        """Close every connection; fires (with None) when all are closed.
        Later get() calls raise RuntimeError."""
        self._closed = True
        conns, self._connections = list(self._connections.values()), {}
        if not conns:
            return defer.succeed(None)
        d = defer.gatherResults([c.close() for c in conns], consumeErrors=True)
        d.addCallback(lambda _: None)
        return d
