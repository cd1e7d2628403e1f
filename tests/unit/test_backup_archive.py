"""The archive's data objects and records (wire/backup/archive.py), the local storage twin, and
the ledger-id rewriting of a restore under new ids (wire/pulsar/remap.py)."""

from __future__ import annotations

import io
import json

import pytest

from bkctl.backup.storage import LocalStorage
from bkctl.wire.backup import data_read
from bkctl.wire.backup.archive import WRITE_PIECE, DataWriter, LedgerRecord, b64
from bkctl.wire.backup.data_read import read_data
from bkctl.wire.errors import ArchiveDamaged
from bkctl.wire.proto import pulsar_ml_pb2 as ml
from bkctl.wire.proto import pulsar_schema_pb2 as spb
from bkctl.wire.pulsar import remap


def _object(entries, ledger_id=7):
    buf = io.BytesIO()
    w = DataWriter(buf, ledger_id)
    for i, e in enumerate(entries):
        w.add(i, e)
    return buf.getvalue(), w.sha.hexdigest()


def test_a_data_object_reads_back_its_entries_and_checks_its_hash():
    data, sha = _object([b"a", b"", b"c" * 1000])
    assert [p for _e, p in read_data(io.BytesIO(data), 7, sha)] == [b"a", b"", b"c" * 1000]


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d[:-1],  # cut short
        lambda d: d[:-1] + bytes([d[-1] ^ 1]),  # a payload byte flipped: its CRC32C
        lambda d: d[:8] + (8).to_bytes(8, "big") + d[16:],  # another ledger's
    ],
)
def test_a_damaged_data_object_is_refused(damage):
    data, sha = _object([b"a", b"bcd"])
    with pytest.raises(ArchiveDamaged):
        list(read_data(io.BytesIO(damage(data)), 7, sha))


@pytest.mark.parametrize(
    ("cut", "said"),
    [
        (lambda d: d[:-2], "entry 1's head says 3 bytes and 1 follow it"),  # cut in a payload
        (lambda d: d[:-5], "within entry 1's head"),
        (lambda d: d[:41] + b"\x7f\xff\xff\xff" + d[45:], "entry 1's head says 2147483647 bytes and 3 follow it"),
    ],
)
def test_an_object_that_ends_early_names_the_entry_and_how_it_was_cut(cut, said):
    data, sha = _object([b"a", b"bcd"])
    with pytest.raises(ArchiveDamaged, match=f"^ledger 7: data object ends early, {said}$"):
        list(read_data(io.BytesIO(cut(data)), 7, sha))


def test_told_its_size_a_wrong_length_is_found_before_the_rest_is_read():
    """A length field saying 2 GiB had the reader ask the stream for 2 GiB (a file's read
    allocates that at once; an object larger than memory read into it): told the object's
    size, as the restore and verify are by its record, it stops at that head."""
    data, sha = _object([b"a" * 10, b"bcd" * 30_000, b"e"])
    bad = data[:50] + b"\x7f\xff\xff\xff" + data[54:]  # entry 1's length
    asked = []

    class Asked(io.BytesIO):
        def read(self, n=-1):
            asked.append(n)
            return super().read(n)

    said = "ledger 7: data object ends early, entry 1's head says 2147483647 bytes and 90017 follow it"
    with pytest.raises(ArchiveDamaged, match=f"^{said}$"):
        list(read_data(Asked(bad), 7, sha, size=len(bad)))
    assert max(asked) == data_read.READ_BLOCK
    with pytest.raises(ArchiveDamaged, match=f"^{said}$"):  # the same where the size is not known
        list(read_data(Asked(bad), 7, sha))
    assert max(asked) > 2**30
    assert [p for _e, p in read_data(io.BytesIO(data), 7, sha, size=len(data))] == [b"a" * 10, b"bcd" * 30_000, b"e"]


class CountedReads(io.BytesIO):
    """A stream that counts its reads and gives at most ``most`` bytes a read (a network body)."""

    def __init__(self, data: bytes, most: int | None = None):
        super().__init__(data)
        self.reads = 0
        self.most = most

    def read(self, n=-1):
        self.reads += 1
        if self.most is not None and (n < 0 or n > self.most):
            n = self.most
        return super().read(n)


def test_a_data_object_is_read_in_blocks_not_twice_an_entry():
    entries = [bytes([i % 256]) * 100 for i in range(5000)]
    data, sha = _object(entries)
    stream = CountedReads(data)
    assert [p for _e, p in read_data(stream, 7, sha)] == entries
    assert stream.reads <= 10  # 560 KiB in blocks of 64 KiB, and the end; two an entry would be 10,000


