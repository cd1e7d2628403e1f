"""Ledger metadata backup (Java's ``ledgermetadata -dumptofile/-restorefromfile``) and the
metadata filters of ``bkctl ledger list`` (custom metadata globs, size, age).

A dump file holds the znode's value byte for byte: the ledger's own metadata
format (v1, v2 or v3) as Java writes it, so Java's tool restores bkctl's dumps
and the other way round.  The ledger id is not part of that format.
"""

from __future__ import annotations

import fnmatch
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .ledgers import LedgerInfo, LedgerRow

if TYPE_CHECKING:
    from bkctl.wire.metadata.ledger import LedgerMetadata
    from bkctl.wire.metadata.store import MetadataStore

# -- dump / restore ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MetadataDump:
    """A ledger's metadata written to ``file``: ``bytes`` of its own format, the znode's ``version``,
    the ledger's ``state`` (its name: OPEN, IN_RECOVERY, CLOSED)."""

    ledger_id: int
    file: str
    bytes: int
    format_version: int
    version: int
    state: str


@dataclass(frozen=True, slots=True)
class MetadataRestore:
    """A ledger's metadata znode created from ``file`` (``replaced``: it existed), its new ``version``."""

    ledger_id: int
    file: str
    bytes: int
    format_version: int
    state: str
    replaced: bool
    version: int


def dump(store: MetadataStore, ledger_id: int, path: str) -> MetadataDump:
    from bkctl.wire.metadata.ledger import parse_ledger_metadata

    data, version = store.ledgers.read_bytes(ledger_id)
    md = parse_ledger_metadata(data)
    if path == "-":  # stdout, as `ledger add ID -` reads stdin
        import sys

        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        with open(path, "wb") as f:
            f.write(data)
    return MetadataDump(ledger_id, path, len(data), md.format_version, version, md.state.name)


_ID_IN_NAME = re.compile(r"(\d+)")


def ledger_id_from_file_name(path: str) -> int | None:
    """The ledger id a dump file's name carries (``123``, ``ledger-123.meta``), if exactly one number."""
    found = _ID_IN_NAME.findall(os.path.basename(path))
    return int(found[0]) if len(found) == 1 else None


def read_dump(path: str) -> tuple[bytes, LedgerMetadata]:
    """``(bytes, metadata)`` of a dump file; not metadata: exit 2."""
    from bkctl.wire.metadata.ledger import parse_ledger_metadata

    from . import parse_input_file

    return parse_input_file(path, parse_ledger_metadata, "ledger metadata")


def restore(store: MetadataStore, ledger_id: int, path: str, confirm_overwrite: Callable[[], None]) -> MetadataRestore:
    """Create the ledger's znode from a dump; an existing one is replaced only after
    ``confirm_overwrite()`` (which raises to refuse)."""
    data, md = read_dump(path)
    exists = store.ledgers.exists(ledger_id)
    if exists:
        confirm_overwrite()
    version = store.ledgers.restore_bytes(ledger_id, data, overwrite=exists)
    return MetadataRestore(ledger_id, path, len(data), md.format_version, md.state.name, exists, version)


# -- ledger list filters -----------------------------------------------------------------

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_SIZES = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tb": 1 << 40,
    "tib": 1 << 40,
}


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``1h``, ``7d``, ``2w`` (also combined: ``1h30m``) -> seconds."""
    t = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", t):
        return float(t)
    parts = re.findall(r"(\d+(?:\.\d+)?)([smhdw])", t)
    if not parts or "".join(n + u for n, u in parts) != t:
        raise ValueError(f"not a duration: {text!r} (e.g. 90s, 30m, 1h, 7d, 2w)")
    return sum(float(n) * _UNITS[u] for n, u in parts)


def parse_size(text: str) -> int:
    """``1048576``, ``512k``, ``10M``, ``1GiB`` (powers of 1024) -> bytes."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _SIZES:
        raise ValueError(f"not a size: {text!r} (e.g. 1048576, 512k, 10M, 1G)")
    return int(float(m.group(1)) * _SIZES[m.group(2).lower()])


def parse_meta_filters(items: Iterable[str] | None) -> list[tuple[str, str]]:
    out = []
    for item in items or ():
        key, sep, pattern = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--meta takes KEY=VALUE (VALUE may be a glob), not {item!r}")
        out.append((key, pattern))
    return out


@dataclass(frozen=True)
class LedgerFilter:
    """Metadata conditions, all of which a ledger must meet.

    ``meta``: (key, glob) pairs matched against the custom metadata (UTF-8,
    ``fnmatch`` globs, case-sensitive; the key may be a glob too);
    ``min_size``: the metadata's length in bytes (known once a ledger is
    closed; an open ledger's is 0); ``older_than``: seconds since its
    creation time; ``open_longer_than``: OPEN (not closed or in recovery)
    and created that many seconds ago.
    """

    meta: tuple[tuple[str, str], ...] = ()
    min_size: int | None = None
    older_than: float | None = None
    open_longer_than: float | None = None
    now_ms: int | None = None

    @property
    def active(self) -> bool:
        return bool(self.meta) or any(v is not None for v in (self.min_size, self.older_than, self.open_longer_than))

    def _age(self, md: LedgerMetadata) -> float | None:
        if md.ctime is None:
            return None
        now = self.now_ms if self.now_ms is not None else int(time.time() * 1000)
        return (now - md.ctime) / 1000.0

    def __call__(self, md: LedgerMetadata) -> bool:
        for key_glob, value_glob in self.meta:
            if not any(
                fnmatch.fnmatchcase(k, key_glob)
                and fnmatch.fnmatchcase(v.decode("utf-8", "backslashreplace"), value_glob)
                for k, v in md.custom_metadata.items()
            ):
                return False
        if self.min_size is not None and md.length < self.min_size:
            return False
        if self.older_than is not None:
            age = self._age(md)
            if age is None or age < self.older_than:
                return False
        if self.open_longer_than is not None:
            age = self._age(md)
            if not md.is_open or age is None or age < self.open_longer_than:
                return False
        return True


@dataclass
class Totals:
    """count, entries (last entry + 1 of closed ledgers) and bytes (their length) of
    listed rows, added up as they stream past."""

    count: int = 0
    entries: int = 0
    bytes: int = 0

    def add(self, row: LedgerRow) -> LedgerRow:
        """Count *row* in; returns it (``map(totals.add, rows)`` passes rows on)."""
        self.count += 1
        if isinstance(row, LedgerInfo):
            if row.is_closed and row.last_entry_id >= 0:
                self.entries += row.last_entry_id + 1
            self.bytes += row.length or 0
        return row
