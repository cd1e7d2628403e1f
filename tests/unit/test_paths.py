"""Znode paths (wire/metadata/paths.py), with paths of a Java 4.17 cluster (tests/vectors/zk)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bkctl.wire.metadata import paths
from bkctl.wire.metadata.paths import (
    hob_name,
    idgen_sequence,
    is_ledger_node_name,
    is_ledger_parent_name,
    is_special_znode,
    ledger_id_from_path,
    ledger_parent_paths,
    ledger_path,
    parse_hob_name,
    parse_urL_name,
    underreplication_lock_path,
    underreplication_path,
    urL_name,
)
from tests.support.golden import VECTORS


@pytest.mark.parametrize(
    "ledger_id,manager,path",
    [
        (1, "hierarchical", "/ledgers/00/0000/L0001"),
        (1, "legacyhierarchical", "/ledgers/00/0000/L0001"),
        (1, "longhierarchical", "/ledgers/000/0000/0000/0000/L0001"),
        (1, "flat", "/ledgers/L0000000001"),
        (1234567890, "hierarchical", "/ledgers/12/3456/L7890"),
        (1234567890, "legacyhierarchical", "/ledgers/12/3456/L7890"),
        (4294967301, "hierarchical", "/ledgers/000/0000/0042/9496/L7301"),
        (4294967301, "longhierarchical", "/ledgers/000/0000/0042/9496/L7301"),
        (2147483646, "hierarchical", "/ledgers/21/4748/L3646"),
        (2147483647, "hierarchical", "/ledgers/000/0000/0021/4748/L3647"),
        (2**63 - 1, "longhierarchical", "/ledgers/922/3372/0368/5477/L5807"),
        (0, "flat", "/ledgers/L0000000000"),
        (42, "flat", "/ledgers/L0000000042"),
    ],
)
def test_ledger_paths(ledger_id, manager, path):
    assert ledger_path(ledger_id, manager) == path
    assert ledger_id_from_path(path, manager) == ledger_id


def test_golden_ledger_znodes_are_hierarchical_paths():
    found = []
    for line in (VECTORS / "zk" / "znodes.jsonl").read_text().splitlines():
        path = json.loads(line)["path"]
        if "/L00" in path:
            found.append(ledger_id_from_path(path))
            assert ledger_path(found[-1]) == path
    assert found == list(range(14))


def test_custom_root_and_parents():
    assert ledger_path(7, root="/bk/ledgers/") == "/bk/ledgers/00/0000/L0007"
    assert ledger_id_from_path("/bk/ledgers/00/0000/L0007", root="/bk/ledgers") == 7
    assert ledger_parent_paths(1) == ["/ledgers/00", "/ledgers/00/0000"]
    assert ledger_parent_paths(4294967301, "longhierarchical") == [
        "/ledgers/000",
        "/ledgers/000/0000",
        "/ledgers/000/0000/0042",
        "/ledgers/000/0000/0042/9496",
    ]
    assert ledger_parent_paths(5, "flat") == []


@pytest.mark.parametrize(
    "path,manager",
    [
        ("/ledgers/00/0000/L0001", "longhierarchical"),
        ("/ledgers/000/0000/0000/0000/L0001", "legacyhierarchical"),
        ("/ledgers/00/0000/L0001", "flat"),
        ("/ledgers/L0000000001", "hierarchical"),
        ("/ledgers/00/0000/X0001", "hierarchical"),
        ("/ledgers/00/000a/L0001", "hierarchical"),
        ("/ledgers/00/0000", "hierarchical"),
        ("/other/00/0000/L0001", "hierarchical"),
        ("/ledgers/999/9999/9999/9999/L9999", "hierarchical"),  # > 2^63-1
    ],
)
def test_not_ledger_paths(path, manager):
    with pytest.raises(ValueError):
        ledger_id_from_path(path, manager)


def test_bad_ids_and_managers():
    for bad in (-1, 2**63, "1", True):
        with pytest.raises(ValueError):
            ledger_path(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="legacy"):
        ledger_path(10**10, "legacyhierarchical")
    with pytest.raises(ValueError, match="unknown ledger manager"):
        ledger_path(1, "ms")


def test_special_znodes_and_parent_names():
    for name in (
        "available",
        "cookies",
        "LAYOUT",
        "INSTANCEID",
        "underreplication",
        "idgen",
        "idgen-long",
        "ID-0000000001",
    ):
        assert is_special_znode(name)
        assert not is_ledger_parent_name(name)
    assert not is_special_znode("00")
    assert not is_ledger_parent_name("disableHealthCheck") and not is_ledger_parent_name("readonly")
    assert is_ledger_parent_name("00") and is_ledger_parent_name("000")
    assert not is_ledger_parent_name("0000") and not is_ledger_parent_name("0a")
    assert is_ledger_parent_name("00", "legacyhierarchical") and not is_ledger_parent_name("000", "legacyhierarchical")
    assert is_ledger_parent_name("000", "longhierarchical") and not is_ledger_parent_name("00", "longhierarchical")
    assert is_ledger_parent_name("L0000000042", "flat") and not is_ledger_parent_name("00", "flat")
    assert is_ledger_node_name("L0001") and is_ledger_node_name("L0000000042") and not is_ledger_node_name("L01")


def test_id_generation_names():
    assert idgen_sequence("ID-0000000042") == 42
    assert idgen_sequence("/ledgers/idgen/ID-2147483647") == 2147483647
    assert hob_name(1) == "HOB-0000000001"
    assert parse_hob_name("/ledgers/idgen-long/HOB-0000000003") == 3
    for bad in ("ID-", "ID-x1", "XX-0001"):
        with pytest.raises(ValueError):
            idgen_sequence(bad)
    with pytest.raises(ValueError):
        parse_hob_name("HOB-")


def test_underreplication_paths():
    assert underreplication_path(1) == "/ledgers/underreplication/ledgers/0000/0000/0000/0001/urL0000000001"
    assert underreplication_path(0x0123456789ABCDEF) == (
        "/ledgers/underreplication/ledgers/0123/4567/89ab/cdef/urL81985529216486895"
    )
    assert underreplication_lock_path(42) == "/ledgers/underreplication/locks/urL0000000042"
    assert urL_name(42) == "urL0000000042"
    assert parse_urL_name("urL0000000042") == 42
    assert parse_urL_name("/x/locks/urL0000000042") == 42
    with pytest.raises(ValueError):
        parse_urL_name("urL42")
    assert paths.ledger_id_from_underreplication_path(underreplication_path(77)) == 77
    with pytest.raises(ValueError, match="do not match"):
        paths.ledger_id_from_underreplication_path(
            "/ledgers/underreplication/ledgers/0000/0000/0000/0002/urL0000000001"
        )
    assert paths.underreplication_parent_paths(1)[0] == "/ledgers/underreplication/ledgers/0000"
    assert len(paths.underreplication_parent_paths(1)) == 4
    assert paths.underreplication_node(paths.UR_DISABLE) == "/ledgers/underreplication/disable"


def test_registration_paths():
    assert paths.available_path("127.0.0.1:3181") == "/ledgers/available/127.0.0.1:3181"
    assert paths.readonly_path("b:1") == "/ledgers/available/readonly/b:1"
    assert paths.cookie_path("b:1", "/bk") == "/bk/cookies/b:1"


@given(st.integers(0, 2**63 - 1), st.sampled_from(["hierarchical", "longhierarchical", "flat"]))
def test_path_roundtrip(ledger_id, manager):
    assert ledger_id_from_path(ledger_path(ledger_id, manager), manager) == ledger_id


@given(st.integers(0, 2**63 - 1))
def test_underreplication_roundtrip(ledger_id):
    assert paths.ledger_id_from_underreplication_path(underreplication_path(ledger_id)) == ledger_id


@pytest.mark.parametrize("manager", ["hierarchical", "legacyhierarchical", "longhierarchical", "flat"])
def test_ledger_paths_of_a_walk_are_ledger_path_of_each_id(manager):
    threshold = paths.HIERARCHICAL_LONG_THRESHOLD
    ids = [
        0,
        1,
        9_999,
        10_000,
        10_001,
        19_999,
        5,
        123_456_789,
        threshold - 2,
        threshold - 1,
        threshold,
        threshold + 1,
        threshold + 10_000,
    ]
    if manager == "legacyhierarchical":
        ids = [i for i in ids if i <= 9_999_999_999]
    assert list(paths.ledger_paths(ids, manager, "/ledgers")) == [
        paths.ledger_path(i, manager, "/ledgers") for i in ids
    ]
    assert list(paths.ledger_paths(range(20_000, 20_005), manager, "/a/b")) == [
        paths.ledger_path(i, manager, "/a/b") for i in range(20_000, 20_005)
    ]
    with pytest.raises(ValueError):
        list(paths.ledger_paths([3, -1], manager, "/ledgers"))
