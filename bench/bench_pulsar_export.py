"""Benchmark ``bkctl export --topic`` against the raw ledger export of the same ledgers.

    .venv/bin/python bench/bench_pulsar_export.py                       # 1,000,000 messages
    .venv/bin/python bench/bench_pulsar_export.py --messages 100000 --repeat 1

Starts a sandbox (ZooKeeper + 3 bookieds) in a temporary folder and writes a
Pulsar topic as a broker stores it: small messages in batches of
``--batch`` (100), LZ4-compressed, made by the encoder the tests check
against the real client's bytes (tests/support/pulsar_entries.py), in ``--ledgers``
ledgers listed by a managed-ledger znode.  Then, in turns (``--repeat``):

* the decoder alone, in this process (one core), to Arrow record batches, with
  its fast path (batches split by the C extension) and without: messages/s and
  CPU per message;
* (after one turn of both that warms Spark's workers up)
* the raw ledger export of those ledgers (``run_export`` with their ids);
* the topic export (``run_export`` with the topic): one row per message;
  its tasks find the transactions' outcomes as they read, and the ones whose
  rows that changes are read again (none here), timed apart.

It prints entries/s, messages/s, MiB/s of each (medians), the topic
export's entries/s as a share of the raw export's (target: at least 80%),
the CPU per message of this process and its descendants (Spark's JVM and
Python workers; the bookies are not counted), and the load average.  It
asserts nothing.  Everything it starts is stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from common import in_sandbox, load_note, raw_zookeeper  # noqa: E402

from bkctl.wire import fastpath

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TOPIC = "persistent://public/default/bench"
CLK = os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int | None = None) -> float:
    """CPU seconds (user + system) of ``root`` (this process) and every live descendant."""
    root = root or os.getpid()
    children: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(name), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        times[pid] = (int(fields[11]) + int(fields[12])) / CLK
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0.0)
        todo.extend(children.get(pid, []))
    return total


def build_entries(messages: int, batch: int) -> list[bytes]:
    from bkctl.wire.proto import pulsar_api_pb2 as pb
    from tests.support import pulsar_entries as pe

    entries = []
    publish = 1_795_000_000_000
    for start in range(0, messages, batch):
        count = min(batch, messages - start)
        body = pe.batch_payload(
            [
                (
                    pb.SingleMessageMetadata(
                        partition_key=f"key-{(start + i) % 97}", sequence_id=start + i, event_time=publish + start + i
                    ),
                    b"%08d|" % (start + i) + b"x" * 40,
                )
                for i in range(count)
            ]
        )
        md = pe.metadata("bench-producer", start, publish + start, num_messages_in_batch=count)
        entries.append(pe.encode_entry(md, body, pb.LZ4))
    return entries


def exports_in_turns(
    uri: str, work: Path, source, kinds, master: str, repeat: int, split_entries: int
) -> dict[str, list[tuple[float, float, dict]]]:
    """``run_export`` of ``source(kind)`` for each kind, ``repeat`` times in turns after one
    turn that warms Spark's workers up: per kind, ``(seconds, CPU seconds of this process
    tree, summary)`` of each counted run."""
    from bkctl.export.job import ExportOptions, run_export
    from bkctl.export.spark_session import spark_session, stop_spark
    from bkctl.wire.metadata.zk import ZKMetadataStore

    spark, created = spark_session(master, quiet=True)
    results: dict[str, list[tuple[float, float, dict]]] = {kind: [] for kind in kinds}
    try:
        for rep in range(repeat + 1):  # the first turn warms Spark's workers up and is not counted
            for kind in kinds:
                opts = ExportOptions(
                    out=str(work / f"out-{kind}"), master=master, mode="overwrite", split_entries=split_entries
                )
                with ZKMetadataStore(uri, twins=fastpath.selected()) as store:
                    cpu = tree_cpu()
                    t = time.monotonic()
                    summary = run_export(store, uri, source(kind), opts)
                    if rep:
                        results[kind].append((time.monotonic() - t, tree_cpu() - cpu, summary))
    finally:
        if created:
            stop_spark(spark)
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000, help="messages in all (default 1,000,000)")
    ap.add_argument("--batch", type=int, default=100, help="messages per entry (default 100)")
    ap.add_argument("--ledgers", type=int, default=4, help="ledgers of the topic (default 4)")
    ap.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each export, in turns (default 3)")
    ap.add_argument("--dir", help="work folder (default: a new temporary one, removed at the end)")
    args = ap.parse_args(argv)

    return in_sandbox(args.dir, "bench-pulsar-", lambda uri, work: run(args, uri, work))


def run(args, uri: str, work: Path) -> int:
    from bkctl.export.ledger_source import LedgerSelection, LedgerSource
    from bkctl.export.topic_source import TopicSource
    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.domain.ledger_plan import parse_ledger_spec
    from bkctl.wire.domain.topic_plan import TopicSpec
    from bkctl.wire.metadata import paths as P
    from bkctl.wire.proto import pulsar_ml_pb2 as ml
    from bkctl.wire.pulsar.managed_ledger import TopicName
    from bkctl.wire.pulsar.messages import TopicDecoder

    entries = build_entries(args.messages, args.batch)
    nbytes = sum(map(len, entries))
    print(
        f"{args.messages:,} messages in {len(entries):,} entries of ~{nbytes // len(entries)} B (LZ4, batches of "
        f"{args.batch}) in {args.ledgers} ledgers; {load_note()}"
    )
    name = TopicName.parse(TOPIC).managed_ledger
    custom = {"application": b"pulsar", "component": b"managed-ledger", "pulsar/managed-ledger": name.encode()}
    info = ml.ManagedLedgerInfo()
    ids = []
    with BlockingBookKeeper(uri, add_timeout=60.0, timeout=3600) as bk:
        per = -(-len(entries) // args.ledgers)
        for i in range(0, len(entries), per):
            part = entries[i : i + per]
            with bk.create(3, 2, 2, password=b"", custom_metadata=custom) as lh:
                lh.add_many(part)
            ids.append(lh.ledger_id)
            info.ledgerInfo.add(
                ledgerId=lh.ledger_id, entries=len(part), size=sum(map(len, part)), timestamp=int(time.time() * 1000)
            )
    with raw_zookeeper(uri) as (broker, root):  # the managed ledger, as Pulsar's broker writes it
        broker.create(
            P.managed_ledger_path(P.managed_ledgers_base(root), name), info.SerializeToString(), makepath=True
        )

    # the decoder alone, one core: rows made into Arrow record batches as the export's tasks do
    from bkctl.export.columns import TOPIC_COLUMNS, arrow_schema
    from bkctl.export.topic_source import record_batch as _to_batch
    from bkctl.wire import fastpath
    from bkctl.wire.pulsar.rows import PyMessageRows

    BatchRows = fastpath.selected().batch_rows

    schema = arrow_schema(TOPIC_COLUMNS)
    print(
        f"batch splitter in use: {BatchRows.__name__} (C extension {'usable' if fastpath.build(True).batch_rows is not PyMessageRows else 'MISSING'}, "
        f"BKCTL_FASTPATHS {'on' if fastpath.selected().enabled else 'off'})"
    )
    splitters = ([("decode to Arrow, C splitter (one core)", BatchRows)] if BatchRows is not PyMessageRows else []) + [
        ("decode to Arrow, Python splitter (one core)", PyMessageRows)
    ]
    for label, splitter in splitters:
        cpu = time.process_time()
        t = time.monotonic()
        dec = TopicDecoder(TOPIC, splitter=splitter)
        for n, data in enumerate(entries):
            dec.add(ids[0], n, data)
            if dec.rows >= 10_000:
                [_to_batch(part, schema) for part in dec.take_parts()]
        [_to_batch(part, schema) for part in dec.take_parts()]
        seconds, cpu = time.monotonic() - t, time.process_time() - cpu
        print(
            f"{label:36} {args.messages / seconds:>10,.0f} messages/s  {len(entries) / seconds:>9,.0f} entries/s  "
            f"{cpu / args.messages * 1e6:6.2f} us CPU/message"
        )

    def source(kind):
        return (
            LedgerSource(LedgerSelection(spec)) if kind == "raw" else TopicSource(TopicSpec(TOPIC, scan_first=False))
        )  # as bkctl export does

    spec = parse_ledger_spec(",".join(map(str, ids)))
    results = exports_in_turns(
        uri, work, source, ("raw", "topic"), args.master, args.repeat, max(1, len(entries) // (2 * args.ledgers))
    )

    medians = {}
    for kind, runs in results.items():
        secs = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        medians[kind] = secs
        s = runs[0][2]
        rows = getattr(s, "messages", s.entries)  # a topic export's rows are messages
        print(
            f"{kind + ' export (' + args.master + ')':34} {len(entries) / secs:>9,.0f} entries/s  "
            f"{args.messages / secs:>10,.0f} messages/s  {nbytes / secs / 2**20:7.2f} MiB/s  "
            f"{cpu / args.messages * 1e6:6.2f} us CPU/message  rows {rows:,}  ({secs:.2f} s median of "
            f"{len(runs)})"
        )
    plan = statistics.median(r[2].timings["plan"] for r in results["topic"])
    again = statistics.median(r[2].timings.get("write_again", 0.0) for r in results["topic"])
    print(
        f"topic export's plan: {plan:.2f} s, tasks read again for transactions: {again:.2f} s (medians; "
        f"the raw export's plan: {statistics.median(r[2].timings['plan'] for r in results['raw']):.2f} s)"
    )
    print(
        f"topic export entries/s = {medians['raw'] / medians['topic']:.0%} of the raw export's (target >= 80%); "
        f"{load_note()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
