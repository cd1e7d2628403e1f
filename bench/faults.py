"""The standing fault harness: rounds of writes under random faults, then every acknowledged entry checked.

Starts its own sandbox -- a real ZooKeeper and four real bookieds -- and runs
``--rounds`` rounds.  In each round two writers pipeline adds into E3/Qw3/Qa2
ledgers (a writer whose ledger fails opens another), a reader tails the first
writer's ledger (reading up to the LAC as it moves and comparing every entry),
and one or two faults drawn at random hit the cluster:

``kill``        SIGKILL a bookie, restart it on its directories
``stop``        SIGSTOP a bookie for a while, then SIGCONT
``zk-restart``  stop ZooKeeper (SIGTERM) and start it again on its data
``zk-expire``   SIGSTOP ZooKeeper past the bookies' session timeout, then SIGCONT
``disk-full``   fill a bookie's filesystem past diskUsageThreshold, then free it
``slow-disk``   a competing writer fsyncs 1 MiB blocks on the disk under a bookie's filesystem

With ``--everything`` (or its parts ``--compaction``, ``--autorecovery``,
``--delete-during``) the rounds also meet what a production bookie does at the
same time: compaction running continuously (64 KiB entry logs, a GC pass a
second, thresholds that make most logs candidates), the previous round's ledgers
deleted while this round writes (as retention does), every bookie running its
autorecovery daemon with ``lostBookieRecoveryDelay`` 0, and one more fault:

``kill-compacting``  watch the bookies' GC state over their HTTP admin and SIGKILL
                     one while it is in a compaction pass

Every kill is counted as during compaction (the victim's GC state was a
compaction pass) and as during repair (some bookie's auditor had ledgers marked
under-replicated). After each round every acknowledged entry is also read from
every bookie its write set names, straight from that bookie (no failover), and
compared byte for byte; a copy missing there while the ledger is marked
under-replicated is read again once the repair is done (up to 45 s), and each
copy is counted ``ok``, ``repaired`` (missing, there after the repair),
``missing-marked`` (repair still pending), ``missing-found-by-ledger-check``
(the entry had its ack quorum while the write to that bookie failed - killed,
stopped, read-only - and the writer replaced the bookie from LAC + 1 on or
closed the ledger: Java's client leaves the same copies, its addOpUr counter,
and the auditor's periodic ledger check, run here on the spot, finds them) or
``missing-unmarked`` (nothing marks or finds it: a finding); the bookies' own counters (compaction passes, entries
moved, ledgers and entries re-replicated) are summed over the run.
``--set KEY=VALUE`` passes any bk_server.conf key to the bookies (checked by
bookied's schema, as ``bkctl sandbox up --set``).

When the harness runs as root (as CI does) every bookie's journal and ledger
directories sit on a small ext4 image of their own, loop-mounted from a file
on the real disk (so ``disk-full`` fills a real filesystem and ``slow-disk``
slows real fsyncs); otherwise those two faults are left out, and said so.

After each round a fresh client recovers (fences and closes) every ledger of
the round and reads it back: every acknowledged entry must be there, byte for
byte.  The ledgers are then deleted (the bookies' garbage collection frees
their space).  The report gives rounds, faults of each kind, entries checked,
tail reads, time and the load average; any loss is printed with the seed that
replays the run, and the exit status is 1 (2 when the harness itself failed: the rounds
run until then are reported).

    python bench/faults.py [--rounds 100] [--seed N] [--everything] [--set KEY=VALUE] [--json]

``--movers`` runs the movers' campaign instead (``bench/faults_movers.py``: rebalance, drain,
backup/restore and fsck's fixes run as ``bkctl`` commands under faults; its own options):

    python bench/faults.py --movers [--rounds 20] [--seed N] [--ops ...] [--faults ...] [--keep]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from twisted.internet import defer, task  # noqa: E402

from bkctl.sandbox.zookeeper import ZooKeeperServer, free_port  # noqa: E402
from bkctl.wire import fastpath  # noqa: E402
from bkctl.wire.client.blocking import BlockingBookKeeper  # noqa: E402
from bkctl.wire.metadata.zk import ZKMetadataStore  # noqa: E402
from tests.support import smallfs  # noqa: E402
from tests.support.bookieproc import BookieProcess  # noqa: E402

FAULTS = ("kill", "stop", "zk-restart", "zk-expire", "disk-full", "slow-disk")
DISK_FAULTS = ("disk-full", "slow-disk")
PASSWORD = b"faults"
BOOKIES = 4
FS_MB = 768
ENTRY_SIZES = (64, 1024, 4096)
ZK_SESSION_MS = 4000
#: Each writer adds WINDOW entries at a time, then pauses PAUSE s: a few hundred adds/s per round.
WINDOW = 8
PAUSE = 0.03
BOOKIE_SETTINGS = dict(
    zkTimeout=ZK_SESSION_MS,
    flushInterval=1000,
    diskCheckInterval=1000,
    gcWaitTime=3000,
    journalPreAllocSizeMB=1,
    journalMaxSizeMB=8,
    dbStorage_writeCacheMaxSizeMb=8,
    diskUsageThreshold=0.9,
    diskUsageWarnThreshold=0.9,
    diskUsageLwmThreshold=0.8,
    minUsableSizeForEntryLogCreation=2 * 1024 * 1024,
    minUsableSizeForHighPriorityWrites=2 * 1024 * 1024,
    shutdownTimeoutMs=3000,
)
#: compaction inside every round: small logs, a GC pass a second, most logs candidates, and each
#: log's copy paced (250 entries/s) so that a pass lasts long enough for kill-compacting to find one
#: (with the index keeping runs of entries a pass of 64 KiB logs ended between two looks)
COMPACTION_SETTINGS = dict(
    logSizeLimit=64 * 1024,
    gcWaitTime=1000,
    minorCompactionInterval=1,
    majorCompactionInterval=2,
    minorCompactionThreshold=0.6,
    majorCompactionThreshold=0.95,
    compactionRateByEntries=250,
)
AUTORECOVERY_SETTINGS = dict(autoRecoveryDaemonEnabled="true", lostBookieRecoveryDelay=0)
COMPACTING_STATES = ("minor compacting", "major compacting", "nearly empty compacting")  # bookied.garbage_collector
#: the ledgers' ack quorum (E3/Qw3/Qa2): every acknowledged entry must be readable on this many bookies
ACK_QUORUM = 2
CLIENT_OPTIONS = dict(add_timeout=3.0, read_timeout=3.0, timeout=90)


def payload(seed: int, ledger_id: int, entry_id: int) -> bytes:
    """The bytes of an entry, derived from (seed, ledger, entry): the check needs no copy."""
    head = hashlib.sha256(b"%d/%d/%d" % (seed, ledger_id, entry_id)).digest()
    size = ENTRY_SIZES[head[0] % len(ENTRY_SIZES)]
    return (head * (size // len(head) + 1))[:size]


class Cluster:
    """ZooKeeper and the bookies, each bookie on a filesystem of its own when root."""

    def __init__(self, base: Path, use_mounts: bool, settings: dict | None = None):
        self.base = base
        self.settings = {**BOOKIE_SETTINGS, **(settings or {})}
        self.counters = BookieCounters()
        self.use_mounts = use_mounts
        self.zk = ZooKeeperServer(base / "zk", port=free_port(), start_timeout=180)  # a JVM on a loaded machine
        self.uri = ""
        self.bookies: list[BookieProcess] = []
        self.mounts: list[Path] = []
        self.kills: list[dict] = []  # each kill: {"compacting": bool, "repair": bool}
        #: this round deletes the previous round's ledgers: their entry logs become compaction
        #: candidates once a GC pass sees them gone (kill-compacting watches longer for a pass then)
        self.deleting = False
        self.failed_starts = 0  # restarts that failed (retried by wait_healthy)

    def start(self) -> None:
        self.zk.start()
        self.uri = f"zk+hierarchical://{self.zk.connect_string}/ledgers"
        with ZKMetadataStore(self.uri, timeout=30, twins=fastpath.selected()) as store:
            store.cluster.init()
        for i in range(BOOKIES):
            fs = self.base / f"fs{i}"
            if self.use_mounts:
                smallfs.mount_ext4_image(fs, self.base / f"fs{i}.img", FS_MB)
                self.mounts.append(fs)
            else:
                fs.mkdir(parents=True)
            b = BookieProcess(
                self.base / f"bookie{i}",
                self.uri,
                journalDirectories=fs / "journal",
                ledgerDirectories=fs / "ledgers",
                **self.settings,
            )
            b.serve_http()
            b.fs = fs
            self.bookies.append(b)
        for b in self.bookies:
            b.start()
        self.wait_healthy(60)

    def writable(self) -> set[str]:
        with ZKMetadataStore(self.uri, timeout=10, twins=fastpath.selected()) as store:
            return set(store.registration.writable_bookies())

    def wait_healthy(self, timeout: float) -> bool:
        """Every bookie running and registered writable."""
        deadline = time.monotonic() + timeout
        want = {b.bookie_id for b in self.bookies}
        while time.monotonic() < deadline:
            for b in self.bookies:  # a bookie that died by itself (or failed to restart) is restarted
                if b.proc is None or b.proc.poll() is not None:
                    try:
                        b.start()
                    except RuntimeError:  # exited at once (ZooKeeper away) or slow to listen: killed, retried
                        self.failed_starts += 1
            try:
                if want <= self.writable():
                    return True
            except Exception:  # noqa: BLE001 - ZooKeeper coming back
                pass
            time.sleep(0.2)
        return False

    def stop(self) -> None:
        for b in self.bookies:
            if b.proc is not None and b.proc.poll() is None:
                os.kill(b.proc.pid, signal.SIGCONT)
                b.stop()
        if self.zk.pid is not None:
            try:
                os.kill(self.zk.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.zk.stop()
        for fs in self.mounts:
            smallfs.unmount(fs)


# -- what the bookies say they did -------------------------------------------------------------
#: (where, key): the bookies' own counters summed over the run; they restart at 0 with their bookie
COUNTERS = {
    "compactions_minor": ("gc", "minorCompactionCounter"),
    "compactions_major": ("gc", "majorCompactionCounter"),
    "compaction_entries_moved": ("gc", "entriesMoved"),
    "gc_runs": ("gc", "gcRuns"),
    "repair_ledgers_marked": ("metrics", "autorecovery_ledgers_marked_total"),
    "repair_ledgers_replicated": ("metrics", "autorecovery_num_full_or_partial_ledgers_replicated_total"),
    "repair_entries_copied": ("metrics", "autorecovery_num_entries_written_total"),
}


class BookieCounters:
    """Sums each bookie's counters across its restarts: sampled before every kill and after every round."""

    def __init__(self):
        self.last: dict[tuple[str, str], float] = {}
        self.total: Counter = Counter()
        self.lock = threading.Lock()

    def sample(self, b: BookieProcess) -> None:
        try:
            gc = b.admin("/api/v1/bookie/gc")
            metrics = b.metrics()
        except Exception:  # noqa: BLE001 - a bookie down or stopped: sampled next time
            return
        with self.lock:
            for name, (where, key) in COUNTERS.items():
                value = float((gc if where == "gc" else metrics).get(key) or 0)
                before = self.last.get((b.bookie_id, name), 0.0)
                self.total[name] += value - before if value >= before else value  # lower: it restarted
                self.last[(b.bookie_id, name)] = value

    def sample_all(self, bookies) -> None:
        for b in bookies:
            if b.proc is not None and b.proc.poll() is None:
                self.sample(b)


