"""Constants of the bookie wire protocol: opcodes, flags and return codes.

v2 and v3 number their status codes differently; :class:`RC` is the v2
number and :data:`V3_STATUS` / :func:`rc_from_v3` translate.
"""

from __future__ import annotations

import enum

DEFAULT_BOOKIE_PORT = 3181
#: nettyMaxFrameSizeBytes default (5 MiB).
DEFAULT_MAX_FRAME_SIZE = 5 * 1024 * 1024
MASTER_KEY_LENGTH = 20
#: Entry id that asks a READ for the highest stored entry ("last add confirmed").
LAST_ADD_CONFIRMED = -1
#: Size of the ledgerId/entryId/LAC/length header that starts every packaged entry.
ENTRY_HEADER_LENGTH = 32

V2_MIN_VERSION = 0
V2_CURRENT_VERSION = 2


class OpCode(enum.IntEnum):
    ADD_ENTRY = 1
    READ_ENTRY = 2
    AUTH = 3
    READ_LAC = 4
    WRITE_LAC = 5
    GET_BOOKIE_INFO = 6
    BATCH_READ_ENTRY = 7


class Flag(enum.IntFlag):
    NONE = 0
    DO_FENCING = 0x0001
    RECOVERY_ADD = 0x0002
    HIGH_PRIORITY = 0x0004


class RC(enum.IntEnum):
    """Return codes, valued by their v2 numbers."""

    EOK = 0
    ENOLEDGER = 1
    ENOENTRY = 2
    EBADREQ = 100
    EIO = 101
    EUA = 102
    EBADVERSION = 103
    EFENCED = 104
    EREADONLY = 105
    ETOOMANYREQUESTS = 106
    EUNKNOWNLEDGERSTATE = 107

    @property
    def v3(self) -> int:
        return V3_STATUS[self]


V3_STATUS: dict[RC, int] = {
    RC.EOK: 0,
    RC.ENOLEDGER: 402,
    RC.ENOENTRY: 403,
    RC.EBADREQ: 404,
    RC.EIO: 501,
    RC.EUA: 502,
    RC.EBADVERSION: 503,
    RC.EFENCED: 504,
    RC.EREADONLY: 505,
    RC.ETOOMANYREQUESTS: 506,
    RC.EUNKNOWNLEDGERSTATE: 507,
}
_FROM_V3 = {v: k for k, v in V3_STATUS.items()}


_NAMES = {rc.value: rc.name for rc in RC}


def rc_name(rc: int) -> str:
    """The name of return code ``rc`` (``EOK``...), or its number for one :class:`RC` does not know."""
    return _NAMES.get(rc) or str(rc)


def rc_from_v3(status: int) -> RC:
    """Map a v3 ``StatusCode`` to :class:`RC`; unknown values become EBADREQ."""
    return _FROM_V3.get(status, RC.EBADREQ)


class OperationType(enum.IntEnum):
    """v3 ``OperationType``."""

    READ_ENTRY = 1
    ADD_ENTRY = 2
    RANGE_READ_ENTRY = 3
    RANGE_ADD_ENTRY = 4
    AUTH = 5
    WRITE_LAC = 6
    READ_LAC = 7
    GET_BOOKIE_INFO = 8
    START_TLS = 9
    FORCE_LEDGER = 10
    GET_LIST_OF_ENTRIES_OF_LEDGER = 11
    BATCH_READ_ENTRY = 12


class ProtocolVersion(enum.IntEnum):
    VERSION_ONE = 1
    VERSION_TWO = 2
    VERSION_THREE = 3


#: v3 ReadRequest.flag values.
READ_FLAG_FENCE_LEDGER = 1
READ_FLAG_ENTRY_PIGGYBACK = 2
#: v3 AddRequest.flag value.
ADD_FLAG_RECOVERY_ADD = 1
#: v3 AddRequest.writeFlags bit.
WRITE_FLAG_DEFERRED_SYNC = 0x1
#: v3 GetBookieInfoRequest.requested bits.
BOOKIE_INFO_TOTAL_DISK_CAPACITY = 0x1
BOOKIE_INFO_FREE_DISK_SPACE = 0x2
#: Java sends this BKPacketHeader.priority for high-priority requests.
HIGH_PRIORITY_VALUE = 100

AUTH_DISABLED_PLUGIN = "AuthDisabledPlugin"
