"""The movers' campaign's ledgers (``bench/faults_movers.py``): the bytes every entry holds, the
book of what the cluster must hold, and the load -- writers and a deleter -- that runs meanwhile.

A module of its own: the campaign, its checks (``faults_movers_check.py``) and their unit tests
share it; nothing here knows of bkctl or of the faults.
"""

from __future__ import annotations

import hashlib
import random
import struct
import threading
from dataclasses import dataclass, field

from bkctl.wire.client.blocking import BlockingBookKeeper

PASSWORD = b"movers"
WRITER_TAG = {"faults-movers": b"writer"}
ENTRY_SIZES = (256, 1024, 4096)
ROLL = 300  # entries per writer ledger
LIVE_LEDGERS = 30  # the deleter keeps the closed ledgers about this many
CLIENT_OPTIONS = dict(add_timeout=3.0, read_timeout=3.0, timeout=60)


def payload(seed: int, origin: int, entry_id: int) -> bytes:
    """The bytes of entry ``entry_id`` of ledger ``origin`` (and of every copy of it): its origin
    and id first, then bytes derived from the seed."""
    head = hashlib.sha256(b"%d/%d/%d" % (seed, origin, entry_id)).digest()
    size = ENTRY_SIZES[head[0] % len(ENTRY_SIZES)]
    return struct.pack(">qq", origin, entry_id) + (head * (size // 32 + 1))[: size - 16]


def origin_of(data: bytes) -> tuple[int, int] | None:
    return struct.unpack(">qq", data[:16]) if len(data) >= 16 else None


# -- what the cluster must hold ------------------------------------------------------------------
@dataclass
class Expect:
    """A live ledger the harness knows: whose entries it holds (``origin``) and which are acknowledged."""

    origin: int
    acked: set[int] = field(default_factory=set)
    closed: bool = False  # closed by its writer or restore, or recovered by the check
    restored: bool = False


class Book:
    """Every ledger the harness knows, under one lock (writers, deleter, ops and checks share it)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.ledgers: dict[int, Expect] = {}
        self.maybe_deleted: set[int] = set()  # a delete not acknowledged: checked for nothing
        self.restores: dict[int, int] = {}  # new id -> the id it was restored from
        self.pinned: set[int] = set()  # ledgers a backup is about to copy: the deleter leaves them

    def closed_originals(self) -> list[int]:
        with self.lock:
            return sorted(lid for lid, e in self.ledgers.items() if e.closed and e.acked)


# -- load ----------------------------------------------------------------------------------------
class Load:
    """Writers and a deleter, straight to ZooKeeper (the faults hit bkctl's and the bookies' links)."""

    def __init__(self, uri: str, book: Book, seed: int, rng: random.Random):
        self.uri, self.book, self.seed, self.rng = uri, book, seed, rng
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.errors: list[str] = []
        self.deleted = 0
        self.unclosed: list[int] = []  # ledgers whose writer's close failed

    def start(self) -> None:
        self.stop.clear()
        shapes = [(3, 2, 2), (2, 2, 2)]
        self.threads = [threading.Thread(target=self._writer, args=(shape,), daemon=True) for shape in shapes]
        self.threads.append(threading.Thread(target=self._deleter, daemon=True))
        for t in self.threads:
            t.start()

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(120)

    def _writer(self, shape: tuple[int, int, int]) -> None:
        from twisted.internet import defer, task

        book, seed, stop = self.book, self.seed, self.stop

        async def go(client):
            while not stop.is_set():
                try:
                    lh = await client.create_ledger(*shape, password=PASSWORD, custom_metadata=WRITER_TAG)
                except Exception:  # noqa: BLE001 - too few writable bookies, or ZooKeeper away
                    await task.deferLater(client.reactor, 0.3, lambda: None)
                    continue
                expect = Expect(lh.ledger_id)
                with book.lock:
                    book.ledgers[lh.ledger_id] = expect
                next_id, failed = 0, False
                while not stop.is_set() and not failed and next_id < ROLL:
                    batch = []
                    for _ in range(8):
                        batch.append((next_id, lh.add_entry(payload(seed, lh.ledger_id, next_id))))
                        next_id += 1
                    results = await defer.DeferredList([d for _, d in batch], consumeErrors=True)
                    await task.deferLater(client.reactor, 0.05, lambda: None)
                    for (expected, _), (ok, value) in zip(batch, results):
                        if ok and value == expected:
                            expect.acked.add(value)
                        elif not ok:
                            failed = True
                try:
                    await lh.close()
                    expect.closed = True
                except Exception:  # noqa: BLE001 - recovered by the deleter's thread, as a broker would
                    with book.lock:
                        self.unclosed.append(lh.ledger_id)

        try:
            with BlockingBookKeeper(self.uri, **dict(CLIENT_OPTIONS, timeout=24 * 3600)) as bk:  # writes all round
                bk.run(lambda client: defer.ensureDeferred(go(client)))
        except Exception as e:  # noqa: BLE001 - said, the round goes on
            self.errors.append(f"writer: {type(e).__name__}: {e}")

    def _recover_unclosed(self, bk) -> None:
        """Recover (fence and close) the ledgers whose writer gave up on them, as a Pulsar broker
        recovers a ledger it no longer writes: else it stays open, and a drain waits for it for ever."""
        with self.book.lock:
            pending, self.unclosed = self.unclosed, []
        for lid in pending:
            try:
                bk.recover(lid, PASSWORD)
                with self.book.lock:
                    if lid in self.book.ledgers:
                        self.book.ledgers[lid].closed = True
            except Exception:  # noqa: BLE001 - a bookie or ZooKeeper away: next time
                with self.book.lock:
                    self.unclosed.append(lid)

    def _deleter(self) -> None:
        """Delete the oldest closed ledgers past LIVE_LEDGERS (restored copies too), as retention does;
        recover the ledgers their writers left open."""
        try:
            bk = BlockingBookKeeper(self.uri, **CLIENT_OPTIONS)
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"deleter: {e}")
            return
        try:
            while not self.stop.wait(self.rng.uniform(0.5, 1.5)):
                self._recover_unclosed(bk)
                with self.book.lock:
                    closed = sorted(
                        lid for lid, e in self.book.ledgers.items() if e.closed and lid not in self.book.pinned
                    )
                if len(closed) <= LIVE_LEDGERS:
                    continue
                victim = closed[0] if self.rng.random() < 0.7 else self.rng.choice(closed[:-5])
                with self.book.lock:
                    self.book.ledgers.pop(victim, None)
                    self.book.maybe_deleted.add(victim)
                try:
                    bk.delete(victim)
                    with self.book.lock:
                        self.book.maybe_deleted.discard(victim)
                    self.deleted += 1
                except Exception:  # noqa: BLE001 - unknown outcome: deleted again after the round
                    pass
        finally:
            bk.close()
