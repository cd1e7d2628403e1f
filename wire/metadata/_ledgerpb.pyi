"""Types of the C extension ``_ledgerpb.c`` (format-3 ledger metadata decoded and checked);
its Python twin is :func:`bkctl.wire.metadata.ledger.parse_ledger_metadata`.  ``./dev lint``
checks this stub against the built module (mypy's stubtest)."""

from typing import Any, Final

API: Final[int]

def metadata(value: bytes, /) -> tuple[Any, ...] | None: ...
