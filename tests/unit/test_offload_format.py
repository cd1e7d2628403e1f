"""The offload codecs on the bytes Pulsar's own offloader classes made (tests/vectors/offload)."""

from __future__ import annotations

import pytest

from bkctl.wire.metadata.ledger import parse_ledger_metadata
from bkctl.wire.pulsar import offload_format as of
from bkctl.wire.pulsar import sequence_file as sf
from bkctl.wire.pulsar.errors import OffloadFormatError
from bkctl.wire.pulsar.managed_ledger import parse_managed_ledger_info
from tests.support import offload_cases as oc

S3_CASES = [c for c in oc.cases() if c.startswith("s3_")]
FS_CASES = [c for c in oc.cases() if c.startswith("fs_")]


def _s3_ledgers(case):
    return [ledger for ledger in oc.expected(case)["ledgers"] if ledger["storage"] == "aws-s3"]


def _entries_of(index, data):
    out = []
    for block, length in index.block_spans():
        out += [(e, bytes(b)) for e, b in of.iter_block_entries(data[block.offset : block.offset + length])]
    return out


@pytest.mark.parametrize("case", S3_CASES)
def test_every_s3_object_gives_back_the_entries_the_broker_wrote(case):
    objects = oc.objects(case)
    want = oc.ledger_entries(case)
    info = parse_managed_ledger_info(oc.managed_ledger(case))
    for ledger in _s3_ledgers(case):
        lid = ledger["ledger_id"]
        li = next(li for li in info.ledgerInfo if li.ledgerId == lid)
        offload_uuid = of.uuid_of(li.offloadContext.uidMsb, li.offloadContext.uidLsb)
        assert offload_uuid == ledger["uuid"]
        index = of.parse_index(objects[of.index_key(offload_uuid, lid)])
        data = objects[of.data_key(offload_uuid, lid)]
        assert index.version == 1 and index.data_object_length == len(data)
        assert index.entry_count == li.entries and index.metadata.length == li.size
        assert _entries_of(index, data) == list(enumerate(want[lid]))
        # the metadata inside agrees with the ledger's znode
        zk = parse_ledger_metadata(oc.ledger_znode(case, lid))
        assert index.metadata.ensembles == zk.ensembles and index.metadata.last_entry_id == zk.last_entry_id
        assert dict(index.metadata.custom_metadata) == dict(zk.custom_metadata)
        for key, doc in oc.blob_metadata(case).items():
            assert of.check_blob_metadata(doc["user_metadata_as_read_back"], doc["role"], key) is None


def test_the_small_block_case_has_two_blocks_one_padded():
    case = "s3_d_chunking_small_blocks"
    (ledger,) = _s3_ledgers(case)
    index = of.parse_index(oc.objects(case)[ledger["index_key"]])
    assert [(b.first_entry_id, b.part_id, b.offset, n) for b, n in index.block_spans()] == [
        (0, 1, 0, 8192),
        (2, 2, 8192, 5179),
    ]
    assert index.block_of(1) == 0 and index.block_of(2) == 1


def test_a_truncated_block_bad_padding_and_a_truncated_index_are_format_errors():
    case = "s3_d_chunking_small_blocks"
    (ledger,) = _s3_ledgers(case)
    data = oc.objects(case)[ledger["data_key"]]
    with pytest.raises(OffloadFormatError, match="truncated"):
        list(of.iter_block_entries(data[:8000]))
    spoiled = bytearray(data[:8192])
    spoiled[-1] ^= 0xFF
    with pytest.raises(OffloadFormatError, match="padding"):
        list(of.iter_block_entries(bytes(spoiled)))
    with pytest.raises(OffloadFormatError, match="magic"):
        of.parse_block_header(b"\0" * 128)
    with pytest.raises(OffloadFormatError):
        of.parse_index(oc.objects(case)[ledger["index_key"]][:-5])
    assert "format version" in of.check_blob_metadata({"s3managedledgeroffloaderformatversion": "2"}, "data", "x")
    assert "no s3managed" in of.check_blob_metadata({}, "data", "x")


