#!/usr/bin/env python3
"""What the machine alone does to a live writer's add latency: the floor under
bench_autorecovery's "live-add p99 during / idle".

Prints figures, asserts nothing. Usage::

    .venv/bin/python bench/bench_latency_floor.py [--burners 4] [--cpu 0.7] [--bursts-ms 0.5,2]
        [--seconds 20] [--probe-rate 200]

A sandbox of 5 bookieds (no autorecovery, no repair) and bench_autorecovery's
live-add probe (a ledger E3/Qw2/Qa2, 100 B adds at ``--probe-rate`` from a
process of its own): its add latency is taken idle, then while ``--burners``
processes that are not bookie work at all burn ``--cpu`` cores between them,
in bursts of each ``--bursts-ms`` with sleeps in between, then idle again.
Set ``--cpu`` to what the repair costs (bench_autorecovery prints the survivors'
CPU per entry copied and the entries per second: their product).

Why: on a small machine the repair's figure is mostly a scheduling figure.
Whether the waiting adds come from the bookies or from sharing the cores shows
here: the same CPU taken by plain burners raises the p99 about as much, and how
long each process runs before it sleeps (its burst) matters more than the total.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_autorecovery import LatencyProbe, latency_note  # noqa: E402
from common import load_note, pct, section  # noqa: E402


def _burn(share: float, burst: float, stop) -> None:
    """Busy for ``burst`` seconds, then asleep for as long as keeps this process at ``share`` of a core."""
    pause = burst * (1.0 - share) / share
    while not stop.is_set():
        end = time.perf_counter() + burst
        while time.perf_counter() < end:
            pass
        time.sleep(pause)


def _window(probe: LatencyProbe, seconds: float) -> list[float]:
    probe.window()
    time.sleep(seconds)
    return probe.window()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--burners", type=int, default=4, help="processes burning CPU (default 4)")
    parser.add_argument("--cpu", type=float, default=0.7, help="cores the burners take between them (default 0.7)")
    parser.add_argument("--bursts-ms", default="0.5,2", help="burst lengths to try, ms (default 0.5,2)")
    parser.add_argument("--seconds", type=float, default=20, help="length of each window (default 20)")
    parser.add_argument("--probe-rate", type=float, default=200, help="live adds per second (default 200)")
    args = parser.parse_args()
    share = args.cpu / args.burners
    if not 0 < share < 1:
        parser.error("--cpu / --burners must be a share of one core, between 0 and 1")
    from bkctl.sandbox.cluster import sandbox_down, sandbox_up

    section(
        f"live-add latency floor: {args.burners} burners taking {args.cpu:g} cores, "
        f"5 bookieds, {args.probe_rate:g} adds/s"
    )
    tmp = tempfile.mkdtemp(prefix="bench-floor-")
    state = sandbox_up(tmp, bookies=5)
    probe = None
    try:
        probe = LatencyProbe(state["uri"], args.probe_rate, avoid="")
        time.sleep(5)  # the probe's first adds open its connections
        for burst_ms in [float(b) for b in args.bursts_ms.split(",")]:
            idle = _window(probe, args.seconds)
            stop = multiprocessing.Event()
            burners = [
                multiprocessing.Process(target=_burn, args=(share, burst_ms / 1000.0, stop), daemon=True)
                for _ in range(args.burners)
            ]
            for b in burners:
                b.start()
            try:
                busy = _window(probe, args.seconds)
                note = load_note()
            finally:
                stop.set()
                for b in burners:
                    b.join(10)
            print(
                f"  bursts of {burst_ms:g} ms: idle {latency_note(idle)}; burning {latency_note(busy)}; "
                f"p99 ratio {pct(busy, 0.99) / pct(idle, 0.99):.2f}x  ({note})",
                flush=True,
            )
    finally:
        if probe is not None:
            probe.close()
        sandbox_down(tmp, purge=True)


if __name__ == "__main__":
    main()
