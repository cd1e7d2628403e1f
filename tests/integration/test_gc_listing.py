"""The garbage collector's listing of the metadata in a process of its own (bookied.gc_listing):
its answer, kept between passes at a lower CPU priority; a missing ledgers root an error, not an
empty listing; a child killed between passes or in the middle of one; the bookie stopping or
killed.  Real ZooKeeper, a handful of ledgers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from bkctl.bookied.errors import GcListingError, GcListingStopped
from bkctl.bookied.gc_listing import ListingProcess
from bkctl.sandbox.zookeeper import pid_alive
from bkctl.wire import fastpath
from bkctl.wire.metadata.zk import ZKMetadataStore
from tests.support.ledgers import make_ledgers
from tests.support.waiting import stop_process, wait_for


def config(uri: str) -> str:
    return f"metadataServiceUri={uri}\nzkTimeout=20000\n"


@pytest.fixture()
def listing(metadata_uri):
    with ZKMetadataStore(metadata_uri, timeout=20, twins=fastpath.selected()) as zk:
        make_ledgers(zk, [1, 2, 3, 20000, 10**6])
        zk.ledgers.delete(2)
    lp = ListingProcess(config(metadata_uri), verify=False)
    yield lp
    lp.close()


def test_the_child_answers_which_ledgers_have_no_metadata_and_stays(listing):
    assert listing.garbage([1, 2, 3, 4, 20000, 10**6, 10**7]) == [2, 4, 10**7]
    pid = listing.pid
    assert os.sched_getscheduler(pid) == os.SCHED_IDLE  # below the bookie's threads
    assert listing.garbage([]) == [] and listing.garbage([3, 5]) == [5]
    assert listing.pid == pid and listing.started == 1  # one child, one session, for every pass
    listing.close()
    assert not pid_alive(pid)
    with pytest.raises(GcListingStopped):
        listing.garbage([1])


def test_a_missing_ledgers_root_is_an_error_not_an_empty_listing(uninitialised_uri):
    lp = ListingProcess(config(uninitialised_uri), verify=False)
    try:
        with pytest.raises(GcListingError, match="no BookKeeper cluster"):
            lp.garbage([1, 2])
        pid = lp.pid
        assert pid is not None  # the child goes on: the next pass tries again
        with pytest.raises(GcListingError, match="no BookKeeper cluster"):
            lp.garbage([1, 2])
        assert lp.pid == pid
    finally:
        lp.close()


def test_a_child_killed_between_passes_is_replaced_and_one_killed_during_a_pass_deletes_nothing(listing):
    assert listing.garbage([2]) == [2]
    os.kill(listing.pid, signal.SIGKILL)
    wait_for(lambda: listing.proc.poll() is not None, what="the child gone")
    assert listing.garbage([1, 2]) == [2] and listing.started == 2
    # during a pass: the child held still before it reads the request, then killed
    pid = listing.pid
    stop_process(pid)
    outcome: list[BaseException | list[int]] = []
    t = threading.Thread(target=lambda: outcome.append(_call(listing.garbage, [1, 2])))
    t.start()
    os.kill(pid, signal.SIGKILL)
    t.join(30)
    assert isinstance(outcome[0], GcListingError) and "killed by signal 9" in str(outcome[0])
    assert listing.garbage([1, 2]) == [2] and listing.started == 3


def test_stopping_ends_a_listing_under_way(listing):
    assert listing.garbage([]) == []
    pid = listing.pid
    stop_process(pid)
    outcome: list[BaseException | list[int]] = []
    t = threading.Thread(target=lambda: outcome.append(_call(listing.garbage, [1, 2])))
    t.start()
    listing.stop()  # SIGTERM, taken once the child runs again
    os.kill(pid, signal.SIGCONT)
    t.join(30)
    assert isinstance(outcome[0], GcListingStopped)
    assert not pid_alive(pid)


def test_the_child_ends_with_its_bookie_killed(metadata_uri):
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from bkctl.bookied.gc_listing import ListingProcess\n"
            f"lp = ListingProcess({config(metadata_uri)!r}, verify=False)\n"
            "lp.garbage([1])\n"
            "print(lp.pid, flush=True)\n"
            "time.sleep(120)\n",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        child = int(parent.stdout.readline())
        assert pid_alive(child)
        parent.kill()
        parent.wait(30)
        wait_for(lambda: not pid_alive(child), timeout=10, what=f"listing process {child} gone")
    finally:
        parent.kill()
        parent.wait(30)


def _call(fn, *args):
    try:
        return fn(*args)
    except BaseException as e:  # noqa: BLE001 - the test looks at it
        return e


def test_each_pass_sees_what_changed_in_the_metadata_since_the_last(listing, metadata_uri):
    """The child keeps what it listed between passes (watched); a ledger created or deleted
    in a leaf it kept is seen by the very next pass."""
    assert listing.garbage([1, 3, 5, 20000]) == [5]
    with ZKMetadataStore(metadata_uri, timeout=20, twins=fastpath.selected()) as zk:
        make_ledgers(zk, [5])
        zk.ledgers.delete(3)
    assert listing.garbage([1, 3, 5, 20000]) == [3]


def test_ledgers_sent_in_several_slices_reach_the_child_whole(listing):
    """The bookie packs its ids a slice at a time (WRITE_SLICE), never holding the GIL long:
    every one arrives, in any order, and the answer is exact across the slices' edges."""
    from bkctl.bookied.gc_listing import WRITE_SLICE

    local = list(range(3 * WRITE_SLICE + 7, 0, -1))  # descending: the child sorts them
    gone = listing.garbage(local)
    assert gone == [i for i in range(1, 3 * WRITE_SLICE + 8) if i not in (1, 3)]