@pytest.mark.parametrize("most", [1, 7, 1000])
def test_short_reads_and_entries_across_blocks_read_back_whole(monkeypatch, most):
    monkeypatch.setattr(data_read, "READ_BLOCK", 64)  # entries straddle the blocks
    entries = [b"x" * n for n in (0, 1, 63, 64, 65, 200, 3)]
    data, sha = _object(entries)
    assert [p for _e, p in read_data(CountedReads(data, most), 7, sha)] == entries
    with pytest.raises(ArchiveDamaged, match="ends early"):
        list(read_data(CountedReads(data[:-2], most), 7, sha))


def test_the_hash_is_checked_even_when_every_entry_reads():
    data, _sha = _object([b"a"])
    with pytest.raises(ArchiveDamaged, match="index SHA-256"):
        list(read_data(io.BytesIO(data), 7, "0" * 64))


def test_entries_must_come_in_order():
    with pytest.raises(ValueError):
        DataWriter(io.BytesIO(), 1).add(1, b"x")
    with pytest.raises(ValueError):
        DataWriter(io.BytesIO(), 1).add_batch([(0, b"x"), (2, b"y")])


def test_a_batch_is_written_as_its_entries_one_by_one():
    one, two = io.BytesIO(), io.BytesIO()
    a, b = DataWriter(one, 3), DataWriter(two, 3)
    for i, p in enumerate([b"a", b"bb", b""]):
        a.add(i, p)
    b.add_batch([(0, b"a"), (1, b"bb")])
    b.add_batch([(2, b"")])
    assert one.getvalue() == two.getvalue() and a.sha.hexdigest() == b.sha.hexdigest()
    assert (a.size, a.entries, a.payload_bytes) == (b.size, b.entries, b.payload_bytes) == (len(one.getvalue()), 3, 3)


