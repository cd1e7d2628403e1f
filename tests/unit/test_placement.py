"""Rack- and region-aware placement (wire/client/placement.py) and rack sources (wire/metadata/racks.py)."""

from __future__ import annotations

import json
import os
import random
import stat

import pytest

from bkctl.wire.client.errors import NotEnoughBookies
from bkctl.wire.client.placement import (
    DEFAULT_RACK,
    FAIL,
    MEETS_STRICT,
    RackAwarePlacement,
    RandomPlacement,
    RegionAwarePlacement,
)
from bkctl.wire.metadata.racks import (
    RackMapError,
    RackSource,
    ScriptRacks,
    load_rack_file,
    parse_rack_map,
    racks_by_bookie,
)


def _cluster(racks: int, per_rack: int, prefix: str = "/r") -> dict[str, str]:
    return {f"10.0.{r}.{i}:3181": f"{prefix}{r}" for r in range(racks) for i in range(per_rack)}


def _write_quorums(ensemble, qw):
    e = len(ensemble)
    if qw >= e:
        return [list(ensemble)]
    return [[ensemble[(s + k) % e] for k in range(qw)] for s in range(e)]


def test_every_write_quorum_spans_two_racks_and_the_ensemble_spans_three():
    racks = _cluster(3, 2)
    p = RackAwarePlacement(racks, rng=random.Random(5))
    for _ in range(200):
        ens = p.new_ensemble(3, list(racks), write_quorum=2)
        assert len(set(ens)) == 3
        assert len({racks[b] for b in ens}) == 3
        assert all(len({racks[b] for b in wq}) == 2 for wq in _write_quorums(ens, 2))
        assert p.adherence(ens, 2) == MEETS_STRICT


def test_random_placement_often_breaks_what_rack_placement_guarantees():
    racks = _cluster(3, 2)
    p = RandomPlacement(random.Random(5))
    results = {RackAwarePlacement(racks).adherence(p.new_ensemble(3, list(racks)), 2) for _ in range(50)}
    assert FAIL in results  # so the test above tests something


def test_larger_ensembles_use_every_rack_evenly():
    racks = _cluster(4, 5)
    p = RackAwarePlacement(racks, rng=random.Random(1))
    ens = p.new_ensemble(8, list(racks), write_quorum=3)
    counts = {}
    for b in ens:
        counts[racks[b]] = counts.get(racks[b], 0) + 1
    assert sorted(counts.values()) == [2, 2, 2, 2]
    assert p.adherence(ens, 3) == MEETS_STRICT


def test_two_racks_left_spread_as_far_as_possible_unless_enforced():
    racks = _cluster(3, 2)
    readonly = [b for b, r in racks.items() if r == "/r2"]
    p = RackAwarePlacement(racks, rng=random.Random(2))
    ens = p.new_ensemble(3, list(racks), readonly, write_quorum=2)
    assert {racks[b] for b in ens} == {"/r0", "/r1"}
    assert p.adherence(ens, 2) == FAIL  # an odd ring over two racks cannot pair every neighbour
    strict = RackAwarePlacement(racks, enforce=True, rng=random.Random(2))
    with pytest.raises(NotEnoughBookies, match="must span 2 racks.*enforceMinNumRacksPerWriteQuorum"):
        strict.new_ensemble(3, list(racks), readonly, write_quorum=2)
    # E=4 over two racks can alternate: enforcement is satisfied
    ens4 = strict.new_ensemble(4, list(racks), readonly, write_quorum=2)
    assert strict.adherence(ens4, 2) == MEETS_STRICT


def test_one_rack_enforced_fails_with_the_rack_count():
    racks = _cluster(1, 5)
    with pytest.raises(NotEnoughBookies, match="only 1 racks"):
        RackAwarePlacement(racks, enforce=True).new_ensemble(3, list(racks), write_quorum=2)
    assert len(RackAwarePlacement(racks).new_ensemble(3, list(racks), write_quorum=2)) == 3


def test_default_rack_bookies_are_left_out_when_enforcing():
    racks = _cluster(2, 2)
    unnamed = ["10.9.9.1:3181", "10.9.9.2:3181"]
    p = RackAwarePlacement(racks, enforce=True, rng=random.Random(3))
    for _ in range(30):
        ens = p.new_ensemble(4, list(racks) + unnamed, write_quorum=2)
        assert not set(ens) & set(unnamed)
    loose = RackAwarePlacement(racks)
    assert loose.rack(unnamed[0]) == DEFAULT_RACK
    assert loose.adherence(["10.0.0.0:3181", unnamed[0]], 2) == MEETS_STRICT
    assert p.adherence(["10.0.0.0:3181", unnamed[0]], 2) == FAIL


