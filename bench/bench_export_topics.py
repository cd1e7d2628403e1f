"""Benchmark ``bkctl export`` of many small topics in one run against the export of one.

    .venv/bin/python bench/bench_export_topics.py                 # 50 topics of 100 messages
    .venv/bin/python bench/bench_export_topics.py --topics 20 --repeat 1

Starts a sandbox (ZooKeeper + 3 bookieds) in a temporary folder and lays out ``--topics`` topics in
the namespace ``bench/topics`` as a broker leaves them: each a closed ledger of ``--messages``
Pulsar entries (the real client's format, tests/support/pulsar_entries.py: one message of
``--message-bytes`` each) written by the client (E3 Qw2 Qa2, CRC32C, password ""), and its managed
ledger's znode.  Then, in turns (``--repeat``, after one turn that warms the caches up), each a
process of its own as a user runs it (``bkctl --json export ... --overwrite``, the command's
defaults: ``local[*]``, zstd):

* **one topic**: ``--topic bench/topics/t000``: Python and the JVM starting, the plan, one task,
  the commit -- what a job that exports its topics one by one pays per topic;
* **every topic in one run**: ``--namespace bench/topics``: one Spark session, the topics' tasks in
  one Spark job, a folder per topic.

It prints the medians, the ratio of the second to the first (target: at most 3), what the topics
exported one by one would take (the first times the count), and the load average beside each run.
It asserts nothing but that every run exported every message.  Everything it starts is stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import in_sandbox, load_note, raw_zookeeper  # noqa: E402

NAMESPACE = "bench/topics"
REPO = Path(__file__).resolve().parents[1]


def lay_out(args, uri: str) -> list[str]:
    """The topics, each a closed ledger of Pulsar entries and its managed ledger; their names."""
    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.proto import pulsar_ml_pb2 as ml
    from bkctl.wire.pulsar.managed_ledger import TopicName
    from tests.support import pulsar_entries as pe

    publish = 1_795_000_000_000
    topics = [f"persistent://{NAMESPACE}/t{n:03d}" for n in range(args.topics)]
    with BlockingBookKeeper(uri, timeout=600) as bk, raw_zookeeper(uri) as (zk, root):
        base = root.rsplit("/", 1)[0] + "/managed-ledgers"
        for topic in topics:
            name = TopicName.parse(topic).managed_ledger
            entries = [
                pe.encode_entry(pe.metadata("bench", i, publish + i), os.urandom(args.message_bytes))
                for i in range(args.messages)
            ]
            custom = {"application": b"pulsar", "component": b"managed-ledger", "pulsar/managed-ledger": name.encode()}
            with bk.create(3, 2, 2, digest_type="CRC32C", password=b"", custom_metadata=custom) as lh:
                lh.add_many(entries)
            info = ml.ManagedLedgerInfo()
            info.ledgerInfo.add(
                ledgerId=lh.ledger_id, entries=len(entries), size=sum(map(len, entries)), timestamp=publish + 60_000
            )
            zk.create(f"{base}/{name}", info.SerializeToString(), makepath=True)
    return topics


def command(uri: str, out: Path, *what: str) -> tuple[float, dict]:
    """``bkctl --json export WHAT --out OUT --overwrite`` in a process of its own: wall time, document."""
    argv = [str(REPO / ".venv/bin/bkctl"), "-m", uri, "--json", "export", *what, "--out", str(out), "--overwrite"]
    t = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True)
    seconds = time.monotonic() - t
    if proc.returncode:
        raise SystemExit(f"bkctl export failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return seconds, json.loads(proc.stdout)


def run(args, uri: str, work: Path) -> int:
    t = time.monotonic()
    topics = lay_out(args, uri)
    print(
        f"{len(topics)} topics of {args.messages} messages of {args.message_bytes} B written in "
        f"{time.monotonic() - t:.1f}s"
    )
    times: dict[str, list[float]] = {"one": [], "many": []}
    for turn in range(args.repeat + 1):
        for key, what in (("one", ("--topic", topics[0])), ("many", ("--namespace", NAMESPACE))):
            seconds, doc = command(uri, work / key, *what)
            if key == "one":
                assert doc["messages"] == args.messages, doc
            else:
                assert doc["exported"] == len(topics) and not doc["failed"], doc
                assert all(e["messages"] == args.messages for e in doc["exports"]), doc
            label = "warm-up" if turn == 0 else f"turn {turn}"
            print(f"  {label:8} {key:5} {seconds:7.2f} s   [{load_note()}]")
            if turn:
                times[key].append(seconds)
    one, many = statistics.median(times["one"]), statistics.median(times["many"])
    print(f"one topic (--topic)             {one:7.2f} s  (median of {args.repeat})")
    print(f"{len(topics)} topics in one run (--namespace) {many:7.2f} s  (median of {args.repeat})")
    print(f"ratio                           {many / one:7.2f}x the time of one  (target: at most 3x)")
    print(f"{len(topics)} topics one by one (estimated) {one * len(topics):7.1f} s")
    print(load_note())
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=50, help="topics in the namespace (default 50)")
    ap.add_argument("--messages", type=int, default=100, help="messages per topic (default 100)")
    ap.add_argument("--message-bytes", type=int, default=100, help="bytes per message (default 100)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each, in turns (default 3)")
    ap.add_argument("--dir", help="work folder (default: a new temporary one, removed at the end)")
    args = ap.parse_args(argv)
    return in_sandbox(args.dir, "bench-export-topics-", lambda uri, work: run(args, uri, work))


if __name__ == "__main__":
    raise SystemExit(main())
