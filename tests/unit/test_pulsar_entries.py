"""Pulsar's stored entries decoded against the bytes the real client produced
(tests/vectors/pulsar), and every way an entry can be corrupt."""

import json
import struct

import pytest

from bkctl.wire.proto import pulsar_api_pb2 as pb
from bkctl.wire.pulsar.entry import decode_entry
from bkctl.wire.pulsar.errors import CorruptEntry
from bkctl.wire.pulsar.messages import TopicDecoder as _TopicDecoder
from bkctl.wire.pulsar.messages import message_id
from bkctl.wire.pulsar.rows import MESSAGE_VALUE_COLUMNS, PyMessageRows, entry_messages
from tests.support import pulsar_entries as pe

LEDGER = 1000


def TopicDecoder(*args, **kw):
    """A decoder whose rows the Python twin makes (take() gives lists; times in microseconds)."""
    return _TopicDecoder(*args, splitter=PyMessageRows, **kw)


def us(ms):
    return None if ms is None else ms * 1000


def messages_of(entry):
    """The messages of an entry as dicts of their own values (the Python twin's rules)."""
    return [dict(zip(MESSAGE_VALUE_COLUMNS, m)) for m in entry_messages(entry, "1:2:-1")]


def decode_case(case, folder="entries", **kw):
    dec = TopicDecoder(f"persistent://public/default/{case}", **kw)
    for entry_id, data in enumerate(pe.case_entries(case, folder)):
        dec.add(LEDGER, entry_id, data)
    dec.finish()
    cols = dec.take()
    return dec, [dict(zip(cols, row)) for row in zip(*cols.values())]


@pytest.mark.parametrize("case", pe.cases())
def test_every_vector_case_gives_the_messages_the_client_sent(case):
    dec, rows = decode_case(case)
    want = pe.expected_messages(case)
    assert dec.problems == []
    assert len(rows) == len(want)
    for row, m in zip(rows, want):
        assert row["payload"] == m["payload"]
        assert row["payload_size"] == m["payload_len"]
        assert row["key"] == m["partition_key"]
        assert row["ordering_key"] == m["ordering_key"]
        assert dict(row["properties"]) == m["properties"]
        assert row["event_time"] == us(m["event_timestamp"])
        assert row["sequence_id"] == m["expected_sequence_id"]
        assert row["producer_name"] == m["producer_name"]
        assert row["schema_version"] == m["schema_version"]
        assert row["error"] is None and row["encrypted"] is False
        ident = m["id"]
        assert (row["ledger_id"], row["entry_id"], row["batch_index"]) == (
            ident["ledger_id"],
            ident["entry_id"],
            ident["batch_index"],
        )
        if ";" in ident["client_message_id_str"]:  # chunked: "(L,first,-1,-1);(L,last,-1,-1)"
            first, last = [p.strip("()").split(",") for p in ident["client_message_id_str"].split(";")]
            assert row["message_id"] == f"{first[0]}:{first[1]}:-1;{last[0]}:{last[1]}:-1"
        else:
            assert row["message_id"] == message_id(LEDGER, ident["entry_id"], -1, ident["batch_index"])


@pytest.mark.parametrize("case", ["a_plain", "b_batch"])
def test_broker_entry_metadata_is_read_and_the_entry_behind_it_too(case):
    manifest = json.loads(
        (pe.vectors_dir() / "entries_with_broker_entry_metadata" / case / "manifest.json").read_text()
    )
    _, plain = decode_case(case)
    _, rows = decode_case(case, "entries_with_broker_entry_metadata")
    assert [r["payload"] for r in rows] == [r["payload"] for r in plain]
    by_entry = {e["entry_id"]: e for e in manifest["entries"]}
    for row in rows:
        assert row["index"] == by_entry[row["entry_id"]]["index"]
        assert row["broker_timestamp"] == us(by_entry[row["entry_id"]]["broker_timestamp"])
    assert all(r["index"] is None for r in plain)


def test_the_encoder_reproduces_the_clients_bytes():
    """tests/support/pulsar_entries.py (used by the integration tests and the
    benchmark) writes what the real client wrote."""
    for case in ("a_plain", "c_lz4_single", "c_zlib_single", "c_snappy_single", "b_batch", "c_zstd_batch"):
        for data in pe.case_entries(case):
            entry = decode_entry(data)
            md = pb.MessageMetadata()
            md.CopyFrom(entry.metadata)
            codec = md.compression
            md.ClearField("compression")
            md.ClearField("uncompressed_size")
            if codec in (pb.ZSTD,):  # another zstd library: same format, other bytes
                assert decode_entry(pe.encode_entry(md, entry.payload, codec)).payload == entry.payload
            else:
                assert pe.encode_entry(md, entry.payload, codec) == data, case