def test_min_racks_per_write_quorum_three():
    racks = _cluster(3, 3)
    p = RackAwarePlacement(racks, min_racks_per_write_quorum=3, rng=random.Random(4))
    for _ in range(50):
        ens = p.new_ensemble(6, list(racks), write_quorum=3)
        assert all(len({racks[b] for b in wq}) == 3 for wq in _write_quorums(ens, 3))


def test_replacement_prefers_the_lost_bookies_rack():
    racks = _cluster(3, 3)
    p = RackAwarePlacement(racks, rng=random.Random(6))
    ens = p.new_ensemble(3, list(racks), write_quorum=2)
    lost = ens[1]
    for _ in range(30):
        new = p.replace_bookies(ens, [lost], list(racks), write_quorum=2)
        assert racks[new[1]] == racks[lost] and new[1] != lost
        assert new[0] == ens[0] and new[2] == ens[2]


def test_replacement_keeps_the_spread_when_the_lost_rack_is_empty():
    racks = _cluster(4, 1)
    p = RackAwarePlacement(racks, rng=random.Random(7))
    ens = ["10.0.0.0:3181", "10.0.1.0:3181", "10.0.2.0:3181"]
    for _ in range(30):
        new = p.replace_bookies(ens, [ens[0]], list(racks), write_quorum=2)
        assert new[0] == "10.0.3.0:3181"  # the one rack the ensemble does not use
    # with only the ensemble's racks left, the replacement goes where no write quorum doubles a rack
    racks6 = {"a:1": "/x", "b:1": "/y", "c:1": "/z", "d:1": "/x", "e:1": "/y"}
    p = RackAwarePlacement(racks6, rng=random.Random(8))
    ens = ["a:1", "b:1", "c:1", "e:1"]  # x y z y; position 2 (z) is lost, z has no other bookie
    for _ in range(20):
        new = p.replace_bookies(ens, ["c:1"], list(racks6), write_quorum=2)
        assert new[2] == "d:1" and p.adherence(new, 2) == MEETS_STRICT


def test_enforced_replacement_fails_rather_than_doubling_a_rack():
    racks = {"a:1": "/x", "b:1": "/y", "c:1": "/z", "d:1": "/x"}
    p = RackAwarePlacement(racks, enforce=True)
    with pytest.raises(NotEnoughBookies, match="cannot replace c:1"):
        p.replace_bookies(["a:1", "b:1", "c:1"], ["c:1"], list(racks), write_quorum=2)
    assert (
        RackAwarePlacement(racks).replace_bookies(["a:1", "b:1", "c:1"], ["c:1"], list(racks), write_quorum=2)[2]
        == "d:1"
    )


def test_region_aware_spreads_write_quorums_over_regions_then_racks():
    racks = {}
    for region in ("/east", "/west"):
        for rack in ("a", "b"):
            for i in range(2):
                racks[f"{region[1:]}-{rack}-{i}:3181"] = f"{region}/{rack}"
    p = RegionAwarePlacement(racks, rng=random.Random(9))
    for _ in range(50):
        ens = p.new_ensemble(4, list(racks), write_quorum=2)
        assert len({racks[b] for b in ens}) == 4
        for wq in _write_quorums(ens, 2):
            assert len({racks[b].split("/")[1] for b in wq}) == 2
        assert p.adherence(ens, 2) == MEETS_STRICT
    # a write quorum inside one region breaks the region policy but not the rack one
    same_region = ["east-a-0:3181", "east-b-0:3181", "west-a-0:3181", "west-b-0:3181"]
    assert RackAwarePlacement(racks).adherence(same_region, 2) == MEETS_STRICT
    assert p.adherence(same_region, 2) == FAIL


def test_random_placement_accepts_and_ignores_write_quorum():
    p = RandomPlacement(random.Random(1))
    assert len(p.new_ensemble(2, ["a:1", "b:1", "c:1"], write_quorum=2)) == 2
    assert p.adherence(["a:1", "a:1"], 2) == MEETS_STRICT


