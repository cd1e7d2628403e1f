"""One client connection to one bookie, over Twisted.

:class:`BookieConnection` owns the lifetime of the TCP connection to one
bookie id and the requests sent over it; its parts live in modules of one
job each: :mod:`.client_protocol` (bytes to decoded answers, one connection
attempt), :mod:`.requests` (a request, and matching answers to requests),
:mod:`.deadlines` (timeouts), :mod:`.backoff` (when to try again),
:mod:`.dialer` (connection attempts, with :mod:`.start_tls`),
:mod:`.entry_requests` (building ADD and READ requests), :mod:`.cork`
(writes held during a burst), and the answers'
decoders are codecs (:mod:`bkctl.wire.codecs.answers`).  The parts with
state of their own are objects the connection holds, and its protocol
reaches it only through the methods of
:class:`~.client_protocol.ConnectionOwner`.

* **Lazy connect, reuse.** The first request (or :meth:`~BookieConnection.connect`) connects
  (:class:`~.dialer.Dialer`: resolving the bookie id, TCP, START_TLS); requests issued meanwhile
  are queued and sent once connected, later ones reuse the connection.
* **Matching** (:class:`~.requests.RequestTable`). v3: by ``(txnId,
  operation)`` with a per-connection txnId counter. v2: by ``(ledgerId,
  entryId, opcode)``, first-in first-out for duplicate keys; BATCH_READ by
  its requestId.
* **Timeouts** (:class:`~.deadlines.Deadlines`, held by the :class:`~.outbox.Outbox`
  with the queue: a request's way from its issue to its completion). On the injected clock
  (``IReactorTime``): writes (ADD, WRITE_LAC, FORCE_LEDGER) use ``add_timeout``, reads use
  ``read_timeout`` (a long poll adds its own wait), GET_BOOKIE_INFO uses ``bookie_info_timeout``.
  The clock starts when the request is issued, so time spent queued or connecting counts. A
  response arriving after the timeout is dropped.
* **Failures.** When the connection goes away every request on it (sent or
  queued) fails with :class:`BookieUnavailable`. The next request after
  that reconnects, but only once a backoff delay has passed
  (:class:`~.backoff.Backoff`); inside the delay requests fail at once
  instead of piling up. A response that does not decode closes the
  connection and fails everything on it with :class:`MalformedResponse`.
* **Back-pressure.** At most ``max_outstanding`` requests are on the wire; the next ``max_queued``
  wait locally; beyond that requests fail with :class:`TooManyRequests`. Nothing grows without bound.
* **Cancellation.** Cancelling a request's Deferred forgets the request (a late response is dropped) and frees its slot.
* **Hot paths**. The ledger layer adds and reads
  through :meth:`~BookieConnection.add_run` (the one way an add enters: ADDs encoded
  once for their write set) and :meth:`~BookieConnection.read_with_callback`: a plain callback per
  request instead of a Deferred. Answers are handled a whole chunk (one
  ``dataReceived``) at a time, and the requests their callbacks issue are
  written once per connection after the chunk (a writer's burst of adds
  too). v3 EOK answers to ADDs and plain READs are matched by their header
  field and taken apart without the general parser, v2 EOK ADD and READ
  answers without the response tuple (fast paths: :mod:`bkctl.wire.fastpath`;
  the frames and the READ answers' bodies by the C twins of
  ``_fastcodec.c`` where built).

Operations return Deferreds that fire with plain values or fail with the
errors of :mod:`bkctl.wire.client.errors`. Argument errors (a master key that is
not 20 bytes, ...) raise ValueError immediately.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

from twisted.internet import defer
from twisted.python.failure import Failure

from bkctl.wire.clock import Clock
from bkctl.wire.codecs import answers
from bkctl.wire.codecs.add_frames import AddFields, EncodedAdd
from bkctl.wire.codecs.framing import frame
from bkctl.wire.codecs.protocol import (
    BOOKIE_INFO_FREE_DISK_SPACE,
    BOOKIE_INFO_TOTAL_DISK_CAPACITY,
    DEFAULT_MAX_FRAME_SIZE,
    OpCode,
)
from bkctl.wire.errors import CodecError
from bkctl.wire.fastpath import Twins

from .backoff import DEFAULT_BACKOFF_FACTOR, DEFAULT_BACKOFF_INITIAL, DEFAULT_BACKOFF_MAX, Backoff
from .channel import AddDone, ReadDone
from .client_protocol import BookieClientFactory, BookieClientProtocol
from .cork import Cork, Writer
from .deadlines import INFO, POLL, READ, WRITE
from .dialer import DEFAULT_CONNECT_TIMEOUT, Dialer, default_resolve
from .entry_requests import EntryRequests, check_master_key
from .errors import (
    BatchReadUnsupported,
    BookieError,
    BookieUnavailable,
    MalformedResponse,
    NotSupported,
    error_for,
)
from .op_requests import OpRequest, OpRequests
from .outbox import Outbox
from .requests import DECLINED, DONE, QUEUED, Request, RequestTable

if TYPE_CHECKING:
    from bkctl.wire.tls import TLSFiles

__all__ = [
    "BookieConnection",
    "DEFAULT_ADD_TIMEOUT",
    "DEFAULT_READ_TIMEOUT",
    "DEFAULT_BOOKIE_INFO_TIMEOUT",
    "DEFAULT_MAX_OUTSTANDING",
    "DEFAULT_MAX_QUEUED",
]

log = logging.getLogger(__name__)

# Java client defaults (ClientConfiguration): readTimeout = 5 s, and both
# addEntryTimeoutSec and readEntryTimeoutSec fall back to it;
# getBookieInfoTimeoutSecs = 5 (clientConnectTimeoutMillis: the dialer's).
# WRITE_LAC and FORCE_LEDGER are timed with the add timeout here; Java's
# completions for them inherit the read timeout (same value by default).
# Java times a long poll with the plain read timeout; here its wait is added.
DEFAULT_ADD_TIMEOUT = 5.0
DEFAULT_READ_TIMEOUT = 5.0
DEFAULT_BOOKIE_INFO_TIMEOUT = 5.0
DEFAULT_MAX_OUTSTANDING = 1000
DEFAULT_MAX_QUEUED = 1000

_OPC_READ = int(OpCode.READ_ENTRY)
_V2_ANSWER_HEAD = answers.V2_ANSWER_HEAD
_EOK = 0


class _Settle:
    """:meth:`BookieConnection.add`'s ``on_done``: its Deferred fires (a cancelled one already has)."""

    __slots__ = ("deferred",)

    def __init__(self, deferred: defer.Deferred[None]):
        self.deferred = deferred

    def __call__(self, _add: object, _slot: int, _bookie_id: str, error: BaseException | None) -> None:
        d = self.deferred
        if not d.called:
            if error is None:
                d.callback(None)
            else:
                d.errback(Failure(error))


