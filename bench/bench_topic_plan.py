"""``export --topic`` planning over a topic of 30,000 ledgers (issue 57, apache/pulsar#11490).

Pulsar's #11490 reports a managed ledger of 30,000 ledgers, each ``LedgerInfo`` with an
offload context, whose ``ManagedLedgerInfo`` is some 6 MB (1.3 MB with ZSTD, the
``managedLedgerInfoCompressionType`` that PR added).  Both are over ZooKeeper's default
``jute.maxbuffer`` (1 MiB - 1); Pulsar runs its ZooKeeper, brokers and bookies with
``-Djute.maxbuffer=10485760``, and so does the sandbox's ZooKeeper.

In a sandbox (its own, ``--dir``: kept and reused with ``--keep``) the bench writes
``--ledgers`` closed ledgers (their metadata as a Java client writes it) and the managed
ledger listing them, plain and ZSTD-compressed as Pulsar writes it, then times, in this
process, reading the managed ledger and the export's planning (``TopicSource.plan``, raw:
no schema; every ledger closed, so no bookie is asked for a tail), with the ZooKeeper
requests it made (``mntr``) and the load average.

    python bench/bench_topic_plan.py [--ledgers 30000] [--dir /tmp/scale/plan --keep] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gc import zk_packets  # noqa: E402
from common import commit_or_exit, load_note, raw_zookeeper, section  # noqa: E402

from bkctl.wire import fastpath

FIRST = 5_000_000  # ledger ids of the topic: above what the sandbox hands out
TOPICS = {"none": "persistent://acme/plan/plain", "zstd": "persistent://acme/plan/zstd"}
MAGIC = 0x4778  # Pulsar's MetaStoreImpl.MAGIC_MANAGED_INFO_METADATA


def managed_ledger_info(ids: range, now_ms: int) -> bytes:
    """A ManagedLedgerInfo listing ``ids``, each with an offload context as Pulsar's offloader
    leaves it (driver metadata and one segment): some 200 bytes a ledger."""
    from bkctl.wire.proto import pulsar_ml_pb2 as ml

    rnd = random.Random(11490)
    info = ml.ManagedLedgerInfo()
    for i, ledger_id in enumerate(ids):
        li = info.ledgerInfo.add(ledgerId=ledger_id, entries=1000, size=1_000_000, timestamp=now_ms - 1000 * i)
        ctx = li.offloadContext
        ctx.uidMsb, ctx.uidLsb = rnd.getrandbits(63), rnd.getrandbits(63)
        ctx.complete = ctx.bookkeeperDeleted = False
        ctx.timestamp = now_ms
        ctx.driverMetadata.name = "aws-s3"
        for key, value in (
            ("bucket", "pulsar-offload-prod-eu-west-1"),
            ("region", "eu-west-1"),
            ("endpoint", "https://s3.eu-west-1.amazonaws.com"),
        ):
            ctx.driverMetadata.properties.add(key=key, value=value)
        ctx.offloadSegment.add(
            uidMsb=rnd.getrandbits(63),
            uidLsb=rnd.getrandbits(63),
            complete=False,
            assignedTimestamp=now_ms,
            endEntryId=999,
        )
    return info.SerializeToString()


def zstd_framed(data: bytes) -> bytes:
    """``data`` as Pulsar writes it with managedLedgerInfoCompressionType=ZSTD: magic,
    the header's size, a ManagedLedgerInfoMetadata, the compressed ManagedLedgerInfo."""
    import zstandard

    from bkctl.wire.proto import pulsar_ml_pb2 as ml

    header = ml.ManagedLedgerInfoMetadata(compressionType=ml.ZSTD, uncompressedSize=len(data)).SerializeToString()
    return struct.pack(">HI", MAGIC, len(header)) + header + zstandard.ZstdCompressor().compress(data)