def test_a_batch_entry_is_split_and_an_entry_with_num_messages_1_is_still_a_batch():
    smd = pb.SingleMessageMetadata(partition_key="k", sequence_id=7)
    md = pe.metadata("p", 7, 1_700_000_000_000, num_messages_in_batch=1)
    entry = decode_entry(pe.encode_entry(md, pe.batch_payload([(smd, b"x")])))
    assert entry.is_batch
    [m] = messages_of(entry)
    assert (m["batch_index"], m["payload"], m["key"], m["sequence_id"]) == (0, b"x", "k", 7)


def test_null_value_and_null_key_flags():
    smds = [
        (pb.SingleMessageMetadata(null_value=True, partition_key="k"), b""),
        (pb.SingleMessageMetadata(null_partition_key=True), b"v"),
    ]
    md = pe.metadata("p", 0, 1, num_messages_in_batch=2)
    ms = messages_of(decode_entry(pe.encode_entry(md, pe.batch_payload(smds))))
    assert [(m["payload"], m["key"], m["payload_size"]) for m in ms] == [(None, "k", None), (b"v", None, 1)]


def test_encrypted_entries_are_flagged_and_kept_as_stored():
    md = pe.metadata(
        "p",
        3,
        5,
        num_messages_in_batch=4,
        compression=pb.LZ4,
        uncompressed_size=999,
        encryption_algo="RSA",
        encryption_param=b"iv",
    )
    md.encryption_keys.add(key="key-a", value=b"\x01\x02")
    md.encryption_keys.add(key="key-b", value=b"\x03")
    secret = b"\x9f\x00 ciphertext that is not lz4"
    dec = TopicDecoder("persistent://t/n/x")
    dec.add(5, 0, pe.encode_entry(md, secret))
    cols = dec.take()
    assert cols["payload"] == [secret]
    assert cols["encrypted"] == [True]
    assert cols["encryption_keys"] == [["key-a", "key-b"]]
    assert cols["error"] == [None]
    # the rest of what a consumer's getEncryptionCtx() gives: enough to decrypt it later
    assert {
        name: cols[name]
        for name in (
            "encryption_key_values",
            "encryption_algo",
            "encryption_param",
            "encryption_compression",
            "encryption_uncompressed_size",
            "encryption_batch_size",
        )
    } == {
        "encryption_key_values": [[b"\x01\x02", b"\x03"]],
        "encryption_algo": ["RSA"],
        "encryption_param": [b"iv"],
        "encryption_compression": ["LZ4"],
        "encryption_uncompressed_size": [999],
        "encryption_batch_size": [4],
    }


def corrupt_cases():
    good = pe.case_entries("c_lz4_batch")[0]
    flipped = bytearray(good)
    flipped[-3] ^= 0xFF
    # compression = 9 (field 8), uncompressed_size = 3 (field 9): a codec this reader does not know
    raw = pe.metadata("p", 0, 1).SerializeToString() + b"\x40\x09\x48\x03"
    body = struct.pack(">I", len(raw)) + raw + b"abc"
    unknown = struct.pack(">HI", 0x0E01, pe.crc32c(body)) + body
    md = pe.metadata("p", 0, 1, compression=pb.LZ4, uncompressed_size=16)
    wrong_size = pe.encode_entry(md, pe.compress(pb.LZ4, b"hello hello hello"))
    short_batch = pe.encode_entry(
        pe.metadata("p", 0, 1, num_messages_in_batch=3), pe.batch_payload([(pb.SingleMessageMetadata(), b"one")])
    )
    no_crc = pe.encode_entry(pe.metadata("p", 0, 1), b"x")
    bad_meta = struct.pack(">I", 500) + b"\x0a\x01"  # an entry without checksum (old producers)
    raw = pe.metadata("producer", 0, 1).SerializeToString()[:6]
    body = struct.pack(">I", len(raw)) + raw + b"x"
    cut_meta = struct.pack(">HI", 0x0E01, pe.crc32c(body)) + body
    return {
        "checksum": (bytes(flipped), "checksum mismatch"),
        "truncated entry": (no_crc[:14], "checksum mismatch"),
        "truncated metadata": (cut_meta, "metadata (does not parse|lacks required fields)"),
        "metadata overruns": (bad_meta, "does not fit"),
        "unknown compression": (unknown, "unknown compression type 9"),
        "uncompressed size": (bytes(wrong_size), "LZ4"),
        "batch truncated": (short_batch, "batch truncated at message 1 of 3"),
        "empty": (b"", "truncated entry"),
    }


