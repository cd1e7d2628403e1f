"""The bookie's hot-path twins: its parsers of plain requests and its ADD and READ
answers, in C (``_plain.c``) when that is built and fast paths are on, else in Python
(:class:`PlainTwins`, one of which the twin selector records: ``Twins.plain`` of
:mod:`bkctl.wire.fastpath`).  Its fields:

* :data:`add_request` -- :func:`.v3_fast.plain_add_request`;
* :data:`read_request` -- :func:`.v3_fast.plain_read_request`;
* :data:`v2_add_request` -- :func:`.v2.plain_add_request`;
* :data:`add_answer` -- ``(txnId, v3 status, ledgerId, entryId)`` -> the framed
  answer to an ADD_ENTRY request (:class:`.v3_fast.AddResponseEncoder`, framed);
* :data:`read_answer` -- ``(header field, ledgerId, entryId, body, maxLAC)``
  -> the framed EOK answer to a plain READ_ENTRY request (:func:`.v3_fast.read_answer`, framed);
* :data:`read_run` -- a run of plain v3 READ_ENTRYs of one ledger taken apart at once
  (:func:`py_read_run`: a :class:`ReadRun`);
* :data:`read_answers` -- the EOK answers to a :data:`read_run`'s reads, given the
  bodies read, one bytes object per up to ``limit`` bytes (:func:`py_read_answers`);
* :data:`v2_read_run` -- the same of version-2 READ_ENTRYs (:func:`py_v2_read_run`);
* :data:`v2_read_answers` -- their EOK answers (:func:`py_v2_read_answers`);
* :data:`add_run` -- a run of plain v3 ADD_ENTRYs of one ledger, one key and the same
  flags, taken apart at once (:func:`py_add_run`: an :class:`AddRun`);
* :data:`v2_add_run` -- the same of version-2 ADDs (:func:`py_v2_add_run`);
* :data:`add_answers` -- the framed answers to a run of ADD_ENTRYs, as one bytes
  (:func:`py_add_answers`: :data:`add_answer`'s of each, joined);
* :data:`v2_add_answers` -- the framed answers to a run of version-2 ADDs, as one
  bytes (:func:`py_v2_add_answers`).

The Python twins are the reference; the C ones give the same values for every
input (tests/unit/test_plain_c.py, the fuzz target ``plain_c_twins``).  With
fast paths off the selector records :data:`PYTHON`, which the bookie then serves its
plain requests and their runs with (what neither takes apart goes through the
general parsers).
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from bkctl.wire.codecs import v2, v3_fast
from bkctl.wire.codecs.framing import frame

_local = threading.local()

#: the interface's fields (see the module documentation), the NamedTuple's and the C slot's: a
#: request's parser (the parsed fields, or None for a request it does not take apart)
ParseRequest = Callable[[bytes], Any]
AddAnswer = Callable[[int, int, int, int], bytes]
ReadAnswer = Callable[[bytes, int, int, bytes, int], bytes]


class RunOfReads(Protocol):
    """What :data:`read_run` gives, the Python twin's :class:`ReadRun` or the C twin's
    struct sequence of the same fields (see :class:`ReadRun`)."""

    @property
    def first(self) -> int: ...

    @property
    def end(self) -> int: ...

    @property
    def ledger_id(self) -> int: ...

    @property
    def entry_ids(self) -> list[int]: ...

    @property
    def header_lens(self) -> list[int] | None: ...


ReadRunParser = Callable[[list[bytes], int, int, int], RunOfReads]
#: a read's outcome as the bookie gives it for a run (``Bookie.read_bodies``): the entry's
#: bytes, or (an int) the rc it failed with
ReadOutcome = bytes | int
ReadAnswers = Callable[[list[bytes], RunOfReads, list[ReadOutcome], int, int, int], tuple[bytes, int]]
V2ReadAnswers = Callable[[RunOfReads, list[ReadOutcome], int, int], tuple[bytes, int]]


class RunOfAdds(Protocol):
    """What :data:`add_run` and :data:`v2_add_run` give, the Python twins' :class:`AddRun`
    or the C twins' struct sequence of the same fields (see :class:`AddRun`)."""

    @property
    def end(self) -> int: ...

    @property
    def txn_ids(self) -> list[int] | None: ...

    @property
    def entry_ids(self) -> list[int]: ...

    @property
    def bodies(self) -> list[bytes]: ...

    @property
    def lac(self) -> int: ...

    @property
    def size(self) -> int: ...


