"""Whole stored entries taken by the splitter (``add_entries``): the C twin (``_packed.c``, the
entry read in ``_packed_entry.c``) and the Python one (``rows.PyMessageRows``, by
``rows.plain_entry``) give, through :meth:`TopicDecoder.add_entries` as the export feeds it, the
rows, problems and counts the general path gives entry by entry -- for single messages and
batches with every field a row reads, for the entries neither takes (markers, transactions,
chunks, compression, encryption), for damaged entries -- and a run of plain entries makes no
Python row.  A comparison fails when the C twin is not built (tests/support/c_twins.py)."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bkctl.export.columns import arrow_schema
from bkctl.export.topic_source import record_batch
from bkctl.wire import fastpath
from bkctl.wire.proto import pulsar_api_pb2 as pb
from bkctl.wire.pulsar.columns import MESSAGE_COLUMNS
from bkctl.wire.pulsar.messages import TopicDecoder
from bkctl.wire.pulsar.rows import PlainLimits, PyMessageRows, plain_entry
from bkctl.wire.pulsar.transactions import TXN_ABORT, TXN_COMMIT, TopicTransactions
from tests.support import c_twins
from tests.support import pulsar_entries as pe

try:
    from bkctl.wire.pulsar._packed import PackedRows
except ImportError:
    PackedRows = None

SCHEMA = arrow_schema(MESSAGE_COLUMNS)
BatchRows = fastpath.selected().batch_rows
needs_packed = c_twins.needs_c(PackedRows, "bkctl.wire.pulsar._packed")
#: the splitters whose add_entries is compared with the general path (the C one where built)
SPLITTERS = [PyMessageRows] + ([PackedRows] if PackedRows is not None else [])
NO_LIMITS = PlainLimits(True, None, None, 1 << 30, 1 << 40)


def decode(entries, splitter, runs, rows=1 << 30, payload_bytes=1 << 40, **kw):
    """The rows as one table, the problems, the counts and the parts (``runs``: fed as the export
    feeds a task's entries -- runs through add_entries, the rest one by one -- else one by one)."""
    dec = TopicDecoder("persistent://t/n/x", 3, splitter=splitter, **kw)
    listed = list(enumerate(entries))
    i = 0
    while i < len(listed):
        after = dec.add_entries(7, listed, i, rows, payload_bytes) if runs else i
        if after == i:
            dec.add(7, *listed[i])
            after = i + 1
        i = after
    dec.finish()
    parts = dec.take_parts()
    table = pa.Table.from_batches([record_batch(p, SCHEMA) for p in parts], schema=SCHEMA).combine_chunks()
    return table, [str(p) for p in dec.problems], (dec.entries, dec.messages, dec.payload_bytes), parts


def assert_same(entries, **kw):
    """Each splitter's runs give the general path's rows, problems and counts."""
    general, problems, counts, _ = decode(entries, PyMessageRows, runs=False, **kw)
    for splitter in SPLITTERS:
        table, got_problems, got_counts, _ = decode(entries, splitter, runs=True, **kw)
        assert (got_problems, got_counts) == (problems, counts), splitter
        for name in SCHEMA.names:
            assert table.column(name).equals(general.column(name)), (splitter, name)
    return general


def made_in_c(part) -> bool:
    return not isinstance(part.columns["ledger_id"], list)


def single(payload=b"value", producer="prod", sequence=5, publish=1_700_000_000_000, codec=pb.NONE, broker=None, **f):
    data = pe.encode_entry(pe.metadata(producer, sequence, publish, **f), payload, codec)
    return data if broker is None else pe.with_broker_metadata(data, *broker)


def batch(messages, sequence=9, publish=1_700_000_000_000, **f):
    md = pe.metadata("prod", sequence, publish, num_messages_in_batch=len(messages), **f)
    return pe.encode_entry(md, pe.batch_payload(messages))


def test_the_splitter_in_use_takes_entries():
    assert BatchRows is (PackedRows if fastpath.selected().enabled and PackedRows is not None else PyMessageRows)
    assert all(hasattr(s, "add_entries") and hasattr(s, "takes") for s in SPLITTERS)


@needs_packed
def test_a_run_of_plain_entries_is_taken_whole_by_the_c_twin_and_keeps_storage_order():
    """Plain singles and a plain batch in C; a compressed one, a marker and a transaction's
    message by the general path, their rows in between in storage order."""
    entries = [
        single(b"a", partition_key="k", properties={"x": "y"}, event_time=5, ordering_key=b"o"),
        batch([(pb.SingleMessageMetadata(partition_key="m"), b"b1"), (pb.SingleMessageMetadata(), b"b2")]),
        single(b"c", codec=pb.LZ4),
        single(b"d", schema_version=b"\0" * 7 + b"\1", replicated_from="east", deliver_at_time=-3),
        pe.marker(TXN_COMMIT, (1, 2)),
        single(b"e", broker=(1_700_000_000_001, 42)),
        single(b"f", txnid_most_bits=1, txnid_least_bits=3),
        single(b"g", null_value=True),
    ]
    table = assert_same(entries)
    _, _, _, parts = decode(entries, PackedRows, runs=True)
    assert [made_in_c(p) for p in parts] == [True, False, True, False, True]
    assert table.column("entry_id").to_pylist() == [0, 1, 1, 2, 3, 5, 6, 7]
    assert table.column("batch_index").to_pylist() == [-1, 0, 1, -1, -1, -1, -1, -1]
    assert table.column("message_id").to_pylist()[:3] == ["7:0:3", "7:1:3:0", "7:1:3:1"]
    assert table.column("payload").to_pylist() == [b"a", b"b1", b"b2", b"c", b"d", b"e", b"f", None]
    assert table.column("index").to_pylist()[5] == 42


def test_the_python_twin_takes_what_plain_entry_takes():
    plain = single(b"a")
    assert plain_entry(plain, NO_LIMITS) is not None
    for refused in (
        single(codec=pb.ZLIB),
        single(txnid_most_bits=1),
        single(uuid="u", chunk_id=0, num_chunks_from_msg=2, total_chunk_msg_size=1),
        pe.marker(TXN_ABORT, (1, 2)),
        plain[:-1],  # the checksum fails
    ):
        assert plain_entry(refused, NO_LIMITS) is None
        for splitter in SPLITTERS:
            assert splitter(-1).add_entries(7, [(0, refused), (1, plain)], 0, NO_LIMITS) == 0
            assert not splitter(-1).takes(refused, NO_LIMITS) or refused == plain[:-1]
    assert plain_entry(plain[:-1], NO_LIMITS._replace(verify=False)) is not None
    assert plain_entry(plain, NO_LIMITS._replace(from_ms=1_700_000_000_001)) is None
    assert plain_entry(plain, NO_LIMITS._replace(to_ms=1_700_000_000_000)) is None


@pytest.mark.parametrize("splitter", SPLITTERS)
def test_a_call_stops_at_its_row_and_byte_limits(splitter):
    entries = [(n, single(b"x" * 10, sequence=n)) for n in range(10)]
    rows = splitter(-1)
    assert rows.add_entries(7, entries, 0, NO_LIMITS._replace(rows=3)) == 3
    assert rows.add_entries(7, entries, 3, NO_LIMITS._replace(payload_bytes=25)) == 6  # 30 bytes >= 25
    assert (rows.rows, rows.payload_bytes) == (6, 60)
    assert rows.add_entries(7, entries, 6, NO_LIMITS) == 10
    assert rows.take()[0] == 10 and rows.payload_bytes == 0


def test_the_export_window_and_what_a_consumer_does_not_get_stay_the_general_paths():
    entries = [single(b"%d" % n, sequence=n, publish=1_700_000_000_000 + n) for n in range(6)]
    assert_same(entries, from_ms=1_700_000_000_002, to_ms=1_700_000_000_004)
    open_txn = TopicTransactions(open={(1, 1): (7, 3)})
    assert_same(entries, transactions=open_txn, pending=True)
    assert_same(entries, keep=lambda position, index: position[1] % 2 == 0)


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=10)


