"""The ledger layer's test client: a BookKeeperClient over fake bookies (tests/support/fake_bookie.py),
the in-memory metadata store and a reactor whose thread pool the test drives, as production runs
metadata calls (tests/support/threads.py).  Import ``forget_reactors`` into a test module: it is an
autouse fixture."""

from __future__ import annotations

import random

import pytest
from twisted.internet import defer

from bkctl.wire.client.bookkeeper import BookKeeperClient
from bkctl.wire.client.ledger_handle import LedgerHandle
from bkctl.wire.client.placement import RandomPlacement
from tests.support.deferreds import successResultOf
from tests.support.fake_bookie import FakePool
from tests.support.fake_store import FakeMetadataStore
from tests.support.threads import ThreadedClock

B = [f"10.0.0.{i}:3181" for i in range(1, 7)]


REACTORS: list[ThreadedClock] = []


@pytest.fixture(autouse=True)
def forget_reactors():
    yield
    REACTORS.clear()


def settle() -> None:
    """Run the metadata calls the clients handed to their thread pools, and deliver their results."""
    for reactor in REACTORS:
        reactor.settle()


def settled(d: defer.Deferred) -> defer.Deferred:
    """``d`` once the metadata calls it waits for have run (:func:`settle`): check it
    then with Twisted's ``successResultOf``/``failureResultOf`` (tests/support/deferreds.py)."""
    settle()
    return d


def make_client(bookies=B[:4], readonly=(), clock=None, add_timeout=None, **options):
    store = FakeMetadataStore().start()
    for bookie in bookies:
        store.registration.register(bookie)
    for bookie in readonly:
        store.registration.register(bookie, readonly=True)
    pool = FakePool(clock, add_timeout, options.get("protocol", "v3"))
    reactor = ThreadedClock()  # metadata calls go through its thread pool, as in production
    REACTORS.append(reactor)
    client = BookKeeperClient(store, reactor, pool=pool, placement=RandomPlacement(random.Random(7)), **options)
    return client, store, pool


def create(client, e=3, qw=2, qa=2, **kw) -> LedgerHandle:
    return successResultOf(settled(client.create_ledger(e, qw, qa, **kw)))


def track(d, log, tag=None):
    d.addCallbacks(lambda r: log.append(("ok", r if tag is None else tag)), lambda f: log.append(("err", f.value)))
    return d


def filled_ledger(n=6, e=3, qw=2, qa=2, close=True, **kw):
    client, store, pool = make_client(**kw)
    for b in B[:4]:
        pool.get(b).auto = True
    lh = create(client, e, qw, qa)
    for i in range(n):
        successResultOf(settled(lh.add_entry(b"entry-%d" % i)))
    if close:
        successResultOf(settled(lh.close()))
    return client, store, pool, lh