AddRunParser = Callable[[list[bytes], int, int, int, bytes, bool, bool], RunOfAdds]
V2AddRunParser = Callable[[list[bytes], int, int, int, bytes, int], RunOfAdds]
AddAnswers = Callable[[list[int], int, int, list[int]], bytes]
V2AddAnswers = Callable[[int, int, list[int]], bytes]


class AddRun(NamedTuple):
    """A run of plain ADDs taken apart (:func:`py_add_run`, :func:`py_v2_add_run`):
    ``end`` the index of the first payload not in the run; the txnIds (None for
    version-2 ADDs, which have none), entryIds and bodies of those in it, in order;
    what the bookie needs of the bodies as a whole, read while they were cut out (a
    Python pass over them cost a third of an add's CPU): ``lac`` the largest LAC they
    carry (:func:`lac_of_entry`; -1 for none) and ``size`` their bytes."""

    end: int
    txn_ids: list[int] | None
    entry_ids: list[int]
    bodies: list[bytes]
    lac: int
    size: int


#: a packaged entry's LAC: the big-endian int64 at offset 16 (after ledgerId and entryId)
_LAC_IN_ENTRY = struct.Struct(">q")


def lac_of_entry(body: bytes) -> int:
    """The LAC a packaged entry's body carries (-1 for a body too short to carry one)."""
    return _LAC_IN_ENTRY.unpack_from(body, 16)[0] if len(body) >= 24 else -1


def _run_of(end: int, txn_ids: list[int] | None, entry_ids: list[int], bodies: list[bytes]) -> AddRun:
    lac = max(map(lac_of_entry, bodies), default=-1)
    return AddRun(end, txn_ids, entry_ids, bodies, lac, sum(map(len, bodies)))


def py_add_run(
    payloads: list[bytes], i: int, end: int, ledger_id: int, key: bytes, high_priority: bool, recovery: bool
) -> AddRun:
    """The run of ``payloads[i]``, ``payloads[i + 1]``, ... (before ``end`` and the
    list's end) that :data:`add_request` takes apart as ADD_ENTRYs of ``ledger_id``
    with ``key`` and these flags: it ends at the first that it does not take apart or
    that differs in one of them."""
    txn_ids: list[int] = []
    entry_ids: list[int] = []
    bodies: list[bytes] = []
    parse = v3_fast.plain_add_request
    j, end = max(i, 0), min(end, len(payloads))
    while j < end:
        got = parse(payloads[j])
        if got is None:
            break
        g_txn, g_ledger, g_entry, g_key, g_body, g_high, g_recovery = got
        if g_ledger != ledger_id or g_key != key or g_high != high_priority or g_recovery != recovery:
            break
        txn_ids.append(g_txn)
        entry_ids.append(g_entry)
        bodies.append(g_body)
        j += 1
    return _run_of(j, txn_ids, entry_ids, bodies)


def py_v2_add_run(payloads: list[bytes], i: int, end: int, ledger_id: int, key: bytes, flags: int) -> AddRun:
    """:func:`py_add_run` of version-2 ADDs (:data:`v2_add_request`) of ``ledger_id``
    with ``key`` and ``flags``; ``txn_ids`` None."""
    entry_ids: list[int] = []
    bodies: list[bytes] = []
    parse = v2.plain_add_request
    j, end = max(i, 0), min(end, len(payloads))
    while j < end:
        got = parse(payloads[j])
        if got is None:
            break
        g_flags, g_ledger, g_entry, g_key, g_body = got
        if g_ledger != ledger_id or g_key != key or g_flags != flags:
            break
        entry_ids.append(g_entry)
        bodies.append(g_body)
        j += 1
    return _run_of(j, None, entry_ids, bodies)


class ReadRun(NamedTuple):
    """A run of plain v3 READ_ENTRYs of one ledger taken apart (:func:`py_read_run`):
    ``payloads[first:end]`` read ``ledger_id``'s entries ``entry_ids``, in order; the length of
    each one's header field (:data:`read_request`'s third field), whose bytes its answer repeats
    (None for version-2 READs, :func:`py_v2_read_run`, which have none)."""

    first: int
    end: int
    ledger_id: int
    entry_ids: list[int]
    header_lens: list[int] | None


