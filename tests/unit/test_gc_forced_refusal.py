"""Why a forced pass runs no compaction (issue 54, item 5): ``GcPolicy.forced_refusal`` says so
exactly when ``choose_compaction``, the rule the collector follows, picks none, for every mix
of threshold, interval and forceAllowCompaction; and the gc status carries it."""

from __future__ import annotations

import itertools

import pytest

from bkctl.bookied.gc_policy import MAJOR, MINOR, GcPolicy, choose_compaction

H = 3600 * 1000


@pytest.mark.parametrize("kind", [MAJOR, MINOR])
def test_the_refusal_follows_the_rule_the_collector_follows(kind):
    for threshold, interval, force_allow in itertools.product((0.0, 0.5, 1.0), (0, H), (False, True)):
        keys = {f"{kind}_threshold": threshold, f"{kind}_interval_ms": interval, "force_allow": force_allow}
        policy = GcPolicy(**keys)
        chosen = choose_compaction(policy, 0, 0, 0, True, suspend_major=kind != MAJOR, suspend_minor=kind != MINOR)
        refusal = policy.forced_refusal(kind)
        assert (refusal is None) == (chosen == kind), (keys, chosen, refusal)


def test_compaction_off_and_force_not_allowed_is_said_with_the_keys_to_change():
    policy = GcPolicy(major_threshold=0.8, major_interval_ms=0, minor_threshold=0.2, minor_interval_ms=0)
    status = policy.to_status()
    assert status["forceAllowCompaction"] is False and status["majorCompactionInterval"] == 0
    assert status["majorCompactionThreshold"] == 0.8 and status["minorCompactionThreshold"] == 0.2
    assert status["forcedCompactionRefused"]["major"] == (
        "majorCompactionInterval is 0 (not periodic) and forceAllowCompaction=false: a forced pass does not "
        "compact either"
    )
    allowed = GcPolicy(major_threshold=0.8, major_interval_ms=0, force_allow=True).to_status()
    assert allowed["forcedCompactionRefused"]["major"] is None
