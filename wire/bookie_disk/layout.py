"""Directory layout of bookied's journal and ledger directories.

Every configured directory ``D`` keeps its data in ``D/current/``, as Apache
BookKeeper does since its layout version 3:

``D/current/VERSION``
    The cookie text (written by the cookie code; this module only offers
    atomic read/write helpers).
``D/current/bookied.layout``
    bookied's own storage layout stamp, two ``key=value`` lines::

        format=bookied-storage
        version=1

    It names the on-disk format of the journal and entry store files that
    live next to it, so that ``bkctl upgrade`` can upgrade or roll back a
    directory from one bookied storage version to another.

``prepare_dirs`` refuses directories it cannot use: a directory holding
Java's pre-``current/`` layout (``D/VERSION``, ``*.txn``, ``*.log``, ``*.idx``,
``lastId``, ``lastMark*`` or ``xx/`` index trees directly in ``D``) needs
``bkctl upgrade`` first, and a ``current/`` that holds Java's storage files
(bookied's formats are its own and cannot read them) or a layout stamp of
another version is rejected with a message that says so.

All writes here are atomic: write a temporary file in the same directory,
fsync it, rename it over the target, fsync the directory.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import threading
from collections.abc import Iterable

_log = logging.getLogger(__name__)

CURRENT_DIR = "current"
VERSION_FILE = "VERSION"
LAYOUT_FILE = "bookied.layout"
LAYOUT_FORMAT = "bookied-storage"
#: Storage layout version this bookied writes and reads.
CURRENT_LAYOUT_VERSION = 1

_JAVA_FILE_RE = re.compile(r"^(VERSION|lastId|lastMark(\.\d+)?|[0-9a-fA-F]+\.(txn|log|idx))$")
_JAVA_CURRENT_RE = re.compile(
    r"^(lastId|lastMark(\.\d+)?|[0-9a-fA-F]+\.(txn|log)|.*\.log\.compacting|ledgers|locations)$"
)
_HEX_DIR_RE = re.compile(r"^[0-9a-fA-F]{1,2}$")
#: a ledger directory's journal mark file: ``lastMark``, or ``lastMark.N`` beside it
_LAST_MARK_RE = re.compile(r"^lastMark(\.\d+)?$")


class LayoutError(Exception):
    """A directory that bookied cannot use as it is."""


class UpgradeNeeded(LayoutError):
    """The directory is in an older layout; run ``bkctl upgrade`` first."""


def is_last_mark(name: str) -> bool:
    """Whether a file of a ledger directory's ``current/`` is a journal mark (``lastMark``,
    ``lastMark.N``)."""
    return _LAST_MARK_RE.match(name) is not None


def current_dir(d: str) -> str:
    """``D/current``."""
    return os.path.join(d, CURRENT_DIR)


# ---------------------------------------------------------------- atomic files
def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory so that creations, renames and unlinks in it are durable (a bookie's
    directories, a backup archive's folders, a restore's journal's folder, an export's).

    A file system that cannot fsync a directory at all (some FUSE, network and virtual file
    systems) answers EINVAL: that errno, on this directory (opened O_DIRECTORY), is logged once
    per path (a WARNING) and not raised, as PostgreSQL's ``fsync_fname`` does; the names in such
    a directory are then as durable as its file system makes them, no more (docs/bookied.md,
    "Directories that cannot be synced").  Every other failure raises: EIO says the directory's
    last changes may be lost."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
        _cannot_sync_dir(os.path.abspath(path), exc)
    finally:
        os.close(fd)


#: the directories whose fsync answered EINVAL, each said once
_unsyncable_dirs: set[str] = set()
_unsyncable_lock = threading.Lock()


def _cannot_sync_dir(path: str, exc: OSError) -> None:
    with _unsyncable_lock:
        if path in _unsyncable_dirs:
            return
        _unsyncable_dirs.add(path)
    _log.warning(
        "cannot fsync directory %s (%s): its file system does not sync directories; the files "
        "created or renamed in it are as durable as that file system makes them",
        path,
        exc.strerror or exc,
    )


def write_all(fd: int, data: bytes, what: str) -> None:
    """os.write until every byte is written; a zero-length write is EIO (``what`` names the file kind)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.EIO, f"short write to {what}")
        view = view[n:]


