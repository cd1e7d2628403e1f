"""The movers' fault campaign (``bench/faults.py --movers``): rebalance, drain, backup/restore and
fsck's fixes run as a user runs them -- ``bkctl`` processes -- while the cluster is hurt.

A module of its own beside ``faults.py`` (the write path's harness), sharing its ZooKeeper and
bookie plumbing (``bkctl.sandbox.zookeeper``, ``tests/support/bookieproc.py``) but not its rounds:
what is checked here is what the movers promise, not what a writer is acknowledged.

The harness starts a real ZooKeeper and four real bookieds, each bookie talking to ZooKeeper
through a TCP proxy of its own (``tests/support/tcp_proxy.py``), and every ``bkctl`` through one
more (with ``--timeout 4``: a 4 s ZooKeeper session).  Throughout, two writers fill ledgers
(E3/Qw2/Qa2 and E2/Qw2/Qa2, rolled every few hundred entries: closed ledgers to move), a deleter
deletes old ones, and ``bkctl autorecovery run`` is the cluster's auditor and replication worker.
Each round runs one or two of

``rebalance``       ``bkctl --json rebalance --force --tolerance 0.02 --max-rate ...``
``drain``           ``bkctl --json drain B --force --wait 30 ...``, then ``bookie readonly B off``
``decommission``    B stopped for good, ``bkctl --json decommission B --force --no-daemons ...``, then B
                    started again empty (its directories wiped: a new disk) once its cookie is gone
``backup-restore``  ``bkctl backup --to A --ledgers ...`` then ``bkctl restore --from A --remap --force``
``fsck-fix``        ``bkctl --json ledger fsck --fix mark --fix unmark --force``

(each rerun until it succeeds, as an operator would) while one or two faults hit:

``kill-source``/``kill-target``  SIGKILL a bookie a move copies from/to (read from the command's
                                 ``planned`` events), restart it on its directories
``kill-bkctl``     SIGKILL the running ``bkctl`` mid-move (the op reruns it)
``zk-pause``       SIGSTOP ZooKeeper past bkctl's session timeout, then SIGCONT
``cut-bkctl-zk``   partition bkctl from ZooKeeper (the proxy blackholes or resets) past its session
``cut-bookie-zk``  partition a bookie (a move's, when there is one) from ZooKeeper past its session

After each round (the cluster healthy, the under-replication marks gone): every acknowledged entry
of every live ledger -- the writers' and the restored copies -- reads byte-equal (a lost entry);
every closed ledger's entries are read replica by replica from each bookie of their write set, and
each must have write-quorum good copies (a copy short; while the ledger is marked, the repair is
waited for); no ensemble names a bookie twice; a ledger the harness does not know that holds
another ledger's entries is a duplicate (a restore run twice); no kept rebalance plan, running
record (``<root>-bkctl-*`` znodes) or replication lock is left behind.  Every entry is
self-describing (origin ledger and entry id in its first 16 bytes), so a copy is checked
without keeping one.

It prints rounds, moves, kills, entries checked, lost, duplicated (and copies short, ensembles
naming a bookie twice, leftovers), and exits 1 on any of them with the seed to replay it
(2 when the harness itself failed).  Bounded: each bkctl run by --command-timeout, each op by
its reruns, the run by --rounds and --minutes; every process is stopped by pid; 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import faults  # noqa: E402 - the write path's harness: its cluster
from faults_movers_faults import BKCTL_SESSION, BOOKIE_SESSION, FAULT_FUNCS, FAULTS, Faults  # noqa: E402
from faults_movers_load import CLIENT_OPTIONS, PASSWORD, Book, Expect, Load, origin_of, payload  # noqa: E402

from bkctl.wire import fastpath  # noqa: E402
from bkctl.wire.metadata.zk import ZKMetadataStore  # noqa: E402
from tests.support.bookieproc import BookieProcess  # noqa: E402
from tests.support.interrupts import die_with_parent  # noqa: E402
from tests.support.tcp_proxy import TcpProxy  # noqa: E402

OPS = ("rebalance", "drain", "decommission", "backup-restore", "fsck-fix")
BOOKIES = 4
#: over faults.py's bookie settings
BOOKIE_SETTINGS = dict(
    zkTimeout=int(BOOKIE_SESSION * 1000), flushInterval=500, gcWaitTime=2000, autoRecoveryDaemonEnabled="false"
)
#: exit codes an op's command may end with and be rerun (bkctl/exitcodes.py): failed, unreachable,
#: conflict (a second run refused while one runs), partial (a backup past a ledger it could not
#: read: a bookie killed), and the SIGKILLs the harness sends
RERUN = {1, 4, 5, 10, -9}


# -- the cluster ---------------------------------------------------------------------------------
class MoversCluster(faults.Cluster):
    """ZooKeeper, a proxy per bookie and one for bkctl, the bookies, and bkctl's autorecovery daemon
    (``faults.Cluster``'s ZooKeeper, health wait and stop, its bookies behind the proxies)."""

    def __init__(self, base: Path, bookies: int = BOOKIES):
        super().__init__(base, use_mounts=False, settings=BOOKIE_SETTINGS)
        self.count = bookies
        self.bkctl_proxy: TcpProxy | None = None
        self.bookie_proxies: dict[str, TcpProxy] = {}
        self.daemon: subprocess.Popen | None = None
        #: bookies a fault holds down (killed, to be restarted by the fault itself)
        self.held_down: set[str] = set()
        #: bookies stopped for a decommission: no fault picks them (a fault restarts what it kills)
        self.retiring: set[str] = set()
        self.starting = threading.Lock()  # one start of a bookie at a time
        self.stopping = threading.Event()
        self.supervisor = threading.Thread(target=self._supervise, name="supervisor", daemon=True)

    @property
    def bkctl_uri(self) -> str:
        return f"zk+hierarchical://{self.bkctl_proxy.address}/ledgers"

    def start(self) -> None:
        self.zk.start()
        self.uri = f"zk+hierarchical://{self.zk.connect_string}/ledgers"
        with ZKMetadataStore(self.uri, timeout=30, twins=fastpath.selected()) as store:
            store.cluster.init()
        upstream = ("127.0.0.1", self.zk.port)
        self.bkctl_proxy = TcpProxy(upstream).start()
        for i in range(self.count):
            proxy = TcpProxy(upstream).start()
            b = BookieProcess(
                self.base / f"bookie{i}",
                f"zk+hierarchical://{proxy.address}/ledgers",
                **self.settings,
            )
            b.serve_http()
            self.bookie_proxies[b.bookie_id] = proxy
            self.bookies.append(b)
        for b in self.bookies:
            b.start()
        if not self.wait_healthy(90):
            raise RuntimeError("the bookies did not all register writable in 90 s")
        self.start_daemon()
        self.supervisor.start()

    def start_bookie(self, b: BookieProcess) -> None:
        """Start ``b`` again (a failed start -- ZooKeeper away, too slow -- is counted, and retried
        by the supervisor)."""
        with self.starting:
            if b.proc is not None and b.proc.poll() is None:
                return
            try:
                b.start(timeout=60)
            except RuntimeError:
                self.failed_starts += 1

    def _supervise(self) -> None:
        """As systemd's Restart=on-failure: a bookie that exited (bookied exits when ZooKeeper does not
        answer at its start) is started again a second later, unless a fault holds it down."""
        while not self.stopping.wait(1.0):
            for b in self.bookies:
                if b.bookie_id not in self.held_down and (b.proc is None or b.proc.poll() is not None):
                    self.start_bookie(b)
            self.keep_daemon()

    def bookie(self, bookie_id: str) -> BookieProcess:
        return next(b for b in self.bookies if b.bookie_id == bookie_id)

    def start_daemon(self) -> None:
        log = open(self.base / "autorecovery.log", "ab")  # noqa: SIM115 - the daemon's, closed with it
        self.daemon = subprocess.Popen(
            [*bkctl_argv(self.bkctl_uri), "autorecovery", "run", "--bookie-id", "127.0.0.1:1"]
            + ["-o", "lostBookieRecoveryDelay=2", "-o", "auditorPeriodicBookieCheckInterval=5"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            preexec_fn=die_with_parent,  # the harness killed outright: its daemon goes too
        )
        log.close()

    def keep_daemon(self) -> None:
        """The autorecovery daemon restarted when it ended (killed by a fault; it exits 5 when ZooKeeper
        is away at its start); called by the supervisor, whose thread lives as long as the cluster."""
        if not self.stopping.is_set() and (self.daemon is None or self.daemon.poll() is not None):
            self.start_daemon()

    def registered(self) -> set[str]:
        with ZKMetadataStore(self.uri, timeout=10, twins=fastpath.selected()) as store:
            return set(store.registration.writable_bookies()) | set(store.registration.readonly_bookies())

    def writable(self) -> set[str]:
        """Registered writable and not read-only (a drained bookie is made writable again)."""
        with ZKMetadataStore(self.uri, timeout=10, twins=fastpath.selected()) as store:
            readonly = set(store.registration.readonly_bookies())
            return set(store.registration.writable_bookies()) - readonly

    def wait_healthy(self, timeout: float) -> bool:
        """Every proxy forwarding, every bookie running and registered writable."""
        for proxy in [self.bkctl_proxy, *self.bookie_proxies.values()]:
            if proxy is not None and proxy.mode is not None:
                proxy.restore()
        with self.starting:  # the supervisor waits meanwhile
            return super().wait_healthy(timeout)

    def stop(self) -> None:
        self.stopping.set()
        if self.supervisor.is_alive():
            self.supervisor.join(90)
        if self.daemon is not None and self.daemon.poll() is None:
            stop_pid(self.daemon)
        super().stop()
        for proxy in [self.bkctl_proxy, *self.bookie_proxies.values()]:
            if proxy is not None:
                proxy.stop()


def bkctl_argv(uri: str) -> list[str]:
    return [sys.executable, "-m", "bkctl", "-m", uri, "--timeout", f"{BKCTL_SESSION:g}"]


def stop_pid(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    """``sig`` to the process (its own session), SIGKILL after 15 s, then whatever its group left."""
    try:
        os.kill(proc.pid, sig)
        proc.wait(15)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# -- bkctl, as a user runs it --------------------------------------------------------------------
@dataclass
class Run:
    """One ``bkctl`` process's end: its exit code (negative: the signal), JSON events, stderr."""

    argv: list[str]
    code: int
    events: list[dict]
    stderr: str
    seconds: float


class Bkctl:
    """Runs bkctl processes through bkctl's proxy; the ones running can be SIGKILLed (``kill-bkctl``)."""

    def __init__(self, cluster: MoversCluster, timeout: float, log: Path):
        self.cluster = cluster
        self.timeout = timeout
        self.log = log
        self.running: dict[int, subprocess.Popen] = {}
        self.lock = threading.Lock()
        self.kills = 0
        self.timeouts = 0
        #: bookies the running commands named as move sources and targets (their planned events)
        self.sources: set[str] = set()
        self.targets: set[str] = set()
        #: set once a mover's command runs in the round: the faults wait for it
        self.mover_running = threading.Event()

    def run(self, *args: str, mover: bool = True) -> Run:
        """Run ``bkctl ARGS``; ``mover``: a command the faults are for (``kill-bkctl`` may kill it)."""
        argv = [*bkctl_argv(self.cluster.bkctl_uri), *args]
        started = time.monotonic()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        if mover:
            with self.lock:
                self.running[proc.pid] = proc
            self.mover_running.set()
        events: list[dict] = []
        err: list[bytes] = []
        reader = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)
        reader.start()
        timer = threading.Timer(self.timeout, self._timed_out, args=(proc,))
        timer.start()
        try:
            for line in proc.stdout:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                events.append(event)
                if isinstance(event, dict) and event.get("event") == "planned":
                    for pair in event.get("moves", ()):
                        self.sources.add(pair["source"])
                        self.targets.add(pair["target"])
            code = proc.wait()
        finally:
            timer.cancel()
            reader.join(10)
            with self.lock:
                self.running.pop(proc.pid, None)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        stderr = b"".join(err).decode(errors="replace")
        run = Run(argv[len(bkctl_argv("")) :], code, events, stderr, time.monotonic() - started)
        with open(self.log, "a") as f:
            f.write(f"$ bkctl {' '.join(run.argv)}\n  exit {code} in {run.seconds:.1f} s\n")
            for line in stderr.strip().splitlines()[-8:]:
                f.write(f"  ! {line}\n")
            for event in events:
                if isinstance(event, dict) and (event.get("event") in ("note", "summary") or code not in (0, -9)):
                    f.write(f"  > {json.dumps(event)[:600]}\n")
        return run

    def _timed_out(self, proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            self.timeouts += 1
            os.kill(proc.pid, signal.SIGKILL)

    def kill_one(self, rng: random.Random, prefer: tuple[str, ...] = ()) -> str | None:
        """SIGKILL one running bkctl (a mover's: never the autorecovery daemon), one whose command is
        one of ``prefer`` when there is one; the command killed, or None."""
        with self.lock:
            running = [p for p in self.running.values() if p.poll() is None]
        preferred = [p for p in running if _command(p.args) in prefer]
        if not (preferred or running):
            return None
        victim = rng.choice(preferred or running)
        try:
            os.kill(victim.pid, signal.SIGKILL)
        except ProcessLookupError:
            return None
        self.kills += 1
        return _command(victim.args)

    def running_commands(self) -> set[str]:
        with self.lock:
            return {_command(p.args) for p in self.running.values() if p.poll() is None}

    def running_pids(self, command: str) -> set[int]:
        """The pids of the running bkctl processes of ``command``."""
        with self.lock:
            return {pid for pid, p in self.running.items() if p.poll() is None and _command(p.args) == command}


def _command(argv) -> str:
    """The bkctl command an argv runs (``rebalance``, ``drain``, ``restore``...)."""
    words = [a for a in argv[len(bkctl_argv("")) :] if not a.startswith("-")]
    return words[0] if words else "?"


# -- the movers, as an operator runs them ---------------------------------------------------------
class Ops:
    """The round's bkctl commands, each rerun until it succeeds (at most ``attempts`` runs)."""

    def __init__(self, cluster: MoversCluster, book: Book, bkctl: Bkctl, archive: Path, attempts: int):
        self.cluster, self.book, self.bkctl, self.archive = cluster, book, bkctl, archive
        self.attempts = attempts
        self.moves = Counter()  # outcome -> count, from the commands' move events
        self.runs = Counter()  # op -> bkctl runs
        self.notes: list[str] = []  # what did not go as an operator expects

    def until_done(
        self,
        op: str,
        args: list[str],
        ok: set[int],
        *,
        stop_on: set[int] = frozenset(),
        rerun: set[int] = RERUN,
        said: set[int] = frozenset(),
        mover: bool = True,
    ) -> Run | None:
        """Run the command until it exits with one of ``ok``; a code of ``stop_on`` ends the runs too,
        one of ``rerun`` runs it again, one of ``said`` (a defect the campaign found) is said in the
        notes and runs it again, any other is said and ends the runs."""
        for attempt in range(self.attempts):
            run = self.bkctl.run(*args, mover=mover)
            self.runs[op] += 1
            for event in run.events:
                if isinstance(event, dict) and event.get("event") == "move":
                    self.moves[event.get("outcome", "?")] += 1
            if run.code in ok:
                return run
            if run.code in said:
                self.notes.append(f"{op}: `bkctl {' '.join(args)}` exit {run.code}: {last_line(run.stderr)}; run again")
            elif run.code in stop_on or run.code not in rerun:
                self.notes.append(f"{op}: `bkctl {' '.join(args)}` exit {run.code}: {last_line(run.stderr)}")
                return run if run.code in stop_on else None
            time.sleep(min(1.0 + attempt, 4.0))  # a killed run's session and locks go with its timeout
        self.notes.append(f"{op}: `bkctl {' '.join(args)}` did not succeed in {self.attempts} runs")
        return None

    def readonly(self, bookie: str, state: str) -> bool:
        return (
            self.until_done(
                f"readonly-{state}",
                ["--json", "bookie", "readonly", bookie, state],
                {0},
                rerun=RERUN | {3},  # not registered: partitioned from ZooKeeper a while, or restarting
                mover=False,
            )
            is not None
        )

    def writable_again(self) -> None:
        """Every bookie registered read-only made writable again (an op that could not undo its
        ``readonly on``, its bookie away from ZooKeeper at the time), said in the notes."""
        try:
            with ZKMetadataStore(self.cluster.uri, timeout=20, twins=fastpath.selected()) as store:
                readonly = sorted(store.registration.readonly_bookies())
        except Exception as e:  # noqa: BLE001 - ZooKeeper away: wait_healthy says so next
            self.notes.append(f"the bookies' read-only state not read: {e}")
            return
        for bookie in readonly:
            self.notes.append(f"{bookie} was left read-only by the round: made writable again")
            self.readonly(bookie, "off")

    def rebalance(self, rng: random.Random) -> None:
        """One bookie read-only for a few seconds while the writers write (the others take its
        share: an imbalance), then the rebalance."""
        skewed = rng.choice(self.cluster.bookies).bookie_id
        if self.readonly(skewed, "on"):
            time.sleep(rng.uniform(2.0, 4.0))
        if not self.readonly(skewed, "off"):
            self.notes.append(f"rebalance: {skewed} could not be made writable again")
        args = ["--json", "rebalance", "--force", "--tolerance", "0.02", "--max-rate", "2M", "--concurrency", "4"]
        args += ["--max-moves", "40"]
        second, first_done = None, threading.Event()
        if rng.random() < 0.3:  # an operator in another terminal starts one more meanwhile
            second = threading.Thread(
                target=self.second_rebalance, args=(args, rng.uniform(0.5, 2.0), first_done), daemon=True
            )
            second.start()
        self.until_done("rebalance", args, ok={0})
        first_done.set()
        if second is not None:
            second.join()

    def second_rebalance(self, args: list[str], delay: float, first_done: threading.Event) -> None:
        """A second rebalance while one runs: refused (exit 4, naming the running one) is what the
        executor promises; one that ran alongside is said.  Run once, as an operator told no would."""
        self.bkctl.mover_running.wait(30)
        time.sleep(delay)
        if first_done.is_set():
            return
        first = self.bkctl.running_pids("rebalance")  # between reruns of the first, none runs
        run = self.bkctl.run(*args)
        overlapped = bool(first & self.bkctl.running_pids("rebalance"))  # the same first run, before and after
        self.runs["rebalance-second"] += 1
        for event in run.events:
            if isinstance(event, dict) and event.get("event") == "move":
                self.moves[event.get("outcome", "?")] += 1
        if run.code == 4:
            self.runs["rebalance-second-refused"] += 1
        elif run.code in (5, -9):  # ZooKeeper away, or killed by a fault: it said nothing either way
            self.runs["rebalance-second-unreachable"] += 1
        elif not overlapped:  # the first was between two of its runs (or ended): nothing to refuse
            self.runs["rebalance-second-alone"] += 1
        else:
            moved = sum(1 for e in run.events if isinstance(e, dict) and e.get("event") == "move")
            self.notes.append(
                f"a second rebalance while one ran was not refused: exit {run.code}, {moved} moves;"
                f" {last_line(run.stderr)}"
            )

    def drain(self, rng: random.Random) -> None:
        victim = rng.choice(self.cluster.bookies).bookie_id
        self.bkctl.sources.add(victim)
        try:
            self.until_done(
                "drain",
                ["--json", "drain", victim, "--force", "--wait", "30", "--max-rate", "2M", "--concurrency", "4"],
                ok={0},
            )
        finally:  # drained or not, the bookie serves writes again for the rounds to come
            if not self.readonly(victim, "off"):
                self.notes.append(f"drain: {victim} could not be made writable again")

    def decommission(self, rng: random.Random) -> None:
        """A bookie stopped for good and decommissioned by this process's moves (the executor's,
        racing the autorecovery daemon's workers for the same ledgers); once its cookie is gone it
        comes back empty, a new disk, for the rounds to come -- and on its own directories when the
        decommission did not end (its data may be the only copy)."""
        victim = rng.choice(self.cluster.bookies)
        vid = victim.bookie_id
        self.cluster.retiring.add(vid)
        self.cluster.held_down.add(vid)
        try:
            with self.cluster.starting:
                victim.stop()
            deadline = time.monotonic() + 30
            while vid in self.cluster.registered() and time.monotonic() < deadline:
                time.sleep(0.2)
            run = self.until_done(
                "decommission",
                ["--json", "decommission", vid, "--force", "--no-daemons", "--max-rate", "2M", "--parallel", "4"],
                ok={0, 9},
            )
            if run is not None and run.code == 9:
                self.notes.append(f"decommission of {vid}: {last_line(run.stderr)}")
            for doc in run.events if run is not None else ():  # its one document: the ledgers it moved
                for row in doc.get("ledgers", []) if isinstance(doc, dict) else ():
                    if row.get("status") == "recovered" and row.get("fragments"):
                        self.moves["moved"] += 1
            if run is not None and (victim.proc is None or victim.proc.poll() is not None):
                for d in (victim.journal_dir, victim.ledger_dir):
                    shutil.rmtree(d, ignore_errors=True)
        finally:
            self.cluster.held_down.discard(vid)  # the supervisor starts it again
            self.cluster.retiring.discard(vid)

    def backup_restore(self, rng: random.Random) -> None:
        deadline = time.monotonic() + 20  # the first round's writers close their first ledgers
        while not (candidates := self.book.closed_originals()) and time.monotonic() < deadline:
            time.sleep(0.5)
        if not candidates:
            self.notes.append("backup-restore: no closed ledger yet")
            return
        chosen = sorted(rng.sample(candidates, min(3, len(candidates))))
        with self.book.lock:
            self.book.pinned.update(chosen)
            chosen = [lid for lid in chosen if lid in self.book.ledgers]
            origins = {lid: (self.book.ledgers[lid].origin, set(self.book.ledgers[lid].acked)) for lid in chosen}
        try:
            spec = ",".join(map(str, chosen))
            if (
                not chosen
                or self.until_done("backup", ["--json", "backup", "--to", str(self.archive), "-l", spec], {0}) is None
            ):
                return
            table = self.archive.parent / f"remap-{time.monotonic_ns()}.json"
            run = self.until_done(
                "restore",
                ["--json", "restore", "--from", str(self.archive), "--remap", "--remap-table", str(table), "--force"],
                ok={0},
            )
            if run is None:
                return
            try:
                mapping = {int(k): int(v) for k, v in json.loads(table.read_text()).items()}
            except (OSError, ValueError) as e:
                self.notes.append(f"restore: no remap table ({e})")
                return
            with self.book.lock:
                for old, new in mapping.items():
                    if old not in origins:
                        self.notes.append(f"restore: ledger {old} restored as {new}, not one backed up this round")
                        continue
                    origin, acked = origins[old]
                    self.book.ledgers[new] = Expect(origin, acked, closed=True, restored=True)
                    self.book.restores[new] = old
                for old in set(origins) - set(mapping):
                    self.notes.append(f"restore: ledger {old} was backed up but not restored")
        finally:
            with self.book.lock:
                self.book.pinned.difference_update(chosen)

    def fsck_fix(self, rng: random.Random) -> None:
        fixes = ["--fix", "mark", "--fix", "unmark"] + (["--fix", "ensemble"] if rng.random() < 0.5 else [])
        run = self.until_done(
            "fsck",
            ["--json", "ledger", "fsck", *fixes, "--force"],
            ok={0, 7, 8},
            stop_on={9},
            said={3},  # a fix of a ledger deleted since its check aborts the run (a defect; said)
        )
        if run is not None and run.code == 9:
            lost = [e for e in run.events if isinstance(e, dict) and e.get("kind") == "data_lost"]
            for e in lost[:5]:
                self.notes.append(f"fsck --fix says data_lost: ledger {e.get('ledger_id')}: {e.get('message')}")


OP_FUNCS = {
    "rebalance": Ops.rebalance,
    "drain": Ops.drain,
    "decommission": Ops.decommission,
    "backup-restore": Ops.backup_restore,
    "fsck-fix": Ops.fsck_fix,
}


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(nothing on stderr)"


# -- the campaign --------------------------------------------------------------------------------
def run_round(number, rng, cluster, book, bkctl, ops, faults, load, args) -> tuple[list[str], list[str], list[str]]:
    """One round: the load, the drawn ops and faults at once; returns (ops, faults, what the faults hit)."""
    drawn_ops = rng.sample(args.ops, min(len(args.ops), rng.choice((1, 1, 2))))
    drawn_faults = rng.sample(args.faults, min(len(args.faults), rng.choice((1, 2))))
    bkctl.sources.clear()
    bkctl.targets.clear()
    bkctl.mover_running.clear()
    load.start()
    time.sleep(rng.uniform(1.0, 2.0))  # ledgers to move
    threads = [
        threading.Thread(target=OP_FUNCS[op], args=(ops, random.Random(rng.randrange(1 << 30))), daemon=True)
        for op in drawn_ops
    ]
    for t in threads:
        t.start()
    hit: list[str] = []

    def fault(kind: str, frng: random.Random) -> None:
        bkctl.mover_running.wait(30)  # mid-move: once a mover's command runs, a little later
        time.sleep(frng.uniform(0.3, 2.0))
        try:
            hit.append(FAULT_FUNCS[kind](faults, frng))
        except Exception as e:  # noqa: BLE001 - said in the round's line
            hit.append(f"{kind} failed: {type(e).__name__}: {e}")

    fault_threads = [
        threading.Thread(target=fault, args=(kind, random.Random(rng.randrange(1 << 30))), daemon=True)
        for kind in drawn_faults
    ]
    for kind, t in zip(drawn_faults, fault_threads):
        faults.kinds[kind] += 1
        t.start()
    for t in fault_threads:
        t.join()
    for t in threads:
        t.join(args.op_seconds)
        if t.is_alive():
            ops.notes.append(f"round {number}: an op ran past {args.op_seconds} s")
    load.finish()
    ops.writable_again()
    return drawn_ops, drawn_faults, hit


def run_movers(args) -> dict:
    from faults_movers_check import check_round, settle

    rng = random.Random(args.seed)
    base = Path(tempfile.mkdtemp(prefix="bk-faults-movers-", dir=args.dir))
    cluster = MoversCluster(base, args.bookies)
    book = Book()
    bkctl = Bkctl(cluster, args.command_timeout, base / "bkctl.log")
    ops = Ops(cluster, book, bkctl, base / "archive", args.attempts)
    faults = Faults(cluster, bkctl)
    load = None
    load_rng = random.Random(rng.randrange(1 << 30))
    totals = Counter()
    report: dict = {"seed": args.seed, "rounds": 0, "findings": {}, "notes": [], "warnings": []}
    findings: dict[str, list[str]] = {
        k: [] for k in ("lost", "duplicated", "copies_short", "ensemble_twice", "left_behind")
    }
    started = time.monotonic()
    try:
        cluster.start()
        load = Load(cluster.uri, book, args.seed, load_rng)
        for number in range(1, args.rounds + 1):
            if args.minutes and time.monotonic() - started > args.minutes * 60:
                report["warnings"].append(f"stopped after {number - 1} rounds: --minutes {args.minutes} spent")
                break
            round_started = time.monotonic()
            moved_before = ops.moves["moved"]
            rrng = random.Random(rng.randrange(1 << 30))
            ops.notes = []
            drawn_ops, drawn_faults, hit = run_round(number, rrng, cluster, book, bkctl, ops, faults, load, args)
            if not cluster.wait_healthy(120):
                report["warnings"].append(f"round {number}: the cluster was not healthy 120 s after its faults")
            marks = settle(cluster.uri)
            if marks:
                report["warnings"].append(f"round {number}: {marks} ledgers still marked under-replicated after 90 s")
            f = check_round(cluster.uri, book, args.seed, payload, origin_of, PASSWORD, CLIENT_OPTIONS)
            report["rounds"] = number
            totals["entries_checked"] += f.entries_checked
            totals["replicas_checked"] += f.replicas_checked
            totals["ledgers_checked"] += f.ledgers_checked
            for key in findings:
                findings[key] += [f"round {number}: {x}" for x in getattr(f, key)]
            report["notes"] += [f"round {number}: {n}" for n in ops.notes + f.notes + load.errors[:3]]
            load.errors.clear()
            if not args.json:
                print(
                    f"round {number:3d}: {'+'.join(drawn_ops):26s} under {'+'.join(drawn_faults):24s}"
                    f" ledgers {f.ledgers_checked:3d} entries {f.entries_checked:6d} copies {f.replicas_checked:6d}"
                    f" moved {ops.moves['moved'] - moved_before:4d} findings {f.failures()} ({time.monotonic() - round_started:.0f} s)"
                    f"  [{'; '.join(hit)}]",
                    flush=True,
                )
                for line in (ops.notes + f.notes)[:6]:
                    print(f"           note: {line}", flush=True)
                for key in findings:
                    for x in getattr(f, key)[:5]:
                        print(f"           {key}: {x}", flush=True)
    except (KeyboardInterrupt, SystemExit) as e:  # Ctrl-C, SIGTERM: the rounds run so far are reported
        report["harness_error"] = f"interrupted after {report['rounds']} rounds ({type(e).__name__})"
    except Exception as e:  # noqa: BLE001 - the harness itself failed: the rounds run so far are reported
        import traceback

        report["harness_error"] = f"after {report['rounds']} rounds: {type(e).__name__}: {str(e)[:300]}"
        traceback.print_exc()
    finally:
        if load is not None:
            load.stop.set()
        cluster.stop()
        report.update(
            {
                "moves": dict(ops.moves),
                "bkctl_runs": dict(ops.runs),
                "faults": dict(sorted(faults.kinds.items())),
                "kills": {
                    "bookies": faults.bookie_kills,
                    "bkctl": bkctl.kills,
                    "autorecovery_daemon": faults.daemon_kills,
                    "bkctl_timeouts": bkctl.timeouts,
                },
                "failed_restarts": cluster.failed_starts,
                "ledgers_deleted": load.deleted if load is not None else 0,
                "restored_ledgers": len(book.restores),
                **totals,
                "findings": findings,
                "seconds": round(time.monotonic() - started, 1),
                "load_average": [round(x, 2) for x in os.getloadavg()],
            }
        )
        if args.keep:
            report["dir"] = str(base)
        else:
            shutil.rmtree(base, ignore_errors=True)
    return report


def parse_args(argv):
    import argparse

    parser = argparse.ArgumentParser(
        prog="faults.py --movers", description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=None, help="replay a run (default: random)")
    parser.add_argument("--minutes", type=float, default=None, help="start no round after this many minutes")
    parser.add_argument("--bookies", type=int, default=BOOKIES)
    parser.add_argument(
        "--ops", type=lambda v: v.split(","), default=list(OPS), metavar="OP,...", help=f"from {', '.join(OPS)}"
    )
    parser.add_argument(
        "--faults",
        type=lambda v: v.split(","),
        default=list(FAULTS),
        metavar="KIND,...",
        help=f"from {', '.join(FAULTS)}",
    )
    parser.add_argument("--attempts", type=int, default=8, help="runs of one op's command before it is given up")
    parser.add_argument("--command-timeout", type=float, default=180, help="a bkctl run is SIGKILLed after this")
    parser.add_argument("--op-seconds", type=float, default=600, help="how long a round waits for its ops")
    parser.add_argument("--dir", default=None, help="where the cluster goes (default: the temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the directory (logs, bkctl.log)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON only")
    args = parser.parse_args(argv)
    for name, allowed in (("ops", OPS), ("faults", FAULTS)):
        unknown = set(getattr(args, name)) - set(allowed)
        if unknown:
            parser.error(f"--{name}: unknown {', '.join(sorted(unknown))}")
    if args.seed is None:
        args.seed = random.randrange(1 << 31)
    return args


def main(argv=None) -> int:
    import logging

    logging.basicConfig(level=logging.CRITICAL)  # kazoo's reconnect warnings are the faults at work
    args = parse_args(argv)

    def terminate(signum, _frame):  # SIGTERM (a timeout, a cancelled job): stop what was started, by pid
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    report = run_movers(args)
    found = report["findings"]
    bad = sum(len(v) for v in found.values())
    if args.json:
        print(json.dumps(report))
    else:
        print(
            f"\nseed {report['seed']}: {report['rounds']} rounds in {report['seconds']} s"
            f" (load average {' '.join(map(str, report['load_average']))})"
        )
        print(f"moves: {', '.join(f'{k} {v}' for k, v in sorted(report['moves'].items())) or 'none'}")
        print(f"bkctl runs: {', '.join(f'{k} {v}' for k, v in sorted(report['bkctl_runs'].items()))}")
        print(f"faults: {', '.join(f'{k} {v}' for k, v in report['faults'].items())}")
        kills = report["kills"]
        print(
            f"kills: bookies {kills['bookies']}, bkctl {kills['bkctl']}, autorecovery daemon"
            f" {kills['autorecovery_daemon']} (and {kills['bkctl_timeouts']} bkctl past"
            f" --command-timeout); failed bookie restarts {report['failed_restarts']}"
        )
        print(
            f"ledgers checked {report.get('ledgers_checked', 0)}, entries checked {report.get('entries_checked', 0)},"
            f" copies read {report.get('replicas_checked', 0)}, restored {report['restored_ledgers']},"
            f" deleted {report['ledgers_deleted']}"
        )
        print(
            f"lost {len(found['lost'])}, duplicated {len(found['duplicated'])}, copies short"
            f" {len(found['copies_short'])}, ensembles naming a bookie twice {len(found['ensemble_twice'])},"
            f" left behind {len(found['left_behind'])}"
        )
        for key, items in found.items():
            for x in items[:20]:
                print(f"  {key}: {x}")
        for n in report["notes"][:40]:
            print(f"note: {n}")
        for w in report["warnings"]:
            print(f"warning: {w}")
        if report.get("harness_error"):
            print(f"harness error (the run stopped): {report['harness_error']}")
        if bad:
            print(
                f"FAILED -- replay with: python bench/faults.py --movers --seed {report['seed']} --rounds {report['rounds']}"
            )
    return 1 if bad else 2 if report.get("harness_error") else 0


if __name__ == "__main__":
    sys.exit(main())
