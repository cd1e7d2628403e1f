"""The bookie's TCP protocol: decode -> dispatch to :class:`bkctl.bookied.bookie.Bookie` -> encode.

One :class:`BookieProtocol` per connection.  Each connection starts in v3
mode and drops to v2 for good on the first frame that is not a v3 Request
(wire.md section 6).  The bookie answers through callbacks; responses of
one connection are written in completion order, which keeps v2's FIFO rule
for equal (ledger, entry, op) keys because the journal completes in order.
"""
from __future__ import annotations

import logging
import struct
import time
from collections import deque

from twisted.internet import abstract, protocol
from twisted.internet.interfaces import IHandshakeListener
from zope.interface import implementer

from bkctl.wire import fastpath
from bkctl.wire.fastpath import Twins
from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.detect import ProtocolDetector
from bkctl.wire.errors import CodecError
from bkctl.wire.send_now import send_now
from bkctl.wire.codecs.framing import FrameDecoder, frame
from bkctl.wire.codecs.protocol import (
    ADD_FLAG_RECOVERY_ADD,
    AUTH_DISABLED_PLUGIN,
    BOOKIE_INFO_FREE_DISK_SPACE,
    BOOKIE_INFO_TOTAL_DISK_CAPACITY,
    DEFAULT_MAX_FRAME_SIZE,
    LAST_ADD_CONFIRMED,
    WRITE_FLAG_DEFERRED_SYNC,
    Flag,
    OpCode,
    OperationType,
    ProtocolVersion,
    RC,
    rc_name,
)
from bkctl.wire.codecs.v3 import v3_status

from .in_progress import CountedBookie, InProgressLimit
from .peer_log import HandshakeFailureLog, PeerLog, peer_name
from .plain_reads import STREAMED_ANSWERS, ReadReply, serve_v2_run, serve_v3_run

log = logging.getLogger("bookied.server")


_OP = OperationType
_V3 = int(ProtocolVersion.VERSION_THREE)

_I32 = struct.Struct(">i")
_FLAG_RECOVERY_ADD = int(Flag.RECOVERY_ADD)
_FLAG_HIGH_PRIORITY = int(Flag.HIGH_PRIORITY)
_now = time.perf_counter
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
#: Most adds served as one run (:meth:`BookieProtocol._plain_adds`).
_ADD_RUN_MAX = 1024
#: Long polls one connection may have waiting; past them it is not read until one is
#: answered (back-pressure: a flood of polls holds at most this many per connection).
LONG_POLLS_MAX = 1000


