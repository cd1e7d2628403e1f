"""``./dev test`` runs the fast-paths-off suites beside the whole suite, both with
workers gw0, gw1...: each run keeps to port blocks of its own (tests/support/ports.py), and the
ZooKeeper they share to the block after theirs."""

from __future__ import annotations

from pathlib import Path

from tests.support import ports

ROOT = Path(__file__).resolve().parents[2]


def _block(monkeypatch, worker: str, first_block: int | None) -> int:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    if first_block is None:
        monkeypatch.delenv("BKCTL_TEST_PORT_BLOCK", raising=False)
    else:
        monkeypatch.setenv("BKCTL_TEST_PORT_BLOCK", str(first_block))
    return ports.block_start()


def test_two_runs_side_by_side_draw_ports_from_different_blocks(monkeypatch):
    whole = {_block(monkeypatch, f"gw{i}", None) for i in range(6)}
    fast_paths_off = {_block(monkeypatch, f"gw{i}", 6) for i in range(3)}
    shared_zookeeper = _block(monkeypatch, "gw0", 9)  # started outside pytest: no worker name
    assert len(whole) == 6 and len(fast_paths_off) == 3
    assert not whole & fast_paths_off
    assert shared_zookeeper not in whole | fast_paths_off


def test_dev_starts_the_fast_paths_off_run_after_the_whole_suites_blocks():
    dev = (ROOT / "dev").read_text()
    off_run = next(line for line in dev.splitlines() if "BKCTL_FASTPATHS=0" in line and "pytest" in line)
    assert "BKCTL_TEST_PORT_BLOCK=$workers" in off_run
    assert '-n "$workers"' in dev  # the whole suite's workers: the blocks before


def test_dev_starts_the_shared_zookeeper_after_both_runs_blocks():
    dev = (ROOT / "dev").read_text()
    start = next(line for line in dev.splitlines() if "shared_zookeeper start" in line)
    assert "BKCTL_TEST_PORT_BLOCK=$((workers + off_workers))" in start
