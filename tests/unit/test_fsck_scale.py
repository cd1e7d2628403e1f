"""What ``bkctl ledger fsck`` keeps while it streams (wire/fsck/findings.py's Grouping): the
findings all about one wiped bookie -- a third of a million-ledger cluster's ledgers -- are
kept as ids and counts until their one line at the end, not as findings."""

from __future__ import annotations

import gc
import weakref

from bkctl.wire.fsck.findings import Finding, Grouping, Kind

A, B = "10.0.3.1:3181", "10.0.3.2:3181"


def wiped(ledger_id: int, bookie: str = B) -> Finding:
    return Finding(ledger_id, Kind.MISSING, "copies missing", missing={bookie: [(0, 99)]}, empty=(bookie,))


def test_a_wiped_bookies_findings_are_kept_as_ids_and_counts_not_findings():
    grouping = Grouping()
    refs = []
    for lid in range(1, 201):
        f = wiped(lid)
        refs.append(weakref.ref(f))
        assert grouping.add(f, None, "mark: applied" if lid % 2 else None)
        del f
    lone = wiped(500, A)
    assert grouping.add(lone, "its outcome")
    other = Finding(7, Kind.CORRUPT, "differs")
    assert not grouping.add(other)  # not all about one bookie: the caller shows it at once
    gc.collect()
    assert sum(r() is not None for r in refs) == 1  # the first one only
    groups, alone = grouping.groups(registered=[A, B])
    ((whole, notes),) = groups
    assert (whole.bookie, whole.live, whole.ledgers) == (B, True, tuple(range(1, 201)))
    assert notes == {"mark: applied": 100}
    assert [(f.ledger_id, tag) for f, tag in alone] == [(500, "its outcome")]
