"""The C twins of the per-entry codecs (``_fastcodec.c``, the client's; ``_records.c``, the
bookie's disk records), when they are in use.

``Twins.codec`` of the twin selector (:mod:`bkctl.wire.fastpath`) is the module
``bkctl.wire.codecs._fastcodec`` when it was built and fast paths are on, else None: callers keep
their Python path for None, and for every call the C twin answers None
(what it does not cover).  The twins give the same bytes as the Python
functions they stand for: :func:`~bkctl.wire.codecs.digest.DigestManager.package`
and the CRC32C check of ``payload_checker`` (digest), ``RequestEncoder.read_frame``
and ``add_part``, the ADD header of ``EntryRequests.encoded_add``, and
:func:`~bkctl.wire.codecs.v3_fast.plain_read_body` (tests/unit/test_fastcodec.py);
``take_answers`` is the loop of ``RequestTable.take_answers`` over a chunk
of answers (tests/unit/test_client_take_answers.py).  ``Twins.records`` is
``bkctl.wire.codecs._records``, the bookie's: ``log_records``, the record loop of its
entry logs' ``LogWriter.append``, ``span_records``, their check on reading
(tests/unit/test_entry_log_records.py), and ``journal_entries``, its journal's
records of a run of adds (tests/unit/test_journal_entries_c.py).
"""

from __future__ import annotations

from types import ModuleType

import importlib

__all__ = ["load", "load_records"]


#: What the C modules' ``API`` must be (a build older than the sources is not used).
C_API = 4
RECORDS_API = 1


def _built(name: str, api: int) -> ModuleType | None:
    try:
        module = importlib.import_module(f"{__package__}.{name}")
    except ImportError:
        return None
    return module if getattr(module, "API", None) == api else None


def load(enabled: bool = True) -> ModuleType | None:
    """``_fastcodec`` (the client's), or None when ``enabled`` is false or it was not
    built (or is older than the sources)."""
    return _built("_fastcodec", C_API) if enabled else None


def load_records(enabled: bool = True) -> ModuleType | None:
    """``_records`` (the bookie's disk records), or None as :func:`load`."""
    return _built("_records", RECORDS_API) if enabled else None
