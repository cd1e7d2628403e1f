"""Benchmark reading offloaded ledgers: ``bkctl export --topic`` against a plain S3 client, and
against the export of the same topic from BookKeeper.

    .venv/bin/python bench/bench_offload.py                     # 16 ledgers of 64 MiB
    .venv/bin/python bench/bench_offload.py --ledgers 4 --ledger-mib 16 --repeat 1 --no-command

Starts a sandbox with its S3 server (``sandbox up --s3 --bookies 3``: ZooKeeper, SeaweedFS and
three bookieds) in a temporary folder and lays out a Pulsar topic whose ledgers were all offloaded and deleted
from BookKeeper, as a broker leaves them: each ledger's data object (64 MiB blocks: a 128-byte
header, entries as length + entry id + bytes, padding; uploaded as one part per block) and its
index object (version 1, with the ledger's metadata), written by this script from the layout in
tests/vectors/offload/FACTS.md (the tests check the reader against Pulsar's own bytes), and the
managed ledger whose offload contexts name the sandbox's bucket, endpoint and region.  The entries
are Pulsar entries as the real client makes them (tests/support/pulsar_entries.py): messages of
``--message-bytes`` (16 KiB), ``--batch`` (1) to an entry, incompressible.  A second topic of one
1-entry ledger measures the command's fixed cost.  A third topic has as many ledgers of as many
entries of the same sizes in BookKeeper (E2 Qw2 Qa2, Pulsar's default; ``--bookies 0`` leaves it
out), written by the client as a broker writes them.

Then, in turns (``--repeat``), after one turn that warms the server, the caches and Spark up:

* **plain GET**: a boto3 client GETs every data object whole, ``--clients`` (the CPUs) at a time,
  each body read to the end and dropped: the store's rate on this machine.  Its figure is the
  data objects' bytes over that time; its CPU is the client's and the S3 server's;
* **reader alone**: the export's reader of offloaded ledgers (ranged GETs of the blocks, entries
  split out), as many at a time, nothing decoded or written;
* **the command**: ``bkctl --json export --topic T --out DIR --overwrite`` (``--master``,
  ``--compression`` only when given: the command's defaults, ``local[*]`` and zstd), a process
  of its own with the credentials in ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/
  ``AWS_DEFAULT_REGION`` and nothing else: the endpoint, bucket and region come from each
  ledger's offload driver metadata.  Its figure is the same data objects' bytes over the whole
  run: Python and the JVM starting, Spark's Python workers starting, the plan, the tasks (GET,
  decode, Parquet written and committed), the manifest.  Its CPU is every process of the run's
  (the JVM and the workers included, as the kernel reports reaped children);
* **its fixed cost**: the same command on the 1-entry topic; "net of the fixed cost" divides
  the bytes by the difference of the two;
* **in a running session**: ``run_export`` in this process's Spark session, whose JVM and
  Python workers are up: the steady state of a long export (or the shell's);
* **the same from BookKeeper**: ``run_export`` of the BookKeeper topic in the same session.

It prints the medians of each, the export's rates as shares of the plain GET's, the offloaded
topic's export as a share of the same topic's from BookKeeper (entries per second, both in the
running session: target at least 0.8) and the load average beside them.  It asserts nothing.  Everything it starts is stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import cpu_seconds, load_note, raw_zookeeper  # noqa: E402

from bkctl.wire import fastpath

TOPIC = "persistent://public/default/bench-offload"
#: a topic of one 1-entry ledger: the command's fixed cost
SMALL_TOPIC = "persistent://public/default/bench-offload-small"
#: the same sizes in BookKeeper: what the offloaded export is compared with
BK_TOPIC = "persistent://public/default/bench-offload-bk"
REPO = Path(__file__).resolve().parents[1]
BLOCK = 64 << 20  # the broker's default s3ManagedLedgerOffloadMaxBlockSizeInBytes
PADDING = bytes.fromhex("FEDCDEAD")
TICK = os.sysconf("SC_CLK_TCK")


def build_entries(count: int, message_bytes: int, batch: int) -> list[bytes]:
    from bkctl.wire.proto import pulsar_api_pb2 as pb
    from tests.support import pulsar_entries as pe

    publish = 1_795_000_000_000
    entries = []
    for n in range(count):
        first = n * batch
        if batch == 1:
            md = pe.metadata("bench-producer", first, publish + first, partition_key=f"key-{n % 97}")
            entries.append(pe.encode_entry(md, os.urandom(message_bytes)))
            continue
        body = pe.batch_payload(
            [
                (
                    pb.SingleMessageMetadata(partition_key=f"key-{(first + i) % 97}", sequence_id=first + i),
                    os.urandom(message_bytes),
                )
                for i in range(batch)
            ]
        )
        md = pe.metadata("bench-producer", first, publish + first, num_messages_in_batch=batch)
        entries.append(pe.encode_entry(md, body))
    return entries


def offloaded_objects(entries: list[bytes], ledger_metadata: bytes) -> tuple[list[bytes], bytes]:
    """The data object's blocks and the index object of a ledger of ``entries`` (FACTS #9-#16)."""
    blocks, index_entries = [], []
    first, offset, total = 0, 0, sum(map(len, entries))
    written = 0
    while first < len(entries):
        size = min(BLOCK, (len(entries) - first) * 12 + (total - written) + 128)
        block = bytearray(struct.pack(">Iqqq", 0xFBDBABCB, 128, size, first).ljust(128, b"\0"))
        entry_id = first
        while entry_id < len(entries) and len(block) + 12 + len(entries[entry_id]) <= size:
            block += struct.pack(">iq", len(entries[entry_id]), entry_id) + entries[entry_id]
            written += len(entries[entry_id])
            entry_id += 1
        block += (PADDING * ((size - len(block)) // 4 + 1))[: size - len(block)]
        index_entries.append(struct.pack(">qiq", first, len(blocks) + 1, offset))
        blocks.append(bytes(block))
        offset += size
        first = entry_id
    body = ledger_metadata + b"".join(index_entries)
    head = struct.pack(">Iiqqii", 0xDE47DE47, 32 + len(body), offset, 128, len(index_entries), len(ledger_metadata))
    return blocks, head + body


def metadata_of(entries: list[bytes], name: str) -> bytes:
    from bkctl.wire.proto import formats_pb2

    md = formats_pb2.LedgerMetadataFormat(
        quorumSize=2, ensembleSize=2, length=sum(map(len, entries)), lastEntryId=len(entries) - 1, ackQuorumSize=2
    )
    md.state = formats_pb2.LedgerMetadataFormat.CLOSED
    md.digestType = formats_pb2.LedgerMetadataFormat.CRC32C
    md.ctime = int(time.time() * 1000)
    md.segment.add(firstEntryId=0, ensembleMember=["127.0.0.1:3181", "127.0.0.1:3182"])
    for k, v in {
        "application": b"pulsar",
        "component": b"managed-ledger",
        "pulsar/managed-ledger": name.encode(),
    }.items():
        md.customMetadata.add(key=k, value=v)
    return md.SerializeToString()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ledgers", type=int, default=16, help="offloaded ledgers of the topic (default 16)")
    ap.add_argument("--ledger-mib", type=int, default=64, help="MiB of entries per ledger (default 64)")
    ap.add_argument("--message-bytes", type=int, default=16 << 10, help="bytes per message (default 16384)")
    ap.add_argument("--batch", type=int, default=1, help="messages per entry (default 1)")
    ap.add_argument("--master", help="the export's --master (default: the command's, local[*])")
    ap.add_argument(
        "--clients", type=int, default=os.cpu_count(), help="the plain client's GETs at a time (default: the CPUs)"
    )
    ap.add_argument("--compression", help="the export's --compression (default: the command's, zstd)")
    ap.add_argument(
        "--no-command", action="store_true", help="leave the command out (GET, reader and session only: quicker)"
    )
    ap.add_argument("--repeat", type=int, default=3, help="runs of each, in turns (default 3)")
    ap.add_argument(
        "--bookies", type=int, default=3, help="bookies of the BookKeeper topic compared with (default 3; 0: none)"
    )
    args = ap.parse_args(argv)

    from bkctl.sandbox.cluster import sandbox_down, sandbox_up

    work = Path(tempfile.mkdtemp(prefix="bench-offload-"))
    try:
        info = sandbox_up(work / "sandbox", bookies=args.bookies, s3=True)
        return run(args, info, work)
    finally:
        try:
            sandbox_down(work / "sandbox")
        except Exception as exc:  # noqa: BLE001
            print(f"sandbox down failed: {exc}", file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)


def tree_cpu(root: int, seen: dict[int, float]) -> None:
    """Record in ``seen`` the CPU seconds so far of ``root`` and every process below it (their own,
    not their children's)."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        cpu[pid] = (int(fields[11]) + int(fields[12])) / TICK
    for pid, seconds in cpu.items():
        p = pid
        while p > 1 and p != root:
            p = parents.get(p, 0)
        if p == root:
            seen[pid] = max(seen.get(pid, 0.0), seconds)


@dataclass
class Layout:
    """What :func:`lay_out` put in the sandbox."""

    data_keys: list[str]
    data_bytes: int
    messages: int
    entries_per_ledger: int
    ledger_info: Any  # ManagedLedgerInfo


def lay_out(args, info: dict, topic: str = TOPIC, ledgers: int | None = None, entries: int | None = None) -> Layout:
    """Upload ``ledgers`` offloaded ledgers of ``topic`` to the sandbox's bucket and write its managed ledger."""
    from kazoo.client import KazooClient

    from bkctl.sandbox.s3 import read_credentials, s3_client
    from bkctl.wire.metadata.layout import MetadataServiceURI
    from bkctl.wire.proto import pulsar_ml_pb2 as ml
    from bkctl.wire.pulsar.managed_ledger import TopicName

    s3 = info["s3"]
    client = s3_client(s3["endpoint"], read_credentials(s3["credentials_file"]))
    bucket = s3["bucket"]
    name = TopicName.parse(topic).managed_ledger
    per_entry = args.message_bytes * args.batch
    count = entries or max(1, (args.ledger_mib << 20) // per_entry)
    info_ml = ml.ManagedLedgerInfo()
    layout = Layout([], 0, 0, count, info_ml)
    for n in range(args.ledgers if ledgers is None else ledgers):
        ledger_id = 1000 + n
        entries = build_entries(count, args.message_bytes, args.batch)
        blocks, index = offloaded_objects(entries, metadata_of(entries, name))
        u = uuid.uuid4()
        key = f"{u}-ledger-{ledger_id}"
        meta = {"role": "data", "ManagedLedgerName": name, "s3managedledgeroffloaderformatversion": "1"}
        up = client.create_multipart_upload(
            Bucket=bucket, Key=key, Metadata=meta, ContentType="application/octet-stream"
        )
        parts = []
        for i, block in enumerate(blocks, 1):
            got = client.upload_part(Bucket=bucket, Key=key, UploadId=up["UploadId"], PartNumber=i, Body=block)
            parts.append({"PartNumber": i, "ETag": got["ETag"]})
        client.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=up["UploadId"], MultipartUpload={"Parts": parts}
        )
        client.put_object(Bucket=bucket, Key=f"{key}-index", Body=index, Metadata=dict(meta, role="index"))
        layout.data_keys.append(key)
        layout.data_bytes += sum(map(len, blocks))
        layout.messages += count * args.batch
        li = info_ml.ledgerInfo.add(ledgerId=ledger_id, entries=count, size=sum(map(len, entries)), timestamp=0)
        ctx = li.offloadContext
        ctx.uidMsb, ctx.uidLsb = struct.unpack(">qq", u.bytes)
        ctx.complete = ctx.bookkeeperDeleted = True
        ctx.timestamp = int(time.time() * 1000)
        ctx.driverMetadata.name = "aws-s3"
        for k, v in (
            ("bucket", bucket),
            ("managedLedgerOffloadDriver", "AWS_S3"),
            ("serviceEndpoint", s3["endpoint"]),
            ("region", s3["region"]),
        ):
            ctx.driverMetadata.properties.add(key=k, value=v)
    parsed = MetadataServiceURI.parse(info["uri"])
    zk = KazooClient(hosts=parsed.hosts, timeout=20)
    zk.start(timeout=20)
    try:
        base = parsed.root.rsplit("/", 1)[0] + "/managed-ledgers"
        zk.create(f"{base}/{name}", info_ml.SerializeToString(), makepath=True)
    finally:
        zk.stop()
        zk.close()
    return layout


def lay_out_bookkeeper(args, info: dict, topic: str, count: int) -> int:
    """``--ledgers`` closed ledgers of ``count`` entries each (the sizes of :func:`lay_out`'s) of
    ``topic`` in BookKeeper, E2 Qw2 Qa2 as Pulsar's broker writes them, and its managed ledger;
    the messages."""
    from bkctl.wire.client.blocking import BlockingBookKeeper
    from bkctl.wire.proto import pulsar_ml_pb2 as ml
    from bkctl.wire.pulsar.managed_ledger import TopicName

    name = TopicName.parse(topic).managed_ledger
    custom = {"application": b"pulsar", "component": b"managed-ledger", "pulsar/managed-ledger": name.encode()}
    info_ml = ml.ManagedLedgerInfo()
    with BlockingBookKeeper(info["uri"], add_timeout=120.0, timeout=3600) as bk:
        for _ in range(args.ledgers):
            entries = build_entries(count, args.message_bytes, args.batch)
            with bk.create(2, 2, 2, digest_type="CRC32C", password=b"", custom_metadata=custom) as lh:
                lh.add_many(entries)
            info_ml.ledgerInfo.add(ledgerId=lh.ledger_id, entries=count, size=sum(map(len, entries)), timestamp=0)
    with raw_zookeeper(info["uri"]) as (zk, root):
        zk.create(f"{root.rsplit('/', 1)[0]}/managed-ledgers/{name}", info_ml.SerializeToString(), makepath=True)
    return count * args.ledgers * args.batch


def run(args, info: dict, work: Path) -> int:
    from bkctl.export.job import ExportOptions, run_export
    from bkctl.export.spark_session import spark_session, stop_spark
    from bkctl.export.topic_source import TopicSource
    from bkctl.sandbox.s3 import read_credentials, s3_client
    from bkctl.wire.domain.topic_plan import TopicSpec
    from bkctl.wire.metadata.zk import ZKMetadataStore
    from bkctl.wire.pulsar.managed_ledger import TopicName
    from bkctl.wire.pulsar.offload_reader import OffloadedLedger
    from bkctl.wire.pulsar.offload_store import OffloadSettings, location_of

    s3 = info["s3"]
    creds = read_credentials(s3["credentials_file"])
    # what the command reads its credentials from: the standard AWS variables (endpoint, bucket and
    # region come from each ledger's offload driver metadata, as a broker reads them)
    aws = {
        "AWS_ACCESS_KEY_ID": creds.access_key,
        "AWS_SECRET_ACCESS_KEY": creds.secret_key,
        "AWS_DEFAULT_REGION": s3["region"],
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    os.environ.update(aws)
    client = s3_client(s3["endpoint"], creds)
    bucket = s3["bucket"]
    layout = lay_out(args, info)
    small = lay_out(args, info, SMALL_TOPIC, ledgers=1, entries=1)
    bk_messages = lay_out_bookkeeper(args, info, BK_TOPIC, layout.entries_per_ledger) if args.bookies else 0
    data_bytes, mib = layout.data_bytes, layout.data_bytes / 2**20
    print(
        f"{args.ledgers} offloaded ledgers, {mib:,.0f} MiB of data objects, {layout.messages:,} messages of "
        f"{args.message_bytes:,} B ({args.batch} an entry); {load_note()}"
    )

    def plain_get() -> tuple[float, float]:
        def one(key: str) -> int:
            body = client.get_object(Bucket=bucket, Key=key)["Body"]
            n = 0
            while chunk := body.read(1 << 20):
                n += len(chunk)
            return n

        cpu = time.process_time()
        t = time.monotonic()
        with ThreadPoolExecutor(args.clients) as pool:
            got = sum(pool.map(one, layout.data_keys))
        assert got == data_bytes
        return time.monotonic() - t, time.process_time() - cpu

    name = TopicName.parse(TOPIC).managed_ledger
    locations = [location_of(li, name) for li in layout.ledger_info.ledgerInfo]

    def reader_alone() -> tuple[float, float]:
        """The export's reader of offloaded ledgers alone (no decoding, no Parquet), as many at a time."""

        def one(location) -> int:
            ledger = OffloadedLedger(location, OffloadSettings())
            return sum(len(data) for batch in ledger.entries(0, layout.entries_per_ledger - 1) for _, data in batch)

        cpu = time.process_time()
        t = time.monotonic()
        with ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(one, locations))
        return time.monotonic() - t, time.process_time() - cpu

    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(REPO), BKCTL_METADATA_URI=info["uri"], **aws)
    extra = (["--master", args.master] if args.master else []) + (
        ["--compression", args.compression] if args.compression else []
    )

    def command(topic: str, messages: int) -> tuple[float, float]:
        """``bkctl export --topic T --out DIR`` as a user runs it: its wall time and the CPU of its
        processes (itself, the JVM, Spark's Python workers: their own CPU, sampled every 0.1 s while
        they live -- Spark kills its workers unreaped, so the kernel's count of reaped children
        misses them)."""
        argv = [str(REPO / ".venv/bin/bkctl"), "--json", "export", "--topic", topic, "--out", str(work / "cli")]
        seen: dict[int, float] = {}
        t = time.monotonic()
        with subprocess.Popen(
            [*argv, "--overwrite", *extra], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as proc:
            reader = ThreadPoolExecutor(1)
            out = reader.submit(proc.communicate)
            while proc.poll() is None:
                tree_cpu(proc.pid, seen)
                time.sleep(0.1)
            stdout, stderr = out.result()
            reader.shutdown()
        seconds = time.monotonic() - t
        if proc.returncode:
            raise SystemExit(f"bkctl export failed ({proc.returncode}): {stderr[-2000:]}")
        assert json.loads(stdout)["messages"] == messages, stdout
        return seconds, sum(seen.values())

    def in_session(spark_master: str, topic: str = TOPIC, messages: int = layout.messages) -> float:
        opts = ExportOptions(
            out=str(work / "out"), master=spark_master, mode="overwrite", compression=args.compression or "zstd"
        )
        with ZKMetadataStore(info["uri"], twins=fastpath.selected()) as store:
            t = time.monotonic()
            summary = run_export(store, info["uri"], TopicSource(TopicSpec(topic, scan_first=False)), opts)
            seconds = time.monotonic() - t
        assert summary.messages == messages, summary
        if topic == TOPIC:
            session_timings.append(summary.timings)
        return seconds

    weed = s3["pid"]
    runs: dict[str, list[float]] = {}
    timings: list[dict] = []
    session_timings: list[dict] = []

    def note(what: str, seconds: float, cpu: float | None = None, weed_cpu: float | None = None) -> None:
        runs.setdefault(what, []).append(seconds)
        if cpu is not None:
            runs.setdefault(what + " cpu", []).append(cpu)
        if weed_cpu is not None:
            runs.setdefault(what + " weed", []).append(weed_cpu)

    spark_master = args.master or f"local[{os.cpu_count()}]"
    spark, created = spark_session(spark_master, quiet=True)
    try:
        for rep in range(args.repeat + 1):  # the first turn warms the server, the caches and Spark's workers up
            for what, fn in (
                ("get", plain_get),
                ("reader", reader_alone),
                ("command", lambda: command(TOPIC, layout.messages)),
                ("fixed", lambda: command(SMALL_TOPIC, small.messages)),
                ("session", lambda: (in_session(spark_master), None)),
                ("bookkeeper", lambda: (in_session(spark_master, BK_TOPIC, bk_messages), None)),
            ):
                if what == "bookkeeper" and not args.bookies:
                    continue
                if args.no_command and what in ("command", "fixed"):
                    continue
                w = cpu_seconds(weed)
                seconds, cpu = fn()
                if rep:
                    note(what, seconds, cpu, cpu_seconds(weed) - w)
            if rep:
                timings.extend(session_timings)
            session_timings.clear()
    finally:
        if created:
            stop_spark(spark)

    def med(key: str) -> float:
        return statistics.median(runs[key])

    def rate(key: str) -> float:
        return mib / med(key)

    get = rate("get")
    print(f"medians of {args.repeat} turns, taken in turns; {load_note()}")
    print(
        f"plain boto3 GET, {args.clients} at a time: {get:8.1f} MiB/s  {med('get'):6.2f} s  "
        f"CPU: client {med('get cpu'):.2f} s + S3 server {med('get weed'):.2f} s"
    )
    print(
        f"the offload reader alone, {args.clients} at a time: {rate('reader'):8.1f} MiB/s  {med('reader'):6.2f} s  "
        f"CPU: reader {med('reader cpu'):.2f} s + S3 server {med('reader weed'):.2f} s  (no decoding, no Parquet)"
    )
    ratios = []
    if "command" in runs:
        fixed = med("fixed")
        net = mib / max(1e-9, med("command") - fixed)
        print(
            f"bkctl export --topic T --out DIR, whole run: {rate('command'):8.1f} MiB/s  {med('command'):6.2f} s  "
            f"CPU: the command's processes {med('command cpu'):.2f} s + S3 server {med('command weed'):.2f} s"
        )
        print(
            f"  its fixed cost (the same command, a topic of one 1-entry ledger): {fixed:.2f} s  "
            f"(CPU {med('fixed cpu'):.2f} s): JVM, Spark and its Python workers start, plan, commit"
        )
        print(f"  net of the fixed cost: {net:8.1f} MiB/s")
        cpu_share = (med("get cpu") + med("get weed")) / max(
            1e-9, med("command cpu") - med("fixed cpu") + med("command weed")
        )
        ratios += [
            f"whole run {rate('command') / get:.2f}",
            f"net of the fixed cost {net / get:.2f}",
            f"CPU-seconds of the GET / of the command net of the fixed cost's {cpu_share:.2f}",
        ]
    print(
        f"run_export in a running Spark session ({spark_master}): {rate('session'):8.1f} MiB/s  "
        f"{med('session'):6.2f} s  (steady state: JVM and Python workers up)"
    )
    print(
        "  its phases (s), median: "
        + ", ".join(f"{k} {statistics.median(t.get(k, 0.0) for t in timings):.2f}" for k in timings[0])
    )
    ratios.append(f"in a running session {rate('session') / get:.2f}")
    print("export / plain GET: " + "; ".join(ratios))
    if args.bookies:
        print(
            f"run_export of the same sizes from BookKeeper ({args.bookies} bookies, E2 Qw2 Qa2), same session: "
            f"{med('bookkeeper'):6.2f} s"
        )
        print(
            f"offloaded / BookKeeper, messages per second (target >= 0.8): "
            f"{(layout.messages / med('session')) / (bk_messages / med('bookkeeper')):.2f}"
        )
    print(load_note())
    return 0


if __name__ == "__main__":
    sys.exit(main())