def py_read_run(payloads: list[bytes], i: int, end: int, ledger_id: int) -> ReadRun:
    """The run of ``payloads[i]``, ``payloads[i + 1]``, ... (before ``end`` and the list's
    end) that :data:`read_request` takes apart as READ_ENTRYs of ``ledger_id``: it ends at
    the first that it does not take apart or that reads another ledger."""
    first, taken = _reads_of(payloads, i, end, ledger_id, v3_fast.plain_read_request)
    return ReadRun(first, first + len(taken), ledger_id, [t[1] for t in taken], [t[2] for t in taken])


def py_v2_read_run(payloads: list[bytes], i: int, end: int, ledger_id: int) -> ReadRun:
    """:func:`py_read_run` of version-2 READ_ENTRYs (:func:`.v2.plain_read_request`) of
    ``ledger_id``; ``header_lens`` None."""
    first, taken = _reads_of(payloads, i, end, ledger_id, v2.plain_read_request)
    return ReadRun(first, first + len(taken), ledger_id, [t[1] for t in taken], None)


def _reads_of(payloads: list[bytes], i: int, end: int, ledger_id: int, parse: ParseRequest) -> tuple[int, list[Any]]:
    """Where a run of reads starts, and what ``parse`` gives for each of its payloads."""
    taken: list[Any] = []
    first = j = max(i, 0)
    end = min(end, len(payloads))
    while j < end:
        got = parse(payloads[j])
        if got is None or got[0] != ledger_id:
            break
        taken.append(got)
        j += 1
    return first, taken


def py_add_answer(txn_id: int, status: int, ledger_id: int, entry_id: int) -> bytes:
    """The framed answer to an ADD_ENTRY request: ``status`` a v3 StatusCode number."""
    encoder = getattr(_local, "encoder", None)
    if encoder is None:  # AddResponseEncoder refills one message: one per thread
        encoder = _local.encoder = v3_fast.AddResponseEncoder()
    return frame(encoder.encode(txn_id, status, ledger_id, entry_id))


def py_add_answers(txn_ids: list[int], status: int, ledger_id: int, entry_ids: list[int]) -> bytes:
    """The framed answers to the ADD_ENTRYs of ``txn_ids[k]`` and ``entry_ids[k]``
    (as far as the shorter goes), one after the other: :func:`py_add_answer`'s."""
    return b"".join([py_add_answer(txn_id, status, ledger_id, e) for txn_id, e in zip(txn_ids, entry_ids)])


def py_v2_add_answers(rc: int, ledger_id: int, entry_ids: list[int]) -> bytes:
    """The framed answers (``rc``) to the version-2 ADDs of ``entry_ids`` of
    ``ledger_id``, one after the other (``frame(v2.add_response_for(req, rc))`` of each)."""
    pack, header = v2.FRAMED_ANSWER.pack, v2.ADD_ANSWER_HEADER
    return b"".join([pack(24, header, rc, ledger_id, e) for e in entry_ids])


def py_read_answer(header_field: bytes, ledger_id: int, entry_id: int, body: bytes, max_lac: int) -> bytes:
    """The framed EOK answer to a plain READ_ENTRY request whose header field is ``header_field``."""
    return v3_fast.ReadAnswers(ledger_id, max_lac).framed(header_field, entry_id, body)


def py_read_answers(
    payloads: list[bytes], run: RunOfReads, bodies: list[ReadOutcome], start: int, max_lac: int, limit: int
) -> tuple[bytes, int]:
    """The framed EOK answers, one after the other, to the reads ``start``, ``start + 1``,
    ... of ``run`` (a :data:`read_run` of ``payloads``) whose ``bodies[k]`` is bytes (the
    entry read; anything else, a failed read's rc, is not answered here), until one is not
    or their bytes reach ``limit``: ``(answers, next)``, ``next`` the index in the run of
    the first read not answered.  One call answers what one write sends, without a call
    per read."""
    out = []
    size = 0
    k = max(start, 0)
    first, entry_ids, header_lens = run.first, run.entry_ids, run.header_lens
    if header_lens is None:
        raise TypeError("read_answers() wants a read_run(): a version-2 run has no header fields")
    answers = v3_fast.ReadAnswers(run.ledger_id, max_lac)
    n = len(bodies)
    while k < n and size < limit:
        body = bodies[k]
        if body.__class__ is not bytes:
            break
        payload = payloads[first + k]
        answer = answers.framed(payload[: header_lens[k]], entry_ids[k], body)
        out.append(answer)
        size += len(answer)
        k += 1
    return b"".join(out), k