def fill(uri: str, n: int) -> dict[str, int]:
    from bkctl.wire.metadata import paths as P
    from bkctl.wire.metadata.ledger import LedgerMetadata, serialize_ledger_metadata

    ids = range(FIRST, FIRST + n)
    now = int(time.time() * 1000)
    plain = managed_ledger_info(ids, now)
    sizes = {"none": len(plain)}
    with raw_zookeeper(uri) as (zk, root):
        for parent in sorted(
            {p for lid in range(FIRST, FIRST + n, 5000) for p in P.ledger_parent_paths(lid)}
            | set(P.ledger_parent_paths(FIRST + n - 1))
        ):
            zk.ensure_path(parent)
        md = serialize_ledger_metadata(LedgerMetadata.new(["127.0.0.1:3181"], 1, 1, password=b"").closed(999, 10**6))
        for lo in range(0, n, 1000):
            tx = zk.transaction()
            for ledger_id in ids[lo : lo + 1000]:
                tx.create(P.ledger_path(ledger_id, root=root), md)
            commit_or_exit(tx, f"ledger {ids[lo]}")
        base = P.managed_ledgers_base(root)
        for kind, topic in TOPICS.items():
            value = plain if kind == "none" else zstd_framed(plain)
            sizes[kind] = len(value)
            tenant, ns, name = topic.split("://")[1].split("/")
            zk.create(P.managed_ledger_path(base, f"{tenant}/{ns}/persistent/{name}"), value, makepath=True)
    return sizes


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ledgers", type=int, default=30_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dir", default=None)
    p.add_argument("--keep", action="store_true")
    args = p.parse_args(argv)

    bkctl = str(Path(sys.executable).with_name("bkctl"))
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-plan-"))
    up = subprocess.run(
        [bkctl, "sandbox", "up", "--bookies", "1", "--dir", str(work), "--json"], capture_output=True, text=True
    )
    if up.returncode != 0:
        print(up.stderr, file=sys.stderr)
        return 1
    doc = json.loads(up.stdout)
    uri, zk_port = doc["uri"], doc["zookeeper"]["port"]
    print(f"bench_topic_plan: a topic of {args.ledgers:,} ledgers; {load_note()}", flush=True)
    try:
        marker = work / "plan_filled.json"
        if marker.exists() and json.loads(marker.read_text())["ledgers"] == args.ledgers:
            sizes = json.loads(marker.read_text())["sizes"]
        else:
            t0 = time.monotonic()
            sizes = fill(uri, args.ledgers)
            marker.write_text(json.dumps({"ledgers": args.ledgers, "sizes": sizes}))
            print(f"  filled in {time.monotonic() - t0:.0f}s", flush=True)
        print("  ManagedLedgerInfo: " + ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in sizes.items()), flush=True)
        run(uri, zk_port, args)
    finally:
        if not args.keep:
            subprocess.run([bkctl, "sandbox", "down", "--dir", str(work)], capture_output=True)
            if not args.dir:
                shutil.rmtree(work, ignore_errors=True)
    return 0


def run(uri: str, zk_port: int, args) -> None:
    from bkctl.export.topic_source import TopicSource
    from bkctl.wire.domain.topic_plan import TopicSpec
    from bkctl.wire.domain.topic_state import topic_reader as reader
    from bkctl.wire.metadata.zk import ZKMetadataStore

    class NoBookies:  # every ledger is closed: planning asks no bookie
        client = None

        def tail(self, ledger_id):
            raise AssertionError(f"planning asked a bookie for ledger {ledger_id}'s tail")

    for rnd in range(args.rounds):
        section(f"round {rnd + 1} of {args.rounds}")
        for kind, topic in TOPICS.items():
            with ZKMetadataStore(uri, timeout=60, twins=fastpath.selected()) as store:
                load = load_note()
                before = zk_packets("127.0.0.1", zk_port)
                t0 = time.perf_counter()
                ml = reader(store).read(topic)
                t_read = time.perf_counter() - t0
                plan = TopicSource(TopicSpec(topic, raw=True, scan_first=False)).plan(store, NoBookies(), 100_000)
                took = time.perf_counter() - t0
                requests = zk_packets("127.0.0.1", zk_port) - before - 1
            print(
                f"  {kind:5} {len(ml.info.ledgerInfo):,} ledgers: read {t_read:6.2f} s, plan {took:6.2f} s "
                f"({len(plan.tasks):,} tasks), {requests:,} ZK requests  [{load}]",
                flush=True,
            )


if __name__ == "__main__":
    raise SystemExit(main())
