"""The write cache (Java's WriteCache in DbLedgerStorage): adds land here, in memory,
until a checkpoint writes them to the entry log.

It is double-buffered: :meth:`WriteCache.swap` hands the current half to the
flush and starts an empty one, so adds go on while the old half is written out;
reads look in both halves. The cache holds no lock of its own: the entry store
calls it with its state lock held (one lock for the cache and the ledger state,
so that an add updates both at once).
"""

from __future__ import annotations

from collections.abc import Sequence


class WriteCache:
    """Per-ledger ``{entry id: bytes}`` in two halves: ``active`` (taking adds) and
    ``flushing`` (being written out, or None)."""

    __slots__ = ("max_bytes", "active", "active_bytes", "flushing", "flushing_bytes")

    def __init__(self, max_bytes: int):
        self.max_bytes = max(1, int(max_bytes))
        self.active: dict[int, dict[int, bytes]] = {}
        self.active_bytes = 0
        self.flushing: dict[int, dict[int, bytes]] | None = None
        self.flushing_bytes = 0

    @property
    def used(self) -> int:
        """Bytes held in both halves."""
        return self.active_bytes + self.flushing_bytes

    def would_overflow(self, n: int) -> bool:
        used = self.active_bytes + self.flushing_bytes
        return bool(used) and used + n > self.max_bytes

    def put(self, ledger_id: int, entry_id: int, data: bytes) -> None:
        """Store (or replace) an entry in the active half."""
        cache = self.active.get(ledger_id)
        if cache is None:
            cache = self.active[ledger_id] = {}
        old = cache.get(entry_id)
        if old is not None:
            self.active_bytes -= len(old)
        cache[entry_id] = data
        self.active_bytes += len(data)

    def put_new(
        self, ledger_id: int, entry_ids: Sequence[int], bodies: Sequence[bytes], size: int | None = None
    ) -> bool:
        """:meth:`put` of each entry at once, when they all fit and none of the ids is in
        the active half already nor twice among them; False (nothing put) otherwise.
        ``size``: the bodies' bytes, when the caller has counted them already.

        The ledger's dict takes the run in one ``update``: ids checked apart from it first,
        a repeated id among them seen as the dict growing by less than the run, and then
        taken back out (none of them was there before)."""
        if size is None:
            size = sum(map(len, bodies))
        if self.active_bytes + self.flushing_bytes + size > self.max_bytes:
            return False
        cache = self.active.get(ledger_id)
        made = cache is None
        if cache is None:
            cache = self.active[ledger_id] = {}
        elif not cache.keys().isdisjoint(entry_ids):
            return False
        before = len(cache)
        cache.update(zip(entry_ids, bodies))
        if len(cache) - before != len(entry_ids):
            for entry_id in entry_ids:
                cache.pop(entry_id, None)
            if made:
                del self.active[ledger_id]
            return False
        self.active_bytes += size
        return True

    def over_half(self) -> bool:
        return self.active_bytes * 2 >= self.max_bytes

    def get(self, ledger_id: int, entry_id: int) -> bytes | None:
        cache = self.active.get(ledger_id)
        if cache is not None:
            data = cache.get(entry_id)
            if data is not None:
                return data
        if self.flushing:
            cache = self.flushing.get(ledger_id)
            if cache is not None:
                return cache.get(entry_id)
        return None

    def halves_of(self, ledger_id: int) -> tuple[dict | None, dict | None]:
        """The ledger's dicts in the active and the flushing half (either may be None)."""
        return self.active.get(ledger_id), (self.flushing.get(ledger_id) if self.flushing else None)

    def swap(self) -> dict[int, dict[int, bytes]]:
        """Start a flush: the active half becomes the flushing one (merged into it when
        a failed flush left it there: newer copies win); returns what to write."""
        if self.flushing is None:
            self.flushing, self.flushing_bytes = self.active, self.active_bytes
        else:
            # counted by the entries replaced, not by walking the half (under the store's
            # lock: a walk of 10^5s of entries there was as long a wait for every add)
            replaced = 0
            for lid, cache in self.active.items():
                old = self.flushing.setdefault(lid, {})
                if not old.keys().isdisjoint(cache):
                    replaced += sum(map(len, map(old.__getitem__, old.keys() & cache.keys())))
                old.update(cache)
            self.flushing_bytes += self.active_bytes - replaced
        self.active, self.active_bytes = {}, 0
        return self.flushing

    def flushed(self) -> None:
        """The flushing half is in the entry log and the index: drop it."""
        self.flushing, self.flushing_bytes = None, 0

    def drop_ledger(self, ledger_id: int) -> None:
        cache = self.active.pop(ledger_id, None)
        if cache:
            self.active_bytes -= sum(map(len, cache.values()))
        if self.flushing:
            cache = self.flushing.pop(ledger_id, None)
            if cache:
                self.flushing_bytes -= sum(map(len, cache.values()))
