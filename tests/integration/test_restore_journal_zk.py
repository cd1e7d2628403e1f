"""A restore's journal on a real ZooKeeper at a cluster's scale: a journal of 60,000 ledgers
(over 3 MB, three times ZooKeeper's 1 MB node limit) kept in znodes each well under it, saved
a piece at a time, and read whole by the next session -- a restore killed then resumes."""

from __future__ import annotations

from bkctl.backup.journal import ClusterPlace, Journal
from bkctl.backup.storage import LocalStorage
from bkctl.wire import fastpath
from bkctl.wire.metadata import paths as P
from bkctl.wire.metadata.store import RESTORE_CHUNK_BYTES
from bkctl.wire.metadata.zk import ZKMetadataStore


def test_a_journal_over_the_node_limit_is_kept_in_small_znodes_and_read_by_the_next_session(
    metadata_uri, zk_client, tmp_path
):
    archive = LocalStorage(str(tmp_path / "archive"))
    fresh = {"backup": "b1", "target": metadata_uri, "instance_id": "i", "remap": True, "started": 1}
    n = 60_000
    store = ZKMetadataStore(metadata_uri, timeout=20, twins=fastpath.selected()).start()
    try:
        journal = Journal.open(ClusterPlace(store, "big"), fresh, archive, "big")
        for old in range(n):
            journal.assign(10**12 + old, 2**40 + old)
        journal.save()
        for old in range(n - 1):
            journal.finish_ledger(10**12 + old)
            if old % 5000 == 0:
                journal.save()
        journal.save()  # the last ledger never finishes: killed while it was written
    finally:
        store.close()
    path = f"{P.restore_journals_path(store.root)}/big"
    children = zk_client.get_children(path)
    sizes = [len(zk_client.get(f"{path}/{c}")[0]) for c in children]
    assert len(zk_client.get(path)[0]) < 1024 and max(sizes) <= RESTORE_CHUNK_BYTES
    assert sum(sizes) > 3 * 2**20  # over the old single-node limit, three times
    again = ZKMetadataStore(metadata_uri, timeout=20, twins=fastpath.selected()).start()
    try:
        resumed = Journal.open(ClusterPlace(again, "big"), {}, archive, "big")
        assert resumed.ids == {10**12 + old: 2**40 + old for old in range(n)}
        assert resumed.done == {10**12 + old for old in range(n - 1)} and resumed.doc["backup"] == "b1"
        resumed.finish_ledger(10**12 + n - 1)
        resumed.doc["finished"] = 2
        resumed.save()
        assert len(Journal.open(ClusterPlace(again, "big"), {}, archive, "big").done) == n
        again.restores.clear("big")
    finally:
        again.close()
