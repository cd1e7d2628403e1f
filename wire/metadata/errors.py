"""Errors of the metadata store (:mod:`bkctl.wire.metadata.zk` and the tests' in-memory fake).

Each subclasses one of the categories of :mod:`bkctl.wire.errors` (``NotFound``,
``Conflict``, ``Unreachable``), from which the CLI derives its exit codes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bkctl.wire.errors import BKError, Conflict, NotFound, Unreachable

if TYPE_CHECKING:
    from bkctl.wire.metadata.cookie import Cookie
    from bkctl.wire.metadata.ledger import LedgerMetadata

__all__ = [
    "BookieRegistrationError",
    "ClusterExists",
    "ClusterNotFound",
    "CookieExists",
    "CookieVersionConflict",
    "LayoutMismatch",
    "LedgerExists",
    "MetadataStoreError",
    "MetadataVersionConflict",
    "NoSuchCookie",
    "NoSuchLedger",
    "NukeRefused",
    "VersionConflict",
    "ZKAuthError",
    "ZKStoreError",
    "ZKUnavailable",
]


class ZKStoreError(BKError):
    """Base of every error raised by the metadata store."""


class ZKUnavailable(ZKStoreError, Unreachable):
    """ZooKeeper cannot be reached (or the session was lost mid-operation)."""


class ZKAuthError(ZKStoreError, Unreachable):
    """ZooKeeper refused our credentials, or refused a znode to the identity they give."""


class MetadataStoreError(ZKStoreError):
    """An unexpected ZooKeeper answer (ACLs, quota, corrupt value...)."""


class ClusterExists(ZKStoreError, Conflict):
    """``cluster.init`` on a root that already exists."""


class ClusterNotFound(ZKStoreError, NotFound):
    """The ledgers root does not exist: the cluster was never initialised."""


class LayoutMismatch(ZKStoreError):
    """The configured ledger manager differs from the cluster's LAYOUT."""


class NukeRefused(ZKStoreError, Conflict):
    """``cluster.nuke`` found a reason not to delete anything."""


class NoSuchLedger(ZKStoreError, NotFound):
    def __init__(self, ledger_id: int):
        super().__init__(f"ledger {ledger_id} does not exist")
        self.ledger_id = ledger_id


class LedgerExists(ZKStoreError, Conflict):
    def __init__(self, ledger_id: int):
        super().__init__(f"ledger {ledger_id} already exists")
        self.ledger_id = ledger_id


class ValueExists(ZKStoreError, Conflict):
    """A znode to restore holds another value already."""

    def __init__(self, path: str):
        super().__init__(f"{path} exists with another value")
        self.path = path


class NoSuchCookie(ZKStoreError, NotFound):
    def __init__(self, bookie_id: str):
        super().__init__(f"bookie {bookie_id} has no cookie")
        self.bookie_id = bookie_id


class CookieExists(ZKStoreError, Conflict):
    def __init__(self, bookie_id: str):
        super().__init__(f"bookie {bookie_id} already has a cookie")
        self.bookie_id = bookie_id


class BookieRegistrationError(ZKStoreError, Conflict):
    """The registration node is held by another live session."""


class VersionConflict(ZKStoreError, Conflict):
    """A compare-and-set lost: the znode is no longer at ``expected_version``.

    ``current`` and ``current_version`` hold what the znode contains now
    (re-read right after the failed write).
    """

    def __init__(self, what: str, expected_version: int, current: object, current_version: int):
        super().__init__(
            f"{what} changed concurrently: expected version {expected_version}, it is now at version {current_version}"
        )
        self.expected_version = expected_version
        self.current = current
        self.current_version = current_version


class MetadataVersionConflict(VersionConflict):
    """Ledger metadata CAS failure; ``current`` is the current :class:`LedgerMetadata`."""

    def __init__(self, ledger_id: int, expected_version: int, current: LedgerMetadata, current_version: int):
        super().__init__(f"metadata of ledger {ledger_id}", expected_version, current, current_version)
        self.ledger_id = ledger_id
        self._metadata = current

    @property
    def metadata(self) -> LedgerMetadata:
        return self._metadata


class CookieVersionConflict(VersionConflict):
    """Cookie CAS failure; ``current`` is the current :class:`Cookie`."""

    def __init__(self, bookie_id: str, expected_version: int, current: Cookie, current_version: int):
        super().__init__(f"cookie of bookie {bookie_id}", expected_version, current, current_version)
        self.bookie_id = bookie_id
        self._cookie = current

    @property
    def cookie(self) -> Cookie:
        return self._cookie
