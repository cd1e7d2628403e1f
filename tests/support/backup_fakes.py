"""A cluster for ``bkctl backup``'s tests without bookies: closed ledgers in an in-memory
metadata store and a client whose entries are made up (:func:`payload`), for the copy's unit
tests and for those that back up into a real S3 server."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from bkctl.wire.metadata.ledger import LedgerMetadata, LedgerState, parse_ledger_metadata
from tests.support.fake_store import FakeMetadataStore

BOOKIES = ("127.0.0.1:3181", "127.0.0.1:3182", "127.0.0.1:3183")


def payload(ledger_id: int, entry_id: int, size: int) -> bytes:
    return bytes([ledger_id % 251, entry_id % 251]) * (size // 2)


class FakeLedger:
    def __init__(self, client: FakeClient, ledger_id: int, md: LedgerMetadata, size: int):
        self.client, self.ledger_id, self.md, self.size = client, ledger_id, md, size

    def read_range(self, first, last, batch=100, *, allow_unconfirmed=False):
        self.client.batches.append(batch)
        self.client.reading(self.ledger_id)
        for start in range(first, last + 1, batch):
            yield [(e, payload(self.ledger_id, e, self.size)) for e in range(start, min(last, start + batch - 1) + 1)]


class FakeClient:
    """``bk.open(id)`` (its metadata read) or ``bk.open_closed(id, md, version)`` and
    ``bk.read_closed(id, md, version, ...)`` (the caller's):
    a ledger whose entries are made up; ``reading(id)`` as each read begins."""

    def __init__(self, store: FakeMetadataStore, size: int):
        self.store, self.size = store, size
        self.batches: list[int] = []
        self.started: list[int] = []
        self.read_begun = threading.Event()
        self.opened: list[int] = []
        self.opened_closed: list[tuple[int, int]] = []
        #: the bookies of each ``connect`` (the backup's, before its first copy)
        self.connected: list[set[str]] = []

    def connect(self, bookie_ids: Iterable[str]) -> None:
        self.connected.append(set(bookie_ids))

    def reading(self, ledger_id: int) -> None:
        self.started.append(ledger_id)
        if len(self.started) >= 2:
            self.read_begun.set()

    def open(self, ledger_id: int) -> FakeLedger:
        self.opened.append(ledger_id)
        md, _version = self.store.ledgers.read(ledger_id)
        return FakeLedger(self, ledger_id, md, self.size)

    def open_closed(self, ledger_id: int, md: LedgerMetadata, version: int) -> FakeLedger:
        assert md.is_closed
        self.opened_closed.append((ledger_id, version))
        return FakeLedger(self, ledger_id, md, self.size)

    def read_closed(self, ledger_id: int, md: LedgerMetadata, version: int, first: int, last: int, batch: int):
        """``open_closed`` and its ``read_range`` in one, as the blocking client's."""
        return self.open_closed(ledger_id, md, version).read_range(first, last, batch)


def closed_ledgers(
    entries: int, size: int, ledgers: int = 2, store: FakeMetadataStore | None = None
) -> tuple[FakeMetadataStore, list[int]]:
    """``ledgers`` closed ledgers of ``entries`` entries of ``size`` bytes, in a new store (or
    ``store``); the store and their ids."""
    if store is None:
        store = FakeMetadataStore().start()
        store.ledgers.parse = parse_ledger_metadata  # the ZooKeeper store's decoder, which the backup uses
    ids = []
    for _ in range(ledgers):
        md = LedgerMetadata(3, 2, 2, LedgerState.CLOSED, entries - 1, entries * size, ((0, BOOKIES),))
        lid, _version = store.ledgers.create(md)
        ids.append(lid)
    return store, ids


class NoFeed:
    """A restore's feed of a ledger with no entries (``restore.ChunkFeed`` replaced): nothing to
    add, nothing to wait for."""

    def __init__(self, ledger, timeout) -> None:
        pass

    def add(self, chunk) -> None:
        raise AssertionError("an empty ledger has no entries")

    def finish(self) -> None:
        pass
