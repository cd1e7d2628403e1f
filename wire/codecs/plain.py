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
* :data:`read_answers` -- the EOK answers to a run of plain READ_ENTRY requests,
  one bytes object per up to ``limit`` bytes (:func:`py_read_answers`);
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
ReadAnswers = Callable[[list[tuple[int, int, int, bytes]], list[tuple[int, Any]], int, int, int], tuple[bytes, int]]


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


AddRunParser = Callable[[list[bytes], int, int, int, bytes, bool, bool], RunOfAdds]
V2AddRunParser = Callable[[list[bytes], int, int, int, bytes, int], RunOfAdds]
AddAnswers = Callable[[list[int], int, int, list[int]], bytes]
V2AddAnswers = Callable[[int, int, list[int]], bytes]


class AddRun(NamedTuple):
    """A run of plain ADDs taken apart (:func:`py_add_run`, :func:`py_v2_add_run`):
    ``end`` the index of the first payload not in the run; the txnIds (None for
    version-2 ADDs, which have none), entryIds and bodies of those in it, in order."""

    end: int
    txn_ids: list[int] | None
    entry_ids: list[int]
    bodies: list[bytes]


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
    return AddRun(j, txn_ids, entry_ids, bodies)


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
    return AddRun(j, None, entry_ids, bodies)


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
    run: list[tuple[int, int, int, bytes]], results: list[tuple[int, Any]], start: int, max_lac: int, limit: int
) -> tuple[bytes, int]:
    """The framed EOK answers, one after the other, to ``run[start]``,
    ``run[start + 1]``, ... (:data:`read_request` tuples) whose ``results[i]``
    ``(rc, body)`` is EOK (0), until one is not or their bytes reach ``limit``:
    ``(answers, next)``, ``next`` the index of the first read not answered.
    One call answers what one write sends, without a call per read."""
    out = []
    size = 0
    i = max(start, 0)
    n = min(len(run), len(results))
    answers, ledger = None, None  # py_read_answer's encoder, made once per ledger of the run
    while i < n and size < limit:
        rc, body = results[i]
        if rc != 0:
            break
        ledger_id, entry_id, header_len, payload = run[i]
        if answers is None or ledger_id != ledger:
            answers, ledger = v3_fast.ReadAnswers(ledger_id, max_lac), ledger_id
        answer = answers.framed(payload[:header_len], entry_id, body)
        out.append(answer)
        size += len(answer)
        i += 1
    return b"".join(out), i


class PlainTwins(NamedTuple):
    """One implementation of each (see the module documentation); ``c`` the C module it
    comes from, or None for the Python twins."""

    add_request: ParseRequest
    read_request: ParseRequest
    v2_add_request: ParseRequest
    add_answer: AddAnswer
    read_answer: ReadAnswer
    read_answers: ReadAnswers
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
        c.add_run,
        c.v2_add_run,
        c.add_answers,
        c.v2_add_answers,
        c,
    )
