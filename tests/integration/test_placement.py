"""Rack- and region-aware placement against real ZooKeeper and bookieds: the rack map set with
`bkctl bookie rack`, ensembles spread over racks, a read-only rack (with and without enforcement),
recover keeping every ledger's spread, `ledger list --not-adhering`, and regions."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from bkctl.wire import fastpath
from bkctl.wire.client.placement import MEETS_STRICT, RackAwarePlacement, RegionAwarePlacement
from bkctl.wire.metadata.racks import RACK_MAP_PATH
from tests.support.bookieproc import BookieProcess, start_bookies
from tests.support.cli import bkctl_bytes as bkctl
from tests.support.cli import json_lines, ok, one_line_error
from tests.support.ports import free_port


@pytest.fixture
def http_bookies(tmp_path, metadata_uri):
    """``make(n, **bk_server_conf)``: n bookieds with their HTTP admin API on (``proc.http_port``);
    killed at the end."""
    started: list[BookieProcess] = []

    def make(n: int, **settings) -> list[BookieProcess]:
        procs = []
        for i in range(n):
            port = free_port()
            p = BookieProcess(
                tmp_path / f"bookie{len(started) + i}",
                metadata_uri,
                httpServerEnabled="true",
                httpServerPort=port,
                **settings,
            )
            p.http_port = port
            procs.append(p)
        started.extend(procs)
        return start_bookies(procs, metadata_uri)

    yield make
    for p in started:
        p.kill()


def _set_readonly(proc, readonly: bool) -> None:
    req = urllib.request.Request(
        f"http://127.0.0.1:{proc.http_port}/api/v1/bookie/state/readonly",
        data=json.dumps({"readOnly": readonly}).encode(),
        method="PUT",
    )
    urllib.request.urlopen(req, timeout=10).read()


def _wait(cond, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _write_quorums(ensemble, qw):
    e = len(ensemble)
    return [[ensemble[(s + k) % e] for k in range(qw)] for s in range(e)] if qw < e else [list(ensemble)]


def _profile(tmp_path, uri: str, **keys) -> dict:
    """Environment selecting a cluster profile 'c' with ``keys`` (config.toml in a fresh XDG dir)."""
    conf = tmp_path / "xdg" / "bkctl"
    conf.mkdir(parents=True, exist_ok=True)
    lines = ["[clusters.c]", f'metadata_uri = "{uri}"']
    lines += [f"{k} = {json.dumps(v)}" for k, v in keys.items()]
    (conf / "config.toml").write_text("\n".join(lines) + "\n")
    return {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def _bkctl_env(uri, env, *args):
    import subprocess

    from tests.support.cli import BKCTL, REPO, env_for

    full = dict(env_for(uri), **env)
    full.pop("BKCTL_METADATA_URI")
    return subprocess.run([*BKCTL, *map(str, args)], input=b"", capture_output=True, env=full, cwd=REPO, timeout=60)


class _Fixed:
    """A placement that returns one given ensemble (to make a ledger that breaks the policy)."""

    name = "fixed"

    def __init__(self, ensemble):
        self.ensemble = list(ensemble)

    def new_ensemble(self, size, writable, readonly=(), exclude=(), *, write_quorum=None):
        return self.ensemble[:size]


def test_rack_aware_life_cycle(http_bookies, rack_map, metadata_uri, zkstore, zk_client, tmp_path):
    from bkctl.app import App
    from bkctl.wire.client.blocking import BlockingBookKeeper

    procs = http_bookies(6, zkTimeout=4000)  # the bookie killed below is gone in 4-6 s, not 10-12
    uri = metadata_uri
    racks = {p.bookie_id: f"/rack{i // 2}" for i, p in enumerate(procs)}
    for bookie, rack in racks.items():
        ok(bkctl(uri, "bookie", "rack", "set", bookie, "--rack", rack))
    ok(bkctl(uri, "bookie", "rack", "set", procs[0].bookie_id, "--rack", "rack0", "--hostname", "bk0"))
    # Pulsar's JSON in the znode, as pulsar-admin writes and brokers read it
    doc = json.loads(zk_client.get(RACK_MAP_PATH)[0])
    expected = {b: {"rack": r} for b, r in racks.items()}
    expected[procs[0].bookie_id]["hostname"] = "bk0"
    assert doc == {"default": expected}
    got = json.loads(ok(bkctl(uri, "--json", "bookie", "rack", "get", procs[0].bookie_id)))
    assert got == {"bookie_id": procs[0].bookie_id, "group": "default", "rack": "/rack0", "hostname": "bk0"}
    listed = [json.loads(line) for line in ok(bkctl(uri, "--json", "bookie", "rack", "list")).splitlines()]
    assert {(r["bookie_id"], r["rack"], r["state"]) for r in listed} == {(b, r, "writable") for b, r in racks.items()}
    one_line_error(bkctl(uri, "bookie", "rack", "get", "127.0.0.1:1"), 3)

    # the default placement is rack-aware because the rack map names the bookies
    app = App(metadata_uri=uri, twins=fastpath.selected())
    try:
        ids = []
        for _ in range(20):
            lh = app.bk.create(3, 2, 2)
            lh.add_many(f"e{lh.ledger_id}-{i}".encode() for i in range(10))
            lh.close()
            ids.append(lh.ledger_id)
    finally:
        app.close()
    for lid in ids:
        ens = zkstore.ledgers.read(lid)[0].last_ensemble
        assert len({racks[b] for b in ens}) == 3, ens
        assert all(len({racks[b] for b in wq}) == 2 for wq in _write_quorums(ens, 2))
    assert ok(bkctl(uri, "--json", "ledger", "list", "--not-adhering")).strip() == ""

    # a ledger made to break the policy is listed (two copies of entry 0 in rack0)
    same_rack = [procs[0].bookie_id, procs[1].bookie_id, procs[2].bookie_id]
    bad = BlockingBookKeeper(uri, placement=_Fixed(same_rack), timeout=60)
    try:
        bad_lh = bad.create(3, 2, 2)
        bad_lh.close()
    finally:
        bad.close()
    rows = json_lines(ok(bkctl(uri, "--json", "ledger", "list", "--not-adhering")))
    assert [(r["ledger_id"], r["not_adhering"]) for r in rows] == [(bad_lh.ledger_id, [0])]
    assert ok(bkctl(uri, "--json", "--placement", "random", "ledger", "list", "--not-adhering")).strip() == ""

    # rack2 read-only: two racks left; E3/Qw2 cannot pair every neighbour over two racks
    for p in procs[4:]:
        _set_readonly(p, True)
    _wait(lambda: set(zkstore.registration.readonly_bookies()) == {p.bookie_id for p in procs[4:]}, "rack2 read-only")
    created = json.loads(ok(bkctl(uri, "--json", "ledger", "create", "-e", "3", "-w", "2", "-a", "2")))
    ens = zkstore.ledgers.read(created["ledger_id"])[0].last_ensemble
    assert {racks[b] for b in ens} == {"/rack0", "/rack1"}
    strict = _profile(tmp_path, uri, enforce_min_racks_per_write_quorum=True)
    err = one_line_error(
        _bkctl_env(uri, strict, "--cluster", "c", "ledger", "create", "-e", "3", "-w", "2", "-a", "2"), 5
    )
    assert "must span 2 racks" in err and "enforceMinNumRacksPerWriteQuorum" in err
    # E4 can alternate racks: enforcement is met
    ok(_bkctl_env(uri, strict, "--cluster", "c", "ledger", "create", "-e", "4", "-w", "2", "-a", "2"))
    for p in procs[4:]:
        _set_readonly(p, False)
    _wait(lambda: not zkstore.registration.readonly_bookies(), "rack2 writable again")

    # recover a lost bookie: every replacement is its rack-mate, so every ledger keeps 3 racks
    victim, mate = procs[2], procs[3]
    victim.kill()
    _wait(lambda: victim.bookie_id not in zkstore.registration.writable_bookies(), "victim gone", timeout=40)
    on_victim = [lid for lid in ids if victim.bookie_id in zkstore.ledgers.read(lid)[0].bookies]
    assert on_victim
    ok(bkctl(uri, "--json", "recover", victim.bookie_id, "--force", timeout=300))
    for lid in ids:
        md = zkstore.ledgers.read(lid)[0]
        assert victim.bookie_id not in md.bookies
        for _first, ens in md.ensembles:
            assert len({racks[b] for b in ens}) == 3, (lid, ens)
        if lid in on_victim:
            assert mate.bookie_id in md.bookies


def test_region_aware_two_regions_of_two_racks(bookie_cluster, rack_map, metadata_uri, zkstore):
    from bkctl.app import App
    from bkctl.wire.client.blocking import BlockingBookKeeper

    procs = bookie_cluster(8)
    uri = metadata_uri
    names = ["/east/a", "/east/b", "/west/a", "/west/b"]
    racks = {p.bookie_id: names[i % 4] for i, p in enumerate(procs)}
    for bookie, rack in racks.items():
        ok(bkctl(uri, "bookie", "rack", "set", bookie, "--rack", rack, "--group", "g1"))
    app = App(metadata_uri=uri, placement="region", twins=fastpath.selected())
    try:
        ids = [app.bk.create(4, 2, 2).ledger_id for _ in range(10)]
    finally:
        app.close()
    for lid in ids:
        ens = zkstore.ledgers.read(lid)[0].last_ensemble
        assert {racks[b] for b in ens} == set(names), ens
        assert all(len({racks[b].split("/")[1] for b in wq}) == 2 for wq in _write_quorums(ens, 2)), ens
    # east, east, west, west: write quorums inside one region break the region policy only
    by_rack = {r: b for b, r in reversed(list(racks.items()))}
    grouped = [by_rack[r] for r in names]
    bad = BlockingBookKeeper(uri, placement=_Fixed(grouped), timeout=60)
    try:
        bad_id = bad.create(4, 2, 2).ledger_id
    finally:
        bad.close()
    rows = json_lines(ok(bkctl(uri, "--json", "--placement", "region", "ledger", "list", "--not-adhering")))
    assert [r["ledger_id"] for r in rows] == [bad_id]
    assert ok(bkctl(uri, "--json", "--placement", "rack", "ledger", "list", "--not-adhering")).strip() == ""
    assert RegionAwarePlacement(racks).adherence(grouped, 2) != MEETS_STRICT
    assert RackAwarePlacement(racks).adherence(grouped, 2) == MEETS_STRICT