def gc_state(b: BookieProcess) -> str:
    try:
        return b.admin("/api/v1/bookie/gc").get("state", "")
    except Exception:  # noqa: BLE001 - down, stopped or busy
        return ""


def repair_pending(cluster: Cluster) -> bool:
    """Some bookie's auditor has ledgers marked under-replicated: repair is due or under way."""
    for b in cluster.bookies:
        try:
            if b.metrics().get("autorecovery_num_under_replicated_ledgers", 0) > 0:
                return True
        except Exception:  # noqa: BLE001
            continue
    return False


# -- faults --------------------------------------------------------------------------------
def kill_bookie(
    cluster: Cluster,
    b: BookieProcess,
    rng: random.Random,
    compacting: bool | None = None,
    during_repair: bool | None = None,
) -> str:
    """SIGKILL ``b`` (its counters sampled first), noting whether it was compacting (its GC state read
    just before the kill) and whether repair was pending."""
    if during_repair is None:
        cluster.counters.sample(b)
        during_repair = repair_pending(cluster)
    if compacting is None:
        compacting = gc_state(b) in COMPACTING_STATES
    b.kill(signal.SIGKILL)
    cluster.kills.append({"compacting": compacting, "repair": during_repair})
    time.sleep(rng.uniform(0.2, 1.5))
    try:
        b.start(timeout=60)
    except RuntimeError:  # ZooKeeper away at its start, or too slow under load: wait_healthy retries
        cluster.failed_starts += 1
    return b.bookie_id


