"""How the movers' campaign (``bench/faults_movers.py``) hurts the cluster while its bkctl commands
run: bookies a move copies from or to SIGKILLed, bkctl (or the autorecovery worker) SIGKILLed,
ZooKeeper paused, links to ZooKeeper cut.  A module of its own: the faults know the cluster's
processes and proxies, not the movers nor the checks.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter

from tests.support.bookieproc import BookieProcess
from tests.support.tcp_proxy import BLACKHOLE, RESET, TcpProxy

FAULTS = ("kill-source", "kill-target", "kill-bkctl", "zk-pause", "cut-bkctl-zk", "cut-bookie-zk")
#: bkctl's ZooKeeper session (``--timeout``) and the bookies' (zkTimeout), in seconds: a pause or a
#: cut lasts longer, so that the sessions expire
BKCTL_SESSION = 4.0
BOOKIE_SESSION = 4.0


class Faults:
    """``cluster``: the campaign's MoversCluster (its bookies, proxies, ZooKeeper, autorecovery daemon);
    ``bkctl``: its Bkctl runner (the commands running, the bookies their moves name)."""

    def __init__(self, cluster, bkctl):
        self.cluster, self.bkctl = cluster, bkctl
        self.kinds = Counter()
        self.bookie_kills = 0
        self.daemon_kills = 0

    def _involved(self, names: set[str], rng: random.Random, wait: float = 5.0) -> BookieProcess:
        """A bookie a running move names (``names``: sources or targets), waited for a while; else any."""
        deadline = time.monotonic() + wait
        ids = {b.bookie_id for b in self.cluster.bookies} - self.cluster.retiring  # a decommission's is stopped
        while time.monotonic() < deadline:
            found = sorted(set(names) & ids)
            if found:
                return self.cluster.bookie(rng.choice(found))
            time.sleep(0.1)
        return self.cluster.bookie(rng.choice(sorted(ids)))

    def _kill_bookie(self, b: BookieProcess, rng: random.Random) -> None:
        self.cluster.held_down.add(b.bookie_id)
        try:
            b.kill(signal.SIGKILL)
            self.bookie_kills += 1
            time.sleep(rng.uniform(0.3, 2.0))
            self.cluster.start_bookie(b)
        finally:
            self.cluster.held_down.discard(b.bookie_id)

    def kill_source(self, rng: random.Random) -> str:
        b = self._involved(self.bkctl.sources, rng)
        self._kill_bookie(b, rng)
        return b.bookie_id

    def kill_target(self, rng: random.Random) -> str:
        b = self._involved(self.bkctl.targets, rng)
        self._kill_bookie(b, rng)
        return b.bookie_id

    def kill_bkctl(self, rng: random.Random) -> str:
        """SIGKILL a running mover's bkctl (the op reruns it), or one time in four the autorecovery
        worker mid-repair (the supervisor starts it again)."""
        daemon = self.cluster.daemon
        if rng.random() < 0.25 and daemon is not None and daemon.poll() is None:
            os.kill(daemon.pid, signal.SIGKILL)
            self.daemon_kills += 1
            return "autorecovery daemon"
        # mid-move: a command that moves or writes ledgers (a restore's comes after its backup),
        # some time after it started; else whatever runs
        prefer = ("rebalance", "drain", "restore")
        deadline = time.monotonic() + 12
        while time.monotonic() < deadline and not (self.bkctl.running_commands() & set(prefer)):
            time.sleep(0.1)
        time.sleep(rng.uniform(0.0, 2.5))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            killed = self.bkctl.kill_one(rng, prefer)
            if killed:
                return f"bkctl {killed}"
            time.sleep(0.1)
        return "bkctl (none running)"

    def zk_pause(self, rng: random.Random) -> str:
        pid = self.cluster.zk.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(BKCTL_SESSION * 1.5 + rng.uniform(0, 1.5))
        finally:
            os.kill(pid, signal.SIGCONT)
        return "zookeeper"

    def _cut(self, proxy: TcpProxy, session: float, rng: random.Random) -> str:
        mode = rng.choice((BLACKHOLE, RESET))
        proxy.cut(mode)
        try:
            time.sleep(session * 1.5 + rng.uniform(0, 1.5))
        finally:
            proxy.restore()
        return mode

    def cut_bkctl_zk(self, rng: random.Random) -> str:
        return f"bkctl-zk {self._cut(self.cluster.bkctl_proxy, BKCTL_SESSION, rng)}"

    def cut_bookie_zk(self, rng: random.Random) -> str:
        b = self._involved(self.bkctl.sources | self.bkctl.targets, rng, wait=3.0)
        return f"{b.bookie_id}-zk {self._cut(self.cluster.bookie_proxies[b.bookie_id], BOOKIE_SESSION, rng)}"


FAULT_FUNCS = {
    "kill-source": Faults.kill_source,
    "kill-target": Faults.kill_target,
    "kill-bkctl": Faults.kill_bkctl,
    "zk-pause": Faults.zk_pause,
    "cut-bkctl-zk": Faults.cut_bkctl_zk,
    "cut-bookie-zk": Faults.cut_bookie_zk,
}
