"""Bookie operations: listing, formatting a bookie's disks, and the directory-layout upgrade.

``bookieformat`` and ``upgrade`` act on the local directories named in a
bk_server.conf (:func:`.bookie_conf.bookie_dirs`), so they run on the bookie's host, with the
bookie stopped.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from bkctl.wire.metadata.registration_state import Registrations, RegistrationState

from .bookie_conf import BookieDirs
from .errors import Conflict, OpFailed

if TYPE_CHECKING:
    from bkctl.wire.metadata.store import MetadataStore


class Registration(Enum):
    """A bookie of ``bookie list``: writable, read-only, or down (a cookie, not registered).
    The registration's state is the one rule of :mod:`~bkctl.wire.metadata.registration_state`."""

    WRITABLE = "writable"
    READ_ONLY = "read-only"
    DOWN = "down"

    @classmethod
    def of(cls, state: RegistrationState) -> Registration:
        return cls.DOWN if state is RegistrationState.NOT_REGISTERED else cls(state.value)


@dataclass(frozen=True, slots=True)
class BookieRow:
    """One bookie of ``bookie list``: its id and state.  The views that read more of a bookie
    extend it with their own fields (``bookie list --disk``'s :class:`~.capacity.BookieCapacity`)
    or read it (:func:`~.bookie_reads.read_bookies`)."""

    bookie_id: str
    state: Registration


def list_bookies(store: MetadataStore, which: str = "writable") -> list[BookieRow]:
    """``which``: writable, readonly or all (every bookie with a cookie)."""
    regs = Registrations.read(store.registration)
    if which == "all":
        ids = set(store.registration.all_bookies()) | regs.registered
    elif which == "readonly":
        ids = set(regs.readonly)
    else:
        ids = set(regs.taking_writes)
    return [BookieRow(b, Registration.of(regs.state_of(b))) for b in sorted(ids)]


# -- local directories ---------------------------------------------------------------


@dataclass(frozen=True)
class BookieFormatted:
    """``bookieformat``: the directories emptied, and whether the ZooKeeper cookie went too."""

    bookie_id: str | None
    directories: list[str]
    cookie_deleted: bool
    formatted: bool = True


@dataclass(frozen=True)
class NotFormatted:
    """``bookieformat`` declined at its question: nothing changed."""

    formatted: bool = False


@dataclass(frozen=True)
class Upgraded:
    """``upgrade --upgrade``: the directories moved into ``current/``, and those already there."""

    upgraded: list[str]
    already_current: list[str]


@dataclass(frozen=True)
class Finalized:
    """``upgrade --finalize``: the directories whose old layout's files were deleted."""

    finalized: list[str]


@dataclass(frozen=True)
class RolledBack:
    """``upgrade --rollback``: the directories whose ``current/`` went; the ZooKeeper cookie went too."""

    rolled_back: list[str]
    cookie_deleted: bool


def _non_empty(d: str) -> bool:
    try:
        return bool(os.listdir(d))
    except FileNotFoundError:
        return False


