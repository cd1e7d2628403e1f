"""Benchmark reading offloaded ledgers: ``bkctl export --topic`` against a plain S3 client.

    .venv/bin/python bench/bench_offload.py                     # 8 ledgers of 32 MiB
    .venv/bin/python bench/bench_offload.py --ledgers 4 --ledger-mib 16 --repeat 1

Starts a sandbox with its S3 server (``sandbox up --s3 --bookies 0``: ZooKeeper and SeaweedFS)
in a temporary folder and lays out a Pulsar topic whose ledgers were all offloaded and deleted
from BookKeeper, as a broker leaves them: each ledger's data object (64 MiB blocks: a 128-byte
header, entries as length + entry id + bytes, padding; uploaded as one part per block) and its
index object (version 1, with the ledger's metadata), written by this script from the layout in
tests/vectors/offload/FACTS.md (the tests check the reader against Pulsar's own bytes), and the
managed ledger whose offload contexts name the sandbox's bucket and endpoint.  The entries are
Pulsar entries as the real client makes them (tests/support/pulsar_entries.py): messages of
``--message-bytes`` (16 KiB), ``--batch`` (1) to an entry, incompressible.

Then, in turns (``--repeat``), after one turn that warms Spark's workers up:

* a plain boto3 client GETs every data object whole, ``--clients`` (the Spark master's cores) at
  a time, each body read to the end: the store's rate on this machine;
* ``run_export`` of the topic (``--master``, default ``local[2]``; Parquet ``--compression``,
  default zstd as ``bkctl export``): tasks that GET the blocks themselves, decode every message
  and write it.

It prints the MiB/s of each (medians; the export's over the data objects' bytes), the export's
rate as a share of the plain client's (target: at least 0.8), and the load average beside them.
It asserts nothing.  Everything it starts is stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import load_note  # noqa: E402

TOPIC = "persistent://public/default/bench-offload"
BLOCK = 64 << 20  # the broker's default s3ManagedLedgerOffloadMaxBlockSizeInBytes
PADDING = bytes.fromhex("FEDCDEAD")


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
    ap.add_argument("--ledgers", type=int, default=8, help="offloaded ledgers of the topic (default 8)")
    ap.add_argument("--ledger-mib", type=int, default=32, help="MiB of entries per ledger (default 32)")
    ap.add_argument("--message-bytes", type=int, default=16 << 10, help="bytes per message (default 16384)")
    ap.add_argument("--batch", type=int, default=1, help="messages per entry (default 1)")
    ap.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    ap.add_argument("--clients", type=int, default=2, help="the plain client's GETs at a time (default 2)")
    ap.add_argument("--compression", default="zstd", help="the export's Parquet codec (default zstd)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each, in turns (default 3)")
    args = ap.parse_args(argv)

    from bkctl.sandbox.cluster import sandbox_down, sandbox_up

    work = Path(tempfile.mkdtemp(prefix="bench-offload-"))
    try:
        info = sandbox_up(work / "sandbox", bookies=0, s3=True)
        return run(args, info, work)
    finally:
        try:
            sandbox_down(work / "sandbox")
        except Exception as exc:  # noqa: BLE001
            print(f"sandbox down failed: {exc}", file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)


def run(args, info: dict, work: Path) -> int:
    from kazoo.client import KazooClient

    from bkctl.export.job import ExportOptions, run_export
    from bkctl.export.spark_session import spark_session, stop_spark
    from bkctl.export.topic_planning import TopicSpec
    from bkctl.export.topic_source import TopicSource
    from bkctl.sandbox.s3 import read_credentials, s3_client
    from bkctl.wire.metadata.layout import MetadataServiceURI
    from bkctl.wire.metadata.zk import ZKMetadataStore
    from bkctl.wire.proto import pulsar_ml_pb2 as ml
    from bkctl.wire.pulsar.managed_ledger import TopicName
    from bkctl.wire.pulsar.offload_store import OffloadSettings

    s3 = info["s3"]
    creds = read_credentials(s3["credentials_file"])
    os.environ.update(
        AWS_ACCESS_KEY_ID=creds.access_key, AWS_SECRET_ACCESS_KEY=creds.secret_key, AWS_DEFAULT_REGION=s3["region"]
    )
    client = s3_client(s3["endpoint"], creds)
    bucket = s3["bucket"]
    name = TopicName.parse(TOPIC).managed_ledger
    per_entry = args.message_bytes * args.batch
    count = max(1, (args.ledger_mib << 20) // per_entry)
    info_ml = ml.ManagedLedgerInfo()
    data_keys, data_bytes, messages = [], 0, 0
    for n in range(args.ledgers):
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
        data_keys.append(key)
        data_bytes += sum(map(len, blocks))
        messages += count * args.batch
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
    print(
        f"{args.ledgers} offloaded ledgers, {data_bytes / 2**20:,.0f} MiB of data objects, {messages:,} messages of "
        f"{args.message_bytes:,} B ({args.batch} an entry); {load_note()}"
    )

    def plain_get() -> float:
        def one(key: str) -> int:
            body = client.get_object(Bucket=bucket, Key=key)["Body"]
            n = 0
            while chunk := body.read(1 << 20):
                n += len(chunk)
            return n

        t = time.monotonic()
        with ThreadPoolExecutor(args.clients) as pool:
            got = sum(pool.map(one, data_keys))
        assert got == data_bytes
        return time.monotonic() - t

    from bkctl.wire.pulsar.offload_reader import OffloadedLedger
    from bkctl.wire.pulsar.offload_store import location_of

    locations = [location_of(li, name) for li in info_ml.ledgerInfo]

    def reader_alone() -> float:
        """The export's reader of offloaded ledgers alone (no decoding, no Parquet), as many at a time."""

        def one(location) -> int:
            ledger = OffloadedLedger(location, OffloadSettings())
            return sum(len(data) for batch in ledger.entries(0, count - 1) for _, data in batch)

        t = time.monotonic()
        with ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(one, locations))
        return time.monotonic() - t

    spark, created = spark_session(args.master, quiet=True)
    runs: dict[str, list[float]] = {"get": [], "export": [], "reader": []}
    timings: list[dict] = []
    try:
        for rep in range(args.repeat + 1):  # the first turn warms Spark's workers and the server up
            seconds = plain_get()
            if rep:
                runs["get"].append(seconds)
            seconds = reader_alone()
            if rep:
                runs["reader"].append(seconds)
            opts = ExportOptions(
                out=str(work / "out"), master=args.master, mode="overwrite", compression=args.compression
            )
            with ZKMetadataStore(info["uri"]) as store:
                t = time.monotonic()
                summary = run_export(store, info["uri"], TopicSource(TopicSpec(TOPIC, scan_first=False)), opts)
                seconds = time.monotonic() - t
            assert summary["messages"] == messages, summary
            if rep:
                runs["export"].append(seconds)
                timings.append(summary["timings"])
    finally:
        if created:
            stop_spark(spark)
    get_rate = data_bytes / 2**20 / statistics.median(runs["get"])
    export_rate = data_bytes / 2**20 / statistics.median(runs["export"])
    reader_rate = data_bytes / 2**20 / statistics.median(runs["reader"])
    print(f"plain boto3 GET, {args.clients} at a time          {get_rate:8.1f} MiB/s  (median of {args.repeat})")
    print(f"the offload reader alone, {args.clients} at a time    {reader_rate:8.1f} MiB/s  (no decoding, no Parquet)")
    print(
        f"bkctl export --topic, {args.master}, {args.compression:5}  {export_rate:8.1f} MiB/s  (median of {args.repeat})"
    )
    print(
        "the export's phases (s), median: "
        + ", ".join(f"{k} {statistics.median(t.get(k, 0.0) for t in timings):.2f}" for k in timings[0])
    )
    print(f"export / plain GET: {export_rate / get_rate:.2f} (target >= 0.8); {load_note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
