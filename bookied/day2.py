"""What bookied's HTTP admin answers on Java's day-2 bookie endpoints ``list_disk_file``
and ``last_log_mark`` (``HttpRouter``), with Java's keys. (``gc`` and ``gc_details`` are
answered by :mod:`bookied.garbage_collector`.)
"""

from __future__ import annotations

import os
from collections.abc import Iterable

#: file_type -> (Java's key, the suffixes of Java's and bookied's files)
DISK_FILE_TYPES = {
    "journal": ("journal files", (".txn", ".bjn")),
    "entrylog": ("entrylog files", (".log", ".bel")),
    "index": ("index files", (".idx", ".mdb")),
}


def _files(dirs: Iterable[str], suffixes: tuple[str, ...]) -> list[str]:
    """Names of files ending in ``suffixes`` below each dir's ``current/``, sorted by name."""
    found = []
    for d in dict.fromkeys(dirs):
        top = os.path.join(d, "current")
        for root, _dirs, names in os.walk(top):
            found += [(n, os.path.join(root, n)) for n in names if n.endswith(suffixes)]
    return [n for n, _ in sorted(found)]


def list_disk_files(file_type: str | None, journal_dirs, ledger_dirs, index_dirs) -> dict[str, str]:
    """Java's ``list_disk_file`` body: ``{"journal files": "a\\tb\\t", ...}`` (each name
    followed by a tab); an unknown or missing ``file_type`` lists all three."""
    where = {"journal": journal_dirs, "entrylog": ledger_dirs, "index": index_dirs or ledger_dirs}
    kinds = [file_type] if file_type in DISK_FILE_TYPES else list(DISK_FILE_TYPES)
    out = {}
    for kind in kinds:
        key, suffixes = DISK_FILE_TYPES[kind]
        out[key] = "".join(n + "\t" for n in _files(where[kind], suffixes))
    return out


def allocated_bytes(dirs: Iterable[str]) -> int:
    """The bytes the files below each of ``dirs`` take on disk (allocated blocks, as ``du``: a
    preallocated journal or a sparse LMDB map counts what it holds, not its length)."""
    total = 0
    for d in dict.fromkeys(dirs):
        for root, _dirs, names in os.walk(d):
            for name in names:
                try:
                    total += os.lstat(os.path.join(root, name)).st_blocks * 512
                except OSError:
                    continue  # removed meanwhile (a journal rolled, a log compacted)
    return total


def last_log_marks(marks: Iterable[tuple[int, int]]) -> dict[str, str]:
    """Java's ``last_log_mark`` body: ``{"LastLogMark: Journal Id - N(hex.txn)": "Pos - P"}``
    per journal, from each journal's ``(file_id, offset)`` mark."""
    return {f"LastLogMark: Journal Id - {fid}({fid:x}.txn)": f"Pos - {offset}" for fid, offset in marks}
