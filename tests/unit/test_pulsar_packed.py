"""The batch splitter's twins: the C one (``_packed.PackedRows``, batches split
straight into Arrow buffers) gives the rows and problems of the Python one
(``rows.PyMessageRows``), for the real client's entries, random batches and
random damage; it has the columns of the Python table; and it is the one in
use when it is built and fast paths are on.  A comparison fails when the C one
is not built (tests/support/c_twins.py); those of the splitter in use are skipped
with ``BKCTL_FASTPATHS=0``, where there is nothing to compare the Python twin with."""

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
from bkctl.wire.pulsar import rows
from bkctl.wire.pulsar.columns import MESSAGE_COLUMNS
from bkctl.wire.pulsar.messages import TopicDecoder
from bkctl.wire.pulsar.rows import PyMessageRows
from bkctl.wire.pulsar.transactions import TopicTransactions, TransactionScan
from tests.support import c_twins
from tests.support import pulsar_entries as pe

try:
    from bkctl.wire.pulsar._packed import COLUMNS as C_COLUMNS
    from bkctl.wire.pulsar._packed import PackedRows
except ImportError:
    PackedRows = C_COLUMNS = None

SCHEMA = arrow_schema(MESSAGE_COLUMNS)  # the decoder's parts: schema_version as stored
#: whether the C twin splits the batches here (BKCTL_FASTPATHS=0 runs this module too)
BatchRows = fastpath.selected().batch_rows
C_IN_USE = BatchRows is not PyMessageRows
#: comparisons of the splitter in use with the Python one: they fail when the C one is not built
#: (skipped with BKCTL_FASTPATHS=0, where the one in use is the Python one)
needs_c = c_twins.needs_c(BatchRows if C_IN_USE else None, "bkctl.wire.pulsar._packed")
#: comparisons of the C splitter itself (whether in use or not) with the Python one
needs_packed = c_twins.needs_c(PackedRows, "bkctl.wire.pulsar._packed")


def decode(entries, splitter=BatchRows, partition=-1, take_every=0, **kw):
    """The rows as one Arrow table, the problems, and how many parts the C twin made."""
    dec = TopicDecoder("persistent://t/n/x", partition, splitter=splitter, **kw)
    parts = []
    for entry_id, data in enumerate(entries):
        dec.add(7, entry_id, data)
        if take_every and entry_id % take_every == 0:
            parts += dec.take_parts()
    dec.finish()
    parts += dec.take_parts()
    table = pa.Table.from_batches([record_batch(p, SCHEMA) for p in parts], schema=SCHEMA).combine_chunks()
    return table, [str(p) for p in dec.problems], (dec.messages, dec.payload_bytes), sum(map(made_in_c, parts))


def made_in_c(part) -> bool:
    return not isinstance(part.columns["ledger_id"], list)


def assert_same(entries, **kw):
    """The C twin's rows, problems and counts are the Python twin's; returns how many parts the C twin made."""
    fast, fast_problems, fast_counts, packed_parts = decode(entries, PackedRows, **kw)
    general, general_problems, general_counts, none = decode(entries, PyMessageRows, **kw)
    assert none == 0
    assert fast_problems == general_problems
    assert fast_counts == general_counts
    assert fast.num_rows == general.num_rows
    for name in SCHEMA.names:
        assert fast.column(name).equals(general.column(name)), name
    return packed_parts


def test_the_extension_is_built():
    assert PackedRows is not None, "bkctl.wire.pulsar._packed is missing: ./dev setup builds it (gcc, Python headers)"


def test_the_c_splitter_is_in_use_exactly_when_fast_paths_are_on():
    assert (fastpath.selected().enabled and PackedRows is not None) == C_IN_USE
    assert (BatchRows is PackedRows) == C_IN_USE and fastpath.build(True).batch_rows is PackedRows
    assert fastpath.build(False).batch_rows is PyMessageRows
    assert fastpath.build(True).batch_rows is (PackedRows or PyMessageRows)


@needs_packed
def test_the_c_columns_are_the_python_tables_entry_and_message_columns_in_order():
    """_packed.c's ROW_COLUMNS and MESSAGE_COLUMNS name the same columns, in
    the same order, stored as their types want and made the same way: a
    column added on one side only fails here (and such a build is not used)."""
    assert [name for name, _kind, _made_by in rows.c_columns()] == [
        c.name for c in MESSAGE_COLUMNS if c.made_by in ("entry", "message")
    ]
    assert list(C_COLUMNS) == rows.c_columns()


