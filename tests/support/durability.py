"""What a crash would keep of the files a test's code wrote: :class:`DiskLog` records, through
``monkeypatch``, every ``os.fsync`` (of a file or a folder), ``os.replace``/``os.rename`` and
``os.mkdir`` below a folder, in the order they happened, and replays them as POSIX promises
them -- a file's bytes are on disk once it is fsynced, a name (a file renamed into a folder, a
folder made) once its folder is fsynced after, and a path is durable when its bytes and every
name on its way down from the folder are.  Nothing else is assumed (no ext4 ordering)."""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DiskLog", "DiskOp", "Replay", "objects_named", "put_in_order"]


@dataclass(frozen=True)
class DiskOp:
    """One call: ``op`` ``fsync`` (``path`` the file or folder, ``size`` a file's bytes then),
    ``replace`` (``path`` the new name, ``source`` the old), ``mkdir``, or what a test marks
    (:meth:`DiskLog.mark`)."""

    op: str
    path: Path
    source: Path | None = None
    size: int = -1


class DiskLog:
    """The calls below ``base`` (files and folders in it and under it), in order."""

    def __init__(self, base: Path):
        self.base = base.resolve()
        self.ops: list[DiskOp] = []
        self.lock = threading.Lock()
        self.before: set[Path] = set()

    def install(self, monkeypatch) -> DiskLog:
        fsync, replace, rename, mkdir = os.fsync, os.replace, os.rename, os.mkdir

        def logged_fsync(fd: int) -> None:
            where = Path(os.readlink(f"/proc/self/fd/{fd}"))
            st = os.fstat(fd)
            fsync(fd)
            self._add(DiskOp("fsync", where, size=st.st_size if stat.S_ISREG(st.st_mode) else -1))

        def moved(real: Callable[..., None]) -> Callable[..., None]:
            def call(src, dst, *args, **kw) -> None:
                real(src, dst, *args, **kw)
                self._add(DiskOp("replace", Path(os.path.realpath(dst)), Path(os.path.realpath(src))))

            return call

        def logged_mkdir(path, *args, **kw) -> None:
            mkdir(path, *args, **kw)
            self._add(DiskOp("mkdir", Path(os.path.realpath(path))))

        monkeypatch.setattr(os, "fsync", logged_fsync)
        monkeypatch.setattr(os, "replace", moved(replace))
        monkeypatch.setattr(os, "rename", moved(rename))
        monkeypatch.setattr(os, "mkdir", logged_mkdir)
        return self

    def mark(self, what: str, path: Path, size: int = -1) -> None:
        """Something the code under test did (a ledger created...), in its place among the calls."""
        self._add(DiskOp(what, path.resolve(), size=size))

    def _add(self, op: DiskOp) -> None:
        if op.path.is_relative_to(self.base):
            with self.lock:
                self.ops.append(op)

    def restart(self) -> None:
        """The calls forgotten, and what is below ``base`` now taken as on disk (a test checked
        that it is) by the next :meth:`replay`."""
        with self.lock:
            self.ops.clear()
            self.before = {p.resolve() for p in self.base.rglob("*")}

    def replay(self) -> Replay:
        replay = Replay(self.base)
        replay.synced.update(self.before)
        replay.names.update(self.before)
        return replay


class Replay:
    """The calls of a :class:`DiskLog` applied one at a time (:meth:`apply`): what is durable
    after each.  ``base`` and what is above it count as durable."""

    def __init__(self, base: Path):
        self.base = base
        self.synced: set[Path] = set()  # files whose bytes are on disk (by their current name)
        self.sizes: dict[Path, int] = {}  # how many of a file's bytes were, at its last fsync
        self.names: set[Path] = set()  # names on disk in their folder
        self.pending: dict[Path, set[Path]] = {}  # folder -> names made in it since its last fsync
        self.problems: list[str] = []

    def apply(self, op: DiskOp) -> None:
        if op.op == "fsync":
            self.synced.add(op.path)
            self.sizes[op.path] = op.size
            if op.size >= 0 and op.path not in self.names:  # a file made in its folder (say, by now)
                self.pending.setdefault(op.path.parent, set()).add(op.path)
            self.names.update(self.pending.pop(op.path, set()))
        elif op.op == "mkdir":
            self.synced.add(op.path)  # a folder's own bytes are its names, followed one by one
            self.pending.setdefault(op.path.parent, set()).add(op.path)
        elif op.op == "replace":
            assert op.source is not None
            if op.source not in self.synced:
                self.problems.append(f"{op.path.name} renamed into place before its bytes were fsynced")
            self.synced.discard(op.source)
            self.synced.add(op.path)
            self.sizes[op.path] = self.sizes.pop(op.source, -1)
            self.names.discard(op.path)  # the old file of that name, if any, is replaced
            self.pending.setdefault(op.path.parent, set()).add(op.path)

    def durable_bytes(self, path: Path) -> int:
        """How many of file ``path``'s first bytes are on disk (it is appended to: what was
        written before its last fsync, when its name is on disk too)."""
        return self.sizes.get(path, -1) if self.durable(path) else 0

    def durable(self, path: Path) -> bool:
        """Whether ``path``'s bytes and every name from ``base`` down to it are on disk."""
        if path not in self.synced:
            return False
        while path != self.base and path.is_relative_to(self.base):
            if path not in self.names:
                return False
            path = path.parent
        return True


def objects_named(name: str, data: bytes) -> list[str]:
    """The archive objects that object ``name`` (its bytes ``data``) names, which must be stored
    before it (docs/backup-format.md): a ledger record its data object, a chunk of ledger lines
    their records (not an inline one), a manifest its chunks, its notes and the marker."""
    from bkctl.wire.backup.archive import MARKER, LedgerRecord, Manifest

    if name.startswith("ledgers/") and name.endswith(".json"):
        return [LedgerRecord.decode(data, name).data_object]
    if name.startswith("chunks/"):
        if not name.rpartition("/")[2][:1].isdigit():  # notes name no object
            return []
        lines = [json.loads(line) for line in data.splitlines()]
        return [x["record"] for x in lines if "inline" not in x]
    if name.startswith("backups/"):
        m = Manifest.decode(data, name)
        return [MARKER, *(ref.name for ref in m.chunks + m.notes)]
    return []


def put_in_order(stored: list[str], get: Callable[[str], bytes]) -> int:
    """Raise AssertionError unless each object in ``stored`` (archive names, in the order their
    writes were answered; ``get`` reads one) came after every object it names: for a backup into
    an empty archive.  How many names were checked."""
    done: set[str] = set()
    checked = 0
    for name in stored:
        for needed in objects_named(name, get(name)):
            checked += 1
            assert needed in done, f"{name} stored before {needed}, which it names"
        done.add(name)
    return checked