def fault_kill(cluster: Cluster, rng: random.Random) -> str:
    return kill_bookie(cluster, rng.choice(cluster.bookies), rng)


def fault_kill_compacting(cluster: Cluster, rng: random.Random) -> str:
    """Kill the first bookie seen in a compaction pass (watched over HTTP; then any bookie).
    The counters and the repair state are read before the watch: a pass of 64 KiB logs is short.

    A pass comes once a GC pass has seen the previous round's ledgers deleted; on a loaded
    machine (the suite's six workers on two cores) that took more than 20 s once, and the round
    killed a bookie that was not compacting: while this round deletes, the watch lasts up to 60 s
    (it ends at the first pass, so only a round without one pays it); else 20 s, a compaction then
    coming only from what repair left behind."""
    cluster.counters.sample_all(cluster.bookies)
    during_repair = repair_pending(cluster)
    deadline = time.monotonic() + (60 if cluster.deleting else 20)
    while time.monotonic() < deadline:
        order = list(cluster.bookies)
        rng.shuffle(order)
        for b in order:
            if b.proc is not None and b.proc.poll() is None and gc_state(b) in COMPACTING_STATES:
                return kill_bookie(cluster, b, rng, compacting=True, during_repair=during_repair)
        time.sleep(0.02)
    return kill_bookie(cluster, rng.choice(cluster.bookies), rng, compacting=False, during_repair=during_repair)


def fault_stop(cluster: Cluster, rng: random.Random) -> str:
    b = rng.choice(cluster.bookies)
    pause = rng.uniform(0.5, 3.0)
    try:
        os.kill(b.proc.pid, signal.SIGSTOP)
        time.sleep(pause)
        os.kill(b.proc.pid, signal.SIGCONT)
    except ProcessLookupError:  # it had ended by itself (wait_healthy starts it again)
        pass
    return b.bookie_id


def fault_zk_restart(cluster: Cluster, rng: random.Random) -> str:
    cluster.zk.stop()
    time.sleep(rng.uniform(0.2, 2.0))
    cluster.zk.start()
    return "zookeeper"


