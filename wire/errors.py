"""Exceptions shared by the codecs, the metadata store and the client."""

from __future__ import annotations


class BKError(Exception):
    """Root of every error this library raises on purpose."""


class CodecError(BKError, ValueError):
    """Bytes that do not decode: a malformed frame, message or znode value."""


class FrameTooLarge(CodecError):
    """A frame whose declared length exceeds the configured maximum."""

    def __init__(self, length: int, limit: int):
        super().__init__(f"frame of {length} bytes exceeds the {limit}-byte limit")
        self.length = length
        self.limit = limit


class AddressError(BKError, ValueError):
    """A ``host:port`` that is not one; ``problem`` is the phrase that follows
    the quoted address in the message (``has a port outside 1..65535``)."""

    def __init__(self, address: str, problem: str):
        super().__init__(f"{address!r} {problem}")
        self.address = address
        self.problem = problem


class DigestError(BKError):
    """An entry or LAC body whose digest (or ids) does not check out."""


class MetadataError(BKError):
    """Invalid ledger metadata (bad quorum sizes, unknown state...)."""


class ArchiveDamaged(BKError):
    """A backup archive's object that does not read as its format says, or whose hash is not the
    recorded one (:mod:`bkctl.wire.backup.archive`)."""


class SavedPlanError(MetadataError):
    """A rebalance's kept plan (:mod:`bkctl.wire.rebalance.saved`) that this version does not read."""


# Categories the CLI maps to exit codes; concrete errors subclass one of them.


class NotFound(BKError):
    """The thing asked for does not exist (ledger, entry, bookie, cluster)."""


class Conflict(BKError):
    """A concurrent change won: version conflict, fenced or closed ledger, existing node."""


class AccessDenied(BKError):
    """A store refused the credentials or their permissions (an object store's 403)."""


class Unreachable(BKError):
    """ZooKeeper or the bookies needed cannot be reached."""


class RunInProgress(Conflict):
    """A rebalance or a drain runs already on this cluster (one at a time): ``record`` is its
    :class:`~bkctl.wire.rebalance.executor.RunRecord` (None: one whose record does not read)."""

    def __init__(self, message: str, record: object | None = None):
        super().__init__(message)
        self.record = record


class ObjectMissing(NotFound):
    """An object store's object, bucket or folder that is not there (:mod:`bkctl.wire.objects`)."""


class ObjectDenied(AccessDenied):
    """An object store that refused the credentials or their permissions (:mod:`bkctl.wire.objects`)."""


class ObjectUnreachable(Unreachable):
    """An object store that did not answer in time, or at all (:mod:`bkctl.wire.objects`)."""


class AutorecoveryDisabled(Conflict):
    """An operation that needs autorecovery enabled (``underreplication/disable`` exists)."""


class NoAuditor(Unreachable):
    """No autorecovery daemon has won the auditor election (or the auditor has not started)."""
