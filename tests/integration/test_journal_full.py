"""A bookie whose journal filled its disk comes back writable by itself once the ledgers it
holds are deleted (issue 73, point 9): no restart, no command.

The bookie's journal and ledger directories sit on a small tmpfs the test mounts (root is
needed: outside CI the test skips without it, under CI=true it fails).  The journal never rolls
(journalMaxSizeMB, 2 GiB, is above the disk) and garbage collection's own interval (gcWaitTime,
10 minutes) is not waited for: what the bookie waits for is a checkpoint, and what that would write
is the deleted ledger's entries in the write cache.  Two ways in: a write cache too large to ask for
a flush before the journal fills the disk (the checkpoint is postponed for want of room), and one
that asks for a flush the disk has no room for (the flush fails with ENOSPC, its bytes given back).
"""

from __future__ import annotations

import pytest

from bkctl.wire.client.blocking import BlockingBookKeeper
from tests.support.bookieproc import start_bookies
from tests.support.waiting import wait_for

from .test_full_disk import _states, _writable_only, mounts, on_fs, procs  # noqa: F401 - fixtures

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("cache_mb", [128, 64], ids=["postponed", "enospc"])
def test_a_journal_full_bookie_is_writable_again_once_its_ledgers_are_deleted(
    mounts,  # noqa: F811
    procs,  # noqa: F811
    metadata_uri,
    cache_mb,
):
    fs = mounts("fs")
    bookie = on_fs(
        fs,
        metadata_uri,
        flushInterval=10000,
        dbStorage_writeCacheMaxSizeMb=cache_mb,
        diskUsageThreshold=0.9,
        diskUsageLwmThreshold=0.8,
        diskCheckInterval=1000,
    )
    procs.append(bookie)
    start_bookies([bookie], metadata_uri)
    bk = BlockingBookKeeper(metadata_uri, add_timeout=5.0, read_timeout=5.0, timeout=60)
    try:
        lh = bk.create(1, 1, 1, password=b"pw")
        data = b"x" * (64 * 1024)
        for _ in range(40 * 16):  # 40 MB: more than the disk holds
            try:
                lh.add(data)
            except Exception:  # noqa: BLE001 - the bookie turned read-only: what we wait for
                break
        else:
            pytest.fail("the adds never failed: the filesystem did not fill up")
        wait_for(lambda: bookie.bookie_id in _states(metadata_uri)[1], what="read-only registration")
        bk.delete(lh.ledger_id)
        wait_for(lambda: _writable_only(metadata_uri, bookie.bookie_id), timeout=90, what="writable registration")
        assert bookie.proc.poll() is None  # the same process: no restart
        # it takes adds again, and they read back
        again = bk.create(1, 1, 1, password=b"pw")
        acked = {again.add(b"after %d" % i): b"after %d" % i for i in range(20)}
        again.close()
        assert dict(bk.open(again.ledger_id, b"pw").read(0, 19)) == acked
    finally:
        bk.close()