def py_v2_read_answers(run: RunOfReads, bodies: list[ReadOutcome], start: int, limit: int) -> tuple[bytes, int]:
    """:func:`py_read_answers` of a :data:`v2_read_run`: the framed EOK answers to its reads
    ``start``, ``start + 1``, ... whose ``bodies[k]`` is bytes, each as the general path's
    version-2 ReadResponse, until one is not or their bytes reach ``limit``."""
    pack, header = v2.FRAMED_ANSWER.pack, v2.READ_ANSWER_HEADER
    out = []
    size = 0
    k = max(start, 0)
    ledger_id, entry_ids = run.ledger_id, run.entry_ids
    n = len(bodies)
    while k < n and size < limit:
        body = bodies[k]
        if body.__class__ is not bytes:
            break
        answer = pack(24 + len(body), header, 0, ledger_id, entry_ids[k]) + body
        out.append(answer)
        size += len(answer)
        k += 1
    return b"".join(out), k


class PlainTwins(NamedTuple):
    """One implementation of each (see the module documentation); ``c`` the C module it
    comes from, or None for the Python twins."""

    add_request: ParseRequest
    read_request: ParseRequest
    v2_add_request: ParseRequest
    add_answer: AddAnswer
    read_answer: ReadAnswer
    read_answers: ReadAnswers
    read_run: ReadRunParser
    v2_read_run: ReadRunParser
    v2_read_answers: V2ReadAnswers
    add_run: AddRunParser
    v2_add_run: V2AddRunParser
    add_answers: AddAnswers
    v2_add_answers: V2AddAnswers
    c: PlainModule | None = None


class PlainModule(Protocol):
    """The slot ``_plain`` (C) fills: what :func:`twins_of` takes; the twin selector holds the C
    module's stub to it (:mod:`bkctl.wire.fastpath`, under TYPE_CHECKING: mypy fails when the
    stub does not fit)."""

    @property
    def plain_add_request(self) -> ParseRequest: ...

    @property
    def plain_read_request(self) -> ParseRequest: ...

    @property
    def v2_add_request(self) -> ParseRequest: ...

    @property
    def add_answer(self) -> AddAnswer: ...

    @property
    def read_answer(self) -> ReadAnswer: ...

    @property
    def read_answers(self) -> ReadAnswers: ...

    @property
    def read_run(self) -> ReadRunParser: ...

    @property
    def v2_read_run(self) -> ReadRunParser: ...

    @property
    def v2_read_answers(self) -> V2ReadAnswers: ...

    @property
    def add_run(self) -> AddRunParser: ...

    @property
    def v2_add_run(self) -> V2AddRunParser: ...

    @property
    def add_answers(self) -> AddAnswers: ...

    @property
    def v2_add_answers(self) -> V2AddAnswers: ...


#: The Python twins (the reference).
PYTHON = PlainTwins(
    v3_fast.plain_add_request,
    v3_fast.plain_read_request,
    v2.plain_add_request,
    py_add_answer,
    py_read_answer,
    py_read_answers,
    py_read_run,
    py_v2_read_run,
    py_v2_read_answers,
    py_add_run,
    py_v2_add_run,
    py_add_answers,
    py_v2_add_answers,
)


def twins_of(c: PlainModule | None) -> PlainTwins:
    """The C twins of the module ``c`` (``_plain``, which the twin selector,
    :mod:`bkctl.wire.fastpath`, loads), or :data:`PYTHON` for None."""
    if c is None:
        return PYTHON
    return PlainTwins(
        c.plain_add_request,
        c.plain_read_request,
        c.v2_add_request,
        c.add_answer,
        c.read_answer,
        c.read_answers,
        c.read_run,
        c.v2_read_run,
        c.v2_read_answers,
        c.add_run,
        c.v2_add_run,
        c.add_answers,
        c.v2_add_answers,
        c,
    )
