"""bkctl.ops.inspect over the three Java bookies of tests/vectors/disk: together their indexes
hold every entry tests/vectors/README.md lists, each on write-quorum bookies, and every
indexed entry reads back through its location with the README's payload."""

import shutil
from collections import Counter
from pathlib import Path

from bkctl.ops import inspect
from bkctl.ops.bookie_conf import BookieDirs

DISK = Path(__file__).resolve().parents[1] / "vectors" / "disk"
DIGEST_LENGTH = {"CRC32C": 4, "CRC32": 8, "MAC": 20, "DUMMY": 0}
# tests/vectors/README.md: ledger -> (write quorum, digest, payloads)
LEDGERS = {
    0: (2, "CRC32C", ["hello-0", "hello-1", "hello-2"]),
    2: (1, "CRC32C", ["deferred-0"]),
    3: (2, "CRC32C", ["hello-0", "hello-1", "hello-2"]),
    5: (2, "CRC32C", ["batch-0", "batch-1", "batch-2"]),
    **{
        i: (1, d, [f"dig-{d}-0", f"dig-{d}-1"])
        for i, d in (
            (6, "CRC32"),
            (7, "CRC32"),
            (8, "CRC32C"),
            (9, "CRC32C"),
            (10, "MAC"),
            (11, "MAC"),
            (12, "DUMMY"),
            (13, "DUMMY"),
        )
    },
}


def _bookie(tmp_path: Path, name: str) -> BookieDirs:
    for f in DISK.glob(f"{name}__*.bin"):
        dest = tmp_path / f.name[:-4].replace("__", "/").removesuffix(".head")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, dest)
    return BookieDirs(
        f"{name}:3181", (str(tmp_path / name / "journal"),), (str(tmp_path / name / "ledgers"),), (), None
    )


def test_the_three_bookies_hold_what_the_readme_lists(tmp_path):
    replicas = Counter()
    for name in ("bk1", "bk2", "bk3"):
        dirs = _bookie(tmp_path, name)
        indexed = set()
        for row in inspect.index_entries(dirs):
            ledger_id, entry_id = row.ledger_id, row.entry_id
            _qw, digest, payloads = LEDGERS[ledger_id]
            data = row.read()
            assert data[32 + DIGEST_LENGTH[digest] :].decode() == payloads[entry_id]
            replicas[ledger_id, entry_id] += 1
            indexed.add((ledger_id, entry_id))
        journal_entries = {(r.ledger_id, r.entry_id) for r in inspect.journal(dirs) if r.kind == "entry"}
        assert journal_entries == indexed  # what the journal took is what the index holds
        (mark,) = inspect.lastmark(dirs)
        assert mark.journal_file.endswith(".txn")
    assert replicas == Counter({(lid, e): qw for lid, (qw, _d, p) in LEDGERS.items() for e in range(len(p))})


def test_each_record_line_keeps_its_keys(tmp_path):
    """The --json line of each kind of record has the keys it always had: an entry's fields
    only where an entry is, a Java entry log's entry no ``state``, an index row no ``read``."""
    from bkctl.ops.results import to_json

    dirs = _bookie(tmp_path, "bk1")
    base = {"file", "format", "ledger_id", "entry_id"}
    lines = [to_json(r) for r in inspect.journal(dirs, digest="crc32c")]
    entries = [d for d in lines if d["kind"] == "entry"]
    assert entries and all(
        set(d) == base | {"version", "offset", "kind", "size", "lac", "length", "payload"} for d in entries
    )
    assert all(set(d) == base | {"version", "offset", "kind", "data"} for d in lines if d["kind"] != "entry")
    logged = to_json(next(inspect.entrylog(dirs)))
    assert set(logged) == base | {"offset", "size", "lac", "length", "body"}
    row = to_json(next(inspect.index(dirs, 0)))
    assert set(row) == base | {"dir", "location", "size", "lac", "length", "body"}
    assert set(row["location"]) == {"log_id", "offset"}
