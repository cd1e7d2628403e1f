"""Errors a bookie connection reports, each carrying the bookie's return code.

Every error is a :class:`BookieError` with ``.rc`` (a :class:`bkctl.wire.codecs.protocol.RC`,
or ``None`` when the bookie never answered) and ``.bookie`` (the bookie id).
The classes also sit under the shared categories of :mod:`bkctl.wire.errors`, so
code that only cares about "not found" / "conflict" / "unreachable" can catch
those instead:

=========================  ==================  ============================
class                      rc                  category
=========================  ==================  ============================
NoSuchLedgerOnBookie       ENOLEDGER           NotFound
NoSuchEntry                ENOENTRY            NotFound
LedgerFencedError          EFENCED             Conflict
Unauthorized               EUA                 -
TLSRequired                EUA                 Unreachable (an Unauthorized)
ReadOnlyBookie             EREADONLY           -
TooManyRequests            ETOOMANYREQUESTS    -  (also local back-pressure)
BookieIOError              EIO                 -
BadRequest                 EBADREQ             -
BadVersion                 EBADVERSION         -
UnknownLedgerState         EUNKNOWNLEDGERSTATE -
BookieTimeout              None                Unreachable
BookieUnavailable          None                Unreachable
BatchReadUnsupported       None                Unreachable (a BookieUnavailable)
MalformedResponse          None                Unreachable (a BookieUnavailable)
NotSupported               None                -
=========================  ==================  ============================

:func:`error_for` builds the right one from a return code.
"""

from __future__ import annotations

from typing import Any

from bkctl.wire.codecs.protocol import RC
from bkctl.wire.errors import BKError, Conflict, NotFound, Unreachable

__all__ = [
    "BookieError",
    "NoSuchLedgerOnBookie",
    "NoSuchEntry",
    "MISSING_ON_BOOKIE",
    "LedgerFencedError",
    "Unauthorized",
    "TLSRequired",
    "ReadOnlyBookie",
    "TooManyRequests",
    "BookieIOError",
    "BadRequest",
    "BadVersion",
    "UnknownLedgerState",
    "BookieTimeout",
    "BookieUnavailable",
    "BatchReadUnsupported",
    "MalformedResponse",
    "NotSupported",
    "ERROR_CLASSES",
    "error_for",
    "ReplicationError",
    "EntryUnrecoverable",
    "TargetUnusable",
    "UnknownBookie",
    "ClientClosed",
    "EntryNotConfirmed",
    "HandleReleased",
    "LedgerClosedError",
    "LedgerLocked",
    "LedgerMetadataConflict",
    "LedgerRecoveryError",
    "NotEnoughBookies",
]


class BookieError(BKError):
    """A request to one bookie failed.

    ``rc`` is the bookie's return code (v2-valued :class:`RC`; an unknown
    code is kept as a plain int) or ``None`` when there was no answer.
    ``bookie`` is the bookie id the request went to.
    """

    #: The return code instances of this class carry when none is given.
    default_rc: RC | None = None

    def __init__(self, message: str, *, rc: int | None = None, bookie: str | None = None):
        super().__init__(message)
        if rc is None:
            rc = self.default_rc
        elif not isinstance(rc, RC):
            try:
                rc = RC(rc)
            except ValueError:
                pass  # keep the unknown number as it came
        self.rc = rc
        self.bookie = bookie


class NoSuchLedgerOnBookie(BookieError, NotFound):
    """ENOLEDGER: the bookie has no data for this ledger."""

    default_rc = RC.ENOLEDGER


class NoSuchEntry(BookieError, NotFound):
    """ENOENTRY: the bookie knows the ledger but not this entry (or has no
    entry at all, for a last-entry read)."""

    default_rc = RC.ENOENTRY


#: What a bookie answers when it does not hold an entry: the ledger or the
#: entry is unknown to it (for a reader, "not here", not a failure).
MISSING_ON_BOOKIE = (NoSuchEntry, NoSuchLedgerOnBookie)


class LedgerFencedError(BookieError, Conflict):
    """EFENCED: the ledger was fenced (being recovered); normal adds are refused."""

    default_rc = RC.EFENCED


class Unauthorized(BookieError):
    """EUA: wrong master key (ledger password) or the connection is not authenticated."""

    default_rc = RC.EUA


class TLSRequired(Unauthorized, Unreachable):
    """EUA from a bookie whose registration advertises TLS, to a plain-text
    client: the bookie refuses every request until START_TLS."""


class ReadOnlyBookie(BookieError):
    """EREADONLY: the bookie is in read-only mode and refuses writes."""

    default_rc = RC.EREADONLY


class TooManyRequests(BookieError):
    """ETOOMANYREQUESTS from the bookie, or the local request queue of the
    connection is full (back-pressure)."""

    default_rc = RC.ETOOMANYREQUESTS


class BookieIOError(BookieError):
    """EIO: the bookie failed to read or persist the data."""

    default_rc = RC.EIO


class BadRequest(BookieError):
    """EBADREQ: the bookie refused the request (unknown operation, bad
    arguments, unexpected failure)."""

    default_rc = RC.EBADREQ


class BadVersion(BookieError):
    """EBADVERSION: the bookie does not speak the protocol version sent."""

    default_rc = RC.EBADVERSION


class UnknownLedgerState(BookieError):
    """EUNKNOWNLEDGERSTATE: the ledger is in limbo on this bookie."""

    default_rc = RC.EUNKNOWNLEDGERSTATE


class BookieTimeout(BookieError, Unreachable):
    """No answer within the request's timeout (addEntryTimeout / readEntryTimeout)."""


class BookieUnavailable(BookieError, Unreachable):
    """The bookie cannot be used: connecting failed, the connection was lost
    while the request was outstanding, the connection is backing off after
    a failure, or it was closed."""


