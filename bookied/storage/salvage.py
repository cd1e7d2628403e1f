"""A stopped or dead bookie's storage, read-only, as a store ``bookied --salvage`` serves:
Java's InterleavedLedgerStorage and DbLedgerStorage and bookied's own, and what their
journals hold that never reached an entry log.

Every ``current/`` directory below the directories given is looked at: Java entry
logs (``*.log``) with their ``.idx`` files or RocksDB index (``ledgers/``,
``locations/``), bookied's LMDB index (``index.lmdb/``) with its ``*.bel`` logs,
and journals (Java ``*.txn``, bookied ``*.bjn``), each entry a journal holds that
no index has kept in memory.  Nothing in them is written: no lock, no repair, no
truncation.  A record that cannot be read (a damaged index file, a location past
its log's end, ids in an entry's header that are not the ones indexed, a journal
that ends early) is reported in :attr:`SalvageStore.damaged` and served from a journal
that still holds the entry, else left out; never fatal.

What the store answers is what :class:`~bkctl.bookied.bookie.Bookie` reads of a store
(``has_ledger``, ``get_entry``, ``get_entries``, ``entry_ids``, ``last_entry_id``,
master key, fenced, explicit LAC); a write to it raises :class:`ReadOnlyStore`, and
``set_fenced`` says the ledger is fenced already (no add is ever taken here).
"""

from __future__ import annotations

import bisect
import logging
import mmap
import os
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field

from .errors import EntryCorrupted

log = logging.getLogger("bookied.salvage")

__all__ = ["Damage", "ReadOnlyStore", "SalvageStore", "current_dirs"]

_JAVA, _BOOKIED, _MEMORY, _BOOKIED_LOG = 0, 1, 2, 3


class ReadOnlyStore(OSError):
    """A write to a salvaged store."""


@dataclass(frozen=True)
class Damage:
    """What could not be read: where, and why."""

    where: str
    reason: str
    ledger_id: int | None = None
    entry_id: int | None = None

    def as_dict(self) -> dict:
        return {"where": self.where, "reason": self.reason, "ledger_id": self.ledger_id, "entry_id": self.entry_id}


def current_dirs(roots: Iterable[str]) -> list[str]:
    """Every ``current`` directory at or below ``roots`` (a bookie's journal, ledger and
    index directories, or a directory holding them), sorted."""
    found: set[str] = set()
    for root in roots:
        root = os.path.abspath(root)
        if os.path.basename(root) == "current" and os.path.isdir(root):
            found.add(root)
            continue
        for top, subdirs, _names in os.walk(root):
            if "current" in subdirs:
                found.add(os.path.join(top, "current"))
            subdirs[:] = [d for d in subdirs if d != "current" and not d.endswith(".lmdb")]
    return sorted(found)


class _Entries:
    """Where each entry of one ledger is, in two arrays sorted by entry id once the indexes are
    read (:meth:`seal`): 17 bytes an entry rather than a dict's ~160, for a dead bookie of 10^8
    entries.  A ``(source, value)`` per entry: Java's ``log id << 32 | offset``, bookied's
    index number (the location is looked up when read), or the journal copy kept in memory;
    the few changes after sealing (a damaged copy dropped or replaced) go to ``changed``."""

    __slots__ = ("_ids", "_kinds", "_values", "changed")

    def __init__(self) -> None:
        self._ids = array("q")
        self._kinds = array("b")
        self._values = array("q")
        #: entry id -> (source, value), or None: dropped (set after sealing)
        self.changed: dict[int, tuple[int, int] | None] = {}

    def add(self, entry_id: int, kind: int, value: int) -> None:
        """Before :meth:`seal`: a later row for the same entry replaces an earlier one."""
        self._ids.append(entry_id)
        self._kinds.append(kind)
        self._values.append(value)

    def seal(self) -> None:
        ids, kinds, values = self._ids, self._kinds, self._values
        if all(ids[i] < ids[i + 1] for i in range(len(ids) - 1)):
            return
        order = sorted(range(len(ids)), key=ids.__getitem__)  # stable: the last row of an id wins
        keep = [i for n, i in enumerate(order) if n + 1 == len(order) or ids[order[n + 1]] != ids[i]]
        self._ids = array("q", (ids[i] for i in keep))
        self._kinds = array("b", (kinds[i] for i in keep))
        self._values = array("q", (values[i] for i in keep))

    def get(self, entry_id: int) -> tuple[int, int] | None:
        if entry_id in self.changed:
            return self.changed[entry_id]
        i = bisect.bisect_left(self._ids, entry_id)
        if i < len(self._ids) and self._ids[i] == entry_id:
            return self._kinds[i], self._values[i]
        return None

    def __contains__(self, entry_id: int) -> bool:
        return self.get(entry_id) is not None

    def ids(self) -> list[int]:
        held = {e for e, where in self.changed.items() if where is not None}
        dropped = {e for e, where in self.changed.items() if where is None}
        return sorted(held.union(e for e in self._ids if e not in dropped))

    def __len__(self) -> int:
        return len(self.ids()) if self.changed else len(self._ids)


