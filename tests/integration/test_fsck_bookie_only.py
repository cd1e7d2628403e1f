"""bookie_only against real bookieds: a ledger whose metadata znode is deleted behind bkctl's
back (its entries still on the bookies) is named by ``bkctl ledger fsck`` with the bookies and
entries holding it; a bookie that cannot list its ledgers is said to be "not checked"."""

from __future__ import annotations

from tests.support.bookieproc import BookieProcess, start_bookies
from tests.support.cli import bkctl, json_lines
from tests.support.planted import closed_metadata, put

N = 6


def test_fsck_names_a_ledger_whose_metadata_was_deleted_behind_its_back(tmp_path, metadata_uri, zkstore):
    procs = [BookieProcess(tmp_path / f"b{i}", metadata_uri).serve_http() for i in range(2)]
    procs.append(BookieProcess(tmp_path / "b2", metadata_uri))  # no HTTP server: cannot list what it holds
    try:
        start_bookies(procs, metadata_uri)
        a, b = procs[0].bookie_id, procs[1].bookie_id
        for lid in (2001, 2002):
            zkstore.ledgers.create(closed_metadata(lid, [(0, [a, b])], N - 1, 2), ledger_id=lid)
            for p in procs[:2]:
                put(p.port, lid, range(N))
        zkstore.ledgers.delete(2001)  # the metadata gone; the bookies' copies are not

        r = bkctl(metadata_uri, "--json", "ledger", "fsck")
        assert r.returncode == 8, r.stderr
        (found,) = json_lines(r.stdout)
        assert (found["ledger_id"], found["kind"]) == (2001, "bookie_only")
        assert found["held"] == {a: [[0, N - 1]], b: [[0, N - 1]]}
        assert f"bookie_only not checked on {procs[2].bookie_id}" in r.stderr

        named = bkctl(metadata_uri, "ledger", "fsck", "2002")  # only over every ledger
        assert named.returncode == 0 and "bookie_only" not in named.stdout + named.stderr
    finally:
        for p in procs:
            p.kill()
