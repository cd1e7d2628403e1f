"""The C twins of the client's per-entry codecs (``_fastcodec.c``), when they are in use.

``Twins.codec`` of the twin selector (:mod:`bkctl.wire.fastpath`) is the module
``bkctl.wire.codecs._fastcodec`` when it was built and fast paths are on, else None: callers keep
their Python path for None, and for every call the C twin answers None
(what it does not cover).  The twins give the same bytes as the Python
functions they stand for: :func:`~bkctl.wire.codecs.digest.DigestManager.package`
and the CRC32C check of ``payload_checker`` (digest), ``RequestEncoder.read_frame``
and ``add_part``, the ADD header of ``EntryRequests.encoded_add``, and
:func:`~bkctl.wire.codecs.v3.plain_read_body` (tests/unit/test_fastcodec.py);
``take_answers`` is the loop of ``RequestTable.take_answers`` over a chunk
of answers (tests/unit/test_client_take_answers.py).  Two serve the bookie:
``log_records``, the record loop of its entry logs' ``LogWriter.append``
(tests/unit/test_entry_log_records.py), and ``journal_entries``, its journal's
records of a run of adds (tests/unit/test_journal_entries_c.py).
"""

from __future__ import annotations

from types import ModuleType

__all__ = ["load"]


#: What the C module's ``API`` must be (a build older than the sources is not used).
C_API = 2


def load(enabled: bool = True) -> ModuleType | None:
    """The C module, or None when ``enabled`` is false or it was not built (or is older
    than the sources)."""
    if not enabled:
        return None
    try:
        from . import _fastcodec  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _fastcodec if getattr(_fastcodec, "API", None) == C_API else None
