"""bkctl bookie inspect and bookie check on a Java bookie's files (tests/vectors/disk) and on a
real bookied's, with real ZooKeeper for the ledgers' digests."""

import json
import shutil
from pathlib import Path

import pytest

from tests.support.bookieproc import BookieProcess
from tests.support.cli import bkctl

VECTORS = Path(__file__).resolve().parents[1] / "vectors"


def _lines(res):
    assert res.returncode == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines()]


@pytest.fixture
def java_bookie(tmp_path, metadata_uri, zkstore):
    """bk1's files laid out as on its disk, its ledgers' metadata (from the ZooKeeper vectors)
    restored in the test cluster; returns the bk_server.conf path."""
    for f in (VECTORS / "disk").glob("bk1__*.bin"):
        rel = f.name[:-4].replace("__", "/").removesuffix(".head")
        dest = tmp_path / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, dest)
    for ledger_id in (0, 3, 5, 12):
        data = (VECTORS / "zk" / "raw" / f"ledgers__00__0000__L{ledger_id:04d}.bin").read_bytes()
        zkstore.ledgers.restore_bytes(ledger_id, data)
    conf = tmp_path / "bk_server.conf"
    conf.write_text(
        f"journalDirectories={tmp_path}/bk1/journal\nledgerDirectories={tmp_path}/bk1/ledgers\n"
        f"bookiePort=3181\nadvertisedAddress=127.0.0.1\nmetadataServiceUri={metadata_uri}\n"
    )
    return str(conf)


def test_inspect_java_files(metadata_uri, java_bookie):
    files = _lines(bkctl(metadata_uri, "--json", "bookie", "inspect", "files", "-c", java_bookie))
    kinds = {(r["name"], r["kind"], r["format"]) for r in files}
    assert {
        ("1a200521c5b.txn", "journal", "java"),
        ("0.log", "entrylog", "java"),
        ("0/c/c.idx", "index", "java"),
        ("lastMark", "lastmark", "java"),
    } <= kinds

    (mark,) = _lines(bkctl(metadata_uri, "--json", "bookie", "inspect", "lastmark", "-c", java_bookie))
    assert (mark["journal_file"], mark["offset"]) == ("1a200521c5b.txn", 7680)

    ledgers = _lines(bkctl(metadata_uri, "--json", "bookie", "inspect", "index", "-c", java_bookie))
    assert {r["ledger_id"]: (r["fenced"], r["entries"]) for r in ledgers} == {
        0: (True, 2),
        3: (True, 2),
        5: (False, 3),
        12: (False, 2),
    }

    dummy = _lines(
        bkctl(
            metadata_uri,
            "--json",
            "bookie",
            "inspect",
            "index",
            "-c",
            java_bookie,
            "--ledger",
            "12",
            "--digest",
            "dummy",
        )
    )
    assert [(r["entry_id"], r["payload"]) for r in dummy] == [(0, "dig-DUMMY-0"), (1, "dig-DUMMY-1")]
    one = _lines(
        bkctl(
            metadata_uri,
            "--json",
            "bookie",
            "inspect",
            "entrylog",
            "-c",
            java_bookie,
            "--ledger",
            "5",
            "--entry",
            "1",
            "--digest",
            "crc32c",
        )
    )
    assert [(r["ledger_id"], r["entry_id"], r["payload"], r["lac"]) for r in one] == [(5, 1, "batch-1", 0)]
    journal = _lines(
        bkctl(
            metadata_uri,
            "--json",
            "bookie",
            "inspect",
            "journal",
            "-c",
            java_bookie,
            "--ledger",
            "0",
            "--digest",
            "crc32c",
        )
    )
    assert [(r["kind"], r["entry_id"], r.get("payload")) for r in journal] == [
        ("master_key", None, None),
        ("entry", 1, "hello-1"),
        ("entry", 2, "hello-2"),
        ("explicit_lac", None, None),
        ("fence", None, None),
        ("entry", 2, "hello-2"),
    ]
    human = bkctl(metadata_uri, "bookie", "inspect", "entrylog", "-c", java_bookie, "--digest", "dummy")
    assert "dig-DUMMY-1" in human.stdout
    assert bkctl(metadata_uri, "bookie", "inspect", "index", "-c", java_bookie, "--entry", "1").returncode == 2


