"""bench_scale's cluster: N ledgers' metadata written into ZooKeeper as a Java client and Pulsar
write it, fast enough that 10^6 ledgers is a few minutes (a module of its own: the bench's runs
and its fill are two concerns, and the fill is the part that must be fast).

The znodes are created over several ZooKeeper connections (``connections``), each with
``window`` multi transactions of ``per_tx`` creates in flight (kazoo's ``commit_async``): no
round trip is waited for before the next is sent, so ZooKeeper's request pipeline, not the
bench's, sets the pace (the last session's one synchronous multi at a time filled 10^5 in 228 s).

What is planted (the population, chosen so that every command at 10^6 is both meaningful and
affordable on a shared 2-core machine):

* T topics (``acme/ns<k>/persistent/topic-<t>``), each a managed ledger listing its data ledgers,
  the last of which is open, and one cursor with a cursor ledger (open);
* ``--orphans`` Pulsar ledgers no managed ledger lists, and plain (non-Pulsar) ledgers;
* ensembles E3/Qw2/Qa2 drawn from the sandbox's bookies and seven bookies that are gone;
* every closed ledger is **empty** (closed at entry -1: its check is its metadata alone, as
  for the many empty ledgers a real cluster holds), except one in ``1/data_share`` that has
  1000 entries of 100 bytes no bookie holds: a finding for fsck (data_lost where a gone bookie
  is in its ensemble, metadata_only else), a replica with bytes for rebalance and drain to
  move, an unreadable ledger for backup.  So fsck at 10^6 walks every ledger's metadata and
  asks the bookies about 0.5% of them (by default): its memory and its walk are what grows
  with the cluster, and its findings are a fixed share of its output (at 10^6, about 5,000
  lines of ~9 KB) rather than 9 GB of them;
* the first ledger of each topic offloaded (``offloaded_per_topic``) by the filesystem
  offloader to ``offload_root``, complete, its BookKeeper copy kept; no MapFile is written, so
  ``pulsar offload verify`` finds each missing (a stat a ledger): the walk of every managed
  ledger and the verifier's memory are measured, not the reading of offloaded bytes
  (bench/bench_offload.py measures that);
* ``marks`` under-replicated marks.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice

from common import load_note

from bkctl.wire import fastpath

GONE = [f"127.0.0.2:{3181 + i}" for i in range(7)]  # bookies that are not there any more
DAY_MS = 86_400_000


@dataclass
class Population:
    ledgers: int
    topics: int
    ledgers_per_topic: int = 10
    namespaces: int = 10
    orphans: int | None = None
    marks: int = 2000
    #: the share of closed ledgers that have entries (no bookie holds them): fsck's findings
    data_share: float = 0.005
    #: data ledgers of each topic offloaded (the first ones) by the filesystem offloader
    offloaded_per_topic: int = 1
    offload_root: str = "/nonexistent"


def create_all(
    hosts: str, items: Iterable[tuple[str, bytes]], *, connections: int = 4, per_tx: int = 500, window: int = 4
) -> int:
    """Create every ``(path, value)`` of ``items`` (parents must exist), ``connections`` kazoo
    sessions with ``window`` multis of ``per_tx`` creates in flight each; any failed create
    ends the bench naming its multi's first path.  Returns how many were created."""
    from kazoo.client import KazooClient

    source = iter(items)
    lock = threading.Lock()
    created = [0]
    failures: list[str] = []

    def next_chunk() -> list[tuple[str, bytes]]:
        with lock:
            return list(islice(source, per_tx))

    def settle(first: str, result) -> None:
        try:
            got = result.get(timeout=300)
        except Exception as exc:  # noqa: BLE001 - reported below, ends the bench
            failures.append(f"{first}: {exc!r}")
            return
        bad = [r for r in got if isinstance(r, Exception)]
        if bad:
            failures.append(f"{first}: {bad[0]!r}")
        with lock:
            created[0] += len(got) - len(bad)

    def worker() -> None:
        zk = KazooClient(hosts=hosts, timeout=60)
        zk.start()
        pending: deque = deque()
        try:
            while not failures:
                chunk = next_chunk()
                if not chunk:
                    break
                tx = zk.transaction()
                for path, value in chunk:
                    tx.create(path, value)
                pending.append((chunk[0][0], tx.commit_async()))
                while len(pending) >= window:
                    settle(*pending.popleft())
            while pending:
                settle(*pending.popleft())
        finally:
            zk.stop()
            zk.close()

    threads = [threading.Thread(target=worker, name=f"fill-{i}") for i in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise SystemExit(f"filling failed at {failures[0]}")
    return created[0]


def fill(uri: str, zk_hosts: str, bookies: list[str], pop: Population) -> None:
    from kazoo.client import KazooClient

    from bkctl.wire.metadata import paths as P
    from bkctl.wire.metadata.ledger import LedgerMetadata, serialize_ledger_metadata
    from bkctl.wire.proto import pulsar_ml_pb2 as ml

    rnd = random.Random(57)
    pool = bookies + GONE
    now = int(time.time() * 1000)
    data_ledgers = min(pop.topics * pop.ledgers_per_topic, pop.ledgers)
    topics = min(pop.topics, data_ledgers)
    orphans = pop.orphans if pop.orphans is not None else pop.ledgers // 50
    cursor_first = data_ledgers + 1
    orphan_first = cursor_first + topics
    plain_first = orphan_first + orphans
    stride = max(1, round(1 / pop.data_share)) if pop.data_share > 0 else 0

    def topic_name(t: int) -> str:
        return f"acme/ns{t % pop.namespaces}/persistent/topic-{t}"

    def value(ledger_id: int) -> bytes:
        custom = None
        closed = True
        if ledger_id < cursor_first:
            t = (ledger_id - 1) % topics
            custom = {
                "application": b"pulsar",
                "component": b"managed-ledger",
                "pulsar/managed-ledger": topic_name(t).encode(),
            }
            closed = ledger_id <= data_ledgers - topics  # the last of each topic is open
        elif ledger_id < orphan_first:
            t = ledger_id - cursor_first
            custom = {
                "application": b"pulsar",
                "component": b"managed-ledger",
                "pulsar/managed-ledger": topic_name(t).encode(),
                "pulsar/cursor": b"sub",
            }
            closed = False
        elif ledger_id < plain_first:
            custom = {
                "application": b"pulsar",
                "component": b"managed-ledger",
                "pulsar/managed-ledger": topic_name(ledger_id % topics).encode(),
            }
        # Pulsar's ledgers carry their creation time; a plain Java client stores none by
        # default (storeSystemtimeAsLedgerCreationTime=false): its readers see the znode's
        ctime = now - 30 * DAY_MS + ledger_id if custom is not None else None
        md = LedgerMetadata.new(rnd.sample(pool, 3), 2, 2, password=b"", ctime=ctime, custom_metadata=custom)
        if not closed:
            return serialize_ledger_metadata(md)
        if stride and ledger_id % stride == 0:
            return serialize_ledger_metadata(md.closed(999, 100_000))
        return serialize_ledger_metadata(md.closed(-1, 0))

    t0 = time.monotonic()
    zk = KazooClient(hosts=zk_hosts, timeout=60)
    zk.start()
    try:
        # one leaf znode holds 10,000 ledgers
        parents = sorted(
            {p for block in range(pop.ledgers // 10_000 + 1) for p in P.ledger_parent_paths(max(1, block * 10_000))}
        )
        for parent in parents:
            zk.ensure_path(parent)
        base = P.managed_ledgers_base("/ledgers")
        for ns in range(min(pop.namespaces, topics)):
            zk.ensure_path(P.managed_ledger_path(base, f"acme/ns{ns}/persistent"))
    finally:
        zk.stop()
        zk.close()

    def ledgers() -> Iterator[tuple[str, bytes]]:
        for ledger_id in range(1, pop.ledgers + 1):
            if ledger_id % 100_000 == 0:
                print(f"  {ledger_id:,} ledgers in {time.monotonic() - t0:.0f}s", flush=True)
            yield P.ledger_path(ledger_id), value(ledger_id)

    made = create_all(zk_hosts, ledgers())
    rate = made / (time.monotonic() - t0)

    def offload(info, ledger_id: int) -> None:
        ctx = info.offloadContext
        ctx.uidMsb, ctx.uidLsb = ledger_id, -ledger_id
        ctx.complete = True
        ctx.bookkeeperDeleted = False
        ctx.timestamp = now - DAY_MS
        ctx.driverMetadata.name = "filesystem"
        ctx.driverMetadata.properties.add(key="storageBasePath", value=pop.offload_root)
        ctx.driverMetadata.properties.add(key="managedLedgerOffloadDriver", value="filesystem")

    def managed_ledgers() -> Iterator[tuple[str, bytes]]:
        for t in range(topics):
            info = ml.ManagedLedgerInfo()
            listed = range(t + 1, data_ledgers + 1, topics)  # ledger_id - 1 == t (mod topics)
            for n, ledger_id in enumerate(listed):
                li = info.ledgerInfo.add(ledgerId=ledger_id, entries=1000, size=100_000, timestamp=now - DAY_MS)
                if n < pop.offloaded_per_topic and n < len(listed) - 1:  # never the open one
                    offload(li, ledger_id)
            path = P.managed_ledger_path(base, topic_name(t))
            yield path, info.SerializeToString()
            cursor = ml.ManagedCursorInfo(
                cursorsLedgerId=cursor_first + t, markDeleteLedgerId=listed[0], markDeleteEntryId=10
            )
            yield f"{path}/sub", cursor.SerializeToString()

    create_all(zk_hosts, managed_ledgers(), per_tx=500)  # a managed ledger before its cursor: one multi
    from bkctl.wire.metadata.zk import ZKMetadataStore

    with ZKMetadataStore(uri, timeout=60, twins=fastpath.selected()) as store:
        for n in range(1, min(pop.marks, pop.ledgers) + 1):
            store.underreplication.mark(n * max(1, pop.ledgers // max(pop.marks, 1)), [GONE[0]])
    print(
        f"filled {pop.ledgers:,} ledgers ({rate:,.0f} creates/s; {topics:,} topics, {orphans:,} orphans, "
        f"{pop.marks:,} marks, 1 in {stride or 'none'} closed ledgers with entries) in "
        f"{time.monotonic() - t0:.0f}s; {load_note()}",
        flush=True,
    )
