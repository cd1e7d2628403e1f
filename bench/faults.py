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

When the harness runs as root (as CI does) every bookie's journal and ledger
directories sit on a small ext4 image of their own, loop-mounted from a file
on the real disk (so ``disk-full`` fills a real filesystem and ``slow-disk``
slows real fsyncs); otherwise those two faults are left out, and said so.

After each round a fresh client recovers (fences and closes) every ledger of
the round and reads it back: every acknowledged entry must be there, byte for
byte.  The ledgers are then deleted (the bookies' garbage collection frees
their space).  The report gives rounds, faults of each kind, entries checked,
tail reads, time and the load average; any loss is printed with the seed that
replays the run, and the exit status is 1.

    python bench/faults.py [--rounds 100] [--seed N] [--json]
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
    zkTimeout=ZK_SESSION_MS, flushInterval=1000, diskCheckInterval=1000, gcWaitTime=3000,
    journalPreAllocSizeMB=1, journalMaxSizeMB=8, dbStorage_writeCacheMaxSizeMb=8,
    diskUsageThreshold=0.9, diskUsageWarnThreshold=0.9, diskUsageLwmThreshold=0.8,
    minUsableSizeForEntryLogCreation=2 * 1024 * 1024, minUsableSizeForHighPriorityWrites=2 * 1024 * 1024,
    shutdownTimeoutMs=3000,
)
CLIENT_OPTIONS = dict(add_timeout=3.0, read_timeout=3.0, timeout=90)


