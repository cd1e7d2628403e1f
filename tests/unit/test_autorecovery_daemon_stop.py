"""A daemon elected auditor and stopped before its auditor finished starting:
the start's failure (the store it used is closed by the stop) is not logged
as an error; a start that fails while the auditor runs still is.  The stop
closes what the start opened: the placement policy's watch of the rack map too."""

from __future__ import annotations

import logging
import types

from twisted.internet import defer
from twisted.internet.task import Clock
from twisted.python.failure import Failure

from bkctl.wire import fastpath
from bkctl.wire.autorecovery.config import AutoRecoveryConfig
from bkctl.wire.autorecovery.service import AutoRecoveryDaemon
from bkctl.wire.metadata.errors import MetadataStoreError
from tests.support.fake_store import FakeMetadataStore
from tests.support.reactor_clock import ReactorClock


def _daemon():
    calls: list[defer.Deferred] = []

    def run_blocking(fn, *args):
        d = defer.Deferred()
        calls.append(d)
        return d

    daemon = AutoRecoveryDaemon(
        "zk+null://127.0.0.1:1/ledgers", "10.0.0.1:3181", reactor=Clock(), twins=fastpath.selected()
    )
    daemon.client = types.SimpleNamespace(store=object(), run_blocking=run_blocking)
    return daemon, calls


def _errors(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_start_cut_short_by_the_stop_is_not_an_error(caplog):
    daemon, calls = _daemon()
    daemon.elected()
    auditor = daemon.auditor
    assert auditor.running and len(calls) == 1  # preparing, in a thread
    daemon.demoted()  # the stop steps down first, then closes the store
    assert daemon.auditor is None and not auditor.running
    with caplog.at_level(logging.DEBUG, logger="bkctl.wire.autorecovery.service"):
        calls[0].errback(Failure(MetadataStoreError("the metadata store is not started")))
    assert _errors(caplog) == []
    assert any("stopped while it started" in r.getMessage() for r in caplog.records)


def test_a_start_that_fails_while_running_is_an_error(caplog):
    daemon, calls = _daemon()
    daemon.elected()
    with caplog.at_level(logging.DEBUG, logger="bkctl.wire.autorecovery.service"):
        calls[0].errback(Failure(MetadataStoreError("connection loss")))
    assert _errors(caplog) == ["auditor could not start: connection loss"]


class _InlinePool:
    """A thread pool that runs each call at once, in the caller's thread (the daemon closes its
    store in the reactor's pool)."""

    def callInThreadWithCallback(self, on_result, fn, *args, **kwargs):  # noqa: N802 - Twisted's name
        on_result(True, fn(*args, **kwargs))


class _Reactor(ReactorClock):
    def getThreadPool(self):  # noqa: N802 - Twisted's name
        return _InlinePool()


def test_the_stop_closes_the_placement_policy_the_start_built(monkeypatch):
    # the fake counts the watches set and not stopped, and keeps them past its close: a policy
    # left open is still counted after the stop, where the real store's close hides it
    store = FakeMetadataStore(store_ctime=True)
    monkeypatch.setattr("bkctl.wire.metadata.zk.ZKMetadataStore", lambda *args, **kwargs: store.start())
    reactor = _Reactor()
    daemon = AutoRecoveryDaemon(
        "zk://127.0.0.1:1/ledgers",
        "10.0.0.1:3181",
        AutoRecoveryConfig(),  # Java's default: the rack-aware policy, racks from the rack map znode
        reactor=reactor,
        twins=fastpath.selected(),
        client_options={"run_blocking": defer.maybeDeferred},
    )
    started = daemon.startService()
    reactor.run()
    assert started.called and daemon.client is not None
    policy = daemon.client.placement
    without_policy = store.live_watches()
    policy.refresh(["10.0.0.2:3181"])  # as at the client's first read of the bookie lists
    assert store.live_watches() == without_policy + 1  # the rack map's watch
    stopped = daemon.stopService()
    reactor.run()
    assert stopped.called and daemon.store is None
    assert store.live_watches() == 0  # the rack map's watch too, not only the election's and worker's
    assert daemon.placement_policy is None
