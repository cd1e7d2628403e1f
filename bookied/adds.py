"""A bookie connection's adds: whichever form a request took (a v3 ADD_ENTRY parsed
or taken apart by the fast path, a version-2 ADD parsed or taken apart), an add
reaches the bookie one way, :meth:`Adds.add`, and a run of adds of one ledger
:meth:`Adds.run` (which is :meth:`Adds.add` for a run of one).  Its answer is
written through the connection's :class:`~.outbox.Outbox`, held with the rest of its
journal group's.
"""

from __future__ import annotations

import time

from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.plain import PlainTwins, RunOfAdds
from bkctl.wire.codecs.protocol import (
    ADD_FLAG_RECOVERY_ADD,
    RC,
    WRITE_FLAG_DEFERRED_SYNC,
    Flag,
    OpCode,
)
from bkctl.wire.codecs.v3 import v3_status

from .metrics import RequestObserver
from .outbox import Outbox

__all__ = ["RUN_MAX", "Adds"]

#: Most adds served as one run (:meth:`Adds.run`).
RUN_MAX = 1024

_FLAG_RECOVERY_ADD = int(Flag.RECOVERY_ADD)
_FLAG_HIGH_PRIORITY = int(Flag.HIGH_PRIORITY)
_now = time.perf_counter


class Adds:
    """One connection's adds (see the module): ``bookie`` takes them (the
    connection's: counted under the adds' in-progress limit if it has one),
    ``plain`` takes requests apart and builds answers (its C twins or its Python
    ones), ``outbox`` sends the answers, ``observer`` counts them."""

    __slots__ = ("bookie", "plain", "outbox", "observer")

    def __init__(self, bookie, plain: PlainTwins, outbox: Outbox, observer: RequestObserver) -> None:
        self.bookie = bookie
        self.plain = plain
        self.outbox = outbox
        self.observer = observer

    def add(
        self,
        txn_id: int | None,
        ledger_id: int,
        entry_id: int,
        master_key: bytes,
        body: bytes,
        *,
        recovery: bool,
        high_priority: bool,
        deferred_sync: bool = False,
        v2_header: int = v2.ADD_ANSWER_HEADER,
    ) -> None:
        """The one way an add reaches the bookie: answered, once durable (or refused),
        as a v3 ADD_ENTRY of ``txn_id``, or (``txn_id`` None) as a version-2 ADD
        with ``v2_header`` (the request's version and ADD_ENTRY)."""
        self.bookie.add_entry(
            ledger_id,
            entry_id,
            master_key,
            body,
            _AddReply(self, _now(), txn_id, ledger_id, entry_id, v2_header, recovery),
            recovery=recovery,
            high_priority=high_priority,
            deferred_sync=deferred_sync,
        )

    # -- the request forms, each to add() ---------------------------------------------
    def v3_request(self, req, high_priority: bool) -> None:
        """A parsed v3 ADD_ENTRY request."""
        if not req.HasField("addRequest"):
            self.outbox.send(v3.serialize(v3.error_response(req, RC.EBADREQ)))
            return
        add = req.addRequest
        self.add(
            req.header.txnId,
            add.ledgerId,
            add.entryId,
            add.masterKey,
            add.body,
            recovery=add.HasField("flag") and add.flag == ADD_FLAG_RECOVERY_ADD,
            high_priority=high_priority,
            deferred_sync=bool(add.writeFlags & WRITE_FLAG_DEFERRED_SYNC),
        )

    def v3_plain(
        self,
        txn_id: int,
        ledger_id: int,
        entry_id: int,
        master_key: bytes,
        body: bytes,
        high_priority: bool,
        recovery: bool,
    ) -> None:
        """A v3 ADD_ENTRY ``plain.add_request`` took apart."""
        self.add(txn_id, ledger_id, entry_id, master_key, body, recovery=recovery, high_priority=high_priority)

    def v2_plain(self, flags: int, ledger_id: int, entry_id: int, master_key: bytes, body: bytes) -> None:
        """A version-2 ADD ``plain.v2_add_request`` took apart, answered as
        ``v2.add_response_for`` would."""
        self.add(
            None,
            ledger_id,
            entry_id,
            master_key,
            body,
            recovery=bool(flags & _FLAG_RECOVERY_ADD),
            high_priority=bool(flags & _FLAG_HIGH_PRIORITY),
        )

    def v2_request(self, req: v2.AddRequest) -> None:
        """A parsed version-2 ADD (any version: one the bookie does not speak is refused)."""
        if not v2.is_supported_version(req.version):
            self.outbox.send(v2.add_response_for(req, RC.EBADVERSION))
            return
        # answered by the same object as the fast path's, so at the same moment
        self.add(
            None,
            req.ledger_id,
            req.entry_id,
            req.master_key,
            req.body,
            recovery=bool(req.flags & Flag.RECOVERY_ADD),
            high_priority=bool(req.flags & Flag.HIGH_PRIORITY),
            v2_header=v2.pack_header(req.version, OpCode.ADD_ENTRY),
        )

    def run(self, payloads: list[bytes], i: int, first: tuple, is_v3: bool) -> int:
        """Serve the run of plain ADDs (v3 ADD_ENTRYs, or version-2 ADDs when not
        ``is_v3``) of one ledger, with one key and the same flags, starting at
        ``payloads[i]`` (taken apart: ``first``) with one :meth:`Bookie.add_entries`:
        one store lock, one journal item, one answer object for the run, where
        :meth:`add` spends each of them per add.  The run is taken apart in one call
        (``plain.add_run`` or ``plain.v2_add_run``, from ``payloads[i]`` on) and answered
        in one (``plain.add_answers`` or ``plain.v2_add_answers``).  Returns the index
        of the first payload not in the run."""
        end = min(len(payloads), i + RUN_MAX)
        run: RunOfAdds
        if is_v3:
            # what plain.add_request takes apart, by name
            _, ledger_id, _, key, _, high_priority, recovery = first
            run = self.plain.add_run(payloads, i, end, ledger_id, key, high_priority, recovery)
        else:
            # what plain.v2_add_request takes apart, by name
            flags, ledger_id, _, key, _ = first
            high_priority, recovery = bool(flags & _FLAG_HIGH_PRIORITY), bool(flags & _FLAG_RECOVERY_ADD)
            run = self.plain.v2_add_run(payloads, i, end, ledger_id, key, flags)
        j = run.end
        if j <= i + 1:  # a run of one (the twins take payloads[i] apart as ``first`` says)
            (self.v3_plain if is_v3 else self.v2_plain)(*first)
            return i + 1
        self.bookie.add_entries(
            ledger_id,
            key,
            run,
            _AddRunReply(self, _now(), run.txn_ids, ledger_id, run.entry_ids, recovery),
            recovery=recovery,
            high_priority=high_priority,
        )
        return j