@needs_packed
def test_the_comparison_sees_a_difference():
    """assert_same fails when a rule differs: the C twin against a Python twin
    whose null-key rule is turned around."""
    smd = pb.SingleMessageMetadata(partition_key="k", null_partition_key=True)
    entry = _entry([(smd, b"x")])
    fast, *_ = decode([entry], PackedRows)
    general, *_ = decode([entry], PyMessageRows)
    assert fast.column("key").to_pylist() == general.column("key").to_pylist() == [None]
    original = rows.message_values

    def wrong(md, *args):
        values = list(original(md, *args))
        values[rows.MESSAGE_VALUE_COLUMNS.index("key")] = md.partition_key  # null_partition_key ignored
        return tuple(values)

    rows.message_values = wrong
    try:
        general, *_ = decode([entry], PyMessageRows)
    finally:
        rows.message_values = original
    assert fast.column("key").to_pylist() != general.column("key").to_pylist()


@needs_c
@pytest.mark.parametrize("case, folder", pe.case_folders())
def test_the_real_clients_entries_give_the_same_rows(case, folder):
    """Every vector case, the consumer-view ones (transactions, markers,
    delayed delivery) with the topic's transactions as the export scans them."""
    entries = pe.case_entries(case, folder)
    scan = TransactionScan()
    for entry_id, data in enumerate(entries):
        scan.add((7, entry_id), data)
    assert_same(entries, partition=3, transactions=scan.result())


def test_a_batch_goes_to_the_splitter_in_use_and_a_plain_message_to_the_python_twin():
    batch = pe.encode_entry(
        pe.metadata("p", 0, 1_700_000_000_000, num_messages_in_batch=2),
        pe.batch_payload([(pb.SingleMessageMetadata(), b"a"), (pb.SingleMessageMetadata(), b"b")]),
    )
    plain = pe.encode_entry(pe.metadata("p", 2, 1_700_000_000_001), b"c")
    dec = TopicDecoder("persistent://t/n/x", splitter=fastpath.selected().batch_rows)
    for entry_id, data in enumerate([batch, batch, plain, batch]):
        dec.add(7, entry_id, data)
    parts = dec.take_parts()
    # storage order kept across the two: C (entries 0, 1), Python (2), C (3)
    assert [made_in_c(p) for p in parts] == ([True, False, True] if C_IN_USE else [False])
    table = pa.Table.from_batches([record_batch(p, SCHEMA) for p in parts])
    assert table.column("entry_id").to_pylist() == [0, 0, 1, 1, 2, 3, 3]
    assert table.column("payload").to_pylist() == [b"a", b"b", b"a", b"b", b"c", b"a", b"b"]
    dec.add(7, 4, batch)
    if C_IN_USE:
        with pytest.raises(RuntimeError):  # rows the C twin made: take_parts()
            dec.take()
    else:
        assert dec.take()["payload"] == [b"a", b"b"]


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


def _entry(
    messages,
    codec=pb.NONE,
    producer="prod",
    schema=None,
    sequence=5,
    broker=None,
    unknown=b"",
    publish=1_700_000_000_000,
    **fields,
):
    body = bytearray()
    for smd, payload in messages:
        smd.payload_size = len(payload)
        raw = smd.SerializeToString() + unknown  # fields this proto does not know are skipped
        body += struct.pack(">I", len(raw)) + raw + payload
    md = pe.metadata(producer, sequence, publish, num_messages_in_batch=len(messages), **fields)
    if schema is not None:
        md.schema_version = schema
    data = pe.encode_entry(md, bytes(body), codec)
    if broker is not None:
        data = pe.with_broker_metadata(data, *broker)
    return data