class _Writes(io.BytesIO):
    """A file that remembers the size of each write."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    def write(self, data) -> int:  # type: ignore[override]
        self.sizes.append(len(data))
        return super().write(data)


def test_a_large_batch_goes_out_in_pieces_of_reused_size_with_the_same_bytes():
    payloads = [bytes([i % 251]) * 50_000 for i in range(30)]  # 1.5 MB: several pieces
    one, two = io.BytesIO(), _Writes()
    a, b = DataWriter(one, 4), DataWriter(two, 4)
    for i, p in enumerate(payloads):
        a.add(i, p)
    b.add_batch(list(enumerate(payloads)))
    assert one.getvalue() == two.getvalue() and a.sha.hexdigest() == b.sha.hexdigest()
    assert (a.size, a.entries, a.payload_bytes) == (b.size, b.entries, b.payload_bytes)
    pieces = two.sizes[1:]  # (the object's header first)
    assert len(pieces) > 1 and max(pieces) <= WRITE_PIECE + 50_000 + 16
    assert [e for e, _p in read_data(io.BytesIO(two.getvalue()), 4, b.sha.hexdigest())] == list(range(30))


def test_a_file_with_a_descriptor_gets_the_same_bytes_through_writev(tmp_path):
    payloads = list(enumerate(bytes([i % 251]) * (i % 7 * 300) for i in range(1500)))  # several writevs
    one = io.BytesIO()
    a = DataWriter(one, 5)
    a.add_batch(payloads)
    with pytest.raises(ValueError, match="out of order"):
        a.add_batch([(1500, b"x"), (1502, b"y")])
    path = tmp_path / "object"
    with open(path, "wb") as f:  # a buffered file, as the storage's
        f.write(b"before")  # what its buffer holds is written first
        b = DataWriter(f, 5)
        assert b.fd == f.fileno()
        b.add(*payloads[0])
        b.add_batch(payloads[1:1000])
        b.add_batch(payloads[1000:])
        with pytest.raises(ValueError, match="out of order"):
            b.add_batch([(1500, b"x"), (1502, b"y")])  # the entries before it written
    before, data = path.read_bytes()[:6], path.read_bytes()[6:]
    assert before == b"before" and data == one.getvalue() and a.sha.hexdigest() == b.sha.hexdigest()
    assert (
        (a.size, a.entries, a.payload_bytes)
        == (b.size, b.entries, b.payload_bytes)
        == (len(data), 1501, b.payload_bytes)
    )
    assert [e for e, _p in read_data(io.BytesIO(data), 5, b.sha.hexdigest())] == list(range(1501))


def test_an_entry_out_of_order_in_a_batch_leaves_the_writer_at_the_entries_written():
    out = io.BytesIO()
    w = DataWriter(out, 1)
    with pytest.raises(ValueError, match="entry 3 out of order"):
        w.add_batch([(0, b"x"), (1, b"yy"), (3, b"z")])
    assert (w.entries, w.payload_bytes, w.size) == (2, 3, len(out.getvalue()))
    w.add_batch([(2, b"w")])  # the writer goes on from there: a well-formed object
    assert [p for _e, p in read_data(io.BytesIO(out.getvalue()), 1, w.sha.hexdigest())] == [b"x", b"yy", b"w"]


def test_local_storage_writes_whole_objects_and_cleans_what_a_killed_writer_left(tmp_path):
    s = LocalStorage(str(tmp_path / "a"))
    s.put("ledgers/1/0-2.json", b"{}")
    (tmp_path / "a" / "ledgers" / "1" / "0-2.data.part-999").write_bytes(b"half")
    assert list(s.list("ledgers/")) == ["ledgers/1/0-2.json"]
    assert s.clean_partial() == 1 and s.get("ledgers/1/0-2.json") == b"{}"
    with pytest.raises(ValueError):
        s.get("../x")


IDS = {10: 110, 11: 111, 20: 120}


def _pos(p, lid, eid):
    p.ledgerId, p.entryId = lid, eid


def test_a_managed_ledger_names_its_new_ledgers_and_its_open_one_gets_its_size():
    info = ml.ManagedLedgerInfo()
    info.ledgerInfo.add(ledgerId=10, entries=3, size=30, timestamp=5)
    info.ledgerInfo.add(ledgerId=11, timestamp=0)
    info.ledgerInfo.add(ledgerId=99, entries=1, size=1)  # gone, not in the table
    _pos(info.terminatedPosition, 11, 4)
    out = ml.ManagedLedgerInfo.FromString(remap.remap_managed_ledger_info(info.SerializeToString(), IDS, {11: (5, 50)}))
    assert [(li.ledgerId, li.entries, li.size) for li in out.ledgerInfo] == [(110, 3, 30), (111, 5, 50), (99, 1, 1)]
    assert (out.terminatedPosition.ledgerId, out.terminatedPosition.entryId) == (111, 4)


def test_a_cursor_names_its_new_ledgers_everywhere():
    info = ml.ManagedCursorInfo(cursorsLedgerId=20, markDeleteLedgerId=10, markDeleteEntryId=2)
    r = info.individualDeletedMessages.add()
    _pos(r.lowerEndpoint, 10, 3)
    _pos(r.upperEndpoint, 11, 1)
    b = info.batchedEntryDeletionIndexInfo.add()
    _pos(b.position, 11, 2)
    info.properties.add(name="CompactedTopicLedger", value=10)
    out = ml.ManagedCursorInfo.FromString(remap.remap_cursor_info(info.SerializeToString(), IDS))
    assert (out.cursorsLedgerId, out.markDeleteLedgerId, out.markDeleteEntryId) == (120, 110, 2)
    r = out.individualDeletedMessages[0]
    assert (r.lowerEndpoint.ledgerId, r.upperEndpoint.ledgerId) == (110, 111)
    assert out.batchedEntryDeletionIndexInfo[0].position.ledgerId == 111
    assert out.properties[0].value == 110


def test_a_cursor_ledgers_entry_and_the_schema_values_name_their_new_ledgers():
    pos = ml.PositionInfo(ledgerId=10, entryId=1)
    pos.individualDeletedMessageRanges.add(key=11, values=[1])
    out = ml.PositionInfo.FromString(remap.remap_position_info(pos.SerializeToString(), IDS))
    assert (out.ledgerId, out.individualDeletedMessageRanges[0].key) == (110, 111)
    locator = spb.SchemaLocator()
    locator.info.version, locator.info.hash = 1, b"h"
    _pos(locator.info.position, 11, 0)
    first = locator.index.add(version=0, hash=b"g")
    _pos(first.position, 10, 0)
    locator.index.append(locator.info)
    out = spb.SchemaLocator.FromString(remap.remap_schema_locator(locator.SerializeToString(), IDS))
    assert [e.position.ledgerId for e in [out.info, *out.index]] == [111, 110, 111]
    entry = spb.SchemaEntry(schema_data=b"x")
    placeholder = entry.index.add(version=0, hash=b"g")
    _pos(placeholder.position, -1, -1)
    assert remap.remap_schema_entry(entry.SerializeToString(), IDS) == entry.SerializeToString()


def test_a_value_with_nothing_to_change_is_kept_byte_for_byte():
    text = b"cursorsLedgerId: -1\nmarkDeleteLedgerId: 5\nmarkDeleteEntryId: 1\n"  # protobuf text, as old brokers wrote
    assert remap.remap_cursor_info(text, IDS) == text


def test_the_marker_reads_back_and_anything_else_is_no_archive():
    from bkctl.wire.backup.archive import check_marker, encode_marker

    check_marker(encode_marker(1_700_000_000_000))
    for other in (b"", b"{", b'{"format": "bkctl-archive/2"}', b"[1]", b'"bkctl-archive/1"'):
        with pytest.raises(ArchiveDamaged):
            check_marker(other)


def test_a_record_or_manifest_that_does_not_read_is_damaged_and_named():
    from bkctl.wire.backup.archive import LedgerRecord, Manifest

    with pytest.raises(ArchiveDamaged, match="ledgers/5/x.json: not a ledger record"):
        LedgerRecord.decode(b'{"ledger_id": 5}', "ledgers/5/x.json")
    with pytest.raises(ArchiveDamaged, match="backups/b.json: not a backup manifest"):
        Manifest.decode(b'{"format": "bkctl-backup/0"}', "backups/b.json")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("password_b64", "not base64!"),
        ("entries", "40"),
        ("ensemble_size", True),
        ("custom_metadata_b64", {"k": 5}),
        ("custom_metadata_b64", ["k"]),
        ("index_sha256", None),
    ],
)
def test_a_record_whose_fields_are_not_their_types_is_damaged_and_the_field_named(field, value):
    """What a restore uses of a record (its password, its custom metadata, its counts) is
    checked when it is read: a record that reads as JSON with a field of another type used to
    fail later, out of the restore, as whatever Python raised there (found by bench/fuzz.py,
    target archive_manifest: a password that is not base64)."""
    import json

    from bkctl.wire.backup.archive import LedgerRecord, b64

    record = LedgerRecord(5, "none", 1, 3, 9, "CLOSED", 3, 2, 2, "CRC32C", b64(b"pw"), {}, b64(b"m"), "d", "s", 9, 1)
    assert LedgerRecord.decode(record.encode()) == record
    doc = json.loads(record.encode())
    doc[field] = value
    with pytest.raises(ArchiveDamaged, match=f"^r.json: not a ledger record \\({field}: "):
        LedgerRecord.decode(json.dumps(doc).encode(), "r.json")


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"write_quorum": 4}, "ensemble 3, write quorum 4, ack quorum 2"),
        ({"ack_quorum": 0}, "ensemble 3, write quorum 2, ack quorum 0"),
        ({"ack_quorum": 3}, "ensemble 3, write quorum 2, ack quorum 3"),
        ({"entries": -1}, "a negative id, count or size"),
        ({"data_size": -9}, "a negative id, count or size"),
        ({"state": "CLOSD"}, "state 'CLOSD'"),
        ({"digest_type": "CRC32D"}, "digest type 'CRC32D'"),
    ],
)
def test_a_record_that_no_copy_writes_is_damaged_and_says_why(changes, said):
    """Records carry no hash: a flipped digit in a quorum or a state must be named as damage
    here, not fail later in the ledger's creation as if the cluster refused it."""
    record = LedgerRecord(5, "none", 1, 3, 9, "CLOSED", 3, 2, 2, "CRC32C", b64(b"pw"), {}, b64(b"m"), "d", "s", 9, 1)
    for state in ("OPEN", "IN_RECOVERY"):  # what a copy of an open ledger says
        assert LedgerRecord.decode(json.dumps({**json.loads(record.encode()), "state": state}).encode()).state == state
    doc = {**json.loads(record.encode()), **changes}
    with pytest.raises(ArchiveDamaged) as caught:
        LedgerRecord.decode(json.dumps(doc).encode(), "r.json")
    assert str(caught.value) == f"r.json: not a ledger record ({said})"


def test_a_chunks_line_or_note_of_another_type_is_damaged():
    import hashlib

    from bkctl.wire.backup.archive import ChunkRef, decode_chunk, decode_notes

    def ref(data: bytes) -> ChunkRef:
        return ChunkRef("c", 3, 3, 1, hashlib.sha256(data).hexdigest())

    line = b'{"copied":true,"entries":"1","ledger_id":3,"payload_bytes":1,"record":"r"}\n'
    with pytest.raises(ArchiveDamaged, match=r"c: not a manifest chunk \(entries: str, not int\)"):
        decode_chunk(line, ref(line))
    note = b'{"kind":"missing","ledger_id":3,"error":7}\n'
    with pytest.raises(ArchiveDamaged, match=r"c: not a chunk of notes \(error: int, not str\)"):
        decode_notes(note, ref(note))


def test_archive_damage_is_a_library_error_that_exits_1():
    from bkctl.exitcodes import FAILED, exit_code_for
    from bkctl.wire.errors import BKError

    assert issubclass(ArchiveDamaged, BKError) and exit_code_for(ArchiveDamaged("x")) == FAILED