@pytest.mark.parametrize("case", FS_CASES)
def test_every_mapfile_gives_back_the_metadata_and_the_entries(case):
    want = oc.ledger_entries(case)
    for ledger in oc.expected(case)["ledgers"]:
        if ledger["storage"] != "filesystem":
            continue
        folder = oc.ROOT / case / ledger["mapfile_dir"]
        records = [(sf.long_key(k), sf.bytes_writable(v)) for k, v in sf.iter_records((folder / "data").read_bytes())]
        assert records[0][0] == -1
        md = of.parse_offloaded_metadata(records[0][1])
        assert md.last_entry_id + 1 == ledger["entries"] and md.length == ledger["size"]
        assert records[1:] == list(enumerate(want[ledger["ledger_id"]]))
        index = [(sf.long_key(k), sf.long_key(v)) for k, v in sf.iter_records((folder / "index").read_bytes())]
        assert index[0][0] == -1


def test_vlongs_as_hadoop_writes_them():
    for value, raw in [(0, b"\x00"), (127, b"\x7f"), (-112, b"\x90"), (128, b"\x8f\x80"), (-113, b"\x87\x70")]:
        assert sf.read_vlong(raw, 0) == (value, len(raw))


@pytest.mark.parametrize("first,last", [(0, 6149), (6000, 6040), (6021, 6021), (6020, 6149), (3, 3)])
def test_the_reader_gives_any_range_across_blocks_read_a_chunk_at_a_time(tmp_path, first, last):
    from bkctl.wire.pulsar.offload_reader import OffloadedLedger
    from bkctl.wire.pulsar.offload_store import FileStore, OffloadLocation, OffloadSettings

    case = "s3_b_batch_5mib"
    (ledger,) = _s3_ledgers(case)
    for key, data in oc.objects(case).items():
        (tmp_path / key).write_bytes(data)
    location = OffloadLocation(6001, "m", ledger["uuid"], "aws-s3", (("bucket", "b"),), True, True)
    reader = OffloadedLedger(location, OffloadSettings(read_buffer=1), FileStore(tmp_path))
    want = oc.ledger_entries(case)[6001]
    got = [(e, d) for batch in reader.entries(first, last, batch=500) for e, d in batch]
    assert got == [(e, want[e]) for e in range(first, last + 1)]
    assert reader.last_entry_id() == 6149
    with pytest.raises(Exception, match="ends at entry 6149"):
        list(reader.entries(6149, 6150))


def test_a_location_comes_from_the_offload_context_and_an_unknown_driver_is_said():
    from bkctl.wire.proto import pulsar_ml_pb2 as ml
    from bkctl.wire.pulsar.errors import OffloadUnlocated
    from bkctl.wire.pulsar.offload_store import OffloadSettings, location_of, store_for

    info = parse_managed_ledger_info(oc.managed_ledger("s3_a_plain"))
    first, second, last = (location_of(li, "m") for li in info.ledgerInfo)
    assert last is None
    assert (first.uuid, first.bucket, first.region, first.endpoint) == (
        "7fecb68e-619e-45f9-80bf-a5a9b8fcedf1",
        "pulsar-offload",
        "us-east-1",
        "http://127.0.0.1:8333",
    )
    assert first.bookkeeper_deleted and not second.bookkeeper_deleted and first.complete
    fs = location_of(parse_managed_ledger_info(oc.managed_ledger("fs_c_zstd_batch")).ledgerInfo[0], "t/ns/persistent/x")
    assert fs.is_filesystem and fs.mapfile == "t/ns/persistent/x/7001-9614f97d-5560-45f0-9019-8e14b34507fa"
    gcs = ml.ManagedLedgerInfo.LedgerInfo(ledgerId=9)
    gcs.offloadContext.uidMsb, gcs.offloadContext.complete = 1, True
    with pytest.raises(OffloadUnlocated, match="names no driver"):
        store_for(location_of(gcs, "m"), OffloadSettings())
    gcs.offloadContext.driverMetadata.name = "google-cloud-storage"
    with pytest.raises(OffloadUnlocated, match="google-cloud-storage"):
        store_for(location_of(gcs, "m"), OffloadSettings())


