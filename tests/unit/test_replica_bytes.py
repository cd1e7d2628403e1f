"""One rule for the bytes a bookie holds of its ledgers: ``disk``'s attribution, the survey
``rebalance --dry-run`` and ``drain`` plan from, and what ``recover``/``decommission`` say they
move agree to the byte (they were three rules, and ``rebalance --dry-run`` disagreed with ``disk``)."""

from __future__ import annotations

import random

from bkctl.ops.recovery import survey as recover_survey
from bkctl.wire.domain.disk_attribution import copies_by_bookie
from bkctl.wire.domain.replica_size import packed_entry_bytes, replica_bytes
from bkctl.wire.metadata.ledger import LedgerMetadata
from bkctl.wire.rebalance.survey import ClusterSurvey
from tests.support.fake_store import FakeMetadataStore

BOOKIES = [f"127.0.0.1:{3181 + i}" for i in range(5)]


def cluster():
    s = FakeMetadataStore().start()
    rng = random.Random(73)
    for lid in range(30):
        e = rng.choice([2, 3, 4])
        md = LedgerMetadata.new(rng.sample(BOOKIES, e), write_quorum=2, ack_quorum=2, password=b"pw")
        if lid % 3 == 0:
            md = md.with_ensemble_change(rng.randint(1, 40), rng.sample(BOOKIES, e))
        last = rng.randint(40, 400)
        s.ledgers.create(md.closed(last, (last + 1) * rng.randint(10, 5000) + rng.randint(0, 99)), lid)
    return s


def test_disk_rebalance_and_recover_count_a_bookies_bytes_alike():
    store = cluster()
    disk: dict[str, int] = {}
    for _lid, md, _v in store.ledgers.walk():
        for bookie, copy in copies_by_bookie(md, md.last_entry_id, md.length).items():
            disk[bookie] = disk.get(bookie, 0) + copy.nbytes
    rebalance = ClusterSurvey().add_all(store.ledgers.walk()).used
    recover = {b: recover_survey(store, [b]).bytes for b in BOOKIES}
    assert disk == rebalance == recover
    assert all(n > 0 for n in disk.values())


def test_the_rule_counts_payload_and_what_the_client_packs_around_it():
    md = LedgerMetadata.new(BOOKIES[:2], password=b"pw").closed(9, 1000)  # 10 entries of 100 bytes
    assert replica_bytes(md, 10) == 1000 + 10 * packed_entry_bytes(md)
    assert replica_bytes(md, 0) == 0
    assert replica_bytes(LedgerMetadata.new(BOOKIES[:2], password=b"pw"), 10) == 0  # open: length not known
