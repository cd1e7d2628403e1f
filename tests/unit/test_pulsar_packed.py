"""The topic export's fast path (``TopicDecoder(packed=True)``: batches split
by the C extension straight into Arrow buffers) gives the rows and problems
of the general path, for the real client's entries, random batches and
random damage; and it is the path taken when it is there and switched on."""
import struct

import pyarrow as pa
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bkctl.export.columns import TOPIC_COLUMNS, arrow_schema
from bkctl.export.topic_source import record_batch as _to_batch
from bkctl.wire import fastpath
from bkctl.wire.proto import pulsar_api_pb2 as pb
from bkctl.wire.pulsar.messages import PACKED_AVAILABLE, PackedColumns, TopicDecoder
from tests.support import pulsar_entries as pe

SCHEMA = arrow_schema(TOPIC_COLUMNS)
#: whether packed=True really takes the C path here (BKCTL_FASTPATHS=0 runs this module too)
PACKING = PACKED_AVAILABLE and fastpath.ENABLED


def decode(entries, packed, partition=-1, take_every=0, **kw):
    """The rows as one Arrow table, the problems, and how many packed parts there were."""
    dec = TopicDecoder("persistent://t/n/x", partition, packed=packed, **kw)
    parts = []
    for entry_id, data in enumerate(entries):
        dec.add(7, entry_id, data)
        if take_every and entry_id % take_every == 0:
            parts += dec.take_parts()
    dec.finish()
    parts += dec.take_parts()
    table = pa.Table.from_batches([_to_batch(p, SCHEMA) for p in parts], schema=SCHEMA).combine_chunks()
    packed_parts = sum(isinstance(p, PackedColumns) for p in parts)
    return table, [str(p) for p in dec.problems], (dec.messages, dec.payload_bytes), packed_parts


def assert_same(entries, **kw):
    fast, fast_problems, fast_counts, packed_parts = decode(entries, True, **kw)
    general, general_problems, general_counts, none = decode(entries, False, **kw)
    assert none == 0
    assert fast_problems == general_problems
    assert fast_counts == general_counts
    assert fast.num_rows == general.num_rows
    for name in SCHEMA.names:
        assert fast.column(name).equals(general.column(name)), name
    return packed_parts


def test_the_extension_is_built():
    assert PACKED_AVAILABLE, "bkctl.wire.pulsar._packed is missing: ./dev setup builds it (gcc, Python headers)"


@pytest.mark.parametrize("case, folder", [(case, folder) for folder in ("entries", "entries_with_broker_entry_metadata")
                                          for case in pe.cases() if (pe.vectors_dir() / folder / case).is_dir()])
def test_the_real_clients_entries_give_the_same_rows(case, folder):
    assert_same(pe.case_entries(case, folder), partition=3)


def test_a_batch_takes_the_packed_path_and_a_plain_message_the_general_one():
    batch = pe.encode_entry(pe.metadata("p", 0, 1_700_000_000_000, num_messages_in_batch=2),
                            pe.batch_payload([(pb.SingleMessageMetadata(), b"a"), (pb.SingleMessageMetadata(), b"b")]))
    plain = pe.encode_entry(pe.metadata("p", 2, 1_700_000_000_001), b"c")
    dec = TopicDecoder("persistent://t/n/x", packed=True)
    for entry_id, data in enumerate([batch, batch, plain, batch]):
        dec.add(7, entry_id, data)
    parts = dec.take_parts()
    kinds = [type(p) is PackedColumns for p in parts]
    # storage order kept across the two kinds: packed (entries 0, 1), lists (2), packed (3)
    assert kinds == ([True, False, True] if PACKING else [False])
    assert sum(p.rows if isinstance(p, PackedColumns) else len(p["ledger_id"]) for p in parts) == 7
    other = TopicDecoder("persistent://t/n/x", packed=True)
    if PACKING:
        with pytest.raises(RuntimeError):  # its rows may be packed: take_parts()
            other.take()
    else:
        assert other.take()["ledger_id"] == []


