"""CRC32C by the crc32c package, imported when the first checksum is computed.

The package's ``__init__`` reads its version through importlib.metadata (~25 ms of
CPU), which a process that computes no CRC32C (``bkctl ledger list``) need not pay.
Entry digests (:mod:`.digest`) and Pulsar's stored entries (``wire.pulsar.entry``)
call :func:`crc32c` here.
"""

from __future__ import annotations

from collections.abc import Callable

#: what a checksum reads
Bytes = bytes | bytearray | memoryview

__all__ = ["crc32c", "crc32c_function"]


def crc32c(data: Bytes, value: int = 0) -> int:
    """The CRC32C of ``data`` continuing ``value``; the first call puts the package's
    function in this name's place (:func:`crc32c_function`)."""
    return crc32c_function()(data, value)


def crc32c_function() -> Callable[..., int]:
    """The crc32c package's function, imported now and bound to :func:`crc32c`'s name
    (callers that look it up as ``checksums.crc32c`` then call it directly)."""
    global crc32c
    from crc32c import crc32c

    return crc32c
