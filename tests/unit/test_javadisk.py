"""bkctl.wire.codecs.javadisk on the files of a real Java 4.17.2 bookie (tests/vectors/disk)."""

import struct
from pathlib import Path

import pytest

from bkctl.wire.codecs import javadisk as J
from bkctl.wire.codecs.digest import entry_header
from bkctl.wire.errors import CodecError

DISK = Path(__file__).resolve().parents[1] / "vectors" / "disk"


def _read(name: str) -> bytes:
    return (DISK / name).read_bytes()


def test_journal_records():
    version, records = J.scan_journal(_read("bk1__journal__current__1a200521c5b.txn.head.bin"))
    records = list(records)
    assert version == 6 and records[0].offset == 512  # v5+: the header is padded to 512 bytes
    kinds = [(r.ledger_id, r.entry_id, r.kind) for r in records]
    assert kinds[:6] == [
        (0, J.MASTER_KEY, "master_key"),
        (0, 1, "entry"),
        (0, 2, "entry"),
        (0, J.EXPLICIT_LAC, "explicit_lac"),
        (0, J.FENCE, "fence"),
        (0, 2, "entry"),
    ]
    assert records[0].data == J.parse_index(_read("bk1__ledgers__current__0__0__0.idx.bin")).master_key
    entries = [(r.ledger_id, r.entry_id, r.data[-11:]) for r in records if r.kind == "entry"]
    assert (12, 0, b"dig-DUMMY-0") in entries and (5, 2, b"batch-2") in [(a, b, c[-7:]) for a, b, c in entries]
    for r in records:
        if r.kind == "entry":
            assert entry_header(r.data)[:2] == (r.ledger_id, r.entry_id)


def test_entry_log_and_index_agree():
    log = _read("bk1__ledgers__current__0.log.bin")
    assert J.entry_log_header(log) == (1, 0, 0)
    entries = list(J.scan_entry_log(log))
    assert [(e.ledger_id, e.entry_id) for e in entries] == [
        (0, 1),
        (0, 2),
        (0, 2),
        (3, 1),
        (3, 2),
        (3, 2),
        (5, 0),
        (5, 1),
        (5, 2),
        (12, 0),
        (12, 1),
    ]
    for name, ledger_id, fenced in (("0__0__0", 0, True), ("0__c__c", 12, False)):
        idx = J.parse_index(_read(f"bk1__ledgers__current__{name}.idx.bin"))
        assert idx.version == 1 and idx.fenced is fenced and len(idx.master_key) == 20
        for entry_id, (log_id, offset) in idx.locations.items():
            data = J.read_entry_at(log, offset)
            assert log_id == 0 and entry_header(data)[:2] == (ledger_id, entry_id)
    assert J.parse_index(_read("bk1__ledgers__current__0__0__0.idx.bin")).locations == {1: (0, 1028), 2: (0, 1122)}
    assert J.index_relpath(12) == "0/c/c.idx" and J.index_relpath(0x1234) == "12/34/1234.idx"


def test_marks_and_errors():
    assert J.parse_last_mark(_read("bk1__ledgers__current__lastMark.bin")) == (0x1A200521C5B, 7680)
    assert J.parse_last_id(_read("bk1__ledgers__current__lastId.bin")) == 1
    with pytest.raises(CodecError):
        J.parse_index(b"nope" + bytes(2000))
    with pytest.raises(CodecError):
        J.entry_log_header(b"BKLG")
    with pytest.raises(CodecError):
        J.read_entry_at(_read("bk1__ledgers__current__0.log.bin"), 5000)


def test_db_ledger_storage_rows():
    key = bytes(range(20))
    raw = b"\x08\x01\x10\x01\x1a\x14" + key + b"\x22\x03abc" + b"\x28\x01" + b"\x30\x07"  # + unknown field 6
    assert J.parse_db_ledger_data(raw) == J.DbLedgerData(
        exists=True, fenced=True, master_key=key, explicit_lac=b"abc", limbo=True
    )
    assert J.parse_db_ledger_data(b"") == J.DbLedgerData(
        exists=False, fenced=False, master_key=b"", explicit_lac=None, limbo=False
    )
    with pytest.raises(CodecError):
        J.parse_db_ledger_data(b"\x18\x14")  # masterKey as a varint
    with pytest.raises(CodecError):
        J.parse_db_ledger_data(b"\x1a\x14abc")  # masterKey runs past the value
    with pytest.raises(CodecError):
        J.parse_db_ledger_data(b"\x08")  # truncated varint
    assert J.parse_db_location_key(J.db_location_key(12, 3)) == (12, 3)
    assert J.parse_db_location((7 << 32 | 1451).to_bytes(8, "big")) == (7, 1451)
    with pytest.raises(CodecError):
        J.parse_db_location(b"\x00" * 4)


@pytest.mark.parametrize("padding", [-8, -9, -(1 << 31)])
def test_a_negative_padding_length_ends_the_journal_records(padding):
    """A padding record whose length is negative once made the scan step back
    (-8: forever in place; less: an offset before the file, struct.error).
    Found by bench/fuzz.py (target java_journal)."""
    head = _read("bk1__journal__current__1a200521c5b.txn.head.bin")
    version, records = J.scan_journal(head)
    good = list(records)
    end = good[2].offset  # after two records
    damaged = head[:end] + struct.pack(">ii", J.PADDING_MARK, padding) + head[end + 8 :]
    version, records = J.scan_journal(damaged)
    assert [r.offset for r in records] == [r.offset for r in good[:2]]
