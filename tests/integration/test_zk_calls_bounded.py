"""A ZooKeeper call made while ZooKeeper does not answer ends, with the store's error.

kazoo queues a call made while it reconnects until a connection is made again: with a server
that is stopped (a paused JVM, a partition), that is forever, and a command hangs past its
``--timeout`` (CI saw ``ledger list`` hang for 120 s once the walk's first answers came in before
the stop and the LACs of open ledgers needed the bookies' registrations).  A Java client fails such
a call with CONNECTIONLOSS at each failed reconnect; ours fails it once it has waited twice the
session timeout."""

from __future__ import annotations

import os
import queue
import signal
import threading

import pytest

from bkctl.wire import fastpath
from bkctl.wire.metadata.errors import ZKUnavailable
from bkctl.wire.metadata.zk import ZKMetadataStore
from tests.support.waiting import stop_process

pytestmark = pytest.mark.integration


def _in_a_thread(call):
    """The outcome of *call* (its value or its exception), or the thread still running."""
    outcome: queue.Queue = queue.Queue()

    def run():
        try:
            outcome.put(call())
        except BaseException as exc:  # noqa: BLE001 - the outcome is what the test asserts
            outcome.put(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(60)  # a guard against a hang, not a measure: the bound is the session timeout
    assert not thread.is_alive(), "the call still waits for a ZooKeeper that does not answer"
    return outcome.get_nowait()


@pytest.mark.parametrize("when", ["after the drop", "before the drop"])
def test_a_call_to_a_stopped_zookeeper_fails_as_unavailable(own_zookeeper, when):
    """Sent before kazoo noticed (it fails with the drop, and its retry is queued) or after
    (queued at once): either way the call ends with :class:`ZKUnavailable`."""
    server, uri = own_zookeeper
    with ZKMetadataStore(uri, timeout=1, twins=fastpath.selected()) as store:
        assert store.registration.writable_bookies() == []
        dropped = threading.Event()
        store.on_disconnect(dropped.set)
        stop_process(server.pid)  # stopped before the call is sent, not only signalled
        try:
            if when == "after the drop":
                assert dropped.wait(30), "kazoo never noticed its pings go unanswered"
            failed = _in_a_thread(store.registration.writable_bookies)
            assert isinstance(failed, ZKUnavailable), failed
            assert server.connect_string in str(failed) and "no answer within 2s" in str(failed), failed
        finally:
            os.kill(server.pid, signal.SIGCONT)
        # back: the session (or a new one) answers again
        assert store.registration.writable_bookies() == []
