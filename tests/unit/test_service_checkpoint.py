"""When the bookie checkpoints: a store's write cache asking for a flush while one
runs (its other half filled during that flush) gets the next one as soon as that
one has succeeded, not at the next flushInterval; the periodic timer does not queue
checkpoints; a failed checkpoint is not retried at once; only the periodic checkpoint's
flush is paced (no add waits for it), not one the write cache asked for."""

from __future__ import annotations

from twisted.internet.testing import MemoryReactorClock

from tests.support.threads import ManualThreadPool
from tests.unit.test_service_readonly import FailingStore, make_service


class HeldPoolReactor(MemoryReactorClock):
    """Its thread pool holds each task until the test runs it (``pool.run_next()``):
    a checkpoint stays in progress for as long as the test wants."""

    def __init__(self):
        super().__init__()
        self.pool = ManualThreadPool()

    def callFromThread(self, f, *args, **kwargs):  # noqa: N802 - the reactor's name
        f(*args, **kwargs)

    def getThreadPool(self):  # noqa: N802 - the reactor's name
        return self.pool


def checkpointing_service(tmp_path, monkeypatch, *errors):
    """A service over one store (its flushes fail with ``errors`` first) whose
    checkpoints wait in the reactor's pool until the test runs them."""
    reactor = HeldPoolReactor()
    svc = make_service(tmp_path, monkeypatch, reactor=reactor)
    svc.stores = [FailingStore(*errors)]
    return svc, reactor


def test_a_flush_asked_for_during_a_checkpoint_runs_once_that_one_is_done(tmp_path, monkeypatch):
    svc, reactor = checkpointing_service(tmp_path, monkeypatch)
    svc.upkeep.flush_needed()  # the cache is half full
    assert len(reactor.pool.waiting) == 1
    svc.upkeep.flush_needed()  # the other half filled while that flush ran
    svc.upkeep.flush_needed()  # (asked twice: still one more checkpoint)
    assert len(reactor.pool.waiting) == 1
    reactor.pool.run_next()
    assert svc.stores[0].flushes == 1
    assert len(reactor.pool.waiting) == 1  # the next one started at once, not at the next flushInterval
    reactor.pool.run_next()
    assert svc.stores[0].flushes == 2 and not reactor.pool.waiting


def test_the_periodic_checkpoint_does_not_queue_one_behind_a_running_checkpoint(tmp_path, monkeypatch):
    svc, reactor = checkpointing_service(tmp_path, monkeypatch)
    svc.upkeep.checkpoint()
    svc.upkeep.checkpoint()  # the flushInterval timer, while the first still runs: nothing asked for more
    reactor.pool.run_next()
    assert svc.stores[0].flushes == 1 and not reactor.pool.waiting


def test_a_failed_checkpoint_is_not_retried_at_once(tmp_path, monkeypatch):
    svc, reactor = checkpointing_service(tmp_path, monkeypatch, OSError(5, "Input/output error"))
    svc.upkeep.flush_needed()
    svc.upkeep.flush_needed()
    reactor.pool.run_next()
    assert svc.bookie.readonly is True  # the entry log write failed
    assert not reactor.pool.waiting  # no hot loop of failing flushes: the next one comes with the timer


def test_the_periodic_flush_is_paced_and_one_the_write_cache_asks_for_is_not(tmp_path, monkeypatch):
    svc, reactor = checkpointing_service(tmp_path, monkeypatch)
    svc.upkeep.checkpoint()  # the flushInterval timer
    reactor.pool.run_next()
    svc.upkeep.flush_needed()  # the cache is half full: adds may be about to wait for room
    reactor.pool.run_next()
    assert svc.stores[0].paced == [True, False]
