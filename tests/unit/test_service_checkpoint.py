"""When the bookie checkpoints: a store's write cache asking for a flush while one
runs (its other half filled during that flush) gets the next one as soon as that
one has succeeded, not at the next flushInterval; the periodic timer does not queue
checkpoints; a failed checkpoint is not retried at once."""
from __future__ import annotations

from twisted.internet.testing import MemoryReactorClock

from bkctl.bookied.bookie import Bookie
from bkctl.bookied.config import load_config_text
from bkctl.bookied.service import BookieService
from tests.support.threads import ManualThreadPool


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


class CountingStore:
    """A store whose flushes are counted; ``fail`` makes the next one raise."""

    def __init__(self, directory):
        self.directory = str(directory)
        self.cached_bytes = 0
        self.flushes = 0
        self.fail: OSError | None = None

    def flush(self):
        self.flushes += 1
        if self.fail is not None:
            error, self.fail = self.fail, None
            raise error


def make_service(tmp_path, monkeypatch):
    cfg = load_config_text(f"advertisedAddress=127.0.0.1\nallowLoopback=true\n"
                           f"journalDirectories={tmp_path / 'j'}\nledgerDirectories={tmp_path / 'l'}\n")
    reactor = HeldPoolReactor()
    svc = BookieService(cfg, reactor)
    svc.bookie = Bookie([], [], clock=reactor)
    svc.bookie.on_readonly_change = lambda readonly: None
    monkeypatch.setattr(svc, "_disk_stats", lambda: (0.5, 1 << 40))
    svc.stores = [CountingStore(tmp_path / "l")]
    return svc, reactor


def test_a_flush_asked_for_during_a_checkpoint_runs_once_that_one_is_done(tmp_path, monkeypatch):
    svc, reactor = make_service(tmp_path, monkeypatch)
    svc._flush_needed()  # the cache is half full
    assert len(reactor.pool.waiting) == 1
    svc._flush_needed()  # the other half filled while that flush ran
    svc._flush_needed()  # (asked twice: still one more checkpoint)
    assert len(reactor.pool.waiting) == 1
    reactor.pool.run_next()
    assert svc.stores[0].flushes == 1
    assert len(reactor.pool.waiting) == 1  # the next one started at once, not at the next flushInterval
    reactor.pool.run_next()
    assert svc.stores[0].flushes == 2 and not reactor.pool.waiting


def test_the_periodic_checkpoint_does_not_queue_one_behind_a_running_checkpoint(tmp_path, monkeypatch):
    svc, reactor = make_service(tmp_path, monkeypatch)
    svc._checkpoint()
    svc._checkpoint()  # the flushInterval timer, while the first still runs: nothing asked for more
    reactor.pool.run_next()
    assert svc.stores[0].flushes == 1 and not reactor.pool.waiting


def test_a_failed_checkpoint_is_not_retried_at_once(tmp_path, monkeypatch):
    svc, reactor = make_service(tmp_path, monkeypatch)
    svc.stores[0].fail = OSError(5, "Input/output error")
    svc._flush_needed()
    svc._flush_needed()
    reactor.pool.run_next()
    assert svc.bookie.readonly is True  # the entry log write failed
    assert not reactor.pool.waiting  # no hot loop of failing flushes: the next one comes with the timer
