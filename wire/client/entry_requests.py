"""Building and issuing a connection's ADD and READ requests (the hot ones),
general and fast (:mod:`bkctl.wire.fastpath`).

Mixed into :class:`~bkctl.wire.client.connection.BookieConnection`, whose
queue, request table, deadlines and writes they use.  The ledger layer's
calls (:class:`~bkctl.wire.client.channel.BookieChannel`) report through a
plain callback instead of a Deferred; the fast paths write frames encoded
by hand (a v3 READ, an ADD encoded once for its write set:
:class:`~bkctl.wire.codecs.add_frames.EncodedAdd`) and register requests
whose EOK answers are recognized without being parsed.
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from bkctl.wire.codecs import answers, v2, v3
from bkctl.wire.codecs.add_frames import EncodedAdd
from bkctl.wire.codecs.framing import frame, length_prefix
from bkctl.wire.codecs.protocol import MASTER_KEY_LENGTH, V2_CURRENT_VERSION, Flag, OpCode, OperationType

from .client_protocol import BookieClientProtocol
from .deadlines import READ, WRITE
from .requests import Request

__all__ = ["EntryRequests", "check_master_key"]

_IDS = struct.Struct(">qq")
_OP_ADD = int(OperationType.ADD_ENTRY)
_OP_READ = int(OperationType.READ_ENTRY)
_OPC_ADD = int(OpCode.ADD_ENTRY)
_OPC_READ = int(OpCode.READ_ENTRY)
_FLAG_RECOVERY_ADD = int(Flag.RECOVERY_ADD)
_FLAG_HIGH_PRIORITY = int(Flag.HIGH_PRIORITY)


def check_master_key(master_key) -> None:
    """ValueError unless ``master_key`` has the 20 bytes of a SHA-1."""
    if len(master_key) != MASTER_KEY_LENGTH:
        raise ValueError(f"master key must be {MASTER_KEY_LENGTH} bytes, not {len(master_key)}")


class EntryRequests:
    """The ADD and READ requests of a :class:`~bkctl.wire.client.connection.BookieConnection`."""

    def add_with_callback(self, ledger_id: int, entry_id: int, master_key: bytes, body: bytes,
                          recovery: bool, high_priority: bool,
                          on_done: Callable[[Any, int, str, BaseException | None], Any],
                          ctx: Any, slot: int) -> None:
        """:meth:`add` for the ledger layer (:class:`~bkctl.wire.client.channel.BookieChannel`),
        without a Deferred: the outcome
        is ``on_done(ctx, slot, bookie_id, error)`` with ``error`` None once
        the bookie acknowledged the entry, else the exception :meth:`add`'s
        Deferred would fail with. ``on_done`` may run before this returns
        (a refused request). Argument errors raise, as with :meth:`add`."""
        req = self._add_request(ledger_id, entry_id, master_key, body, recovery, high_priority, False)
        req.callback_to(on_done, ctx, slot)
        self._submit_request(req, WRITE, self.add_timeout, False)

    def add_encoded(self, add: EncodedAdd, on_done: Callable[[Any, int, str, BaseException | None], Any],
                    ctx: Any, slot: int) -> None:
        """:meth:`add_with_callback` of an entry encoded once for its whole
        write set (:class:`~bkctl.wire.codecs.add_frames.EncodedAdd`; the
        writer's fast path): on a connection with room on the wire and
        nothing queued, the shared bytes go out with this connection's v3
        header (or as they are, v2) and the answer is matched without being
        parsed; otherwise the request is built the general way."""
        proto = self._proto
        if (proto is None or self._queue or len(self._sent) >= self.max_outstanding or self._closed
                or not self.fastpaths):
            self.add_with_callback(add.ledger_id, add.entry_id, add.master_key, add.body, add.recovery,
                                   add.high_priority, on_done, ctx, slot)
            return
        if self.use_v3:
            part = add.v3_part
            txn = next(self._ids)
            heads = v3.add_header_fields(txn, add.high_priority) if part is not None else None
            if heads is None:  # encoded for v2, or a txnId upb has its own say about
                self._add_general(add, txn, on_done, ctx, slot)
                return
            head, answer_head = heads
            data = b"".join((length_prefix(len(head) + len(part)), head, part))
            req = Request(None, txn, b"", answers.v3_add)
            req.op = _OP_ADD
            req.fast = answer_head
            req.ok = add.v3_tail
        else:
            data = add.v2_frame
            if data is None:
                self._add_general(add, None, on_done, ctx, slot)
                return
            req = Request(None, (add.ledger_id, add.entry_id, _OPC_ADD), b"", answers.v2_add)
        req.ids = (add.ledger_id, add.entry_id)
        self._send_now(proto, req, data, on_done, ctx, slot, WRITE, self.add_timeout)

    def _add_general(self, add: EncodedAdd, txn: int | None, on_done, ctx: Any, slot: int) -> None:
        """:meth:`add_encoded` the general way (``txn``: the txnId already taken, v3)."""
        req = self._add_request(add.ledger_id, add.entry_id, add.master_key, add.body, add.recovery,
                                add.high_priority, False, txn)
        req.callback_to(on_done, ctx, slot)
        self._submit_request(req, WRITE, self.add_timeout, False)

    def _add_request(self, ledger_id: int, entry_id: int, master_key: bytes, body: bytes,
                     recovery: bool, high_priority: bool, deferred_sync: bool,
                     txn: int | None = None) -> "Request | None":
        """The request of an ADD (None: DEFERRED_SYNC over v2, not supported);
        v3: with ``txn``, else the next txnId."""
        if len(master_key) != MASTER_KEY_LENGTH:
            check_master_key(master_key)
        if self.use_v3:
            if txn is None:
                txn = next(self._ids)
            if not self.fastpaths:
                payload = v3.serialize(v3.add_request(txn, ledger_id, entry_id, master_key, body, recovery=recovery,
                                                      high_priority=high_priority, deferred_sync=deferred_sync))
                ok = None
            elif recovery or high_priority or deferred_sync:
                payload = self._encoder.add(txn, ledger_id, entry_id, master_key, body, recovery=recovery,
                                            high_priority=high_priority, deferred_sync=deferred_sync)
                ok = None
            else:
                payload, ok = self._encoder.add_and_reply(txn, ledger_id, entry_id, master_key, body)
            req = Request(None, txn, frame(payload), answers.v3_add)
            req.op = _OP_ADD
            if ok is not None:
                head = payload[:2 + payload[1]]
                req.fast = head
                req.ok = ok[len(head):]
        else:
            if deferred_sync:
                return None
            if type(body) is not bytes:
                body = bytes(body)
            if len(body) < _IDS.size or _IDS.unpack_from(body) != (ledger_id, entry_id):
                raise ValueError("a v2 ADD body must start with the same ledger and entry ids")
            flags = (_FLAG_RECOVERY_ADD if recovery else 0) | (_FLAG_HIGH_PRIORITY if high_priority else 0)
            req = Request(None, (ledger_id, entry_id, _OPC_ADD),
                          answers.v2_add_frame(flags, bytes(master_key), body), answers.v2_add)
        req.ids = (ledger_id, entry_id)
        return req

    def read_with_callback(self, ledger_id: int, entry_id: int, on_done: Callable[[Any, int, str, Any], Any],
                           ctx: Any, slot: int) -> None:
        """A plain :meth:`read` for the ledger layer
        (:class:`~bkctl.wire.client.channel.BookieChannel`), without a Deferred:
        the outcome is ``on_done(ctx, slot, bookie_id, result)``, ``result``
        being the stored entry's bytes, or the exception :meth:`read`'s
        Deferred would fail with. ``on_done`` may run before this returns (a
        refused request)."""
        proto = self._proto
        if (proto is not None and self.use_v3 and self.fastpaths and not self._queue
                and len(self._sent) < self.max_outstanding and not self._closed):
            self._read_now(proto, ledger_id, entry_id, on_done, ctx, slot)
            return
        req = self._read_request(ledger_id, entry_id, None, False)
        req.callback_to(on_done, ctx, slot)
        self._submit_request(req, READ, self.read_timeout, False)

    def _read_now(self, proto: BookieClientProtocol, ledger_id: int, entry_id: int,
                  on_done: Callable[[Any, int, str, Any], Any], ctx: Any, slot: int) -> None:
        """:meth:`read_with_callback` of a v3 connection with room on the wire
        and nothing queued (a fast path): the frame encoded by hand, and what
        :meth:`_submit_request` does for a request that goes out at once."""
        txn = next(self._ids)
        data, head = self._encoder.read_frame(txn, ledger_id, entry_id)
        req = Request(None, txn, b"", answers.v3_read)
        req.op = _OP_READ
        req.fast = head
        req.ids = (ledger_id, entry_id)
        req.verb = "READ"
        self._send_now(proto, req, data, on_done, ctx, slot, READ, self.read_timeout)

    def _send_now(self, proto: BookieClientProtocol, req: Request, data: bytes, on_done, ctx: Any, slot: int,
                  kind: str, timeout: float) -> None:
        """A callback request with room on the wire and nothing queued: what
        :meth:`_submit_request` does for a request that goes out at once."""
        req.callback_to(on_done, ctx, slot)
        self._deadlines.start(req, kind, timeout, self._clock.seconds())
        self.requests.register(req)
        self._write_now(proto, data)

    def _read_request(self, ledger_id: int, entry_id: int, fence_master_key: bytes | None,
                      high_priority: bool) -> Request:
        plain = fence_master_key is None and not high_priority
        if self.use_v3:
            txn = next(self._ids)
            if plain and self.fastpaths:
                payload = self._encoder.read(txn, ledger_id, entry_id)
                req = Request(None, txn, frame(payload), answers.v3_read)
                req.fast = payload[:2 + payload[1]]
            else:
                payload = v3.serialize(v3.read_request(
                    txn, ledger_id, entry_id, fence_master_key=fence_master_key,
                    high_priority=high_priority))
                req = Request(None, txn, frame(payload), answers.v3_read)
            req.op = _OP_READ
        elif plain and self.fastpaths:
            req = Request(None, (ledger_id, entry_id, _OPC_READ),
                          answers.v2_plain_read_frame(ledger_id, entry_id), answers.v2_read)
        else:
            flags = (Flag.DO_FENCING if fence_master_key is not None else 0) | (
                Flag.HIGH_PRIORITY if high_priority else 0)
            payload = v2.ReadRequest(V2_CURRENT_VERSION, int(flags), ledger_id, entry_id,
                                     None if fence_master_key is None else bytes(fence_master_key)).encode()
            req = Request(None, (ledger_id, entry_id, _OPC_READ), frame(payload), answers.v2_read)
        req.ids = (ledger_id, entry_id)
        req.verb = "READ"
        if fence_master_key is not None:
            req._what = f"READ ledger {ledger_id} entry {entry_id} (fencing)"
        return req
