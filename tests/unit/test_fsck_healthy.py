"""Many ledgers' fsck at once (wire/fsck/healthy.py): the healthy small ledger's fast path
gives the findings the general path gives, case by case -- each fault run through
:func:`check_ledger` alone, through :func:`check_ledgers` with its fast path, and without it --
on fake bookies that answer as bookied does (tests/support/fake_bookie.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from twisted.internet import defer

from bkctl.wire.codecs.digest import DigestManager, DigestType
from bkctl.wire.fsck.check import BookieRequests, CheckOptions, check_ledger
from bkctl.wire.fsck.findings import Kind
from bkctl.wire.fsck.healthy import LedgerToCheck, check_ledgers
from bkctl.wire.metadata.ledger import LedgerMetadata, write_set_indices
from tests.support.deferreds import successResultOf
from tests.support.fake_bookie import FakePool

A, B, C, D = (f"10.0.2.{i}:3181" for i in range(1, 5))
EVERY = frozenset((A, B, C, D))
LID = 11


def body(ledger_id: int, entry_id: int, flip: bool = False) -> bytes:
    dm = DigestManager(ledger_id, DigestType.CRC32C, b"pw")
    data = bytearray(dm.package(entry_id, entry_id - 1, 0, b"e%d-%d" % (ledger_id, entry_id)))
    if flip:
        data[-1] ^= 1
    return bytes(data)


@dataclass
class Case:
    """A ledger on E3/Qw2 (bench_fsck's shape) with its copies on the fake bookies but ``skip``
    (entry, bookie), ``flip`` (entry, bookie: a payload byte flipped after the digest), and
    entries on ``moved`` bookies in place of others; ``registered``: the live bookies."""

    entries: int = 2
    ensemble: tuple[str, ...] = (A, B, C)
    skip: set[tuple[int, str]] = field(default_factory=set)
    flip: set[tuple[int, str]] = field(default_factory=set)
    moved: dict[str, str] = field(default_factory=dict)
    registered: frozenset[str] = EVERY
    down: tuple[str, ...] = ()
    open_from: int | None = None  # an open ledger whose last segment (on D, A, B) starts here
    compare_all: bool = False
    no_batch: tuple[str, ...] = ()  # bookies that cannot batch-read (older than 4.17)
    batch_limit: int = 1 << 30  # entries a bookie's batch read gives at most (its byte budget)

    def metadata(self) -> LedgerMetadata:
        md = LedgerMetadata.new(list(self.ensemble), 2, 2, password=b"pw")
        if self.open_from is not None:
            return md.with_ensemble_change(self.open_from, [D, A, B])
        return md.closed(self.entries - 1, 0)

    def pool(self, ledger_id: int = LID) -> FakePool:
        pool = FakePool(auto=True)
        for bookie in sorted(EVERY):
            pool.get(bookie)
        for e in range(self.entries):
            for i in write_set_indices(e, 3, 2):
                bookie = self.ensemble[i]
                if (e, bookie) in self.skip:
                    continue
                pool.get(self.moved.get(bookie, bookie)).stored[(ledger_id, e)] = body(
                    ledger_id, e, (e, bookie) in self.flip
                )
        for bookie in self.down:
            pool.get(bookie).down = True
        return pool

    def options(self) -> CheckOptions:
        return CheckOptions(self.registered, compare_all=self.compare_all)

    def requests(self, pool: FakePool, limit: int = 8) -> BookieRequests:
        """fsck's requests as ``bkctl ledger fsck`` makes them: v2 connections beside, for batch reads."""
        v2 = pool.with_protocol("v2")
        for bookie in sorted(EVERY):
            conn = v2.get(bookie)
            conn.no_batch = bookie in self.no_batch
            conn.batch_limit = self.batch_limit
        return BookieRequests(pool, limit, v2)


CASES = {
    "healthy": (Case(), None),
    "healthy of one entry": (Case(entries=1), None),
    "an entry missing on one bookie": (Case(skip={(1, C)}), Kind.MISSING),
    "a copy failing its digest": (Case(flip={(0, A)}), Kind.CORRUPT),
    "a lone copy failing its digest": (Case(skip={(1, B)}, flip={(1, C)}), Kind.DATA_LOST),
    "no copy of an entry": (Case(skip={(1, B), (1, C)}), Kind.DATA_LOST),
    "a bookie not registered": (Case(registered=frozenset((A, B, D))), Kind.MISSING),
    "a wiped bookie": (Case(skip={(0, A)}), Kind.MISSING),
    "a bookie down": (Case(down=(C,)), Kind.MISSING),
    "the data on a bookie outside the ensemble": (Case(moved={C: D}), Kind.MISPLACED),
    "nothing anywhere": (Case(skip={(0, A), (0, B), (1, B), (1, C)}), Kind.METADATA_ONLY),
    "open: its closed segment checked": (Case(open_from=2, skip={(1, C)}), Kind.MISSING),
    "open: its last segment not judged": (Case(entries=4, open_from=2, skip={(2, C), (3, A)}), None),
    "compare_all: a bad copy in the middle": (Case(entries=12, compare_all=True, flip={(6, A)}), Kind.CORRUPT),
    # B holds entries 0 and 1: one batch read
    "a bad digest in a batch": (Case(flip={(1, B)}), Kind.CORRUPT),
    "a batch's first entry absent": (Case(skip={(0, B)}), Kind.MISSING),
    "a batch's last entry absent": (Case(skip={(1, B)}), Kind.MISSING),
    "a batch answer short of its ask": (Case(batch_limit=1), None),
    "a short batch, the rest absent": (Case(batch_limit=1, skip={(1, B)}), Kind.MISSING),
    "a bookie refusing batch reads": (Case(no_batch=(B,)), None),
    "a bookie refusing batch reads, a bad copy": (Case(no_batch=(B,), flip={(0, B)}), Kind.CORRUPT),
    "compare_all: batches of two": (Case(entries=12, compare_all=True, batch_limit=1, flip={(4, B)}), Kind.CORRUPT),
}


def general(case: Case, ledger_id: int = LID):
    found = check_ledger(BookieRequests(case.pool(ledger_id), 8), ledger_id, case.metadata(), 5, case.options())
    return successResultOf(defer.ensureDeferred(found))


def batched(case: Case, fast: bool, ledger_id: int = LID, batch: bool = False):
    pool = case.pool(ledger_id)
    outcomes = successResultOf(
        check_ledgers(
            case.requests(pool) if batch else BookieRequests(pool, 8),
            [LedgerToCheck(ledger_id, case.metadata(), 5)],
            case.options(),
            fast=fast,
        )
    )
    (outcome,) = outcomes
    assert outcome.ok, outcome.value
    return outcome.value


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_fast_path_finds_what_the_general_path_finds(name):
    case, kind = CASES[name]
    alone = general(case)
    assert (alone.kind if alone is not None else None) is kind
    assert batched(case, fast=True) == alone
    assert batched(case, fast=True, batch=True) == alone
    assert batched(case, fast=False) == alone
    assert batched(case, fast=False, batch=True) == alone


def test_a_healthy_small_ledger_is_read_without_a_deferred_a_read(monkeypatch):
    def no(*_args, **_kwargs):
        raise AssertionError("a read with a Deferred on the fast path")

    monkeypatch.setattr(BookieRequests, "read", no)
    monkeypatch.setattr(BookieRequests, "availability", no)
    case = Case()
    requests = BookieRequests(case.pool(), 8)
    outcomes = successResultOf(check_ledgers(requests, [LedgerToCheck(LID, case.metadata(), 0)], case.options()))
    assert [tuple(o) for o in outcomes] == [(True, None)]
    assert requests.sent == {"availability": 0, "read": 4, "batch_read": 0}  # each copy read once, no entry list


def test_a_bookie_s_consecutive_entries_are_one_batch_read():
    case = Case()
    pool = case.pool()
    requests = case.requests(pool)
    outcomes = successResultOf(check_ledgers(requests, [LedgerToCheck(LID, case.metadata(), 0)], case.options()))
    assert [tuple(o) for o in outcomes] == [(True, None)]
    # A holds entry 0, C entry 1, B both: B's two in one request, three requests for the ledger
    assert requests.sent == {"availability": 0, "read": 2, "batch_read": 1}
    assert requests.batch_pool.get(B).batch_reads == [(LID, 0, 2)]
    assert pool.get(B).reads == []
    assert requests.busy == 0 and not requests.unbatched


@pytest.mark.parametrize(
    ("case", "reads", "unbatched"),
    [
        (Case(batch_limit=1), 3, set()),  # short: the rest read alone
        (Case(skip={(0, B)}), 4, set()),  # the first absent: the run read alone, batches go on
        (Case(no_batch=(B,)), 4, {B}),  # refused: read alone, and not asked again
        (Case(down=(B,)), 4, {B}),
    ],
)
def test_what_a_batch_read_does_not_bring_is_read_alone(case, reads, unbatched):
    requests = case.requests(case.pool())
    item = LedgerToCheck(LID, case.metadata(), 0)
    first = successResultOf(check_ledgers(requests, [item], case.options()))
    assert (requests.sent["read"], requests.sent["batch_read"]) == (reads, 1)
    assert requests.unbatched == unbatched and requests.busy == 0
    second = successResultOf(check_ledgers(requests, [item], case.options()))
    assert (requests.sent["read"], requests.sent["batch_read"]) == (
        reads + (4 if unbatched else reads),
        1 if unbatched else 2,
    )
    assert first == second


def test_a_batch_keeps_each_ledger_s_outcome_in_its_place():
    cases = {lid: case for lid, (case, _kind) in zip(range(100, 200), CASES.values()) if case.registered == EVERY}
    pool = FakePool(auto=True)
    for lid, case in cases.items():
        for bookie, conn in case.pool(lid).conns.items():
            pool.get(bookie).stored.update(conn.stored)
    requests = BookieRequests(pool, 3)
    options = CheckOptions(EVERY)
    items = [LedgerToCheck(lid, case.metadata(), 5) for lid, case in cases.items()]
    outcomes = successResultOf(check_ledgers(requests, items, options))
    assert len(outcomes) == len(items)
    kinds = set()
    for item, outcome in zip(items, outcomes):
        alone = check_ledger(BookieRequests(pool, 8), item.ledger_id, item.metadata, 5, options)
        assert outcome.ok and outcome.value == successResultOf(defer.ensureDeferred(alone))
        kinds.add(outcome.value.kind if outcome.value is not None else None)
    assert {None, Kind.MISSING, Kind.CORRUPT, Kind.DATA_LOST} <= kinds
    assert requests.busy == 0


class Later:
    """A fake pool whose bookies answer reads only when told (:meth:`answer`), as a real one
    answers after a while: requests wait for the limit."""

    def __init__(self, pool: FakePool):
        self.pool = pool
        self.held: list[tuple] = []
        self.most = 0

    def get(self, bookie):
        later = self

        class Conn:
            def read_with_callback(self, ledger_id, entry_id, on_done, ctx, slot):
                later.held.append((bookie, ledger_id, entry_id, on_done, ctx, slot))

            def read(self, ledger_id, entry_id):
                return later.pool.get(bookie).read(ledger_id, entry_id)

        return Conn()

    def answer(self, requests: BookieRequests) -> None:
        while self.held:
            self.most = max(self.most, requests.busy)
            bookie, ledger_id, entry_id, on_done, ctx, slot = self.held.pop(0)
            self.pool.get(bookie).read_with_callback(ledger_id, entry_id, on_done, ctx, slot)


@pytest.mark.parametrize("down", [(), (C,)])
def test_reads_past_the_limit_wait_their_turn_and_each_is_answered(down):
    # compare_all over 40 entries: 80 reads, 3 at a time (a bookie down answers each at once)
    case = Case(entries=40, compare_all=True, flip={(17, B)}, down=down)
    later = Later(case.pool())
    requests = BookieRequests(later, 3)
    done = check_ledgers(requests, [LedgerToCheck(LID, case.metadata(), 5)], case.options())
    assert len(later.held) == 3
    later.answer(requests)
    (outcome,) = successResultOf(done)
    assert outcome.ok and outcome.value == general(case)
    assert later.most == 3 and requests.busy == 0 and requests.sent["read"] == 80


@pytest.mark.parametrize(("enabled", "refusing"), [(True, ()), (True, (B,)), (False, ())])
def test_fsck_batch_reads_over_v2_connections_of_its_own_and_names_a_bookie_refusing_them(enabled, refusing):
    """``bkctl ledger fsck`` (FsckRun) with fast paths on: three requests a healthy E3/Qw2 ledger
    of two entries, the middle bookie's two in one batch read over a v2 pool of its own, closed
    when the run ends; a bookie refusing batch reads is named in the totals.  Fast paths off:
    no v2 pool, every copy read alone."""
    from types import SimpleNamespace

    from bkctl.ops.ledger_fsck import FsckRun
    from bkctl.wire import fastpath
    from bkctl.wire.metadata.serviceinfo import BookieServiceInfo
    from tests.support.fake_store import FakeMetadataStore

    store = FakeMetadataStore().start()
    for bookie in (A, B, C):
        host, port = bookie.split(":")
        store.registration.register(bookie, BookieServiceInfo.for_bookie(host, int(port)))
    case = Case(no_batch=refusing)
    ids = [store.ledgers.create(case.metadata())[0] for _ in range(3)]
    pool = FakePool(auto=True)
    for lid in ids:
        for bookie, conn in case.pool(lid).conns.items():
            pool.get(bookie).stored.update(conn.stored)
    v2 = case.requests(pool).batch_pool
    asked: list[str] = []
    pool.with_protocol = lambda protocol: asked.append(protocol) or v2
    client = SimpleNamespace(store=store, pool=pool, twins=fastpath.build(enabled))
    run = FsckRun(SimpleNamespace(client=client), ledger_ids=ids)
    assert list(run.findings()) == []
    n = len(ids)
    # refused: the first ledger's batch read, then every copy read alone
    read, batch = (4 * n, 1) if refusing else (2 * n, n) if enabled else (4 * n, 0)
    assert run.totals.bookie_requests == {"availability": 0, "read": read, "batch_read": batch}
    assert run.totals.unbatched == sorted(refusing)
    assert asked == (["v2"] if enabled else [])
    assert v2.closed is enabled
