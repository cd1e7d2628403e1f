"""Benchmark the typed topic export (``value`` decoded by the topic's AVRO schema) against ``--raw``.

    .venv/bin/python bench/bench_pulsar_typed.py                        # 300,000 messages
    .venv/bin/python bench/bench_pulsar_typed.py --messages 100000 --repeat 1

Starts a sandbox (ZooKeeper + 3 bookieds) in a temporary folder and stores a
Pulsar topic with an AVRO schema as a broker does: the schema's version in a
ledger of its own (a ``SchemaEntry``), its locator under ``/schemas``, the
messages -- an order record (long, string, double, an enum, an array of
strings, a nullable string, a timestamp-millis), Avro binary as the Java
client writes it, stamped with version 0 -- in batches of ``--batch``,
LZ4-compressed, in ``--ledgers`` ledgers listed by a managed-ledger znode.
Then, in turns (``--repeat``):

* the decoder alone, in this process (one core), raw and typed: messages/s
  and CPU per message (what the typing itself costs);
* (after one turn of both that warms Spark's workers up)
* the export with ``--raw`` (today's rows) and without (a ``value`` struct).

It prints messages/s of each (medians), the typed export's rate as a share of
the raw one's (target: at least 80%), the CPU per message of this process and
its descendants, and the load average.  It asserts nothing.  Everything it
starts is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from common import in_sandbox, load_note, raw_zookeeper  # noqa: E402

from bkctl.wire import fastpath

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_pulsar_export import exports_in_turns  # noqa: E402

TOPIC = "persistent://public/default/bench-typed"
SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID", "SHIPPED"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "placed_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}


def build_entries(messages: int, batch: int) -> list[bytes]:
    import io

    import fastavro

    from bkctl.wire.proto import pulsar_api_pb2 as pb
    from bkctl.wire.pulsar.schema import version_bytes
    from tests.support import pulsar_entries as pe

    parsed = fastavro.parse_schema(SCHEMA)
    publish = 1_795_000_000_000
    entries = []
    for start in range(0, messages, batch):
        count = min(batch, messages - start)
        bodies = []
        for i in range(start, start + count):
            buf = io.BytesIO()
            fastavro.schemaless_writer(
                buf,
                parsed,
                {
                    "id": i,
                    "customer": f"customer-{i % 1000}",
                    "amount": i / 100,
                    "state": ("NEW", "PAID", "SHIPPED")[i % 3],
                    "tags": ["a", "bb"][: i % 3],
                    "note": None if i % 2 else "gift",
                    "placed_at": publish + i,
                },
            )
            bodies.append((pb.SingleMessageMetadata(partition_key=f"key-{i % 97}", sequence_id=i), buf.getvalue()))
        md = pe.metadata(
            "bench-producer", start, publish + start, num_messages_in_batch=count, schema_version=version_bytes(0)
        )
        entries.append(pe.encode_entry(md, pe.batch_payload(bodies), pb.LZ4))
    return entries


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=300_000, help="messages in all (default 300,000)")
    ap.add_argument("--batch", type=int, default=100, help="messages per entry (default 100)")
    ap.add_argument("--ledgers", type=int, default=4, help="ledgers of the topic (default 4)")
    ap.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each export, in turns (default 3)")
    ap.add_argument("--dir", help="work folder (default: a new temporary one, removed at the end)")
    args = ap.parse_args(argv)

    return in_sandbox(args.dir, "bench-typed-", lambda uri, work: run(args, uri, work))


def store_topic(uri: str, entries: list[bytes], ledgers: int) -> list[int]:
    """The topic's ledgers, managed-ledger znode, schema ledger and locator, as a broker writes them."""
    import posixpath

    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.metadata import paths as P
    from bkctl.wire.proto import pulsar_ml_pb2 as ml
    from bkctl.wire.proto import pulsar_schema_pb2 as spb
    from bkctl.wire.pulsar.managed_ledger import TopicName
    from bkctl.wire.pulsar.schema import schema_hash, schema_id

    name = TopicName.parse(TOPIC).managed_ledger
    sid = schema_id(TOPIC)
    custom = {"application": b"pulsar", "component": b"managed-ledger", "pulsar/managed-ledger": name.encode()}
    info = ml.ManagedLedgerInfo()
    ids = []
    data = json.dumps(SCHEMA, indent=True).encode()
    with BlockingBookKeeper(uri, add_timeout=60.0, timeout=3600) as bk:
        per = -(-len(entries) // ledgers)
        for i in range(0, len(entries), per):
            part = entries[i : i + per]
            with bk.create(3, 2, 2, password=b"", custom_metadata=custom) as lh:
                lh.add_many(part)
            ids.append(lh.ledger_id)
            info.ledgerInfo.add(
                ledgerId=lh.ledger_id, entries=len(part), size=sum(map(len, part)), timestamp=int(time.time() * 1000)
            )
        schema_info = spb.SchemaInfo(
            schema_id=sid,
            user="",
            type=spb.SchemaInfo.AVRO,
            schema=data,
            timestamp=int(time.time() * 1000),
            deleted=False,
        )
        entry = spb.SchemaEntry(schema_data=schema_info.SerializeToString())
        entry.index.add(version=0, position=spb.PositionInfo(ledgerId=-1, entryId=-1), hash=schema_hash(data))
        with bk.create(
            2,
            2,
            2,
            password=b"",
            custom_metadata={"application": b"pulsar", "component": b"schema", "pulsar/schemaId": sid.encode()},
        ) as lh:
            lh.add(entry.SerializeToString())
        located = spb.IndexEntry(
            version=0, position=spb.PositionInfo(ledgerId=lh.ledger_id, entryId=0), hash=schema_hash(data)
        )
        locator = spb.SchemaLocator(info=located, index=[located])
    with raw_zookeeper(uri) as (broker, root):
        base = P.managed_ledgers_base(root)
        broker.create(P.managed_ledger_path(base, name), info.SerializeToString(), makepath=True)
        broker.create(
            posixpath.join(posixpath.dirname(base), "schemas", sid), locator.SerializeToString(), makepath=True
        )
    return ids


def run(args, uri: str, work: Path) -> int:
    from bkctl.export.columns import arrow_schema
    from bkctl.export.topic_source import TopicSource, _typed, record_batch
    from bkctl.wire.domain.topic_plan import TopicRange, TopicSpec
    from bkctl.wire.pulsar.columns import MESSAGE_COLUMNS
    from bkctl.wire.pulsar.messages import TopicDecoder
    from bkctl.wire.pulsar.schema import StoredSchema
    from bkctl.wire.pulsar.typed import TypedView

    entries = build_entries(args.messages, args.batch)
    nbytes = sum(map(len, entries))
    print(
        f"{args.messages:,} AVRO messages in {len(entries):,} entries of ~{nbytes // len(entries)} B (LZ4, "
        f"batches of {args.batch}) in {args.ledgers} ledgers; {load_note()}"
    )
    ids = store_topic(uri, entries, args.ledgers)

    # the decoder alone, one core: raw rows, then the same with their values typed
    schema = arrow_schema(MESSAGE_COLUMNS)  # as read_topic_range decodes: schema_version as stored
    view = TypedView({0: StoredSchema("public/default/bench-typed", "", "AVRO", json.dumps(SCHEMA).encode(), 0, False)})
    part = TopicRange(TOPIC, -1, ids[0], 0, len(entries) - 1, len(entries) - 1, typed=view)
    for label, typed in (("decode to Arrow, raw (one core)", False), ("decode to Arrow, typed (one core)", True)):
        cpu = time.process_time()
        t = time.monotonic()
        dec = TopicDecoder(TOPIC, splitter=fastpath.selected().batch_rows)

        def batches(dec=dec):
            for n, data in enumerate(entries):
                dec.add(ids[0], n, data)
                if dec.rows >= 32_768:
                    yield from (record_batch(p, schema) for p in dec.take_parts())
            yield from (record_batch(p, schema) for p in dec.take_parts())

        for _ in _typed(batches(), part, schema, None, fastpath.selected().avro_columns) if typed else batches():
            pass
        seconds, cpu = time.monotonic() - t, time.process_time() - cpu
        print(
            f"{label:36} {args.messages / seconds:>10,.0f} messages/s  {cpu / args.messages * 1e6:6.2f} us CPU/message"
        )

    results = exports_in_turns(
        uri,
        work,
        lambda kind: TopicSource(TopicSpec(TOPIC, raw=kind == "raw", scan_first=False)),
        ("raw", "typed"),
        args.master,
        args.repeat,
        max(1, len(entries) // (2 * args.ledgers)),
    )

    medians = {}
    for kind, runs in results.items():
        secs = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        medians[kind] = secs
        s = runs[0][2]
        typed = (s.get("schema") or {}).get("typed")
        print(
            f"{kind + ' export (' + args.master + ')':30} {args.messages / secs:>10,.0f} messages/s  "
            f"{cpu / args.messages * 1e6:6.2f} us CPU/message  rows {s['messages']:,}  typed {typed}  "
            f"({secs:.2f} s median of {len(runs)})"
        )
    print(
        f"typed export messages/s = {medians['raw'] / medians['typed']:.0%} of the raw export's "
        f"(target >= 80%); {load_note()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