def atomic_write(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new content."""
    dirname = os.path.dirname(os.path.abspath(path))
    tmp = f"{path}.tmp.{os.getpid()}.{id(data):x}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    os.close(fd)
    os.replace(tmp, path)
    fsync_dir(dirname)


def _read_optional(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


# ---------------------------------------------------------------- VERSION (cookie)
def read_version_file(d: str) -> str | None:
    """Text of ``D/current/VERSION`` (the cookie), or None if there is none."""
    raw = _read_optional(os.path.join(current_dir(d), VERSION_FILE))
    return None if raw is None else raw.decode("utf-8")


def write_version_file(d: str, text: str) -> None:
    """Atomically write ``D/current/VERSION`` (creating ``current/`` if needed)."""
    cur = current_dir(d)
    os.makedirs(cur, exist_ok=True)
    atomic_write(os.path.join(cur, VERSION_FILE), text.encode("utf-8"))


# ---------------------------------------------------------------- systemd's PrivateTmp=
def private_tmp(mountinfo: str | None = None) -> bool:
    """Whether this process sees a systemd private /tmp (PrivateTmp=yes): /tmp is
    then a bind mount of a ``systemd-private-*`` directory that systemd deletes
    when the service stops.  ``mountinfo``: the text of /proc/self/mountinfo."""
    if mountinfo is None:
        try:
            with open("/proc/self/mountinfo") as f:
                mountinfo = f.read()
        except OSError:
            return False
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[4] in ("/tmp", "/var/tmp") and "/systemd-private-" in fields[3]:
            return True
    return False


def under_tmp(d: str) -> bool:
    path = os.path.abspath(d)
    return any(path == t or path.startswith(t + "/") for t in ("/tmp", "/var/tmp"))


# ---------------------------------------------------------------- first-start marker
#: Present in the first directory's ``current/`` while a new bookie stamps its
#: cookies (directories first, ZooKeeper last): it tells a crash between the two
#: steps from a bookie whose ZooKeeper cookie was deleted (decommissioned).
STAMPING_FILE = "bookied.stamping"


def stamping_marker(d: str) -> bool:
    return os.path.exists(os.path.join(current_dir(d), STAMPING_FILE))


def set_stamping_marker(d: str, present: bool) -> None:
    path = os.path.join(current_dir(d), STAMPING_FILE)
    if present:
        os.makedirs(current_dir(d), exist_ok=True)
        atomic_write(path, b"cookies being stamped by a new bookie\n")
    elif os.path.exists(path):
        os.unlink(path)
        fsync_dir(current_dir(d))


# ---------------------------------------------------------------- layout stamp
def read_layout_version(d: str) -> int | None:
    """The bookied storage layout version of ``D`` (None if ``D/current/bookied.layout`` is absent).

    Raises LayoutError if the file exists but is not a bookied layout stamp.
    """
    path = os.path.join(current_dir(d), LAYOUT_FILE)
    raw = _read_optional(path)
    if raw is None:
        return None
    fields: dict[str, str] = {}
    try:
        for line in raw.decode("utf-8").splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, value = line.partition("=")
            if not sep:
                raise ValueError(line)
            fields[key.strip()] = value.strip()
        if fields.get("format") != LAYOUT_FORMAT:
            raise ValueError(f"format {fields.get('format')!r}")
        version = int(fields["version"])
    except (UnicodeDecodeError, ValueError, KeyError) as e:
        raise LayoutError(f"{path}: not a {LAYOUT_FORMAT} layout file ({e})") from None
    if version < 1:
        raise LayoutError(f"{path}: invalid layout version {version}")
    return version


def write_layout_version(d: str, version: int) -> None:
    """Atomically write ``D/current/bookied.layout`` with ``version`` (creating ``current/``)."""
    if int(version) < 1:
        raise ValueError(f"invalid layout version {version}")
    cur = current_dir(d)
    os.makedirs(cur, exist_ok=True)
    text = f"format={LAYOUT_FORMAT}\nversion={int(version)}\n"
    atomic_write(os.path.join(cur, LAYOUT_FILE), text.encode("ascii"))


# ---------------------------------------------------------------- detection
def old_layout_files(d: str) -> list[str]:
    """Names in ``D`` itself that belong to Java's pre-``current/`` layouts (versions 1 and 2)."""
    try:
        names = sorted(os.listdir(d))
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        path = os.path.join(d, name)
        if _JAVA_FILE_RE.match(name) and os.path.isfile(path):
            found.append(name)
        elif _HEX_DIR_RE.match(name) and os.path.isdir(path) and _has_idx_tree(path):
            found.append(name + "/")
    return found


def _has_idx_tree(path: str) -> bool:
    for sub in os.listdir(path):
        subpath = os.path.join(path, sub)
        if _HEX_DIR_RE.match(sub) and os.path.isdir(subpath) and any(n.endswith(".idx") for n in os.listdir(subpath)):
            return True
    return False


def java_storage_files(d: str) -> list[str]:
    """Names in ``D/current`` that belong to a Java bookie's storage (journal, entry logs, indexes)."""
    cur = current_dir(d)
    try:
        names = sorted(os.listdir(cur))
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        path = os.path.join(cur, name)
        if _JAVA_CURRENT_RE.match(name):
            found.append(name)
        elif _HEX_DIR_RE.match(name) and os.path.isdir(path) and _has_idx_tree(path):
            found.append(name + "/")
    return found


def _check_dir(d: str) -> str | None:
    """Problem that prevents using ``d``, or None; raises nothing."""
    cur = current_dir(d)
    if not os.path.isdir(cur):
        if os.path.exists(d) and not os.path.isdir(d):
            return f"{d}: not a directory"
        old = old_layout_files(d)
        if old:
            shown = ", ".join(old[:5]) + (" ..." if len(old) > 5 else "")
            return (
                f"{d}: directory has an old (pre-current/) BookKeeper layout ({shown}); "
                f"upgrade needed: run 'bkctl upgrade'"
            )
        return None
    try:
        version = read_layout_version(d)
    except LayoutError as e:
        return str(e)
    if version is None:
        java = java_storage_files(d)
        if java:
            shown = ", ".join(java[:5]) + (" ..." if len(java) > 5 else "")
            return (
                f"{cur}: holds Apache BookKeeper (Java) storage files ({shown}) and no "
                f"{LAYOUT_FILE}; bookied's storage format is its own and cannot use them"
            )
        return None
    if version < CURRENT_LAYOUT_VERSION:
        return (
            f"{cur}: storage layout version {version} is older than {CURRENT_LAYOUT_VERSION}; "
            f"upgrade needed: run 'bkctl upgrade'"
        )
    if version > CURRENT_LAYOUT_VERSION:
        return (
            f"{cur}: storage layout version {version} was written by a newer bookied "
            f"(this one handles {CURRENT_LAYOUT_VERSION}); roll back with that version first"
        )
    return None


def prepare_dirs(dirs: Iterable[str]) -> list[str]:
    """Check every directory, then create ``D/current/`` and its layout stamp where missing.

    Returns the ``current/`` paths in the order given. Nothing is created unless
    every directory passes: an old Java layout raises UpgradeNeeded, any other
    unusable directory LayoutError (the message lists every offending directory).
    """
    dirs = list(dirs)
    problems = [(d, p) for d in dirs if (p := _check_dir(d)) is not None]
    if problems:
        msg = "; ".join(p for _, p in problems)
        if all("upgrade needed" in p for _, p in problems):
            raise UpgradeNeeded(msg)
        raise LayoutError(msg)
    out = []
    for d in dirs:
        cur = current_dir(d)
        if not os.path.isdir(cur):
            os.makedirs(cur, exist_ok=True)
            fsync_dir(d)
        if read_layout_version(d) is None:
            write_layout_version(d, CURRENT_LAYOUT_VERSION)
        out.append(cur)
    return out
