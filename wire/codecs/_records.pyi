"""Types of the C extension ``_records.c`` (the bookie's journal and entry log records); its
Python owner, with the interface and the Python twins, is ``bkctl.wire.bookie_disk.records``.
``./dev lint`` checks this stub against the built module (mypy's stubtest)."""

from collections.abc import Callable
from typing import Any, Final

API: Final[int]

def log_records(
    fallback: Callable[[int, list[int], list[bytes], int, int, int, int], tuple[bytes, bytes]],
    ledger_id: int,
    entry_ids: list[int],
    bodies: list[bytes],
    start: int,
    pos: int,
    limit: int,
    budget: int,
    /,
) -> tuple[bytes, bytes]: ...
def journal_entries(
    fallback: Callable[[int, list[int], list[bytes], int], bytes],
    ledger_id: int,
    entry_ids: list[int],
    bodies: list[bytes],
    record_type: int,
    /,
) -> bytes: ...
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