@pytest.mark.parametrize("name", sorted(corrupt_cases()))
def test_corrupt_entries_raise_a_clear_error(name):
    data, reason = corrupt_cases()[name]
    with pytest.raises(CorruptEntry, match=reason):
        messages_of(decode_entry(data))


@pytest.mark.parametrize("error_rows", [True, False])
def test_a_corrupt_entry_is_an_error_row_or_skipped_and_always_reported(error_rows):
    entries = pe.case_entries("b_batch")
    broken = bytearray(entries[1])
    broken[40] ^= 0x01
    dec = TopicDecoder("persistent://public/default/x", error_rows=error_rows)
    for entry_id, data in enumerate([entries[0], bytes(broken), entries[2]]):
        dec.add(7, entry_id, data)
    cols = dec.take()
    assert [str(p) for p in dec.problems] == [
        "persistent://public/default/x ledger 7 entry 1: " + dec.problems[0].reason
    ]
    assert "checksum mismatch" in dec.problems[0].reason
    errors = [(e, i) for e, i in zip(cols["error"], cols["entry_id"]) if e]
    if error_rows:
        assert [i for _, i in errors] == [1]
        assert cols["payload"][cols["entry_id"].index(1)] == bytes(broken)
        assert len(cols["ledger_id"]) == 10 + 1 + 5
    else:
        assert errors == [] and len(cols["ledger_id"]) == 15


def test_an_incomplete_chunk_set_is_reported():
    entries = pe.case_entries("d_chunking")  # 0 small, 1-3 chunks of one message, 4 small, 5-6 chunks
    dec = TopicDecoder("persistent://public/default/c")
    for entry_id, data in enumerate(entries[:6]):  # the last chunk never arrives
        if entry_id == 2:
            continue  # a chunk lost in the middle
        dec.add(1, entry_id, data)
    dec.finish()
    cols = dec.take()
    reasons = [p.reason for p in dec.problems]
    assert len(reasons) == 2
    assert "chunk 2 arrived after chunk 0" in reasons[0]
    assert "ends before the message's last chunk" in reasons[1]
    assert [p.entry_id for p in dec.problems] == [3, 5]
    assert [e for e in cols["error"] if e] == reasons
    assert [p for p, e in zip(cols["payload"], cols["error"]) if not e] == [
        m["payload"] for m in pe.expected_messages("d_chunking") if len(m["payload"]) < 5000
    ]


