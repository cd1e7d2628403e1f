"""The bookie's answers to plain reads, its hot read path: one v3 READ_ENTRY
answered on its own (:meth:`PlainReads.read`), and a run of pipelined plain reads
of one ledger, v3 or v2, served with one store call (:meth:`PlainReads.v3_run`,
:meth:`PlainReads.v2_run`), and a plain v2 BATCH_READ_ENTRY (:meth:`PlainReads.v2_batch`).  A plain read is one the fast-path parsers take apart
(``plain.read_request``, ``v2.plain_read_request``): no fencing, no long poll.
Every answer is the one :class:`~bkctl.bookied.server.BookieProtocol`'s general
path gives, and so are the metrics.
"""

from __future__ import annotations

import time

from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.plain import PlainTwins
from bkctl.wire.codecs.protocol import RC

from .metrics import RequestObserver
from .outbox import STREAMED_ANSWERS, Outbox

#: At most this many pipelined plain reads are served with one store call.
RUN_MAX = 1024

_now = time.perf_counter


class ReadReply:
    """Answers one plain v3 READ_ENTRY once the bookie calls it with ``(rc, body)``,
    as :meth:`BookieProtocol._v3_read` answers."""

    __slots__ = ("reads", "started", "payload", "ledger_id", "entry_id", "header_len")

    def __init__(
        self, reads: PlainReads, started: float, payload: bytes, ledger_id: int, entry_id: int, header_len: int
    ):
        self.reads = reads
        self.started = started
        self.payload = payload
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        self.header_len = header_len

    def __call__(self, rc: int, body: bytes | None) -> None:
        reads = self.reads
        reads.observer.observe("read", self.started, rc)
        reads.answer_v3(self.payload, self.header_len, self.ledger_id, self.entry_id, rc, body)


class PlainReads:
    """One connection's plain reads: ``bookie`` serves them (the connection's: counted
    under the reads' in-progress limit if it has one), ``plain`` takes them apart and
    builds their answers, ``outbox`` sends them, ``observer`` counts them."""

    __slots__ = ("bookie", "plain", "outbox", "observer")

    def __init__(self, bookie, plain: PlainTwins, outbox: Outbox, observer: RequestObserver) -> None:
        self.bookie = bookie
        self.plain = plain
        self.outbox = outbox
        self.observer = observer

    def read(self, ledger_id: int, entry_id: int, header_len: int, payload: bytes) -> None:
        """:meth:`BookieProtocol._v3_read` of a request ``plain.read_request`` took apart."""
        self.bookie.read_entry(ledger_id, entry_id, ReadReply(self, _now(), payload, ledger_id, entry_id, header_len))

    def answer_v3(
        self, payload: bytes, header_len: int, ledger_id: int, entry_id: int, rc: int, body: bytes | None
    ) -> None:
        """Send the answer to a plain v3 READ_ENTRY: an EOK one built by hand
        (``plain.read_answer``), anything else through the builders."""
        if rc == RC.EOK and body is not None:
            self.outbox.send_framed(
                self.plain.read_answer(payload[:header_len], ledger_id, entry_id, body, self.bookie.lac(ledger_id))
            )
        else:
            self.outbox.send(v3.serialize(v3.read_response(v3.parse_request(payload), rc)))

    def _observe(self, started: float, outcomes: dict) -> None:
        for rc, count in outcomes.items():
            self.observer.observe("read", started, rc, count)

    def v3_run(self, payloads: list, i: int, first: tuple) -> int:
        """Serve the run of plain v3 READ_ENTRYs of one ledger starting at
        ``payloads[i]`` (taken apart: ``first``; ``plain.read_run`` takes the run apart)
        with one :meth:`Bookie.read_bodies`, answering each as :class:`ReadReply` would, in
        order, the EOK ones :data:`STREAMED_ANSWERS` bytes at a time
        (``plain.read_answers``); stops answering once the connection is closed or
        paused (the rest is served again later). Returns the index of the first
        payload not answered."""
        ledger_id = first[0]
        plain = self.plain
        run = plain.read_run(payloads, i, i + RUN_MAX, ledger_id)
        started = _now()
        bookie, outbox = self.bookie, self.outbox
        bodies = bookie.read_bodies(ledger_id, run.entry_ids)
        outcomes: dict[int, int] = {}
        lac = None
        answered = 0
        n = len(bodies)
        read_answers = plain.read_answers
        try:
            while answered < n:
                body = bodies[answered]
                if isinstance(body, int):  # a failed read: its rc
                    outcomes[body] = outcomes.get(body, 0) + 1
                    k = answered
                    answered += 1
                    # (no header length: only an EOK answer repeats the header's bytes)
                    self.answer_v3(payloads[i + k], 0, ledger_id, run.entry_ids[k], body, None)
                else:
                    if lac is None:  # nothing changes the LAC while the run is answered
                        lac = bookie.lac(ledger_id)
                    data, nxt = read_answers(payloads, run, bodies, answered, lac, STREAMED_ANSWERS)
                    if nxt == answered:
                        raise TypeError(f"an entry read must be bytes, not {type(body).__name__}")
                    outcomes[RC.EOK] = outcomes.get(RC.EOK, 0) + nxt - answered
                    answered = nxt
                    outbox.send_framed(data)
                if outbox.closed or outbox.paused:
                    break
        finally:
            self._observe(started, outcomes)
        return i + answered

    def v2_batch(self, ledger_id: int, start: int, request_id: int, max_count: int, max_size: int) -> None:
        """A version-2 BATCH_READ_ENTRY that ``v2.plain_batch_read_request`` took apart,
        answered as the general path answers it (``v2.BatchReadResponse`` of version 2)."""
        started = _now()
        rc, entries = self.bookie.batch_entries(ledger_id, start, max_count, max_size)
        self.observer.observe("batch_read", started, rc)
        self.outbox.send_framed(v2.batch_read_answer(rc, ledger_id, start, request_id, entries))

    def v2_run(self, payloads: list, i: int, first: tuple) -> int:
        """:meth:`v3_run` for version-2 READ_ENTRYs (``plain.v2_read_run``: a Pulsar broker
        reads over v2), each answered as the general path's ``v2.ReadResponse`` of version 2
        (the EOK ones by ``plain.v2_read_answers``)."""
        ledger_id = first[0]
        plain = self.plain
        run = plain.v2_read_run(payloads, i, i + RUN_MAX, ledger_id)
        started = _now()
        bodies = self.bookie.read_bodies(ledger_id, run.entry_ids)
        outcomes: dict[int, int] = {}
        answered = 0
        n = len(bodies)
        outbox, read_answers = self.outbox, plain.v2_read_answers
        try:
            while answered < n:
                body = bodies[answered]
                if isinstance(body, int):  # a failed read: its rc
                    outcomes[body] = outcomes.get(body, 0) + 1
                    entry_id = run.entry_ids[answered]
                    answered += 1
                    outbox.send_framed(v2.FRAMED_ANSWER.pack(24, v2.READ_ANSWER_HEADER, body, ledger_id, entry_id))
                else:
                    data, nxt = read_answers(run, bodies, answered, STREAMED_ANSWERS)
                    if nxt == answered:
                        raise TypeError(f"an entry read must be bytes, not {type(body).__name__}")
                    outcomes[RC.EOK] = outcomes.get(RC.EOK, 0) + nxt - answered
                    answered = nxt
                    outbox.send_framed(data)
                if outbox.closed or outbox.paused:
                    break
        finally:
            self._observe(started, outcomes)
        return i + answered
