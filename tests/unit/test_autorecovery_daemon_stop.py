"""A daemon elected auditor and stopped before its auditor finished starting:
the start's failure (the store it used is closed by the stop) is not logged
as an error; a start that fails while the auditor runs still is."""

from __future__ import annotations

import logging
import types

from twisted.internet import defer
from twisted.internet.task import Clock
from twisted.python.failure import Failure

from bkctl.wire import fastpath
from bkctl.wire.autorecovery.service import AutoRecoveryDaemon
from bkctl.wire.metadata.errors import MetadataStoreError


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
    daemon._elected()
    auditor = daemon.auditor
    assert auditor.running and len(calls) == 1  # preparing, in a thread
    daemon._demoted()  # the stop steps down first, then closes the store
    assert daemon.auditor is None and not auditor.running
    with caplog.at_level(logging.DEBUG, logger="bkctl.wire.autorecovery.service"):
        calls[0].errback(Failure(MetadataStoreError("the metadata store is not started")))
    assert _errors(caplog) == []
    assert any("stopped while it started" in r.getMessage() for r in caplog.records)


def test_a_start_that_fails_while_running_is_an_error(caplog):
    daemon, calls = _daemon()
    daemon._elected()
    with caplog.at_level(logging.DEBUG, logger="bkctl.wire.autorecovery.service"):
        calls[0].errback(Failure(MetadataStoreError("connection loss")))
    assert _errors(caplog) == ["auditor could not start: connection loss"]
