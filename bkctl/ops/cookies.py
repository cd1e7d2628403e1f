"""Bookie cookies: the ZooKeeper node ``cookies/<bookieId>`` and every directory's ``current/VERSION``.

Raw CRUD on the ZooKeeper cookie (Java bkctl's ``cookie get|create|update|
delete|generate``) and ``cookie admin`` (BookieShell's ``updatecookie``) for a
stopped bookie's local directories.  Cookies are read and written with the
one codec, :mod:`bkctl.wire.metadata.cookie`; local VERSION files with bookied's
layout helpers.  Java bookies' directories and bookied's hold the same
``current/VERSION``, so everything here works for both.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from bkctl.wire.metadata.cookie import Cookie, parse_cookie

from .errors import BadInput, Conflict, NotFound
from .results import omitted_when_none

if TYPE_CHECKING:
    from bkctl.wire.metadata.store import MetadataStore

    from .bookie_conf import BookieDirs


@dataclass(frozen=True)
class CookieInfo:
    """A bookie's cookie as ``cookie get`` shows it: its directories, instance and layout, the
    znode's version and the cookie's text; ``cookie update`` adds the cookie it replaced
    (``previous``), ``cookie generate`` the file it wrote."""

    bookie_id: str
    bookie_host: str
    journal_dirs: list[str]
    ledger_dirs: list[str]
    index_dirs: list[str] | None
    instance_id: str | None
    layout_version: int
    version: int | None
    text: str
    previous: CookieInfo | None = omitted_when_none()
    file: str | None = omitted_when_none()


@dataclass(frozen=True)
class CookieDeleted:
    """``cookie delete``: the bookie whose ZooKeeper cookie went, at which znode version."""

    bookie_id: str
    deleted: bool
    version: int


@dataclass(frozen=True)
class ZooKeeperCookie:
    """``cookie admin --list``: the bookie's cookie in ZooKeeper (its znode path, without a store None)."""

    path: str | None
    exists: bool
    version: int | None
    bookie_host: str | None


@dataclass(frozen=True)
class LocalCookie:
    """``cookie admin --list``: a directory's ``current/VERSION``, and whether it is ZooKeeper's cookie."""

    dir: str
    path: str
    exists: bool
    bookie_host: str | None
    matches_zookeeper: bool
    error: str | None


@dataclass(frozen=True)
class CookieListing:
    """``cookie admin --list``: the configured bookie's cookies, in ZooKeeper and in each directory."""

    bookie_id: str
    zookeeper: ZooKeeperCookie
    local: list[LocalCookie]


@dataclass(frozen=True)
class CookiesDeleted:
    """``cookie admin --delete``: the VERSION files removed and whether ZooKeeper's cookie went too."""

    bookie_id: str
    deleted_files: list[str]
    zookeeper_deleted: bool


@dataclass(frozen=True)
class StorageExpanded:
    """``cookie admin --expand``: the start-up check's outcome and the directories it stamped."""

    bookie_id: str
    outcome: str
    added_dirs: list[str]


@dataclass(frozen=True)
class CookieRenamed:
    """``cookie admin --from-id`` (``--hostname``, ``--ip``): the cookie moved to the configured id."""

    bookie_id: str
    old_bookie_id: str
    rewritten_dirs: list[str]
    zookeeper_created: bool
    old_cookie_deleted: bool


def cookie_doc(
    bookie_id: str, cookie: Cookie, version: int | None, previous: CookieInfo | None = None, file: str | None = None
) -> CookieInfo:
    """A cookie as the cookie commands describe it."""
    return CookieInfo(
        bookie_id,
        cookie.bookie_id,
        list(cookie.journal_dirs),
        list(cookie.ledger_dirs),
        None if cookie.index_dirs is None else list(cookie.index_dirs),
        cookie.instance_id,
        cookie.layout_version,
        version,
        cookie.serialize().decode("utf-8"),
        previous,
        file,
    )


def _check_id(bookie_id: str) -> str:
    from .recovery import check_bookie_ids

    return check_bookie_ids([bookie_id])[0]


def read_cookie_file(path: str) -> Cookie:
    """A cookie file (as ``cookie generate`` or a VERSION file holds), parsed; bad file: exit 2."""
    from . import parse_input_file

    return parse_input_file(path, parse_cookie, "a cookie")[1]


