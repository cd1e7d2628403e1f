"""Types of the C extension ``_ledgerpb.c`` (format-3 ledger metadata decoded and checked); its
Python owner is :mod:`bkctl.wire.metadata.ledger` (``LedgerMetadataTwins``, ``twins_of``), its
Python twin :func:`bkctl.wire.metadata.ledger.parse_ledger_metadata`.  ``./dev lint`` checks
this stub against the built module (mypy's stubtest)."""

from collections.abc import Callable
from typing import Any, Final, TypeVar

_T = TypeVar("_T")

API: Final[int]

def metadata(
    fallback: Callable[[Any, int | None], _T],
    build: Callable[[tuple[Any, ...], int | None], _T],
    value: Any,
    znode_ctime: int | None,
    /,
) -> _T: ...
