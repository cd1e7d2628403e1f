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
  one bytes object per up to ``limit`` bytes (:func:`py_read_answers`).

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


def py_add_answer(txn_id: int, status: int, ledger_id: int, entry_id: int) -> bytes:
    """The framed answer to an ADD_ENTRY request: ``status`` a v3 StatusCode number."""
    encoder = getattr(_local, "encoder", None)
    if encoder is None:  # AddResponseEncoder refills one message: one per thread
        encoder = _local.encoder = v3_fast.AddResponseEncoder()
    return frame(encoder.encode(txn_id, status, ledger_id, entry_id))


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


#: The Python twins (the reference).
PYTHON = PlainTwins(
    v3_fast.plain_add_request,
    v3_fast.plain_read_request,
    v2.plain_add_request,
    py_add_answer,
    py_read_answer,
    py_read_answers,
)


def twins_of(c: PlainModule | None) -> PlainTwins:
    """The C twins of the module ``c`` (``_plain``, which the twin selector,
    :mod:`bkctl.wire.fastpath`, loads), or :data:`PYTHON` for None."""
    if c is None:
        return PYTHON
    return PlainTwins(
        c.plain_add_request, c.plain_read_request, c.v2_add_request, c.add_answer, c.read_answer, c.read_answers, c
    )