@dataclass
class _Ledger:
    master_key: bytes | None = None
    fenced: bool = False
    explicit_lac: bytes | None = None
    entries: _Entries = field(default_factory=_Entries)


class SalvageStore:
    """The storage found below ``roots``, read-only (see the module doc)."""

    def __init__(self, roots: Iterable[str]):
        self.currents = current_dirs(roots)
        if not self.currents:
            raise FileNotFoundError(f"no bookie directory (with a current/) below {', '.join(roots)}")
        #: a directory for :meth:`~bkctl.bookied.bookie.Bookie.disk_space`
        self.directory = self.currents[0]
        self.damaged: list[Damage] = []
        self._ledgers: dict[int, _Ledger] = {}
        self._java_logs: dict[int, str] = {}
        self._bookied_logs: dict[int, str] = {}  # bookied's entry logs read without their index
        self._maps: dict[str, tuple] = {}
        self._bookied: list = []
        self._kept: list[bytes] = []
        #: (ledger, entry) -> where a journal holds a copy of an entry an index holds too:
        #: ("txn" | "bjn", path, offset), read when the indexed copy is damaged
        self._journal_copies: dict[tuple[int, int], tuple[str, str, int]] = {}
        self._load()

    # -- loading ----------------------------------------------------------------
    def _damage(
        self,
        where: str,
        reason: str,
        ledger_id: int | None = None,
        entry_id: int | None = None,
        outcome: str = "left out",
    ) -> None:
        self.damaged.append(Damage(where, reason, ledger_id, entry_id))
        log.warning(
            "salvage: %s: %s%s: %s",
            where,
            reason,
            "" if ledger_id is None else f" (entry {ledger_id}/{entry_id if entry_id is not None else '*'})",
            outcome,
        )

    def _ledger(self, ledger_id: int) -> _Ledger:
        led = self._ledgers.get(ledger_id)
        if led is None:
            led = self._ledgers[ledger_id] = _Ledger()
        return led

    def _load(self) -> None:
        from . import foreign

        self._java_logs = foreign.java_entry_logs(self.currents)
        for current in self.currents:
            self._load_java_index(current)
            if foreign.has_rocksdb(current):
                self._load_rocksdb(current)
            if os.path.isdir(os.path.join(current, "index.lmdb")):
                self._load_bookied(current)
        for led in self._ledgers.values():
            led.entries.seal()
        for current in self.currents:
            self._load_journals(current)

    def _load_java_index(self, current: str) -> None:
        from bkctl.wire.codecs.javadisk import parse_index

        from .foreign import java_index_files

        for ledger_id, path in java_index_files(current):
            try:
                with open(path, "rb") as f:
                    idx = parse_index(f.read())
            except Exception as exc:  # noqa: BLE001 - one bad index file: that ledger only
                self._damage(path, str(exc), ledger_id)
                continue
            led = self._ledger(ledger_id)
            led.master_key = led.master_key or idx.master_key
            led.fenced = led.fenced or idx.fenced
            led.explicit_lac = idx.explicit_lac or led.explicit_lac
            for entry_id, (log_id, offset) in idx.locations.items():
                led.entries.add(entry_id, _JAVA, log_id << 32 | offset)

    def _load_rocksdb(self, current: str) -> None:
        from bkctl.wire.codecs.javadisk import parse_db_ledger_data

        from .foreign import db_rows, rocksdb_readonly

        try:
            with rocksdb_readonly(os.path.join(current, "ledgers")) as db:
                for key, value in db.items():
                    ledger_id = int.from_bytes(key, "big", signed=True)
                    try:
                        data = parse_db_ledger_data(value)
                    except Exception as exc:  # noqa: BLE001
                        self._damage(os.path.join(current, "ledgers"), str(exc), ledger_id)
                        continue
                    led = self._ledger(ledger_id)
                    led.master_key = data.master_key or led.master_key
                    led.fenced = led.fenced or data.fenced
                    led.explicit_lac = data.explicit_lac or led.explicit_lac
            with rocksdb_readonly(os.path.join(current, "locations")) as db:
                for ledger_id, entry_id, log_id, offset in db_rows(db):
                    self._ledger(ledger_id).entries.add(entry_id, _JAVA, log_id << 32 | offset)
        except ImportError:
            self._damage(current, "DbLedgerStorage's RocksDB index needs the rocksdb extra (rocksdict)")
        except Exception as exc:  # noqa: BLE001 - a RocksDB that does not open: its entries are left out
            self._damage(current, f"RocksDB index: {exc}")

    def _load_bookied(self, current: str) -> None:
        from .offline import OfflineIndex

        try:
            index = OfflineIndex(os.path.dirname(current))
        except Exception as exc:  # noqa: BLE001
            self._damage(os.path.join(current, "index.lmdb"), str(exc), outcome="entries found in the entry logs")
            self._load_bookied_logs(current)
            return
        n = len(self._bookied)
        self._bookied.append(index)
        try:
            for ledger_id, state in index.ledgers().items():
                led = self._ledger(ledger_id)
                led.master_key = state["master_key"] or led.master_key
                led.fenced = led.fenced or bool(state["fenced"])
                led.explicit_lac = state["explicit_lac"] or led.explicit_lac
            for ledger_id, entry_id, _loc in index.rows():
                self._ledger(ledger_id).entries.add(entry_id, _BOOKIED, n)
        except Exception as exc:  # noqa: BLE001
            self._damage(os.path.join(current, "index.lmdb"), str(exc))

    def _load_bookied_logs(self, current: str) -> None:
        """An index that does not open: every good record of bookied's entry logs, found by the
        entry log's own scan (the one ``bookied --rebuild-index`` reads them with), the later copy
        of an entry winning; damaged bytes are reported and skipped."""
        from .entry_log import DamagedRecord, EntryLogger, scan_records

        for log_id, path in sorted(EntryLogger.logs_in(current).items()):
            self._bookied_logs[log_id] = path
            for rec in scan_records(path):
                if isinstance(rec, DamagedRecord):
                    self._damage(path, f"{rec.reason} at offset {rec.offset}", rec.ledger_id, rec.entry_id)
                    continue
                offset, _length, ledger_id, entry_id, _data = rec
                self._ledger(ledger_id).entries.add(entry_id, _BOOKIED_LOG, log_id << 32 | offset)

    def _keep(self, ledger_id: int, entry_id: int, data: bytes, where: tuple[str, str, int]) -> None:
        led = self._ledger(ledger_id)
        held = led.entries.get(entry_id)
        if held is None:  # the journal's copy of an entry no index kept
            led.entries.changed[entry_id] = (_MEMORY, len(self._kept))
            self._kept.append(bytes(data))
        elif held[0] != _MEMORY:  # a second copy, for when the indexed one is damaged
            self._journal_copies[(ledger_id, entry_id)] = where

    def _load_journals(self, current: str) -> None:
        from bkctl.bookied import journal_format as bj
        from bkctl.wire.codecs.javadisk import scan_journal

        for name in sorted(os.listdir(current)):
            path = os.path.join(current, name)
            if name.endswith(".txn"):
                try:
                    with open(path, "rb") as f:
                        _version, records = scan_journal(f.read())
                        for r in records:
                            if r.kind == "entry":
                                self._keep(r.ledger_id, r.entry_id, r.data, ("txn", path, r.offset))
                            elif r.kind == "master_key":
                                led = self._ledger(r.ledger_id)
                                led.master_key = led.master_key or r.data
                            elif r.kind == "fence":
                                self._ledger(r.ledger_id).fenced = True
                except Exception as exc:  # noqa: BLE001
                    self._damage(path, f"journal: {exc}")
            elif name.endswith(bj.FILE_SUFFIX):
                scan = bj.FileScan(path)
                try:
                    for offset, rec in bj.scan_file(path, 0, scan):
                        if isinstance(rec, bj.EntryRecord):
                            self._keep(rec.ledger_id, rec.entry_id, rec.data, ("bjn", path, offset))
                        elif isinstance(rec, bj.MasterKeyRecord):
                            led = self._ledger(rec.ledger_id)
                            led.master_key = led.master_key or rec.key
                        elif isinstance(rec, bj.FenceRecord):
                            self._ledger(rec.ledger_id).fenced = True
                        elif isinstance(rec, bj.ExplicitLacRecord):
                            self._ledger(rec.ledger_id).explicit_lac = rec.body
                except Exception as exc:  # noqa: BLE001
                    scan.problem = scan.problem or str(exc)
                if scan.problem is not None and scan.discarded_nonzero:
                    self._damage(path, f"journal: {scan.problem} ({scan.discarded_nonzero} bytes after it unread)")

    # -- what a bookie reads -------------------------------------------------------
    def summary(self) -> dict:
        return {
            "directories": self.currents,
            "ledgers": len(self._ledgers),
            "entries": sum(len(led.entries) for led in self._ledgers.values()),
            "from_journals": len(self._kept),
            "damaged": len(self.damaged),
        }

    def has_ledger(self, ledger_id: int) -> bool:
        return ledger_id in self._ledgers

    def ledger_ids(self, ordered: bool = True) -> list[int]:
        return sorted(self._ledgers) if ordered else list(self._ledgers)

    def entry_ids(self, ledger_id: int) -> list[int]:
        led = self._ledgers.get(ledger_id)
        return led.entries.ids() if led is not None else []

    def last_entry_id(self, ledger_id: int) -> int | None:
        ids = self.entry_ids(ledger_id)
        return ids[-1] if ids else None

    def get_master_key(self, ledger_id: int) -> bytes | None:
        led = self._ledgers.get(ledger_id)
        return None if led is None else led.master_key

    def get_explicit_lac(self, ledger_id: int) -> bytes | None:
        led = self._ledgers.get(ledger_id)
        return None if led is None else led.explicit_lac

    def is_fenced(self, ledger_id: int) -> bool:
        led = self._ledgers.get(ledger_id)
        return led is not None and led.fenced

    def set_fenced(self, ledger_id: int) -> bool:
        """Fenced already, as far as a client can tell: this store takes no add."""
        return False

    def set_master_key(self, ledger_id: int, key: bytes) -> None:
        """A ledger it does not hold stays unknown (its key is not kept)."""

    def set_explicit_lac(self, ledger_id: int, body: bytes) -> None:
        raise ReadOnlyStore("a salvaged bookie's storage is read-only")

    def put_entry(self, ledger_id: int, entry_id: int, data: bytes) -> None:
        raise ReadOnlyStore("a salvaged bookie's storage is read-only")

    def get_entry(self, ledger_id: int, entry_id: int) -> bytes | None:
        """The entry's bytes; None if it is not held.  A damaged copy raises
        EntryCorrupted once, is reported, and is not held from then on."""
        led = self._ledgers.get(ledger_id)
        where = None if led is None else led.entries.get(entry_id)
        if where is None:
            return None
        try:
            return self._read(ledger_id, entry_id, where)
        except Exception as exc:  # noqa: BLE001 - reported, then read from a journal or left out
            assert led is not None
            damage = str(exc) or type(exc).__name__
            copy = self._journal_copies.pop((ledger_id, entry_id), None)
            data = self._journal_copy(ledger_id, entry_id, copy) if copy is not None else None
            if data is not None:
                led.entries.changed[entry_id] = (_MEMORY, len(self._kept))
                self._kept.append(data)
                self._damage(self._describe(where), damage, ledger_id, entry_id, "served from its journal copy")
                return data
            led.entries.changed[entry_id] = None
            self._damage(self._describe(where), damage, ledger_id, entry_id)
            raise EntryCorrupted(f"entry {ledger_id}/{entry_id}: {exc}") from None

    def _journal_copy(self, ledger_id: int, entry_id: int, copy: tuple[str, str, int]) -> bytes | None:
        """The entry as the journal record at ``copy`` holds it; None if it cannot be read."""
        kind, path, offset = copy
        try:
            if kind == "bjn":
                from bkctl.bookied import journal_format as bj

                for _offset, rec in bj.scan_file(path, offset):
                    if isinstance(rec, bj.EntryRecord) and (rec.ledger_id, rec.entry_id) == (ledger_id, entry_id):
                        return bytes(rec.data)
                    return None
                return None
            import struct

            with open(path, "rb") as f:
                f.seek(offset)
                (size,) = struct.unpack(">i", f.read(4))
                data = f.read(size)
            lid, eid = struct.unpack_from(">qq", data)
            return data if (lid, eid) == (ledger_id, entry_id) else None
        except Exception:  # noqa: BLE001 - no second copy after all
            return None

    def get_entries(self, ledger_id: int, entry_ids: list[int]) -> list:
        out: list = []
        for entry_id in entry_ids:
            try:
                out.append(self.get_entry(ledger_id, entry_id))
            except OSError as exc:
                out.append(exc)
        return out

    def _describe(self, where: tuple[int, int]) -> str:
        kind, value = where
        if kind == _JAVA:
            return self._java_logs.get(value >> 32, f"entry log {value >> 32:x}.log (missing)")
        if kind == _BOOKIED:
            return self._bookied[value].directory
        if kind == _BOOKIED_LOG:
            return self._bookied_logs.get(value >> 32, "a bookied entry log")
        return "a journal"

    def _read(self, ledger_id: int, entry_id: int, where: tuple[int, int]) -> bytes:
        from bkctl.wire.codecs.digest import entry_header

        kind, value = where
        if kind == _MEMORY:
            data = self._kept[value]
        elif kind == _BOOKIED_LOG:
            from .entry_log import check_record, record_at

            log_id, offset = value >> 32, value & 0xFFFFFFFF
            record = record_at(self._map(self._bookied_logs[log_id]), offset)
            return bytes(check_record(record, ledger_id, entry_id, log_id, offset, len(record)))
        elif kind == _BOOKIED:
            index = self._bookied[value]
            loc = index.location(ledger_id, entry_id)
            if loc is None:
                raise EntryCorrupted("its index row is gone")
            return bytes(index.read(ledger_id, entry_id, loc))
        else:
            from bkctl.wire.codecs.javadisk import read_entry_at

            data = read_entry_at(self._java_map(value >> 32), value & 0xFFFFFFFF)
        lid, eid, _lac, _length = entry_header(data)
        if (lid, eid) != (ledger_id, entry_id):
            raise EntryCorrupted(f"the record there holds entry {lid}/{eid}")
        return data

    def _java_map(self, log_id: int):
        path = self._java_logs.get(log_id)
        if path is None:
            raise FileNotFoundError(f"entry log {log_id:x}.log is missing")
        return self._map(path)

    def _map(self, path: str):
        got = self._maps.get(path)
        if got is None:
            f = open(path, "rb")
            size = os.fstat(f.fileno()).st_size
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
            got = self._maps[path] = (f, mm)
        return got[1]

    def close(self) -> None:
        for f, mm in self._maps.values():
            if isinstance(mm, mmap.mmap):
                mm.close()
            f.close()
        self._maps.clear()
        for index in self._bookied:
            index.close()
        self._bookied.clear()
