"""How much CPU one-shot ``bkctl`` commands cost, start-up (imports) included.

    python bench/bench_cli_start.py [-m METADATA_URI] [--runs 9]

Prints figures and asserts nothing.  Without ``-m`` it starts a sandbox (a
ZooKeeper and three bookies) in a temporary directory and stops it at the end.

Each command runs ``--runs`` times as the test suite runs it (a fresh
``python -m bkctl`` on this source tree, stdin not a terminal); the figure is
the CPU (user + system) the child used, from ``getrusage(RUSAGE_CHILDREN)``
around each run, so a loaded machine changes it less than wall time.  The
commands: ``--help`` (the whole command tree), the ZooKeeper-only ``ledger
list``, ``bookie list`` and ``cluster info``, and ``ledger create``, ``ledger
add`` and ``ledger read``, which talk to the bookies.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import load_note, section  # noqa: E402

BKCTL = [sys.executable, "-m", "bkctl"]
_ENV = dict(
    os.environ, NO_COLOR="1", PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
)


def run(uri: str | None, *args: str) -> tuple[float, float, str]:
    """CPU seconds (user + system) and wall seconds of one ``bkctl ARGS``, and its stdout."""
    env = dict(_ENV)
    if uri:
        env["BKCTL_METADATA_URI"] = uri
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([*BKCTL, *args], env=env, cwd=ROOT, input="", capture_output=True, text=True, timeout=120)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"bkctl {' '.join(args)}: exit {done.returncode}\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, done.stdout


def report(label: str, samples: list[tuple[float, float]]) -> None:
    cpu = [c * 1000 for c, _ in samples]
    wall = [w * 1000 for _, w in samples]
    print(
        f"{label:<22} CPU median {statistics.median(cpu):6.0f} ms  (min {min(cpu):4.0f}, max {max(cpu):4.0f})"
        f"   wall median {statistics.median(wall):6.0f} ms",
        flush=True,
    )


def bench(uri: str, runs: int) -> None:
    print(load_note())
    section(f"CPU per process, {runs} runs each")
    for args in (["--help"], ["ledger", "list"], ["bookie", "list"], ["cluster", "info"]):
        report(" ".join(args), [run(uri, *args)[:2] for _ in range(runs)])
    creates, adds, reads = [], [], []
    for _ in range(runs):
        cpu, wall, out = run(uri, "ledger", "create")
        creates.append((cpu, wall))
        ledger_id = out.strip()
        adds.append(run(uri, "ledger", "add", ledger_id, "hello", "world")[:2])
        reads.append(run(uri, "ledger", "read", ledger_id)[:2])
    report("ledger create", creates)
    report("ledger add (2 entries)", adds)
    report("ledger read", reads)
    print(load_note())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-m", "--metadata-uri", help="a running cluster (default: a sandbox of 3 bookies)")
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    if args.metadata_uri:
        bench(args.metadata_uri, args.runs)
        return
    with tempfile.TemporaryDirectory(prefix="bench-cli-start-") as tmp:
        sandbox = str(Path(tmp) / "sandbox")
        _, _, out = run(None, "sandbox", "up", "--bookies", "3", "--dir", sandbox)
        uri = re.search(r"^metadata URI: (\S+)$", out, re.M).group(1)
        try:
            bench(uri, args.runs)
        finally:
            run(None, "sandbox", "down", "--dir", sandbox)


if __name__ == "__main__":
    main()