@needs_c
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(st.lists(single(), min_size=1, max_size=6), min_size=1, max_size=5),
    codec=st.sampled_from([pb.NONE, pb.LZ4, pb.ZLIB, pb.ZSTD, pb.SNAPPY]),
    producer=_text,
    schema=st.one_of(st.none(), st.binary(max_size=8)),
    sequence=st.integers(0, 2**62),
    broker=st.one_of(
        st.none(),
        st.tuples(st.one_of(st.none(), st.integers(0, 2**62 // 1000)), st.one_of(st.none(), st.integers(0, 2**63 - 1))),
    ),
    unknown=st.sampled_from([b"", b"\x58\x01", b"\x62\x02ab", b"\x6d\x01\x02\x03\x04", b"\x71" + bytes(8)]),
    partition=st.integers(-1, 50),
    take_every=st.integers(0, 3),
    consumer=st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "replicated_from": _text,
                "deliver_at_time": st.integers(-(2**63 // 1000 - 1), 2**63 // 1000 - 1),
                "txnid_most_bits": st.integers(0, 2**64 - 1),
                "txnid_least_bits": st.integers(0, 2**64 - 1),
            },
        ),
        min_size=5,
        max_size=5,
    ),
    cutoff=st.one_of(st.none(), st.integers(0, 5)),
)
def test_random_batches_give_the_same_rows(
    batches, codec, producer, schema, sequence, broker, unknown, partition, take_every, consumer, cutoff
):
    """Random batches, with what a consumer sees of their entries
    (replicated_from, deliver_at_time, a transaction) and, past a random
    cutoff, kept as pending behind an open transaction."""
    entries = [
        _entry(b, codec, producer, schema, sequence + i, broker, unknown, 1_700_000_000_000 + i, **consumer[i])
        for i, b in enumerate(batches)
    ]
    transactions = None if cutoff is None else TopicTransactions(open={(2**64 - 1, 0): (7, cutoff)})
    packed_parts = assert_same(
        entries, partition=partition, take_every=take_every, transactions=transactions, pending=True
    )
    assert packed_parts > 0


@needs_c
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
        entry = entry[: data.draw(st.integers(start, len(entry) - 1), "length")]
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
    messages = [
        (pb.SingleMessageMetadata(), b"one"),
        (pb.SingleMessageMetadata(), b"two"),
        (pb.SingleMessageMetadata(), b"three"),
    ]
    good = _entry([(pb.SingleMessageMetadata(), b"ok")])
    bad = _entry(messages)
    md_size = struct.unpack_from(">I", bad, 6)[0]
    cut = bytearray(bad[:-2])
    struct.pack_into(">I", cut, 2, crc32c(bytes(cut[6:])))
    assert len(cut) > 10 + md_size
    table, problems, counts, _ = decode([good, bytes(cut), good])
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
    entry = _entry(
        [(smd, b"x")],
        sequence=2**63 if field == "sequence" else 5,
        publish=2**63 // 1000 + 1 if field == "publish" else 1_700_000_000_000,
        broker=(2**63 // 1000 + 1, None) if field == "broker time" else (None, 2**63) if field == "index" else None,
    )
    table, problems, counts, _ = decode([entry])
    assert counts == (0, 0) and len(problems) == 1 and "out of range" in problems[0]
    assert table.column("error").to_pylist() == [problems[0].split(": ", 1)[1]]
    if C_IN_USE:
        assert_same([entry])


@needs_packed
def test_a_refused_batch_leaves_no_pending_bit_behind():
    """A boolean column's values are a bitmap: the bits of a batch the C twin
    took back are cleared, so the next rows start from false."""
    from bkctl.export.topic_source import _wrap
    from bkctl.wire.pulsar.columns import EntryFacts, entry_values

    md = pe.metadata("p", 0, 1_700_000_000_000, num_messages_in_batch=3)
    good = pe.batch_payload([(pb.SingleMessageMetadata(), b"one")])
    bad = pe.batch_payload(
        [
            (pb.SingleMessageMetadata(), b"one"),
            (pb.SingleMessageMetadata(), b"two"),
            (pb.SingleMessageMetadata(), b"three"),
        ]
    )[:-2]
    packed = PackedRows(-1)
    assert packed.add_batch(good, 1, 0, entry_values(EntryFacts(7, 0, md))) == 3
    assert packed.add_batch(bad, 3, 0, entry_values(EntryFacts(7, 1, md, pending=True))) is None
    assert packed.rows == 1
    assert packed.add_batch(good, 1, 0, entry_values(EntryFacts(7, 2, md))) == 3
    assert packed.add_batch(good, 1, 0, entry_values(EntryFacts(7, 3, md, pending=True))) == 3
    n, columns = packed.take()
    assert _wrap(pa.bool_(), n, columns["pending"]).to_pylist() == [False, False, True]
    assert _wrap(pa.string(), n, columns["txn_id"]).to_pylist() == [None, None, None]
