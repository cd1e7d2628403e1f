"""The bookie's hot-path twins, chosen in one place: its parsers of plain
requests and its ADD and READ answers, in C (``_plain.c``) when that is built and fast
paths are on, else in Python.

* :data:`add_request` -- :func:`.v3.plain_add_request`;
* :data:`read_request` -- :func:`.v3.plain_read_request`;
* :data:`v2_add_request` -- :func:`.v2.plain_add_request`;
* :data:`add_answer` -- ``(txnId, v3 status, ledgerId, entryId)`` -> the framed
  answer to an ADD_ENTRY request (:class:`.v3.AddResponseEncoder`, framed);
* :data:`read_answer` -- ``(header field, ledgerId, entryId, body, maxLAC)``
  -> the framed EOK answer to a plain READ_ENTRY request (:func:`.v3.read_answer`, framed).

The Python twins are the reference; the C ones give the same values for every
input (tests/unit/test_plain_c.py, the fuzz target ``plain_c_twins``).  The
bookie uses these only with its own fast paths on; ``BKCTL_FASTPATHS=0`` also
leaves the C twins out here (:data:`C` is then None).
"""
from __future__ import annotations

import threading

from bkctl.wire import fastpath
from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.framing import frame

#: What the C twins' ``API`` must be (a build older than the sources is not used).
C_API = 3


def c_twins():
    """The C module when it is built, current and fast paths are on; else None."""
    if not fastpath.ENABLED:
        return None
    try:
        from bkctl.wire.codecs import _plain
    except ImportError:  # installed where no C compiler was found: the Python twins do it all
        return None
    return _plain if getattr(_plain, "API", None) == C_API else None


_local = threading.local()


def py_add_answer(txn_id: int, status: int, ledger_id: int, entry_id: int) -> bytes:
    """The framed answer to an ADD_ENTRY request: ``status`` a v3 StatusCode number."""
    encoder = getattr(_local, "encoder", None)
    if encoder is None:  # AddResponseEncoder refills one message: one per thread
        encoder = _local.encoder = v3.AddResponseEncoder()
    return frame(encoder.encode(txn_id, status, ledger_id, entry_id))


def py_read_answer(header_field: bytes, ledger_id: int, entry_id: int, body: bytes, max_lac: int) -> bytes:
    """The framed EOK answer to a plain READ_ENTRY request whose header field is ``header_field``."""
    return v3.ReadAnswers(ledger_id, max_lac).framed(header_field, entry_id, body)


#: The C module in use, or None.
C = c_twins()
add_request = C.plain_add_request if C else v3.plain_add_request
read_request = C.plain_read_request if C else v3.plain_read_request
v2_add_request = C.v2_add_request if C else v2.plain_add_request
add_answer = C.add_answer if C else py_add_answer
read_answer = C.read_answer if C else py_read_answer