def fault_zk_expire(cluster: Cluster, rng: random.Random) -> str:
    pid = cluster.zk.pid
    os.kill(pid, signal.SIGSTOP)
    time.sleep(ZK_SESSION_MS / 1000.0 * 1.5 + rng.uniform(0, 1.0))
    os.kill(pid, signal.SIGCONT)
    return "zookeeper"


def fault_disk_full(cluster: Cluster, rng: random.Random) -> str:
    b = rng.choice(cluster.bookies)
    filler = smallfs.fill(b.fs, "filler", leave_bytes=rng.randint(256 * 1024, 3 * 1024 * 1024))
    time.sleep(rng.uniform(1.0, 3.0))
    filler.unlink()
    return b.bookie_id


def fault_slow_disk(cluster: Cluster, rng: random.Random) -> str:
    b = rng.choice(cluster.bookies)
    hog = cluster.base / "slow-disk.hog"  # on the real disk, beside the bookies' images
    deadline = time.monotonic() + rng.uniform(1.0, 3.0)
    block = os.urandom(1024 * 1024)
    fd = os.open(hog, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while time.monotonic() < deadline:
            os.write(fd, block)
            os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(hog)
    return b.bookie_id


FAULT_FUNCS = {
    "kill": fault_kill,
    "stop": fault_stop,
    "zk-restart": fault_zk_restart,
    "zk-expire": fault_zk_expire,
    "disk-full": fault_disk_full,
    "slow-disk": fault_slow_disk,
    "kill-compacting": fault_kill_compacting,
}


# -- load ----------------------------------------------------------------------------------
class Round:
    def __init__(self, seed: int):
        self.seed = seed
        self.stop = threading.Event()
        self.acked: dict[int, set[int]] = {}  # ledger -> acknowledged entry ids
        self.order_errors: list[str] = []
        self.tail_checked = 0
        self.tail_errors: list[str] = []
        self.first_ledger = threading.Event()
        self.ledgers_of_writer0: list[int] = []
        self.deleted = 0
        self.replica_notes: list[str] = []  # named replicas still missing an acknowledged entry, and why
        self.replica_entries = 0  # acknowledged entries whose replicas were all read


def writer_scenario(rnd: Round, window: int, record_first: bool):
    def scenario(client):
        async def go():
            while not rnd.stop.is_set():
                try:
                    lh = await client.create_ledger(3, 3, ACK_QUORUM, password=PASSWORD)
                except Exception:  # noqa: BLE001 - not enough bookies or ZooKeeper away: try again
                    await task.deferLater(client.reactor, 0.3, lambda: None)
                    continue
                acked = rnd.acked.setdefault(lh.ledger_id, set())
                if record_first:
                    rnd.ledgers_of_writer0.append(lh.ledger_id)
                    rnd.first_ledger.set()
                next_id = 0
                failed = False
                while not rnd.stop.is_set() and not failed:
                    batch = []
                    for _ in range(window):
                        expected = next_id
                        next_id += 1
                        d = lh.add_entry(payload(rnd.seed, lh.ledger_id, expected))
                        batch.append((expected, d))
                    results = await defer.DeferredList([d for _, d in batch], consumeErrors=True)
                    await task.deferLater(client.reactor, PAUSE, lambda: None)  # a steady, modest load
                    for (expected, _), (ok, value) in zip(batch, results):
                        if ok:
                            if value != expected:
                                rnd.order_errors.append(f"ledger {lh.ledger_id}: add {expected} got id {value}")
                            acked.add(value)
                        else:
                            failed = True
                try:
                    await lh.close()
                except Exception:  # noqa: BLE001 - the verification recovers it
                    pass

        return defer.ensureDeferred(go())

    return scenario


def writer_thread(uri: str, rnd: Round, window: int, record_first: bool, errors: list) -> None:
    try:
        bk = BlockingBookKeeper(uri, **CLIENT_OPTIONS)
    except Exception as e:  # noqa: BLE001
        errors.append(f"writer could not connect: {e}")
        return
    try:
        bk.run(writer_scenario(rnd, window, record_first))
    except Exception as e:  # noqa: BLE001 - counted, the round goes on
        errors.append(f"writer: {type(e).__name__}: {e}")
    finally:
        try:
            bk.close()
        except Exception:  # noqa: BLE001
            pass


def reader_thread(uri: str, rnd: Round) -> None:
    """Tail writer 0's ledgers: read up to the LAC as it moves, compare every entry."""
    if not rnd.first_ledger.wait(30):
        return
    try:
        bk = BlockingBookKeeper(uri, **CLIENT_OPTIONS)
    except Exception:  # noqa: BLE001
        return
    done: dict[int, int] = {}
    try:
        while not rnd.stop.is_set():
            ledger_id = rnd.ledgers_of_writer0[-1]
            try:
                h = bk.open(ledger_id, PASSWORD)
                lac = h.read_lac()
                first = done.get(ledger_id, -1) + 1
                if lac >= first:
                    for entry_id, data in h.read(first, lac):
                        if data != payload(rnd.seed, ledger_id, entry_id):
                            rnd.tail_errors.append(f"ledger {ledger_id} entry {entry_id}: tail read differs")
                        rnd.tail_checked += 1
                    done[ledger_id] = lac
            except Exception:  # noqa: BLE001 - faults make reads fail for a while
                pass
            time.sleep(0.1)
    finally:
        try:
            bk.close()
        except Exception:  # noqa: BLE001
            pass


def deleter_thread(uri: str, rnd: Round, ledgers: list[int], errors: list) -> None:
    """Delete ``ledgers`` (the previous round's, verified) one by one while this round writes."""
    if not ledgers:
        return
    try:
        bk = BlockingBookKeeper(uri, **CLIENT_OPTIONS)
    except Exception as e:  # noqa: BLE001
        errors.append(f"deleter could not connect: {e}")
        return
    try:
        pending = list(ledgers)
        while pending and not rnd.stop.wait(0.1):
            try:
                bk.delete(pending[0])
                pending.pop(0)
                rnd.deleted += 1
            except Exception:  # noqa: BLE001 - ZooKeeper away: try again
                time.sleep(0.3)
        for ledger_id in pending:  # what the round left: deleted after it
            try:
                bk.delete(ledger_id)
                rnd.deleted += 1
            except Exception:  # noqa: BLE001 - it only costs space
                pass
    finally:
        bk.close()


#: how long the replica check waits for a marked ledger's repair before it reads again
REPAIR_WAIT = 45.0


def check_replicas(
    bk: BlockingBookKeeper, rnd: Round, ledger_id: int, last: int, acked: set[int], replicas: Counter, losses: list[str]
) -> None:
    """Read every acknowledged entry from every bookie the metadata's write sets name, straight from it.

    A copy missing on a named bookie is judged by the ledger's under-replication mark: while the
    ledger is marked (repair due or under way) the check waits up to REPAIR_WAIT s for the mark to
    go and reads again with the metadata then.  Each copy is counted once: ``ok``; ``repaired``
    (missing at first, there after the repair); ``missing-marked`` (still missing, the ledger still
    marked: repair pending); ``missing-found-by-ledger-check`` (not marked, but the auditor's
    periodic ledger check finds that bookie missing replicas of the ledger); ``missing-unmarked``
    (missing and nothing marked or finding it: no repair will come, a finding);
    ``differs``/``corrupt`` (losses).  Beside them, ``entries-below-ack-quorum`` counts the
    acknowledged entries fewer than ACK_QUORUM of their named bookies hold readably at the end."""
    check = ReplicaCheck(rnd, ledger_id, last, acked, replicas, losses)
    bk.run(check.run)
    rnd.replica_notes += check.notes
    rnd.replica_entries += len(acked)


class ReplicaCheck:
    """:func:`check_replicas` of one ledger, in the reactor thread."""

    def __init__(self, rnd: Round, ledger_id: int, last: int, acked: set[int], replicas: Counter, losses: list[str]):
        self.rnd, self.ledger_id, self.last, self.acked = rnd, ledger_id, last, acked
        self.replicas, self.losses = replicas, losses
        self.notes: list[str] = []  # named replicas still missing an acknowledged entry, and why
        #: every read of the copies, oldest first: {(bookie, entry_id): status}; the last is what holds now
        self.reads: list[dict[tuple[str, int], str]] = []
        self.ensembles: tuple = ()  # of the metadata last read, for the notes
        self._found_by_check: set[str] | None = None

    async def read_all(self, client) -> dict[tuple[str, int], str]:
        from bkctl.ops.replica_read import ReplicaEntry, ReplicaStatus, read_replica
        from bkctl.wire.errors import NotFound

        ledger_id = self.ledger_id
        md, _ = await client.run_blocking(client.store.ledgers.read, ledger_id)
        self.ensembles = md.ensembles
        found: dict[tuple[str, int], str] = {}
        for bookie in sorted(set(md.bookies)):
            rows: list[ReplicaEntry] = []
            for attempt in range(5):
                try:
                    rows = (await read_replica(client, ledger_id, bookie, 0, self.last, PASSWORD)).entries
                except NotFound:  # a repair replaced it since the metadata above: not named now
                    break
                if not any(row.status is ReplicaStatus.ERROR for row in rows) or attempt == 4:
                    break
                await task.deferLater(client.reactor, 1.0, lambda: None)  # the bookie coming back
            for row in rows:
                entry_id = row.entry_id
                if entry_id not in self.acked:
                    continue
                status = row.status.value
                if status == "ok" and row.payload != payload(self.rnd.seed, ledger_id, entry_id):
                    status = "differs"
                if status in ("differs", "corrupt"):
                    self.losses.append(f"ledger {ledger_id} entry {entry_id} on {bookie}: {status} ({row.error})")
                found[(bookie, entry_id)] = status
        self.reads.append(found)
        return found

    async def found_by_ledger_check(self, client) -> set[str]:
        """The bookies the auditor's ledger check finds missing replicas on (run once)."""
        from bkctl.wire.autorecovery.checker import bookies_missing_replicas
        from bkctl.wire.metadata.store import registered_bookies

        if self._found_by_check is None:
            registered = await client.run_blocking(registered_bookies, client.store.registration)
            md, _ = await client.run_blocking(client.store.ledgers.read, self.ledger_id)
            self._found_by_check = await bookies_missing_replicas(client, self.ledger_id, md, registered)
        return self._found_by_check

    async def read_once_more(self, client) -> dict[tuple[str, int], str]:
        """The copies read a third time (once), after the ledger check."""
        if len(self.reads) < 3:
            await self.read_all(client)
        return self.reads[2]

    async def run(self, client) -> None:
        first = await self.read_all(client)
        missing = {k for k, v in first.items() if v in ("missing", "error")}
        if not missing:
            self.replicas.update(first.values())
            return
        try:
            await self._judge(client, first, missing)
        finally:
            self._count_below_quorum(self.reads[-1])

    def _count_below_quorum(self, found: dict[tuple[str, int], str]) -> None:
        """Count the acknowledged entries fewer than ACK_QUORUM named bookies hold readably."""
        copies = Counter(entry_id for (_bookie, entry_id), status in found.items() if status == "ok")
        for entry_id in sorted({e for _b, e in found}):
            if copies[entry_id] < ACK_QUORUM:
                self.replicas["entries-below-ack-quorum"] += 1
                self.notes.append(f"ledger {self.ledger_id} entry {entry_id}: held by fewer than {ACK_QUORUM} bookies")

    async def _judge(self, client, first: dict, missing: set) -> None:
        ledger_id, replicas, store = self.ledger_id, self.replicas, client.store
        mark = await client.run_blocking(store.underreplication.get, ledger_id)
        marked_at_check = mark is not None
        waited = 0.0
        while mark is not None and waited < REPAIR_WAIT:
            await task.deferLater(client.reactor, 0.5, lambda: None)
            waited += 0.5
            mark = await client.run_blocking(store.underreplication.get, ledger_id)
        second = await self.read_all(client)
        for key, status in first.items():
            if key not in missing:
                replicas[status] += 1
                continue
            now = second.get(key)  # None: the bookie is no longer named (replaced by the repair)
            bookie, entry_id = key
            if now in (None, "ok"):
                replicas["repaired"] += 1
                continue
            if mark is not None:
                kind = "missing-marked"
            elif bookie in await self.found_by_ledger_check(client):
                # acknowledged by its ack quorum while the write to this bookie failed (killed,
                # stopped, read-only) and the writer then replaced it from LAC + 1 on or closed
                # the ledger: Java's client leaves the same copies missing (its addOpUr counter)
                # for the auditor's periodic ledger check to find, as this one just did
                kind = "missing-found-by-ledger-check"
            elif (await self.read_once_more(client)).get(key) == "ok":
                # there now: the daemons marked, copied in place and unmarked it between the
                # reads (a refill of the same bookie changes no metadata)
                replicas["repaired"] += 1
                continue
            else:
                kind = "missing-unmarked"
            replicas[kind] += 1
            self.notes.append(
                f"ledger {ledger_id} entry {entry_id} on {bookie}: {now}, {kind}"
                f" (marked at the first read: {'yes' if marked_at_check else 'no'},"
                f" waited {waited:.1f} s; ensembles {[(f, list(e)) for f, e in self.ensembles]})"
            )
        for key, status in second.items():  # copies on the bookies the repair brought in
            if key in first or status == "ok":
                continue
            bookie, entry_id = key
            replicas["missing-on-replacement"] += 1
            self.notes.append(f"ledger {ledger_id} entry {entry_id} on {bookie} (brought in by the repair): {status}")


def verify(uri: str, rnd: Round, delete: bool = True, replicas: Counter | None = None) -> tuple[int, list[str]]:
    """Recover every ledger of the round with a fresh client and compare every acknowledged entry;
    with ``replicas`` also on every replica (counted there by status)."""
    checked, losses = 0, []
    bk = BlockingBookKeeper(uri, **CLIENT_OPTIONS)
    try:
        for ledger_id, acked in sorted(rnd.acked.items()):
            for attempt in range(10):
                try:
                    h = bk.recover(ledger_id, PASSWORD)
                    last = h.last_entry_id if h.last_entry_id is not None else -1
                    got = dict(h.read(0, last)) if last >= 0 else {}
                    break
                except Exception as e:  # noqa: BLE001 - a bookie may still be coming back
                    if attempt == 9:
                        losses.append(f"ledger {ledger_id}: cannot recover/read: {type(e).__name__}: {e}")
                        got = None
                    time.sleep(1.0)
            if got is None:
                continue
            for entry_id in sorted(acked):
                checked += 1
                if got.get(entry_id) != payload(rnd.seed, ledger_id, entry_id):
                    losses.append(
                        f"ledger {ledger_id} entry {entry_id}: {'missing' if entry_id not in got else 'differs'}"
                    )
            if replicas is not None and acked:
                try:
                    check_replicas(bk, rnd, ledger_id, max(got) if got else -1, acked, replicas, losses)
                except Exception as e:  # noqa: BLE001 - counted: a replica left unchecked is said
                    replicas["unchecked-ledgers"] += 1
                    rnd.replica_notes.append(f"ledger {ledger_id}: replicas not checked: {type(e).__name__}: {e}")
            if delete:
                try:
                    bk.delete(ledger_id)
                except Exception:  # noqa: BLE001 - left for later; it only costs space
                    pass
    finally:
        bk.close()
    return checked, losses


# -- main ------------------------------------------------------------------------------------
def run(args) -> dict:
    rng = random.Random(args.seed)
    use_mounts = os.geteuid() == 0 and not args.no_mounts
    kinds = FAULTS if use_mounts else tuple(f for f in FAULTS if f not in DISK_FAULTS)
    settings = {}
    if args.compaction:
        settings.update(COMPACTION_SETTINGS)
        kinds += ("kill-compacting",) * 2  # drawn about a third of the rounds
    if args.autorecovery:
        settings.update(AUTORECOVERY_SETTINGS)
    settings.update(args.settings)
    if args.faults:
        kinds = tuple(args.faults)
    base = Path(tempfile.mkdtemp(prefix="bk-faults-", dir=args.dir))
    cluster = Cluster(base, use_mounts, settings)
    faults: Counter = Counter()
    replicas: Counter = Counter()
    report = {
        "seed": args.seed,
        "rounds": 0,
        "faults": faults,
        "entries_checked": 0,
        "ledgers": 0,
        "tail_entries_checked": 0,
        "losses": [],
        "warnings": [],
        "disk_faults": use_mounts,
        "compaction": args.compaction,
        "autorecovery": args.autorecovery,
        "delete_during": args.delete_during,
        "settings": {k: str(v) for k, v in settings.items()},
        "replica_reads": replicas,
        "replica_entries_checked": 0,
        "ledgers_deleted_during_rounds": 0,
        "under_replicated": [],
    }
    previous: list[int] = []
    started = time.monotonic()
    rnd = None
    try:
        cluster.start()
        for number in range(1, args.rounds + 1):
            if args.minutes and time.monotonic() - started > args.minutes * 60:
                report["warnings"].append(f"stopped after {number - 1} rounds: --minutes {args.minutes} spent")
                break
            round_seed = rng.randrange(1 << 30)
            rrng = random.Random(round_seed)
            rnd = Round(round_seed)
            errors: list[str] = []
            threads = [
                threading.Thread(target=writer_thread, args=(cluster.uri, rnd, WINDOW, i == 0, errors), daemon=True)
                for i in range(2)
            ]
            threads.append(threading.Thread(target=reader_thread, args=(cluster.uri, rnd), daemon=True))
            cluster.deleting = bool(args.delete_during and previous)
            if args.delete_during:
                threads.append(
                    threading.Thread(target=deleter_thread, args=(cluster.uri, rnd, previous, errors), daemon=True)
                )
            for t in threads:
                t.start()
            time.sleep(rrng.uniform(0.5, 1.5))
            drawn = list(dict.fromkeys(rrng.sample(kinds, min(len(kinds), rrng.choice((1, 1, 2))))))
            if "zk-restart" in drawn and "zk-expire" in drawn:
                drawn.remove("zk-expire")
            fault_threads = []
            for kind in drawn:
                faults[kind] += 1
                fr = random.Random(rrng.randrange(1 << 30))
                t = threading.Thread(target=FAULT_FUNCS[kind], args=(cluster, fr))
                t.start()
                fault_threads.append(t)
            for t in fault_threads:
                t.join()
            time.sleep(rrng.uniform(0.5, 1.5))  # writing goes on after the faults
            rnd.stop.set()
            for t in threads:
                t.join(120)
            if not cluster.wait_healthy(90):
                report["warnings"].append(f"round {number}: the cluster was not healthy 90 s after its faults")
            checked, losses = verify(
                cluster.uri, rnd, delete=not args.delete_during, replicas=replicas if args.replicas else None
            )
            previous = sorted(rnd.acked)
            cluster.counters.sample_all(cluster.bookies)
            losses += rnd.order_errors + rnd.tail_errors
            report["ledgers_deleted_during_rounds"] += rnd.deleted
            report["under_replicated"] += [f"round {number}: {n}" for n in rnd.replica_notes]
            report["rounds"] = number
            report["entries_checked"] += checked
            report["replica_entries_checked"] += rnd.replica_entries
            report["ledgers"] += len(rnd.acked)
            report["tail_entries_checked"] += rnd.tail_checked
            for loss in losses:
                report["losses"].append(f"round {number} (seed {args.seed}): {loss}")
            if not args.json:
                print(
                    f"round {number:3d}: faults {'+'.join(drawn):27s} ledgers {len(rnd.acked):2d} "
                    f"entries {checked:6d} tail {rnd.tail_checked:5d} loss {len(losses)}"
                    f" kills-compacting {sum(k['compacting'] for k in cluster.kills)}"
                    f" compactions {int(cluster.counters.total['compactions_minor'] + cluster.counters.total['compactions_major'])}"
                    f" repaired {int(cluster.counters.total['repair_ledgers_replicated'])}"
                    + (f"  ({'; '.join(errors[:2])})" if errors else ""),
                    flush=True,
                )
    except Exception as e:  # noqa: BLE001 - the harness itself failed: the rounds run so far are still reported
        report["harness_error"] = f"after {report['rounds']} rounds: {type(e).__name__}: {str(e)[:300]}"
    finally:
        if rnd is not None:
            rnd.stop.set()  # a round the harness failed in: its threads end too
        report["failed_restarts"] = cluster.failed_starts
        report["kills"] = len(cluster.kills)
        report["kills_during_compaction"] = sum(k["compacting"] for k in cluster.kills)
        report["kills_during_repair"] = sum(k["repair"] for k in cluster.kills)
        cluster.counters.sample_all(cluster.bookies)
        report["bookie_counters"] = {k: int(v) for k, v in sorted(cluster.counters.total.items())}
        cluster.stop()
        report["seconds"] = round(time.monotonic() - started, 1)
        report["load_average"] = [round(x, 2) for x in os.getloadavg()]
        if args.keep:
            report["dir"] = str(base)
        else:
            shutil.rmtree(base, ignore_errors=True)
    return report


def main(argv=None) -> int:
    import logging

    argv = sys.argv[1:] if argv is None else list(argv)
    if "--movers" in argv:  # the movers' campaign: its own rounds and options (bench/faults_movers.py)
        from faults_movers import main as movers_main

        return movers_main([a for a in argv if a != "--movers"])
    logging.basicConfig(level=logging.ERROR)  # kazoo's reconnect warnings are the faults at work
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--seed", type=int, default=None, help="replay a run (default: random)")
    parser.add_argument("--no-mounts", action="store_true", help="no small filesystems (no disk faults)")
    parser.add_argument("--dir", default=None, help="where the sandbox goes (default: the temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the sandbox directory (logs)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON only")
    parser.add_argument(
        "--compaction", action="store_true", help="compaction inside every round, and the kill-compacting fault"
    )
    parser.add_argument(
        "--autorecovery",
        action="store_true",
        help="every bookie runs its autorecovery daemon, lostBookieRecoveryDelay 0",
    )
    parser.add_argument(
        "--delete-during", action="store_true", help="delete the previous round's ledgers while the round writes"
    )
    parser.add_argument(
        "--no-replicas",
        dest="replicas",
        action="store_false",
        help="skip reading every acknowledged entry from every replica",
    )
    parser.add_argument("--everything", action="store_true", help="--compaction --autorecovery --delete-during")
    parser.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a bk_server.conf setting for every bookie (repeatable; checked by bookied's schema)",
    )
    parser.add_argument(
        "--minutes",
        type=float,
        default=None,
        help="start no round after this many minutes (the report covers the rounds run)",
    )
    parser.add_argument(
        "--faults",
        type=lambda v: v.split(","),
        default=None,
        metavar="KIND,...",
        help=f"draw only these faults ({', '.join(FAULT_FUNCS)})",
    )
    args = parser.parse_args(argv)
    if args.faults and set(args.faults) - set(FAULT_FUNCS):
        parser.error(f"--faults: unknown {', '.join(sorted(set(args.faults) - set(FAULT_FUNCS)))}")
    if args.everything:
        args.compaction = args.autorecovery = args.delete_during = True
    from bkctl.sandbox.bookies import parse_settings
    from bkctl.sandbox.state import SandboxError

    try:
        args.settings = {k: v for k, v in parse_settings(args.settings).items() if v is not None}
    except SandboxError as e:
        parser.error(str(e))
    if args.seed is None:
        args.seed = random.randrange(1 << 31)
    report = run(args)
    report["faults"] = dict(sorted(report["faults"].items()))
    if args.json:
        print(json.dumps(report))
    else:
        print(
            f"\nseed {report['seed']}: {report['rounds']} rounds in {report['seconds']} s "
            f"(load average {' '.join(map(str, report['load_average']))})"
        )
        print(
            f"faults: {', '.join(f'{k} {v}' for k, v in report['faults'].items())}"
            + ("" if report["disk_faults"] else " (no disk-full/slow-disk: not root)")
        )
        print(
            f"ledgers {report['ledgers']}, acknowledged entries checked {report['entries_checked']}, "
            f"tail entries checked {report['tail_entries_checked']}, "
            f"ledgers deleted during rounds {report['ledgers_deleted_during_rounds']}"
        )
        print(
            f"kills {report['kills']}: during compaction {report['kills_during_compaction']}, "
            f"during repair (ledgers marked under-replicated) {report['kills_during_repair']}"
        )
        print("bookies' counters: " + ", ".join(f"{k} {v}" for k, v in report["bookie_counters"].items()))
        print(
            "acknowledged entries read per replica: "
            + (", ".join(f"{k} {v}" for k, v in sorted(report["replica_reads"].items())) or "none")
        )
        for note in report["under_replicated"][:20]:
            print(f"  replica: {note}")
        for w in report["warnings"]:
            print(f"warning: {w}")
        if report.get("failed_restarts"):
            print(f"bookie restarts that failed and were retried: {report['failed_restarts']}")
        if report.get("harness_error"):
            print(f"harness error (the run stopped): {report['harness_error']}")
        print(
            f"loss: {len(report['losses'])}" + (f" -- replay with --seed {report['seed']}" if report["losses"] else "")
        )
        for loss in report["losses"][:50]:
            print(f"  {loss}")
    return 1 if report["losses"] else 2 if report.get("harness_error") else 0


if __name__ == "__main__":
    sys.exit(main())