def _check_host(bookie_id: str, cookie: Cookie, path: str) -> None:
    if cookie.bookie_id != bookie_id:
        raise BadInput(f"{path} is the cookie of bookie {cookie.bookie_id}, not of {bookie_id}")


def get(store: MetadataStore, bookie_id: str) -> CookieInfo:
    found = store.cookies.get(_check_id(bookie_id))
    if found is None:
        from bkctl.wire.metadata.errors import NoSuchCookie

        raise NoSuchCookie(bookie_id)
    return cookie_doc(bookie_id, *found)


def create(store: MetadataStore, bookie_id: str, path: str) -> CookieInfo:
    """ZooKeeper create (exit 4 if the bookie has a cookie already)."""
    cookie = read_cookie_file(path)
    _check_host(_check_id(bookie_id), cookie, path)
    version = store.cookies.put(bookie_id, cookie)
    return cookie_doc(bookie_id, cookie, version)


def update(store: MetadataStore, bookie_id: str, path: str) -> CookieInfo:
    """Replace the stored cookie (compare-and-set on the version just read; exit 3 without one)."""
    cookie = read_cookie_file(path)
    _check_host(_check_id(bookie_id), cookie, path)
    found = store.cookies.get(bookie_id)
    if found is None:
        from bkctl.wire.metadata.errors import NoSuchCookie

        raise NoSuchCookie(bookie_id)
    version = store.cookies.put(bookie_id, cookie, version=found[1])
    return cookie_doc(bookie_id, cookie, version, previous=cookie_doc(bookie_id, *found))


def _refuse_registered(store: MetadataStore, bookie_id: str) -> None:
    if store.registration.is_registered(bookie_id):
        raise Conflict(f"bookie {bookie_id} is running (registered in ZooKeeper); stop it first")


def delete(store: MetadataStore, bookie_id: str, confirm: Callable[[], object] | None = None) -> CookieDeleted:
    """Delete the ZooKeeper cookie of a bookie that is not running (exit 4 while it is)."""
    found = store.cookies.get(_check_id(bookie_id))
    if found is None:
        from bkctl.wire.metadata.errors import NoSuchCookie

        raise NoSuchCookie(bookie_id)
    _refuse_registered(store, bookie_id)
    if confirm is not None:
        confirm()
    store.cookies.delete(bookie_id, found[1])
    return CookieDeleted(bookie_id, True, found[1])


def generate(
    bookie_id: str,
    instance_id: str | None,
    journal_dirs: list[str],
    ledger_dirs: list[str],
    index_dirs: list[str] | None,
    out: str,
) -> CookieInfo:
    """Write a cookie for these directories to ``out`` (layout 5, Java's text format)."""
    cookie = Cookie(
        _check_id(bookie_id),
        tuple(journal_dirs),
        tuple(ledger_dirs),
        instance_id,
        tuple(index_dirs) if index_dirs else None,
    )
    data = cookie.serialize()
    with open(out, "wb") as f:
        f.write(data)
    return cookie_doc(bookie_id, cookie, None, file=out)


def split_dirs(values: Iterable[str] | None) -> list[str]:
    """``--journal-dirs a,b --journal-dirs c`` -> ``[a, b, c]``."""
    out: list[str] = []
    for v in values or ():
        out += [d.strip() for d in v.split(",") if d.strip()]
    return out


# -- cookie admin: a stopped bookie's directories ----------------------------------------


def _local_cookies(dirs: BookieDirs) -> dict[str, Cookie | None | str]:
    """Every directory's VERSION cookie: a Cookie, None (no VERSION) or an error text."""
    from bkctl.wire.bookie_disk import layout
    from bkctl.wire.errors import CodecError

    out: dict[str, Cookie | None | str] = {}
    for d in dirs.all:
        text = layout.read_version_file(d)
        if text is None:
            out[d] = None
            continue
        try:
            out[d] = parse_cookie(text.encode("utf-8"))
        except CodecError as e:
            out[d] = f"unreadable: {e}"
    return out


def version_path(d: str) -> str:
    from bkctl.wire.bookie_disk import layout

    return os.path.join(layout.current_dir(d), layout.VERSION_FILE)