def test_publish_time_window_and_keep():
    _, rows = decode_case("b_batch")
    times = sorted({r["publish_time"] // 1000 for r in rows})
    _, some = decode_case("b_batch", from_ms=times[1], to_ms=times[-1])
    assert {r["publish_time"] // 1000 for r in some} == set(times[1:-1])
    _, kept = decode_case("b_batch", keep=lambda pos, i: pos == (LEDGER, 1) and i % 2 == 0)
    assert [(r["entry_id"], r["batch_index"]) for r in kept] == [(1, i) for i in range(0, 10, 2)]


def test_readers_of_adjacent_ranges_share_chunked_messages_without_overlap():
    """A reader that ends inside a chunked message reads on for its chunks
    only; the next reader leaves those chunks alone."""
    entries = pe.case_entries("d_chunking")
    rows = []
    for first, last in ((0, 1), (2, 3), (4, 5), (6, 6)):
        dec = TopicDecoder("persistent://public/default/c")
        for entry_id in range(first, last + 1):
            dec.add(1, entry_id, entries[entry_id], skip_continuations=first > 0)
        entry_id = last
        while dec.chunks.pending and entry_id + 1 < len(entries):
            entry_id += 1
            dec.add(1, entry_id, entries[entry_id], only_continuations=True)
        dec.finish()
        assert dec.problems == []
        rows += dec.take()["payload"]
    assert rows == [m["payload"] for m in pe.expected_messages("d_chunking")]


def split_into_chunks(md, payload: bytes, parts: int, codec=pb.NONE) -> list[bytes]:
    """A message chunked as Pulsar's producer does it: compressed whole, then
    sliced; every chunk's metadata names the codec and the whole sizes."""
    stored = pe.compress(codec, payload)
    md.uuid = f"{md.producer_name}-{md.sequence_id}"
    md.num_chunks_from_msg = parts
    md.total_chunk_msg_size = len(stored)
    if codec != pb.NONE:
        md.compression = codec
        md.uncompressed_size = len(payload)
    step = -(-len(stored) // parts)
    out = []
    for i in range(parts):
        md.chunk_id = i
        out.append(pe.encode_entry(md, stored[i * step : (i + 1) * step]))
    return out


@pytest.mark.parametrize("codec", [pb.NONE, pb.LZ4, pb.ZSTD])
def test_a_compressed_chunked_message_is_decompressed_once_whole(codec):
    payload = bytes(range(256)) * 60 + b"tail"
    chunks = split_into_chunks(pe.metadata("prod", 9, 1000, partition_key="k"), payload, 3, codec)
    dec = TopicDecoder("persistent://t/n/x")
    for entry_id, data in enumerate(chunks):
        dec.add(4, entry_id, data)
    dec.finish()
    cols = dec.take()
    assert dec.problems == []
    assert cols["payload"] == [payload] and cols["key"] == ["k"]
    assert cols["message_id"] == ["4:0:-1;4:2:-1"]


def test_an_encrypted_chunked_message_is_joined_and_kept_as_stored():
    md = pe.metadata("prod", 1, 1000, compression=pb.LZ4, uncompressed_size=5000)
    md.encryption_keys.add(key="k1", value=b"x")
    secret = b"\x01\x02" * 900
    chunks = split_into_chunks(md, secret, 2)
    dec = TopicDecoder("persistent://t/n/x")
    for entry_id, data in enumerate(chunks):
        dec.add(4, entry_id, data)
    cols = dec.take()
    assert cols["payload"] == [secret]
    assert (cols["encrypted"], cols["encryption_keys"]) == ([True], [["k1"]])
    assert (
        cols["encryption_key_values"],
        cols["encryption_compression"],
        cols["encryption_uncompressed_size"],
        cols["encryption_batch_size"],
    ) == ([[b"x"]], ["LZ4"], [5000], [None])


def test_a_zlib_payload_inflates_no_further_than_its_metadata_says():
    """An entry whose zlib payload inflates to 32 MiB but whose metadata says 100
    bytes was inflated whole before the sizes were compared (a 5 MB entry: gigabytes);
    now the inflation stops past 100 bytes."""
    import zlib

    from bkctl.wire.pulsar.entry import decompress

    bomb = zlib.compress(bytes(32 << 20), 9)
    assert len(bomb) < 40_000
    with pytest.raises(CorruptEntry, match="decompresses to 101 bytes, the metadata says 100"):
        decompress(pb.ZLIB, bomb, 100)
    whole = zlib.compress(b"abc" * 10)
    assert decompress(pb.ZLIB, whole, 30) == b"abc" * 10
    with pytest.raises(CorruptEntry, match="truncated"):
        decompress(pb.ZLIB, whole[:-3], 30)  # the checksum cut off
    with pytest.raises(CorruptEntry):
        decompress(pb.ZLIB, whole, 31)


def test_a_compression_field_of_another_wire_type_is_skipped_as_pulsar_skips_it():
    """Field 8 sent length-delimited is not MessageMetadata.compression (a varint): it was
    read as the number its bytes spell, and int() of them raised ValueError out of the
    decoder (through export --topic). Found by bench/fuzz.py (target pulsar_entry)."""
    md = pe.metadata("@", 1, 1000)  # a 0x40 byte (the compression field's varint tag) in the metadata
    raw = md.SerializeToString() + b"\x42\x03abc"  # field 8, wire type 2
    entry = struct.pack(">I", len(raw)) + raw + b"payload"
    assert decode_entry(entry).payload == b"payload"
    raw = md.SerializeToString() + b"\x40\x63"  # field 8 as a varint this proto does not know: 99
    with pytest.raises(CorruptEntry, match="unknown compression type 99"):
        decode_entry(struct.pack(">I", len(raw)) + raw + b"payload")
