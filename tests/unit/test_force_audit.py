"""autorecovery force-audit (Java's forceauditchecks) on the fake store: the chosen checks'
last runs go 21 days back, the others stay, and what they were is reported."""

from __future__ import annotations

from bkctl.ops.autorecovery import FORCE_AUDIT_AGE_MS, force_audit
from bkctl.ops.results import to_json
from bkctl.wire.metadata import paths as P
from tests.support.fake_store import FakeMetadataStore

NOW = 1_800_000_000_000


def test_only_the_chosen_checks_go_back_21_days():
    store = FakeMetadataStore().start()
    store.underreplication.set_check_ctime(P.UR_CHECK_ALL_LEDGERS_CTIME, NOW - 1000)
    store.underreplication.set_check_ctime(P.UR_PLACEMENT_POLICY_CHECK_CTIME, NOW - 2000)
    doc = force_audit(store, [P.UR_CHECK_ALL_LEDGERS_CTIME, P.UR_REPLICAS_CHECK_CTIME], NOW)
    assert to_json(doc) == {
        "checks": [P.UR_CHECK_ALL_LEDGERS_CTIME, P.UR_REPLICAS_CHECK_CTIME],
        "ctime": NOW - 21 * 24 * 3600 * 1000,
        "auditor": None,
        "previous": {P.UR_CHECK_ALL_LEDGERS_CTIME: NOW - 1000, P.UR_REPLICAS_CHECK_CTIME: None},
    }
    ur = store.underreplication
    assert (
        ur.check_ctime(P.UR_CHECK_ALL_LEDGERS_CTIME)
        == ur.check_ctime(P.UR_REPLICAS_CHECK_CTIME)
        == NOW - FORCE_AUDIT_AGE_MS
    )
    assert ur.check_ctime(P.UR_PLACEMENT_POLICY_CHECK_CTIME) == NOW - 2000


def test_the_elected_auditor_is_named_to_restart():
    store = FakeMetadataStore().start()
    store.auditor.cast_vote("10.0.0.3:3181")
    assert force_audit(store, [P.UR_REPLICAS_CHECK_CTIME], NOW).auditor == "10.0.0.3:3181"