@implementer(IHandshakeListener)
class BookieProtocol(protocol.Protocol):
    def __init__(self, bookie, metrics, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, twins: Twins | None = None):
        twins = fastpath.selected() if twins is None else twins
        #: Whether the fast paths are used -- v2 ADD, plain v3 ADD, plain v3 READ and
        #: its batched runs (``twins``, the factory's record: :mod:`bkctl.wire.fastpath`)
        self.fastpaths = twins.enabled
        #: the plain requests' parsers and answers (:class:`~bkctl.wire.codecs.plain.PlainTwins`)
        self.plain = twins.plain
        self.bookie = bookie
        self.metrics = metrics
        self.decoder = FrameDecoder(max_frame_size)
        self.detector = ProtocolDetector()
        self.closed = False
        #: True while the client is not taking its answers (see :meth:`pauseProducing`).
        self.paused = False
        self._backlog: deque = deque()  # requests read but not served while paused or throttled
        #: True while a request waits for an in-progress limit (see :class:`InProgressLimit`).
        self.throttled = False
        #: The waiting long polls' cancels (see :data:`LONG_POLLS_MAX`), forgotten when the connection goes.
        self._polls: set = set()
        #: True while LONG_POLLS_MAX long polls wait: the connection is not read.
        self.polls_full = False
        #: The factory's :class:`InProgressLimit` for adds and for reads (None: no limit).
        self.adds: InProgressLimit | None = None
        self.reads: InProgressLimit | None = None
        self._gate: InProgressLimit | None = None  # taken for the request being dispatched
        self.add_responses = v3.AddResponseEncoder()
        #: while :meth:`_serve` answers a chunk of requests: the answers to write at its end
        self._out: list[bytes] | None = None
        self._out_bytes = 0
        #: add answers of the journal group being completed, written together at its end
        #: (:meth:`BookieServerFactory.complete_group`)
        self.held_answers: list[bytes] = []
        #: (op, rc) -> (request counter, latency histogram) of ``metrics``, once seen
        self._observers: dict = {}
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

    # -- transport events ------------------------------------------------------
    def connectionMade(self):
        if hasattr(self.transport, "setTcpNoDelay"):
            self.transport.setTcpNoDelay(True)  # small acks must not wait for Nagle (Java: serverTcpNoDelay)
        self._sized_reads = hasattr(self.transport, "bufferSize")
        if self._sized_reads:
            self.transport.bufferSize = READ_SIZE
        self.metrics.connections.inc()
        self.bookie.connection_opened(self)
        # Answers a client does not read pile up in the transport; past its
        # bufferSize (32 to 256 KiB) it pauses us, and we stop reading requests until they have
        # drained: TCP back-pressure, as Java's bookie turns autoRead off on an
        # unwritable channel. Memory stays bounded by one answer over the buffer.
        self.transport.registerProducer(self, True)

    def handshakeCompleted(self) -> None:
        """The TLS handshake after START_TLS is done (Twisted's IHandshakeListener)."""
        self.handshaking = False

    def connectionLost(self, reason=None):
        if self.handshaking:
            failures = getattr(getattr(self, "factory", None), "handshake_failures", None)
            if failures is not None:
                failures.refused(self.transport.getPeer(), reason)
        self.closed = True
        self._cancel_unread_report()
        self._backlog.clear()
        self.held_answers.clear()
        factory = getattr(self, "factory", None)
        if factory is not None:  # answered at once (an error) and gone before a journal group sent answers
            factory.answered.discard(self)
        polls, self._polls = self._polls, set()
        for cancel in polls:  # nobody is left to answer: the bookie forgets them now, not at their timeout
            cancel()
        self.metrics.connections.dec()
        self.bookie.connection_closed(self)

    def close(self) -> None:
        """Close once the answers written so far are sent (shutdown)."""
        if self.transport.producer is self:
            self.transport.unregisterProducer()  # a paused producer would keep the close waiting
        self.transport.loseConnection()

    # -- IPushProducer: the transport's write buffer is full / has drained ----------
    def _peer_log(self) -> PeerLog:
        return getattr(getattr(self, "factory", None), "peer_log", None) or _PEER_LOG

    def _holding_back(self, kind: str, why: str) -> None:
        """Say (INFO, rate-limited per peer host and ``kind``) that this connection is not read for a while."""
        peer = self.transport.getPeer() if self.transport else None
        self._peer_log().warn(kind, peer, f"not reading the connection from {peer_name(peer)} for now: {why}",
                              logging.INFO)

    def pauseProducing(self):
        if not self.paused:
            self.paused = True
            self.transport.pauseProducing()  # stop reading from the socket
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
        self.paused = False
        self._cancel_unread_report()
        self._drain()

    def _drain(self) -> None:
        """Serve what was held back, then read again unless paused or throttled anew."""
        if self._backlog and not self.throttled and not self.polls_full:
            backlog = list(self._backlog)
            self._backlog.clear()
            self._serve(backlog)  # may pause or throttle again
        if not self.paused and not self.throttled and not self.polls_full and not self.closed:
            self.transport.resumeProducing()

    # -- in-progress limits (maxAddsInProgressLimit, maxReadsInProgressLimit) ---------
    def _limit_for(self, kind: str, msg) -> InProgressLimit | None:
        if kind == "v3":
            op = msg.header.operation
            return self.adds if op == _OP.ADD_ENTRY else self.reads if op == _OP.READ_ENTRY else None
        if len(msg) < 4:
            return None
        op = v2.unpack_header(_I32.unpack_from(msg)[0])[1]
        if op == OpCode.ADD_ENTRY:
            return self.adds
        return self.reads if op in (OpCode.READ_ENTRY, OpCode.BATCH_READ_ENTRY) else None

    def _admit(self, limit: InProgressLimit | None) -> bool:
        """Take a place under ``limit`` for the next request, or stop reading
        this connection until one is free (Java's bookie turns autoRead off and
        blocks on its semaphore)."""
        if limit is None or limit.try_start():
            self._gate = limit
            return True
        self.throttled = True
        self.transport.pauseProducing()
        limit.waiting.append(self)
        return False

    def unthrottle(self) -> None:
        """A place is free: serve the held requests (called by the limit)."""
        self.throttled = False
        self._drain()

    @property
    def gate(self) -> InProgressLimit | None:
        """The limit whose place the request being dispatched took (None: no limit)."""
        return self._gate

    def take_gate(self) -> InProgressLimit | None:
        """:attr:`gate`, now the caller's to give back (``finish()``) once the request is answered."""
        gate, self._gate = self._gate, None
        return gate

    def _settle(self) -> None:
        """After a dispatch: a place the request did not use (answered without
        the bookie: a bad version, a missing field) is given back."""
        gate, self._gate = self._gate, None
        if gate is not None:
            gate.finish()

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
        self.transport.bufferSize = min(READ_SIZE_MAX, max(READ_SIZE, got // (requests or 1) * READ_RECORDS))

    def _serve(self, payloads: list) -> None:
        """Answer requests in order; stop and keep the rest once paused or throttled.
        The answers :meth:`send` writes meanwhile go out in one write."""
        if self._out is not None:
            self._serve_each(payloads)
            return
        out = self._out = []
        self._out_bytes = 0
        try:
            self._serve_each(payloads)
        finally:
            self._out = None
            if out and not self.closed:
                send_now(self.transport, out[0] if len(out) == 1 else b"".join(out), self.fastpaths)

    def _serve_each(self, payloads: list) -> None:
        detector = self.detector
        limited = self.adds is not None or self.reads is not None
        plain = self.plain
        plain_add_request, plain_read_request = plain.add_request, plain.read_request
        plain_v2_add_request = plain.v2_add_request
        i = -1
        count = len(payloads)
        while i + 1 < count:
            i += 1
            payload = payloads[i]
            if self.closed:
                return
            if self.paused or self.throttled or self.polls_full:
                self._backlog.extend(payloads[i:])
                return
            if self.insecure:
                try:
                    self._before_tls(payload)
                except CodecError as e:
                    self._drop(f"undecodable request: {e}")
                    return
                continue
            if detector.is_v3 and self.fastpaths:
                taken = plain_add_request(payload)
                if taken is not None:
                    if not limited and i + 1 < count:
                        i = self._plain_adds(payloads, i, taken, True) - 1
                        continue
                    serve, limit = self._v3_plain_add, self.adds
                else:
                    taken = plain_read_request(payload)
                    if taken is not None and not limited and i + 1 < count:
                        i = serve_v3_run(self, payloads, i, taken) - 1
                        continue
                    serve, limit = self._v3_plain_read, self.reads
                if taken is not None:
                    if limited:
                        if not self._admit(limit):
                            self._backlog.extend(payloads[i:])
                            return
                        serve(*taken)
                        self._settle()
                    else:
                        serve(*taken)
                    continue
            elif not detector.is_v3 and self.fastpaths and not limited and i + 1 < count:
                taken = plain_v2_add_request(payload)
                if taken is not None:
                    i = self._plain_adds(payloads, i, taken, False) - 1
                    continue
                taken = v2.plain_read_request(payload)
                if taken is not None:
                    i = serve_v2_run(self, payloads, i, taken) - 1
                    continue
            kind, msg = detector.classify(payload)
            if limited and not self._admit(self._limit_for(kind, msg if kind == "v3" else payload)):
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
                    self._settle()

    def _drop(self, why: str) -> None:
        peer = self.transport.getPeer() if self.transport else None
        self._peer_log().warn("drop", peer, f"closing connection from {peer_name(peer)}: {why}")
        self.metrics.protocol_errors.inc()
        self.closed = True
        self.transport.abortConnection()

    def send(self, payload: bytes) -> None:
        self.send_framed(frame(payload))

    def send_framed(self, data: bytes) -> None:
        """:meth:`send` of an answer already framed."""
        if not self.closed:
            out = self._out
            if out is None:
                self.transport.write(data)
            else:  # answering a chunk of requests: written together, at its end (_serve) or
                out.append(data)  # every STREAMED_ANSWERS bytes, sent at once
                self._out_bytes += len(data)
                if self._out_bytes >= STREAMED_ANSWERS:
                    self._write_held_answers()  # a client that does not read pauses us
                    _send_written(self)

    def _write_held_answers(self) -> None:
        """Write the answers held for the end of the chunk being served (:meth:`_serve`) now."""
        self.transport.writeSequence(self._out)
        self._out.clear()
        self._out_bytes = 0

    def observe(self, op: str, started: float, rc: int, n: int = 1) -> None:
        """``metrics.observe(op, started, rc, n)``, without its per-call name
        lookups once the (op, rc) pair has been seen: the counter and the
        histogram observe() updated are then updated directly."""
        seen = self._observers.get((op, rc))
        if seen is not None:
            seen[0].value += n
            seen[1].observe(_now() - started, n)
            return
        metrics = self.metrics
        metrics.observe(op, started, rc, n)
        name = rc_name(rc)
        counter = getattr(metrics, "requests", {}).get((op, name))
        hist = getattr(metrics, "latency", {}).get(op)
        if counter is not None and hist is not None:
            self._observers[(op, rc)] = (counter, hist)

    def observe_recovery_add(self, started: float, n: int = 1) -> None:
        """A recovery add's latency, also in its own histogram (it is an ``add`` too):
        see :attr:`~.metrics.Metrics.recovery_add_latency`."""
        hist = getattr(self.metrics, "recovery_add_latency", None)
        if hist is not None:
            hist.observe(_now() - started, n)

    # -- v2 --------------------------------------------------------------------
    def _v2(self, payload: bytes) -> None:
        if self.fastpaths:
            add = self.plain.v2_add_request(payload)
            if add is not None:  # the common case: a version-2 ADD
                self._v2_add(*add)
                return
        req = v2.decode_request(payload)  # UnknownOpcode -> CodecError -> close, like Java
        bad_version = not v2.is_supported_version(req.version)
        if isinstance(req, v2.AddRequest):
            if bad_version:
                self.send(v2.add_response_for(req, RC.EBADVERSION))
                return
            # answered by the same object as the fast path's, so at the same moment
            recovery = bool(req.flags & Flag.RECOVERY_ADD)
            reply = _AddReply(self, _now(), None, req.ledger_id, req.entry_id,
                              v2.pack_header(req.version, OpCode.ADD_ENTRY), recovery)
            self.bookie.add_entry(req.ledger_id, req.entry_id, req.master_key, req.body, reply,
                                  recovery=recovery,
                                  high_priority=bool(req.flags & Flag.HIGH_PRIORITY))
        elif isinstance(req, v2.ReadRequest):
            if bad_version:
                self.send(v2.ReadResponse(req.version, RC.EBADVERSION, req.ledger_id, req.entry_id).encode())
                return
            started = time.perf_counter()

            def done(rc, body, req=req, started=started):
                self.observe("read", started, rc)
                self.send(v2.ReadResponse(req.version, rc, req.ledger_id, req.entry_id,
                                          body if rc == RC.EOK else b"").encode())

            if req.is_fencing:
                self.bookie.fence_and_read(req.ledger_id, req.entry_id, req.master_key, done)
            else:
                self.bookie.read_entry(req.ledger_id, req.entry_id, done)
        elif isinstance(req, v2.BatchReadRequest):
            if bad_version:
                self.send(v2.BatchReadResponse(req.version, RC.EBADVERSION, req.ledger_id,
                                               req.start_entry_id, req.request_id).encode())
                return
            started = time.perf_counter()

            def done(rc, entries, req=req, started=started):
                self.observe("batch_read", started, rc)
                self.send(v2.BatchReadResponse(req.version, rc, req.ledger_id, req.start_entry_id,
                                               req.request_id, tuple(entries)).encode())

            self.bookie.batch_read(req.ledger_id, req.start_entry_id, req.max_count, req.max_size, done,
                                   fence_key=req.master_key if req.is_fencing else None,
                                   fencing=req.is_fencing)
        else:  # AUTH: an auth-less bookie answers every AUTH with AuthDisabledPlugin
            from bkctl.wire.proto import bookkeeper_pb2 as pb

            reply = pb.AuthMessage(authPluginName=AUTH_DISABLED_PLUGIN, payload=b"")
            self.send(v2.AuthResponse(req.version, reply.SerializeToString()).encode())

    def _v2_add(self, flags: int, ledger_id: int, entry_id: int, master_key: bytes, body: bytes) -> None:
        """A version-2 ADD taken apart by ``plain.v2_add_request``, answered as
        ``v2.add_response_for`` would, without the intermediate tuples."""
        recovery = bool(flags & _FLAG_RECOVERY_ADD)
        self.bookie.add_entry(ledger_id, entry_id, master_key, body,
                              _AddReply(self, _now(), None, ledger_id, entry_id, recovery=recovery),
                              recovery=recovery,
                              high_priority=bool(flags & _FLAG_HIGH_PRIORITY))

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
        if not req.HasField("addRequest"):
            self.send(v3.serialize(v3.error_response(req, RC.EBADREQ)))
            return
        add = req.addRequest
        started = _now()
        ledger_id = add.ledgerId
        entry_id = add.entryId
        recovery = add.HasField("flag") and add.flag == ADD_FLAG_RECOVERY_ADD
        self.bookie.add_entry(ledger_id, entry_id, add.masterKey, add.body,
                              _AddReply(self, started, req.header.txnId, ledger_id, entry_id, recovery=recovery),
                              recovery=recovery,
                              high_priority=high_priority,
                              deferred_sync=bool(add.writeFlags & WRITE_FLAG_DEFERRED_SYNC))

    def _v3_plain_add(self, txn_id: int, ledger_id: int, entry_id: int, master_key: bytes, body: bytes,
                      high_priority: bool, recovery: bool) -> None:
        """:meth:`_v3_add` of a request :func:`plain_add_request` took apart."""
        self.bookie.add_entry(ledger_id, entry_id, master_key, body,
                              _AddReply(self, _now(), txn_id, ledger_id, entry_id, recovery=recovery),
                              recovery=recovery, high_priority=high_priority)

    def _plain_adds(self, payloads: list, i: int, first: tuple, v3: bool) -> int:
        """Serve the run of plain ADDs (v3 ADD_ENTRYs, or version-2 ADDs when not
        ``v3``) of one ledger, with one key and the same flags, starting at
        ``payloads[i]`` (taken apart: ``first``) with one :meth:`Bookie.add_entries`:
        one store lock, one journal item, one answer object for the run, where
        :meth:`_v3_plain_add` or :meth:`_v2_add` spends each of them per add.
        Returns the index of the first payload not in the run."""
        if v3:
            txn_id, ledger_id, entry_id, key, body, high_priority, recovery = first
            parse, flags, txn_ids = self.plain.add_request, (high_priority, recovery), [txn_id]
        else:
            flags, ledger_id, entry_id, key, body = first
            parse, txn_ids = self.plain.v2_add_request, None
        entry_ids, bodies = [entry_id], [body]
        end = min(len(payloads), i + _ADD_RUN_MAX)
        j = i + 1
        while j < end:
            got = parse(payloads[j])
            if got is None or got[1] != ledger_id or got[3] != key or (got[5:] if v3 else got[0]) != flags:
                break
            if v3:
                txn_ids.append(got[0])
            entry_ids.append(got[2])
            bodies.append(got[4])
            j += 1
        if j == i + 1:
            (self._v3_plain_add if v3 else self._v2_add)(*first)
        else:
            if not v3:
                high_priority, recovery = bool(flags & _FLAG_HIGH_PRIORITY), bool(flags & _FLAG_RECOVERY_ADD)
            self.bookie.add_entries(ledger_id, key, entry_ids, bodies,
                                    _AddRunReply(self, _now(), txn_ids, ledger_id, entry_ids, recovery),
                                    recovery=recovery, high_priority=high_priority)
        return j

    def _v3_plain_read(self, ledger_id: int, entry_id: int, header_len: int, payload: bytes) -> None:
        """:meth:`_v3_read` of a request :func:`plain_read_request` took apart."""
        self.bookie.read_entry(ledger_id, entry_id, ReadReply(self, _now(), payload, ledger_id, entry_id,
                                                               header_len))

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
            waiting = []

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
                    self.transport.pauseProducing()
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
        self.send(v3.serialize(v3.get_bookie_info_response(
            req, RC.EOK,
            total=total if requested & BOOKIE_INFO_TOTAL_DISK_CAPACITY else None,
            free=free if requested & BOOKIE_INFO_FREE_DISK_SPACE else None)))

    def _v3_list_entries(self, req, high_priority: bool) -> None:
        rc, availability = self.bookie.entry_availability(req.getListOfEntriesOfLedgerRequest.ledgerId)
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
        if self._out:
            self._write_held_answers()
        self.insecure = False
        self.handshaking = True
        self.transport.startTLS(self.tls.context())

    def _before_tls(self, payload: bytes) -> None:
        """A request on a TLS bookie's connection before START_TLS: START_TLS and
        AUTH are served, v3 requests and v2 ADD/READ answered EUA, other v2
        requests close the connection (as Java's bookie treats a connection
        that has not authenticated, wire.md section 3)."""
        kind, msg = self.detector.classify(payload)
        if kind == "v3":
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


class _AddReply:
    """Answers one ADD once the bookie calls it with the outcome (an RC).

    One small object per add in flight instead of a closure and its cells:
    thousands of adds can wait for the same fsync, and fewer live objects
    make the garbage collector's passes shorter. ``txn_id`` None: a v2 add,
    answered with ``v2_header`` (the request's version and ADD_ENTRY).
    """

    __slots__ = ("proto", "started", "txn_id", "ledger_id", "entry_id", "v2_header", "recovery")

    def __init__(self, proto: BookieProtocol, started: float, txn_id: int | None,
                 ledger_id: int, entry_id: int, v2_header: int = v2.ADD_ANSWER_HEADER, recovery: bool = False):
        self.recovery = recovery
        self.proto = proto
        self.started = started
        self.txn_id = txn_id
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        self.v2_header = v2_header

    def __call__(self, rc: int) -> None:
        proto = self.proto
        proto.observe("add", self.started, rc)
        if self.recovery:
            proto.observe_recovery_add(self.started)
        if proto.closed:
            return
        if self.txn_id is None:  # = send(v2.add_response_for(req, rc))
            answer = v2.FRAMED_ANSWER.pack(24, self.v2_header, rc, self.ledger_id, self.entry_id)
        elif proto.fastpaths:  # = send(serialize(add_response(req, rc))) of an ADD_ENTRY request
            answer = proto.plain.add_answer(self.txn_id, v3_status(rc), self.ledger_id, self.entry_id)
        else:
            answer = frame(proto.add_responses.encode(self.txn_id, rc, self.ledger_id, self.entry_id))
        _write_add_answers(proto, answer)


def _send_written(proto: BookieProtocol) -> None:
    """Hand what ``proto`` wrote to the kernel now: a transport only sends when the
    reactor next polls it writable.  A transport that is closing is left to the
    reactor (its doWrite() result must reach the reactor to finish the close); a
    failed send stays queued, and the reactor's next doWrite sees it too."""
    t = proto.transport
    if not proto.closed and isinstance(t, abstract.FileDescriptor) and t.connected and not t.disconnecting:
        t.doWrite()


def _write_add_answers(proto: BookieProtocol, data: bytes) -> None:
    """Write a connection's add answer(s): during a journal group's completion they
    are held, one write per connection at its end (BookieServerFactory.complete_group)."""
    factory = proto.factory
    if factory.grouping:
        held = proto.held_answers
        if not held:
            factory.answered.add(proto)
        held.append(data)
    else:
        factory.answered.add(proto)
        proto.transport.write(data)


class _AddRunReply:
    """The answers of a run of adds (:meth:`BookieProtocol._plain_adds`; ``txn_ids``
    None for version-2 adds): ``reply(rc)`` answers all of them with ``rc`` at once,
    as each one's :class:`_AddReply` would, in order; :meth:`one` is the k-th add's
    own :class:`_AddReply`, :meth:`first` a reply for the first ``n`` only."""

    __slots__ = ("proto", "started", "txn_ids", "ledger_id", "entry_ids", "recovery")

    def __init__(self, proto: BookieProtocol, started: float, txn_ids: list | None, ledger_id: int,
                 entry_ids: list, recovery: bool = False):
        self.recovery = recovery
        self.proto = proto
        self.started = started
        self.txn_ids = txn_ids
        self.ledger_id = ledger_id
        self.entry_ids = entry_ids

    def one(self, k: int) -> _AddReply:
        txn_id = None if self.txn_ids is None else self.txn_ids[k]
        return _AddReply(self.proto, self.started, txn_id, self.ledger_id, self.entry_ids[k],
                         recovery=self.recovery)

    def first(self, n: int) -> "_AddRunReply":
        txn_ids = None if self.txn_ids is None else self.txn_ids[:n]
        return _AddRunReply(self.proto, self.started, txn_ids, self.ledger_id, self.entry_ids[:n], self.recovery)

    def __call__(self, rc: int) -> None:
        proto = self.proto
        proto.observe("add", self.started, rc, len(self.entry_ids))
        if self.recovery:
            proto.observe_recovery_add(self.started, len(self.entry_ids))
        if proto.closed:
            return
        ledger_id = self.ledger_id
        if self.txn_ids is None:  # = _AddReply's version-2 answers
            pack, header = v2.FRAMED_ANSWER.pack, v2.ADD_ANSWER_HEADER  # = frame(v2.add_response_for(req, rc))
            data = b"".join([pack(24, header, rc, ledger_id, entry_id) for entry_id in self.entry_ids])
        else:
            status, answer = v3_status(rc), proto.plain.add_answer
            data = b"".join([answer(txn_id, status, ledger_id, entry_id)
                             for txn_id, entry_id in zip(self.txn_ids, self.entry_ids)])
        _write_add_answers(proto, data)


#: The peer log of a protocol built without the factory (tests).
_PEER_LOG = PeerLog()


class BookieServerFactory(protocol.Factory):
    def __init__(self, bookie, metrics, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, *,
                 fastpaths: bool | None = None, max_adds_in_progress: int = 0,
                 max_reads_in_progress: int = 0, tls=None, twins: Twins | None = None):
        self.bookie = bookie
        #: :class:`~bkctl.wire.tls.ReloadingServerTLS` when TLS is configured (clients must START_TLS)
        self.tls = tls
        self.metrics = metrics
        self.max_frame_size = max_frame_size
        #: What new connections use (:mod:`bkctl.wire.fastpath`; ``fastpaths`` given: the
        #: record for fast paths on or off; default: the process's)
        if twins is None:
            twins = fastpath.selected() if fastpaths is None else fastpath.build(bool(fastpaths))
        self.twins = twins
        #: maxAddsInProgressLimit / maxReadsInProgressLimit (None: 0, no limit).
        self.adds = InProgressLimit(max_adds_in_progress) if max_adds_in_progress > 0 else None
        self.reads = InProgressLimit(max_reads_in_progress) if max_reads_in_progress > 0 else None
        #: Connections that were written add answers since the last :meth:`send_answers`.
        self.answered: set = set()
        #: True while :meth:`complete_group` runs a group's callbacks: add answers are held per connection.
        self.grouping = False
        #: Where refused TLS handshakes are reported (WARN, rate-limited per peer host).
        self.handshake_failures = HandshakeFailureLog()
        #: Where connections closed for what they sent (WARN) or not read for a while (INFO) are
        #: reported, rate-limited per peer host.
        self.peer_log = PeerLog()

    def complete_group(self, callbacks: list, error, call_all) -> None:
        """Run a journal group's callbacks (``call_all(callbacks, error)``) and send
        their answers: each connection's add answers are joined and written once
        (a transport's write costs more than the append of a small answer, and a
        group answers hundreds of adds of a few connections), then sent now."""
        was = self.grouping
        self.grouping = True
        try:
            call_all(callbacks, error)
        finally:
            self.grouping = was
        if not was:
            self.send_answers()

    def send_answers(self) -> None:
        """Write the add answers held by :meth:`complete_group`, and hand every add
        answer written since the last call to the kernel now.

        The bookie calls this once a journal group's callbacks have run.  A
        transport only sends when the reactor next polls it writable -- one
        more loop iteration (an epoll round and a dispatch) per group, which
        at low load is a good part of an add's latency. A transport that is
        closing is left to the reactor: its doWrite() result must reach the
        reactor to finish the close. (A drained buffer may resume the
        protocol as a producer from here: it then serves what it held back.)
        """
        answered, self.answered = self.answered, set()
        for proto in answered:
            held = proto.held_answers
            if held:
                data = held[0] if len(held) == 1 else b"".join(held)
                held.clear()
                if proto.closed:
                    continue
                if send_now(proto.transport, data, proto.fastpaths):
                    continue
            _send_written(proto)

    def buildProtocol(self, addr):
        p = BookieProtocol(self.bookie, self.metrics, self.max_frame_size, self.twins)
        p.factory = self
        if self.tls is not None:
            p.tls, p.insecure = self.tls, True
        if self.adds is not None or self.reads is not None:
            p.adds, p.reads = self.adds, self.reads
            p.bookie = CountedBookie(self.bookie, p)
        return p