# ---------------------------------------------------------------- random batches

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@st.composite
def single(draw):
    smd = pb.SingleMessageMetadata()
    for k, v in draw(st.lists(st.tuples(_text, _text), max_size=4)):
        smd.properties.add(key=k, value=v)
    if draw(st.booleans()):
        smd.partition_key = draw(_text)
    smd.null_partition_key = draw(st.booleans())
    smd.partition_key_b64_encoded = draw(st.booleans())
    if draw(st.booleans()):
        smd.ordering_key = draw(st.binary(max_size=8))
    smd.event_time = draw(st.one_of(st.just(0), st.integers(1, 2**63 // 1000 - 1)))
    if draw(st.booleans()):
        smd.sequence_id = draw(st.integers(0, 2**63 - 1))
    smd.null_value = draw(st.booleans())
    smd.compacted_out = draw(st.booleans())
    return smd, draw(st.binary(max_size=40))


def _entry(messages, codec=pb.NONE, producer="prod", schema=None, sequence=5, broker=None, unknown=b"",
           publish=1_700_000_000_000):
    body = bytearray()
    for smd, payload in messages:
        smd.payload_size = len(payload)
        raw = smd.SerializeToString() + unknown  # fields this proto does not know are skipped
        body += struct.pack(">I", len(raw)) + raw + payload
    md = pe.metadata(producer, sequence, publish, num_messages_in_batch=len(messages))
    if schema is not None:
        md.schema_version = schema
    data = pe.encode_entry(md, bytes(body), codec)
    if broker is not None:
        data = pe.with_broker_metadata(data, *broker)
    return data


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.lists(single(), min_size=1, max_size=6), min_size=1, max_size=5),
       codec=st.sampled_from([pb.NONE, pb.LZ4, pb.ZLIB, pb.ZSTD, pb.SNAPPY]),
       producer=_text, schema=st.one_of(st.none(), st.binary(max_size=8)),
       sequence=st.integers(0, 2**62),
       broker=st.one_of(st.none(), st.tuples(st.one_of(st.none(), st.integers(0, 2**62 // 1000)),
                                             st.one_of(st.none(), st.integers(0, 2**63 - 1)))),
       unknown=st.sampled_from([b"", b"\x58\x01", b"\x62\x02ab", b"\x6d\x01\x02\x03\x04", b"\x71" + bytes(8)]),
       partition=st.integers(-1, 50), take_every=st.integers(0, 3))
def test_random_batches_give_the_same_rows(batches, codec, producer, schema, sequence, broker, unknown, partition,
                                            take_every):
    entries = [_entry(b, codec, producer, schema, sequence + i, broker, unknown, 1_700_000_000_000 + i)
               for i, b in enumerate(batches)]
    packed_parts = assert_same(entries, partition=partition, take_every=take_every)
    assert (packed_parts > 0) == PACKING


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=st.lists(single(), min_size=1, max_size=4), data=st.data())
def test_damaged_batches_give_the_same_rows_and_problems(messages, data):
    """Bytes of the batch changed or cut (the checksum made to match, so that
    the damage reaches the splitter): whatever the general path makes of it --
    rows, error rows, problems -- the fast path makes too."""
    entry = bytearray(_entry(messages))
    md_size = struct.unpack_from(">I", entry, 6)[0]
    start = 10 + md_size  # the batch begins after the metadata
    if data.draw(st.booleans(), "cut"):
        entry = entry[:data.draw(st.integers(start, len(entry) - 1), "length")]
    for _ in range(data.draw(st.integers(1, 4), "changes")):
        if len(entry) > start:
            at = data.draw(st.integers(start, len(entry) - 1), "at")
            entry[at] = data.draw(st.integers(0, 255), "byte")
    struct.pack_into(">I", entry, 2, crc32c(bytes(entry[6:])))
    good = _entry([(pb.SingleMessageMetadata(), b"ok")])
    assert_same([good, bytes(entry), good])


def test_a_batch_the_extension_refuses_leaves_nothing_behind():
    """A batch whose third message is cut short: the rows of its first two,
    already appended, are taken back, and the general path reports it."""
    messages = [(pb.SingleMessageMetadata(), b"one"), (pb.SingleMessageMetadata(), b"two"),
                (pb.SingleMessageMetadata(), b"three")]
    good = _entry([(pb.SingleMessageMetadata(), b"ok")])
    bad = _entry(messages)
    md_size = struct.unpack_from(">I", bad, 6)[0]
    cut = bytearray(bad[:-2])
    struct.pack_into(">I", cut, 2, crc32c(bytes(cut[6:])))
    assert len(cut) > 10 + md_size
    table, problems, counts, _ = decode([good, bytes(cut), good], True)
    assert table.column("payload").to_pylist() == [b"ok", bytes(cut), b"ok"]  # an error row holds the entry
    assert table.column("error").to_pylist()[1] is not None
    assert problems == ["persistent://t/n/x ledger 7 entry 1: " + table.column("error").to_pylist()[1]]
    assert counts == (2, 4)


@pytest.mark.parametrize("field", ["publish", "event", "sequence", "message sequence", "broker time", "index"])
def test_numbers_no_column_holds_are_error_rows_not_a_crash(field):
    """uint64 times and ids past what an int64 column (microseconds, for a
    time) holds: a corrupt entry, on both paths."""
    smd = pb.SingleMessageMetadata()
    if field == "event":
        smd.event_time = 2**63 // 1000 + 1
    if field == "message sequence":
        smd.sequence_id = 2**63
    entry = _entry([(smd, b"x")], sequence=2**63 if field == "sequence" else 5,
                   publish=2**63 // 1000 + 1 if field == "publish" else 1_700_000_000_000,
                   broker=(2**63 // 1000 + 1, None) if field == "broker time" else (None, 2**63) if field == "index"
                   else None)
    table, problems, counts, _ = decode([entry], True)
    assert counts == (0, 0) and len(problems) == 1 and "out of range" in problems[0]
    assert table.column("error").to_pylist() == [problems[0].split(": ", 1)[1]]
    assert_same([entry])