@st.composite
def entries(draw):
    """A stored entry of a single message or a batch with random fields, some of them ones
    that make it not plain; now and then with the broker's metadata."""
    fields = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "partition_key": _text,
                "null_partition_key": st.booleans(),
                "partition_key_b64_encoded": st.booleans(),
                "ordering_key": st.binary(max_size=6),
                "event_time": st.integers(0, 2**63 // 1000 + 2),
                "replicated_from": _text,
                "deliver_at_time": st.integers(-(2**63 // 1000) - 2, 2**63 // 1000 + 2),
                "schema_version": st.binary(max_size=9),
                "null_value": st.booleans(),
                "properties": st.dictionaries(_text, _text, max_size=3),
                "txnid_most_bits": st.integers(0, 2**64 - 1),
                "encryption_algo": _text,
                "highest_sequence_id": st.integers(0, 2**64 - 1),
                "uncompressed_size": st.integers(0, 2**32 - 1),
            },
        )
    )
    codec = draw(st.sampled_from([pb.NONE] * 4 + [pb.LZ4]))
    sequence = draw(st.one_of(st.integers(0, 2**63 - 1), st.just(2**63)))
    publish = draw(st.one_of(st.integers(0, 2**62 // 1000), st.just(2**63 // 1000 + 1)))
    if draw(st.booleans()):
        messages = [
            (pb.SingleMessageMetadata(partition_key=k, sequence_id=s), p)
            for k, s, p in draw(
                st.lists(st.tuples(_text, st.integers(0, 2**63 - 1), st.binary(max_size=9)), min_size=1, max_size=3)
            )
        ]
        md = pe.metadata("prod", sequence, publish, num_messages_in_batch=len(messages), **fields)
        data = pe.encode_entry(md, pe.batch_payload(messages), codec)
    else:
        data = single(draw(st.binary(max_size=20)), draw(_text), sequence, publish, codec, **fields)
    if draw(st.integers(0, 3)) == 0:
        data = pe.with_broker_metadata(
            data,
            draw(st.one_of(st.none(), st.integers(0, 2**62 // 1000))),
            draw(st.one_of(st.none(), st.integers(0, 2**63 - 1))),
        )
    return data


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stored=st.lists(entries(), min_size=1, max_size=8), limit=st.integers(1, 4))
def test_random_entries_give_the_general_paths_rows(stored, limit):
    assert_same(stored, rows=limit, payload_bytes=limit * 7)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entry=entries(), data=st.data())
def test_damaged_entries_give_the_general_paths_rows_and_problems(entry, data):
    """Bytes changed or cut anywhere past the checksum (made to match, or not): whatever the
    general path makes of it, the runs make too."""
    damaged = bytearray(entry)
    crc_at = 2 if damaged[:2] == b"\x0e\x01" else None
    if damaged[:2] == b"\x0e\x02":
        crc_at = 6 + struct.unpack_from(">I", damaged, 2)[0] + 2
    if data.draw(st.booleans(), "cut"):
        damaged = damaged[: data.draw(st.integers(0, len(damaged) - 1), "length")]
    for _ in range(data.draw(st.integers(0, 3), "changes")):
        if damaged:
            damaged[data.draw(st.integers(0, len(damaged) - 1), "at")] = data.draw(st.integers(0, 255), "byte")
    if crc_at is not None and len(damaged) >= crc_at + 4 and data.draw(st.booleans(), "crc fixed"):
        struct.pack_into(">I", damaged, crc_at, crc32c(bytes(damaged[crc_at + 4 :])))
    good = single(b"ok")
    assert_same([good, bytes(damaged), good])


@pytest.mark.parametrize("case, folder", pe.case_folders())
def test_the_real_clients_entries_give_the_general_paths_rows(case, folder):
    """Every vector case as Pulsar's client wrote it (batched or not, compressed, chunked,
    transactions and markers, the broker's metadata)."""
    assert_same(pe.case_entries(case, folder))