def test_a_task_that_failed_on_the_store_gives_the_stores_exit_code():
    from bkctl.exitcodes import DENIED, NOT_FOUND, UNREACHABLE
    from bkctl.export.job import cause_exit_code

    assert cause_exit_code("bkctl.wire.pulsar.errors.OffloadDenied: s3://b: k: access denied") == DENIED
    assert cause_exit_code("bkctl.wire.pulsar.errors.OffloadMissing: s3://b: k: no such object") == NOT_FOUND
    assert cause_exit_code("bkctl.wire.pulsar.errors.OffloadUnreachable: s3://b: did not answer") == UNREACHABLE
    assert cause_exit_code("bkctl.wire.pulsar.errors.OffloadFormatError: truncated") is None
    assert cause_exit_code("os.NotAClass: x") is None and cause_exit_code("ValueError: x") is None


def _v1_objects(blocks_of_entries: list[list[bytes]]) -> tuple[bytes, bytes]:
    """A data object (FACTS #9-#13: header, entries as length + id + bytes, padding) of these
    blocks and its version 1 index (#14-#16), made here: sizes the cases do not have."""
    import struct

    from bkctl.wire.proto import formats_pb2

    data, index_entries, first = b"", [], 0
    for entries in blocks_of_entries:
        body = b"".join(struct.pack(">iq", len(e), first + i) + e for i, e in enumerate(entries))
        length = of.BLOCK_HEADER_LENGTH + len(body) + 7  # padding that cuts the pattern
        header = struct.pack(">Iqqq", of.BLOCK_MAGIC, of.BLOCK_HEADER_LENGTH, length, first)
        index_entries.append(struct.pack(">qiq", first, len(index_entries) + 1, len(data)))
        data += header.ljust(of.BLOCK_HEADER_LENGTH, b"\0") + body + (of.PADDING * 2)[:7]
        first += len(entries)
    md = formats_pb2.LedgerMetadataFormat(quorumSize=1, ensembleSize=1, length=len(data), lastEntryId=first - 1)
    md.state = formats_pb2.LedgerMetadataFormat.CLOSED
    md.segment.add(firstEntryId=0, ensembleMember=["127.0.0.1:3181"])
    raw = md.SerializeToString()
    body = raw + b"".join(index_entries)
    head = struct.pack(
        ">Iiqqii", 0xDE47DE47, 32 + len(body), len(data), of.BLOCK_HEADER_LENGTH, len(index_entries), len(raw)
    )
    return data, head + body


@pytest.mark.parametrize("read_buffer", [1, 100_000, 1 << 20])
def test_entries_that_run_across_the_reads_of_a_block_come_out_whole(tmp_path, read_buffer):
    """Entries ending on a read's last byte, headers cut by a read, an entry longer than three
    reads, empty ones: the reader gives what the whole-block parser gives."""
    import random

    from bkctl.wire.pulsar.offload_reader import OffloadedLedger
    from bkctl.wire.pulsar.offload_store import FileStore, OffloadLocation, OffloadSettings

    rng = random.Random(65)
    chunk = 64 << 10  # the reader's smallest read
    first = [b"a" * (chunk - of.BLOCK_HEADER_LENGTH - 12), b"", b"b" * (chunk - 5), b"c" * (3 * chunk + 17)]
    blocks = [first + [rng.randbytes(rng.randrange(0, 3000)) for _ in range(400)], [rng.randbytes(70_000), b"z"]]
    data, index = _v1_objects(blocks)
    uuid = "7fecb68e-619e-45f9-80bf-a5a9b8fcedf1"
    location = OffloadLocation(9, "m", uuid, "aws-s3", (("bucket", "b"),), True, True)
    (tmp_path / of.data_key(uuid, 9)).write_bytes(data)
    (tmp_path / of.index_key(uuid, 9)).write_bytes(index)
    reader = OffloadedLedger(location, OffloadSettings(read_buffer=read_buffer), FileStore(tmp_path))
    got = [(e, d) for batch in reader.entries(0, reader.last_entry_id()) for e, d in batch]
    want = [(e, bytes(d)) for e, d in _entries_of(of.parse_index(index), data)]
    assert got == want
    assert [d for _, d in got] == [e for block in blocks for e in block]
    assert all(type(d) is bytes for _, d in got)

    (tmp_path / of.data_key(uuid, 9)).write_bytes(data[: 2 * chunk + 100])  # the object ends mid-entry
    with pytest.raises(OffloadFormatError, match="ends at"):
        list(OffloadedLedger(location, OffloadSettings(read_buffer=read_buffer), FileStore(tmp_path)).entries(0, 3))


