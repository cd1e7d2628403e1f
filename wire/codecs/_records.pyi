"""Types of the C extension ``_records.c`` (the bookie's journal and entry log records); its
Python twins are in ``bkctl.bookied.storage.entry_log`` and ``bkctl.bookied.journal``.
``./dev lint`` checks this stub against the built module (mypy's stubtest)."""

from typing import Any, Final

API: Final[int]

def log_records(
    ledger_id: int, pairs: list[tuple[int, bytes]], start: int, log_id: int, pos: int, limit: int, budget: int, /
) -> tuple[bytes, list[tuple[Any, int]]] | None: ...
def journal_entries(ledger_id: int, entry_ids: list[int], bodies: list[bytes], record_type: int, /) -> bytes | None: ...
def span_records(
    span: bytes,
    base: int,
    rows: list[Any],
    start: int,
    end: int,
    ledger_id: int,
    entry_ids: list[int],
    out: list[Any],
    /,
) -> int: ...
def hardware_crc32c(unused: object, /) -> bool: ...
