"""The client's per-entry codecs and answer loop as one interface, implemented whole in C
(``_fastcodec.c``) and whole in Python (:data:`PYTHON`); the twin selector records one
(``Twins.codec`` of :mod:`bkctl.wire.fastpath`) and the components are handed it.  Its fields:

* :data:`crc32c_package` -- ``(ledger_id, entry_id, lac, length, payload)`` -> a packaged
  entry with its CRC32C digest (:meth:`~.digest.DigestManager.package` of a CRC32C ledger);
* :data:`crc32c_checker` -- ``(ledger_id, slow)`` -> a reader's check of one CRC32C entry,
  ``(entry, entry_id)`` -> its payload, handing anything it does not take (a short entry, a
  mismatch) to ``slow`` (:meth:`~.digest.DigestManager.payload`) for its result or its error;
* :data:`read_frame` -- ``(txn_id, ledger_id, entry_id)`` -> a plain v3 READ framed, and its
  header field (:meth:`.v3_fast.RequestEncoder.read_frame`);
* :data:`add_part` -- ``(ledger_id, entry_id, master_key, body, recovery)`` -> an ADD's
  addRequest field and its EOK answer after the header (:meth:`.v3_fast.RequestEncoder.add_part`);
* :data:`add_frame` -- ``(txn_id, part)`` -> one normal-priority copy of an ADD encoded once
  (the frame of its header field and ``part``) and that header field; None for a txnId that is
  not a uint64 (both twins: the request is then built the general way);
* :data:`plain_read_body` -- :func:`.v3_fast.plain_read_body` (None: not the shape it takes
  apart, in both twins; the answer is then parsed);
* :data:`take_answers` -- ``(payloads, start, fast, pending, answered)`` -> the index of the
  first answer not taken: the loop of ``RequestTable.take_answers`` over a chunk of v3
  answers (:func:`py_take_answers`);
* :data:`split_frames` -- ``(buf, limit)`` -> the whole frames at the start of ``buf`` and the
  position after them (:func:`.framing.split_frames`).

The C functions cover the shapes the hot paths send and are handed their Python twins once, at
selection (``_fastcodec.set_fallbacks``, :func:`twins_of`), for everything else: a caller never
sees a C twin decline.  The Python twins are the reference; tests/unit/test_fastcodec.py
checks the C ones against them for random and damaged input.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from bkctl.wire.codecs import checksums, v3_fast
from bkctl.wire.codecs.framing import length_prefix, split_frames
from bkctl.wire.codecs.protocol import ENTRY_HEADER_LENGTH

__all__ = ["PYTHON", "REQUEST_SENT", "CodecTwins", "FastcodecModule", "sum_checker", "twins_of"]

#: ``requests.SENT``: the state of a request on the wire, which :func:`py_take_answers` (and
#: its C twin) take answers for (tests/unit/test_client_take_answers.py holds them equal)
REQUEST_SENT = 1

_HEADER = struct.Struct(">qqqq")
_U32 = struct.Struct(">I")
_IDS = struct.Struct(">qq")
_local = threading.local()

#: a reader's check of one entry: ``(entry, entry_id)`` -> its payload
Checker = Callable[[bytes, int], bytes]
#: the interface's fields (see the module documentation), the NamedTuple's and the C slot's
Package = Callable[[int, int, int, int, bytes], bytes]
MakeChecker = Callable[[int, Checker], Checker]
ReadFrame = Callable[[int, int, int], tuple[bytes, bytes]]
AddPart = Callable[[int, int, bytes, bytes, bool], tuple[bytes, bytes]]
AddFrame = Callable[[int, bytes], tuple[bytes, bytes] | None]
PlainReadBody = Callable[[bytes, int], bytes | None]
TakeAnswers = Callable[[list[bytes], int, dict[bytes, Any], dict[Any, Any], Callable[[Any, Any], bool]], int]
SplitFrames = Callable[[bytes, int], tuple[list[bytes], int]]


def _encoder() -> v3_fast.RequestEncoder:
    """This thread's request encoder (it refills one message: one per thread)."""
    encoder: v3_fast.RequestEncoder | None = getattr(_local, "encoder", None)
    if encoder is None:
        encoder = _local.encoder = v3_fast.RequestEncoder()
    return encoder


def py_crc32c_package(ledger_id: int, entry_id: int, lac: int, length: int, payload: bytes) -> bytes:
    """The packaged entry of a CRC32C ledger: header, digest over header and payload, payload."""
    header = _HEADER.pack(ledger_id, entry_id, lac, length)
    return b"".join((header, _U32.pack(checksums.crc32c(payload, checksums.crc32c(header))), payload))


def sum_checker(
    ledger_id: int, slow: Checker, crc: Callable[..., int], stored: struct.Struct, digest_length: int
) -> Checker:
    """A reader's check of one entry whose digest is the checksum ``crc`` (stored as ``stored``
    after the header): a well-formed entry of ``ledger_id`` with the asked id takes one slice
    and two checksum calls; anything else goes to ``slow(entry, entry_id)``."""
    start = ENTRY_HEADER_LENGTH + digest_length
    unpack = stored.unpack_from
    ids = _IDS.unpack_from

    def check(entry: bytes, entry_id: int) -> bytes:
        if type(entry) is bytes and len(entry) >= start:
            payload = entry[start:]
            if unpack(entry, ENTRY_HEADER_LENGTH)[0] == crc(payload, crc(entry[:ENTRY_HEADER_LENGTH])) and ids(
                entry
            ) == (ledger_id, entry_id):
                return payload
        return slow(entry, entry_id)

    return check