class BookieConnection:
    """The connection to one bookie and the requests sent over it.

    ``reactor`` must provide ``connectTCP`` (and ``callLater``/``seconds``
    unless ``clock`` is given); ``None`` means the global reactor.
    ``resolve(bookie_id)`` returns ``(host, port)`` or a Deferred of it
    (default: the id itself is ``host:port``). ``protocol`` is ``"v3"``
    (default) or ``"v2"``, fixed for the connection's lifetime. Timeouts are
    in seconds. ``txn_ids`` is an iterator of txnIds (and v2 BATCH_READ
    requestIds); by default each connection counts from 1. ``tls``
    (:class:`~bkctl.wire.tls.TLSFiles`): START_TLS on every connection.
    ``twins`` (its builder's record, :mod:`bkctl.wire.fastpath`: the client's, through its pool)
    is fixed for the connection's lifetime.
    ``cork`` (:mod:`.cork`): whose bursts hold this connection's writes (its pool's; default its own).
    """

    def __init__(
        self,
        bookie_id: str,
        reactor: Any = None,
        resolve: Callable[[str], Any] | None = None,
        *,
        protocol: str = "v3",
        add_timeout: float = DEFAULT_ADD_TIMEOUT,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        bookie_info_timeout: float = DEFAULT_BOOKIE_INFO_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_outstanding: int = DEFAULT_MAX_OUTSTANDING,
        max_queued: int = DEFAULT_MAX_QUEUED,
        backoff_initial: float = DEFAULT_BACKOFF_INITIAL,
        backoff_max: float = DEFAULT_BACKOFF_MAX,
        backoff_factor: float = DEFAULT_BACKOFF_FACTOR,
        clock: Clock | None = None,
        txn_ids: Iterator[int] | None = None,
        twins: Twins,
        tls: TLSFiles | None = None,
        cork: Cork | None = None,
    ):
        if protocol not in ("v2", "v3"):
            raise ValueError(f"protocol must be 'v2' or 'v3', not {protocol!r}")
        for name, value in (
            ("add_timeout", add_timeout),
            ("read_timeout", read_timeout),
            ("bookie_info_timeout", bookie_info_timeout),
            ("connect_timeout", connect_timeout),
        ):
            if not value > 0:
                raise ValueError(f"{name} must be positive")
        if max_outstanding < 1 or max_queued < 1:
            # Requests wait in the queue while connecting, so it needs room for one.
            raise ValueError("max_outstanding and max_queued must be >= 1")
        self._backoff = Backoff(backoff_initial, backoff_max, backoff_factor)
        if reactor is None:
            from twisted.internet import reactor as _global_reactor

            reactor = _global_reactor
        self.bookie_id = str(bookie_id)
        self.protocol = protocol
        self.use_v3 = protocol == "v3"
        self.add_timeout = float(add_timeout)
        self.read_timeout = float(read_timeout)
        self.bookie_info_timeout = float(bookie_info_timeout)
        self.connect_timeout = float(connect_timeout)
        self.max_frame_size = max_frame_size
        self.max_outstanding = max_outstanding
        self.max_queued = max_queued
        #: None until known; True once a BATCH_READ was answered; False after
        #: the bookie dropped the connection on one (batch reads then fail fast).
        self.batch_read_supported: bool | None = None
        self._clock = clock if clock is not None else reactor
        self._ids = txn_ids if txn_ids is not None else itertools.count(1)

        #: the fast paths (reused v3 request encoders, v3 EOK add and read
        #: answers matched and taken apart without the general parser, v2 plain
        #: reads packed directly); off with BKCTL_FASTPATHS=0
        #: (bkctl.wire.fastpath), when every request goes through the builders
        #: and every answer is parsed
        self.twins = twins
        self.fastpaths = twins.enabled
        #: whether adds may go out as runs at all (v3 with fast paths; :meth:`_room_for_adds`)
        self._runs = self.use_v3 and self.fastpaths
        #: :class:`~bkctl.wire.tls.TLSFiles` (None: plain text); its context is built on first connect
        self.tls = tls
        #: this connection's writes: held during a burst of ``cork`` (its pool's:
        #: :mod:`.cork`) and written together at its end, one write instead of one per request
        self.writer = Writer(cork if cork is not None else Cork())
        #: the connection attempts (and their START_TLS)
        self._dialer = Dialer(
            self,
            self.bookie_id,
            reactor,
            self._clock,
            resolve if resolve is not None else default_resolve,
            self._ids,
            self._backoff,
            use_v3=self.use_v3,
            tls=tls,
            connect_timeout=self.connect_timeout,
            max_frame_size=max_frame_size,
            twins=twins,
            cork=self.writer.cork,
            ready=self._connected,
            failed=self._attempt_failed,
        )
        #: builds the ADD and READ requests, and those of the other operations
        self.entries = EntryRequests(self.use_v3, twins, self._ids)
        self.ops = OpRequests(self.use_v3, self._ids)
        self._proto: BookieClientProtocol | None = None
        self._closing: BookieClientProtocol | None = None
        self._closed = False
        #: the requests on the wire, by what their answers carry
        self.requests = RequestTable(self.use_v3, twins.codec, twins.adds)
        #: the requests from their issue to their completion: queued, on the wire, timed, failed
        self._outbox = Outbox(
            self.bookie_id,
            self.requests,
            self.writer,
            self._clock,
            self._link,
            max_outstanding=max_outstanding,
            max_queued=max_queued,
        )
        # the outbox's parts the hot paths use, read once
        self._queue = self._outbox.queue
        self._sent = self.requests.sent
        self._deadlines = self._outbox.deadlines

    def __repr__(self) -> str:
        return (
            f"<BookieConnection {self.bookie_id} {self.protocol} {self.state}"
            f" outstanding={len(self._sent)} queued={len(self._queue)}>"
        )

    # ------------------------------------------------------------ status

    @property
    def state(self) -> str:
        """``"closed"``, ``"connected"``, ``"connecting"``, ``"backoff"`` or ``"idle"``."""
        if self._closed:
            return "closed"
        if self._proto is not None:
            return "connected"
        if self._dialer.dialing:
            return "connecting"
        if self._backoff.wait(self._clock.seconds()) > 0:
            return "backoff"
        return "idle"

    @property
    def connected(self) -> bool:
        return self._proto is not None

    @property
    def outstanding(self) -> int:
        """Requests written to the bookie and not answered yet."""
        return len(self._sent)

    @property
    def queued(self) -> int:
        """Requests waiting locally (for the connection or for a free slot)."""
        return len(self._queue)

    # -------------------------------------------------------- operations

    def add(
        self,
        ledger_id: int,
        entry_id: int,
        master_key: bytes,
        body: bytes,
        *,
        recovery: bool = False,
        high_priority: bool = False,
        deferred_sync: bool = False,
    ) -> defer.Deferred[None]:
        """ADD_ENTRY of a digest-packaged ``body``; fires with None once the
        bookie acknowledged it. ``recovery`` is accepted on a fenced ledger,
        ``deferred_sync`` (v3 only) is acknowledged before the journal fsync.
        A caller of :meth:`add_run` (the one way an add enters), with a Deferred:
        cancelling it forgets the request (a late answer is dropped)."""
        if deferred_sync and not self.use_v3:
            check_master_key(master_key)
            return self._unsupported(f"ADD ledger {ledger_id} entry {entry_id} with DEFERRED_SYNC")
        add = EncodedAdd(ledger_id, entry_id, master_key, body, recovery, high_priority, deferred_sync)
        d: defer.Deferred[None] = defer.Deferred(lambda _d: self._cancel_add(add))
        self.add_run([add], [0], _Settle(d))
        return d

    def _cancel_add(self, add: EncodedAdd) -> None:
        """Canceller of :meth:`add`'s Deferred: the request of ``add`` (its ctx) is forgotten."""
        for req in itertools.chain(self._sent, self._queue):
            if req.ctx is add:
                self._outbox.cancel(req)
                return

    def read(
        self, ledger_id: int, entry_id: int, *, fence_master_key: bytes | None = None, high_priority: bool = False
    ) -> defer.Deferred[Any]:
        """READ_ENTRY; fires with the stored entry bytes. ``entry_id`` -1
        returns the entry with the highest id the bookie has. With
        ``fence_master_key`` the read fences the ledger."""
        if fence_master_key is not None:
            check_master_key(fence_master_key)
        req = self.entries.read(ledger_id, entry_id, fence_master_key, high_priority)
        return self._submit_request(req, READ, self.read_timeout)

    def add_run(self, adds: Sequence[AddFields], slots: list[int], on_done: AddDone) -> None:
        """The one way an add enters the connection (:class:`~bkctl.wire.client.channel.BookieChannel`;
        :meth:`add` is its caller): each of ``adds`` (an entry's ADD encoded once for its whole
        write set, :class:`~bkctl.wire.codecs.add_frames.AddFields`: a writer's entry, its own
        encoded ADD, or an :class:`~bkctl.wire.codecs.add_frames.EncodedAdd` made of its fields
        only, then built the general way here), reported through ``on_done(add, slot,
        bookie_id, error)`` with the ``slots`` beside them, ``error`` None once the bookie
        acknowledged the entry, else the exception.  ``on_done`` may run before this returns (a
        refused request).  As many as the wire has room for (connected, nothing queued, under
        ``max_outstanding``; v3 with fast paths) go out as one run: their frames built, their
        deadlines started, registered and written together (``Twins.adds``); the others one by
        one (``EntryRequests.encoded_add``: the general path's every copy), queued when they must
        wait.  Argument errors raise ValueError."""
        room = self._room_for_adds(len(adds)) if self._runs else 0
        if room:
            run, run_slots = (adds, slots) if room >= len(adds) else (adds[:room], slots[:room])
            reqs, data = self.entries.encoded_adds(run, run_slots, on_done)
            self._deadlines.start_all(reqs, WRITE, self.add_timeout, self._clock.seconds())
            self.requests.register_all(reqs)
            proto = self._proto
            assert proto is not None  # _room_for_adds said it is up
            self.writer.write(proto, data)
            if room >= len(adds):
                return
        encoded_add = self.entries.encoded_add
        for i in range(room, len(adds)):  # by index: no zip, no slices (the general path's every copy)
            # outside a run: on a connection with room on the wire and nothing queued, the copy goes
            # out at once (the shared bytes with this connection's v3 header, whose answer is matched
            # without being parsed, the v2 frame as it is, or the frame built the general way: as
            # _submit_request would send it, two calls fewer); else it waits (or is refused) with it
            add = adds[i]
            req, now = encoded_add(add)
            req.on_done = on_done  # req.callback_to, inline: the general path's every copy
            req.ctx = add
            req.slot = slots[i]
            if now is None:  # built the general way: its frame, which goes out as any other
                now, req.frame = req.frame, b""
            proto = self._proto
            if proto is None or self._queue or len(self._sent) >= self.max_outstanding or self._closed:
                req.frame = now  # it waits (or is refused) with the frame it was encoded with
                self._submit_request(req, WRITE, self.add_timeout, False)
            else:  # _send_now, inline: the general path's every copy
                self._deadlines.start(req, WRITE, self.add_timeout, self._clock.seconds())
                self.requests.register(req)
                self.writer.write(proto, now)

    def _room_for_adds(self, count: int) -> int:
        """How many of ``count`` adds would go on the wire at once as :meth:`add_run` sends one
        (connected, nothing queued, room under ``max_outstanding``; v3 with fast paths; else
        none): :meth:`add_run` sends that many as one run."""
        if not self._takes_runs():
            return 0
        return max(0, min(count, self.max_outstanding - len(self._sent)))

    def read_with_callback(self, ledger_id: int, entry_id: int, on_done: ReadDone, ctx: Any, slot: int) -> None:
        """A plain :meth:`read` for the ledger layer
        (:class:`~bkctl.wire.client.channel.BookieChannel`), without a Deferred:
        the outcome is ``on_done(ctx, slot, bookie_id, result)``, ``result``
        being the stored entry's bytes, or the exception :meth:`read`'s
        Deferred would fail with. ``on_done`` may run before this returns (a
        refused request).  With room on the wire and nothing queued, a v3
        frame encoded by hand goes out at once (a fast path)."""
        proto = self._proto
        if proto is not None and not self._queue and len(self._sent) < self.max_outstanding and not self._closed:
            req, data = self.entries.plain_read(ledger_id, entry_id)
            req.callback_to(on_done, ctx, slot)
            if data is not None:
                self._send_now(proto, req, data, READ, self.read_timeout)
                return
        else:
            req = self.entries.read(ledger_id, entry_id, None, False)
            req.callback_to(on_done, ctx, slot)
        self._submit_request(req, READ, self.read_timeout, False)

    def takes_reads(self, count: int) -> bool:
        """True when ``count`` plain reads would all go on the wire at once as
        :meth:`read_with_callback` sends one (connected, nothing queued, room
        under ``max_outstanding``; v3 with fast paths): :meth:`read_run` then
        takes them all, none refused."""
        return self._takes_runs() and len(self._sent) + count <= self.max_outstanding

    def _takes_runs(self) -> bool:
        """Whether runs (of reads or of adds) may go on the wire at once, room
        under ``max_outstanding`` permitting: up, nothing queued, v3 with fast paths."""
        return self._proto is not None and not self._queue and not self._closed and self.use_v3 and self.fastpaths

    def read_run(self, ledger_id: int, entry_ids: list[int], on_done: ReadDone) -> None:
        """:meth:`read_with_callback` of each of ``entry_ids`` (ctx: the entry
        id, slot 0) once :meth:`takes_reads` said yes for them: their frames
        encoded, registered and written together (a fast path)."""
        reqs, data = self.entries.plain_reads(ledger_id, entry_ids, on_done)
        self._deadlines.start_all(reqs, READ, self.read_timeout, self._clock.seconds())
        self.requests.register_all(reqs)
        proto = self._proto
        assert proto is not None  # takes_reads said it is up
        self.writer.write(proto, data)

    def _send_now(self, proto: BookieClientProtocol, req: Request, data: bytes, kind: str, timeout: float) -> None:
        """A callback request with room on the wire and nothing queued: what
        :meth:`_submit_request` does for a request that goes out at once."""
        self._deadlines.start(req, kind, timeout, self._clock.seconds())
        self.requests.register(req)
        self.writer.write(proto, data)

    def read_long_poll(
        self, ledger_id: int, previous_lac: int, timeout_ms: int, piggyback: bool = True
    ) -> defer.Deferred[Any]:
        """Long-poll READ (v3): the bookie answers once its LAC passes
        ``previous_lac`` or after ``timeout_ms``. Fires with ``(max_lac,
        entry_id, body)``; with ``piggyback`` the bookie may add entry
        previous_lac + 1, else ``entry_id`` and ``body`` are None. The local
        timeout is read_timeout plus the poll's own wait."""
        timeout = self.read_timeout + timeout_ms / 1000.0
        return self._issue(self.ops.long_poll(ledger_id, previous_lac, timeout_ms, piggyback), timeout, (POLL, timeout))

    def batch_read(
        self,
        ledger_id: int,
        start_entry_id: int,
        max_count: int,
        max_size: int,
        *,
        fence_master_key: bytes | None = None,
    ) -> defer.Deferred[Any]:
        """BATCH_READ_ENTRY (v2 only, bookies 4.17+): fires with the list of
        consecutive entries from ``start_entry_id`` the bookie fitted into
        ``max_count`` (<= 0: no limit) and ``max_size`` bytes. Fails with
        :class:`BatchReadUnsupported` when the bookie drops the connection on
        it (older bookie): read entries one by one instead."""
        if fence_master_key is not None:
            check_master_key(fence_master_key)
        what = f"BATCH_READ ledger {ledger_id} from entry {start_entry_id}"
        if self.use_v3:
            return self._unsupported(what)
        if self.batch_read_supported is False:
            return defer.fail(
                BatchReadUnsupported(
                    f"{what}: bookie {self.bookie_id} does not support batch reads", bookie=self.bookie_id
                )
            )
        return self._issue(
            self.ops.batch_read(what, ledger_id, start_entry_id, max_count, max_size, fence_master_key),
            self.read_timeout,
        )

    def read_lac(self, ledger_id: int) -> defer.Deferred[Any]:
        """READ_LAC (v3): fires with ``(lac_body, last_entry_body)``, each
        None when the bookie has none (if it has neither: NoSuchEntry)."""
        return self._issue(self.ops.read_lac(ledger_id), self.read_timeout)

    def write_lac(self, ledger_id: int, lac: int, master_key: bytes, body: bytes) -> defer.Deferred[Any]:
        """WRITE_LAC (v3) of a digest-packaged LAC ``body``; fires with None."""
        return self._issue(self.ops.write_lac(ledger_id, lac, master_key, body), self.add_timeout, WRITE)

    def force_ledger(self, ledger_id: int) -> defer.Deferred[Any]:
        """FORCE_LEDGER (v3): fires with None once everything written before
        it for the ledger is durable."""
        return self._issue(self.ops.force_ledger(ledger_id), self.add_timeout, WRITE)

    def bookie_info(
        self, requested: int = BOOKIE_INFO_TOTAL_DISK_CAPACITY | BOOKIE_INFO_FREE_DISK_SPACE
    ) -> defer.Deferred[Any]:
        """GET_BOOKIE_INFO (v3): fires with ``(total_disk_bytes,
        free_disk_bytes)``; a field not asked for (or not sent) is None."""
        return self._issue(self.ops.bookie_info(requested), self.bookie_info_timeout, INFO)

    def entry_availability(self, ledger_id: int) -> defer.Deferred[Any]:
        """GET_LIST_OF_ENTRIES_OF_LEDGER (v3): fires with the encoded
        availability of the ledger's entries on the bookie (b"" if none sent)."""
        return self._issue(self.ops.entry_availability(ledger_id), self.read_timeout)

    # ------------------------------------------------------------- close

    def close(self) -> defer.Deferred[Any]:
        """Fail every pending request with BookieUnavailable, cancel their
        timers and drop the connection: a TLS close_notify is sent, and the
        transport aborted after :data:`~.client_protocol.CLOSE_GRACE` seconds
        if the bookie neither answers nor closes (a Java bookie does neither).
        Fires (with None) once the transport is gone. Later requests fail at once."""
        if self._closed:
            closing = self._closing
            return closing.when_lost() if closing is not None else defer.succeed(None)
        self._closed = True
        in_tls = self._dialer.stop()
        proto, self._proto = self._proto, None
        if proto is None:  # closed while starting TLS
            proto = in_tls
        done: defer.Deferred[None] = defer.succeed(None)
        if proto is not None:
            proto.detach()
            self._closing = proto
            done = proto.when_lost()
        self._outbox.fail_all(
            lambda r: BookieUnavailable(
                f"{r.what}: connection to bookie {self.bookie_id} closed", bookie=self.bookie_id
            )
        )
        if proto is not None:
            proto.let_go(self._clock)  # bounded: a Java bookie never answers close_notify
        return done

    # ----------------------------------------------------------- internals

    def _unsupported(self, what: str) -> defer.Deferred[Any]:
        return defer.fail(
            NotSupported(
                f"{what}: not available over protocol {self.protocol} (bookie {self.bookie_id})", bookie=self.bookie_id
            )
        )

    def _issue(self, spec: OpRequest, timeout: float, kind: Any = READ) -> defer.Deferred[Any]:
        """Send an operation's request (:mod:`.op_requests`); one its protocol cannot carry fails."""
        if spec.payload is None or spec.decode is None:
            return self._unsupported(spec.what)
        req = Request(spec.what, spec.key, frame(spec.payload), spec.decode, spec.is_batch)
        req.op = spec.op
        return self._submit_request(req, kind, timeout)

    @overload
    def _submit_request(self, req: Request, kind: Any, timeout: float) -> defer.Deferred[Any]: ...

    @overload
    def _submit_request(self, req: Request, kind: Any, timeout: float, with_deferred: Literal[False]) -> None: ...

    def _submit_request(
        self, req: Request, kind: Any, timeout: float, with_deferred: bool = True
    ) -> defer.Deferred[Any] | None:
        """Issue ``req`` unless the connection is closed or backing off (:class:`~.outbox.Outbox`);
        connect when it waits for a connection."""
        if self._closed:
            return self._outbox.refuse(
                req,
                BookieUnavailable(
                    f"{req.what}: connection to bookie {self.bookie_id} is closed", bookie=self.bookie_id
                ),
            )
        proto = self._proto
        now = self._clock.seconds()
        idle = proto is None and not self._dialer.dialing
        if idle:
            wait = self._backoff.wait(now)
            if wait > 0:
                return self._outbox.refuse(
                    req,
                    BookieUnavailable(
                        f"{req.what}: bookie {self.bookie_id} is unavailable ({self._backoff.last_error});"
                        f" next connection attempt in {wait:.3g}s",
                        bookie=self.bookie_id,
                    ),
                )
        d = self._outbox.submit(req, kind, timeout, now, proto, with_deferred)
        if idle and req.state == QUEUED:
            self._dialer.dial()
        return d

    def connect(self) -> None:
        """Connect now, as a first request would; only from ``idle`` (:attr:`state`)."""
        if self.state == "idle":
            self._dialer.dial()

    def _link(self) -> BookieClientProtocol | None:
        """The protocol the requests go to now (None: not connected)."""
        return self._proto

    def cancel(self, req: Request) -> None:
        """Canceller of a request's Deferred (which then fails with CancelledError)."""
        self._outbox.cancel(req)

    def _failed_attempt(self, why: str) -> None:
        """A connection attempt or connection failed: back off before the next."""
        self._backoff.failed(why, self._clock.seconds())

    # -- connecting (:class:`~.dialer.Dialer`) -----------------------------------

    def _connected(self, proto: BookieClientProtocol) -> None:
        """The attempt is over: ``proto`` carries the requests (once TLS is up, with TLS)."""
        self._proto = proto
        self._outbox.pump(proto)

    def _attempt_failed(self, why: str) -> None:
        self._outbox.fail_all(lambda r: BookieUnavailable(f"{r.what}: {why}", bookie=self.bookie_id))

    # -- what the protocol and the factory report (client_protocol.ConnectionOwner) --

    def connection_failed(self, attempt: BookieClientFactory, reason: Failure) -> None:
        self._dialer.attempt_failed(reason, attempt)

    def connection_made(self, proto: BookieClientProtocol) -> None:
        self._dialer.connection_made(proto, wanted=not self._closed and self._proto is None)

    def handshake_done(self, proto: BookieClientProtocol) -> None:
        self._dialer.handshake_done(proto)

    def answer_received(self, proto: BookieClientProtocol, msg: Any) -> None:
        if proto is not self._proto:
            self._dialer.answer_received(proto, msg)  # START_TLS's
            return
        req = self.requests.match(msg)
        if req is None:
            log.debug("bookie %s: dropping a response nobody waits for (late or unknown)", self.bookie_id)
            return
        self._backoff.failures = 0  # the bookie answers: the next failure starts a fresh backoff
        if req.is_batch:
            self.batch_read_supported = True
        try:  # the result out of its answer (the general path's every answer: no call more)
            rc, result = req.decode(msg)
            if rc != _EOK:
                raise error_for(rc, self.bookie_id, req.what)
        except BaseException as exc:  # noqa: BLE001 - hand everything to the caller
            result = self._answer_error(req, exc)
        if self._queue:
            self._outbox.pump(self._proto)
        on_done = req.on_done
        if on_done is None or req.deferred is not None:
            self._outbox.finish(req, result)
        else:  # a callback request (match marked it done): Outbox.finish's work, inline
            if req.timeouts is not None:
                self._deadlines.retire(req)
            req.call_back(on_done, self.bookie_id, result)

    def _answer_error(self, req: Request, exc: BaseException) -> Any:
        """What ``req`` completes with when its answer raised ``exc`` decoding (a malformed
        answer) or said an error: a Failure for a Deferred, else the exception."""
        if isinstance(exc, CodecError):
            exc = MalformedResponse(f"{req.what}: bookie {self.bookie_id} {exc}", bookie=self.bookie_id)
        return Failure(exc) if req.deferred is not None else exc

    def fast_answer(self, proto: BookieClientProtocol, payload: bytes) -> bool:
        """A v3 answer, undecoded: when it starts with the header field of a
        plain ADD or READ on the wire (``requests.v3_fast``, which it is taken
        out of), what :meth:`answer_received` would do with it, without the
        general parser, when it is the EOK answer of that request: exactly the
        expected bytes for an ADD, an EOK ReadResponse with a body
        (:func:`bkctl.wire.codecs.v3_fast.plain_read_body`) for a READ. False when
        it is anything else (an error, another shape, another request, or one
        a repeating caller-supplied txn_ids gave a header field that is not
        its own): then it is parsed and matched as usual."""
        requests = self.requests
        req = requests.pop_fast(payload)
        if req is None:
            return False
        if proto is not self._proto:
            return True  # a connection given up on: dropped, as any answer on it
        result = requests.claim(req, payload)
        if result is DECLINED:
            return False
        self._answered(req, result)
        return True

    def fast_answers(self, proto: BookieClientProtocol, payloads: list[bytes], start: int) -> int:
        """:meth:`fast_answer` over the v3 answers ``payloads[start:]`` for as
        long as it takes them (:meth:`RequestTable.take_answers`): the index of
        the first one it does not take (another shape, or a callback closed the
        connection), which is left as it was for the caller to hand to
        :meth:`fast_answer` and the general path.  One call per chunk of answers
        instead of one per answer."""
        if proto is not self._proto:
            return start
        i = self.requests.take_answers(payloads, start, self._answered, self._room_freed, self._queue, self.bookie_id)
        if i > start:  # a writer's ADD copies answered in C (_addpath) leave this for the chunk's end
            self._backoff.failures = 0
            self._deadlines.prune()
        return i

    def _room_freed(self) -> None:
        """An answer freed a slot on the wire: what waits in the queue goes out first."""
        self._outbox.pump(self._proto)

    def v2_answer(self, proto: BookieClientProtocol, payload: bytes, opcode: int) -> bool:
        """A v2 READ_ENTRY or ADD_ENTRY answer (``opcode``; version > 0, at
        least its 24-byte head): what :meth:`answer_received` would do with
        an EOK one, without building the response tuple. False for anything
        else (an error, an answer nobody waits for): then it is decoded and
        matched as usual."""
        if proto is not self._proto:
            return True  # a connection given up on: dropped, as any answer on it
        _head, rc, ledger_id, entry_id = _V2_ANSWER_HEAD.unpack_from(payload)
        if rc != _EOK:
            return False
        req = self.requests.take_v2((ledger_id, entry_id, opcode))
        if req is None:
            return False
        self._answered(req, payload[_V2_ANSWER_HEAD.size :] if opcode == _OPC_READ else None)
        return True

    def _answered(self, req: Request, result: Any) -> bool:
        """The end of :meth:`answer_received` for a request already out of
        the matching tables, answered with ``result``; whether the connection
        is still up after its callback (which may close it: then the rest of a
        chunk of answers is dropped, :meth:`fast_answers`)."""
        proto = self._proto
        self._sent.pop(req, None)
        req.state = DONE
        self._backoff.failures = 0  # the bookie answers: the next failure starts a fresh backoff
        if self._queue:
            self._outbox.pump(self._proto)
        on_done = req.on_done
        if on_done is None or req.deferred is not None:
            self._outbox.finish(req, result)
        else:  # a callback request (the ledger layer's adds and reads): Outbox.finish's work, inline
            if req.timeouts is not None:
                self._deadlines.retire(req)
            req.call_back(on_done, self.bookie_id, result)
        return proto is self._proto

    def malformed(self, proto: BookieClientProtocol, exc: CodecError) -> None:
        if proto is not self._proto:
            self._dialer.malformed(proto, exc)  # START_TLS's
            return
        proto.detach()
        self._proto = None
        why = f"malformed response: {exc}"
        self._failed_attempt(why)
        log.warning("bookie %s sent a %s; closing the connection", self.bookie_id, why)
        self._outbox.fail_all(
            lambda r: MalformedResponse(
                f"{r.what}: bookie {self.bookie_id} sent a {why}; connection closed", cause=exc, bookie=self.bookie_id
            )
        )
        proto.abort()

    def connection_lost(self, proto: BookieClientProtocol, reason: Failure | None) -> None:
        if proto is not self._proto:
            self._dialer.connection_lost(proto, reason)  # START_TLS's
            return
        self._proto = None
        why = (
            self._dialer.refused_why(reason)
            or f"connection lost: {reason.getErrorMessage() if reason is not None else 'closed'}"
        )
        batch_refused = self.batch_read_supported is not True and any(r.is_batch for r in self._sent)
        if batch_refused:
            # An old bookie cannot decode BATCH_READ and drops the connection.
            # It is up, so no backoff: the caller falls back to single reads.
            self.batch_read_supported = False
        else:
            self._failed_attempt(why)
        log.info("bookie %s: %s", self.bookie_id, why)

        def error(r: Request) -> BookieError:
            if batch_refused and r.is_batch:
                return BatchReadUnsupported(
                    f"{r.what}: bookie {self.bookie_id} closed the connection on a batch read"
                    " (bookie older than 4.17?); read entries one by one",
                    bookie=self.bookie_id,
                )
            return BookieUnavailable(f"{r.what}: bookie {self.bookie_id} {why}", bookie=self.bookie_id)

        self._outbox.fail_all(error)
