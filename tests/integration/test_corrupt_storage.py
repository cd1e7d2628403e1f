"""Flipped bits in a bookie's stored entries: ``bkctl bookie check`` reports them, and no
damaged entry reaches a reader as a valid one -- bookied's record checksum makes the read
an error, and where the damage came before that checksum (the record is consistent but
the entry is not) the client's digest check refuses it on the wire.  Java's index pages
with a flipped bit are reported by ``bookie check`` too."""

import json
import shutil

import pytest

from bkctl.bookied.storage import scan_log
from bkctl.bookied.storage.entry_log import encode_log_record
from bkctl.wire.codecs.javadisk import INDEX_HEADER_SIZE
from bkctl.wire.errors import BKError
from tests.support.bookieproc import BookieProcess, start_bookies
from tests.support.cli import bkctl
from tests.support.golden import VECTORS

pytestmark = pytest.mark.integration

ENTRIES = 6


def check(uri: str, conf: str) -> tuple[int, dict]:
    res = bkctl(uri, "--json", "bookie", "check", "-c", conf)
    return res.returncode, json.loads(res.stdout)


def test_flipped_bits_in_an_entry_log_are_reported_and_never_read_as_valid(tmp_path, metadata_uri, zkstore, writer):
    b = BookieProcess(
        tmp_path / "b", metadata_uri, gcWaitTime=24 * 3600 * 1000, minorCompactionInterval=0, majorCompactionInterval=0
    )
    start_bookies([b], metadata_uri)
    try:
        lh = writer.create(1, 1, 1, "CRC32C", b"pw")
        ledger_id = lh.ledger_id
        for i in range(ENTRIES):
            lh.add(b"entry-%d" % i)
        lh.close()
    finally:
        assert b.stop() == 0
    conf = str(b.base / "bk_server.conf")
    assert check(metadata_uri, conf)[1]["bad"] == 0
    (log,) = sorted((b.ledger_dir / "current").glob("*.bel"))
    data = bytearray(log.read_bytes())
    records = {
        entry_id: (offset, length) for offset, length, lid, entry_id, _ in scan_log(str(log)) if lid == ledger_id
    }
    # entry 2: a bit of its payload flipped on disk (its record checksum no longer matches)
    offset, length = records[2]
    data[offset + length - 1] ^= 0x01
    # entry 4: damaged before the bookie checksummed it -- a consistent record of a wrong entry
    offset, length = records[4]
    entry = bytearray(data[offset + 24 : offset + length])
    entry[-1] ^= 0x01
    record = encode_log_record(ledger_id, 4, bytes(entry))
    assert len(record) == length
    data[offset : offset + length] = record
    log.write_bytes(bytes(data))

    code, doc = check(metadata_uri, conf)
    assert code == 1 and doc["bad"] == 2 and doc["ok"] == ENTRIES - 2
    assert sorted(p["entry_id"] for p in doc["problems"]) == [2, 4]

    start_bookies([b], metadata_uri)
    try:
        reader = writer.open(ledger_id, b"pw")
        for entry_id in range(ENTRIES):
            if entry_id in (2, 4):
                with pytest.raises(BKError) as caught:
                    reader.read_entry(entry_id)
                # the bookie's own checksum makes 2 an I/O error; 4 reaches the client, whose digest refuses it
                assert ("digest" in str(caught.value).lower()) == (entry_id == 4), caught.value
            else:
                assert reader.read_entry(entry_id) == b"entry-%d" % entry_id
    finally:
        assert b.stop() == 0


def test_a_flipped_bit_in_a_java_index_page_is_reported(tmp_path, metadata_uri, zkstore):
    for f in (VECTORS / "disk").glob("bk1__*.bin"):
        dest = tmp_path / f.name[:-4].replace("__", "/").removesuffix(".head")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, dest)
    for ledger_id in (0, 3, 5, 12):
        zkstore.ledgers.restore_bytes(
            ledger_id, (VECTORS / "zk" / "raw" / f"ledgers__00__0000__L{ledger_id:04d}.bin").read_bytes()
        )
    conf = tmp_path / "bk_server.conf"
    conf.write_text(
        f"journalDirectories={tmp_path}/bk1/journal\nledgerDirectories={tmp_path}/bk1/ledgers\n"
        f"bookiePort=3181\nadvertisedAddress=127.0.0.1\nmetadataServiceUri={metadata_uri}\n"
    )
    code, doc = check(metadata_uri, str(conf))
    assert code == 0 and doc["bad"] == 0
    idx = tmp_path / "bk1" / "ledgers" / "current" / "0" / "c" / "c.idx"  # ledger 12: entries 0 and 1
    data = bytearray(idx.read_bytes())
    data[INDEX_HEADER_SIZE + 8 + 7] ^= 0x04  # entry 1's location: its offset moves by 4 bytes
    idx.write_bytes(bytes(data))
    code, doc = check(metadata_uri, str(conf))
    assert code == 1 and doc["bad"] == 1
    assert [(p["ledger_id"], p["entry_id"]) for p in doc["problems"]] == [(12, 1)]
