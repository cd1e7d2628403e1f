"""Types of the C extension ``_archive.c`` (a backup's data objects, written and read); its Python
owners, with the interfaces and the Python twins, are ``bkctl.wire.backup.archive`` and ``data_read``.
``./dev lint`` checks this stub against the built module (mypy's stubtest)."""

from collections.abc import Callable
from typing import Any, Final, final

from _typeshed import structseq

API: Final[int]

@final
class EntryRun(structseq[Any], tuple[list[bytes], bytes, int, int, int, int, int, int]):
    """A run of a data object's entries (``bkctl.wire.backup.data_read.EntryRun``)."""

    __match_args__: Final = ("payloads", "heads", "size", "end", "next_id", "stop", "need", "found")
    @property
    def payloads(self) -> list[bytes]: ...
    @property
    def heads(self) -> bytes: ...
    @property
    def size(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def next_id(self) -> int: ...
    @property
    def stop(self) -> int: ...
    @property
    def need(self) -> int: ...
    @property
    def found(self) -> int: ...

def archive_parts(
    fallback: Callable[[list[tuple[int, bytes]], int], tuple[list[bytes], int]],
    batch: list[tuple[int, bytes]],
    expected: int,
    /,
) -> tuple[list[bytes], int]: ...
def hardware_crc32c(unused: object, /) -> bool: ...
def entry_run(fallback: Callable[[bytes, int, int], Any], buf: bytes, pos: int, expected: int, /) -> EntryRun: ...
