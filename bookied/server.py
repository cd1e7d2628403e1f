"""The bookie's TCP protocol: decode -> dispatch to :class:`bkctl.bookied.bookie.Bookie` -> encode.

One :class:`BookieProtocol` per connection.  Each connection starts in v3
mode and drops to v2 for good on the first frame that is not a v3 Request
(BookKeeper's proto/BookieProtoEncoding.java, RequestDecoder).  The bookie answers through callbacks; responses of
one connection are written in completion order, which keeps v2's FIFO rule
for equal (ledger, entry, op) keys because the journal completes in order.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol, cast

from twisted.internet import protocol
from twisted.internet.interfaces import IAddress, IHandshakeListener
from zope.interface import implementer

from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.detect import ProtocolDetector
from bkctl.wire.codecs.framing import FrameDecoder
from bkctl.wire.codecs.protocol import (
    AUTH_DISABLED_PLUGIN,
    BOOKIE_INFO_FREE_DISK_SPACE,
    BOOKIE_INFO_TOTAL_DISK_CAPACITY,
    DEFAULT_MAX_FRAME_SIZE,
    LAST_ADD_CONFIRMED,
    RC,
    OperationType,
    ProtocolVersion,
)
from bkctl.wire.errors import CodecError
from bkctl.wire.fastpath import Twins
from bkctl.wire.send_now import Transport

from .adds import Adds
from .in_progress import CountedBookie, InProgressLimit, Throttle
from .metrics import RequestObserver
from .outbox import AnswerGroups, Outbox
from .peer_log import HandshakeFailureLog, PeerLog, peer_name
from .plain_reads import PlainReads

log = logging.getLogger("bookied.server")


_OP = OperationType
_V3 = int(ProtocolVersion.VERSION_THREE)

#: Bytes read from a connection at a time (a transport's bufferSize, also the answers it
#: buffers before it pauses us) lie between these two, sized to about READ_RECORDS of its
#: requests (:meth:`BookieProtocol._size_reads`).  Twisted reads once per connection per reactor
#: turn and the journal commits once a turn: with 64 KiB reads, 4 KiB adds made groups of
#: ~15 records (a quarter of what 256 KiB gives), but a 256 KiB read takes a whole window of
#: 1,000 small pipelined adds, which the client then refills only once all are answered.
#: Small adds are read 32 KiB at a time: more groups of a window overlap with the client's
#: work (16 KiB: the fsyncs cost more than the overlap gains).
READ_SIZE, READ_SIZE_MAX, READ_RECORDS = 32 * 1024, 256 * 1024, 64
#: Seconds a pause (answers over the transport's buffer) lasts before it is reported: a
#: chunk's answers over a small buffer pause us until the kernel has them, a moment later.
UNREAD_REPORT_AFTER = 1.0
#: Long polls one connection may have waiting; past them it is not read until one is
#: answered (back-pressure: a flood of polls holds at most this many per connection).
LONG_POLLS_MAX = 1000


class ServerTransport(Transport, Protocol):
    """What :class:`BookieProtocol` calls on its transport: a TCP (or TLS) connection's
    (Twisted's ``ITCPTransport``, ``IProducer``, ``ITLSTransport``: zope interfaces a type
    checker without its plugin cannot read)."""

    producer: object
    #: bytes read at a time (a TCP connection's; looked up, as not every transport has it)
    bufferSize: int  # noqa: N815 - Twisted's name

    def getPeer(self) -> IAddress: ...  # noqa: N802 - Twisted's names, here and below

    def loseConnection(self) -> None: ...  # noqa: N802

    def abortConnection(self) -> None: ...  # noqa: N802

    def pauseProducing(self) -> None: ...  # noqa: N802

    def resumeProducing(self) -> None: ...  # noqa: N802

    def registerProducer(self, producer: object, streaming: bool) -> None: ...  # noqa: N802

    def unregisterProducer(self) -> None: ...  # noqa: N802

    def startTLS(self, contextFactory: Any) -> None: ...  # noqa: N802,N803


@implementer(IHandshakeListener)
class BookieProtocol(protocol.Protocol):
    """One client connection: its requests decoded and dispatched, in order, to the
    parts that own them -- :class:`~.adds.Adds` (every add), :class:`~.plain_reads.PlainReads`
    (the fast path's reads), :class:`~.in_progress.Throttle` (the bookie's in-progress
    limits), :class:`~.outbox.Outbox` (the answers' writes), :class:`~.metrics.RequestObserver`
    (the request metrics); the protocol itself keeps the connection's flow (what is held
    back while it is paused, throttled or full of long polls) and the other requests."""

    def __init__(
        self,
        bookie,
        metrics,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        *,
        twins: Twins,
        adds: InProgressLimit | None = None,
        reads: InProgressLimit | None = None,
        groups: AnswerGroups | None = None,
    ):
        #: Whether the fast paths written in Python are used -- the answers' writes sent at once
        #: (``twins``, the factory's record: :mod:`bkctl.wire.fastpath`)
        self.fastpaths = twins.enabled
        #: the plain requests' parsers and answers (:class:`~bkctl.wire.codecs.plain.PlainTwins`):
        #: the C twins, or with fast paths off the Python ones, which serve the same plain v2 and v3
        #: ADDs and READs and their runs (a Java client's requests) with the same answers; what they
        #: do not take apart goes through the general parsers
        self.plain = twins.plain
        self.metrics = metrics
        self.observer = RequestObserver(metrics)
        #: where the answers go (the factory's journal groups hold add answers)
        self.outbox = Outbox(AnswerGroups() if groups is None else groups, self.fastpaths)
        #: the connection's side of maxAddsInProgressLimit / maxReadsInProgressLimit
        self.throttle = Throttle(adds, reads, self._pause_reading, self._drain)
        #: the bookie as this connection's requests see it: counted under the limits, if any
        self.bookie = CountedBookie(bookie, self.throttle) if self.throttle.limited else bookie
        self.adds = Adds(self.bookie, self.plain, self.outbox, self.observer)
        self.plain_reads = PlainReads(self.bookie, self.plain, self.outbox, self.observer)
        self.decoder = FrameDecoder(max_frame_size, twins.codec.split_frames)
        self.detector = ProtocolDetector()
        self._backlog: deque = deque()  # requests read but not served while paused or throttled
        #: The waiting long polls' cancels (see :data:`LONG_POLLS_MAX`), forgotten when the connection goes.
        self._polls: set = set()
        #: True while LONG_POLLS_MAX long polls wait: the connection is not read.
        self.polls_full = False
        #: The bookie's TLS (:class:`~bkctl.wire.tls.ReloadingServerTLS`; None: START_TLS answers EBADREQ).
        self.tls = None
        #: True while TLS is configured but this client has not started it: only
        #: START_TLS and AUTH are served, everything else is refused with EUA.
        self.insecure = False
        #: START_TLS answered, handshake not finished (a loss then is a refused handshake)
        self.handshaking = False
        #: Whether the transport reads ``bufferSize`` at a time (:meth:`_size_reads` sets it)
        self._sized_reads = False
        #: The call that reports a pause still on after UNREAD_REPORT_AFTER (:meth:`pauseProducing`)
        self._unread_report = None

    @property
    def _wire(self) -> ServerTransport:
        """The transport as this protocol uses it (Twisted types ``transport`` as zope's ``ITransport``)."""
        return cast(ServerTransport, self.transport)

    @property
    def closed(self) -> bool:
        """The connection is gone (or being dropped): nothing more is served or written."""
        return self.outbox.closed

    @property
    def paused(self) -> bool:
        """True while the client is not taking its answers (see :meth:`pauseProducing`)."""
        return self.outbox.paused

    @property
    def throttled(self) -> bool:
        """True while a request waits for an in-progress limit (see :class:`InProgressLimit`)."""
        return self.throttle.throttled

    # -- transport events ------------------------------------------------------
    def connectionMade(self):
        no_delay = getattr(self.transport, "setTcpNoDelay", None)  # a TCP connection's
        if no_delay is not None:
            no_delay(True)  # small acks must not wait for Nagle (Java: serverTcpNoDelay)
        self._sized_reads = hasattr(self.transport, "bufferSize")
        if self._sized_reads:
            self._wire.bufferSize = READ_SIZE
        self.outbox.transport = self.transport
        self.metrics.connections.inc()
        self.bookie.connection_opened(self)
        # Answers a client does not read pile up in the transport; past its
        # bufferSize (32 to 256 KiB) it pauses us, and we stop reading requests until they have
        # drained: TCP back-pressure, as Java's bookie turns autoRead off on an
        # unwritable channel. Memory stays bounded by one answer over the buffer.
        self._wire.registerProducer(self, True)

    def handshakeCompleted(self) -> None:
        """The TLS handshake after START_TLS is done (Twisted's IHandshakeListener)."""
        self.handshaking = False

    def connectionLost(self, reason=None):
        if self.handshaking:
            failures = getattr(getattr(self, "factory", None), "handshake_failures", None)
            if failures is not None:
                failures.refused(self._wire.getPeer(), reason)
        self._gone()
        self._cancel_unread_report()
        self._backlog.clear()
        polls, self._polls = self._polls, set()
        for cancel in polls:  # nobody is left to answer: the bookie forgets them now, not at their timeout
            cancel()
        self.metrics.connections.dec()
        self.bookie.connection_closed(self)

    def _gone(self) -> None:
        """Nothing more is written or served (lost or dropped); a free place under a limit passes us by."""
        self.outbox.close()
        self.throttle.gone = True

    def close(self) -> None:
        """Close once the answers written so far are sent (shutdown)."""
        if self._wire.producer is self:
            self._wire.unregisterProducer()  # a paused producer would keep the close waiting
        self._wire.loseConnection()

    # -- IPushProducer: the transport's write buffer is full / has drained ----------
    def _peer_log(self) -> PeerLog:
        return getattr(getattr(self, "factory", None), "peer_log", None) or _PEER_LOG

    def _holding_back(self, kind: str, why: str) -> None:
        """Say (INFO, rate-limited per peer host and ``kind``) that this connection is not read for a while."""
        peer = self._wire.getPeer() if self.transport else None
        self._peer_log().warn(
            kind, peer, f"not reading the connection from {peer_name(peer)} for now: {why}", logging.INFO
        )

    def pauseProducing(self):
        if not self.outbox.paused:
            self.outbox.paused = True
            self._wire.pauseProducing()  # stop reading from the socket
            if self._unread_report is None:
                self._unread_report = self.bookie.clock.callLater(UNREAD_REPORT_AFTER, self._still_unread)

    def _still_unread(self) -> None:
        """Paused for UNREAD_REPORT_AFTER: the client does not take its answers."""
        self._unread_report = None
        if self.paused and not self.closed:
            self._holding_back("unread", "it does not take its answers")

    def _cancel_unread_report(self) -> None:
        report, self._unread_report = self._unread_report, None
        if report is not None and report.active():
            report.cancel()

    def resumeProducing(self):
        self.outbox.paused = False
        self._cancel_unread_report()
        self._drain()

    def _pause_reading(self) -> None:
        self._wire.pauseProducing()

    def _drain(self) -> None:
        """Serve what was held back, then read again unless paused or throttled anew."""
        if self._backlog and not self.throttled and not self.polls_full:
            backlog = list(self._backlog)
            self._backlog.clear()
            self._serve(backlog)  # may pause or throttle again
        if not self.paused and not self.throttled and not self.polls_full and not self.closed:
            self._wire.resumeProducing()

    def stopProducing(self):
        self._backlog.clear()

    def dataReceived(self, data: bytes):
        try:
            payloads = self.decoder.feed(data)
        except CodecError as e:
            self._drop(f"bad framing: {e}")
            return
        if self._sized_reads:
            self._size_reads(len(data), len(payloads))
        if self._backlog:
            self._backlog.extend(payloads)
        else:
            self._serve(payloads)
        if self.decoder.failed is not None and not self.closed:
            self._drop(f"bad framing: {self.decoder.failed}")

    def _size_reads(self, got: int, requests: int) -> None:
        """Read about READ_RECORDS requests of the size just read at a time (within
        READ_SIZE..READ_SIZE_MAX): a journal group big enough for large adds, a read
        that leaves a pipelining client's window of small ones in several groups.
        A read with no whole request in it was part of a big one."""
        self._wire.bufferSize = min(READ_SIZE_MAX, max(READ_SIZE, got // (requests or 1) * READ_RECORDS))

    def _serve(self, payloads: list) -> None:
        """Answer requests in order; stop and keep the rest once paused or throttled.
        The answers given meanwhile go out in one write (:meth:`Outbox.hold`)."""
        outbox = self.outbox
        if not outbox.hold():
            self._serve_each(payloads)
            return
        try:
            self._serve_each(payloads)
        finally:
            outbox.release()

    def _serve_each(self, payloads: list) -> None:
        detector, outbox, throttle = self.detector, self.outbox, self.throttle
        limited = throttle.limited
        plain = self.plain
        plain_add_request, plain_read_request = plain.add_request, plain.read_request
        plain_v2_add_request = plain.v2_add_request
        adds, reads = self.adds, self.plain_reads
        serve: Callable[..., None]  # the plain request's server, called with what the parser took apart
        i = -1
        count = len(payloads)
        while i + 1 < count:
            i += 1
            payload = payloads[i]
            if outbox.closed:
                return
            if outbox.paused or throttle.throttled or self.polls_full:
                self._backlog.extend(payloads[i:])
                return
            if self.insecure:
                try:
                    self._before_tls(payload)
                except CodecError as e:
                    self._drop(f"undecodable request: {e}")
                    return
                continue
            if detector.is_v3:
                taken = plain_add_request(payload)
                if taken is not None:
                    if not limited and i + 1 < count:
                        i = adds.run(payloads, i, taken, True) - 1
                        continue
                    serve, limit = adds.v3_plain, throttle.adds
                else:
                    taken = plain_read_request(payload)
                    if taken is not None and not limited and i + 1 < count:
                        i = reads.v3_run(payloads, i, taken) - 1
                        continue
                    serve, limit = reads.read, throttle.reads
                if taken is not None:
                    if limited:
                        if not throttle.admit(limit):
                            self._backlog.extend(payloads[i:])
                            return
                        serve(*taken)
                        throttle.settle()
                    else:
                        serve(*taken)
                    continue
            elif not limited:  # a version-2 connection
                if i + 1 < count:
                    taken = plain_v2_add_request(payload)
                    if taken is not None:
                        i = adds.run(payloads, i, taken, False) - 1
                        continue
                    taken = v2.plain_read_request(payload)
                    if taken is not None:
                        i = reads.v2_run(payloads, i, taken) - 1
                        continue
                batch = v2.plain_batch_read_request(payload)
                if batch is not None:
                    reads.v2_batch(*batch)
                    continue
            kind, msg = detector.classify(payload)
            if limited and not throttle.admit(throttle.limit_for(kind, msg if kind == "v3" else payload)):
                self._backlog.extend(payloads[i:])
                return
            try:
                if kind == "v3":
                    self._v3(msg)
                else:
                    self._v2(payload)
            except CodecError as e:
                self._drop(f"undecodable {kind} request: {e}")
                return
            finally:
                if limited:
                    throttle.settle()

    def _drop(self, why: str) -> None:
        peer = self._wire.getPeer() if self.transport else None
        self._peer_log().warn("drop", peer, f"closing connection from {peer_name(peer)}: {why}")
        self.metrics.protocol_errors.inc()
        self._gone()
        self._wire.abortConnection()

    def send(self, payload: bytes) -> None:
        """Send an answer (:meth:`Outbox.send`)."""
        self.outbox.send(payload)

    def observe(self, op: str, started: float, rc: int, n: int = 1) -> None:
        """:meth:`RequestObserver.observe` of this connection."""
        self.observer.observe(op, started, rc, n)

    # -- v2 --------------------------------------------------------------------
    def _v2(self, payload: bytes) -> None:
        add = self.plain.v2_add_request(payload)
        if add is not None:  # the common case: a version-2 ADD
            self.adds.v2_plain(*add)
            return
        req = v2.decode_request(payload)  # UnknownOpcode -> CodecError -> close, like Java
        if isinstance(req, v2.AddRequest):
            self.adds.v2_request(req)
            return
        bad_version = not v2.is_supported_version(req.version)
        if isinstance(req, v2.ReadRequest):
            if bad_version:
                self.send(v2.ReadResponse(req.version, RC.EBADVERSION, req.ledger_id, req.entry_id).encode())
                return
            started = time.perf_counter()

            def done(rc, body, req=req, started=started):
                self.observe("read", started, rc)
                self.send(
                    v2.ReadResponse(
                        req.version, rc, req.ledger_id, req.entry_id, body if rc == RC.EOK else b""
                    ).encode()
                )

            if req.is_fencing:
                self.bookie.fence_and_read(req.ledger_id, req.entry_id, req.master_key, done)
            else:
                self.bookie.read_entry(req.ledger_id, req.entry_id, done)
        elif isinstance(req, v2.BatchReadRequest):
            if bad_version:
                self.send(
                    v2.BatchReadResponse(
                        req.version, RC.EBADVERSION, req.ledger_id, req.start_entry_id, req.request_id
                    ).encode()
                )
                return
            started = time.perf_counter()

            def done(rc, entries, req=req, started=started):
                self.observe("batch_read", started, rc)
                self.send(
                    v2.BatchReadResponse(
                        req.version, rc, req.ledger_id, req.start_entry_id, req.request_id, tuple(entries)
                    ).encode()
                )

            self.bookie.batch_read(
                req.ledger_id,
                req.start_entry_id,
                req.max_count,
                req.max_size,
                done,
                fence_key=req.master_key if req.is_fencing else None,
                fencing=req.is_fencing,
            )
        else:  # AUTH: an auth-less bookie answers every AUTH with AuthDisabledPlugin
            from bkctl.wire.proto import bookkeeper_pb2 as pb

            reply = pb.AuthMessage(authPluginName=AUTH_DISABLED_PLUGIN, payload=b"")
            self.send(v2.AuthResponse(req.version, reply.SerializeToString()).encode())

    # -- v3 --------------------------------------------------------------------
    def _v3(self, req) -> None:
        header = req.header
        op = header.operation
        if header.version != _V3:
            self.send(v3.serialize(v3.bad_version_response(req)))
            return
        handler = self._V3_HANDLERS.get(op)
        if handler is None:
            self.send(v3.serialize(v3.error_response(req, RC.EBADREQ)))
            return
        handler(self, req, header.priority > 0)

    def _v3_add(self, req, high_priority: bool) -> None:
        self.adds.v3_request(req, high_priority)

    def _v3_read(self, req, high_priority: bool) -> None:
        if not req.HasField("readRequest"):
            self.send(v3.serialize(v3.error_response(req, RC.EBADREQ)))
            return
        read = req.readRequest
        ledger_id, entry_id = read.ledgerId, read.entryId
        started = time.perf_counter()
        bookie = self.bookie

        if v3.is_fence_read(req):
            key = read.masterKey if read.HasField("masterKey") else None

            def fenced(rc, body, req=req, started=started):
                self.observe("read", started, rc)
                self.send(v3.serialize(v3.read_response(req, rc, body if rc == RC.EOK else None)))

            bookie.fence_and_read(ledger_id, entry_id, key, fenced)
            return

        if read.HasField("previousLAC"):
            piggyback = v3.is_piggyback_read(req)
            if entry_id != LAST_ADD_CONFIRMED:
                self.send(v3.serialize(v3.read_response(req, RC.EBADREQ)))
                return
            previous = read.previousLAC
            waiting: list[Callable[[], None]] = []

            def polled(rc, max_lac, req=req, started=started, previous=previous):
                self.observe("long_poll", started, rc)
                if waiting:
                    self._poll_answered(waiting[0])
                if self.closed:
                    return
                body = entry = None
                if rc == RC.EOK and piggyback and max_lac > previous:
                    got = bookie.get_entry(req.readRequest.ledgerId, previous + 1)
                    if got is not None:
                        body, entry = got, previous + 1
                self.send(v3.serialize(v3.read_response(req, rc, body, max_lac=max_lac, entry_id=entry)))

            cancel = bookie.wait_lac(ledger_id, previous, read.timeOut if read.HasField("timeOut") else 0, polled)
            if cancel is not None:
                waiting.append(cancel)
                self._polls.add(cancel)
                if len(self._polls) >= LONG_POLLS_MAX and not self.polls_full:
                    self.polls_full = True
                    self._wire.pauseProducing()
                    self._holding_back("polls", f"{LONG_POLLS_MAX} long polls wait")
            return

        if v3.is_piggyback_read(req):
            self.send(v3.serialize(v3.read_response(req, RC.EBADREQ)))
            return

        def done(rc, body, req=req, started=started):
            self.observe("read", started, rc)
            if rc == RC.EOK:
                self.send(v3.serialize(v3.read_response(req, rc, body, max_lac=bookie.lac(ledger_id))))
            else:
                self.send(v3.serialize(v3.read_response(req, rc)))

        bookie.read_entry(ledger_id, entry_id, done)

    def _poll_answered(self, cancel) -> None:
        self._polls.discard(cancel)
        if self.polls_full and len(self._polls) < LONG_POLLS_MAX:
            self.polls_full = False
            if not self.closed:
                self._drain()

    def _v3_read_lac(self, req, high_priority: bool) -> None:
        started = time.perf_counter()
        rc, lac_body, last_entry = self.bookie.read_lac(req.readLacRequest.ledgerId)
        self.observe("read_lac", started, rc)
        self.send(v3.serialize(v3.read_lac_response(req, rc, lac_body, last_entry)))

    def _v3_write_lac(self, req, high_priority: bool) -> None:
        w = req.writeLacRequest
        started = time.perf_counter()

        def done(rc, req=req, started=started):
            self.observe("write_lac", started, rc)
            self.send(v3.serialize(v3.write_lac_response(req, rc)))

        self.bookie.write_lac(w.ledgerId, w.lac, w.masterKey, w.body, done, high_priority=high_priority)

    def _v3_force(self, req, high_priority: bool) -> None:
        started = time.perf_counter()

        def done(rc, req=req, started=started):
            self.observe("force_ledger", started, rc)
            self.send(v3.serialize(v3.force_ledger_response(req, rc)))

        self.bookie.force_ledger(req.forceLedgerRequest.ledgerId, done)

    def _v3_bookie_info(self, req, high_priority: bool) -> None:
        requested = req.getBookieInfoRequest.requested
        try:
            total, free = self.bookie.disk_space()
        except OSError as e:
            log.warning("GET_BOOKIE_INFO failed: %s", e)
            self.send(v3.serialize(v3.get_bookie_info_response(req, RC.EIO)))
            return
        self.send(
            v3.serialize(
                v3.get_bookie_info_response(
                    req,
                    RC.EOK,
                    total=total if requested & BOOKIE_INFO_TOTAL_DISK_CAPACITY else None,
                    free=free if requested & BOOKIE_INFO_FREE_DISK_SPACE else None,
                )
            )
        )

    def _v3_list_entries(self, req, high_priority: bool) -> None:
        started = time.perf_counter()
        rc, availability = self.bookie.entry_availability(req.getListOfEntriesOfLedgerRequest.ledgerId)
        self.observe("get_list_of_entries", started, rc)
        self.send(v3.serialize(v3.get_list_of_entries_response(req, rc, availability)))

    def _v3_auth(self, req, high_priority: bool) -> None:
        self.send(v3.serialize(v3.auth_response(req, echo_header=True)))

    def _v3_start_tls(self, req, high_priority: bool) -> None:
        if self.tls is None or not self.insecure:
            # TLS is not configured on this bookie (or already started): Java answers EBADREQ.
            self.send(v3.serialize(v3.start_tls_response(req, RC.EBADREQ)))
            return
        # The answer goes in the clear (Twisted sends what was written before
        # startTLS unencrypted); then the client's ClientHello starts the handshake.
        # Answers held for the end of this chunk (_serve) are written now, before it.
        self.send(v3.serialize(v3.start_tls_response(req, RC.EOK)))
        self.outbox.write_held()
        self.insecure = False
        self.handshaking = True
        self._wire.startTLS(self.tls.context())

    def _before_tls(self, payload: bytes) -> None:
        """A request on a TLS bookie's connection before START_TLS: START_TLS and
        AUTH are served, v3 requests and v2 ADD/READ answered EUA, other v2
        requests close the connection (as Java's bookie treats a connection
        that has not authenticated: BookKeeper's proto/AuthHandler.java)."""
        classified = self.detector.classify(payload)
        if classified[0] == "v3":
            msg = classified[1]
            if msg.header.operation in (_OP.START_TLS, _OP.AUTH):
                self._v3(msg)
                return
            self.metrics.protocol_errors.inc()
            self.send(v3.serialize(v3.error_response(msg, RC.EUA, echo_header=True)))
            return
        req = v2.decode_request(payload)
        self.metrics.protocol_errors.inc()
        if isinstance(req, v2.AddRequest):
            self.send(v2.add_response_for(req, RC.EUA))
        elif isinstance(req, v2.ReadRequest):
            self.send(v2.ReadResponse(req.version, RC.EUA, req.ledger_id, req.entry_id).encode())
        elif isinstance(req, v2.AuthRequest):
            self._v2(payload)
        else:  # as Java before authentication: v2 operations other than ADD/READ close the connection
            self._drop("v2 request before START_TLS")

    _V3_HANDLERS = {
        _OP.ADD_ENTRY: _v3_add,
        _OP.READ_ENTRY: _v3_read,
        _OP.READ_LAC: _v3_read_lac,
        _OP.WRITE_LAC: _v3_write_lac,
        _OP.FORCE_LEDGER: _v3_force,
        _OP.GET_BOOKIE_INFO: _v3_bookie_info,
        _OP.GET_LIST_OF_ENTRIES_OF_LEDGER: _v3_list_entries,
        _OP.AUTH: _v3_auth,
        _OP.START_TLS: _v3_start_tls,
    }


#: The peer log of a protocol built without the factory (tests).
_PEER_LOG = PeerLog()


class BookieServerFactory(protocol.Factory):
    def __init__(
        self,
        bookie,
        metrics,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        *,
        max_adds_in_progress: int = 0,
        max_reads_in_progress: int = 0,
        tls=None,
        twins: Twins,
    ):
        self.bookie = bookie
        #: :class:`~bkctl.wire.tls.ReloadingServerTLS` when TLS is configured (clients must START_TLS)
        self.tls = tls
        self.metrics = metrics
        self.max_frame_size = max_frame_size
        #: What new connections use (:mod:`bkctl.wire.fastpath`: its builder's, the service's)
        self.twins = twins
        #: maxAddsInProgressLimit / maxReadsInProgressLimit (None: 0, no limit).
        self.adds = InProgressLimit(max_adds_in_progress) if max_adds_in_progress > 0 else None
        self.reads = InProgressLimit(max_reads_in_progress) if max_reads_in_progress > 0 else None
        #: The journal groups as connections see them: add answers held per connection.
        self.groups = AnswerGroups()
        #: Where refused TLS handshakes are reported (WARN, rate-limited per peer host).
        self.handshake_failures = HandshakeFailureLog()
        #: Where connections closed for what they sent (WARN) or not read for a while (INFO) are
        #: reported, rate-limited per peer host.
        self.peer_log = PeerLog()

    def complete_group(self, callbacks: list, error, call_all) -> None:
        """Run a journal group's callbacks and send their answers (:meth:`AnswerGroups.complete`)."""
        self.groups.complete(callbacks, error, call_all)

    def send_answers(self) -> None:
        """Send the add answers written since the last call (:meth:`AnswerGroups.send`)."""
        self.groups.send()

    def buildProtocol(self, addr):
        p = BookieProtocol(
            self.bookie,
            self.metrics,
            self.max_frame_size,
            twins=self.twins,
            adds=self.adds,
            reads=self.reads,
            groups=self.groups,
        )
        p.factory = self
        if self.tls is not None:
            p.tls, p.insecure = self.tls, True
        return p