def payload(seed: int, ledger_id: int, entry_id: int) -> bytes:
    """The bytes of an entry, derived from (seed, ledger, entry): the check needs no copy."""
    head = hashlib.sha256(b"%d/%d/%d" % (seed, ledger_id, entry_id)).digest()
    size = ENTRY_SIZES[head[0] % len(ENTRY_SIZES)]
    return (head * (size // len(head) + 1))[:size]


class Cluster:
    """ZooKeeper and the bookies, each bookie on a filesystem of its own when root."""

    def __init__(self, base: Path, use_mounts: bool):
        self.base = base
        self.use_mounts = use_mounts
        self.zk = ZooKeeperServer(base / "zk", port=free_port())
        self.uri = ""
        self.bookies: list[BookieProcess] = []
        self.mounts: list[Path] = []

    def start(self) -> None:
        self.zk.start()
        self.uri = f"zk+hierarchical://{self.zk.connect_string}/ledgers"
        with ZKMetadataStore(self.uri, timeout=30) as store:
            store.cluster.init()
        for i in range(BOOKIES):
            fs = self.base / f"fs{i}"
            if self.use_mounts:
                smallfs.mount_ext4_image(fs, self.base / f"fs{i}.img", FS_MB)
                self.mounts.append(fs)
            else:
                fs.mkdir(parents=True)
            b = BookieProcess(self.base / f"bookie{i}", self.uri, journalDirectories=fs / "journal",
                              ledgerDirectories=fs / "ledgers", **BOOKIE_SETTINGS)
            b.fs = fs
            self.bookies.append(b)
        for b in self.bookies:
            b.start()
        self.wait_healthy(60)

    def writable(self) -> set[str]:
        with ZKMetadataStore(self.uri, timeout=10) as store:
            return set(store.registration.writable_bookies())

    def wait_healthy(self, timeout: float) -> bool:
        """Every bookie running and registered writable."""
        deadline = time.monotonic() + timeout
        want = {b.bookie_id for b in self.bookies}
        while time.monotonic() < deadline:
            for b in self.bookies:  # a bookie that died by itself is restarted, and counted
                if b.proc is None or b.proc.poll() is not None:
                    b.start()
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


# -- faults --------------------------------------------------------------------------------
def fault_kill(cluster: Cluster, rng: random.Random) -> str:
    b = rng.choice(cluster.bookies)
    b.kill(signal.SIGKILL)
    time.sleep(rng.uniform(0.2, 1.5))
    b.start(timeout=60)
    return b.bookie_id


def fault_stop(cluster: Cluster, rng: random.Random) -> str:
    b = rng.choice(cluster.bookies)
    os.kill(b.proc.pid, signal.SIGSTOP)
    time.sleep(rng.uniform(0.5, 3.0))
    os.kill(b.proc.pid, signal.SIGCONT)
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


FAULT_FUNCS = {"kill": fault_kill, "stop": fault_stop, "zk-restart": fault_zk_restart,
               "zk-expire": fault_zk_expire, "disk-full": fault_disk_full, "slow-disk": fault_slow_disk}


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


def writer_scenario(rnd: Round, window: int, record_first: bool):
    def scenario(client):
        async def go():
            while not rnd.stop.is_set():
                try:
                    lh = await client.create_ledger(3, 3, 2, password=PASSWORD)
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


def verify(uri: str, rnd: Round) -> tuple[int, list[str]]:
    """Recover every ledger of the round with a fresh client and compare every acknowledged entry."""
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
                    losses.append(f"ledger {ledger_id} entry {entry_id}: "
                                  f"{'missing' if entry_id not in got else 'differs'}")
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
    base = Path(tempfile.mkdtemp(prefix="bk-faults-", dir=args.dir))
    cluster = Cluster(base, use_mounts)
    faults: Counter = Counter()
    report = {"seed": args.seed, "rounds": 0, "faults": faults, "entries_checked": 0, "ledgers": 0,
              "tail_entries_checked": 0, "losses": [], "warnings": [], "disk_faults": use_mounts}
    started = time.monotonic()
    try:
        cluster.start()
        for number in range(1, args.rounds + 1):
            round_seed = rng.randrange(1 << 30)
            rrng = random.Random(round_seed)
            rnd = Round(round_seed)
            errors: list[str] = []
            threads = [threading.Thread(target=writer_thread, args=(cluster.uri, rnd, WINDOW, i == 0, errors))
                       for i in range(2)]
            threads.append(threading.Thread(target=reader_thread, args=(cluster.uri, rnd)))
            for t in threads:
                t.start()
            time.sleep(rrng.uniform(0.5, 1.5))
            drawn = rrng.sample(kinds, rrng.choice((1, 1, 2)))
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
            checked, losses = verify(cluster.uri, rnd)
            losses += rnd.order_errors + rnd.tail_errors
            report["rounds"] = number
            report["entries_checked"] += checked
            report["ledgers"] += len(rnd.acked)
            report["tail_entries_checked"] += rnd.tail_checked
            for loss in losses:
                report["losses"].append(f"round {number} (seed {args.seed}): {loss}")
            if not args.json:
                print(f"round {number:3d}: faults {'+'.join(drawn):22s} ledgers {len(rnd.acked):2d} "
                      f"entries {checked:6d} tail {rnd.tail_checked:5d} loss {len(losses)}"
                      + (f"  ({'; '.join(errors[:2])})" if errors else ""), flush=True)
    finally:
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

    logging.basicConfig(level=logging.ERROR)  # kazoo's reconnect warnings are the faults at work
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--seed", type=int, default=None, help="replay a run (default: random)")
    parser.add_argument("--no-mounts", action="store_true", help="no small filesystems (no disk faults)")
    parser.add_argument("--dir", default=None, help="where the sandbox goes (default: the temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the sandbox directory (logs)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON only")
    args = parser.parse_args(argv)
    if args.seed is None:
        args.seed = random.randrange(1 << 31)
    report = run(args)
    report["faults"] = dict(sorted(report["faults"].items()))
    if args.json:
        print(json.dumps(report))
    else:
        print(f"\nseed {report['seed']}: {report['rounds']} rounds in {report['seconds']} s "
              f"(load average {' '.join(map(str, report['load_average']))})")
        print(f"faults: {', '.join(f'{k} {v}' for k, v in report['faults'].items())}"
              + ("" if report["disk_faults"] else " (no disk-full/slow-disk: not root)"))
        print(f"ledgers {report['ledgers']}, acknowledged entries checked {report['entries_checked']}, "
              f"tail entries checked {report['tail_entries_checked']}")
        for w in report["warnings"]:
            print(f"warning: {w}")
        print(f"loss: {len(report['losses'])}" + (f" -- replay with --seed {report['seed']}"
                                                   if report["losses"] else ""))
        for loss in report["losses"][:50]:
            print(f"  {loss}")
    return 1 if report["losses"] else 0


if __name__ == "__main__":
    sys.exit(main())