class _AddReply:
    """Answers one ADD once the bookie calls it with the outcome (an RC).

    One small object per add in flight instead of a closure and its cells:
    thousands of adds can wait for the same fsync, and fewer live objects
    make the garbage collector's passes shorter. ``txn_id`` None: a v2 add,
    answered with ``v2_header`` (the request's version and ADD_ENTRY).
    """

    __slots__ = ("adds", "started", "txn_id", "ledger_id", "entry_id", "v2_header", "recovery")

    def __init__(
        self,
        adds: Adds,
        started: float,
        txn_id: int | None,
        ledger_id: int,
        entry_id: int,
        v2_header: int = v2.ADD_ANSWER_HEADER,
        recovery: bool = False,
    ):
        self.recovery = recovery
        self.adds = adds
        self.started = started
        self.txn_id = txn_id
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        self.v2_header = v2_header

    def __call__(self, rc: int) -> None:
        adds = self.adds
        adds.observer.observe("add", self.started, rc)
        if self.recovery:
            adds.observer.observe_recovery_add(self.started)
        outbox = adds.outbox
        if outbox.closed:
            return
        if self.txn_id is None:  # = send(v2.add_response_for(req, rc))
            answer = v2.FRAMED_ANSWER.pack(24, self.v2_header, rc, self.ledger_id, self.entry_id)
        else:  # = send(serialize(add_response(req, rc))) of an ADD_ENTRY request
            answer = adds.plain.add_answer(self.txn_id, v3_status(rc), self.ledger_id, self.entry_id)
        outbox.send_add_answers(answer)


class _AddRunReply:
    """The answers of a run of adds (:meth:`Adds.run`; ``txn_ids`` None for
    version-2 adds): ``reply(rc)`` answers all of them with ``rc`` at once, as each
    one's :class:`_AddReply` would, in order; :meth:`one` is the k-th add's own
    :class:`_AddReply`, :meth:`first` a reply for the first ``n`` only."""

    __slots__ = ("adds", "started", "txn_ids", "ledger_id", "entry_ids", "recovery")

    def __init__(
        self, adds: Adds, started: float, txn_ids: list | None, ledger_id: int, entry_ids: list, recovery: bool = False
    ):
        self.recovery = recovery
        self.adds = adds
        self.started = started
        self.txn_ids = txn_ids
        self.ledger_id = ledger_id
        self.entry_ids = entry_ids

    def one(self, k: int) -> _AddReply:
        txn_id = None if self.txn_ids is None else self.txn_ids[k]
        return _AddReply(self.adds, self.started, txn_id, self.ledger_id, self.entry_ids[k], recovery=self.recovery)

    def first(self, n: int) -> _AddRunReply:
        txn_ids = None if self.txn_ids is None else self.txn_ids[:n]
        return _AddRunReply(self.adds, self.started, txn_ids, self.ledger_id, self.entry_ids[:n], self.recovery)

    def __call__(self, rc: int) -> None:
        adds = self.adds
        adds.observer.observe("add", self.started, rc, len(self.entry_ids))
        if self.recovery:
            adds.observer.observe_recovery_add(self.started, len(self.entry_ids))
        outbox = adds.outbox
        if outbox.closed:
            return
        if self.txn_ids is None:  # = _AddReply's version-2 answers, joined
            data = adds.plain.v2_add_answers(rc, self.ledger_id, self.entry_ids)
        else:  # = _AddReply's v3 answers, joined
            data = adds.plain.add_answers(self.txn_ids, v3_status(rc), self.ledger_id, self.entry_ids)
        outbox.send_add_answers(data)
