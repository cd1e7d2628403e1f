"""A connection's requests and the table that matches answers to them.

:class:`Request` is one request: its frame, how its answer is decoded, how
it completes (a Deferred, or a plain ``on_done`` call for the ledger layer's
hot paths), its deadline.  :class:`RequestTable` holds the requests on the
wire of one connection and finds the one an answer belongs to:

* v3 by ``(txnId, operation)``; by txnId alone in the common case, a second
  dict for the rare request whose txnId is taken by another operation (a
  caller-supplied ``txn_ids`` that repeats itself);
* v3 plain ADDs and READs also by their header field, which their EOK answer
  starts with byte for byte (the fast path matches such answers unparsed:
  :meth:`RequestTable.take_answers`, in C when built);
* v2 by ``(ledgerId, entryId, opcode)``, first in first out for duplicate
  keys; BATCH_READ by its requestId.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from twisted.internet import defer
from twisted.python.failure import Failure

from bkctl.wire.codecs import v2
from bkctl.wire.codecs.protocol import OpCode

if TYPE_CHECKING:
    from bkctl.wire.codecs.codec_twins import CodecTwins

    from .add_twins import ConnectionAdds

__all__ = ["Request", "RequestTable", "QUEUED", "SENT", "DONE", "DECLINED"]

log = logging.getLogger(__name__)

# Request states.
QUEUED, SENT, DONE = 0, 1, 2
#: what :meth:`RequestTable.fast_result` says of an answer that is not the EOK one it looks for
DECLINED = object()

_OPC_ADD = int(OpCode.ADD_ENTRY)
_OPC_READ = int(OpCode.READ_ENTRY)
_OPC_BATCH_READ = int(OpCode.BATCH_READ_ENTRY)


class Request:
    """One request: its wire bytes, how to match and complete it, its deadline.

    A request is completed either through its Deferred (the public API) or,
    for the ledger layer's adds and reads, through a plain ``on_done(ctx,
    slot, bookie_id, result)`` call, which saves a Deferred and its callback
    chain per request.  ``decode`` (:mod:`bkctl.wire.codecs.answers`) turns
    its answer into ``(rc, value)``.  ``what`` (the description used in error
    messages) is built only when an error needs it.
    """

    __slots__ = (
        "_what",
        "ids",
        "key",
        "op",
        "frame",
        "decode",
        "deferred",
        "on_done",
        "ctx",
        "slot",
        "deadline",
        "timeouts",
        "state",
        "is_batch",
        "conn",
        "ok",
        "fast",
        "verb",
    )

    #: whose ``cancel(request)`` the Deferred's cancellation calls (:class:`~.outbox.Outbox`)
    conn: Any
    #: an ADD's or a plain READ's ``(ledger_id, entry_id)``, set by its builder (:mod:`.entry_requests`)
    ids: tuple[int, int]
    #: a callback request's context and copy, handed back to ``on_done`` (:meth:`callback_to`)
    ctx: Any
    slot: int

    def __init__(
        self,
        what: str | None,
        key: Any,
        frame_bytes: bytes,
        decode: Callable[[Any], tuple[int, Any]],
        is_batch: bool = False,
    ):
        self._what = what
        self.key = key
        self.frame = frame_bytes
        self.decode = decode
        self.op: int | None = None
        self.deferred: defer.Deferred[Any] | None = None
        self.on_done: Any = None
        #: when it times out (clock seconds), and the deadline queue it is in (:mod:`.deadlines`)
        self.deadline = 0.0
        self.timeouts: Any = None
        self.state = QUEUED
        self.is_batch = is_batch
        self.ok: bytes | None = None  # v3 plain ADD: the payload of its EOK answer
        #: v3 plain ADD or READ: its header field, which its EOK answer starts with
        self.fast: bytes | None = None
        self.verb = "ADD"

    @property
    def what(self) -> str:
        what = self._what
        if what is None:  # an ADD or a plain READ, described lazily
            ledger_id, entry_id = self.ids
            what = self._what = f"{self.verb} ledger {ledger_id} entry {entry_id}"
        return what

    def callback_to(self, on_done: Callable[[Any, int, str, Any], Any], ctx: Any, slot: int) -> None:
        """Complete through ``on_done(ctx, slot, bookie_id, result)``, not a Deferred."""
        self.on_done = on_done
        self.ctx = ctx
        self.slot = slot

    def __call__(self, _deferred: defer.Deferred[Any]) -> None:
        """The canceller of the request's Deferred."""
        self.conn.cancel(self)

    def complete(self, bookie_id: str, result: Any) -> None:
        """Fire the Deferred with ``result`` (an exception or a Failure: its errback), or call
        ``on_done`` with it (a Failure's exception) -- whichever the request has, once."""
        d = self.deferred
        if d is not None:
            self.deferred = None
            if isinstance(result, BaseException):
                d.errback(Failure(result))
            elif isinstance(result, Failure):
                d.errback(result)
            else:
                d.callback(result)
            return
        on_done = self.on_done
        if on_done is not None:
            self.call_back(on_done, bookie_id, result.value if isinstance(result, Failure) else result)

    def call_back(self, on_done: Callable[[Any, int, str, Any], Any], bookie_id: str, result: Any) -> None:
        """Complete a callback request: ``on_done(ctx, slot, bookie_id, result)`` (``on_done``
        read off it by the caller); an exception it raises is logged, as one in a Deferred's callback."""
        self.on_done = None
        ctx, self.ctx = self.ctx, None
        try:
            on_done(ctx, self.slot, bookie_id, result)
        except Exception as exc:  # noqa: BLE001 - like an error in a Deferred callback: log it
            callback_raised(bookie_id, self, exc)