def _v2_index(ledgers: list[tuple[int, bytes, list[tuple[int, int, int]]]], data_length: int) -> bytes:
    """A version 2 index as FACTS #26 lays it out (no broker writes one: nothing of Pulsar's own)."""
    import struct

    body = b"".join(
        struct.pack(">qii", lid, len(blocks), len(md)) + md + b"".join(struct.pack(">qiq", *b) for b in blocks)
        for lid, md, blocks in ledgers
    )
    return struct.pack(">iiqq", of.INDEX_V2_MAGIC, 24 + len(body), data_length, of.BLOCK_HEADER_LENGTH) + body


def test_a_version_2_index_gives_the_blocks_of_the_ledger_asked_for():
    from bkctl.wire.proto import pulsar_ml_pb2 as ml

    info = [
        ml.ManagedLedgerInfo.LedgerInfo(ledgerId=lid, entries=n).SerializeToString() for lid, n in ((5, 30), (6, 9))
    ]
    index = _v2_index([(5, info[0], [(0, 1, 0), (20, 2, 4000)]), (6, info[1], [(0, 3, 9000)])], 12_000)
    got = of.parse_index(index, 6)
    assert (got.version, got.metadata, got.metadata_bytes) == (2, None, info[1])
    assert [(e.first_entry_id, e.part_id, e.offset) for e in got.entries] == [(0, 3, 9000)]
    assert [(e.first_entry_id, e.offset) for e in of.parse_index(index, 5).entries] == [(0, 0), (20, 4000)]
    with pytest.raises(OffloadFormatError, match=r"holds ledgers \[5, 6\], not 7"):
        of.parse_index(index, 7)


@pytest.mark.parametrize("count,md_length", [(1, -36), (-1, 2), (1, -2), (10**6, 2), (1, 10**6)])
def test_a_version_2_index_whose_counts_do_not_fit_is_an_error_not_a_hang(count, md_length):
    """A negative metadata length once walked the parser back onto the same ledger for ever."""
    import struct

    good = _v2_index([(5, b"md", [(0, 1, 0)])], 4000)
    spoiled = good[:24] + struct.pack(">qii", 5, count, md_length) + good[40:]
    with pytest.raises(OffloadFormatError, match="do not fit|truncated"):
        of.parse_index(spoiled, 5)


def _streaming_objects(ledgers: list[tuple[int, list[bytes]]]) -> tuple[bytes, bytes, list[int]]:
    """A streaming offload segment (FACTS #26; no broker writes one): one block per ledger, its
    header naming the ledger after its first entry id, the blocks one after the other in one data
    object; the version 2 index with each ledger's LedgerInfo and block; where each block starts."""
    import struct

    from bkctl.wire.proto import pulsar_ml_pb2 as ml

    data, index, starts = b"", [], []
    for lid, entries in ledgers:
        body = b"".join(struct.pack(">iq", len(e), i) + e for i, e in enumerate(entries))
        length = of.BLOCK_HEADER_LENGTH + len(body) + 5
        header = struct.pack(">Iqqqq", of.STREAMING_BLOCK_MAGIC, of.BLOCK_HEADER_LENGTH, length, 0, lid)
        info = ml.ManagedLedgerInfo.LedgerInfo(ledgerId=lid, entries=len(entries)).SerializeToString()
        index.append((lid, info, [(0, 1, len(data))]))
        starts.append(len(data))
        data += header.ljust(of.BLOCK_HEADER_LENGTH, b"\0") + body + (of.PADDING * 2)[:5]
    return data, _v2_index(index, len(data)), starts


