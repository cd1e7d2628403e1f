"""The judging parts of the movers' fault campaign (bench/faults_movers_load.py, bench/faults_movers_check.py):
each check finds what it is for -- an entry's copy missing or differing, an ensemble naming a bookie
twice -- from metadata and copies made up here; the campaign itself runs in
tests/integration/test_bench_faults_movers.py."""

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from bkctl.wire.errors import MetadataError
from bkctl.wire.metadata.ledger import LedgerMetadata, LedgerState

_BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str):
    if str(_BENCH) not in sys.path:
        sys.path.insert(0, str(_BENCH))  # the campaign's modules import each other as scripts do
    spec = importlib.util.spec_from_file_location(name, _BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


movers = _load("faults_movers_load")
check = _load("faults_movers_check")

A, B, C = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"


def closed(ensembles, last=3):
    return LedgerMetadata(
        ensemble_size=len(ensembles[0][1]),
        write_quorum=2,
        ack_quorum=2,
        state=LedgerState.CLOSED,
        last_entry_id=last,
        length=0,
        ensembles=ensembles,
    )


def copies(md, origin, seed=7, drop=(), bad=()):
    """Every copy the write sets name, read ok with the right bytes, but those in ``drop``
    (missing) and ``bad`` (other bytes)."""
    rows = {}
    for entry_id in range(md.last_entry_id + 1):
        for bookie in md.write_set(entry_id):
            if (bookie, entry_id) in drop:
                rows[(bookie, entry_id)] = ("missing", None)
            elif (bookie, entry_id) in bad:
                rows[(bookie, entry_id)] = ("ok", movers.payload(seed, origin + 1, entry_id))
            else:
                rows[(bookie, entry_id)] = ("ok", movers.payload(seed, origin, entry_id))
    return rows


def test_an_entry_names_its_origin_and_id():
    data = movers.payload(7, 42, 5)
    assert movers.origin_of(data) == (42, 5)
    assert data == movers.payload(7, 42, 5) != movers.payload(8, 42, 5)
    assert len(data) in movers.ENTRY_SIZES


def test_every_copy_good_is_no_finding():
    md = closed(((0, (A, B, C)),))
    expect = movers.Expect(origin=10, acked={0, 1, 2, 3})
    assert check.short_of_copies(md, copies(md, 10), expect, 7, movers.payload) == {}


def test_a_copy_missing_or_differing_is_an_entry_short_of_copies():
    md = closed(((0, (A, B, C)),))
    expect = movers.Expect(origin=10, acked={0, 1, 2, 3})
    rows = copies(md, 10, drop={(md.write_set(1)[0], 1)}, bad={(md.write_set(3)[1], 3)})
    short = check.short_of_copies(md, rows, expect, 7, movers.payload)
    assert sorted(short) == [1, 3]
    assert short[1][md.write_set(1)[0]] == "missing"
    assert short[3][md.write_set(3)[1]] == "differs"
    del rows[(md.write_set(0)[0], 0)]  # a copy not read at all counts as short too
    assert check.short_of_copies(md, rows, expect, 7, movers.payload)[0][md.write_set(0)[0]] == "unread"


def test_a_restored_copy_is_judged_by_its_origins_bytes():
    md = closed(((0, (A, B)),), last=1)
    restored = movers.Expect(origin=10, acked={0, 1}, restored=True)
    assert check.short_of_copies(md, copies(md, 10), restored, 7, movers.payload) == {}
    assert sorted(check.short_of_copies(md, copies(md, 11), restored, 7, movers.payload)) == [0, 1]


def test_an_ensemble_naming_a_bookie_twice_is_found():
    good = closed(((0, (A, B, C)), (2, (A, B, A.replace("1", "4")))))
    assert check.ensembles_naming_twice(5, good) == []
    twice = SimpleNamespace(ensembles=((0, (A, B, C)), (2, (A, B, A))))  # as a store's raw segments
    assert check.ensembles_naming_twice(5, twice) == [f"ledger 5 segment 2: {[A, B, A]}"]


def test_metadata_that_does_not_decode_is_a_finding_by_its_cause():
    with pytest.raises(MetadataError) as twice:  # the decoder refuses what Java refuses
        closed(((0, (A, B, A)),))
    assert check.undecodable(5, twice.value, {})[0] == "ensemble_twice"
    other = MetadataError("truncated")
    assert check.undecodable(5, other, {5: movers.Expect(5)})[0] == "lost"
    assert check.undecodable(6, other, {5: movers.Expect(5)})[0] == "left_behind"


def test_findings_count_every_kind_of_failure():
    f = check.Findings()
    assert f.failures() == 0
    f.notes.append("a note is not a failure")
    f.lost.append("x")
    f.duplicated.append("y")
    f.left_behind.append("z")
    assert f.failures() == 3
