"""``bkctl backup`` and ``bkctl restore`` on the day they are needed, against REAL ZooKeeper and
bookieds: a ledger with entries no bookie holds (planted, as fsck's tests plant them) does not
stop a backup of the rest; a restore reads a read-only archive and writes nothing there."""

from __future__ import annotations

import os

import pytest

from bkctl.exitcodes import PARTIAL
from tests.support.cli import bkctl, json_lines
from tests.support.ledgers import make_ledger
from tests.support.planted import closed_metadata, put

pytestmark = [pytest.mark.integration]

N = 12  # entries of the planted ledger; 6..11 are on no bookie


def plant_unreadable(zkstore, ports: dict[str, int], ledger_id: int = 1004) -> int:
    """A closed ledger whose metadata says 12 entries while its bookies hold 0..5 only."""
    a, b = sorted(ports)[:2]
    zkstore.ledgers.create(closed_metadata(ledger_id, [(0, [a, b])], N - 1, 2), ledger_id=ledger_id)
    for bookie in (a, b):
        put(ports[bookie], ledger_id, range(6))
    return ledger_id


def files_of(folder) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), folder) for d, _dirs, fs in os.walk(folder) for f in fs)


def test_a_backup_copies_every_readable_ledger_records_the_unreadable_one_and_says_so(
    bookie_cluster, metadata_uri, zkstore, writer, tmp_path
):
    procs = bookie_cluster(3)
    ports = {p.bookie_id: p.port for p in procs}
    good = [make_ledger(writer, 3, 2, entries=50, tag=f"g{i}") for i in range(3)]
    bad = plant_unreadable(zkstore, ports)
    archive = tmp_path / "archive"

    r = bkctl(metadata_uri, "--json", "backup", "--to", archive)
    assert r.returncode == PARTIAL, r.stderr
    assert f"ledger {bad}" in r.stderr and "partial" in r.stderr
    doc = json_lines(r.stdout)[0]
    assert [u["ledger_id"] for u in doc["unreadable"]] == [bad]
    assert doc["ledgers"] == len(good) and doc["unreadable_ledgers"] == 1

    listed = bkctl(metadata_uri, "--json", "backup", "list", archive)
    assert listed.returncode == 0, listed.stderr
    rows = json_lines(listed.stdout)
    assert len(rows) == 1 and rows[0]["id"] == doc["backup"] and rows[0]["unreadable_ledgers"] == 1
    human = bkctl(metadata_uri, "backup", "list", archive)
    assert "PARTIAL" in human.stdout and "1 ledger unreadable" in human.stdout
    shown = json_lines(bkctl(metadata_uri, "--json", "backup", "show", archive).stdout)[0]
    assert [u["ledger_id"] for u in shown["unreadable"]] == [bad]
    assert bkctl(metadata_uri, "backup", "verify", archive).returncode == 0  # what it holds is whole
    assert not any(f.startswith(f"ledgers/{bad}/") for f in files_of(archive))  # no half copy