def _streaming_location(ledger_id: int, offload_uuid: str):
    """The location of a ledger whose offload context holds only a streaming segment."""
    import struct
    import uuid

    from bkctl.wire.proto import pulsar_ml_pb2 as ml
    from bkctl.wire.pulsar.offload_store import location_of

    li = ml.ManagedLedgerInfo.LedgerInfo(ledgerId=ledger_id, entries=2, size=10)
    segment = li.offloadContext.offloadSegment.add(complete=True)
    segment.uidMsb, segment.uidLsb = struct.unpack(">qq", uuid.UUID(offload_uuid).bytes)
    segment.driverMetadata.name = "aws-s3"
    segment.driverMetadata.properties.add(key="bucket", value="b")
    li.offloadContext.bookkeeperDeleted = True
    return location_of(li, "t/ns/persistent/x")


def test_a_streaming_offload_is_read_from_its_segments_objects(tmp_path):
    """A ledger whose offload context holds only a segment: its objects are ``<uuid>`` and
    ``<uuid>-index`` (FACTS #1), the version 2 index gives this ledger's block -- which ends
    where the next ledger's begins -- and its LedgerInfo the last entry."""
    from bkctl.wire.pulsar.offload_reader import OffloadedLedger
    from bkctl.wire.pulsar.offload_store import FileStore, OffloadSettings

    seg = "0b7c3a52-6a8e-4a5e-9b1a-2f8c1d4e5f60"
    data, index, _ = _streaming_objects([(5, [b"five-0", b"five-1", b"five-2"]), (6, [b"six-0", b"six-1"])])
    (tmp_path / seg).write_bytes(data)
    (tmp_path / f"{seg}-index").write_bytes(index)
    for lid, want in ((5, [b"five-0", b"five-1", b"five-2"]), (6, [b"six-0", b"six-1"])):
        location = _streaming_location(lid, seg)
        assert location is not None and location.streaming and location.complete and location.bucket == "b"
        assert (location.data_key, location.index_key) == (seg, f"{seg}-index")
        assert location.to_json()["objects"] == [seg, f"{seg}-index"]
        ledger = OffloadedLedger(location, OffloadSettings(), FileStore(tmp_path))
        assert ledger.last_entry_id() == len(want) - 1
        assert [d for batch in ledger.entries(0, len(want) - 1) for _, d in batch] == want


def test_a_streaming_block_of_another_ledger_is_an_error(tmp_path):
    """A segment's index pointing this ledger at another ledger's block (whose header names that
    ledger): the reader and the whole-block parser refuse it, naming both ledgers."""
    from bkctl.wire.proto import pulsar_ml_pb2 as ml
    from bkctl.wire.pulsar.offload_reader import OffloadedLedger
    from bkctl.wire.pulsar.offload_store import FileStore, OffloadSettings

    seg = "0b7c3a52-6a8e-4a5e-9b1a-2f8c1d4e5f61"
    data, _, (five_at, six_at) = _streaming_objects([(5, [b"five-0"]), (6, [b"six-0"])])
    info = ml.ManagedLedgerInfo.LedgerInfo(ledgerId=6, entries=1).SerializeToString()
    (tmp_path / seg).write_bytes(data)
    (tmp_path / f"{seg}-index").write_bytes(_v2_index([(6, info, [(0, 1, five_at)])], len(data)))
    ledger = OffloadedLedger(_streaming_location(6, seg), OffloadSettings(), FileStore(tmp_path))
    with pytest.raises(OffloadFormatError, match="a block of ledger 5, read as ledger 6's"):
        list(ledger.entries(0, 0))
    with pytest.raises(OffloadFormatError, match="a block of ledger 5, read as ledger 6's"):
        list(of.iter_block_entries(data[five_at:six_at], "block", 6))
    assert [bytes(d) for _, d in of.iter_block_entries(data[five_at:six_at], "block", 5)] == [b"five-0"]
    assert [bytes(d) for _, d in of.iter_block_entries(data[six_at:], "block", 6)] == [b"six-0"]
