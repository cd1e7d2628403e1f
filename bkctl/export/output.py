"""The export directory: staging, composing and swapping it into place.

An export never writes into ``DIR`` itself.  Its Spark tasks write the new
rows into a staging directory next to it (``DIR.bkctl-staging-TOKEN``); once the rows
are verified, the partitions of the previous export that are kept are
hard-linked into the staging directory (copied where links are not
possible), the manifest and ``_SUCCESS`` are written, and the staging
directory replaces ``DIR`` by two renames (``DIR`` -> ``.DIR.bkctl-old-TOKEN``,
staging -> ``DIR``).  A failure before the renames leaves ``DIR`` as it was;
a crash between them leaves the previous export in ``.DIR.bkctl-old-*``, and
the next export puts it back first (:func:`recover_interrupted`).  One export
at a time into ``DIR``: each holds ``.DIR.bkctl-lock`` beside it while it runs,
and deletes it when done (a killed export leaves it, and the next one deletes it).

Partition folders are Hive style: ``ledger_id=N/`` or, partitioned by date,
``date=YYYY-MM-DD/ledger_id=N/`` (the ledger level keeps re-exports of one
ledger from touching the other ledgers of the same day).

Modes: ``replace`` (default) drops the previous partitions of the exported
ledgers and keeps every other one; ``overwrite`` keeps nothing of the
previous export; ``append`` keeps everything and adds the new files.

This works on paths the driver can reach as a local file system (a local
disk, or a mount shared with the executors); paths with another URI scheme
are refused.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bkctl.wire.bookie_disk.layout import fsync_dir
from bkctl.wire.errors import Conflict

__all__ = [
    "MANIFEST",
    "MODES",
    "NO_DATE",
    "SUCCESS",
    "ExportLocked",
    "NotAnExport",
    "OutputDir",
    "leaf_partitions",
    "local_path",
]

MANIFEST = "_manifest.json"
SUCCESS = "_SUCCESS"
MODES = ("replace", "overwrite", "append")
_LEAF_LEDGER = re.compile(r"ledger_id=(\d+)")
#: Spark's (Hive's) value for a date partition whose ledger has no creation time.
NO_DATE = "__HIVE_DEFAULT_PARTITION__"
_DATE = re.compile(r"date=(\d{4}-\d{2}-\d{2}|" + NO_DATE + ")")
_TOPIC = re.compile(r"topic=[^/]+")


class NotAnExport(Conflict):
    """The output directory holds something that is not a bkctl export."""


class ExportLocked(Conflict):
    """Another export to the same directory is running."""


def local_path(out: str | os.PathLike) -> Path:
    """``out`` as an absolute local path (``file:`` URIs accepted)."""
    text = os.fspath(out)
    if text.startswith("file://"):
        text = text[len("file://") :]
    elif text.startswith("file:"):
        text = text[len("file:") :]
    elif re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", text):
        raise ValueError(
            f"--out {text}: only local paths (or a mount shared with the executors) are supported, not URIs"
        )
    return Path(os.path.abspath(os.path.expanduser(text)))


def leaf_partitions(root: Path) -> dict[str, int]:
    """``{relative leaf partition path: ledger id}`` below an export root
    (``ledger_id=N``, ``date=D/ledger_id=N``, or a topic export's
    ``topic=T/date=D/ledger_id=N``)."""
    leaves: dict[str, int] = {}
    if not root.is_dir():
        return leaves
    for child in sorted(root.iterdir()):
        if not child.is_dir():
            continue
        if _TOPIC.fullmatch(child.name):
            leaves.update({f"{child.name}/{rel}": lid for rel, lid in leaf_partitions(child).items() if "/" in rel})
            continue
        m = _LEAF_LEDGER.fullmatch(child.name)
        if m:
            leaves[child.name] = int(m.group(1))
            continue
        if _DATE.fullmatch(child.name):
            for leaf in sorted(child.iterdir()):
                m = _LEAF_LEDGER.fullmatch(leaf.name)
                if leaf.is_dir() and m:
                    leaves[f"{child.name}/{leaf.name}"] = int(m.group(1))
    return leaves


def data_files(directory: Path) -> Iterator[Path]:
    """Parquet data files below ``directory`` (hidden and ``_`` files skipped)."""
    if not directory.is_dir():
        return
    for path in sorted(directory.rglob("*")):
        if (
            path.is_file()
            and not path.name.startswith((".", "_"))
            and not any(part.startswith((".", "_")) for part in path.relative_to(directory).parts[:-1])
        ):
            yield path


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
        shutil.copy2(src, dst)


def _free_name(directory: Path, name: str) -> Path:
    target = directory / name
    n = 1
    while target.exists():
        stem, dot, ext = name.partition(".")
        target = directory / f"{stem}-prev{n}{dot}{ext}"
        n += 1
    return target


def _link_tree(src: Path, dst: Path) -> int:
    """Hard-link every file of ``src`` into ``dst`` (made as needed); returns the count."""
    count = 0
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        target = dst / rel
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif path.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists():
                target = _free_name(target.parent, target.name)
            _link_or_copy(path, target)
            count += 1
    return count


class OutputDir:
    """One export into ``out``: its staging directory, lock and commit."""

    def __init__(self, out: str | os.PathLike, token: str | None = None):
        self.path = local_path(out)
        self.parent = self.path.parent
        self.name = self.path.name
        if not self.name:
            raise ValueError(f"--out {out}: not a directory name")
        self.token = token or uuid.uuid4().hex[:12]
        # not hidden: Spark ignores paths whose name starts with "." or "_"
        self.staging = self.parent / f"{self.name}.bkctl-staging-{self.token}"
        self._old = self.parent / f".{self.name}.bkctl-old-{self.token}"
        #: the lock file beside DIR that :meth:`locked` holds (``.DIR.bkctl-lock``, named by
        #: :class:`ExportLocked`); gone when no export of DIR runs
        self.lock_path = self.parent / f".{self.name}.bkctl-lock"
        self._lock_fd: int | None = None

    # -- before writing ----------------------------------------------------------

    @contextmanager
    def locked(self) -> Iterator[OutputDir]:
        """Hold an exclusive lock on the export (another export of the same
        ``DIR`` fails with :class:`ExportLocked`); the staging directory is
        removed on the way out unless it was committed."""
        import fcntl

        try:
            self.parent.mkdir(parents=True, exist_ok=True)
            fd = self._take_lock()
        except OSError as e:  # the user's --out, not the lock file beside it they never asked for
            from .source import ExportError

            raise ExportError(f"--out {self.path}: cannot write in {self.parent}: {e.strerror or e}") from None
        self._lock_fd = fd
        try:
            self.recover_interrupted()
            yield self
        finally:
            self.discard()
            try:  # the file goes while it is locked: nothing is left beside DIR
                os.unlink(self.lock_path)
            except FileNotFoundError:
                pass
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
                self._lock_fd = None

    def _take_lock(self) -> int:
        """flock ``.DIR.bkctl-lock`` (not DIR: the commit renames it, and it may
        not exist yet).  Its holder deletes it before letting go, so a lock got
        on a file that is no longer the one at that path (opened before it was
        deleted) is no lock: open the path again."""
        import fcntl

        while True:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise ExportLocked(f"another export into {self.path} is running (lock {self.lock_path})") from None
            held = os.fstat(fd)
            try:
                now = os.stat(self.lock_path)
            except FileNotFoundError:
                now = None
            if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                return fd
            os.close(fd)

    def recover_interrupted(self) -> str | None:
        """Put back a previous export left aside by a swap that did not finish."""
        if self.path.exists():
            for stale in self.parent.glob(f".{self.name}.bkctl-old-*"):
                shutil.rmtree(stale, ignore_errors=True)
            return None
        olds = sorted(self.parent.glob(f".{self.name}.bkctl-old-*"), key=lambda p: p.stat().st_mtime)
        if not olds:
            return None
        os.rename(olds[-1], self.path)
        return str(olds[-1])

    def previous_manifest(self) -> dict[str, Any] | None:
        """The manifest of the export in ``DIR`` (None when there is none)."""
        try:
            return json.loads((self.path / MANIFEST).read_text())
        except FileNotFoundError:
            return None
        except ValueError as exc:
            raise NotAnExport(
                f"{self.path / MANIFEST} is not valid JSON ({exc}); use --overwrite to replace the directory"
            ) from None

    def check_target(self, mode: str, partition_by: str) -> dict[str, Any] | None:
        """Refuse to mix with something that is not a compatible export; returns
        the previous manifest (None if there is no previous export)."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        if self.path.exists() and not self.path.is_dir():
            raise NotAnExport(f"{self.path} exists and is not a directory")
        previous = self.previous_manifest() if self.path.is_dir() else None
        if mode == "overwrite":
            return previous
        if previous is None:
            if self.path.is_dir() and any(self.path.iterdir()):
                raise NotAnExport(
                    f"{self.path} is not empty and holds no bkctl export ({MANIFEST} missing); "
                    "use --overwrite to replace it"
                )
            return None
        if previous.get("partition_by") != partition_by:
            raise Conflict(
                f"{self.path} is partitioned by {previous.get('partition_by')}, not {partition_by}; "
                "use the same --partition-by, or --overwrite to replace it"
            )
        return previous

    # -- after the tasks wrote the staging directory ----------------------------

    def compose(self, mode: str, exported_ledgers: Iterable[int]) -> dict[str, int]:
        """Bring the kept partitions of the previous export into the staging
        directory.  Returns ``{"kept_partitions", "linked_files"}``."""
        self.staging.mkdir(parents=True, exist_ok=True)
        for marker in (SUCCESS, f".{SUCCESS}.crc", MANIFEST):  # Spark's own marker; ours comes last
            try:
                (self.staging / marker).unlink()
            except FileNotFoundError:
                pass
        kept = linked = 0
        if mode == "overwrite" or not self.path.is_dir():
            return {"kept_partitions": 0, "linked_files": 0}
        exported = set(exported_ledgers)
        for rel, ledger_id in leaf_partitions(self.path).items():
            if mode == "replace" and ledger_id in exported:
                continue
            linked += _link_tree(self.path / rel, self.staging / rel)
            kept += 1
        return {"kept_partitions": kept, "linked_files": linked}

    def finish(self, manifest: dict[str, Any]) -> None:
        """Write the manifest and ``_SUCCESS`` into the staging directory, then
        swap it into place."""
        text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
        tmp = self.staging / f".{MANIFEST}.tmp"
        tmp.write_text(text)
        os.replace(tmp, self.staging / MANIFEST)
        (self.staging / SUCCESS).write_text("")
        self._synced(self.staging, "the previous export is kept")
        if self.path.exists():
            os.rename(self.path, self._old)
            try:
                os.rename(self.staging, self.path)
            except BaseException:
                os.rename(self._old, self.path)
                raise
            shutil.rmtree(self._old, ignore_errors=True)
        else:
            os.rename(self.staging, self.path)
        self._synced(self.parent, "the new export is in place but may not survive a crash")

    def _synced(self, folder: Path, meanwhile: str) -> None:
        """fsync *folder* (:func:`~bkctl.wire.bookie_disk.layout.fsync_dir`); a failure is the
        export's :class:`~.source.ExportError` naming --out, the folder and the system's reason."""
        try:
            fsync_dir(folder)
        except OSError as exc:
            from .source import ExportError

            raise ExportError(f"--out {self.path}: cannot sync {folder}: {exc.strerror or exc}; {meanwhile}") from None

    def discard(self) -> None:
        """Remove the staging directory (nothing if it was committed)."""
        shutil.rmtree(self.staging, ignore_errors=True)
