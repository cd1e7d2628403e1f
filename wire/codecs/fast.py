"""The C twins of the client's per-entry codecs (``_fastcodec.c``), when they are in use.

:data:`C` is the module ``bkctl.wire.codecs._fastcodec`` when it was built
and fast paths are on (:mod:`bkctl.wire.fastpath`), else None: callers keep
their Python path for None, and for every call the C twin answers None
(what it does not cover).  The twins give the same bytes as the Python
functions they stand for: :func:`~bkctl.wire.codecs.digest.DigestManager.package`
and the CRC32C check of ``payload_checker`` (digest), ``RequestEncoder.read_frame``
and ``add_part``, the ADD header of ``EntryRequests.encoded_add``, and
:func:`~bkctl.wire.codecs.v3.plain_read_body` (tests/unit/test_fastcodec.py);
``take_answers`` is the loop of ``BookieConnection.fast_answers`` over a chunk
of answers (tests/unit/test_client_take_answers.py).  Two serve the bookie:
``log_records``, the record loop of its entry logs' ``LogWriter.append``
(tests/unit/test_entry_log_records.py), and ``journal_entries``, its journal's
records of a run of adds (tests/unit/test_journal_entries_c.py).
"""
from __future__ import annotations

from types import ModuleType

from bkctl.wire import fastpath

__all__ = ["C", "load"]


def load(enabled: bool = True) -> ModuleType | None:
    """The C module, or None when ``enabled`` is false or it was not built."""
    if not enabled:
        return None
    try:
        from . import _fastcodec
    except ImportError:
        return None
    return _fastcodec


#: the C twins, or None (fast paths off, or not built)
C: ModuleType | None = load(fastpath.ENABLED)