def py_crc32c_checker(ledger_id: int, slow: Checker) -> Checker:
    """:func:`sum_checker` for CRC32C."""
    return sum_checker(ledger_id, slow, checksums.crc32c_function(), _U32, _U32.size)


def py_read_frame(txn_id: int, ledger_id: int, entry_id: int) -> tuple[bytes, bytes]:
    """:meth:`.v3_fast.RequestEncoder.read_frame`."""
    return _encoder().read_frame(txn_id, ledger_id, entry_id)


def py_add_part(ledger_id: int, entry_id: int, master_key: bytes, body: bytes, recovery: bool) -> tuple[bytes, bytes]:
    """:meth:`.v3_fast.RequestEncoder.add_part`."""
    return _encoder().add_part(ledger_id, entry_id, master_key, body, recovery)


def py_add_frame(txn_id: int, part: bytes) -> tuple[bytes, bytes] | None:
    """A normal-priority copy of an ADD whose addRequest field is ``part``: its frame and its
    header field; None for a txnId that is not a uint64 (:func:`.v3_fast.add_header_fields`)."""
    heads = v3_fast.add_header_fields(txn_id)
    if heads is None:
        return None
    head = heads[0]
    return b"".join((length_prefix(len(head) + len(part)), head, part)), head


def py_take_answers(
    payloads: list[bytes],
    start: int,
    fast: dict[bytes, Any],
    pending: dict[Any, Any],
    answered: Callable[[Any, Any], bool],
) -> int:
    """The v3 answers ``payloads[start:]`` that are the EOK answers of the plain ADDs and READs
    on the wire, for as long as they are: each one's request (found in ``fast`` by its header
    field, on the wire: :data:`REQUEST_SENT` and ``pending``'s under its txnId) taken out of
    both dicts and handed to ``answered(req, result)`` (None for an ADD, the entry for a READ),
    which returns whether to go on.  The index of the first answer not taken (or the one after
    an ``answered`` that said stop)."""
    read_body = v3_fast.plain_read_body
    i, n = start, len(payloads)
    while i < n:
        payload = payloads[i]
        if len(payload) <= 2:
            break
        head = payload[: 2 + payload[1]]
        req = fast.get(head)
        if req is None:
            break
        if req.state != REQUEST_SENT or not _is(pending.get(req.key), req):
            break
        fast_head = req.fast
        if type(fast_head) is not bytes:
            break
        ok = req.ok
        result: Any
        if ok is not None:  # an ADD: the rest of its EOK answer, byte for byte
            if len(payload) != len(fast_head) + len(ok) or not payload.endswith(ok):
                break
            result = None
        else:
            result = read_body(payload, len(fast_head))
            if result is None:
                break
        del fast[head]
        del pending[req.key]
        i += 1
        if not answered(req, result):
            break
    return i


def _is(a: object, b: object) -> bool:
    """``a is b``, without narrowing either's type (a request is any object with its fields)."""
    return a is b


class CodecTwins(NamedTuple):
    """One implementation of each (see the module documentation); ``c`` the C module it comes
    from, or None for the Python twins."""

    crc32c_package: Package
    crc32c_checker: MakeChecker
    read_frame: ReadFrame
    add_part: AddPart
    add_frame: AddFrame
    plain_read_body: PlainReadBody
    take_answers: TakeAnswers
    split_frames: SplitFrames
    c: FastcodecModule | None = None


class FastcodecModule(Protocol):
    """The slot ``_fastcodec`` (C) fills: what :func:`twins_of` takes; the twin selector holds
    the C module's stub to it (:mod:`bkctl.wire.fastpath`, under TYPE_CHECKING: mypy fails when
    the stub does not fit)."""

    @property
    def set_fallbacks(self) -> Callable[[Package, ReadFrame, AddPart, AddFrame], None]: ...

    @property
    def crc32c_package(self) -> Package: ...

    @property
    def Crc32cChecker(self) -> MakeChecker: ...  # noqa: N802 - the C module's class

    @property
    def read_frame(self) -> ReadFrame: ...

    @property
    def add_part(self) -> AddPart: ...

    @property
    def add_frame(self) -> AddFrame: ...

    @property
    def plain_read_body(self) -> PlainReadBody: ...

    @property
    def take_answers(self) -> TakeAnswers: ...

    @property
    def split_frames(self) -> SplitFrames: ...


#: The Python twins (the reference).
PYTHON = CodecTwins(
    py_crc32c_package,
    py_crc32c_checker,
    py_read_frame,
    py_add_part,
    py_add_frame,
    v3_fast.plain_read_body,
    py_take_answers,
    split_frames,
)


def twins_of(c: FastcodecModule | None) -> CodecTwins:
    """The C twins of the module ``c`` (``_fastcodec``, which the twin selector,
    :mod:`bkctl.wire.fastpath`, loads), handed their Python twins for what they do not cover;
    :data:`PYTHON` for None."""
    if c is None:
        return PYTHON
    c.set_fallbacks(py_crc32c_package, py_read_frame, py_add_part, py_add_frame)
    return CodecTwins(
        c.crc32c_package,
        c.Crc32cChecker,
        c.read_frame,
        c.add_part,
        c.add_frame,
        c.plain_read_body,
        c.take_answers,
        c.split_frames,
        c,
    )