def test_check_java_files_finds_a_corrupt_entry(metadata_uri, java_bookie):
    res = bkctl(metadata_uri, "--json", "bookie", "check", "-c", java_bookie)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert (doc["entries"], doc["ledgers"], doc["ok"], doc["bad"], doc["unverified"]) == (9, 4, 9, 0, 0)
    offline = json.loads(bkctl(metadata_uri, "--json", "bookie", "check", "-c", java_bookie, "--offline").stdout)
    assert offline["unverified"] == 9 and offline["ok"] == 0

    log = Path(java_bookie).parent / "bk1" / "ledgers" / "current" / "0.log"
    data = bytearray(log.read_bytes())
    assert data[1028 + 36 : 1028 + 43] == b"hello-1"  # ledger 0 entry 1: header 32 + CRC32C 4
    data[1028 + 42] ^= 0xFF
    log.write_bytes(bytes(data))
    res = bkctl(metadata_uri, "--json", "bookie", "check", "-c", java_bookie)
    assert res.returncode == 1
    doc = json.loads(res.stdout)
    assert doc["bad"] == 1 and doc["ok"] == 8
    assert [(p["ledger_id"], p["entry_id"]) for p in doc["problems"]] == [(0, 1)]


def test_inspect_and_check_bookied_files(tmp_path, metadata_uri, zkstore):
    b = BookieProcess(tmp_path / "b", metadata_uri)
    b.start()
    try:
        ledger_id = json.loads(
            bkctl(
                metadata_uri,
                "--json",
                "ledger",
                "create",
                "-e",
                "1",
                "-w",
                "1",
                "-a",
                "1",
                "--digest",
                "mac",
                "--password",
                "pw",
            ).stdout
        )["ledger_id"]
        assert (
            bkctl(metadata_uri, "ledger", "add", str(ledger_id), "--password", "pw", "one", "two", "three").returncode
            == 0
        )
        assert bkctl(metadata_uri, "ledger", "close", str(ledger_id), "--password", "pw").returncode == 0
    finally:
        assert b.stop() == 0
    conf = str(b.base / "bk_server.conf")

    rows = _lines(
        bkctl(
            metadata_uri,
            "--json",
            "bookie",
            "inspect",
            "index",
            "-c",
            conf,
            "--ledger",
            str(ledger_id),
            "--digest",
            "mac",
        )
    )
    assert [(r["format"], r["entry_id"], r["payload"]) for r in rows] == [
        ("bookied", 0, "one"),
        ("bookied", 1, "two"),
        ("bookied", 2, "three"),
    ]
    (led,) = [
        r
        for r in _lines(bkctl(metadata_uri, "--json", "bookie", "inspect", "index", "-c", conf))
        if r["ledger_id"] == ledger_id
    ]
    assert led["entries"] == 3 and led["master_key"]
    logged = _lines(
        bkctl(
            metadata_uri,
            "--json",
            "bookie",
            "inspect",
            "entrylog",
            "-c",
            conf,
            "--ledger",
            str(ledger_id),
            "--digest",
            "mac",
        )
    )
    # the entry logs may hold an entry twice (rewritten by ledger recovery); the index points at one
    assert sorted({(r["entry_id"], r["payload"]) for r in logged}) == [(0, "one"), (1, "two"), (2, "three")]
    journal = _lines(
        bkctl(metadata_uri, "--json", "bookie", "inspect", "journal", "-c", conf, "--ledger", str(ledger_id))
    )
    assert sorted({r["entry_id"] for r in journal if r["kind"] == "entry"}) == [0, 1, 2]
    assert any(r["kind"] == "master_key" for r in journal)
    marks = _lines(bkctl(metadata_uri, "--json", "bookie", "inspect", "lastmark", "-c", conf))
    assert marks and all(r["format"] == "bookied" for r in marks)
    doc = json.loads(bkctl(metadata_uri, "--json", "bookie", "check", "-c", conf).stdout)
    assert doc["ok"] >= 3 and doc["bad"] == 0