def callback_raised(bookie_id: str, req: Any, exc: BaseException) -> None:
    """A callback request's ``on_done`` raised ``exc``: logged, as an error in a Deferred's
    callback is (:meth:`Request.call_back`, and its C twin's, ``_addpath.AddCopy``)."""
    log.error("bookie %s: completion of %s raised", bookie_id, req.what, exc_info=exc)


class RequestTable:
    """The requests of one connection that are on the wire, by what their answers carry."""

    __slots__ = (
        "use_v3",
        "sent",
        "v3_pending",
        "v3_other",
        "v3_fast",
        "v2_pending",
        "generation",
        "_read_body",
        "_take",
        "_take_adds",
        "_register",
    )

    def __init__(self, use_v3: bool, codec: CodecTwins, adds: ConnectionAdds):
        """``codec``: the twins of the client's codecs in use (``Twins.codec`` of
        :mod:`bkctl.wire.fastpath`); ``adds``: those of a writer's ADD copies (``Twins.adds``)."""
        self.use_v3 = use_v3
        #: moves each time the table is emptied (:meth:`clear`: the connection went away)
        self.generation = 0
        #: the loops over a writer's ADD copies (:meth:`register_all`, :meth:`take_answers`)
        self._take_adds = adds.take_adds
        self._register = adds.register_all
        #: takes an EOK READ answer apart
        self._read_body = codec.plain_read_body
        #: :meth:`take_answers`' loop
        self._take = codec.take_answers
        #: insertion-ordered set of the requests on the wire
        self.sent: dict[Request, None] = {}
        self.v3_pending: dict[int, Request] = {}
        self.v3_other: dict[tuple[int, int | None], Request] = {}
        #: v3 plain ADDs and READs by their header field
        self.v3_fast: dict[bytes, Request] = {}
        self.v2_pending: dict[tuple[int, ...], deque[Request]] = {}

    def __len__(self) -> int:
        return len(self.sent)

    def register(self, req: Request) -> None:
        """Enter a request that goes on the wire."""
        req.state = SENT
        self.sent[req] = None
        if self.use_v3:
            other = self.v3_pending.setdefault(req.key, req)
            if other is not req:
                self._txn_taken(req, other)
            if req.fast is not None:
                self.v3_fast[req.fast] = req
        else:
            waiting = self.v2_pending.get(req.key)
            if waiting is None:
                self.v2_pending[req.key] = deque((req,))
            else:
                waiting.append(req)

    def register_all(self, reqs: list[Request]) -> None:
        """:meth:`register` for v3 requests issued together: a writer's ADD copies by the
        twin in use (``Twins.adds.register_all``: the C one takes the C copies, and stops at
        any other request; the rest are registered here)."""
        start = self._register(reqs, 0, self.sent, self.v3_pending, self.v3_fast)
        sent = self.sent
        pending = self.v3_pending
        fast = self.v3_fast
        for req in reqs[start:] if start else reqs:
            req.state = SENT
            sent[req] = None
            other = pending.setdefault(req.key, req)
            if other is not req:
                self._txn_taken(req, other)
            head = req.fast
            if head is not None:
                fast[head] = req

    def fast_result(self, req: Request, payload: bytes) -> Any:
        """What ``payload`` says as the EOK answer of ``req``, a plain ADD or READ
        found by its header field (None for an ADD, the entry for a READ);
        :data:`DECLINED` when it is not that, or ``req`` is no longer on the wire."""
        if req.state != SENT or self.v3_pending.get(req.key) is not req:
            return DECLINED
        head = req.fast
        if head is None:
            return DECLINED
        ok = req.ok
        if ok is not None:  # an ADD: the rest of its EOK answer, byte for byte
            if len(payload) != len(head) + len(ok) or not payload.endswith(ok):
                return DECLINED
            return None
        result = self._read_body(payload, len(head))
        return DECLINED if result is None else result

    def pop_fast(self, payload: bytes) -> Request | None:
        """The plain ADD or READ on the wire whose header field the v3 answer ``payload``
        starts with, taken out of the header field's table (not yet of the others)."""
        return self.v3_fast.pop(payload[: 2 + payload[1]], None)

    def claim(self, req: Request, payload: bytes) -> Any:
        """:meth:`fast_result`; unless :data:`DECLINED`, ``req`` is then taken out of the
        txnId table too (its answer is handed out)."""
        result = self.fast_result(req, payload)
        if result is not DECLINED:
            del self.v3_pending[req.key]
        return result

    def take_answers(
        self,
        payloads: list[bytes],
        start: int,
        answered: Callable[[Request, Any], bool],
        pump: Callable[[], None] | None = None,
        queue: Any = (),
        bookie_id: str = "",
    ) -> int:
        """The v3 answers ``payloads[start:]`` that are the EOK answers of plain ADDs and
        READs on the wire (:meth:`fast_result`), for as long as they are: each one's request
        taken out of the tables and handed to ``answered(req, result)``, which returns
        whether to go on (False: a callback closed the connection).  The index of the first
        answer not taken, left as it was for the general path (or the one after an
        ``answered`` that said stop).  One call per chunk of answers; its loop is the twin in
        use (``Twins.codec.take_answers`` of :mod:`bkctl.wire.fastpath`, handed this table's dicts).

        With ``pump`` given, the answers of a writer's ADD copies are first taken by
        ``Twins.adds.take_adds`` (the C twin takes those of its C copies), which does the end
        of ``answered`` for them itself (``pump()`` while ``queue`` holds requests, then the
        copy's callback, reporting ``bookie_id``); their owner then retires their deadlines
        once for the chunk."""
        if pump is not None:
            generation = self.generation
            start = self._take_adds(
                payloads, start, self.v3_fast, self.v3_pending, self.sent, self, queue, pump, bookie_id
            )
            if start >= len(payloads) or self.generation != generation:
                return start
        return self._take(payloads, start, self.v3_fast, self.v3_pending, answered)

    def _txn_taken(self, req: Request, other: Request) -> None:
        """``req``'s txnId is ``other``'s already (a caller-supplied txn_ids repeats itself)."""
        if other.op == req.op:
            self.v3_pending[req.key] = req  # same (txnId, operation): the newest one wins
        else:
            self.v3_other[(req.key, req.op)] = req

    def match(self, msg: Any) -> Request | None:
        """Take out (and mark done) the request a decoded answer belongs to."""
        if self.use_v3:
            header = msg.header
            txn = header.txnId
            op = header.operation
            pending = self.v3_pending
            req = pending.get(txn)
            if req is not None and req.op == op:
                del pending[txn]
            elif self.v3_other:
                req = self.v3_other.pop((txn, op), None)
            else:
                return None
            if req is not None and req.fast is not None and self.v3_fast.get(req.fast) is req:
                del self.v3_fast[req.fast]
        else:
            key: tuple[int, ...]
            if isinstance(msg, v2.AddResponse):
                key = (msg.ledger_id, msg.entry_id, _OPC_ADD)
            elif isinstance(msg, v2.ReadResponse):
                key = (msg.ledger_id, msg.entry_id, _OPC_READ)
            elif isinstance(msg, v2.BatchReadResponse):
                key = (_OPC_BATCH_READ, msg.request_id)
            else:
                return None  # AUTH: never asked for
            req = self.take_v2(key)
        if req is not None:
            self.sent.pop(req, None)
            req.state = DONE
        return req

    def take_v2(self, key: tuple[int, ...]) -> Request | None:
        """The oldest v2 request waiting for an answer with ``key``, taken out
        of the key's queue (not of :attr:`sent`)."""
        waiting = self.v2_pending.get(key)
        if not waiting:
            return None
        req = waiting.popleft()
        if not waiting:
            del self.v2_pending[key]
        return req

    def forget(self, req: Request) -> None:
        """Take a request on the wire out of every table."""
        self.sent.pop(req, None)
        if self.use_v3:
            if self.v3_pending.get(req.key) is req:
                del self.v3_pending[req.key]
            elif self.v3_other.get((req.key, req.op)) is req:
                del self.v3_other[(req.key, req.op)]
            if req.fast is not None and self.v3_fast.get(req.fast) is req:
                del self.v3_fast[req.fast]
        else:
            waiting = self.v2_pending.get(req.key)
            if waiting is not None:
                try:
                    waiting.remove(req)
                except ValueError:
                    pass
                if not waiting:
                    del self.v2_pending[req.key]

    def clear(self) -> list[Request]:
        """Empty every table; the requests that were on the wire, oldest first."""
        reqs = list(self.sent)
        self.generation += 1
        self.sent.clear()
        self.v3_pending.clear()
        self.v3_other.clear()
        self.v3_fast.clear()
        self.v2_pending.clear()
        return reqs
