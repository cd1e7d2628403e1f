"""The bookie's TCP protocol: decode -> dispatch to :class:`bookied.bookie.Bookie` -> encode.

One :class:`BookieProtocol` per connection.  Each connection starts in v3
mode and drops to v2 for good on the first frame that is not a v3 Request
(wire.md section 6).  The bookie answers through callbacks; responses of
one connection are written in completion order, which keeps v2's FIFO rule
for equal (ledger, entry, op) keys because the journal completes in order.
"""
from __future__ import annotations

import logging
import time

from twisted.internet import protocol

from wire import v2, v3
from wire.detect import ProtocolDetector
from wire.errors import CodecError
from wire.framing import FrameDecoder, frame
from wire.protocol import (
    AUTH_DISABLED_PLUGIN,
    BOOKIE_INFO_FREE_DISK_SPACE,
    BOOKIE_INFO_TOTAL_DISK_CAPACITY,
    DEFAULT_MAX_FRAME_SIZE,
    LAST_ADD_CONFIRMED,
    Flag,
    OperationType,
    ProtocolVersion,
    RC,
)

log = logging.getLogger("bookied.server")

_OP = OperationType
_V3 = int(ProtocolVersion.VERSION_THREE)


class BookieProtocol(protocol.Protocol):
    def __init__(self, bookie, metrics, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE):
        self.bookie = bookie
        self.metrics = metrics
        self.decoder = FrameDecoder(max_frame_size)
        self.detector = ProtocolDetector()
        self.closed = False

    # -- transport events ------------------------------------------------------
    def connectionMade(self):
        if hasattr(self.transport, "setTcpNoDelay"):
            self.transport.setTcpNoDelay(True)  # small acks must not wait for Nagle (Java: serverTcpNoDelay)
        self.metrics.connections.inc()
        self.bookie.connection_opened(self)

    def connectionLost(self, reason=None):
        self.closed = True
        self.metrics.connections.dec()
        self.bookie.connection_closed(self)

    def dataReceived(self, data: bytes):
        try:
            payloads = self.decoder.feed(data)
        except CodecError as e:
            self._drop(f"bad framing: {e}")
            return
        for payload in payloads:
            if self.closed:
                return
            kind, msg = self.detector.classify(payload)
            try:
                if kind == "v3":
                    self._v3(msg)
                else:
                    self._v2(payload)
            except CodecError as e:
                self._drop(f"undecodable {kind} request: {e}")
                return
        if self.decoder.failed is not None and not self.closed:
            self._drop(f"bad framing: {self.decoder.failed}")

    def _drop(self, why: str) -> None:
        peer = self.transport.getPeer() if self.transport else None
        log.warning("closing connection from %s: %s", getattr(peer, "host", "?"), why)
        self.metrics.protocol_errors.inc()
        self.closed = True
        self.transport.abortConnection()

    def send(self, payload: bytes) -> None:
        if not self.closed:
            self.transport.write(frame(payload))

    # -- v2 --------------------------------------------------------------------
    def _v2(self, payload: bytes) -> None:
        req = v2.decode_request(payload)  # UnknownOpcode -> CodecError -> close, like Java
        bad_version = not v2.is_supported_version(req.version)
        if isinstance(req, v2.AddRequest):
            if bad_version:
                self.send(v2.add_response_for(req, RC.EBADVERSION))
                return
            started = time.perf_counter()

            def done(rc, req=req, started=started):
                self.metrics.observe("add", started, rc)
                self.send(v2.add_response_for(req, rc))

            self.bookie.add_entry(req.ledger_id, req.entry_id, req.master_key, req.body, done,
                                  recovery=bool(req.flags & Flag.RECOVERY_ADD),
                                  high_priority=bool(req.flags & Flag.HIGH_PRIORITY))
        elif isinstance(req, v2.ReadRequest):
            if bad_version:
                self.send(v2.ReadResponse(req.version, RC.EBADVERSION, req.ledger_id, req.entry_id).encode())
                return
            started = time.perf_counter()

            def done(rc, body, req=req, started=started):
                self.metrics.observe("read", started, rc)
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
                self.metrics.observe("batch_read", started, rc)
                self.send(v2.BatchReadResponse(req.version, rc, req.ledger_id, req.start_entry_id,
                                               req.request_id, tuple(entries)).encode())

            self.bookie.batch_read(req.ledger_id, req.start_entry_id, req.max_count, req.max_size, done,
                                   fence_key=req.master_key if req.is_fencing else None,
                                   fencing=req.is_fencing)
        else:  # AUTH: an auth-less bookie answers every AUTH with AuthDisabledPlugin
            from wire.proto import bookkeeper_pb2 as pb

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
        if not req.HasField("addRequest"):
            self.send(v3.serialize(v3.error_response(req, RC.EBADREQ)))
            return
        add = req.addRequest
        started = time.perf_counter()

        def done(rc, req=req, started=started):
            self.metrics.observe("add", started, rc)
            self.send(v3.serialize(v3.add_response(req, rc)))

        self.bookie.add_entry(add.ledgerId, add.entryId, add.masterKey, add.body, done,
                              recovery=v3.is_recovery_add(req),
                              high_priority=high_priority,
                              deferred_sync=v3.is_deferred_sync(req))

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
                self.metrics.observe("read", started, rc)
                self.send(v3.serialize(v3.read_response(req, rc, body if rc == RC.EOK else None)))

            bookie.fence_and_read(ledger_id, entry_id, key, fenced)
            return

        if read.HasField("previousLAC"):
            piggyback = v3.is_piggyback_read(req)
            if entry_id != LAST_ADD_CONFIRMED:
                self.send(v3.serialize(v3.read_response(req, RC.EBADREQ)))
                return
            previous = read.previousLAC

            def polled(rc, max_lac, req=req, started=started, previous=previous):
                self.metrics.observe("long_poll", started, rc)
                if self.closed:
                    return
                body = entry = None
                if rc == RC.EOK and piggyback and max_lac > previous:
                    got = bookie.get_entry(req.readRequest.ledgerId, previous + 1)
                    if got is not None:
                        body, entry = got, previous + 1
                self.send(v3.serialize(v3.read_response(req, rc, body, max_lac=max_lac, entry_id=entry)))

            bookie.wait_lac(ledger_id, previous, read.timeOut if read.HasField("timeOut") else 0, polled)
            return

        if v3.is_piggyback_read(req):
            self.send(v3.serialize(v3.read_response(req, RC.EBADREQ)))
            return

        def done(rc, body, req=req, started=started):
            self.metrics.observe("read", started, rc)
            if rc == RC.EOK:
                self.send(v3.serialize(v3.read_response(req, rc, body, max_lac=bookie.lac(ledger_id))))
            else:
                self.send(v3.serialize(v3.read_response(req, rc)))

        bookie.read_entry(ledger_id, entry_id, done)

    def _v3_read_lac(self, req, high_priority: bool) -> None:
        started = time.perf_counter()
        rc, lac_body, last_entry = self.bookie.read_lac(req.readLacRequest.ledgerId)
        self.metrics.observe("read_lac", started, rc)
        self.send(v3.serialize(v3.read_lac_response(req, rc, lac_body, last_entry)))

    def _v3_write_lac(self, req, high_priority: bool) -> None:
        w = req.writeLacRequest
        started = time.perf_counter()

        def done(rc, req=req, started=started):
            self.metrics.observe("write_lac", started, rc)
            self.send(v3.serialize(v3.write_lac_response(req, rc)))

        self.bookie.write_lac(w.ledgerId, w.lac, w.masterKey, w.body, done)

    def _v3_force(self, req, high_priority: bool) -> None:
        started = time.perf_counter()

        def done(rc, req=req, started=started):
            self.metrics.observe("force_ledger", started, rc)
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
        # TLS is not configured on this bookie: Java answers EBADREQ.
        self.send(v3.serialize(v3.start_tls_response(req, RC.EBADREQ)))

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


class BookieServerFactory(protocol.Factory):
    def __init__(self, bookie, metrics, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE):
        self.bookie = bookie
        self.metrics = metrics
        self.max_frame_size = max_frame_size

    def buildProtocol(self, addr):
        p = BookieProtocol(self.bookie, self.metrics, self.max_frame_size)
        p.factory = self
        return p
