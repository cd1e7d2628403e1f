"""Bookie cookies (``<root>/cookies/<id>``) with compare-and-set on their version,
as Java's ZKRegistrationManager reads, writes and removes them."""

from __future__ import annotations

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from bkctl.wire.errors import CodecError
from bkctl.wire.metadata import paths as P
from bkctl.wire.metadata.bookieid import check_bookie_id
from bkctl.wire.metadata.cookie import Cookie, parse_cookie
from bkctl.wire.metadata.errors import (
    CookieExists,
    CookieVersionConflict,
    MetadataStoreError,
    NoSuchCookie,
    ZKStoreError,
)
from bkctl.wire.metadata.zk.session import Manager, zk_call

__all__ = ["ZKCookieManager"]


class ZKCookieManager(Manager):
    """Read, create, compare-and-set and delete bookie cookies."""

    @zk_call
    def get(self, bookie_id: str) -> tuple[Cookie, int] | None:
        """``(cookie, version)``, or None when the bookie has no cookie."""
        check_bookie_id(bookie_id)
        try:
            data, stat = self._session.get(P.cookie_path(bookie_id, self._root))
        except NoNodeError:
            return None
        try:
            return parse_cookie(data), stat.version
        except CodecError as exc:
            raise MetadataStoreError(f"corrupt cookie of bookie {bookie_id}: {exc}") from None

    @zk_call
    def put(self, bookie_id: str, cookie: Cookie | bytes, version: int | None = None) -> int:
        """Create (``version=None``) or compare-and-set the cookie; returns the new version."""
        check_bookie_id(bookie_id)
        data = cookie if isinstance(cookie, bytes) else cookie.serialize()
        path = P.cookie_path(bookie_id, self._root)
        if version is None:
            self._session.require_root()
            self._session.create_if_missing(self._session.path(P.COOKIES))
            try:
                self._zk.create(path, data)
            except NodeExistsError:
                raise CookieExists(bookie_id) from None
            return 0
        try:
            return int(self._zk.set(path, data, version=version).version)
        except NoNodeError:
            raise NoSuchCookie(bookie_id) from None
        except BadVersionError:
            raise self._conflict(bookie_id, version) from None

    def _conflict(self, bookie_id: str, version: int) -> ZKStoreError:
        current = self.get(bookie_id)
        if current is None:
            return NoSuchCookie(bookie_id)
        return CookieVersionConflict(bookie_id, version, current[0], current[1])

    @zk_call
    def delete(self, bookie_id: str, version: int = -1) -> None:
        check_bookie_id(bookie_id)
        try:
            self._zk.delete(P.cookie_path(bookie_id, self._root), version)
        except NoNodeError:
            raise NoSuchCookie(bookie_id) from None
        except BadVersionError:
            raise self._conflict(bookie_id, version) from None