class BatchReadUnsupported(BookieUnavailable):
    """The bookie closed the connection while a BATCH_READ_ENTRY was
    outstanding: a bookie older than 4.17 that cannot decode the opcode.
    Fall back to single-entry reads."""


class MalformedResponse(BookieUnavailable):
    """The bookie sent bytes that do not decode: the connection was closed
    and every request on it failed with this error (``cause`` is the
    :class:`bkctl.wire.errors.CodecError`). Also used, without closing anything,
    for a well-formed EOK answer that lacks the data the request needs."""

    def __init__(self, message: str, *, cause: BaseException | None = None, **kw: Any):
        super().__init__(message, **kw)
        self.cause = cause


class NotSupported(BookieError):
    """The operation has no encoding in the connection's protocol (for
    example READ_LAC on a v2 connection, BATCH_READ on a v3 one)."""


#: The class for each return code; anything missing maps to :class:`BookieError`.
ERROR_CLASSES: dict[RC, type[BookieError]] = {
    RC.ENOLEDGER: NoSuchLedgerOnBookie,
    RC.ENOENTRY: NoSuchEntry,
    RC.EFENCED: LedgerFencedError,
    RC.EUA: Unauthorized,
    RC.EREADONLY: ReadOnlyBookie,
    RC.ETOOMANYREQUESTS: TooManyRequests,
    RC.EIO: BookieIOError,
    RC.EBADREQ: BadRequest,
    RC.EBADVERSION: BadVersion,
    RC.EUNKNOWNLEDGERSTATE: UnknownLedgerState,
}

_DESCRIPTIONS = {
    RC.ENOLEDGER: "no such ledger on the bookie",
    RC.ENOENTRY: "no such entry on the bookie",
    RC.EFENCED: "ledger is fenced",
    RC.EUA: "unauthorized: wrong ledger password, or the bookie requires TLS (START_TLS) first",
    RC.EREADONLY: "bookie is read-only",
    RC.ETOOMANYREQUESTS: "bookie is overloaded",
    RC.EIO: "I/O error on the bookie",
    RC.EBADREQ: "bad request",
    RC.EBADVERSION: "unsupported protocol version",
    RC.EUNKNOWNLEDGERSTATE: "ledger state unknown on the bookie",
}


def error_for(rc: int, bookie: str | None, what: str) -> BookieError:
    """The exception for a failed request.

    ``rc`` is a v2-valued return code (an :class:`RC` or its int; map v3
    statuses with :func:`bkctl.wire.codecs.protocol.rc_from_v3` first), ``what`` describes
    the request (``"ADD ledger 3 entry 0"``). An unknown code gives a plain
    :class:`BookieError` keeping the number. EOK is not an error: ValueError.
    """
    try:
        code = RC(rc)
    except ValueError:
        return BookieError(f"{what} on bookie {bookie}: unknown return code {rc}", rc=rc, bookie=bookie)
    if code is RC.EOK:
        raise ValueError("EOK is not an error")
    cls = ERROR_CLASSES.get(code, BookieError)
    return cls(f"{what} on bookie {bookie}: {code.name} ({_DESCRIPTIONS[code]})", rc=code, bookie=bookie)


# -- re-replication and administration (not bookie answers) ----------------------


class ReplicationError(BKError):
    """A ledger (or one fragment of it) could not be re-replicated."""


class EntryUnrecoverable(ReplicationError):
    """No surviving replica could provide an entry a lost bookie held: ``entry_id``;
    ``down`` is True when no replica answered at all (every copy's bookie lost or
    unreachable), False when one answered without a good copy (missing, corrupt)."""

    def __init__(self, message: str, *, entry_id: int | None = None, down: bool = False):
        super().__init__(message)
        self.entry_id = entry_id
        self.down = down


class TargetUnusable(ReplicationError):
    """The requested target bookie cannot take a fragment (not writable, or
    already in that ensemble)."""


class UnknownBookie(NotFound):
    """Neither registered nor holding a cookie in this cluster."""


# -- ledger handles (not bookie answers) ----------------------------------------


class LedgerClosedError(Conflict):
    """The ledger is closed: by this handle (adds after close) or by another
    client (with a different last entry than this writer confirmed)."""


class LedgerMetadataConflict(Conflict):
    """The ledger metadata changed in a way this handle cannot merge (for
    example another client changed the ensemble of the last segment)."""


class LedgerRecoveryError(Unreachable):
    """The tail of an open ledger could not be established: too few bookies
    answered the LAC read, or an entry could neither be read from any replica
    nor declared missing by enough of them."""


class EntryNotConfirmed(NotFound):
    """A read past the last add confirmed (open ledger) or the last entry
    (closed ledger) without ``allow_unconfirmed``."""


class ClientClosed(BKError):
    """The BookKeeper client of this handle was closed."""


class HandleReleased(ClientClosed):
    """The handle let go of its ledger (:meth:`LedgerHandle.release`); the ledger stays open."""


class LedgerLocked(Conflict):
    """Another process holds the append lock of the ledger (``open_for_append``)."""


class NotEnoughBookies(Unreachable):
    """There are not enough usable bookies for an ensemble or a replacement.

    ``needed`` is how many bookies were wanted, ``available`` how many
    candidates there were, ``readonly`` how many bookies are registered
    read-only and ``excluded`` how many writable bookies could not be used
    (already in the ensemble, failed, excluded by the caller).
    """

    def __init__(self, message: str, *, needed: int, available: int, readonly: int, excluded: int = 0):
        super().__init__(message)
        self.needed = needed
        self.available = available
        self.readonly = readonly
        self.excluded = excluded