def admin_list(store: MetadataStore | None, dirs: BookieDirs) -> CookieListing:
    """The local VERSION files and the ZooKeeper cookie of the configured bookie."""
    from bkctl.wire.metadata import paths

    zk = store.cookies.get(dirs.known_id) if store is not None else None
    local = []
    for d, c in _local_cookies(dirs).items():
        local.append(
            LocalCookie(
                d,
                version_path(d),
                c is not None,
                c.bookie_id if isinstance(c, Cookie) else None,
                isinstance(c, Cookie) and zk is not None and c == zk[0],
                c if isinstance(c, str) else None,
            )
        )
    zookeeper = ZooKeeperCookie(
        paths.cookie_path(dirs.known_id, store.root) if store is not None else None,
        zk is not None,
        zk[1] if zk else None,
        zk[0].bookie_id if zk else None,
    )
    return CookieListing(dirs.known_id, zookeeper, local)


def admin_delete(store: MetadataStore, dirs: BookieDirs, confirm: Callable[[int, bool], object]) -> CookiesDeleted:
    """Delete every local VERSION file and the ZooKeeper cookie (``confirm(what)`` asked first)."""
    _refuse_registered(store, dirs.known_id)
    files = [version_path(d) for d, c in _local_cookies(dirs).items() if c is not None]
    zk = store.cookies.get(dirs.known_id)
    if not files and zk is None:
        raise NotFound(f"bookie {dirs.known_id} has no cookie, locally or in ZooKeeper")
    confirm(len(files), zk is not None)
    for f in files:
        os.unlink(f)
    if zk is not None:
        store.cookies.delete(dirs.known_id, zk[1])
    return CookiesDeleted(dirs.known_id, files, zk is not None)


def admin_expand(store: MetadataStore, dirs: BookieDirs) -> StorageExpanded:
    """Accept new empty ledger/index directories: stamp them and rewrite the ZooKeeper cookie
    (bookied's start-up check with allowStorageExpansion=true)."""
    from bkctl.wire.bookie_disk.identity import IdentityError, check_and_stamp

    _refuse_registered(store, dirs.known_id)
    before = {d for d, c in _local_cookies(dirs).items() if c is not None}
    try:
        outcome = check_and_stamp(store, dirs.cookie(store.cluster.instance_id()), allow_expansion=True)
    except IdentityError as e:
        raise Conflict(str(e)) from None
    return StorageExpanded(dirs.known_id, outcome, [d for d in dirs.all if d not in before] if outcome != "ok" else [])


def admin_rename(store: MetadataStore, dirs: BookieDirs, old_id: str) -> CookieRenamed:
    """Move a stopped bookie's cookie from ``old_id`` to the configured id.

    Java's order: every local VERSION gets the cookie with the new id, the
    ZooKeeper cookie is created under the new id, then the old one is
    deleted (on the version read).  Safe to run again after an interruption:
    directories already rewritten and a new ZooKeeper cookie equal to ours
    are accepted.
    """
    new_id = dirs.known_id
    _check_id(old_id)
    if old_id == new_id:
        raise BadInput(f"the configured bookie id is already {new_id}")
    for b in (old_id, new_id):
        _refuse_registered(store, b)
    old = store.cookies.get(old_id)
    new = store.cookies.get(new_id)
    found = old if old is not None else new
    if found is None:
        raise NotFound(f"no cookie in ZooKeeper for {old_id} (nor {new_id})")
    source = found[0]
    cookie = replace(source, bookie_id=new_id)
    if new is not None and new[0] != cookie:
        raise Conflict(f"bookie {new_id} already has a different cookie in ZooKeeper")
    from bkctl.wire.bookie_disk import layout

    rewritten = []
    for d, c in _local_cookies(dirs).items():
        if isinstance(c, str):
            raise Conflict(f"{version_path(d)}: {c}")
        if c is not None and c.bookie_id not in (old_id, new_id):
            raise Conflict(f"{version_path(d)} belongs to bookie {c.bookie_id}, not {old_id}")
        if c is not None and c != cookie:  # a directory without VERSION is new: --expand's business
            layout.write_version_file(d, cookie.serialize().decode("utf-8"))
            rewritten.append(d)
    if new is None:
        store.cookies.put(new_id, cookie)
    old_deleted = False
    if old is not None:
        store.cookies.delete(old_id, old[1])
        old_deleted = True
    return CookieRenamed(new_id, old_id, rewritten, new is None, old_deleted)