# -- rack sources ---------------------------------------------------------------------------


PULSAR = {
    "default": {"10.0.0.1:3181": {"rack": "/r1", "hostname": "bk1"}, "10.0.0.2:3181": {"rack": "r2"}},
    "other": {"bk3:3181": {"rack": "/eu/r3"}},
}


def test_pulsar_rack_map_parses_and_flattens():
    doc = parse_rack_map(json.dumps(PULSAR).encode())
    assert racks_by_bookie(doc) == {"10.0.0.1:3181": "/r1", "bk1": "/r1", "10.0.0.2:3181": "/r2", "bk3:3181": "/eu/r3"}
    assert parse_rack_map(b"") == {}
    with pytest.raises(RackMapError):
        parse_rack_map(b"[1]")
    with pytest.raises(RackMapError):
        parse_rack_map(b'{"default": {"x:1": "r"}}')


def test_rack_files_in_three_forms(tmp_path):
    a = tmp_path / "a.json"
    a.write_text(json.dumps(PULSAR))
    b = tmp_path / "b.json"
    b.write_text(json.dumps({"x:1": "r1", "host2": "/r2"}))
    c = tmp_path / "c.txt"
    c.write_text("# bookie rack\nx:1 /r1\n\nhost2 r2  # by host\n")
    assert load_rack_file(str(a))["bk1"] == "/r1"
    assert load_rack_file(str(b)) == load_rack_file(str(c)) == {"x:1": "/r1", "host2": "/r2"}
    c.write_text("x:1\n")
    with pytest.raises(RackMapError, match="c.txt:1"):
        load_rack_file(str(c))


def test_source_looks_up_by_id_then_host_and_asks_the_script_once(tmp_path):
    log = tmp_path / "calls"
    script = tmp_path / "topo.sh"
    script.write_text(f'#!/bin/sh\necho "$@" >> {log}\nfor h in "$@"; do echo /script-$h; done\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    src = RackSource(static={"host2": "/r2"}, script=ScriptRacks(str(script)))
    src.refresh(["host2:3181", "h3:3181", "h4:3181"])
    src.refresh(["h3:3181"])
    assert src("host2:3181") == "/r2"
    assert src("h3:3181") == "/script-h3"
    assert src("h9:3181") is None
    assert log.read_text().split("\n")[:-1] == ["h3 h4"]
    assert src.names_any(["h9:1", "host2:1"]) and not src.names_any(["h9:1"])


def test_a_failing_script_leaves_bookies_in_the_default_rack(tmp_path):
    src = RackSource(script=ScriptRacks(os.path.join(str(tmp_path), "missing")))
    src.refresh(["a:1"])
    assert RackAwarePlacement(src).rack("a:1") == DEFAULT_RACK


def test_a_rack_source_watches_the_rack_map_and_reads_it_no_more():
    from tests.support.fake_store import FakeMetadataStore

    store = FakeMetadataStore().start()
    store.racks.write({"default": {"a:1": {"rack": "/r1"}}}, None)
    src = RackSource(store=store)
    store.calls.clear()
    for _ in range(5):
        src.refresh(["a:1", "b:1"])
    assert [name for name, _ in store.calls] == ["racks.watch"]  # once; no read at every refresh
    assert src("a:1") == "/r1" and src("b:1") is None
    store.racks.write({"default": {"a:1": {"rack": "/r2"}, "b:1": {"rack": "/r1"}}}, 0)
    assert src("a:1") == "/r2" and src("b:1") == "/r1"  # told, not read at a refresh
    store.racks.put_bytes(b"not json")  # a bad edit: the last good map stays
    assert src("a:1") == "/r2"
    src.close()
    store.racks.write({"default": {"a:1": {"rack": "/r3"}}}, 2)
    assert src("a:1") == "/r2"  # not watching any more


def test_a_rack_map_that_does_not_parse_fails_the_refresh_until_one_does():
    from tests.support.fake_store import FakeMetadataStore

    store = FakeMetadataStore().start()
    store.racks.put_bytes(b"[]")
    src = RackSource(store=store)
    with pytest.raises(RackMapError):
        src.refresh()
    with pytest.raises(RackMapError):
        src.refresh()
    store.racks.put_bytes(b'{"default": {"a:1": {"rack": "/r1"}}}')
    src.refresh()
    assert src("a:1") == "/r1"
