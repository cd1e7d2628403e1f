"""Bookie identity at start-up: the cookie in ZooKeeper and in every directory's VERSION.

A cookie generated from the configuration plus the cluster's INSTANCEID must
match the ZooKeeper cookie and every directory's ``current/VERSION``
(BookKeeper's bookie/LegacyCookieValidation.java).  A new bookie (no ZooKeeper cookie, no VERSION
anywhere) stamps every directory first and creates the ZooKeeper node last,
so a crash in between leaves a state the next start can finish.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from bkctl.wire.errors import BKError, CodecError
from bkctl.wire.metadata.cookie import Cookie, CookieMismatch, parse_cookie

from . import layout

if TYPE_CHECKING:
    from ..metadata.store import MetadataStore

log = logging.getLogger("bookied.identity")


class IdentityError(BKError):
    """The bookie must not start: its cookie does not match its directories or the cluster."""


class Decommissioned(IdentityError):
    """The directories hold this bookie's cookie, ZooKeeper no longer does."""


def expected_cookie(
    bookie_id: str,
    journal_dirs: Iterable[str],
    ledger_dirs: Iterable[str],
    index_dirs: Iterable[str] | None,
    instance_id: str | None,
) -> Cookie:
    return Cookie(
        bookie_id, tuple(journal_dirs), tuple(ledger_dirs), instance_id, tuple(index_dirs) if index_dirs else None
    )


def check_and_stamp(store: MetadataStore, cookie: Cookie, *, allow_expansion: bool = False) -> str:
    """Verify (or create, for a new bookie) the cookies; returns "new", "ok" or "expanded"."""
    dirs = list(dict.fromkeys(list(cookie.journal_dirs) + list(cookie.ledger_dirs) + list(cookie.index_dirs or ())))
    found: dict[str, Cookie | None] = {}
    for d in dirs:
        text = layout.read_version_file(d)
        if text is None:
            found[d] = None
            continue
        try:
            found[d] = parse_cookie(text.encode() if isinstance(text, str) else text)
        except CodecError as e:
            raise IdentityError(f"{d}: unreadable cookie in current/VERSION: {e}") from None
    zk = store.cookies.get(cookie.bookie_id)
    stamped = [d for d, c in found.items() if c is not None]

    first = dirs[0]
    if zk is None and (
        not stamped or (layout.stamping_marker(first) and all(found[d] in (None, cookie) for d in dirs))
    ):
        # A new bookie, or one that crashed while stamping (the marker says so):
        # the marker first, then every directory, ZooKeeper last, then no marker.
        layout.set_stamping_marker(first, True)
        for d in dirs:
            layout.write_version_file(d, cookie.serialize().decode())
        store.cookies.put(cookie.bookie_id, cookie)
        layout.set_stamping_marker(first, False)
        log.info("new bookie %s: cookie written to %d directories and ZooKeeper", cookie.bookie_id, len(dirs))
        return "new"
    if zk is None:
        if len(stamped) == len(dirs) and all(found[d] == cookie for d in dirs):
            raise Decommissioned(
                f"bookie {cookie.bookie_id} has no cookie in ZooKeeper while its directories hold one: "
                f"it was decommissioned (or its cookie deleted); to bring it back as a new, empty bookie, "
                f"format its directories first ('bkctl bookieformat')"
            )
        raise IdentityError(
            f"bookie {cookie.bookie_id} has cookies in {', '.join(stamped)} but none in "
            f"ZooKeeper (was the cluster formatted? run 'bkctl bookieformat' to reuse the disks)"
        )
    layout.set_stamping_marker(first, False)  # a crash after the ZooKeeper cookie, before this
    zk_cookie, zk_version = zk
    try:
        cookie.verify_against(zk_cookie, allow_expansion=allow_expansion)
    except CookieMismatch as e:
        raise IdentityError(f"cookie mismatch with ZooKeeper: {e}") from None
    missing = [d for d, c in found.items() if c is None]
    for d, c in found.items():
        if c is None:
            continue
        try:
            cookie.verify_against(c, allow_expansion=allow_expansion)
        except CookieMismatch as e:
            raise IdentityError(f"cookie mismatch in {d}/current/VERSION: {e}") from None
    if missing:
        if not allow_expansion or any(d in cookie.journal_dirs for d in missing):
            raise IdentityError(
                f"directories without a cookie: {', '.join(missing)} (missing or wiped "
                f"directories; set allowStorageExpansion=true to add new ledger directories)"
            )
        for d in missing:
            layout.write_version_file(d, cookie.serialize().decode())
        for d in stamped:
            layout.write_version_file(d, cookie.serialize().decode())
        store.cookies.put(cookie.bookie_id, cookie, version=zk_version)
        log.warning("storage expanded with %s", ", ".join(missing))
        return "expanded"
    return "ok"