def bookieformat(
    dirs: BookieDirs, store: MetadataStore | None, confirm: Callable[[], bool], delete_cookie: bool = False
) -> BookieFormatted | NotFormatted:
    """BookKeeper's ``bookieformat``: empty every journal, ledger and index directory.

    ``confirm()`` is asked when a journal directory holds data.  With
    ``delete_cookie`` the bookie's cookie in ZooKeeper is deleted too (it
    must exist).
    """
    if any(_non_empty(d) for d in dirs.journal) and not confirm():
        return NotFormatted()
    if store is not None and dirs.bookie_id is not None and _is_registered(store, dirs.bookie_id):
        raise Conflict(f"bookie {dirs.bookie_id} is running (registered in ZooKeeper); stop it first")
    wiped = []
    for d in dirs.all:
        os.makedirs(d, exist_ok=True)
        for name in os.listdir(d):
            path = os.path.join(d, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        wiped.append(d)
    cookie_deleted = False
    if delete_cookie:
        assert store is not None, "deleting the cookie needs the store"
        found = store.cookies.get(dirs.known_id)
        if found is None:
            from bkctl.wire.metadata.errors import NoSuchCookie

            raise NoSuchCookie(f"bookie {dirs.bookie_id} has no cookie in ZooKeeper")
        store.cookies.delete(dirs.known_id, found[1])
        cookie_deleted = True
    return BookieFormatted(dirs.bookie_id, wiped, cookie_deleted)


def _is_registered(store: MetadataStore, bookie_id: str) -> bool:
    return store.registration.is_registered(bookie_id)


# -- FileSystemUpgrade ------------------------------------------------------------------
# Directory layout versions (BookKeeper's bookie/FileSystemUpgrade.java): 1 = data files directly in D, no VERSION;
# 2 = the same plus D/VERSION holding "2"; 3+ = D/current/ with a cookie in current/VERSION.

CURRENT_DIR_LAYOUT = 5


def previous_version(d: str) -> int:
    from bkctl.wire.bookie_disk.layout import old_layout_files

    try:
        with open(os.path.join(d, "VERSION")) as f:
            return int(f.read().strip())
    except FileNotFoundError:
        pass
    except ValueError:
        raise OpFailed(f"{d}/VERSION does not hold a layout version number") from None
    return 1 if [n for n in old_layout_files(d) if n != "VERSION"] else CURRENT_DIR_LAYOUT


def _old_entries(d: str) -> list[str]:
    from bkctl.wire.bookie_disk.layout import old_layout_files

    return [n.rstrip("/") for n in old_layout_files(d) if n != "VERSION"]


def upgrade(dirs: BookieDirs, store: MetadataStore) -> Upgraded:
    """Move every old-layout directory to ``current/`` by hard links; then create the ZK cookie."""
    instance_id = store.cluster.instance_id()
    cookie = dirs.cookie(instance_id).serialize()
    todo = [d for d in dirs.all if previous_version(d) < 3]
    newer = [d for d in dirs.all if previous_version(d) > CURRENT_DIR_LAYOUT]
    if newer:
        raise OpFailed(f"directory layout newer than this tool understands: {', '.join(newer)}")
    staged = []
    for d in todo:
        if os.path.exists(os.path.join(d, "current")):
            raise Conflict(f"{d}/current already exists: finish or roll back the earlier upgrade first")
        tmp = os.path.join(d, f"upgradeTmp.{time.monotonic_ns()}")
        os.makedirs(tmp)
        with open(os.path.join(tmp, "VERSION"), "wb") as f:
            f.write(cookie)
        for name in _old_entries(d):
            _link_tree(os.path.join(d, name), os.path.join(tmp, name))
        staged.append((d, tmp))
    for d, tmp in staged:
        os.rename(tmp, os.path.join(d, "current"))
    if staged:
        store.cookies.put(dirs.known_id, cookie)  # create: fails if one exists
    return Upgraded([d for d, _ in staged], [d for d in dirs.all if d not in todo])


def _link_tree(src: str, dst: str) -> None:
    if os.path.isdir(src):
        os.makedirs(dst)
        for name in os.listdir(src):
            _link_tree(os.path.join(src, name), os.path.join(dst, name))
    else:
        os.link(src, dst)


def finalize(dirs: BookieDirs) -> Finalized:
    """Delete the old top-level files of upgraded directories (the copies in current/ stay)."""
    done = []
    for d in dirs.all:
        if previous_version(d) >= 3:
            continue
        if not os.path.isdir(os.path.join(d, "current")):
            raise OpFailed(f"{d} has not been upgraded yet: run upgrade first")
        for name in _old_entries(d):
            path = os.path.join(d, name)
            shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
        try:
            os.unlink(os.path.join(d, "VERSION"))
        except FileNotFoundError:
            pass
        done.append(d)
    return Finalized(done)


def rollback(dirs: BookieDirs, store: MetadataStore) -> RolledBack:
    """Undo an upgrade that is not finalized: delete ``current/`` and the ZK cookie.

    Unlike Java's tool, which deletes ``current/`` of every directory (even
    one that was never upgraded, losing its data), this refuses unless every
    directory still has its old layout to fall back to.
    """
    not_upgraded = [d for d in dirs.all if previous_version(d) >= 3]
    if not_upgraded:
        raise OpFailed(
            "nothing to roll back to in "
            + ", ".join(not_upgraded)
            + " (no old layout: never upgraded, or already finalized)",
        )
    rolled = []
    for d in dirs.all:
        cur = os.path.join(d, "current")
        if os.path.isdir(cur):
            shutil.rmtree(cur)
            rolled.append(d)
    found = store.cookies.get(dirs.known_id)
    if found is None:
        from bkctl.wire.metadata.errors import NoSuchCookie

        raise NoSuchCookie(f"bookie {dirs.bookie_id} has no cookie in ZooKeeper to delete")
    store.cookies.delete(dirs.known_id, found[1])
    return RolledBack(rolled, True)
