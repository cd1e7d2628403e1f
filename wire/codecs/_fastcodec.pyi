"""Types of the C extension ``_fastcodec.c`` (the client's per-entry codecs and answer loop);
its Python twins are in :mod:`.codec_twins` (with :mod:`.v3_fast` and :mod:`.framing`), which
hands them to it (``set_fallbacks``) and records both as one interface (``CodecTwins``).  ``./dev lint`` checks this stub against the built module
(mypy's stubtest)."""

from collections.abc import Callable
from typing import Any, Final, final

API: Final[int]

@final
class Crc32cChecker:
    def __new__(cls, ledger_id: object, slow: Callable[[bytes, int], bytes], /) -> Crc32cChecker: ...
    def __call__(self, entry: bytes, entry_id: int, /) -> bytes: ...

def set_fallbacks(
    crc32c_package: Callable[[int, int, int, int, bytes], bytes],
    read_frame: Callable[[int, int, int], tuple[bytes, bytes]],
    add_part: Callable[[int, int, bytes, bytes, bool], tuple[bytes, bytes]],
    add_frame: Callable[[int, bytes], tuple[bytes, bytes] | None],
    /,
) -> None: ...
def crc32c_package(ledger_id: int, entry_id: int, lac: int, length: int, payload: bytes, /) -> bytes: ...
def read_frame(txn_id: int, ledger_id: int, entry_id: int, /) -> tuple[bytes, bytes]: ...
def plain_read_body(payload: bytes, pos: int, /) -> bytes | None: ...
def add_part(
    ledger_id: int, entry_id: int, master_key: bytes, body: bytes, recovery: bool, /
) -> tuple[bytes, bytes]: ...
def add_frame(txn_id: int, part: bytes, /) -> tuple[bytes, bytes] | None: ...
def take_answers(
    payloads: list[bytes],
    start: int,
    fast: dict[bytes, Any],
    pending: dict[int, Any],
    answered: Callable[[Any, Any], bool],
    /,
) -> int: ...
def split_frames(buf: bytes, limit: int, /) -> tuple[list[bytes], int]: ...
def hardware_crc32c(unused: object, /) -> bool: ...
