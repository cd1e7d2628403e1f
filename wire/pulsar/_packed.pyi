"""Types of the C extension ``_packed.c`` (a Pulsar batch's messages into Arrow buffers); its
Python twin is :class:`bkctl.wire.pulsar.rows.PyMessageRows`.  ``./dev lint`` checks this stub
against the built module (mypy's stubtest)."""

from typing import Any, Final, final

#: (name, DDL type, where its value comes from) of each column, in order
COLUMNS: Final[tuple[tuple[str, str, str], ...]]

@final
class PackedRows:
    def __init__(self, partition: int = -1) -> None: ...
    @property
    def rows(self) -> int: ...
    def add_batch(self, batch: bytes, count: int, base_sequence: int | None, entry: Any, /) -> int | None: ...
    def take(self) -> tuple[int, dict[str, tuple[Any, ...]]]: ...