def _tree(path: Path) -> dict:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_inspect_and_check_db_ledger_storage(tmp_path, metadata_uri, zkstore):
    """A DbLedgerStorage directory (RocksDB ledgers/ and locations/ as BookKeeper's
    bookie/storage/ldb/LedgerMetadataIndex.java and EntryLocationIndex.java keep them,
    written here with rocksdict; Java's entry log 0.log from the vectors) is read, and left as it was."""
    import struct

    from rocksdict import Options, Rdict

    cur = tmp_path / "ledgers" / "current"
    cur.mkdir(parents=True)
    (tmp_path / "journal" / "current").mkdir(parents=True)
    shutil.copy(VECTORS / "disk" / "bk1__ledgers__current__0.log.bin", cur / "0.log")
    key12 = bytes(range(20))
    with_key = b"\x08\x01\x1a\x14" + key12  # LedgerData {exists: true, masterKey: ...}
    fenced = b"\x08\x01\x10\x01\x1a\x00"  # {exists: true, fenced: true, masterKey: ""}
    for name, rows in (
        ("ledgers", {struct.pack(">q", 12): with_key, struct.pack(">q", 5): fenced}),
        (
            "locations",
            {
                struct.pack(">qq", 12, 0): struct.pack(">q", 1451),
                struct.pack(">qq", 12, 1): struct.pack(">q", 1498),
                struct.pack(">qq", 5, 0): struct.pack(">q", 1310),
                struct.pack(">qq", 5, 2): struct.pack(">q", 1404),
            },
        ),
    ):
        db = Rdict(str(cur / name), Options(raw_mode=True))
        for k, v in rows.items():
            db[k] = v
        db.close()
        (cur / name / "rocksdict-config.json").unlink()  # Java's databases have none
    for ledger_id in (5, 12):
        zkstore.ledgers.restore_bytes(
            ledger_id, (VECTORS / "zk" / "raw" / f"ledgers__00__0000__L{ledger_id:04d}.bin").read_bytes()
        )
    conf = tmp_path / "bk_server.conf"
    conf.write_text(
        f"journalDirectories={tmp_path}/journal\nledgerDirectories={tmp_path}/ledgers\nbookiePort=3181\n"
        f"advertisedAddress=127.0.0.1\nmetadataServiceUri={metadata_uri}\n"
        "ledgerStorageClass=org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage\n"
    )
    before = _tree(tmp_path / "ledgers")

    ledgers = _lines(bkctl(metadata_uri, "--json", "bookie", "inspect", "index", "-c", str(conf)))
    assert {r["ledger_id"]: (r["format"], r["fenced"], r["entries"], r["master_key"]) for r in ledgers} == {
        5: ("java-rocksdb", True, 2, ""),
        12: ("java-rocksdb", False, 2, key12.hex()),
    }
    rows = _lines(
        bkctl(
            metadata_uri, "--json", "bookie", "inspect", "index", "-c", str(conf), "--ledger", "12", "--digest", "dummy"
        )
    )
    assert [(r["entry_id"], r["location"], r["payload"]) for r in rows] == [
        (0, {"log_id": 0, "offset": 1451}, "dig-DUMMY-0"),
        (1, {"log_id": 0, "offset": 1498}, "dig-DUMMY-1"),
    ]
    doc = json.loads(bkctl(metadata_uri, "--json", "bookie", "check", "-c", str(conf)).stdout)
    assert (doc["entries"], doc["ok"], doc["bad"]) == (4, 4, 0)
    files = _lines(bkctl(metadata_uri, "--json", "bookie", "inspect", "files", "-c", str(conf)))
    assert {r["format"] for r in files if r["kind"] == "index"} == {"java-rocksdb"}
    assert _tree(tmp_path / "ledgers") == before  # read-only: nothing added, nothing changed


def test_a_damaged_java_file_is_one_line_naming_it(metadata_uri, java_bookie):
    idx = Path(java_bookie).parent / "bk1" / "ledgers" / "current" / "0" / "0" / "0.idx"
    idx.write_bytes(b"garbage")
    res = bkctl(metadata_uri, "bookie", "inspect", "index", "-c", java_bookie)
    assert res.returncode == 1 and str(idx) in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_inspect_reads_another_hosts_conf(metadata_uri, java_bookie):
    """Disks copied from another host: its listeningInterface does not exist here, inspect reads anyway."""
    conf = Path(java_bookie)
    conf.write_text(conf.read_text().replace("advertisedAddress=127.0.0.1", "listeningInterface=no-such-nic0"))
    ledgers = _lines(bkctl(metadata_uri, "--json", "bookie", "inspect", "index", "-c", str(conf)))
    assert sorted(r["ledger_id"] for r in ledgers) == [0, 3, 5, 12]
    assert bkctl(metadata_uri, "cookie", "admin", "-c", str(conf), "--list").returncode == 1  # needs the id
